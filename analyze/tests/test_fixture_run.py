"""The small committed run (tests/fixtures/run-small, made by scripts/make-test-fixture.py): every
table of a real run, the metrics, the analysis step and the report, without root and in seconds."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

import hostwire
from hostwire.campaign.analyze import analyze_campaign
from hostwire.metrics.compute import table
from hostwire.paths import REPO_ROOT
from hostwire.report.campaign_report import build_report

FIXTURE = REPO_ROOT / "tests" / "fixtures" / "run-small"


@pytest.fixture
def campaign(tmp_path: Path) -> Path:
    """A one-run campaign holding a copy of the fixture (analysis writes into run directories)."""
    out = tmp_path / "campaign"
    shutil.copytree(FIXTURE, out / "run-small")
    return out


def test_fixture_is_small_and_whole(build_dir: Path) -> None:
    size = sum(p.stat().st_size for p in FIXTURE.rglob("*") if p.is_file())
    assert size < 1_000_000
    run = hostwire.load_run(FIXTURE)
    assert run.status == "complete"
    for relative in run.manifest["raw_digests"]:
        assert run.raw_damage(relative) is None, relative
    frames, writes, received = run.df_frames(), run.df_writes(), run.df_received()
    assert len(frames) > 300 and len(writes) > 10 and len(received) > 10
    assert 100 < len(run.df_sched()) < 1000 and len(run.df_syscalls()) > 0
    procs = {p["role"]: p for p in run.bench_summary()["processes"]}
    assert procs["send-0"]["bytes_total"] == int(run.log("send-0").meta.get("bytes_total", procs["send-0"]["bytes_total"]))


def test_metrics_of_the_fixture_agree_with_its_own_logs(build_dir: Path) -> None:
    run = hostwire.load_run(FIXTURE)
    goodput = table("goodput", run)
    total = goodput[goodput["stream"] == "all"].iloc[0]
    # Wire and receivers' figures differ by at most the bytes in flight at the window's two ends.
    assert abs(int(total["bytes"]) - int(total["app_bytes"])) <= 64 * 1448
    start, end = run.window_ns()
    received = run.df_received()
    in_window = received[(received["t_ns"] >= start) & (received["t_ns"] <= end)]["bytes"].sum()
    assert int(total["app_bytes"]) == int(in_window)
    counters = table("sanity", run)
    sanity = dict(zip(counters["counter"], counters["value"]))
    assert sanity["marked"] == 0 and sanity["impossible_share"] < 0.05


def test_analysis_and_report_of_the_fixture(campaign: Path, build_dir: Path) -> None:
    summary = analyze_campaign(campaign, workers=1)
    assert len(summary) == 1 and summary["status"].iloc[0] == "complete"
    assert summary["errors"].iloc[0] == ""
    assert 5e6 < summary["goodput_bit_s"].iloc[0] < 9.57e6
    row = json.loads((campaign / "run-small" / "metrics.json").read_text())["row"]
    assert row["goodput_bit_s"] == summary["goodput_bit_s"].iloc[0]
    # the receiver clock's bound from the run's own traffic (both ends share one clock here)
    assert 0 < row["clock_bound_ns"] < 200_000 and abs(row["clock_offset_ns"]) < 200_000
    report = build_report(campaign)
    html = report.read_text()
    for name in ("intervals", "idc", "contracts", "process_trace"):
        assert (campaign / "plots" / f"{name}.png").stat().st_size > 1000, name
        assert f"plots/{name}.png" in html
    assert "Paper, table 3" in html
    assert pd.read_csv(campaign / "summary.csv")["run_id"].tolist() == summary["run_id"].tolist()
    # the long gaps of the run, as `hostwire gaps --summary` gives them
    from hostwire.timeline import gap_sources, gaps
    from hostwire.timeline.build import Timeline

    run = hostwire.load_run(campaign / "run-small")
    table_, _ = gaps.explain(gap_sources.gap_inputs(run), None, run.window())
    whole = gaps.summary(table_).set_index("stream").loc["all"]
    assert row["gaps"] == whole["gaps"] > 0 and row["gap_time_ns"] == whole["gap_ns"]
    shares = [row[f"gap_{c}_share"] for c in gaps.CAUSES]
    assert shares == [whole[f"{c}_share"] for c in gaps.CAUSES] and sum(shares) == pytest.approx(1.0)
    assert "Why the long gaps happen" in html and "plots/gap_causes.png" in html
    # each gap names its stream's sender: the streams table's pid; the trace never saw it run in
    # its short window, so its name is its benchmark role
    sender = Timeline.of(run).df_streams().set_index("stream")["sender_pid"]
    assert (table_["pid"].to_numpy() == sender[table_["stream"]].to_numpy()).all() and (table_["pid"] > 0).all()
    assert set(table_["comm"]) == {"send-0"} and set(table_["proto"]) == {"tcp"}


def test_analysis_leaves_out_a_run_still_being_recorded(campaign: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A campaign analysed while its runner records: the run in progress (status running, its
    runner alive: here this test) is left out and named, the others are analysed."""
    from hostwire.manifest import runner_identity

    live = campaign / "p001-M2-N0-r1-0000.partial"
    shutil.copytree(FIXTURE, live)
    manifest = json.loads((live / "manifest.json").read_text())
    manifest.update(status="running", runner=runner_identity())
    (live / "manifest.json").write_text(json.dumps(manifest))
    with caplog.at_level("WARNING"):
        summary = analyze_campaign(campaign, workers=1)
    assert summary["directory"].tolist() == ["run-small"]
    assert "1 run(s) still being recorded, left out: p001-M2-N0-r1-0000.partial" in caplog.text


