"""hostwire overhead --program: the paired ratio, the parsers of iperf3 -J and tcp-rr, tcp-rr's
calls per round trip, and the program rows produced between two real namespaces (well-formed, a
missing peer in one line, nothing left behind). No test asserts a speed: the ratios are measured
by `make bench` (perf/bench_record.py)."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from hostwire import stats
from hostwire.overhead import measure, output, program
from hostwire.record.topology import list_namespaces

ROOT = Path(__file__).resolve().parents[2]


def test_paired_ratio_recovers_a_known_ratio_under_common_drift() -> None:
    rng = np.random.default_rng(3)
    drift = rng.uniform(0.5, 1.5, 12)  # a busier machine in some rounds: it slows both alike
    base = 2e9 * drift
    config = 0.7 * base * (1 + rng.normal(0, 0.01, 12))
    est = stats.paired_ratio(config, base)
    assert est.contains(0.7) and abs(est.median - 0.7) < 0.01 and est.rounds == 12
    # a missing round and a zero baseline are left out, not divided by
    est = stats.paired_ratio([1.0, math.nan, 3.0, 5.0], [2.0, 2.0, 0.0, 4.0])
    assert est.rounds == 2 and est.median == pytest.approx((0.5 + 1.25) / 2)


IPERF3_JSON = {"start": {"connected": []}, "intervals": [],
               "end": {"sum_sent": {"bytes": 750_000_000, "seconds": 3.0, "bits_per_second": 2.0e9},
                       "sum_received": {"bytes": 749_250_000, "seconds": 3.0, "bits_per_second": 1.998e9}}}


def test_parse_iperf3_after_other_lines_and_its_errors() -> None:
    text = "CPU0 data recorded at offset 0x1000\n" + json.dumps(IPERF3_JSON, indent=1) + "\n"
    assert program.parse_iperf3(text) == (2.0e9, 1.998e9)
    with pytest.raises(ValueError, match="iperf3: unable to connect to server"):
        program.parse_iperf3(json.dumps({"start": {}, "error": "unable to connect to server"}))
    with pytest.raises(ValueError, match="no end.sum_sent"):
        program.parse_iperf3(json.dumps({"end": {}}))
    with pytest.raises(ValueError, match="no JSON object"):
        program.parse_iperf3("iperf3: error\n")


def test_parse_tcp_rr() -> None:
    assert program.parse_tcp_rr("round_trip_us=31.250 p50_us=29.100 p99_us=80.000 loops=1000\n") == (31.25, 29.1)
    with pytest.raises(ValueError, match="no round_trip_us"):
        program.parse_tcp_rr("tcp-rr: connect: Connection refused\n")


@pytest.mark.parametrize("args, message", [
    (["--program", "--program-runs", "1"], "--program-runs must be at least 2 (an interval needs two paired rounds)"),
    (["--program", "--program-seconds", "0"], "--program-seconds must be at least 1"),
    (["--program", "--rr-loops", "0"], "--rr-loops must be at least 1"),
])
def test_program_options_are_checked_in_one_line(capsys, args: list[str], message: str) -> None:
    from hostwire.cli import main as cli_main

    assert cli_main(["overhead", "--no-pingpong", *args]) == 2
    assert capsys.readouterr().err.strip() == f"hostwire: {message}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.privileged("ptrace")
def test_tcp_rr_makes_one_send_and_one_recv_per_round_trip(build_dir: Path, tmp_path: Path) -> None:
    """The yardstick's cost unit, counted by strace: LOOPS timed round trips plus 100 warm-up ones,
    each one send and one recv in the client (on loopback)."""
    if shutil.which("strace") is None:
        pytest.skip("strace is not installed")
    rr, port, loops = build_dir / "test-progs" / "tcp-rr", _free_port(), 300
    server = subprocess.Popen([str(rr), "serve", "127.0.0.1", str(port)], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == "listening"
        counts = tmp_path / "counts.txt"
        proc = subprocess.run(["strace", "-c", "-U", "name,calls", "-e", "trace=sendto,recvfrom", "-o", str(counts),
                               str(rr), "127.0.0.1", str(port), str(loops)], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert program.parse_tcp_rr(proc.stdout)[0] > 0
        calls = dict(re.findall(r"^(?:\s*)(sendto|recvfrom)\s+(\d+)\s*$", counts.read_text(), re.MULTILINE))
        assert calls == {"sendto": str(loops + 100), "recvfrom": str(loops + 100)}
    finally:
        server.terminate()
        server.wait(timeout=10)
    bad = subprocess.run([str(rr), "127.0.0.1", str(port), "0"], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.startswith("usage: tcp-rr")


def _leftovers(pid: int) -> list[str]:
    names = [ns for ns in list_namespaces() if ns.startswith(f"hw{pid}-")]
    instances = Path("/sys/kernel/tracing/instances")
    return names + [p.name for p in instances.glob(f"hw-{pid}-*")] if instances.is_dir() else names


def _check_rows(rows: list[program.ProgramRow], names: list[str]) -> None:
    """Every measured row has a finite, positive figure per round and ratios whose interval holds
    their median; the baseline's ratios are exactly 1."""
    assert [r.name for r in rows] == names
    for row in (r for r in rows if r.status != "not installed"):
        assert row.status == "ok", row.message
        for series in (row.sender_bps, row.receiver_bps, row.rr_us, row.rr_p50_us):
            assert len(series) == 2 and all(math.isfinite(x) and x > 0 for x in series)
        for value, low, high in ((row.throughput_ratio, row.throughput_ratio_low, row.throughput_ratio_high),
                                 (row.rr_ratio, row.rr_ratio_low, row.rr_ratio_high),
                                 (row.rr_added_us, row.rr_added_low_us, row.rr_added_high_us)):
            assert math.isfinite(value) and low <= value <= high
        assert row.p25_receiver_bps <= row.median_receiver_bps <= row.p75_receiver_bps
    alone = rows[0]
    assert (alone.throughput_ratio, alone.rr_ratio, alone.rr_added_us, alone.sender_ratio) == (1.0, 1.0, 0.0, 1.0)
    assert _leftovers(os.getpid()) == []


