"""What the model is judged against besides the summary's goodput and Jain's index: the share of
time the senders waited for the CPU, from the joined timeline's tables that `hostwire analyze`
caches in each run (tables/timeline-task_states.parquet, timeline-running.parquet), read through
the cache's check that they were made from the run's files as they are, by today's code."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from hostwire.errors import HostwireError
from hostwire.run_directory import load_run
from hostwire.timeline import cache


def sender_cpu_wait_share(run_dir: Path) -> float:
    """The senders' time runnable and not running within the window, over M x the window; nan
    when the run has no timeline tables made from its files by today's code (not analysed, or
    recorded without the kernel trace)."""
    try:
        start, end = json.loads((run_dir / "manifest.json").read_text())["window_ns"]
        run = load_run(run_dir)
    except (OSError, ValueError, KeyError, TypeError, HostwireError):
        return float("nan")
    if run.source_problems():
        return float("nan")
    key = cache.made_by(run.sources_fingerprint())
    running = cache.read_copy(cache.path_of(run_dir, "running"), key)
    states = cache.read_copy(cache.path_of(run_dir, "task_states"), key)
    if running is None or states is None:
        return float("nan")
    senders = running.loc[running["role"].str.startswith("send-"), "pid"].unique()
    if len(senders) == 0:
        return float("nan")
    waiting = states[states["state"].eq("runnable") & states["pid"].isin(senders)]
    inside = (np.minimum(waiting["t_end_ns"].to_numpy(), end) - np.maximum(waiting["t_start_ns"].to_numpy(), start))
    return float(inside.clip(min=0).sum() / (len(senders) * (end - start)))
