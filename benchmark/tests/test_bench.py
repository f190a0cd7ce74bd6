"""hw-bench end to end: real processes, real sockets, real namespaces."""

from __future__ import annotations

import os
import re
import signal
import socket
import struct
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from hostwire.read.bench import BenchResult

from hostwire.record.bench import run_benchmark
from hostwire.read.tsv import read_tsv

READ_SIZE = 8192


def hw_bench(build_dir: Path) -> str:
    return str(build_dir / "bin" / "hw-bench")


def pid_alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def check_run(result: BenchResult, senders: int, background: int) -> None:
    assert result.returncode == 0, result.stderr
    summary = result.summary
    assert summary["status"] == "ok" and summary["failures"] == []
    start, end = result.window_ns
    assert end - start == 2_000_000_000

    # Every log is present and well formed.
    for i in range(senders):
        for role in (f"send-{i}", f"recv-{i}"):
            entry = result.log(role)
            assert entry.meta["role"] == role and int(entry.meta["pid"]) > 0
            assert entry.meta["clock"] == "CLOCK_MONOTONIC"
    for i in range(background):
        assert result.log(f"bg-{i}").meta["role"] == f"bg-{i}"
    phases = result.df_clock_sync()["phase"].value_counts()
    assert phases["start"] == 16 and 16 <= phases["end"] <= 1100
    assert summary["clock_sync"]["end"]["samples"] == phases["end"]

    procs = {p["role"]: p for p in summary["processes"]}
    receivers = {r["index"]: r for r in summary["receivers"]}
    assert sorted(procs) == sorted([f"send-{i}" for i in range(senders)] + [f"bg-{i}" for i in range(background)])
    for i in range(senders):
        proc, recv = procs[f"send-{i}"], receivers[i]
        events = result.log(f"send-{i}").df
        assert len(events) > 0 and events["t_ns"].is_monotonic_increasing
        # A round that starts in the window is logged to its end, which may lie just after it.
        assert events.loc[events["event"] == "read_start", "t_ns"].between(start, end - 1).all()
        assert events["t_ns"].iloc[0] >= start and events["t_ns"].iloc[-1] < end + 1_000_000_000
        # Each round: before the read, before the write (bytes read), after the write (bytes written).
        first = events.index[events["event"] == "read_start"][0]
        rounds = events.loc[first:, "event"].to_numpy()
        assert len(rounds) % 3 == 0
        pattern = np.resize(np.array(["read_start", "write_start", "write_end"]), len(rounds))
        assert (rounds == pattern).all()
        starts = events[events["event"] == "write_start"]
        ends = events[events["event"] == "write_end"]
        assert (starts["bytes"] <= READ_SIZE).all() and (starts["bytes"] > 0).all()
        assert (ends["bytes"] > 0).all()
        # The log's own totals agree with the report.
        written_in_window = ends.loc[ends.index.isin(starts.index + 1), "bytes"].sum()
        assert written_in_window == proc["bytes_window"]
        assert len(starts) == proc["calls_window"]
        # Everything written arrived, and not one LF.
        assert recv["bytes_total"] == proc["bytes_total"] > 0
        assert recv["lf_received"] == 0
        reads = result.log(f"recv-{i}").df
        assert reads["bytes"].sum() == recv["bytes_window"]
        assert reads["t_ns"].between(start, end - 1).all()
        assert int(result.log(f"recv-{i}").meta["lf_received"]) == 0
    for i in range(background):
        rounds = result.log(f"bg-{i}").df
        assert len(rounds) == procs[f"bg-{i}"]["calls_window"] > 0
        assert (rounds["ok"] == 1).all()
        assert (rounds["primes"] == 23000).all() and (rounds["largest"] == 262139).all()  # 2^18
    # One clock: once the link has quieted after the run, the measured offset is within 1 ms of zero.
    assert summary["clock_sync"]["end"]["quiet"] is True
    for phase in ("start", "end"):
        assert abs(summary["clock_sync"][phase]["offset_ns"]) < 1_000_000
    assert summary["losses"]["log_overflow"] == 0
    # No process is left behind.
    pids = [p["pid"] for p in summary["processes"]] + [r["pid"] for r in summary["receivers"]]
    assert not [pid for pid in pids if pid_alive(pid)]


@pytest.mark.sanitized
def test_loopback_run(tmp_path: Path, build_dir: Path) -> None:
    # Loopback runs at gigabytes a second: room for every event of the window.
    result = run_benchmark(tmp_path / "run", senders=2, background=2, warmup_s=1, duration_s=2,
                           log_capacity=3_000_000)
    check_run(result, senders=2, background=2)


