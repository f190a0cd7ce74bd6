"""What the model is judged against besides the summary's goodput and Jain's index: the share of
time the senders waited for the CPU, from the joined timeline's tables that `hostwire analyze`
caches in each run (tables/timeline-task_states-v*.parquet, timeline-running-v*.parquet)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd


def _newest(tables: Path, name: str) -> Path | None:
    found = sorted(tables.glob(f"timeline-{name}-v*.parquet"),
                   key=lambda p: int(re.search(r"-v(\d+)\.parquet$", p.name).group(1)))  # type: ignore[union-attr]
    return found[-1] if found else None


def sender_cpu_wait_share(run_dir: Path) -> float:
    """The senders' time runnable and not running within the window, over M x the window; nan
    when the run has no timeline tables (not analysed, or recorded without the kernel trace)."""
    states_path, running_path = _newest(run_dir / "tables", "task_states"), _newest(run_dir / "tables", "running")
    if states_path is None or running_path is None:
        return float("nan")
    try:
        start, end = json.loads((run_dir / "manifest.json").read_text())["window_ns"]
    except (OSError, ValueError, KeyError, TypeError):
        return float("nan")
    running = pd.read_parquet(running_path, columns=["pid", "role"])
    senders = running.loc[running["role"].str.startswith("send-"), "pid"].unique()
    if len(senders) == 0:
        return float("nan")
    states = pd.read_parquet(states_path, columns=["pid", "t_start_ns", "t_end_ns", "state"])
    waiting = states[states["state"].eq("runnable") & states["pid"].isin(senders)]
    inside = (np.minimum(waiting["t_end_ns"].to_numpy(), end) - np.maximum(waiting["t_start_ns"].to_numpy(), start))
    return float(inside.clip(min=0).sum() / (len(senders) * (end - start)))
