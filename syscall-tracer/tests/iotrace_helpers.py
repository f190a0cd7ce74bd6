"""What the tests of hw-iotrace share: the program with a known sequence of I/O calls (its calls,
as the parent and the child make them), the tools, and the checks of a recorded syscalls.tsv
against it (descriptions, stamps)."""

from __future__ import annotations

import errno
import re
import subprocess
import time
from pathlib import Path

import pandas as pd

from hostwire.paths import REPO_ROOT
from hostwire.read.syscalls import read_counters, read_syscalls


TIMEOUT = 60
EAGAIN, EBADF = -errno.EAGAIN, -errno.EBADF

# (call, fd, req_bytes, result, fd_kind) of the parent between the markers, then of the child
KNOWN_PARENT = [
    ("read", -1, 12345, EBADF, "unknown"),
    ("write", 4, 5000, 4096, "pipe"),  # short write into a one-page pipe
    ("write", 4, 10, EAGAIN, "pipe"),
    ("read", 3, 8192, 4096, "pipe"),
    ("close", 3, -1, 0, "pipe"),
    ("close", 4, -1, 0, "pipe"),
    # socket names the descriptor it made; req_bytes: made close-on-exec (1) or not (0)
    ("socket", 3, 0, 3, "tcp"),
    ("socket", 4, 0, 4, "tcp"),
    ("connect", 4, -1, 0, "tcp"),
    ("accept", 3, 0, 5, "tcp"),
    ("write", 4, 5, 5, "tcp"),
    ("recvfrom", 5, 5, 5, "tcp"),
    ("sendto", 5, 6, 6, "tcp"),
    ("recvfrom", 4, 6, 6, "tcp"),
    ("writev", 4, 7, 7, "tcp"),
    ("readv", 5, 7, 7, "tcp"),
    ("sendmsg", 4, 9, 9, "tcp"),
    ("recvmsg", 5, 9, 9, "tcp"),
    ("read", 4, 10, EAGAIN, "tcp"),
    ("accept4", 3, 1, EAGAIN, "tcp"),  # SOCK_CLOEXEC
    ("fcntl_setfd", 4, 1, 0, "tcp"),  # F_SETFD FD_CLOEXEC
    ("ioctl", 4, 0, 0, "tcp"),  # FIONCLEX (the TIOCGWINSZ before it is no record)
    ("pwrite64", 6, 100, 100, "file"),
    ("pread64", 6, 50, 50, "file"),
    ("sendfile", 4, 100, 100, "tcp"),
    ("recvfrom", 5, 100, 100, "tcp"),
    ("write", 8, 20, 20, "pipe"),
    ("splice", 6, 20, 20, "file"),
    ("socket", 9, 0, 9, "udp"),
    ("socket", 10, 0, 10, "udp"),
    ("connect", 10, -1, 0, "udp"),
    ("sendmmsg", 10, 7, 2, "udp"),
    ("recvfrom", 9, 100, 3, "udp"),
    ("recvfrom", 9, 100, 4, "udp"),
    ("read", 7, 5, 5, "pipe"),
    *[("close", fd, -1, 0, kind) for fd, kind in
      [(10, "udp"), (9, "udp"), (8, "pipe"), (7, "pipe"), (6, "file"), (5, "tcp"), (4, "tcp"), (3, "tcp")]],
    ("read", -1, 54321, EBADF, "unknown"),
]
KNOWN_CHILD = [("write", 8, 5, 5, "pipe")]
CALLS = ("read,write,readv,writev,pread64,pwrite64,sendto,sendmsg,sendmmsg,recvfrom,recvmsg,sendfile,splice,connect,accept,"
         "accept4,close,socket,dup,dup2,dup3,fcntl,close_range,pwritev,pwritev2,vmsplice,tee,"
         "fcntl_setfd,ioctl,recvmmsg,scm_rights")
# the system calls among them (fcntl_setfd is an fcntl, scm_rights what a recvmsg received), as strace names them
STRACE_CALLS = CALLS.replace(",fcntl_setfd", "").replace(",scm_rights", "")
# what hw-schedtrace -s records: the system calls of hw-iotrace's default set but recvmmsg (a wait call)
TRACEFS_CALLS = STRACE_CALLS.replace(",recvmmsg", "")


def tools(build_dir: Path) -> tuple[Path, Path]:
    """hw-iotrace of the build under test, and the known-I/O program of the plain build when there
    is one (LeakSanitizer cannot run in a traced program)."""
    plain = REPO_ROOT / "build" / "test-progs" / "iotrace-known-io"
    return build_dir / "bin" / "hw-iotrace", plain if plain.exists() else build_dir / "test-progs" / "iotrace-known-io"


def run_known(build_dir: Path, tmp_path: Path, *args: str) -> tuple[pd.DataFrame, dict, str]:
    hw_iotrace, prog = tools(build_dir)
    out = tmp_path / "syscalls.tsv"
    proc = subprocess.run([hw_iotrace, "-o", out, *args, "--", prog, tmp_path], capture_output=True, text=True,
                          timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    return read_syscalls(out), read_counters(out), proc.stdout


def between_markers(df: pd.DataFrame, from_start: bool = True) -> pd.DataFrame:
    """The calls between the two markers (from the start of the trace when not from_start), and the
    child's; the printf after the end marker has a length that varies from run to run."""
    start = df.index[(df.call == "read") & (df.fd == -1) & (df.req_bytes == 12345)][0]
    end = df.index[(df.call == "read") & (df.fd == -1) & (df.req_bytes == 54321)][0]
    main_pid = df.pid[start]
    first = start if from_start else df.index[0]
    return df[((df.index >= first) & (df.index <= end)) | (df.pid != main_pid)]


def per_process(df: pd.DataFrame) -> list[list[tuple]]:
    """Each process's calls as (call, fd, req_bytes, result, fd_kind), processes in order of first call."""
    order = df.groupby("pid", sort=False)["t_enter_ns"].min().sort_values().index
    return [list(zip(g.call, g.fd, g.req_bytes, g.result.astype(int), g.fd_kind.astype(str)))
            for g in (df[df.pid == pid] for pid in order)]


def check_descriptions(df: pd.DataFrame, stdout: str) -> None:
    ports = dict(item.split("=", 1) for item in stdout.split())
    lp, cp, us, uc = (int(ports[k]) for k in ("tcp_listen", "tcp_client", "udp_server", "udp_client"))
    desc = {(r.call, r.fd): r.fd_desc for r in df.itertuples()}
    assert desc[("connect", 4)] == f"127.0.0.1:{cp}>127.0.0.1:{lp}"
    assert desc[("accept", 3)] == f"127.0.0.1:{lp}>*"
    assert desc[("sendto", 5)] == f"127.0.0.1:{lp}>127.0.0.1:{cp}"
    assert desc[("sendmmsg", 10)] == f"127.0.0.1:{uc}>127.0.0.1:{us}"
    assert desc[("recvfrom", 9)] == f"127.0.0.1:{us}>*"
    assert desc[("pwrite64", 6)] == ports["file"]
    assert re.fullmatch(r"pipe:\[\d+\]", desc[("write", 8)])
    assert desc[("read", -1)] == ""


def check_stamps(df: pd.DataFrame) -> None:
    assert (df.t_exit_ns >= df.t_enter_ns).all()
    now = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    assert (df.t_enter_ns > now - 60 * 10**9).all() and (df.t_exit_ns <= now).all()
    parent = df[df.pid == df.pid.iloc[0]]
    assert parent.t_enter_ns.is_monotonic_increasing
