"""One run's Facts for hostwire diff (hostwire.diff.terms): its window, payload bytes and the
stream-time by component from the capture and the gap causes; the senders' CPU by kind and the
network's softirqs from the kernel trace (the softirq_entry/exit events of NET_TX and NET_RX,
sched_switch's running intervals) and the system calls; the hypervisor's steal per CPU from
/proc/stat."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from hostwire.diff.terms import TIME_PARTS, Facts
from hostwire.errors import HostwireError, InputError
from hostwire.run_directory import Run, load_run
from hostwire.timeline.gap_tables import CAUSE_NAMES, CAUSES, SUMMED, Totals
from hostwire.timeline.intervals import overlap_ns
from hostwire.window import Window

TIME_KEYS = (*TIME_PARTS, *(CAUSE_NAMES[c] for c in CAUSES))
CPU_KEYS = ("cpu-user", "cpu-calls", "cpu-softirq")  # cpu-task for user and calls where no call was traced


def run_facts(path: str, label: str = "") -> Facts:
    """The Facts of the run directory at path (a run without a capture is an InputError)."""
    from hostwire.timeline import gap_sources, gaps

    run = load_run(path)
    window = run.window()
    if window.length_ns <= 0:
        raise InputError(f"{path}: the run's window {window.describe()} has no length")
    first = gap_sources.long_trace(run)
    if first is None:
        inputs, slabs = gap_sources.gap_inputs(run), None
    else:
        inputs, slabs = gap_sources.slabbed_gap_inputs(run)
    sink = Totals()
    gaps.explain_into(sink, inputs, None, window, slabs=slabs,
                      on_comms=None if slabs is None else lambda: gap_sources.name_senders(inputs, slabs))
    nbytes = stream_bytes(run, inputs.data, inputs.protos, window)
    spans = stream_spans(inputs.data, window)
    time_ns = dict.fromkeys(TIME_KEYS, 0.0)
    for name in nbytes.index:
        lo, hi = spans.get(name, (0, 0))
        span = float(hi - lo)
        sums = sink.sums.get(name)
        caused = dict(zip(SUMMED, sums)) if sums is not None else {}
        gap_total = float(caused.get("gap_ns", 0))
        time_ns["outside"] += window.length_ns - span
        time_ns["sending"] += span - gap_total
        for c in CAUSES:
            time_ns[CAUSE_NAMES[c]] += float(caused.get(f"{c}_ns", 0))
    facts = Facts(window_ns=float(window.length_ns), bytes=float(nbytes.sum()), streams=len(nbytes),
                  time_ns=time_ns, label=label or str(path))
    if first is not None:
        facts.cpu_missing = "its kernel trace is long (read in slabs); the CPU terms read it whole"
        return facts
    senders = {int(p) for name, p in inputs.senders.items() if name in nbytes.index and int(p) > 0}
    try:
        cpu_facts(run, senders, window, facts)
    except HostwireError as err:
        facts.cpu_missing = str(err)
    return facts


def stream_bytes(run: Run, data: pd.DataFrame, protos: dict[str, str], window: Window) -> pd.Series:
    """Payload bytes per stream in the window: a TCP stream's unique bytes (hostwire metrics
    goodput), a UDP flow's data frames' payloads."""
    from hostwire.metrics.compute import table

    out: dict[str, float] = {}
    if any(p == "tcp" for p in protos.values()):
        good = table("goodput", run)
        out.update({str(s): float(b) for s, b in zip(good["stream"], good["bytes"]) if s != "all"})
    udp = [n for n, p in protos.items() if p == "udp"]
    if udp:
        t = data["t_ns"].to_numpy(np.int64)
        inside = (t >= window.start_ns) & (t < window.end_ns) & data["stream"].astype(str).isin(udp).to_numpy()
        sums = data[inside].groupby(data["stream"][inside].astype(str), observed=True)["payload_len"].sum()
        out.update({str(s): float(b) for s, b in sums.items()})
    return pd.Series(out, dtype=float).sort_index()


def stream_spans(data: pd.DataFrame, window: Window) -> dict[str, tuple[int, int]]:
    """Per stream, its first and last data frame in the window."""
    t = data["t_ns"].to_numpy(np.int64)
    inside = (t >= window.start_ns) & (t < window.end_ns)
    if not inside.any():
        return {}
    g = pd.DataFrame({"stream": data["stream"].astype(str).to_numpy()[inside], "t": t[inside]}).groupby("stream")["t"]
    lo, hi = g.min(), g.max()
    return {str(s): (int(lo[s]), int(hi[s])) for s in lo.index}


def clipped(t0: np.ndarray, t1: np.ndarray, window: Window) -> tuple[np.ndarray, np.ndarray]:
    return np.maximum(t0, window.start_ns), np.minimum(t1, window.end_ns)


def softirqs(sched: pd.DataFrame) -> pd.DataFrame:
    """The network's softirqs of the kernel trace: cpu, t_start_ns, t_end_ns, pid (the task they
    ran in, 0 for idle). An entry pairs with the next event of its CPU when that is its exit
    (softirqs do not nest on a CPU; an entry whose exit was lost is left out)."""
    ev = sched["event"].to_numpy()
    mine = np.isin(ev, ["softirq_entry", "softirq_exit"])
    if not mine.any():
        raise InputError("the kernel trace has no softirq_entry/exit events (recorded before hostwire traced them)")
    s = sched[mine]
    order = np.lexsort((s["t_ns"].to_numpy(), s["cpu"].to_numpy()))
    cpu, t = s["cpu"].to_numpy(np.int64)[order], s["t_ns"].to_numpy(np.int64)[order]
    entry = s["event"].to_numpy()[order] == "softirq_entry"
    pid = pd.to_numeric(s["pid"], errors="coerce").fillna(-1).to_numpy(np.int64)[order]
    pairs = np.flatnonzero(entry[:-1] & ~entry[1:] & (cpu[:-1] == cpu[1:]))
    return pd.DataFrame({"cpu": cpu[pairs], "t_start_ns": t[pairs], "t_end_ns": t[pairs + 1], "pid": pid[pairs]})


def task_runs(sched: pd.DataFrame, tasks: set[int]) -> pd.DataFrame:
    """When these tasks ran: cpu, t_start_ns, t_end_ns, pid. Each interval ends at a switch away
    from the task and starts at the switch to it just before on that CPU; where the trace has no
    such switch (the kernel does not always trace the switch out of idle: the one before names
    another task), at the task's first own event on that CPU after that switch (its events carry
    it as the current task), else at the switch away. A task still running at the trace's end ran
    until its CPU's last event."""
    rows = []
    switch = sched["event"].to_numpy() == "sched_switch"
    own = sched[~switch & sched["pid"].isin(list(tasks)).to_numpy()]
    for cpu, sw in sched[switch].groupby("cpu"):
        t = sw["t_ns"].to_numpy(np.int64)
        prev = pd.to_numeric(sw["prev_pid"]).to_numpy(np.int64)
        nxt = pd.to_numeric(sw["next_pid"]).to_numpy(np.int64)
        mine = own[own["cpu"].to_numpy() == cpu]
        for task in tasks:
            ends = np.flatnonzero(prev == task)
            before = ends - 1
            lo = np.where(before >= 0, t[np.maximum(before, 0)], np.iinfo(np.int64).min)
            chained = (before >= 0) & (nxt[np.maximum(before, 0)] == task)
            seen = mine["t_ns"].to_numpy(np.int64)[mine["pid"].to_numpy() == task]
            k = np.searchsorted(seen, lo, side="right")
            candidate = seen[np.minimum(k, len(seen) - 1)] if len(seen) else t[ends]
            first_own = np.where((k < len(seen)) & (candidate < t[ends]), candidate, t[ends])
            start = np.where(chained, lo, first_own)
            rows.append(pd.DataFrame({"cpu": cpu, "t_start_ns": start, "t_end_ns": t[ends], "pid": task}))
            if len(nxt) and nxt[-1] == task:  # running at the end
                last = int(sched["t_ns"].to_numpy(np.int64)[sched["cpu"].to_numpy() == cpu].max())
                rows.append(pd.DataFrame({"cpu": [cpu], "t_start_ns": [t[-1]], "t_end_ns": [last], "pid": [task]}))
    if not rows:
        return pd.DataFrame({c: np.zeros(0, np.int64) for c in ("cpu", "t_start_ns", "t_end_ns", "pid")})
    return pd.concat(rows, ignore_index=True)


