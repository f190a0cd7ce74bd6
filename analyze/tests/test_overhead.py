"""hostwire overhead: the paired estimator, the table's rows for a missing or failing peer, the
probes, and the method check (an injected cost is recovered, nothing injected gives an interval
around zero). No test asserts a speed: the numbers are measured by the command itself."""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hostwire.overhead import measure, output, tools

from hostwire import stats

from hostwire.timeline import ledger
from hostwire.cli import main as cli_main


def test_paired_estimate_recovers_a_shift_under_common_noise() -> None:
    rng = np.random.default_rng(1)
    drift = rng.normal(0, 2.0, 30)  # a slow machine in some rounds: common to both configurations
    bare = 6.0 + drift + rng.normal(0, 0.05, 30)
    config = 6.0 + drift + 3.0 + rng.normal(0, 0.05, 30)
    est = stats.paired_estimate(config, bare, per_rt=2)
    assert est.contains(1.5) and abs(est.median - 1.5) < 0.05 and est.rounds == 30
    assert est.low < est.median < est.high


def test_paired_estimate_of_nothing_contains_zero_and_is_reproducible() -> None:
    rng = np.random.default_rng(2)
    bare = 6.0 + rng.normal(0, 0.1, 15)
    same = 6.0 + rng.normal(0, 0.1, 15)
    a, b = stats.paired_estimate(same, bare), stats.paired_estimate(same, bare)
    assert a.contains(0.0) and (a.low, a.high) == (b.low, b.high)


def test_paired_estimate_skips_missing_rounds_and_rejects_unpaired() -> None:
    est = stats.paired_estimate([7.0, math.nan, 7.2], [6.0, 6.1, 6.2])
    assert est.rounds == 2 and est.median == pytest.approx(1.0)
    assert math.isnan(stats.paired_estimate([math.nan], [1.0]).median)
    with pytest.raises(ValueError, match="differ in number"):
        stats.paired_estimate([1.0, 2.0], [1.0])


def test_rate_for_one_percent_is_the_papers_derivation() -> None:
    assert measure.rate_for_one_percent(1.0) == pytest.approx(10_000)  # 1 us per switch: 10^4 switches/s
    # Peuhkuri 1997, table 2 and 3.2.1: 1.7 us per switch; "nearly 6,000" switches per second cost 1 %
    assert measure.rate_for_one_percent(1.7) == pytest.approx(5882, abs=1)
    assert measure.rate_for_one_percent(0.0) == math.inf
    assert measure.rate_for_one_percent(-0.2) == math.inf


def test_missing_peer_and_failing_configuration_give_one_line_and_the_rest_runs(build_dir: Path,
                                                                                monkeypatch) -> None:
    calls: list[str] = []

    def bare(setup: tools.Setup) -> float:
        calls.append("bare")
        return 6.0 + 0.01 * len(calls)

    def tracer(setup: tools.Setup) -> float:
        return 8.0 + 0.01 * len(calls)

    def broken(setup: tools.Setup) -> float:
        raise tools.ConfigFailed("broken tracer failed (exit 1): no such event")

    configs = [tools.Config("bare", "bare", "switch", bare),
               tools.Config("tracer", "tracer", "switch", tracer),
               tools.Config("broken", "broken", "call", broken),
               tools.Config("peer", "peer", "switch", tracer, needs="hw-no-such-program-anywhere", peer=True)]
    rows = {r.name: r for r in measure.measure(10, 4, sorted(os.sched_getaffinity(0))[0], configs)}
    assert calls.count("bare") == 4
    assert rows["tracer"].status == "ok" and rows["tracer"].added_us == pytest.approx(1.0)
    assert rows["broken"].status == "failed" and "no such event" in rows["broken"].message
    assert rows["peer"].status == "not installed"
    assert rows["peer"].message == "hw-no-such-program-anywhere is not installed: peer not measured"
    result = measure.Result(10, 4, 0, 1, list(rows.values()), [], [], [])
    text = output.markdown(result)
    assert "| peer | not installed: hw-no-such-program-anywhere is not installed" in text
    assert "| broken | failed: broken tracer failed" in text