@pytest.mark.long
@pytest.mark.privileged("netns", "tracefs")
def test_program_rows_are_produced_and_well_formed(build_dir: Path, tmp_path: Path) -> None:
    """Two short rounds of iperf3 (1 s) and tcp-rr alone and under hostwire record, with a peer
    that is not installed (at SCHED_FIFO 1, so that other load does not stretch the test): the rows are well-formed (_check_rows), the missing peer is one line,
    the table, the CSV and the JSON carry every row, and nothing is left behind (namespaces,
    tracefs instances, the tools' output)."""
    if shutil.which("iperf3") is None:
        pytest.skip("iperf3 is not installed")
    by_name = {c.name: c for c in program.PROGRAM_CONFIGS}
    missing = program.ProgramConfig("no such peer", "hw-no-such-peer -- CMD", by_name["strace -f"].wrap,
                                    "hw-no-such-peer")
    configs = [by_name["alone"], by_name["record tracefs"], missing]
    before = set(Path(tempfile.gettempdir()).glob("hw-overhead-program-*"))
    rows = program.measure_program(2, seconds=1, rr_loops=200, configs=configs, rt_prio=1)
    _check_rows(rows, ["alone", "record tracefs", "no such peer"])
    assert set(Path(tempfile.gettempdir()).glob("hw-overhead-program-*")) == before
    assert rows[2].status == "not installed" and rows[2].message == (
        "hw-no-such-peer is not installed: no such peer not measured")

    result = measure.Result(0, 0, 0, 0, [], [], [], [], program_rows=rows,
                            program_settings={"runs": 2, "seconds": 1, "rr_loops": 200})
    output.write_outputs(result, tmp_path)
    table = (tmp_path / "overhead.md").read_text()
    for name in ("alone", "record tracefs"):
        assert re.search(rf"^\| {re.escape(name)} \| [\d.]+ \([\d.]+-[\d.]+\) \|", table, re.MULTILINE)
    assert "| no such peer | not installed: hw-no-such-peer is not installed" in table
    assert "iperf3 under record tracefs: throughput" in table
    assert "ratio record tracefs / strace -f iperf3 throughput (same rounds): not measured (strace -f missing)" in table
    csv_lines = (tmp_path / "overhead-program.csv").read_text().splitlines()
    assert len(csv_lines) == 4 and csv_lines[0].startswith("name,what,status")
    data = json.loads((tmp_path / "overhead.json").read_text())
    assert [r["name"] for r in data["program"]["rows"]] == [r.name for r in rows]
    assert data["program"]["runs"] == 2 and data["program"]["rows"][2]["median_rr_us"] is None


@pytest.mark.long
@pytest.mark.privileged("netns", "tracefs", "ptrace")
def test_every_program_configuration_measures(build_dir: Path) -> None:
    """Every configuration of the program rows, the peers included, measures in two short rounds
    at SCHED_FIFO 1 as make bench runs them (a peer that changed its options shows here as a
    failed row)."""
    for tool in ("iperf3", "perf", "strace", "trace-cmd"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed")
    rows = program.measure_program(2, seconds=1, rr_loops=200, rt_prio=1)
    _check_rows(rows, [c.name for c in program.PROGRAM_CONFIGS])


@pytest.mark.privileged("netns")
def test_sigterm_during_the_program_rows_leaves_nothing_behind(build_dir: Path) -> None:
    """SIGTERM while iperf3 runs: exit 143 with one line, and no namespace or server left."""
    if shutil.which("iperf3") is None:
        pytest.skip("iperf3 is not installed")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "analyze"))
    proc = subprocess.Popen([sys.executable, "-m", "hostwire", "overhead", "--no-pingpong", "--program",
                             "--program-runs", "2", "--program-seconds", "5"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 30
    while not any(ns.startswith(f"hw{proc.pid}-") for ns in list_namespaces()):
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(2.0)  # the servers up and iperf3 running
    ps = subprocess.run(["ps", "-eo", "pid=,ppid=,args="], capture_output=True, text=True).stdout
    children = [int(line.split()[0]) for line in ps.splitlines() if int(line.split()[1]) == proc.pid]
    assert children, "no server or client running under the measurement"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert err.strip().splitlines()[-1].startswith("hostwire: terminated;") and "Traceback" not in err
    assert _leftovers(proc.pid) == []
    deadline = time.monotonic() + 10
    while any(Path(f"/proc/{pid}").exists() for pid in children) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [pid for pid in children if Path(f"/proc/{pid}").exists()] == []
