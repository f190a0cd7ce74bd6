"""Every long gap between consecutive data frames of a stream, split into causes that add up
exactly to the gap (docs/timeline.md, "Gaps").

Each cause is a set of time intervals (its condition holds there); all their boundaries cut each
gap into elementary segments on which every condition is constant, and each segment goes to the
first cause that holds, in this precedence:

1. on-wire: the stream's own previous frame still occupies the link (its length at the link rate);
2. receiver-window: the usable window (the right edge the receiver last advertised, minus the
   highest byte sent) is below one segment; and, after the application's causes (see 7), the
   receiver acknowledging late;
3. wire-busy: the stream has bytes in its backlog and the link carries another stream's frame;
4. preempted: the backlog is empty and the sender is runnable but not running; or the backlog is
   not empty and a task that moves the stream's bytes on is runnable but not running: the
   kernel's deferred network work (ksoftirqd), or the stream's receiver when it runs on this host
   (preempted inside recv, it holds its socket: the segments wait in the socket's backlog
   unacknowledged and the sender's congestion window runs out). Another task runs on that CPU:
   named, with its share, in the preempters table (a task that waits while its CPU runs idle is
   waking up, not preempted: that time goes to the later causes; unless the sender's host ran
   under a CPU quota, which then holds the task: preempted, by the idle task, role "throttled");
5. blocked-in-call: the backlog is empty and the sender is inside a send call that has not returned;
6. app-idle: the backlog is empty and the sender is outside any send call (running or asleep);
7. receiver-window again: bytes in the backlog and the oldest byte in flight waiting for its
   acknowledgement longer than twice the stream's shortest round trip (the congestion window is
   full and the receiver delays its acknowledgements, as a Linux receiver whose application
   stopped reading does);
8. unexplained: anything else (bytes in the backlog, window open, link free: the stack held them).

The application's causes (4 to 6) need an empty backlog: while the stack has bytes to send, the
sender's own state does not hold the stream back. Without a backlog (no writes known) that gating
is left out and the table says so. All stamps are int64 ns, so the parts sum exactly to the gap."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from hostwire.errors import InputError

CAUSES = ("on_wire", "receiver_window", "wire_busy", "preempted", "blocked_in_call", "app_idle", "unexplained")
CAUSE_NAMES = {c: c.replace("_", "-") for c in CAUSES}
GAP_COLUMNS = ["stream", "t_start_ns", "t_end_ns", "gap_ns", "threshold_ns", *[f"{c}_ns" for c in CAUSES],
               "preempted_by"]
PREEMPTER_COLUMNS = ["stream", "t_start_ns", "pid", "comm", "role", "cpu", "ns", "share"]


@dataclass
class GapInputs:
    """What the gap analysis reads. data: the data frames of every stream (t_ns, stream, wire_len);
    link: the frames sharing the data direction of the link (t_ns, stream, wire_len; default:
    data); senders: stream -> sender pid; states: task states (pid, t_start_ns, t_end_ns, state,
    cpu) or None without a kernel trace; running: per-CPU intervals (cpu, t_start_ns, t_end_ns,
    pid, comm, role) or None; sends: stream, t_enter_ns, t_exit_ns of the senders' send calls, or
    None; backlog: stream, t_ns, backlog_bytes, or None; window: stream, t_ns, window_bytes (the
    usable window from each frame on: build.usable_window; NaN when unknown), or None; late_acks:
    stream, t_start_ns, t_end_ns where the oldest byte in flight waits for its acknowledgement
    (build.late_acknowledgements), or None. rate_bps: the link rate."""

    data: pd.DataFrame
    rate_bps: float
    senders: dict[str, int] = field(default_factory=dict)
    receivers: dict[str, int] = field(default_factory=dict)  # stream -> receiver pid on this host
    link: pd.DataFrame | None = None
    states: pd.DataFrame | None = None
    running: pd.DataFrame | None = None
    sends: pd.DataFrame | None = None
    backlog: pd.DataFrame | None = None
    window: pd.DataFrame | None = None
    late_acks: pd.DataFrame | None = None  # stream, t_start_ns, t_end_ns: build.late_acknowledgements
    sources: dict[str, str] = field(default_factory=dict)  # what each input was built from
    transmit_pids: list[int] | None = None  # kernel threads sending for any socket (default: ksoftirqd/*)
    # The sender's host ran under a CPU quota (cgroup cpu.max): a runnable task waiting while its CPU
    # idles is throttled (its group's quota is spent), not waking up.
    cpu_quota: bool = False

    def transmitters(self) -> list[int]:
        if self.transmit_pids is not None:
            return list(self.transmit_pids)
        if self.running is None or len(self.running) == 0:
            return []
        r = self.running
        ks = r[r["comm"].astype(str).str.startswith("ksoftirqd/").to_numpy()]
        return sorted(int(p) for p in ks["pid"].unique())

    def cannot_tell(self) -> list[str]:
        """The causes this input cannot tell apart, one sentence each."""
        out = []
        if self.states is None:
            out.append("without a kernel trace (raw/sched.tsv) preempted cannot be told apart from "
                       "blocked-in-call and app-idle: a runnable sender counts as one of them")
        if self.sends is None:
            out.append("without system calls or the benchmark's writes blocked-in-call cannot be told apart "
                       "from app-idle")
        if self.backlog is None:
            out.append("without the writes the backlog is unknown: wire-busy holds whenever another stream "
                       "holds the link, and the application's causes are not gated on an empty backlog")
        if self.window is None or not np.isfinite(pd.to_numeric(self.window["window_bytes"],
                                                                errors="coerce")).any():
            out.append("the receiver's window is unknown (no handshake captured): receiver-window is never told")
        return out


def union(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint, sorted union of half-open intervals [start, end) (empty ones dropped)."""
    s = np.asarray(starts, dtype=np.int64)
    e = np.asarray(ends, dtype=np.int64)
    keep = e > s
    s, e = s[keep], e[keep]
    if len(s) == 0:
        return s, e
    o = np.argsort(s, kind="stable")
    s, e = s[o], e[o]
    reach = np.maximum.accumulate(e)
    new = np.ones(len(s), dtype=bool)
    new[1:] = s[1:] > reach[:-1]
    first = np.flatnonzero(new)
    return s[first], np.maximum.reduceat(e, first)