def test_parse_probes_and_campaign_rates(tmp_path: Path) -> None:
    probes = measure.parse_probes("probe: name=clock_gettime_MONOTONIC calls=10 ns_per_call=21.50\n"
                                   "probe: name=rdtsc unavailable=not an x86 processor\n")
    assert probes[0]["probe"] == "clock_gettime_MONOTONIC" and probes[0]["ns_per_call"] == 21.5
    assert math.isnan(probes[1]["ns_per_call"]) and probes[1]["note"] == "not an x86 processor"
    (tmp_path / "c1").mkdir()
    pd.DataFrame({"switches_per_s": [1000.0, 3000.0, math.nan]}).to_parquet(tmp_path / "c1" / "summary.parquet")
    (tmp_path / "c2").mkdir()
    pd.DataFrame({"other": [1]}).to_parquet(tmp_path / "c2" / "summary.parquet")
    rates = measure.campaign_switch_rates(tmp_path)
    assert rates == [{"campaign": "c1", "runs": 2, "median_switches_per_s": 2000.0, "max_switches_per_s": 3000.0}]


def test_pingpong_inject_option_and_probes(build_dir: Path) -> None:
    bench = str(build_dir / "bin" / "hw-bench")
    out = subprocess.run([bench, "pingpong", "--loops", "100", "--inject-ns", "2000"], capture_output=True,
                         text=True, check=True).stdout
    assert "inject_ns=2000" in out and "round_trip_us=" in out
    bad = subprocess.run([bench, "pingpong", "--loops", "10", "--inject-ns", "-1"], capture_output=True, text=True)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    out = subprocess.run([bench, "probes", "--calls", "1000"], capture_output=True, text=True, check=True).stdout
    names = [p["probe"] for p in measure.parse_probes(out)]
    assert names[:8] == ["clock_gettime_MONOTONIC", "clock_gettime_REALTIME", "clock_gettime_MONOTONIC_RAW",
                         "clock_gettime_BOOTTIME", "clock_gettime_MONOTONIC_COARSE", "clock_gettime_REALTIME_COARSE",
                         "gettimeofday", "time"]
    assert {"rdtsc", "trace_marker_write", "evlog_append"} <= set(names)


def test_command_rejects_bad_arguments_in_one_line(capsys) -> None:
    assert cli_main(["overhead", "--runs", "1"]) == 2
    assert capsys.readouterr().err.strip() == (
        "hostwire: --runs must be at least 2 (an interval needs two paired rounds)")