def cpu_facts(run: Run, senders: set[int], window: Window, facts: Facts) -> None:
    """Fills facts' cpu_ns (the senders' tasks' run time as user, traced calls and softirq),
    uncharged_ns (the network's softirqs in other tasks) and per_cpu."""
    from hostwire.timeline.build import Timeline

    if not run.has("raw/sched.tsv"):
        raise InputError("the run has no kernel trace")
    if run.has("raw/syscalls.tsv"):
        calls = Timeline.of(run).df_calls()
    else:  # no calls traced: the senders' own tasks, their time in user mode and in calls together (cpu-task)
        calls = pd.DataFrame({c: np.zeros(0, np.int64) for c in ("pid", "tid", "t_enter_ns", "t_exit_ns")})
    tasks = set(senders) | {int(t) for t in calls.loc[calls["pid"].isin(list(senders)), "tid"]}
    irq = softirqs(run.df_sched())
    irq = irq.assign(**dict(zip(("t_start_ns", "t_end_ns"), clipped(irq["t_start_ns"].to_numpy(),
                                                                      irq["t_end_ns"].to_numpy(), window))))
    irq = irq[irq["t_end_ns"] > irq["t_start_ns"]]
    ran = task_runs(run.df_sched(), tasks)
    r0, r1 = clipped(ran["t_start_ns"].to_numpy(np.int64), ran["t_end_ns"].to_numpy(np.int64), window)
    mine = irq["pid"].isin(list(tasks)).to_numpy()
    run_ns = float(np.maximum(r1 - r0, 0).sum())
    softirq_ns = float((irq["t_end_ns"] - irq["t_start_ns"])[mine].sum())
    in_calls = softirq_in_calls = 0.0
    mycalls = calls[calls["tid"].isin(list(tasks))]
    for tid, c in mycalls.groupby("tid"):
        c0, c1 = clipped(c["t_enter_ns"].to_numpy(np.int64), c["t_exit_ns"].to_numpy(np.int64), window)
        on = ran["pid"].to_numpy() == tid
        in_calls += overlap_ns((r0[on], r1[on]), (c0, c1))
        own = irq[mine & (irq["pid"].to_numpy() == tid)]
        softirq_in_calls += overlap_ns((own["t_start_ns"].to_numpy(), own["t_end_ns"].to_numpy()), (c0, c1))
    if run.has("raw/syscalls.tsv"):
        facts.cpu_ns = {"cpu-user": run_ns - in_calls - (softirq_ns - softirq_in_calls),
                        "cpu-calls": in_calls - softirq_in_calls, "cpu-softirq": softirq_ns}
    else:
        facts.cpu_ns = {"cpu-task": run_ns - softirq_ns, "cpu-softirq": softirq_ns}
    facts.uncharged_ns = float((irq["t_end_ns"] - irq["t_start_ns"])[~mine].sum())
    per = irq.assign(ns=irq["t_end_ns"] - irq["t_start_ns"], senders=mine)
    for cpu, g in per.groupby("cpu"):
        facts.per_cpu[str(cpu)] = {"softirq_senders_ns": float(g.loc[g["senders"], "ns"].sum()),
                                   "softirq_other_ns": float(g.loc[~g["senders"], "ns"].sum())}
    for cpu, ns in steal_ns(run, window).items():
        facts.per_cpu.setdefault(str(cpu), {"softirq_senders_ns": 0.0, "softirq_other_ns": 0.0})["steal_ns"] = ns


def steal_ns(run: Run, window: Window) -> dict[int, float]:
    """Per CPU, the hypervisor's steal time over the window, from the /proc/stat samples that
    bracket it (NaN where none does)."""
    if not run.has("raw/resources.tsv"):
        return {}
    r = run.df_resources()
    out = {}
    for cpu, g in r[r["cpu"] >= 0].groupby("cpu"):
        t = g["t_ns"].to_numpy(np.int64)
        i0 = int(np.searchsorted(t, window.start_ns, side="right")) - 1
        i1 = int(np.searchsorted(t, window.end_ns, side="left"))
        if i0 < 0 or i1 >= len(t):
            out[int(cpu)] = math.nan
            continue
        s = g["steal_ns"].to_numpy(np.float64)
        out[int(cpu)] = float(s[i1] - s[i0])
    return out
