"""A cap on the sender host's CPU time: a cgroup `hw<owner-pid>-<tag>` with a CPU quota, joined by
hw-bench main (and so by its senders and background processes) before it starts; the receiver,
another host, leaves it for the root group. This recreates the 1997 regime, where the sender's CPU
and not the wire limited the traffic, on a host whose CPU is far faster than the link.

cgroup v2 (`cpu.max`) where the unified hierarchy has the cpu controller, else cgroup v1's cpu
controller (`cpu.cfs_quota_us`, `cpu.cfs_period_us`). The group is removed when the run ends;
`hostwire doctor --cleanup` removes the groups of runners that were killed."""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hostwire.errors import HostwireError

log = logging.getLogger(__name__)

PERIOD_US = 100_000
NAME_PREFIX = "hw"
NAME_PATTERN = re.compile(rf"{NAME_PREFIX}(\d+)-[A-Za-z0-9]+")
V2_ROOT = Path("/sys/fs/cgroup")
V1_ROOT = Path("/sys/fs/cgroup/cpu")


def cpu_hierarchy() -> tuple[Path, int] | None:
    """(root directory, cgroup version) of the hierarchy with the cpu controller, or None."""
    controllers = V2_ROOT / "cgroup.controllers"
    if controllers.exists() and "cpu" in controllers.read_text().split():
        return V2_ROOT, 2
    if (V1_ROOT / "cpu.cfs_quota_us").exists():
        return V1_ROOT, 1
    return None


def _procs_file(directory: Path) -> Path:
    return directory / "cgroup.procs"


@dataclass
class CpuLimit:
    """Context manager: the group exists inside the `with`, and is removed after it."""

    share: float  # CPUs' worth of time per period: 0.25 = a quarter of one CPU
    tag: str
    owner_pid: int = field(default_factory=os.getpid)
    directory: Path | None = None
    root: Path | None = None
    join_fd: int | None = None   # the group's cgroup.procs, open for writing
    leave_fd: int | None = None  # the root group's

    @property
    def name(self) -> str:
        return f"{NAME_PREFIX}{self.owner_pid}-{self.tag}"

    def __enter__(self) -> "CpuLimit":
        found = cpu_hierarchy()
        if found is None:
            raise HostwireError("sender_cpu_share needs the cgroup cpu controller (v2 cpu.max or v1 "
                                "cpu.cfs_quota_us); this machine has neither")
        self.root, version = found
        self.directory = self.root / self.name
        quota = max(1000, int(round(self.share * PERIOD_US)))
        try:
            self.directory.mkdir()
            if version == 2:
                (self.directory / "cpu.max").write_text(f"{quota} {PERIOD_US}\n")
            else:
                (self.directory / "cpu.cfs_period_us").write_text(f"{PERIOD_US}\n")
                (self.directory / "cpu.cfs_quota_us").write_text(f"{quota}\n")
            # Opened here and inherited: the commands that join or leave run inside `ip netns exec`,
            # whose private /sys has no cgroup file system to name; they open the inherited file
            # again through /proc/self/fd (sh's >&N takes one digit only).
            self.join_fd = os.open(_procs_file(self.directory), os.O_WRONLY)
            self.leave_fd = os.open(_procs_file(self.root), os.O_WRONLY)
        except OSError as err:
            self.__exit__()
            raise HostwireError(f"failed to set up the CPU cap {self.directory}: {err.strerror or err}") from None
        log.debug("cgroup %s: %d us of CPU per %d us", self.directory, quota, PERIOD_US)
        return self

    @property
    def pass_fds(self) -> tuple[int, ...]:
        """The descriptors the command line's prefixes write to: keep them open in the child."""
        return tuple(fd for fd in (self.join_fd, self.leave_fd) if fd is not None)

    def join_prefix(self) -> list[str]:
        """The argv prefix that moves a command into the group, then runs it (same pid)."""
        assert self.join_fd is not None
        return ["sh", "-c", f'echo $$ > /proc/self/fd/{self.join_fd} && exec "$@"', "hw-cpu-cap"]

    def leave_prefix(self) -> list[str]:
        """The argv prefix that moves a command back to the root group (the receiver host)."""
        assert self.leave_fd is not None
        return ["sh", "-c", f'echo $$ > /proc/self/fd/{self.leave_fd} && exec "$@"', "hw-cpu-uncap"]

    def stats(self) -> dict[str, Any]:
        """The group's cpu.stat (periods, throttled periods, throttled time; v2 adds usage), with
        the share asked for: whether and how much the cap held the sender host back."""
        out: dict[str, Any] = {"share": self.share, "period_us": PERIOD_US, "group": self.name}
        try:
            text = (self.directory / "cpu.stat").read_text() if self.directory is not None else ""
        except OSError:
            return out
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if value.strip().isdigit():
                out[key] = int(value)
        return out

    def __exit__(self, *exc: object) -> None:
        for fd in self.pass_fds:
            os.close(fd)
        self.join_fd = self.leave_fd = None
        if self.directory is not None:
            remove_group(self.directory)


def remove_group(directory: Path, wait_s: float = 5.0) -> bool:
    """Removes a group once its processes are gone (they end with the run's benchmark)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            directory.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError:
            if time.monotonic() > deadline:
                log.warning("could not remove %s: processes still in it", directory)
                return False
            time.sleep(0.05)


def stale_groups(alive: Callable[[int], bool]) -> list[Path]:
    """Groups of this naming whose owner is gone."""
    found = cpu_hierarchy()
    if found is None:
        return []
    out = []
    for path in found[0].iterdir():
        match = NAME_PATTERN.fullmatch(path.name)
        if match and path.is_dir() and not alive(int(match.group(1))):
            out.append(path)
    return out
