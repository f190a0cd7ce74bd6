"""An excerpt of a run's timeline around its longest off period (the paper's figure 2): the data
frames of every stream and the senders' writes in a span of time, and what ran on the sender's
CPUs there (from the joined timeline's running table, with its roles). A recorded program's
writes are its traced send calls (hostwire record), each named by its process (comm and pid)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from hostwire.metrics.streams import data_frames, label_streams
from hostwire.run_directory import Run
from hostwire.timeline.build import Timeline
from hostwire.units import parse_cpu_list

SPAN_NS = 600_000_000  # the excerpt shows 0.6 s: a third before the off period's start, the rest after


@dataclass
class Excerpt:
    """frames: the data frames in the span (stream, t_ns, ...); writes: the senders' writes in it
    (role, t_ns, stream, ...); running: what ran on the sender's CPUs, one row per task switch
    (t_ns, t_end_ns, role, pid, comm), None without a kernel trace; t0_ns: the start of the longest off
    period, gap_ns its length, stream its stream."""

    frames: pd.DataFrame
    writes: pd.DataFrame
    running: pd.DataFrame | None
    t0_ns: int
    gap_ns: int
    stream: str = ""


def longest_off_period(run: Run, span_ns: int = SPAN_NS, stream: str | None = None,
                       running_of: Callable[[int, int], pd.DataFrame] | None = None) -> Excerpt | None:
    """The excerpt around the longest gap between two data frames of one stream in the run's
    window (of `stream` only, when given; the frames of every stream are shown); None when the
    window holds fewer than two data frames (of that stream). running_of(lo, hi): the running
    table's rows that reach into [lo, hi) (a long trace's slabs: KernelSlabs.running_between),
    instead of the whole table's."""
    start, end = run.window_ns()
    every = data_frames(label_streams(run.df_frames()))
    every = every[(every["t_ns"] >= start) & (every["t_ns"] <= end)]
    frames = every if stream is None else every[every["stream"].astype(str).to_numpy() == stream]
    if len(frames) < 2:
        return None
    t = frames["t_ns"].to_numpy(np.int64)
    codes = frames["stream"].cat.codes.to_numpy()
    order = np.lexsort((t, codes))
    gaps = np.where(codes[order][1:] == codes[order][:-1], np.diff(t[order]), 0)
    k = int(np.argmax(gaps))
    t0 = int(t[order][k])
    lo, hi = t0 - span_ns // 3, t0 + 2 * span_ns // 3
    writes = _writes(run)
    return Excerpt(frames=every[(every["t_ns"] >= lo) & (every["t_ns"] <= hi)],
                   writes=writes[(writes["t_ns"] >= lo) & (writes["t_ns"] <= hi)],
                   running=_running(run, lo, hi, running_of), t0_ns=t0, gap_ns=int(gaps[k]),
                   stream=str(frames["stream"].cat.categories[codes[order][k]]))


def _writes(run: Run) -> pd.DataFrame:
    """The benchmark's logged writes; for a run without them (a recorded program), the traced
    send calls of each stream, named by their process ("comm pid")."""
    writes = run.df_writes()
    if len(writes) or not run.has("raw/syscalls.tsv"):
        return writes
    tl = Timeline.of(run)
    sends = tl.writes()
    names = tl.df_streams().groupby("sender_pid")["sender_role"].first()
    pid = sends["pid"].to_numpy(np.int64)
    comm = pd.Series(pid).map(names).fillna("").astype(str).to_numpy()
    return pd.DataFrame({"t_ns": sends["t_enter_ns"].to_numpy(np.int64),
                         "t_end_ns": sends["t_exit_ns"].to_numpy(np.int64),
                         "pid": pid, "role": np.char.add(np.char.add(comm.astype(str), " "), pid.astype(str)),
                         "stream": sends["stream"].astype(str).to_numpy(), "bytes": sends["bytes"].to_numpy()})


def _running(run: Run, lo: int, hi: int, running_of: Callable[[int, int], pd.DataFrame] | None
             ) -> pd.DataFrame | None:
    if not run.has("raw/sched.tsv"):
        return None
    cpus = parse_cpu_list(str(run.point_value("sender_cpus")))
    r = Timeline.of(run).df_running() if running_of is None else running_of(lo, hi)
    r = r[r["cpu"].isin(cpus).to_numpy() & (r["t_end_ns"] > lo).to_numpy() & (r["t_start_ns"] < hi).to_numpy()]
    r = r.sort_values("t_start_ns", kind="stable")
    return pd.DataFrame({"t_ns": np.maximum(r["t_start_ns"].to_numpy(np.int64), lo),
                         "t_end_ns": np.minimum(r["t_end_ns"].to_numpy(np.int64), hi),
                         "role": r["role"].astype(str).to_numpy(), "pid": r["pid"].to_numpy(np.int64),
                         "comm": r["comm"].astype(str).to_numpy()})
