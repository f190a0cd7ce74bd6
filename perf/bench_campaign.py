#!/usr/bin/env python3
"""Benchmark of the campaign tools, in one run: the runner's own cost per run (set-up, collectors
started and stopped, teardown: a run's wall time less its warm-up, window and quiet time), the
speed-up of `hostwire analyze` on two workers against one (8 runs), and the time of
`hostwire report` on a campaign of the paper's size (108 runs: the recorded runs linked again
under the paper grid's points).
Usage: perf/bench_campaign.py [--runs N]"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analyze"))

import pandas as pd  # noqa: E402

from hostwire.campaign.analyze import analyze_campaign  # noqa: E402
from hostwire.report.campaign_report import build_report  # noqa: E402
from hostwire.record.runner import RunPoint, record_run  # noqa: E402

TARGET_RUNNER_S = 1.5
TARGET_SPEEDUP = 1.6
TARGET_REPORT_S = 60.0


def record(campaign: Path, runs: int) -> tuple[list[float], list[float]]:
    """Records `runs` short runs (all collectors on); returns each run's own cost in seconds (the
    manifest's timing: the run's wall time less hw-bench main's) and hw-bench main's own time
    beyond its warm-up, window and quiet time (its start, clock exchanges and logs)."""
    runner, bench = [], []
    point = RunPoint(senders=2, background=1, warmup_s=0.5, duration_s=2.0, quiet_s=0.3)
    for i in range(runs):
        p = replace(point, senders=1 + i % 4, background=i // 4)
        result = record_run(campaign, f"r{i:02d}-M{p.senders}-N{p.background}", p)
        if result.status != "complete":
            raise SystemExit(f"run {i} {result.status}: {result.reason}")
        timing = result.manifest["timing"]
        runner.append(timing["runner_ns"] / 1e9)
        bench.append(timing["benchmark_ns"] / 1e9 - (p.warmup_s + p.duration_s + p.quiet_s))
    return runner, bench


def time_analyze(campaign: Path, workers: int) -> float:
    start = time.monotonic()
    analyze_campaign(campaign, workers=workers, force=True)
    return time.monotonic() - start


def paper_sized(campaign: Path, out: Path) -> Path:
    """A campaign of 108 run directories (the paper grid, three times), each a link to one of the
    recorded runs, with its summary row relabelled."""
    summary = pd.read_parquet(campaign / "summary.parquet")
    rows = []
    out.mkdir()
    i = 0
    for rep in range(3):
        for m in (1, 2, 5, 10, 15, 20):
            for n in (0, 1, 2, 5, 10, 20):
                source = summary.iloc[i % len(summary)]
                name = f"p-M{m}-N{n}-r{rep}"
                os.symlink(campaign / str(source["directory"]), out / name)
                row = source.copy()
                row["directory"], row["run_id"], row["senders"], row["background"] = name, name, m, n
                row["repetition"], row["mix"] = rep, m / (m + n)
                rows.append(row)
                i += 1
    pd.DataFrame(rows).to_parquet(out / "summary.parquet", index=False)
    (out / "campaign.json").write_text(json.dumps({"name": "paper-sized", "host": {}}))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hw-bench-campaign-", dir="/var/tmp") as tmp:
        campaign = Path(tmp) / "campaign"
        costs, bench = record(campaign, args.runs)
        median = statistics.median(costs)
        print(f"-- runner's own cost per run ({args.runs} runs, all collectors: set-up, collectors started and "
              f"stopped, teardown, manifest): median {median:.2f} s, min {min(costs):.2f} s, max {max(costs):.2f} s"
              f"  (target <= {TARGET_RUNNER_S} s: {'met' if median <= TARGET_RUNNER_S else 'MISSED'})")
        print(f"   hw-bench main beyond its warm-up, window and quiet time (receiver start, clock exchanges, "
              f"data file, logs): median {statistics.median(bench):.2f} s")
        one = min(time_analyze(campaign, 1) for _ in range(2))
        two = min(time_analyze(campaign, 2) for _ in range(2))
        print(f"-- hostwire analyze, {args.runs} runs: 1 worker {one:.2f} s, 2 workers {two:.2f} s, "
              f"speed-up {one / two:.2f}x  (target >= {TARGET_SPEEDUP}x: {'met' if one / two >= TARGET_SPEEDUP else 'MISSED'})")
        paper = paper_sized(campaign, Path(tmp) / "paper")
        start = time.monotonic()
        build_report(paper)
        seconds = time.monotonic() - start
        print(f"-- hostwire report, 108 runs (paper grid): {seconds:.1f} s  (target <= {TARGET_REPORT_S:.0f} s: "
              f"{'met' if seconds <= TARGET_REPORT_S else 'MISSED'})")
        shutil.rmtree(paper)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