@pytest.mark.privileged("ptrace")
def test_the_pingpong_makes_four_traced_calls_per_round_trip(build_dir: Path) -> None:
    """CALLS_PER_RT: the ptrace floor with --read stops at every read and write of both processes
    (it follows the child): 4 per round trip, plus the final output line."""
    floor = build_dir / "test-progs" / "iotrace-ptrace-floor"
    proc = subprocess.run([floor, "--read", "--", build_dir / "bin" / "hw-bench", "pingpong", "--loops", "500"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    stops = int(re.search(r"exit_stops=(\d+)", proc.stderr).group(1))
    assert tools.CALLS_PER_RT * 500 <= stops <= tools.CALLS_PER_RT * 500 + 5


def test_collectors_factor_sets_the_three_collector_fields(tmp_path: Path) -> None:
    from dataclasses import replace

    from hostwire.campaign.batch import run_key
    from hostwire.errors import UsageError
    from hostwire.record.point import RunPoint

    p = replace(RunPoint(), collectors="kernel+ptrace")
    assert (p.capture, p.kernel_trace, p.syscalls) == (False, True, "ptrace")
    p = replace(RunPoint(), collectors="none")
    assert (p.capture, p.kernel_trace, p.syscalls) == (False, False, "none")
    p.validate()
    plain = RunPoint()
    assert (plain.capture, plain.kernel_trace, plain.syscalls) == (True, True, "none")
    with pytest.raises(UsageError, match="collectors = 'kernal': expected one of none, wire, kernel"):
        RunPoint(collectors="kernal").validate()
    # a point that leaves the fields at their defaults keeps the run key it had before they existed
    import hashlib
    import json
    from dataclasses import asdict

    from hostwire.campaign.batch import KEY_FACTS, TOPOLOGY_SETTINGS

    old = asdict(plain)
    old.pop("collectors")
    old.pop("kernel_source")
    old.pop("sender_rps")
    material = {"point": old, "repetition": 0, "host": {k: None for k in KEY_FACTS}, "topology": TOPOLOGY_SETTINGS}
    assert run_key(plain, 0, {}) == hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()
    assert run_key(replace(plain, kernel_source="event"), 0, {}) != run_key(plain, 0, {})


def test_compare_sets_says_which_set_changes_the_answer() -> None:
    rng = np.random.default_rng(3)

    def runs(shift: float) -> list[dict[str, float]]:
        return [{"goodput_bit_s": 9.5e6 + shift + rng.normal(0, 1e4), "jain": 0.99 + rng.normal(0, 0.001),
                 "idc_100ms": math.nan, "sieve_rounds_per_s": 400 + rng.normal(0, 2),
                 "switches_per_s": 20000 + rng.normal(0, 100)} for _ in range(6)]

    table = stats.compare_sets({"none": runs(0), "kernel": runs(0), "kernel+ptrace": runs(-2e6)})
    verdicts = {r["collectors"]: r["verdict"] for r in table}
    assert verdicts["kernel+ptrace"] == "changes the answer (goodput_bit_s)"
    assert verdicts["kernel"] in ("within noise",) or verdicts["kernel"].startswith("changes the answer")
    idc = [r for r in table if r["metric"] == "idc_100ms"]
    assert all(math.isnan(r["low"]) for r in idc)  # no capture, no IDC: left out, not a verdict
    text = output.accuracy_markdown(table, 6)
    assert "| kernel+ptrace | goodput_bit_s |" in text


def test_loss_ledger_of_a_recorded_run(tmp_path: Path) -> None:
    run_dir = tmp_path / "run-small"  # a copy: the timeline keeps its tables beside the run
    shutil.copytree(Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "run-small", run_dir)
    flows, frames = ledger.loss_ledger(run_dir)
    assert [f["role"] for f in flows] == ["send-0"]
    f = flows[0]
    assert f["bytes_sent"] > 0 and f["frames_captured"] > 0 and f["bytes_on_wire"] > 0
    assert f["gap_bytes"] == f["bytes_sent"] - f["bytes_on_wire"]
    assert f["where"] == "none" or f["where"].startswith("written but not on the wire")
    assert frames["interface"] and frames["gap_frames"] == frames["frames_at_xmit"] - frames["frames_captured"]


@pytest.mark.privileged("netns", "tracefs")
def test_loss_ledger_names_the_source_of_losses_made_on_purpose(tmp_path: Path, build_dir: Path) -> None:
    """A run made lossy on purpose, a capture buffer too small for a 1 Gbit/s link and a tiny
    kernel trace buffer that is never drained: the manifest counts both losses, the run is marked
    for both, and the ledger names both sources; a clean run's ledger names none."""
    from hostwire.metrics.compute import table
    from hostwire.timeline.ledger import loss_ledger
    from hostwire.record.runner import RunPoint, record_run

    base = RunPoint(senders=2, background=0, warmup_s=0.3, duration_s=1.0, quiet_s=0.3, link_rate="1gbit")
    lossy = record_run(tmp_path, "lossy", replace(base, capture_buffer_kib=64, trace_buffer_kib=4, trace_drain=False))
    assert lossy.status == "complete", lossy.reason
    assert lossy.manifest["losses"]["wire_ps_drop"] > 0 and lossy.manifest["losses"]["sched_lost_events"] > 0
    marked_by = " ".join(table("sanity", lossy.directory).attrs["marked_by"])
    assert "capture_drops" in marked_by and "trace_overruns" in marked_by
    _, run_row = loss_ledger(lossy.directory)
    assert "the capture dropped" in run_row["where"] and "the kernel trace lost" in run_row["where"]
    clean = record_run(tmp_path, "clean", replace(base, link_rate="10mbit"))
    _, clean_row = loss_ledger(clean.directory)
    # nothing lost: only the odd frame that is not IPv4 (ARP, neighbour discovery) is unmatched
    assert "losses" not in clean_row and 0 <= clean_row["gap_frames"] <= 5, clean_row


@pytest.mark.privileged("netns", "tracefs", "ptrace")
@pytest.mark.parametrize("backend", ["tracefs", "ptrace", "preload"])
def test_each_syscall_backend_counts_the_writes_the_benchmark_logged(tmp_path: Path, build_dir: Path,
                                                                     backend: str) -> None:
    """One source against another: per flow, the sending calls each system-call backend recorded
    in the window equal the writes the benchmark logged there."""
    from hostwire.timeline.ledger import loss_ledger
    from hostwire.record.runner import RunPoint, record_run

    record = record_run(tmp_path, backend, RunPoint(senders=2, background=1, warmup_s=0.3, duration_s=1.0,
                                                    quiet_s=0.3, syscalls=backend))
    assert record.status == "complete", record.reason
    flows, _ = loss_ledger(record.directory)
    assert len(flows) == 2
    for flow in flows:
        assert flow["writes_logged"] > 0 and flow["writes_gap"] == 0, flow
