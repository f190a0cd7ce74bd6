"""The anonymous memory of a process tree, sampled from /proc: the one measure of memory that the
benchmarks (perf/bench_scale.py) and the soak (perf/soak.py) use.

A process's anonymous memory is RssAnon + RssShmem of /proc/PID/status: its heap and private
mappings, and the shared memory it maps (tmpfs files, SysV and POSIX shared memory). The page
cache and file-backed mappings (RssFile) are not counted: they are the kernel's to drop. A tree is
a process and every descendant alive at the sampling moment (found through the PPid of each
/proc entry), workers and tools included."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field


def _status(pid: int) -> dict[str, str]:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as handle:
            return dict(line.rstrip("\n").split(":\t", 1) for line in handle if ":\t" in line)
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return {}


def anon_bytes(pid: int) -> int:
    """RssAnon + RssShmem of one process in bytes (0 once it is gone; a kernel thread has none)."""
    fields = _status(pid)
    total = 0
    for key in ("RssAnon", "RssShmem"):
        value = fields.get(key, "0 kB").split()
        total += int(value[0]) * 1024 if value else 0
    return total


def _parents() -> dict[int, int]:
    out: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as handle:
                stat = handle.read()
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        # the command name may hold spaces and parentheses: the fields after its last ')'
        rest = stat[stat.rfind(b")") + 2:].split()
        out[int(entry.name)] = int(rest[1])
    return out


def tree(root: int) -> list[int]:
    """root and its descendants alive now."""
    children: dict[int, list[int]] = {}
    for pid, ppid in _parents().items():
        children.setdefault(ppid, []).append(pid)
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def command_name(pid: int) -> str:
    """The process's command name (/proc/PID/comm), "" once it is gone."""
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as handle:
            return handle.read().strip()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return ""


def tree_processes(root: int) -> list[tuple[int, str, int]]:
    """(pid, command name, anonymous bytes) of root and each descendant alive now."""
    return [(pid, command_name(pid), anon_bytes(pid)) for pid in tree(root)]


def tree_anon_bytes(roots: int | Iterable[int]) -> int:
    """Anonymous memory of the trees of these roots, each process counted once."""
    pids: set[int] = set()
    for root in ([roots] if isinstance(roots, int) else roots):
        pids.update(tree(root))
    return sum(anon_bytes(pid) for pid in pids)


@dataclass
class Sampler:
    """Samples tree_anon_bytes(roots) every `interval_s` on a thread: `peak` and `samples`
    ((seconds since start, bytes) pairs). Use as a context manager."""

    roots: list[int]
    interval_s: float = 0.05
    samples: list[tuple[float, int]] = field(default_factory=list)
    peak: int = 0

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="procmem", daemon=True)
        self._t0 = time.monotonic()

    def _loop(self) -> None:
        while True:
            self.sample()
            if self._stop.wait(self.interval_s):
                return

    def sample(self) -> int:
        value = tree_anon_bytes(self.roots)
        self.samples.append((time.monotonic() - self._t0, value))
        self.peak = max(self.peak, value)
        return value

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