@pytest.mark.privileged("netns")
def test_two_namespace_run(tmp_path: Path, build_dir: Path, topology_pair) -> None:
    result = run_benchmark(tmp_path / "run", senders=2, background=2, warmup_s=1, duration_s=2,
                           topology=topology_pair, sender_cpus="0", receiver_cpus="1")
    check_run(result, senders=2, background=2)
    for i in range(2):
        meta = result.log(f"recv-{i}").meta
        assert meta["local"].startswith("198.18.0.2:") and meta["peer"].startswith("198.18.0.1:")
        assert result.log(f"send-{i}").meta["local"].startswith("198.18.0.1:")
    # 10 Mbit/s: the window carries about what the link allows (a receiver that was kept off its
    # CPU for a moment may read a backlog from before the window, hence the slack of 1 MB).
    delivered = sum(r["bytes_window"] for r in result.summary["receivers"])
    assert 0.5e6 < delivered < 2 * 10e6 / 8 + 1e6


def primes_below(limit: int) -> tuple[int, int]:
    """Count and largest prime below limit, by an independent numpy sieve (odd numbers only)."""
    if limit <= 2:
        return 0, 0
    odd = np.ones(limit // 2, dtype=bool)  # odd[k] stands for 2k + 1
    odd[0] = False
    for k in range(1, (int(limit**0.5) + 1) // 2 + 1):
        if odd[k]:
            p = 2 * k + 1
            odd[p * p // 2 :: p] = False
    odd_primes = np.flatnonzero(odd) * 2 + 1
    odd_primes = odd_primes[odd_primes < limit]
    return 1 + len(odd_primes), int(odd_primes[-1]) if len(odd_primes) else 2


def test_sieve_counts_agree_with_independent_sieve(build_dir: Path) -> None:
    for log2 in range(1, 26):
        out = subprocess.run([hw_bench(build_dir), "sieve", "--log2", str(log2), "--rounds", "1"],
                             capture_output=True, text=True, check=True).stdout
        match = re.fullmatch(r"sieve: log2=(\d+) primes=(\d+) largest=(\d+) rounds=1 round_ms=[\d.]+ check=ok\n", out)
        assert match, out
        assert (int(match.group(2)), int(match.group(3))) == primes_below(2**log2), log2


def test_killed_sender_is_named(tmp_path: Path, build_dir: Path) -> None:
    proc = subprocess.Popen(
        [hw_bench(build_dir), "main", "-o", str(tmp_path / "run"), "-M", "2", "-N", "0", "--warmup", "0.5",
         "--duration", "4", "--quiet", "0.2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        main_cmdline = None
        senders: list[int] = []
        deadline = time.monotonic() + 10
        while len(senders) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
            main_cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes()
            children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
            senders = [int(c) for c in children if Path(f"/proc/{c}/cmdline").read_bytes() == main_cmdline]
        assert len(senders) == 2
        time.sleep(1.0)  # inside the window
        victim = max(senders)
        os.kill(victim, signal.SIGKILL)
        _, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 1
    assert re.search(rf"hw-bench: send-\d \(pid {victim}\) was killed by signal 9", stderr), stderr
    summary = BenchResult(directory=tmp_path / "run").summary
    assert summary["status"] == "failed"
    assert any(str(victim) in line for line in summary["failures"])
    # The survivor's data is kept.
    assert any(read_tsv(p).df.shape[0] > 0 for p in (tmp_path / "run").glob("send-*.tsv"))


def test_undersized_log_buffer_reports_overflow(tmp_path: Path, build_dir: Path) -> None:
    result = run_benchmark(tmp_path / "run", senders=1, background=1, warmup_s=0.2, duration_s=1, quiet_s=0.2,
                           log_capacity=16)
    assert result.returncode == 0, result.stderr
    summary = result.summary
    sender = next(p for p in summary["processes"] if p["kind"] == "send")
    assert sender["events"] == 16
    # Every write in the window is 2 events (plus the read before it): the overflow is what is missing.
    assert sender["overflow"] == pytest.approx(3 * sender["calls_window"] - 16, abs=3)
    assert int(result.log("send-0").meta["overflow"]) == sender["overflow"] > 0
    assert summary["losses"]["log_overflow"] >= sender["overflow"]
    assert len(result.log("send-0").df) == 16


@pytest.mark.parametrize(
    "args, needle",
    [
        (["main"], "-o DIR is required"),
        (["main", "-o", "x", "--senders", "-1"], "--senders: expected an integer from 0 to 1000, got '-1'"),
        (["main", "-o", "x", "--log2", "31"], "--log2: expected an integer from 1 to 30, got '31'"),
        (["main", "-o", "x", "--duration", "soon"], "--duration: expected a duration"),
        (["main", "-o", "x", "--bogus"], "unknown option '--bogus'"),
        (["sieve"], "--log2 L is required"),
        (["pingpong", "--loops", "0"], "--loops: expected an integer from 1"),
        (["mkdata", "--size", "1k"], "expected exactly one FILE"),
        (["frobnicate"], "unknown command 'frobnicate'"),
    ],
)
def test_bad_arguments_give_one_line_and_exit_2(build_dir: Path, args: list[str], needle: str) -> None:
    proc = subprocess.run([hw_bench(build_dir), *args], capture_output=True, text=True)
    assert proc.returncode == 2
    assert needle in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert proc.stdout == ""


@pytest.mark.sanitized
def test_pingpong_prints_round_trip(build_dir: Path) -> None:
    out = subprocess.run([hw_bench(build_dir), "pingpong", "--loops", "2000", "--cpu", "0"],
                         capture_output=True, text=True, check=True).stdout
    match = re.fullmatch(r"pingpong: loops=2000 round_trip_us=(\d+\.\d{3})\n", out)
    assert match and float(match.group(1)) > 0


def test_mkdata_is_deterministic_ascii_with_line_feeds(tmp_path: Path, build_dir: Path) -> None:
    for name in ("a", "b"):
        subprocess.run([hw_bench(build_dir), "mkdata", "--size", "100k", str(tmp_path / name)], check=True)
    data = (tmp_path / "a").read_bytes()
    assert len(data) == 100 * 1024 and data == (tmp_path / "b").read_bytes()
    arr = np.frombuffer(data, dtype=np.uint8)
    assert ((arr >= 32) & (arr < 127) | (arr == 10)).all()
    assert 1000 < (arr == 10).sum() < 100 * 1024 / 2


def test_receiver_counts_line_feeds_and_speaks_network_byte_order(tmp_path: Path, build_dir: Path) -> None:
    """Drive `hw-bench receive` by hand through its wire protocol."""
    proc = subprocess.Popen([hw_bench(build_dir), "receive", "--listen", "127.0.0.1", "-o", str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        raw = proc.stdout.read(10)
        magic, version, tcp_port, udp_port = struct.unpack("!IHHH", raw)
        assert magic == 0x48575250 and version == 1
        control = socket.create_connection(("127.0.0.1", tcp_port))
        control.sendall(struct.pack("!IHHI", 0x4857484C, 1, 0, os.getpid()))
        # Clock exchange: t2 and t3 come back in the receiver's (same) monotonic clock.
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        udp.settimeout(5)
        t1 = time.monotonic_ns()
        udp.sendto(struct.pack("!IIq", 0x48575359, 7, t1), ("127.0.0.1", udp_port))
        reply = udp.recv(64)
        t4 = time.monotonic_ns()
        _, seq, t1_back, t2, t3 = struct.unpack("!IIqqq", reply)
        assert seq == 7 and t1_back == t1 and t1 <= t2 <= t3 <= t4
        now = time.monotonic_ns()
        control.sendall(b"W" + struct.pack("!qqq", 0, now - 10**9, now + 60 * 10**9))
        data = socket.create_connection(("127.0.0.1", tcp_port))
        data.sendall(struct.pack("!IHHI", 0x4857484C, 2, 3, 4242))
        payload = b"line one\nline two\r\nno feed\r" * 100
        data.sendall(payload)
        data.close()
        time.sleep(0.3)
        control.sendall(b"S")
        control.settimeout(10)
        count = struct.unpack("!I", control.recv(4))[0]
        assert count == 1
        body = b""
        while len(body) < 50:
            body += control.recv(50 - len(body))
        index, pid, status, total, window, lf, events, overflow = struct.unpack("!HIiqqqqq", body)
        assert (index, status, total, window, lf, overflow) == (3, 0, len(payload), len(payload), 200, 0)
        assert proc.wait(timeout=10) == 0
        log = read_tsv(tmp_path / "recv-3.tsv")
        assert log.meta["sender_pid"] == "4242" and log.meta["lf_received"] == "200"
        assert log.df["bytes"].sum() == len(payload)
        assert (log.df["t_ns"] == log.df["t_raw_ns"]).all()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_unequal_read_and_write_sizes_log_every_call(tmp_path: Path, build_dir: Path) -> None:
    result = run_benchmark(tmp_path / "run", senders=1, background=3, warmup_s=0.3, duration_s=1, quiet_s=0.2,
                           read_size=3000, write_size=1000, log_capacity=3_000_000,
                           extra_args=["--code-copies", "2"])
    assert result.returncode == 0, result.stderr
    events = result.log("send-0").df
    kinds = events["event"].to_numpy()
    # Calls come in before/after pairs; one read feeds three writes.
    first = int(np.flatnonzero(kinds == "read_start")[0])
    pairs = kinds[first:].reshape(-1, 2)
    assert set(map(tuple, pairs)) <= {("read_start", "read_end"), ("write_start", "write_end")}
    reads = events[events["event"] == "read_end"]
    writes = events[events["event"] == "write_start"]
    assert (writes["bytes"] == 1000).all() and (reads["bytes"] <= 3000).all()
    # What was read is what was written, give or take the data of one read in the buffer.
    written = events.loc[events["event"] == "write_end", "bytes"].sum()
    assert abs(written - reads["bytes"].sum()) <= 3000 + 1000
    summary = result.summary
    assert summary["receivers"][0]["bytes_total"] == summary["processes"][1]["bytes_total"]
    copies = [int(result.log(f"bg-{i}").meta["code_copy"]) for i in range(3)]
    assert copies == [0, 1, 0]
