#!/usr/bin/env python3
"""Benchmark of the timeline: task states and run queues from N synthetic context switches and
wake-ups on two CPUs, and the gap explanation of M synthetic data frames over four streams with
every cause's input present. Checks on the way that each CPU's intervals tile its span and that
every gap's parts sum to it.
Usage: perf/bench_timeline.py [--switches N] [--frames M]"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analyze"))

from hostwire.timeline import gaps, tables  # noqa: E402
from hostwire.timeline.gaps import GapInputs  # noqa: E402


def synthetic_sched(n: int, rng: np.random.Generator) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """n switches over two CPUs among 8 tasks per CPU, a wake-up before each switch-in."""
    t = np.cumsum(rng.integers(1_000, 50_000, n)).astype(np.int64)
    cpu = rng.integers(0, 2, n)
    nxt = np.empty(n, dtype=np.int64)
    prev = np.empty(n, dtype=np.int64)
    for c in (0, 1):  # per CPU the chain prev -> next: each switch's prev is the CPU's last next
        idx = np.flatnonzero(cpu == c)
        tasks = 100 + 10 * c + rng.integers(0, 8, len(idx))
        nxt[idx] = tasks
        prev[idx] = np.concatenate([[0], tasks[:-1]])
    state = rng.choice([0, 1, 256], n)
    sw = pd.DataFrame({"t_ns": t, "cpu": cpu, "prev_pid": prev, "prev_comm": "p", "prev_state": state,
                       "prev_runnable": (state & 255) == 0, "next_pid": nxt, "next_comm": "n"})
    wk = pd.DataFrame({"t_ns": t - 500, "cpu": cpu, "pid": nxt, "comm": "n", "target_cpu": cpu, "waker_pid": 0,
                       "waker_comm": "", "new": False})
    mg = pd.DataFrame({"t_ns": np.zeros(0, np.int64), "pid": np.zeros(0, np.int64), "comm": [], "orig_cpu": [],
                       "dest_cpu": []})
    return sw, wk, mg


def synthetic_gaps(m: int, rng: np.random.Generator) -> GapInputs:
    streams = [f"10.0.0.1:{4000 + i}>10.0.0.2:5001" for i in range(4)]
    t = np.cumsum(rng.exponential(20_000, m)).astype(np.int64)
    stream = rng.choice(streams, m)
    data = pd.DataFrame({"t_ns": t, "stream": stream, "wire_len": 1514, "payload_len": 1448})
    span = int(t[-1]) + 1
    k = max(m // 4, 2)
    cuts = np.sort(rng.integers(0, span, k))
    states = pd.concat([pd.DataFrame({"pid": 1000 + i, "t_start_ns": cuts[:-1], "t_end_ns": cuts[1:],
                                      "state": rng.choice(["running", "runnable", "sleeping"], k - 1), "cpu": 0})
                        for i in range(4)], ignore_index=True)
    running = pd.DataFrame({"cpu": 0, "t_start_ns": cuts[:-1], "t_end_ns": cuts[1:],
                            "pid": rng.choice([0, 7, 8], k - 1), "comm": "x", "role": "bg"})
    sends = pd.DataFrame({"stream": rng.choice(streams, k), "t_enter_ns": cuts,
                          "t_exit_ns": cuts + rng.integers(1_000, 30_000, k)})
    backlog = pd.DataFrame({"stream": rng.choice(streams, k), "t_ns": cuts, "backlog_bytes": rng.integers(0, 2, k) * 9000})
    window = pd.DataFrame({"stream": rng.choice(streams, k), "t_ns": cuts, "window_bytes": rng.choice([100.0, 6e4], k)})
    return GapInputs(data=data, rate_bit_s=1e9, senders={s: 1000 + i for i, s in enumerate(streams)}, states=states,
                     running=running, sends=sends, backlog=backlog, window=window, transmit_pids=[])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--switches", type=int, default=1_000_000)
    parser.add_argument("--frames", type=int, default=1_000_000)
    args = parser.parse_args()
    rng = np.random.default_rng(1)
    rows = []
    sw, wk, mg = synthetic_sched(args.switches, rng)
    first, last = int(wk["t_ns"].min()), int(sw["t_ns"].max())
    t0 = time.perf_counter()
    run = tables.running(sw, first, last, {})
    t1 = time.perf_counter()
    st = tables.task_states(sw, wk, mg, first, last)
    t2 = time.perf_counter()
    rq = tables.runqueue(st)
    t3 = time.perf_counter()
    for _, cpu in run.groupby("cpu"):
        s, e = cpu["t_start_ns"].to_numpy(), cpu["t_end_ns"].to_numpy()
        assert (s[1:] == e[:-1]).all(), "a CPU's intervals do not tile its span"
    assert (rq["nr_running"] >= 0).all()
    rows += [("running", args.switches, t1 - t0), ("task_states", args.switches + len(wk), t2 - t1),
             ("runqueue", len(st), t3 - t2)]
    inputs = synthetic_gaps(args.frames, rng)
    t0 = time.perf_counter()
    table, _ = gaps.explain(inputs)
    t1 = time.perf_counter()
    parts = table[[f"{c}_ns" for c in gaps.CAUSES]].sum(axis=1)
    assert (parts == table["gap_ns"]).all(), "the parts of a gap do not add up to it"
    rows.append((f"gaps ({len(table)} gaps)", args.frames, t1 - t0))
    print(f"{'step':<28}{'events':>12}{'seconds':>10}{'events/s':>14}")
    for name, n, sec in rows:
        print(f"{name:<28}{n:>12}{sec:>10.3f}{n / sec:>14.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