def covered(x: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For sorted points and sorted disjoint intervals [start, end): whether each point lies in
    one, and which (-1: none). Counts, for every point, the starts and the ends at or before it
    (the intervals are placed among the points, fewer searches than the other way round)."""
    if len(starts) == 0:
        return np.zeros(len(x), dtype=bool), np.full(len(x), -1, dtype=np.int64)
    n = len(x)
    started = np.cumsum(np.bincount(np.searchsorted(x, starts, side="left"), minlength=n + 1)[:n])
    ended = np.cumsum(np.bincount(np.searchsorted(x, ends, side="left"), minlength=n + 1)[:n])
    ok = started > ended
    return ok, np.where(ok, started - 1, -1)


def wire_ns(wire_len: np.ndarray, rate_bps: float) -> np.ndarray:
    """Time a frame of wire_len bytes holds the link, ns (rounded up)."""
    return np.ceil(np.asarray(wire_len, dtype=np.float64) * 8e9 / float(rate_bps)).astype(np.int64)


_NONE = (np.zeros(0, np.int64), np.zeros(0, np.int64))


def _split(key: np.ndarray, sort_by: np.ndarray, *columns: np.ndarray) -> dict[int, tuple[np.ndarray, ...]]:
    """Rows grouped by an integer key, each group ordered by sort_by (ties keep their order):
    key -> the group's slice of each column."""
    if len(key) == 0:
        return {}
    order = np.lexsort((sort_by, key))
    key = key[order]
    ordered = [c[order] for c in columns]
    bounds = np.flatnonzero(np.r_[True, key[1:] != key[:-1], True])
    return {int(key[lo]): tuple(c[lo:hi] for c in ordered) for lo, hi in zip(bounds[:-1], bounds[1:])}


class _ByStream:
    """Some int64 columns of a table with a stream column, split by stream once (the string column
    is converted once, not once per stream)."""

    def __init__(self, df: pd.DataFrame | None, columns: tuple[str, ...], order_by: str | None = None) -> None:
        self.rows: dict[str, dict[str, np.ndarray]] = {}
        if df is None or len(df) == 0:
            return
        codes, names = pd.factorize(df["stream"].astype(str).to_numpy())
        values = {c: (df[c].to_numpy().astype(np.int64) if c != "value"
                      else np.asarray(df[c], dtype=np.float64)) for c in columns}
        sort_by = values[order_by] if order_by is not None else np.zeros(len(codes), np.int64)
        for code, parts in _split(codes, sort_by, *values.values()).items():
            if code >= 0:  # -1: no stream
                self.rows[str(names[code])] = dict(zip(values, parts))

    def get(self, stream: str) -> dict[str, np.ndarray] | None:
        return self.rows.get(stream)


def _steps(rows: dict[str, np.ndarray] | None, test, t_end: int) -> tuple[np.ndarray, np.ndarray]:
    """Intervals [t_i, t_i+1) of one stream's step function (t_ns sorted, value) where test(value)
    holds."""
    if rows is None or len(rows["t_ns"]) == 0:
        return _NONE
    t = rows["t_ns"]
    nxt = np.append(t[1:], max(t_end, int(t[-1])))
    hold = test(rows["value"])
    return union(t[hold], nxt[hold])


def _numeric(df: pd.DataFrame | None, value: str) -> pd.DataFrame | None:
    """df with its `value` column as float64 named "value" (NaN where not a number)."""
    if df is None:
        return None
    return df.assign(value=pd.to_numeric(df[value], errors="coerce").to_numpy(dtype=np.float64))


def _within(x: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The points of sorted x that lie in some [a_i, b_i) of sorted disjoint intervals."""
    i0 = np.searchsorted(x, a, side="left")
    i1 = np.searchsorted(x, b, side="left")
    n = np.maximum(i1 - i0, 0)
    total = int(n.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    idx = np.repeat(i0 - (np.cumsum(n) - n), n) + np.arange(total)
    return x[idx]


def _unique_sorted(x: np.ndarray) -> np.ndarray:
    """np.unique of int64 by sorting (numpy 2.4's hash-based np.unique is about 25 times slower
    on millions of stamps)."""
    x = np.sort(x)
    keep = np.ones(len(x), dtype=bool)
    keep[1:] = x[1:] != x[:-1]
    return x[keep]


def _ascending(x: np.ndarray) -> np.ndarray:
    """x sorted (the ends of one task's intervals usually are already)."""
    return x if len(x) < 2 or bool((x[1:] >= x[:-1]).all()) else np.sort(x)


class _Cpus:
    """The running table split by CPU once: sorted starts and ends, pids, comms and roles."""

    def __init__(self, running: pd.DataFrame | None) -> None:
        self.by_cpu: dict[int, tuple[np.ndarray, ...]] = {}
        self.starts = np.zeros(0, np.int64)
        if running is None or len(running) == 0:
            return
        start = running["t_start_ns"].to_numpy().astype(np.int64)
        self.by_cpu = _split(running["cpu"].to_numpy().astype(np.int64), start, start,
                             running["t_end_ns"].to_numpy().astype(np.int64),
                             running["pid"].to_numpy().astype(np.int64),
                             running["comm"].astype(str).to_numpy(dtype=object),
                             running["role"].astype(str).to_numpy(dtype=object))
        self.starts = np.sort(start)


class _Runnable:
    """Every task's runnable (waiting) intervals, split by pid once (the task-state table of a
    long run has millions of rows; each stream asks for a few pids)."""

    def __init__(self, states: pd.DataFrame | None) -> None:
        self.by_pid: dict[int, tuple[np.ndarray, ...]] = {}
        if states is None or len(states) == 0:
            return
        st = states[np.asarray(states["state"].isin(["runnable"]), dtype=bool)]
        start = st["t_start_ns"].to_numpy().astype(np.int64)
        self.by_pid = _split(st["pid"].to_numpy().astype(np.int64), start, start,
                             st["t_end_ns"].to_numpy().astype(np.int64), st["cpu"].to_numpy().astype(np.int64))

    def of(self, pid: int) -> tuple[np.ndarray, ...]:
        """One task's runnable intervals, sorted: starts, ends, CPUs."""
        z = np.zeros(0, np.int64)
        return self.by_pid.get(pid, (z, z, z)) if pid > 0 else (z, z, z)


def explain(inputs: GapInputs, min_gap_ns: int | None = None, window_ns: tuple[int, int] | None = None,
            streams: list[str] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The gaps longer than min_gap_ns (default: twice the time the gap's first frame holds the
    link) between consecutive data frames of each stream whose both frames lie in window_ns, with
    the ns of each cause (GAP_COLUMNS), and the tasks that ran while the sender waited
    (PREEMPTER_COLUMNS: per gap and task, ns and share of the gap's preempted time)."""
    data = inputs.data
    for col in ("t_ns", "stream", "wire_len"):
        if col not in data.columns:
            raise InputError(f"data frames: missing column {col}")
    if inputs.rate_bps <= 0:
        raise InputError(f"link rate {inputs.rate_bps}: expected > 0 bit/s")
    link = inputs.link if inputs.link is not None else data
    names = sorted(str(n) for n in pd.unique(data["stream"].astype(str).to_numpy()))
    if streams:
        names = [n for n in names if n in streams]
    gap_tables, pre_tables = [], []
    lt = link["t_ns"].to_numpy().astype(np.int64)
    lw = wire_ns(link["wire_len"].to_numpy(), inputs.rate_bps)
    lcode, lnames = pd.factorize(link["stream"].astype(str).to_numpy())
    lcode_of = {str(n): k for k, n in enumerate(lnames)}
    runnable = _Runnable(inputs.states)
    cpus = _Cpus(inputs.running)
    transmitters = inputs.transmitters()
    frames = _ByStream(data.assign(wire_ns=wire_ns(data["wire_len"].to_numpy(), inputs.rate_bps),
                                   payload=(data["payload_len"] if "payload_len" in data.columns else 1)),
                       ("t_ns", "wire_ns", "payload"), order_by="t_ns")
    window = _ByStream(_numeric(inputs.window, "window_bytes"), ("t_ns", "value"), order_by="t_ns")
    backlog = _ByStream(_numeric(inputs.backlog, "backlog_bytes"), ("t_ns", "value"), order_by="t_ns")
    late_acks = _ByStream(inputs.late_acks, ("t_start_ns", "t_end_ns"))
    sends = _ByStream(inputs.sends, ("t_enter_ns", "t_exit_ns"))

    def one(name: str) -> tuple[pd.DataFrame, pd.DataFrame] | None:
        f = frames.get(name)
        t = f["t_ns"] if f is not None else np.zeros(0, np.int64)
        if len(t) < 2:
            return None
        d = f["wire_ns"]
        a, b, da = t[:-1], t[1:], d[:-1]
        gap = b - a
        thr = np.full(len(gap), int(min_gap_ns)) if min_gap_ns is not None else 2 * da
        sel = gap > thr
        if window_ns is not None:
            sel &= (a >= window_ns[0]) & (b <= window_ns[1])
        if not sel.any():
            return None
        a, b, da, gap, thr = a[sel], b[sel], da[sel], gap[sel], thr[sel]
        lo, hi = int(a.min()), int(b.max())
        sets: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        sets["on_wire"] = union(a, a + np.minimum(da, gap))
        mss = int(f["payload"].max())
        sets["receiver_window"] = _steps(window.get(name), lambda v: v < mss, hi)
        late = late_acks.get(name)
        sets["late_ack"] = union(late["t_start_ns"], late["t_end_ns"]) if late is not None else _NONE
        other = lcode != lcode_of.get(name, -2)
        sets["busy"] = union(lt[other], lt[other] + lw[other])
        backlog_known = inputs.backlog is not None
        sets["backlog"] = _steps(backlog.get(name), lambda v: v > 0, hi)
        pid = inputs.senders.get(name, -1)
        ws, we, wcpu = runnable.of(pid)
        sets["waiting"] = (ws, we)
        helpers = [*transmitters, *([inputs.receivers[name]] if inputs.receivers.get(name, -1) > 0 else [])]
        kthreads = [runnable.of(k) for k in helpers] if inputs.states is not None else []
        for k, (ks, ke, _) in enumerate(kthreads):
            sets[f"kthread{k}"] = (ks, ke)
        sd = sends.get(name)
        sets["in_call"] = union(sd["t_enter_ns"], sd["t_exit_ns"]) if sd is not None else _NONE
        # elementary segments: every boundary inside a gap, the CPUs' task changes included (the
        # gaps are disjoint and sorted by their start; so are each set's starts, and its ends)
        cuts = [a, b, _within(cpus.starts, a, b)]
        for starts, ends in sets.values():
            cuts += [_within(starts, a, b), _within(_ascending(ends), a, b)]
        x = _unique_sorted(np.concatenate(cuts))
        seg_s, seg_e = x[:-1], x[1:]
        gi = np.searchsorted(a, seg_s, side="right") - 1
        inside = gi >= 0
        inside[inside] = seg_s[inside] < b[gi[inside]]
        seg_s, seg_e, gi = seg_s[inside], seg_e[inside], gi[inside]
        hold = {k: covered(seg_s, *v)[0] for k, v in sets.items()}
        waiting, widx = covered(seg_s, ws, we)
        backlog_pos = hold["backlog"]
        app_gate = ~backlog_pos if backlog_known else np.ones(len(seg_s), dtype=bool)
        wire_gate = backlog_pos if backlog_known else np.ones(len(seg_s), dtype=bool)
        # the CPU whose queue held the sender (backlog empty) or a transmit thread (backlog not empty)
        wait_cpu = np.where(waiting & app_gate, wcpu[np.maximum(widx, 0)] if len(wcpu) else -1, -1)
        if backlog_known:
            for ks, ke, kc in kthreads:
                on, kidx = covered(seg_s, ks, ke)
                take = on & backlog_pos & (wait_cpu < 0)
                wait_cpu = np.where(take, kc[np.maximum(kidx, 0)] if len(kc) else -1, wait_cpu)
        # waiting while the CPU idles is the wake-up's latency, not another task's turn; under a CPU
        # quota it is the quota holding the task back (the preempter is then the idle task)
        if not inputs.cpu_quota:
            wait_cpu = np.where(_idle_on(cpus, wait_cpu, seg_s), -1, wait_cpu)
        cond = [hold["on_wire"], hold["receiver_window"], hold["busy"] & wire_gate, wait_cpu >= 0,
                hold["in_call"] & app_gate, ~hold["in_call"] & app_gate, hold["late_ack"] & wire_gate,
                np.ones(len(seg_s), dtype=bool)]
        # the receiver holds the sender back twice: by its window (first), and by acknowledging late
        # when nothing else holds the queued bytes (last before unexplained)
        cause = np.select(cond, [0, 1, 2, 3, 4, 5, 1, 6], default=len(CAUSES) - 1)
        length = seg_e - seg_s
        parts = np.zeros((len(a), len(CAUSES)), dtype=np.int64)
        np.add.at(parts, (gi, cause), length)
        table = pd.DataFrame({"stream": name, "t_start_ns": a, "t_end_ns": b, "gap_ns": gap, "threshold_ns": thr})
        for k, c in enumerate(CAUSES):
            table[f"{c}_ns"] = parts[:, k]
        pre = _preempters(name, seg_s[cause == 3], seg_e[cause == 3], gi[cause == 3], wait_cpu[cause == 3], a,
                          cpus if inputs.running is not None else None)
        if inputs.cpu_quota and len(pre):
            pre.loc[pre["pid"].to_numpy() == 0, "role"] = "throttled"
        table["preempted_by"] = _describe(pre, a)
        return table, pre

    # the streams are independent; numpy's sorts and searches release the GIL
    with ThreadPoolExecutor(max(1, min(len(names), len(os.sched_getaffinity(0)), 4)),
                            thread_name_prefix="hostwire-gaps") as pool:
        for result in pool.map(one, names):
            if result is not None:
                gap_tables.append(result[0])
                pre_tables.append(result[1])
    gaps = pd.concat(gap_tables, ignore_index=True) if gap_tables else pd.DataFrame(
        {c: pd.Series(dtype="object" if c in ("stream", "preempted_by") else "int64") for c in GAP_COLUMNS})
    pre = pd.concat(pre_tables, ignore_index=True) if pre_tables else pd.DataFrame(columns=PREEMPTER_COLUMNS)
    gaps = gaps[GAP_COLUMNS]
    gaps.attrs["cannot_tell"] = inputs.cannot_tell()
    gaps.attrs["sources"] = dict(inputs.sources)
    return gaps, pre


def _idle_on(cpus: _Cpus, cpu: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Whether the idle task (pid 0) ran on `cpu` at `t` (False where cpu < 0 or unknown)."""
    out = np.zeros(len(t), dtype=bool)
    for c in np.unique(cpu[cpu >= 0]):
        if int(c) not in cpus.by_cpu:
            continue
        rs, re_, pid = cpus.by_cpu[int(c)][:3]
        on = np.flatnonzero(cpu == c)
        hit, idx = covered(t[on], rs, re_)
        out[on] = hit & (pid[np.maximum(idx, 0)] == 0)
    return out


def _preempters(name: str, s: np.ndarray, e: np.ndarray, gi: np.ndarray, cpu: np.ndarray, a: np.ndarray,
                cpus: _Cpus | None) -> pd.DataFrame:
    """Per gap, the tasks that ran on the sender's CPU during its preempted segments."""
    if cpus is None or len(s) == 0:
        return pd.DataFrame(columns=PREEMPTER_COLUMNS)
    pieces = []
    for c in np.unique(cpu):
        z = np.zeros(0, np.int64)
        rs, re_, rpid, rcomm, rrole = cpus.by_cpu.get(int(c), (z, z, z, z.astype(object), z.astype(object)))
        on = cpu == c
        ss, ee, gg = s[on], e[on], gi[on]
        i0 = np.searchsorted(re_, ss, side="right")
        i1 = np.searchsorted(rs, ee, side="left")
        n = np.maximum(i1 - i0, 0)
        rows = np.repeat(np.arange(len(ss)), n)
        k = np.arange(len(rows)) - np.repeat(np.cumsum(n) - n, n)
        ri = i0[rows] + k
        ns = np.minimum(ee[rows], re_[ri]) - np.maximum(ss[rows], rs[ri])
        pieces.append(pd.DataFrame({"gap": gg[rows], "pid": rpid[ri], "comm": rcomm[ri], "role": rrole[ri],
                                    "cpu": int(c), "ns": ns}))
    if not pieces:
        return pd.DataFrame(columns=PREEMPTER_COLUMNS)
    p = pd.concat(pieces, ignore_index=True)
    p = p[p["ns"] > 0].groupby(["gap", "pid", "comm", "role", "cpu"], as_index=False)["ns"].sum()
    total = p.groupby("gap")["ns"].transform("sum")
    p["share"] = p["ns"] / total
    p["stream"] = name
    p["t_start_ns"] = a[p["gap"].to_numpy()]
    p = p.sort_values(["t_start_ns", "ns"], ascending=[True, False], kind="stable")
    return p[PREEMPTER_COLUMNS].reset_index(drop=True)


def _describe(pre: pd.DataFrame, a: np.ndarray) -> np.ndarray:
    """Per gap: 'pid comm role share%; ...' of the tasks that ran while the sender waited."""
    out = np.full(len(a), "", dtype=object)
    if len(pre) == 0:
        return out
    text = (pre["pid"].astype(str) + " " + pre["comm"].astype(str) + " " + pre["role"].astype(str) + " "
            + (pre["share"] * 100).round(1).astype(str) + "%")
    joined = (text.astype(object) + "; ").groupby(pre["t_start_ns"].to_numpy()).sum().str[:-2]
    idx = np.searchsorted(a, joined.index.to_numpy())
    out[idx] = joined.to_numpy()
    return out


def summary(gaps: pd.DataFrame) -> pd.DataFrame:
    """Per stream (and `all`): gaps, gap_ns (their total) and each cause's share of it."""
    cols = [f"{c}_ns" for c in CAUSES]
    if len(gaps) == 0:
        return pd.DataFrame(columns=["stream", "gaps", "gap_ns", *[f"{c}_share" for c in CAUSES]])
    per = gaps.groupby("stream", sort=True)[["gap_ns", *cols]].sum()
    per.insert(0, "gaps", gaps.groupby("stream", sort=True).size())
    per.loc["all"] = per.sum()
    out = per.reset_index()
    for c in CAUSES:
        out[f"{c}_share"] = out[f"{c}_ns"] / out["gap_ns"]
    return out[["stream", "gaps", "gap_ns", *[f"{c}_share" for c in CAUSES]]]
