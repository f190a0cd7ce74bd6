"""hw-iotrace against ground truth: a program with a known sequence of I/O calls, strace on the
same program, the benchmark's own logs; plus signals, attach, errors and the reader."""

from __future__ import annotations

import errno
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hostwire.errors import InputError
from hostwire.paths import REPO_ROOT
from hostwire.read.syscalls import COLUMNS, read_counters, read_syscalls, send_calls

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


@pytest.mark.privileged("ptrace")
@pytest.mark.sanitized
def test_ptrace_records_the_known_sequence(build_dir: Path, tmp_path: Path) -> None:
    df, counters, stdout = run_known(build_dir, tmp_path)
    assert df.attrs["meta"]["backend"] == "ptrace" and df.attrs["meta"]["mode"] == "seccomp"
    known = between_markers(df)
    assert per_process(known) == [KNOWN_PARENT, KNOWN_CHILD]
    check_descriptions(known, stdout)
    check_stamps(df)
    assert counters["mode"] == "seccomp" and counters["tracees"] == 2
    assert counters["calls_seen"] == counters["records_written"] == len(df)
    assert counters["unfinished"] == 0 and counters["lost"] == 0 and counters["exit_code"] == 0


@pytest.mark.privileged("ptrace")
def test_ptrace_without_seccomp_records_the_same(build_dir: Path, tmp_path: Path) -> None:
    df, counters, stdout = run_known(build_dir, tmp_path, "--no-seccomp")
    assert counters["mode"] == "syscall-stops"
    assert per_process(between_markers(df)) == [KNOWN_PARENT, KNOWN_CHILD]
    check_descriptions(between_markers(df), stdout)


def test_preload_records_the_known_sequence(build_dir: Path, tmp_path: Path) -> None:
    df, counters, stdout = run_known(build_dir, tmp_path, "--preload")
    assert df.attrs["meta"]["backend"] == "preload"
    assert per_process(between_markers(df)) == [KNOWN_PARENT, KNOWN_CHILD]
    check_descriptions(between_markers(df), stdout)
    check_stamps(df)
    assert counters["records_written"] == len(df) and counters["unfinished"] == 0


