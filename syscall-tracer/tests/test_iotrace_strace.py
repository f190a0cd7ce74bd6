"""hw-iotrace against strace on the same program, every backend (ptrace, preload, tracefs), and
the three backends against the benchmark's own logs of the senders' writes."""

from __future__ import annotations

import errno
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hostwire.read.syscalls import read_counters, read_syscalls, send_calls


sys.path.insert(0, str(Path(__file__).resolve().parent))  # the helpers beside this file (importlib mode)
from iotrace_helpers import (CALLS, KNOWN_CHILD, KNOWN_PARENT, STRACE_CALLS, TIMEOUT, TRACEFS_CALLS,  # noqa: E402
                             between_markers, run_known, tools)

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
