"""`hostwire report RUN` on one benchmark run (a copy of the committed fixture run, without root):
every section, the numbers checked against what the benchmark logged and the link allows, every
figure it references on disk, and a run that lacks its capture or its kernel trace reported all
the same, each missing input named where its figure would be."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hostwire.report.run_report import build_run_report
from hostwire.paths import REPO_ROOT
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the helpers beside this file (importlib mode)
from report_pages import SECTIONS, WIRE_SECTIONS, figures_on_disk, parse

FIXTURE = REPO_ROOT / "tests" / "fixtures" / "run-small"


def report(run: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hostwire", "report", str(run)], capture_output=True, text=True,
                          timeout=300)


@pytest.fixture
def run(tmp_path: Path) -> Path:
    out = tmp_path / "run-small"
    shutil.copytree(FIXTURE, out)
    return out


def test_benchmark_run(run: Path) -> None:
    proc = report(run)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(run / "report.html")
    tables, texts = parse(run / "report.html")
    assert list(tables) == list(SECTIONS)
    assert set(figures_on_disk(run)) == {f"plots/{n}.png" for n in
                                         ("gap_causes", "process_trace", "intervals", "idc", "contracts")}
    recorded = dict(tables["What was recorded"][0].to_numpy())
    assert recorded["grid point"] == "M = 1 senders, N = 1 background processes"
    assert recorded["duration"].startswith("0.400 s")  # the fixture's logging window, 0.4 s
    assert recorded["link rate"] == "10 Mbit/s (the run's shaper)"
    # the stream and its two ends as the benchmark logged them
    bench = json.loads((run / "raw" / "bench" / "bench.json").read_text())
    sender = next(p for p in bench["processes"] if p["role"] == "send-0")
    receiver = next(p for p in bench["receivers"] if p["role"] == "recv-0")
    (streams,) = tables["Streams"]
    assert len(streams) == 1
    row = streams.iloc[0]
    assert (int(row["pid"]), row["process"], row["receiver"]) == (sender["pid"], "send-0", f"recv-0 {receiver['pid']}")
    # one sender fills a 10 Mbit/s shaper: goodput near, and never above, the payload share of
    # full-size frames with TCP timestamps (1448 of 1514 bytes)
    assert 9.0 < float(row["goodput [Mbit/s]"]) <= 10 * 1448 / 1514
    assert int(row["unique bytes"]) * 8 / 0.4 == pytest.approx(float(row["goodput [Mbit/s]"]) * 1e6, rel=1e-3)
    # each stream's causes are shares of its gap time
    shares = tables["Why the long gaps happen"][0]
    causes = shares.columns[3:]
    assert "app-idle" in causes and "preempted" in causes
    assert (shares[causes].astype(float).sum(axis=1) - 1).abs().max() < 0.002  # three decimals each
    # the process trace's off period is the longest frame interval of that stream
    intervals = tables["Frame intervals"][0]
    longest = float(intervals.loc[intervals["stream"] == "all streams", "max [ms]"].iloc[0])
    caption = re.search(r"the most \((\d+\.\d) ms, at 0\)", texts["Process trace around the longest off period"])
    assert caption is not None and abs(float(caption.group(1)) - longest) <= 0.05


def test_a_missing_capture_or_kernel_trace_is_named_in_place(run: Path, tmp_path: Path) -> None:
    no_trace = tmp_path / "no-trace"
    shutil.copytree(run, no_trace)
    (no_trace / "raw" / "sched.tsv").unlink()
    (run / "raw" / "wire.pcap").unlink()
    for directory in (run, no_trace):
        assert build_run_report(directory) == directory / "report.html"
    tables, texts = parse(run / "report.html")
    assert list(tables) == list(SECTIONS)
    for title in WIRE_SECTIONS:
        assert "this run has no wire capture (raw/wire.pcap)" in texts[title], title
    assert figures_on_disk(run) == []
    recorded = dict(tables["What was recorded"][0].to_numpy())
    assert recorded["recorded"].startswith("no wire capture, kernel trace")
    assert "raw/wire.pcap: missing" in recorded["sources"]
    tables, texts = parse(no_trace / "report.html")
    assert "this run has no kernel trace (raw/sched.tsv)" in texts["Process trace around the longest off period"]
    assert "no kernel trace (raw/sched.tsv)" in texts["Why the long gaps happen"]
    assert len(figures_on_disk(no_trace)) == 5


def test_digest_is_a_campaign_option_and_a_missing_path_is_named(run: Path) -> None:
    """--digest on a run is a usage error; a path that is no directory is named in one line."""
    proc = subprocess.run([sys.executable, "-m", "hostwire", "report", "--digest", str(run)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "--digest is for a campaign" in proc.stderr and not (run / "report.html").exists()
    missing = subprocess.run([sys.executable, "-m", "hostwire", "report", str(run / "nothing")], capture_output=True,
                             text=True, timeout=60)
    expected = f"hostwire: {run / 'nothing'}: no such directory (a campaign or a run directory)\n"
    assert missing.returncode == 1 and missing.stderr == expected
