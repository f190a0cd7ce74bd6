"""What one run's scatter about its point's mean goes with, over a campaign's complete runs (each
figure taken about its point's mean, so that the points' own levels do not count):
- steal: the hypervisor's steal on each CPU over the window (/proc/stat samples) against goodput;
- sieves: the background processes' CPU per sieve round (their run time from the kernel trace
  over the rounds they logged in the window) against the senders' CPU per byte (hostwire diff's
  cpu-task), points with background processes only;
- halves: the goodput of the window's first half against its second half.

  .venv/bin/python perf/scatter_checks.py CAMPAIGN_DIR"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from hostwire.diff.run_facts import clipped, run_facts, steal_ns, task_runs
from hostwire.run_directory import load_run

SENDER = "198.18.0.1"


def about_mean(df: pd.DataFrame, column: str) -> pd.Series:
    return df[column] / df.groupby("point")[column].transform("mean") - 1


def run_row(run_dir: Path, point: tuple[int, int]) -> dict[str, float | tuple[int, int]]:
    run = load_run(run_dir)
    w = run.window()
    frames = run.df_frames()
    data = frames[(frames["src"] == SENDER) & (frames["payload_len"] > 0)
                  & (frames["t_ns"] >= w.start_ns) & (frames["t_ns"] < w.end_ns)]
    middle = w.start_ns + (w.end_ns - w.start_ns) // 2
    steal = steal_ns(run, w)
    facts = run_facts(str(run_dir))
    row: dict[str, float | tuple[int, int]] = {
        "point": point, "goodput": facts.goodput_bit_s, "steal_cpu0_ms": steal.get(0, np.nan) / 1e6,
        "steal_cpu1_ms": steal.get(1, np.nan) / 1e6,
        "first_half_bytes": float(data["payload_len"][data["t_ns"] < middle].sum()),
        "second_half_bytes": float(data["payload_len"][data["t_ns"] >= middle].sum()),
        "task_ns_per_byte": (facts.cpu_ns or {}).get("cpu-task", np.nan) / facts.bytes}
    bench = json.loads((run_dir / "raw/bench/bench.json").read_text())
    sieves = [p for p in bench["processes"] if p["kind"] == "background"]
    if sieves:
        ran = task_runs(run.df_sched(), {int(p["pid"]) for p in sieves})
        r0, r1 = clipped(ran["t_start_ns"].to_numpy(np.int64), ran["t_end_ns"].to_numpy(np.int64), w)
        rounds = 0
        for p in sieves:
            log = pd.read_csv(run_dir / f"raw/bench/{p['role']}.tsv", sep="\t", comment="#")
            rounds += int(((log["t_ns"] >= w.start_ns) & (log["t_ns"] < w.end_ns)).sum())
        row["sieve_ms_per_round"] = float(np.maximum(r1 - r0, 0).sum()) / max(rounds, 1) / 1e6
    return row


def main() -> int:
    campaign = Path(sys.argv[1])
    book = json.loads((campaign / "campaign.json").read_text())
    rows = [run_row(campaign / e["run_id"], (e["point"]["senders"], e["point"]["background"]))
            for e in book["runs"] if e["status"] == "complete"]
    df = pd.DataFrame(rows)
    g = about_mean(df, "goodput")
    for cpu in ("steal_cpu0_ms", "steal_cpu1_ms"):
        print(f"{cpu}: mean {df[cpu].mean():.0f} ms of the window; r with goodput about its point's mean "
              f"{np.corrcoef(df[cpu], g)[0, 1]:+.2f}")
    if "sieve_ms_per_round" in df:
        bg = df[df["sieve_ms_per_round"].notna()].copy()
        print(f"sieves: r(CPU per round, senders' CPU per byte) {np.corrcoef(about_mean(bg, 'sieve_ms_per_round'), about_mean(bg, 'task_ns_per_byte'))[0, 1]:+.2f} "
              f"over {len(bg)} runs")
    h1, h2 = about_mean(df, "first_half_bytes"), about_mean(df, "second_half_bytes")
    print(f"halves: r(first, second) {np.corrcoef(h1, h2)[0, 1]:+.2f}; scatter of a half {100 * h1.std():.1f} and "
          f"{100 * h2.std():.1f} %, of the whole window {100 * g.std():.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