def test_report_weighs_gap_causes_by_each_runs_gap_time(tmp_path: Path) -> None:
    """Two repetitions of one point: 1 s of gaps all wire-busy and 3 s all preempted give shares of
    0.25 and 0.75 (each run's shares weighted by its gap time, not averaged)."""
    from hostwire.timeline.gaps import CAUSES

    rows = []
    for rep, (gap_ns, cause) in enumerate(((1_000_000_000, "wire_busy"), (3_000_000_000, "preempted"))):
        row = {"run_id": f"r{rep}", "directory": f"r{rep}", "senders": 2, "background": 2, "repetition": rep,
               "status": "complete", "marked": 0, "mix": 0.5, "gaps": 10, "gap_time_ns": gap_ns,
               "gap_cannot_tell": ""}
        row.update({f"gap_{c}_share": float(c == cause) for c in CAUSES})
        rows.append(row)
    campaign = tmp_path / "gaps"
    campaign.mkdir()
    pd.DataFrame(rows).to_parquet(campaign / "summary.parquet", index=False)
    html = build_report(campaign).read_text()
    section = html.split("Why the long gaps happen")[1].split("</section>")[0]
    cells = re.findall(r"<td>([^<]*)</td>", section)
    header = re.findall(r"<th>([^<]*)</th>", section)
    values = dict(zip(header, cells))
    assert values["gaps"] == "20" and values["wire_busy"] == "0.250" and values["preempted"] == "0.750"
    assert values["unexplained"] == "0.000"
    assert (campaign / "plots" / "gap_causes.png").stat().st_size > 1000


def test_report_shows_whether_a_collector_set_changes_the_answer(tmp_path: Path) -> None:
    """A campaign varying the collector set: the report's accuracy table pairs each set's runs
    with the bare ones and gives the verdict (here: a kernel trace that costs exactly 1 Mbit/s of
    goodput in every pair changes the answer; Jain's index, equal in every pair, does not)."""
    rows = []
    for rep in range(3):
        for collectors, goodput in (("none", 9.0e6 + rep * 1e5), ("kernel", 8.0e6 + rep * 1e5)):
            rows.append({"run_id": f"{collectors}-{rep}", "directory": f"{collectors}-{rep}", "senders": 2,
                         "background": 2, "repetition": rep, "collectors": collectors, "status": "complete",
                         "marked": 0, "mix": 0.5, "goodput_bit_s": goodput, "goodput_app_bit_s": goodput,
                         "jain": 0.99 - rep * 0.001, "switches_per_s": 3000.0 + rep})
    campaign = tmp_path / "accuracy"
    campaign.mkdir()
    pd.DataFrame(rows).to_parquet(campaign / "summary.parquet", index=False)
    html = build_report(campaign).read_text()
    assert "Does a collector change the answer?" in html
    section = html.split("Does a collector change the answer?")[1].split("</section>")[0]
    assert "changes the answer (goodput_bit_s)" in section
    assert "jain" in section and "switches_per_s" in section


@pytest.mark.privileged("netns")
def test_a_run_without_a_capture_is_analysed_for_what_it_has_and_not_marked(tmp_path: Path, build_dir: Path) -> None:
    """A run recorded without the wire lacks a source, it lost nothing: the metrics that need the
    capture are named as not computed, the others (goodput and fairness from the receivers' logs,
    write intervals) are there, and the run is not marked."""
    from hostwire.campaign.analyze import analyze_run
    from hostwire.record.runner import RunPoint, record_run

    record = record_run(tmp_path, "bare", RunPoint(senders=2, background=1, warmup_s=0.3, duration_s=1.0,
                                                   quiet_s=0.3, capture=False, kernel_trace=False))
    assert record.status == "complete", record.reason
    row = analyze_run(record.directory)
    assert row["marked"] == 0 and row["errors"] == ""
    assert set(row["not_computed"].split(", ")) == {"idc", "bursts", "contract", "gaps"}
    assert row["goodput_bit_s"] > 5e6 and 0 < row["jain"] <= 1

