"""The analysis window (DESIGN.md section 8): nanosecond bounds on the run's reference clock, both
ends inclusive; on a run the logging window, on a bare capture its first to its last frame. One
value from the command line (--from/--to narrow it, checked here) to every stage that cuts by it."""

from __future__ import annotations

import math
from dataclasses import dataclass

from hostwire.errors import UsageError

# --from/--to beyond this many seconds would overflow the nanosecond clock's 64 bits.
MAX_OFFSET_S = 9.0e9


def offset_problem(seconds: float) -> str | None:
    """Why `seconds` cannot be an offset into a window (--from, --to), or None when it can."""
    if not math.isfinite(seconds) or seconds < 0 or seconds > MAX_OFFSET_S:
        return f"expected a finite number of seconds from 0 to {MAX_OFFSET_S:g} after the window start"
    return None


@dataclass(frozen=True)
class Window:
    start_ns: int
    end_ns: int

    @property
    def length_ns(self) -> int:
        return self.end_ns - self.start_ns

    def describe(self) -> str:
        return f"[{self.start_ns}, {self.end_ns}] ns ({self.length_ns / 1e9:.6f} s)"

    def narrowed(self, from_s: float | None, to_s: float | None) -> Window:
        """The part of this window between from_s and to_s seconds after its start (--from, --to)."""
        start, end = self.start_ns, self.end_ns
        for flag, value in (("--from", from_s), ("--to", to_s)):
            why = None if value is None else offset_problem(value)
            if why is not None:
                raise UsageError(f"{flag} {value}: {why}")
        if from_s is not None:
            start = self.start_ns + int(round(from_s * 1e9))
        if to_s is not None:
            end = min(end, self.start_ns + int(round(to_s * 1e9)))
        if (from_s is not None or to_s is not None) and end <= start:
            raise UsageError(f"empty window: --from/--to leave nothing of {self.describe()}")
        return Window(start, end)


def narrow(default: Window, from_s: float | None, to_s: float | None) -> Window:
    """default.narrowed(from_s, to_s)."""
    return default.narrowed(from_s, to_s)
