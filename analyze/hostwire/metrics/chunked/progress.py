"""Progress of a long chunked analysis on the terminal: the pass, frames (or bytes) read of the input's,
the rate and the time left in the pass, one line rewritten at most twice a second. Only when
stderr is a terminal (or HOSTWIRE_PROGRESS=1); never in a log or a pipe."""

from __future__ import annotations

import os
import sys
import time


class Progress:
    def __init__(self, what: str, interval_s: float = 0.5, unit: str = "M frames", first_pass: int = 1) -> None:
        self.what = what
        self.first_pass = first_pass  # the number of the first pass shown (a pass made earlier elsewhere)
        self.unit = unit  # what a million of the counted things is called: "M frames", "MB"
        self.interval_s = interval_s
        self.enabled = sys.stderr.isatty() or os.environ.get("HOSTWIRE_PROGRESS") == "1"
        self.started = time.monotonic()
        self.pass_started = self.started
        self.passes = 0
        self.shown = 0.0
        self.drawn = False

    def update(self, done: int, total: int) -> None:
        """Called after each chunk: `done` of `total` rows (or bytes) read in the current pass."""
        now = time.monotonic()
        if self.passes == 0:
            self.passes, self.pass_started = self.first_pass, self.started
        if not self.enabled or now - self.shown < self.interval_s:
            if done >= total:
                self._next_pass(now)
            return
        self.shown = now
        elapsed = max(now - self.pass_started, 1e-9)
        rate = done / elapsed
        left = (total - done) / rate if rate > 0 else float("inf")
        sys.stderr.write(f"\rhostwire: {self.what}: pass {self.passes}: {done / 1e6:.1f} of {total / 1e6:.1f} {self.unit}, "
                         f"{rate / 1e6:.2f} {self.unit}/s, {left:.0f} s left in the pass, {now - self.started:.0f} s in all ")
        sys.stderr.flush()
        self.drawn = True
        if done >= total:
            self._next_pass(now)

    def _next_pass(self, now: float) -> None:
        self.passes += 1
        self.pass_started = now

    def close(self) -> None:
        if self.drawn:
            sys.stderr.write("\n")
            sys.stderr.flush()
            self.drawn = False
