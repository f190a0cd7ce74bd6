"""hw-schedtrace --waits on the live kernel: the calls a program blocks in between its I/O
(clock_nanosleep, wait4, futex, epoll_wait, ...) recorded beside the I/O calls, with their
lengths, for the command and the children it forks; none of them without it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hostwire.read.sched import read_sched_json
from hostwire.read.syscalls import read_syscalls
from hostwire.read.tsv import read_header

TIMEOUT = 60
TRACEFS = Path("/sys/kernel/tracing")
TAG = f"pw{os.getpid()}"  # this file's instances: hw-<pid>-<TAG>, hw-<pid>-<TAG>-sys
IO_CALLS = ["read", "write", "readv", "writev", "pread64", "pwrite64", "sendto", "sendmsg", "sendmmsg", "recvfrom",
            "recvmsg", "sendfile", "splice", "connect", "accept", "accept4", "close", "socket", "dup", "dup2", "dup3",
            "fcntl", "close_range", "pwritev", "pwritev2", "vmsplice", "tee", "ioctl"]
# three sleeps of 30 ms, then a child that sleeps 40 ms while the parent waits for it
PROGRAM = ("import os, time\nfor _ in range(3): time.sleep(0.03)\npid = os.fork()\n"
           "if pid == 0:\n    time.sleep(0.04); os._exit(0)\nos.waitpid(pid, 0)\n")


def tool(build_dir: Path) -> str:
    return str(build_dir / "bin" / "hw-schedtrace")


def run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)


def ours() -> list[str]:
    return [p.name for p in (TRACEFS / "instances").glob(f"hw-*-{TAG}*")] if TRACEFS.is_dir() else []


@pytest.mark.sanitized
def test_waits_needs_syscalls(build_dir: Path) -> None:
    res = run([tool(build_dir), "--waits"])
    assert res.returncode == 2
    assert res.stderr.strip() == ("hw-schedtrace: failed to parse --waits: it adds system calls, give --syscalls too "
                                  "(see 'hw-schedtrace --help')")


@pytest.mark.privileged("tracefs")
@pytest.mark.sanitized
def test_waits_records_the_calls_a_program_blocks_in(build_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "raw"
    res = run([tool(build_dir), "--name", TAG, "-o", str(out), "-s", "-w", "--", sys.executable, "-c", PROGRAM])
    assert res.returncode == 0, res.stderr
    meta, _, _ = read_header(out / "syscalls.tsv")
    named = meta["calls"].split(",")
    assert named[:len(IO_CALLS)] == IO_CALLS  # the I/O calls first, as without --waits
    assert {"futex", "epoll_wait", "clock_nanosleep", "wait4", "poll", "nanosleep"} <= set(named[len(IO_CALLS):])
    calls = read_syscalls(out / "syscalls.tsv")
    parent = int(read_sched_json(out / "sched.json")["command"]["pid"])
    mine = calls[calls["tid"] == parent]
    sleeps = mine[mine["call"] == "clock_nanosleep"]
    assert len(sleeps) == 3, mine
    assert sleeps["dur_ns"].between(30_000_000, 1_000_000_000).all(), sleeps
    waited = mine[mine["call"] == "wait4"]
    assert len(waited) == 1 and int(waited["dur_ns"].iloc[0]) >= 39_000_000, waited
    child = calls[(calls["pid"] != parent) & (calls["call"] == "clock_nanosleep")]
    assert len(child) == 1 and int(child["dur_ns"].iloc[0]) >= 40_000_000  # followed across fork
    assert not (calls["unfinished"]).any()
    plain = run([tool(build_dir), "--name", TAG, "-o", str(tmp_path / "plain"), "-s", "--", sys.executable, "-c",
                 PROGRAM])
    assert plain.returncode == 0, plain.stderr
    assert read_header(tmp_path / "plain" / "syscalls.tsv")[0]["calls"].split(",") == IO_CALLS
    assert not read_syscalls(tmp_path / "plain")["call"].isin(["clock_nanosleep", "wait4"]).any()
    assert ours() == []
