"""The receiver's own host in the gap causes (docs/timeline.md, "The receiver's host"): where the
receiver ran on another host of a `[hosts]` run, that host's kernel trace (raw/hosts/receiver/
sched.tsv) put on the sender's clock says what the receiving process did while its window or its
late acknowledgements held the sender back (the gaps' `receiver_window` time):

- `receiver_preempted`: it was runnable and another task ran on its CPU there (its preempters);
- `receiver_blocked`: it slept in the kernel (in a call that waits, or a sleep of its own);
- `receiver_not_reading`: it ran, or woke up on an idle CPU, and the bytes still waited.

The trace's stamps reach the sender's clock in two steps: the host's kernel clock onto its
user-space CLOCK_MONOTONIC by hw-schedtrace's trace_marker pair (manifest `clocks.<role>.trace_pair`),
then onto the sender's by Timeline.clock(), the method the manifest chose."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from hostwire.errors import InputError
from hostwire.timeline import tables
from hostwire.timeline.gap_tables import RECEIVER_PARTS
from hostwire.timeline.gap_tasks import describe, preempter_table, preempters
from hostwire.timeline.intervals import NONE, Cpus

if TYPE_CHECKING:
    from hostwire.run_directory import Run
    from hostwire.timeline.build import Timeline

RECEIVER_TRACE = "raw/hosts/receiver/sched.tsv"  # the receiver's machine's folder when it is not the sender's
RECEIVER_ROLE = "receiver"
BACKGROUND_ROLE = "receiver_background"  # hw-bench on the receiver's host that is not the receiver


@dataclass
class ReceiverHost:
    """The receivers' states on their own host, on the sender's clock: per receiver pid, the
    intervals it was preempted there (start, end, CPU) and asleep (start, end); the host's CPUs."""

    preempted: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]
    asleep: dict[int, tuple[np.ndarray, np.ndarray]]
    cpus: Cpus
    receivers: dict[str, int]  # stream -> receiver pid on that host

    def conditions(self, stream: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """The interval sets the gap explanation cuts its segments by (gaps._Explainer)."""
        pid = self.receivers.get(stream, -1)
        pre = self.preempted.get(pid)
        return {"rx_preempted": (pre[0], pre[1]) if pre is not None else NONE,
                "rx_asleep": self.asleep.get(pid, NONE)}

    def preempted_by(self, stream: str, first: np.ndarray, nxt: np.ndarray) -> np.ndarray:
        """Per gap [first, nxt): 'pid comm role share%; ...' of the tasks that ran on the
        receiver's CPU there while it waited for it within the gap."""
        pre = self.preempted.get(self.receivers.get(stream, -1))
        if pre is None or len(first) == 0:
            return np.full(len(first), "", dtype=object)
        s, e, cpu = pre
        i0 = np.searchsorted(e, first, side="right")  # disjoint, sorted intervals: ends ascend too
        i1 = np.searchsorted(s, nxt, side="left")
        n = np.maximum(i1 - i0, 0)
        gap = np.repeat(np.arange(len(first)), n)
        k = i0[gap] + np.arange(len(gap)) - np.repeat(np.cumsum(n) - n, n)
        rows = preempters(np.maximum(s[k], first[gap]), np.minimum(e[k], nxt[gap]), gap, cpu[k], self.cpus)
        return describe(preempter_table(stream, [rows] if len(rows) else [], first), first)


def split(holds: dict[str, np.ndarray]) -> np.ndarray:
    """Each segment's part of receiver_window, as its index in RECEIVER_PARTS."""
    return np.select([holds["rx_preempted"], holds["rx_asleep"]], [0, 1], default=2)


def trace_minus_user_ns(run: Run) -> float:
    """The receiver host's kernel trace clock minus its user-space monotonic clock (the mean of
    hw-schedtrace's start and stop pairs, as the manifest's clocks hold them)."""
    pair = ((run.manifest.get("clocks") or {}).get(RECEIVER_ROLE) or {}).get("trace_pair") or {}
    diffs = [float(d) for d in pair.get("trace_minus_user_us") or [] if d == d]
    if not diffs:
        sched_json = run.path / "raw" / "hosts" / RECEIVER_ROLE / "sched.json"
        check = json.loads(sched_json.read_text()).get("clock_check") or {} if sched_json.is_file() else {}
        diffs = [check[k]["diff_ns"] / 1e3 for k in ("start", "stop") if isinstance(check.get(k), dict)]
    if not diffs:
        raise InputError(f"{run.path / RECEIVER_TRACE}: no clock pair of the receiver host's trace and its "
                         "user-space clock (manifest clocks.receiver.trace_pair, sched.json clock_check)")
    return float(np.mean(diffs)) * 1e3


def receiver_host(run: Run, tl: Timeline, receivers: dict[str, int]) -> ReceiverHost | None:
    """The receivers' states on their own host (ReceiverHost); None when the run has no trace of
    a receiver's host of its own."""
    from hostwire.read.sched import read_sched_tsv

    path = run.path / RECEIVER_TRACE
    if not path.is_file() or not receivers:
        return None
    sched = read_sched_tsv(path)[1]
    offset = trace_minus_user_ns(run)
    fit = tl.clock()
    sched = sched.assign(t_ns=fit.to_sender(sched["t_ns"].to_numpy(np.int64) - offset))
    first, last = (int(sched["t_ns"].min()), int(sched["t_ns"].max())) if len(sched) else (0, 0)
    sw = tables.switches(sched)
    pids = set(receivers.values())
    bench = sw.loc[sw["next_comm"].astype(str).to_numpy() == "hw-bench", "next_pid"].astype(int).unique()
    roles = {**{int(p): BACKGROUND_ROLE for p in bench}, **{p: RECEIVER_ROLE for p in pids}}
    running = tables.running(sw, first, last, roles)
    states = tables.task_states(sw, tables.wakeups(sched), tables.migrations(sched), first, last)
    return from_tables(states, running, receivers)


def from_tables(states: pd.DataFrame, running: pd.DataFrame, receivers: dict[str, int]) -> ReceiverHost:
    """ReceiverHost from the receiver host's task states and running table (on the sender's
    clock; hostwire.timeline.tables' columns) and each stream's receiver pid there."""
    states = states[states["pid"].isin(list(set(receivers.values()))).to_numpy()]
    cpus = Cpus(running)
    preempted, asleep = {}, {}
    for pid, mine in states.groupby("pid"):
        waits = mine[(mine["state"] == "runnable").to_numpy()]
        preempted[int(pid)] = _busy_parts(waits, cpus)
        sleeps = mine[(mine["state"] == "sleeping").to_numpy()]
        asleep[int(pid)] = (sleeps["t_start_ns"].to_numpy(np.int64), sleeps["t_end_ns"].to_numpy(np.int64))
    return ReceiverHost(preempted, asleep, cpus, dict(receivers))


def _busy_parts(waits: pd.DataFrame, cpus: Cpus) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The parts of a task's runnable intervals in which another task (not the idle one) ran on
    its CPU: start, end, CPU, sorted (waiting on an idle CPU is its wake-up, not preemption)."""
    z = np.zeros(0, np.int64)
    out: list[tuple[np.ndarray, ...]] = []
    for c, rows in waits.groupby("cpu"):
        if int(c) not in cpus.by_cpu:
            continue
        rs, re_, rpid = cpus.by_cpu[int(c)][:3]
        s, e = rows["t_start_ns"].to_numpy(np.int64), rows["t_end_ns"].to_numpy(np.int64)
        i0 = np.searchsorted(re_, s, side="right")
        i1 = np.searchsorted(rs, e, side="left")
        n = np.maximum(i1 - i0, 0)
        w = np.repeat(np.arange(len(s)), n)
        k = i0[w] + np.arange(len(w)) - np.repeat(np.cumsum(n) - n, n)
        lo, hi = np.maximum(s[w], rs[k]), np.minimum(e[w], re_[k])
        keep = (hi > lo) & (rpid[k] != 0)
        out.append((lo[keep], hi[keep], np.full(int(keep.sum()), int(c), np.int64)))
    if not out:
        return z, z, z
    lo, hi, cpu = (np.concatenate([o[j] for o in out]) for j in range(3))
    order = np.argsort(lo, kind="stable")
    return lo[order], hi[order], cpu[order]

