"""The resource sampler: /proc/stat read into raw/resources.tsv on a thread of the runner, at a fixed interval
from before the collectors start until after they stop (hostwire.read.resources reads it).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import Any, TextIO

from hostwire.errors import HostwireError
from hostwire.read.resources import COLUMNS, DEFAULT_INTERVAL_S, SYSTEM_FIELDS, parse_proc_stat

log = logging.getLogger(__name__)


class ResourceSampler:
    """Samples /proc/stat into `path` every `interval_s` on a thread of this process, until
    stop(); a sample is taken at the start and at the stop too, so the samples span the run."""

    def __init__(self, path: str | os.PathLike[str], interval_s: float = DEFAULT_INTERVAL_S,
                 proc_stat: str = "/proc/stat") -> None:
        if interval_s <= 0:
            raise ValueError(f"interval_s {interval_s}: expected a positive number of seconds")
        self.path = Path(path)
        self.interval_s = interval_s
        self.interval_ns = round(interval_s * 1e9)
        self.proc_stat = proc_stat
        self.tick_ns = 10**9 // os.sysconf("SC_CLK_TCK")
        self.samples = 0
        self.errors = 0
        self.rows = 0
        self.write_errors = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._out: TextIO | None = None

    def start(self) -> None:
        try:
            self._out = open(self.path, "w", encoding="utf-8")
        except OSError as err:
            raise HostwireError(f"{self.path}: failed to create: {err.strerror}") from None
        self._out.write("# format: hostwire-tsv 2\n# kind: resources\n# source: /proc/stat\n"
                        "# clock: CLOCK_MONOTONIC\n"
                        f"# interval_ns: {self.interval_ns}\n# tick_ns: {self.tick_ns}\n"
                        f"# cpus: {os.cpu_count()}\n" + "\t".join(COLUMNS) + "\n")
        self._sample()
        self._thread = threading.Thread(target=self._loop, name="hostwire-resources", daemon=True)
        self._thread.start()

    def stop(self) -> dict[str, Any]:
        """Stops sampling, takes the last sample, closes the file with its trailer (or, after a
        failed write, a damage mark); returns the manifest entry."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
            self._sample()
        if self._out is not None:
            self._close()
        return {"samples": self.samples, "interval_ns": self.interval_ns, "errors": self.errors}

    def _close(self) -> None:
        """A failed write may have left part of a sample: then the file says so instead of
        claiming to be complete (docs/formats.md, "Completeness")."""
        assert self._out is not None
        if self.write_errors:
            last = f"# damaged: {self.write_errors} sample(s) could not be written whole\n"
        else:
            last = f"# end: records={self.rows} samples={self.samples}\n"
        try:
            self._out.write(last)
            self._out.close()
        except OSError as err:
            self.errors += 1
            log.warning("resources: failed to write %s: %s", self.path, err.strerror)
        self._out = None

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def _sample(self) -> None:
        assert self._out is not None
        t_ns = time.monotonic_ns()
        try:
            text = Path(self.proc_stat).read_text(encoding="ascii")
        except OSError as err:
            self.errors += 1
            log.warning("resources: failed to read %s: %s", self.proc_stat, err.strerror)
            return
        cpus, system = parse_proc_stat(text, self.tick_ns)
        tail = "\t".join(str(system[name]) for name in SYSTEM_FIELDS)
        try:
            self._out.write("".join(f"{t_ns}\t{cpu}\t" + "\t".join(map(str, times)) + f"\t{tail}\n"
                                    for cpu, times in cpus))
            self._out.flush()
        except OSError as err:  # a full disk costs samples, not the run
            self.errors += 1
            self.write_errors += 1
            log.warning("resources: failed to write %s: %s", self.path, err.strerror)
            return
        self.samples += 1
        self.rows += len(cpus)