def test_preload_marks_a_region_the_program_wrote_over(build_dir: Path, tmp_path: Path) -> None:
    """The traced program can write into the region the library shares with hw-iotrace (here through
    its inherited descriptor): hw-iotrace reads it with its own geometry, keeps the records, and
    says in the last line that the file is not whole."""
    out = tmp_path / "d.tsv"
    script = ("cat /etc/hostname >/dev/null; "
              'printf "not a region head, and long enough" | dd of=/proc/self/fd/$HWIOWRAP_FD conv=notrunc status=none')
    proc = subprocess.run([tools(build_dir)[0], "--preload", "-o", out, "--", "sh", "-c", script],
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 1 and "its head was overwritten" in proc.stderr, proc.stderr
    last = out.read_text().splitlines()[-1]
    assert last.startswith("# damaged: failed to read the shared region: its head was overwritten")
    with pytest.raises(InputError, match="the writer marked the file damaged"):
        read_syscalls(out)
    kept = read_syscalls(out, keep_damaged=True)
    assert ((kept.call == "read") & (kept.fd_desc == "/etc/hostname")).any()


@pytest.mark.privileged("ptrace")
def test_selected_calls_only(build_dir: Path, tmp_path: Path) -> None:
    df, _, _ = run_known(build_dir, tmp_path, "-e", "sendto,splice")
    assert per_process(df) == [[("sendto", 5, 6, 6, "tcp"), ("splice", 6, 20, 20, "file")]]
    df, _, _ = run_known(build_dir, tmp_path, "--preload", "-e", "sendmmsg")
    assert per_process(df) == [[("sendmmsg", 10, 7, 2, "udp")]]


# ---- strace on the same program ----

STRACE_LINE = re.compile(r"^(\d+)\s+([\d.]+)\s+(\w+)\((.*)\)\s+=\s+(-?\d+)(?:\s+(E[A-Z0-9]+))?.*<[\d.]+>$")


@pytest.mark.privileged("ptrace")
def test_bench_reference_stops_as_often_as_hw_iotrace(build_dir: Path, tmp_path: Path) -> None:
    """bench_iotrace.py compares hw-iotrace with iotrace-ptrace-floor, which must stop on exactly
    the same calls: the loop's N writes and the one write of its closing printf."""
    loop = build_dir / "test-progs" / "iotrace-write-loop"
    floor = build_dir / "test-progs" / "iotrace-ptrace-floor"
    n = 1000
    for extra in ([], ["--regs"]):
        proc = subprocess.run([floor, *extra, "--", loop, "write", str(n)], capture_output=True, text=True,
                              timeout=TIMEOUT)
        assert proc.returncode == 0, proc.stderr
        assert f"calls={n} " in proc.stdout
        assert re.search(r"exit_stops=(\d+)", proc.stderr).group(1) == str(n + 1)
    out = tmp_path / "loop.tsv"
    proc = subprocess.run([build_dir / "bin" / "hw-iotrace", "-o", out, "-e", "write", "--", loop, "write", str(n)],
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    df = read_syscalls(out)
    assert len(df) == n + 1 and (df["call"] == "write").all()
    assert (df["req_bytes"].iloc[:n] == 1).all() and (df["result"].iloc[:n] == 1).all()
    usage = subprocess.run([floor, "--bogus"], capture_output=True, text=True, timeout=TIMEOUT)
    assert usage.returncode == 2 and usage.stderr.count("\n") == 1


def split_args(text: str) -> list[str]:
    """Top-level arguments of an strace call: commas inside quotes, [], {} do not split."""
    args, depth, quote, cur, i = [], 0, False, [], 0
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\":
                cur.append(text[i:i + 2])
                i += 2
                continue
            quote = c != '"'
        elif c == '"':
            quote = True
        elif c in "[{":
            depth += 1
        elif c in "]}":
            depth -= 1
        elif c == "," and depth == 0:
            args.append("".join(cur).strip())
            cur = []
            i += 1
            continue
        cur.append(c)
        i += 1
    args.append("".join(cur).strip())
    return args


LIFETIME_CALLS = ("socket", "accept", "accept4", "dup", "dup2", "dup3", "fcntl", "close_range", "ioctl")


def lifetime_record(call: str, args: list[str]) -> tuple[int, int] | None:
    """The fd argument and req_bytes of a descriptor's call as hw-iotrace records it (the flag
    close-on-exec of what it made, close_range's last fd), from strace's arguments; None for an
    fcntl that makes nothing and a close_range that only marks close-on-exec."""
    if call == "fcntl":
        if args[1] == "F_SETFD":
            return 0, int("FD_CLOEXEC" in args[2])
        return (0, int(args[1] == "F_DUPFD_CLOEXEC")) if args[1] in ("F_DUPFD", "F_DUPFD_CLOEXEC") else None
    if call == "ioctl":
        return (0, int(args[1] == "FIOCLEX")) if args[1] in ("FIOCLEX", "FIONCLEX") else None
    if call == "close_range":
        return None if "CLOSE_RANGE_CLOEXEC" in args[2] else (0, 4294967295 if args[1] == "~0U" else int(args[1]))
    flags = {"socket": 1, "accept4": 3, "dup3": 2}.get(call)
    return 0, int(flags is not None and "CLOEXEC" in args[flags])


def parse_strace(path: Path) -> pd.DataFrame:
    pending: dict[str, str] = {}
    rows = []
    for line in path.read_text().splitlines():
        m = re.match(r"^(\d+)\s+[\d.]+\s+(.*)<unfinished \.\.\.>$", line)
        if m:
            pending[m.group(1)] = line[: line.rindex("<unfinished")].rstrip()
            continue
        m = re.match(r"^(\d+)\s+[\d.]+\s+<\.\.\. \w+ resumed>(.*)$", line)
        if m:
            line = pending.pop(m.group(1)) + m.group(2)
        m = STRACE_LINE.match(line)
        if not m:
            continue
        pid, t, call, argtext, result, err = m.groups()
        args = split_args(argtext)
        fd_arg, len_arg = {"sendfile": (0, 3), "splice": (2, 4)}.get(call, (0, 2))
        if call in ("readv", "writev", "sendmsg", "recvmsg", "sendmmsg"):
            req = sum(int(x) for x in re.findall(r"iov_len=(\d+)", argtext))
        elif call in ("connect", "close"):
            req = -1
        elif call in LIFETIME_CALLS:
            made = lifetime_record(call, args)
            if made is None:
                continue
            fd_arg, req = made
        else:
            req = int(args[len_arg])
        res = -getattr(errno, err) if err else int(result)
        fd = res if call == "socket" else int(args[fd_arg])
        if call == "fcntl" and args[1] == "F_SETFD":
            call = "fcntl_setfd"  # hw-iotrace's name for it: its result is no descriptor
        rows.append((int(pid), float(t), call, fd, req, res))
    df = pd.DataFrame(rows, columns=["pid", "t", "call", "fd", "req_bytes", "result"])
    return df.assign(t_enter_ns=(df.t * 1e9).astype("int64"))


def strace_reference(prog: Path, tmp_path: Path) -> pd.DataFrame:
    """What strace -f -ttt -T records of the known-I/O program."""
    strace_out = tmp_path / "strace.txt"
    subprocess.run(["strace", "-f", "-ttt", "-T", "-s", "4", "-e", f"trace={STRACE_CALLS}", "-o", strace_out, prog,
                    tmp_path], check=True, capture_output=True, timeout=TIMEOUT)
    ref = parse_strace(strace_out)
    assert len(ref) >= len(KNOWN_PARENT) + len(KNOWN_CHILD)
    return ref


def seqs(df: pd.DataFrame) -> list[list[tuple]]:
    """Each process's (call, fd, req_bytes, result), processes in order of first call."""
    order = df.groupby("pid", sort=False)["t_enter_ns"].min().sort_values().index
    return [list(zip(g.call, g.fd, g.req_bytes, g.result.astype(int))) for g in (df[df.pid == p] for p in order)]


@pytest.mark.privileged("ptrace")
def test_backends_match_strace(build_dir: Path, tmp_path: Path) -> None:
    _, prog = tools(build_dir)
    ref = strace_reference(prog, tmp_path)

    ptrace_df, _, _ = run_known(build_dir, tmp_path)
    # everything from exec on, the dynamic loader's reads included
    assert seqs(between_markers(ptrace_df, from_start=False)) == seqs(between_markers(ref, from_start=False))
    preload_df, _, _ = run_known(build_dir, tmp_path, "--preload")
    assert seqs(between_markers(preload_df)) == seqs(between_markers(ref))


# hw-schedtrace -s records hw-iotrace's default calls; for the vector calls tracefs has no byte count
VECTOR_CALLS = ("readv", "writev", "sendmsg", "recvmsg", "sendmmsg")


@pytest.mark.privileged("ptrace", "tracefs")
def test_tracefs_backend_matches_strace(build_dir: Path, tmp_path: Path) -> None:
    """The third backend, hw-schedtrace's syscall events, on the same program: the same calls,
    fds, sizes and results as strace, the child's included."""
    _, prog = tools(build_dir)
    ref = strace_reference(prog, tmp_path)
    out = tmp_path / "tracefs"
    proc = subprocess.run([build_dir / "bin" / "hw-schedtrace", "-o", out, "-s", "--", prog, tmp_path],
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    df = read_syscalls(out / "syscalls.tsv")
    assert "# backend: tracefs\n" in (out / "syscalls.tsv").read_text()
    assert "# calls: " + TRACEFS_CALLS + "\n" in (out / "syscalls.tsv").read_text()

    def comparable(frame: pd.DataFrame) -> pd.DataFrame:
        frame = between_markers(frame)
        return frame.assign(req_bytes=frame.req_bytes.where(~frame.call.isin(VECTOR_CALLS), -1))

    assert seqs(comparable(df)) == seqs(comparable(ref))
    assert len(between_markers(df)) == len(KNOWN_PARENT) + len(KNOWN_CHILD)
    # tracefs does not say what an fd is, but for the socket it makes (from its family and type)
    assert (df.fd_kind[df.call != "socket"] == "unknown").all()
    assert list(df.fd_kind[df.call == "socket"].astype(str)) == ["tcp", "tcp", "udp", "udp"]


# ---- signals, attach, errors ----

def blocked_reader(hw_iotrace: Path, out: Path, *args: str) -> subprocess.Popen:
    """hw-iotrace running `cat` blocked in read() on an empty pipe (whose write end stays open
    until the test ends)."""
    rfd, wfd = os.pipe()
    proc = subprocess.Popen([hw_iotrace, "-o", out, *args, "--", "cat"], stdin=rfd,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    os.close(rfd)
    proc.keep_open = wfd  # type: ignore[attr-defined]
    return proc


def wait_for_blocked_read(proc: subprocess.Popen) -> int:
    """The pid of cat once it sleeps in read(0)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        kids = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        for kid in kids:
            try:
                syscall = Path(f"/proc/{kid}/syscall").read_text().split()
                comm = Path(f"/proc/{kid}/comm").read_text().strip()
            except OSError:
                continue
            if comm == "cat" and syscall[:2] == ["0", "0x0"]:  # read(0, ...), not the loader's reads
                return int(kid)
        time.sleep(0.02)
    raise AssertionError("cat never blocked in read")


@pytest.mark.privileged("ptrace")
@pytest.mark.parametrize("args", [[], ["--no-seccomp"], ["--preload"]], ids=["ptrace", "no-seccomp", "preload"])
def test_sigterm_passes_the_signal_and_writes_the_open_call(build_dir: Path, tmp_path: Path, args: list[str]) -> None:
    hw_iotrace, _ = tools(build_dir)
    out = tmp_path / "s.tsv"
    proc = blocked_reader(hw_iotrace, out, *args)
    try:
        cat = wait_for_blocked_read(proc)
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=TIMEOUT)
    finally:
        proc.kill()
        proc.wait()
        os.close(proc.keep_open)
    assert proc.returncode == 128 + signal.SIGTERM, stderr
    assert "1 unfinished" in stderr
    df = read_syscalls(out)
    last = df[df.pid == cat].iloc[-1]
    assert (last.call, last.fd, bool(last.unfinished), last.result is pd.NA) == ("read", 0, True, True)
    assert last.fd_kind == "pipe"
    counters = read_counters(out)
    assert counters["unfinished"] == 1 and counters["exit_signal"] == signal.SIGTERM


@pytest.mark.privileged("ptrace")
def test_kill_on_exit_kills_the_tracee(build_dir: Path, tmp_path: Path) -> None:
    hw_iotrace, _ = tools(build_dir)
    proc = blocked_reader(hw_iotrace, tmp_path / "k.tsv", "--kill-on-exit")
    try:
        wait_for_blocked_read(proc)
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=TIMEOUT)
    finally:
        proc.kill()
        proc.wait()
        os.close(proc.keep_open)
    assert proc.returncode == 128 + signal.SIGKILL
    assert read_counters(tmp_path / "k.tsv")["unfinished"] == 1


@pytest.mark.privileged("ptrace")
def test_attach_records_then_detaches_and_the_process_lives_on(build_dir: Path, tmp_path: Path) -> None:
    hw_iotrace, _ = tools(build_dir)
    target = subprocess.Popen(["sh", "-c", "while :; do echo x >/dev/null; sleep 0.02; done"])
    try:
        out = tmp_path / "a.tsv"
        proc = subprocess.run([hw_iotrace, "-p", str(target.pid), "-o", out, "--duration", "1"],
                              capture_output=True, text=True, timeout=TIMEOUT)
        assert proc.returncode == 0, proc.stderr
        assert "no seccomp filter" in proc.stderr
        df = read_syscalls(out)
        writes = df[(df.pid == target.pid) & (df.call == "write")]
        assert len(writes) >= 5
        assert (writes.fd == 1).all() and (writes.result == 2).all() and (writes.fd_desc == "/dev/null").all()
        assert read_counters(out)["mode"] == "syscall-stops"
        status = Path(f"/proc/{target.pid}/status").read_text()
        assert re.search(r"TracerPid:\s+0\b", status)
        time.sleep(0.1)
        assert target.poll() is None  # still running, untraced
    finally:
        target.kill()
        target.wait()


@pytest.mark.privileged("ptrace")
def test_attach_refusals_explain(build_dir: Path, tmp_path: Path) -> None:
    hw_iotrace, _ = tools(build_dir)
    proc = subprocess.run([hw_iotrace, "-p", "999999999", "-o", tmp_path / "x.tsv"], capture_output=True, text=True,
                          timeout=TIMEOUT)
    assert proc.returncode == 1
    assert proc.stderr.strip() == "hw-iotrace: failed to attach to pid 999999999: no such process"
    traced = subprocess.Popen(["strace", "-o", "/dev/null", "sleep", "30"])
    try:
        deadline = time.monotonic() + 10
        sleeper = None
        while sleeper is None and time.monotonic() < deadline:
            kids = Path(f"/proc/{traced.pid}/task/{traced.pid}/children").read_text().split()
            if kids and Path(f"/proc/{kids[0]}/comm").read_text().strip() == "sleep":
                sleeper = int(kids[0])
            time.sleep(0.02)
        assert sleeper
        proc = subprocess.run([hw_iotrace, "-p", str(sleeper), "-o", tmp_path / "y.tsv"], capture_output=True,
                              text=True, timeout=TIMEOUT)
        assert proc.returncode == 1
        assert proc.stderr.strip() == (f"hw-iotrace: failed to attach to pid {sleeper}: "
                                       f"already traced by pid {traced.pid}")
    finally:
        traced.kill()
        traced.wait()


@pytest.mark.sanitized
@pytest.mark.parametrize("args, needle", [
    (["-e", "write,bogus", "--", "true"], "failed to parse -e: unknown call 'bogus'"),
    (["-p", "12x"], "failed to parse -p: expected a process id, got '12x'"),
    ([], "give either -p PID or -- CMD ARGS"),
    (["-p", "1", "--", "true"], "give either -p PID or -- CMD ARGS"),
    (["--preload", "-p", "1"], "cannot attach"),
    (["--duration", "0", "--", "true"], "failed to parse --duration"),
])
def test_bad_usage_is_one_line_and_exit_2(build_dir: Path, tmp_path: Path, args: list[str], needle: str) -> None:
    hw_iotrace, _ = tools(build_dir)
    proc = subprocess.run([hw_iotrace, *args], capture_output=True, text=True, timeout=TIMEOUT, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and needle in proc.stderr and proc.stderr.startswith("hw-iotrace: ")


def test_help_has_examples(build_dir: Path) -> None:
    proc = subprocess.run([tools(build_dir)[0], "--help"], capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0 and "EXAMPLES" in proc.stdout and "--preload" in proc.stdout


@pytest.mark.privileged("ptrace")
def test_missing_command_is_exit_127_and_unwritable_output_exit_1(build_dir: Path, tmp_path: Path) -> None:
    hw_iotrace, _ = tools(build_dir)
    proc = subprocess.run([hw_iotrace, "-o", tmp_path / "m.tsv", "--", "/nonexistent/prog"], capture_output=True,
                          text=True, timeout=TIMEOUT)
    assert proc.returncode == 127 and "failed to run /nonexistent/prog" in proc.stderr
    proc = subprocess.run([hw_iotrace, "-o", tmp_path / "no" / "m.tsv", "--", "true"], capture_output=True,
                          text=True, timeout=TIMEOUT)
    assert proc.returncode == 1
    assert proc.stderr.strip().startswith(f"hw-iotrace: failed to open {tmp_path}/no/m.tsv: No such file")


# ---- the reader ----

HEADER = "# format: hostwire-tsv 1\n# kind: syscalls\n# backend: tracefs\n# clock: CLOCK_MONOTONIC\n" + "\t".join(COLUMNS) + "\n"


def write(tmp_path: Path, body: str, header: str = HEADER) -> Path:
    path = tmp_path / "syscalls.tsv"
    path.write_text(header + body)
    return path


def test_reader_types_escapes_and_unfinished(tmp_path: Path) -> None:
    path = write(tmp_path, "20\t30\t7\t8\twrite\t3\t100\t-11\tfile\t/a\\tb\\\\c\t0\n"
                           "10\t15\t7\t7\tread\t0\t-1\t\tpipe\tpipe:[5]\t1\n")
    df = read_syscalls(tmp_path)
    assert list(df.columns) == [*COLUMNS, "dur_ns"]
    assert df.t_enter_ns.tolist() == [10, 20] and df.dur_ns.tolist() == [5, 10]
    assert df.result.isna().tolist() == [True, False] and int(df.result[1]) == -11
    assert df.unfinished.tolist() == [True, False]
    assert df.fd_desc[1] == "/a\tb\\c"
    assert str(df.t_enter_ns.dtype) == "int64" and str(df.result.dtype) == "Int64"


@pytest.mark.parametrize("body, header, message", [
    ("1\t2\t3\t4\twrite\tx\t5\t5\ttcp\t\t0\n", HEADER, "syscalls.tsv:6: column fd: expected an integer, got 'x'"),
    ("1\t2\t3\t4\twrite\t1\t5\t\ttcp\t\t0\n", HEADER, "syscalls.tsv:6: column result: expected an integer"),
    ("1\t2\t3\t4\twrite\t1\t5\t5\tsocket\t\t0\n", HEADER, "syscalls.tsv:6: column fd_kind: expected tcp|udp"),
    ("1\t2\t3\t4\twrite\t1\t5\t5\ttcp\t\t2\n", HEADER, "column unfinished: expected 0 or 1"),
    ("", HEADER.replace("\tunfinished", ""), "syscalls.tsv:5: expected the columns"),
    ("", HEADER.replace("kind: syscalls", "kind: sched"), "expected '# kind: syscalls'"),
    ("", HEADER.replace("tsv 1", "tsv 3"), "format version 3 is newer"),
])
def test_reader_names_the_bad_line(tmp_path: Path, body: str, header: str, message: str) -> None:
    with pytest.raises(InputError, match=re.escape(message)):
        read_syscalls(write(tmp_path, body, header))


def test_send_calls_counts_bytes_sent(tmp_path: Path) -> None:
    path = write(tmp_path, "1\t2\t7\t7\twrite\t3\t100\t60\ttcp\ta>b\t0\n"
                           "3\t4\t7\t7\twrite\t3\t100\t-11\ttcp\ta>b\t0\n"
                           "5\t6\t7\t7\tread\t3\t100\t100\ttcp\ta>b\t0\n"
                           "7\t8\t7\t7\twrite\t1\t9\t9\tfile\t/dev/null\t0\n"
                           "9\t10\t7\t7\tsendmmsg\t3\t70\t2\ttcp\ta>b\t0\n")
    w = send_calls(read_syscalls(path))
    assert w.call.tolist() == ["write", "write", "sendmmsg"] and w.bytes.tolist() == [60, 0, 70]


# ---- the benchmark: both backends at once, against the benchmark's own logs ----

@pytest.mark.slow
@pytest.mark.privileged("ptrace", "netns", "tracefs")
def test_ptrace_preload_and_tracefs_agree_on_the_senders_writes(build_dir: Path, tmp_path: Path,
                                                                  topology_pair) -> None:
    """One benchmark run recorded by all three backends at once: hw-iotrace (ptrace) traces
    hw-iotrace --preload, which runs hw-bench main, while hw-schedtrace records the system-call
    events of the same process tree in its tracefs instance."""
    from hostwire.record import collectors
    from hostwire.record.bench import run_benchmark

    hw_iotrace, _ = tools(build_dir)
    ptrace_out, preload_out = tmp_path / "ptrace.tsv", tmp_path / "preload.tsv"
    tracefs_dir = tmp_path / "tracefs"
    tracefs_dir.mkdir()
    wrapper = [str(hw_iotrace), "-o", str(ptrace_out), "--", str(hw_iotrace), "--preload", "-o", str(preload_out), "--"]
    started: list[collectors.BackgroundTool] = []

    def start_tracefs(pid: int) -> None:
        tool = collectors.schedtrace(tracefs_dir, None, syscall_pid=pid)
        tool.start()
        started.append(tool)

    try:
        result = run_benchmark(tmp_path / "bench", senders=2, background=2, warmup_s=0.5, duration_s=1.0,
                               topology=topology_pair, wrapper=wrapper, timeout_s=120, before_start=start_tracefs)
    finally:
        for tool in started:
            tool.stop()
    assert result.returncode == 0, result.stderr
    assert [t.returncode for t in started] == [0]
    senders = {p["pid"]: p for p in result.processes("send")}
    assert len(senders) == 2
    start, end = result.window_ns
    log = result.df_sender_events()
    per_backend = {}
    socket_use = pd.DataFrame()
    for name, path in (("ptrace", ptrace_out), ("preload", preload_out)):
        assert read_counters(path)["lost"] == 0
        w = send_calls(read_syscalls(path))
        w = w[w.pid.isin(senders)]
        assert (w.fd_desc.str.startswith("198.18.0.1:") & w.fd_desc.str.contains(">198.18.0.2:")).all()
        per_backend[name] = w.groupby("pid").bytes.agg(["count", "sum"])
        if name == "ptrace":  # when each sender's socket fd was in use (its number is reused later)
            socket_use = w.groupby(["pid", "fd"]).t_enter_ns.agg(["min", "max"])
        # against the sender's own log, inside the logging window (one write may straddle an edge)
        for pid in senders:
            mine = w[(w.pid == pid) & (w.t_enter_ns >= start) & (w.t_enter_ns < end)]
            logged = log[(log.pid == pid) & (log.event == "write_end") & (log.t_ns >= start) & (log.t_ns < end)]
            assert abs(len(mine) - len(logged)) <= 1, (name, pid)
            assert abs(int(mine.bytes.sum()) - int(logged.bytes.sum())) <= 8192, (name, pid)
    pd.testing.assert_frame_equal(per_backend["ptrace"], per_backend["preload"])
    # tracefs events do not say what an fd is: take the senders' socket fds, and when they were in
    # use, from the ptrace record. The kernel reports a call's entry to the tracer before its
    # sys_enter event, so a call's tracefs stamp is later than its ptrace stamp, by as much as the
    # tracer takes to resume the sender (milliseconds on a busy machine). The socket's use ends
    # where the ptrace record shows the next call on the same fd number (the log file): that call
    # began after the socket's last write had returned.
    traced = read_syscalls(ptrace_out)
    traced = traced[traced["pid"].isin(senders)]
    socket_use["until"] = np.inf
    for (pid, fd), row in socket_use.iterrows():
        later = traced[(traced["pid"] == pid) & (traced["fd"] == fd) & (traced["t_enter_ns"] > row["max"])
                       & ~traced["fd_kind"].astype(str).eq("tcp")]
        if len(later):
            socket_use.loc[(pid, fd), "until"] = later["t_enter_ns"].min()
    calls = read_syscalls(tracefs_dir / "syscalls.tsv")
    calls = calls[calls["call"].eq("write") & ~calls["unfinished"] & calls["pid"].isin(senders)]
    use = socket_use.reindex(pd.MultiIndex.from_arrays([calls["pid"], calls["fd"]]))
    calls = calls[(calls["t_enter_ns"].to_numpy() >= use["min"].to_numpy() - 1_000_000)
                  & (calls["t_enter_ns"].to_numpy() < use["until"].to_numpy())]
    tracefs = calls.assign(bytes=calls["result"].clip(lower=0).astype("int64")).groupby("pid").bytes.agg(
        ["count", "sum"])
    pd.testing.assert_frame_equal(tracefs, per_backend["ptrace"], check_dtype=False)
    for pid, row in per_backend["ptrace"].iterrows():
        assert row["count"] > 20  # 10 Mbit/s for 1.5 s: about 70 writes of 8 KB each
        # every byte the sender wrote (its total plus its small header) was traced
        assert 0 <= row["sum"] - senders[pid]["bytes_total"] <= 64


FD_REUSE = """
import os, socket, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
os.write(fd, b"a")
r, w = os.pipe()
os.dup2(w, fd)
os.write(fd, b"bb")
os.close(fd)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", 0))
s.connect(s.getsockname())
os.write(s.fileno(), b"ccc")
print(fd, s.fileno(), s.getsockname()[1])
"""


@pytest.mark.privileged("ptrace")
@pytest.mark.parametrize("backend", [[], ["--preload"]], ids=["ptrace", "preload"])
def test_reused_fd_numbers_are_described_again(build_dir: Path, tmp_path: Path, backend: list[str]) -> None:
    """dup2 onto a described fd, and a close the tracer does not record (-e write), then a socket
    on the same number: each write names what the fd is at that time."""
    hw_iotrace, _ = tools(build_dir)
    out = tmp_path / "r.tsv"
    proc = subprocess.run([hw_iotrace, "-e", "write", "-o", out, *backend, "--", sys.executable, "-c", FD_REUSE,
                           tmp_path / "f.dat"], capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    fd, sfd, port = (int(x) for x in proc.stdout.split())
    assert fd == sfd
    df = read_syscalls(out)
    mine = df[(df.fd == fd) & df.req_bytes.isin([1, 2, 3])]
    assert list(zip(mine.req_bytes, mine.fd_kind.astype(str))) == [(1, "file"), (2, "pipe"), (3, "udp")]
    assert mine.fd_desc.iloc[0] == str(tmp_path / "f.dat")
    assert mine.fd_desc.iloc[2] == f"127.0.0.1:{port}>127.0.0.1:{port}"


@pytest.mark.privileged("ptrace")
@pytest.mark.parametrize("args", [[], ["--preload"]], ids=["ptrace", "preload"])
def test_every_call_of_a_long_loop_is_recorded_inside_its_own_clock_readings(
        build_dir: Path, tmp_path: Path, args: list[str]) -> None:
    """150000 writes (more than one preload buffer): all recorded, in order, and stamped inside
    the loop's own CLOCK_MONOTONIC readings (the preload backend's TSC mapping included)."""
    hw_iotrace = tools(build_dir)[0]
    loop = tools(build_dir)[1].parent / "iotrace-write-loop"
    out = tmp_path / "l.tsv"
    n = 150000
    proc = subprocess.run([hw_iotrace, "-e", "write", "-o", out, *args, "--", loop, "write", str(n)],
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    t0, t1 = (int(re.search(rf"{k}=(\d+)", proc.stdout).group(1)) for k in ("t0_ns", "t1_ns"))
    df = read_syscalls(out)
    w = df[(df.fd_desc == "/dev/null") & (df.call == "write")]
    assert len(w) == n and (w.result == 1).all() and (w.req_bytes == 1).all()
    assert w.t_enter_ns.is_monotonic_increasing and (w.t_exit_ns >= w.t_enter_ns).all()
    assert (w.t_enter_ns.iloc[1:].to_numpy() >= w.t_exit_ns.iloc[:-1].to_numpy()).all()
    assert t0 <= w.t_enter_ns.iloc[0] and w.t_exit_ns.iloc[-1] <= t1
    counters = read_counters(out)
    assert counters["records_written"] == len(df) and counters["lost"] == 0


THREADS = """
import os, sys, threading
fd = os.open("/dev/null", os.O_WRONLY)
tids = []
def work(k):
    tids.append(threading.get_native_id())
    for _ in range(2000):
        os.write(fd, b"x" * k)
threads = [threading.Thread(target=work, args=(k,)) for k in (1, 2, 3, 4)]
for t in threads: t.start()
for t in threads: t.join()
print(os.getpid(), *tids)
"""


@pytest.mark.privileged("ptrace")
@pytest.mark.parametrize("args", [[], ["--preload"]], ids=["ptrace", "preload"])
def test_threads_each_get_their_records(build_dir: Path, tmp_path: Path, args: list[str]) -> None:
    hw_iotrace = tools(build_dir)[0]
    out = tmp_path / "t.tsv"
    proc = subprocess.run([hw_iotrace, "-e", "write", "-o", out, *args, "--", sys.executable, "-c", THREADS],
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    pid, *tids = (int(x) for x in proc.stdout.split())
    df = read_syscalls(out)
    w = df[df.fd_desc == "/dev/null"]
    assert (w.pid == pid).all()
    per_tid = w.groupby("tid").req_bytes.agg(["count", "min", "max"])
    assert sorted(per_tid.index) == sorted(tids)
    assert (per_tid["count"] == 2000).all() and (per_tid["min"] == per_tid["max"]).all()
    assert sorted(per_tid["min"]) == [1, 2, 3, 4]


@pytest.mark.privileged("ptrace")
def test_attach_follows_every_thread(build_dir: Path, tmp_path: Path) -> None:
    script = ("import os, threading, time\n"
              "fd = os.open('/dev/null', os.O_WRONLY)\n"
              "def work():\n"
              "    while True:\n"
              "        os.write(fd, b'x'); time.sleep(0.005)\n"
              "for _ in range(3): threading.Thread(target=work, daemon=True).start()\n"
              "print('ready', flush=True)\n"
              "time.sleep(60)\n")
    target = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert target.stdout.readline().strip() == "ready"
        out = tmp_path / "t.tsv"
        proc = subprocess.run([tools(build_dir)[0], "-p", str(target.pid), "-e", "write", "-o", out, "--duration",
                               "1"], capture_output=True, text=True, timeout=TIMEOUT)
        assert proc.returncode == 0, proc.stderr
        w = read_syscalls(out)
        w = w[w.fd_desc == "/dev/null"]
        assert w.tid.nunique() == 3 and (w.pid == target.pid).all()
        assert len(os.listdir(f"/proc/{target.pid}/task")) == 4 and target.poll() is None
    finally:
        target.kill()
        target.wait()
