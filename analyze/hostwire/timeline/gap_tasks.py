"""The tasks behind a gap's preempted time (hostwire.timeline.gaps): which task ran on the CPU
whose queue held the sender, for how long, and its share of the gap's preempted time."""

from __future__ import annotations

import numpy as np
import pandas as pd

from hostwire.timeline.intervals import Cpus, covered

PREEMPTER_COLUMNS = ["stream", "t_start_ns", "pid", "comm", "role", "cpu", "ns", "share"]


def idle_on(cpus: Cpus, cpu: np.ndarray, t: np.ndarray) -> np.ndarray:
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


def preempters(s: np.ndarray, e: np.ndarray, gi: np.ndarray, cpu: np.ndarray, cpus: Cpus | None) -> pd.DataFrame:
    """Per gap, the tasks that ran on the sender's CPU during its preempted segments: gap, pid,
    comm, role, cpu, ns (a task's ns in a gap summed; the rows in no set order)."""
    columns = ["gap", "pid", "comm", "role", "cpu", "ns"]
    if cpus is None or len(s) == 0:
        return pd.DataFrame(columns=columns)
    z = np.zeros(0, np.int64)
    none = (z, z, z, z.astype(object), z.astype(object), z)
    found: list[tuple[np.ndarray, ...]] = []
    for c in np.unique(cpu):
        rs, re_, rpid, rcomm, rrole, rtask = cpus.by_cpu.get(int(c), none)
        on = cpu == c
        ss, ee, gg = s[on], e[on], gi[on]
        i0 = np.searchsorted(re_, ss, side="right")
        i1 = np.searchsorted(rs, ee, side="left")
        n = np.maximum(i1 - i0, 0)
        rows = np.repeat(np.arange(len(ss)), n)
        k = np.arange(len(rows)) - np.repeat(np.cumsum(n) - n, n)
        ri = i0[rows] + k
        ns = np.minimum(ee[rows], re_[ri]) - np.maximum(ss[rows], rs[ri])
        ran = ns > 0
        if not ran.any():
            continue
        gap, ri, ns = gg[rows][ran], ri[ran], ns[ran]
        # a task's slices within one gap summed: sorted by (gap, task), one row per run of equal keys
        order = np.lexsort((rtask[ri], gap))
        gap, ri, ns = gap[order], ri[order], ns[order]
        first = np.flatnonzero(np.r_[True, (gap[1:] != gap[:-1]) | (rtask[ri][1:] != rtask[ri][:-1])])
        found.append((gap[first], rpid[ri[first]], rcomm[ri[first]], rrole[ri[first]],
                      np.full(len(first), int(c), np.int64), np.add.reduceat(ns, first)))
    if not found:
        return pd.DataFrame(columns=columns)
    return pd.DataFrame({name: np.concatenate([f[k] for f in found]) for k, name in enumerate(columns)})


def preempter_table(name: str, rows: list[pd.DataFrame], a: np.ndarray) -> pd.DataFrame:
    """PREEMPTER_COLUMNS from the preempters rows of every piece of a stream's gaps."""
    if not rows:
        return pd.DataFrame(columns=PREEMPTER_COLUMNS)
    p = pd.concat(rows, ignore_index=True)
    p = p.groupby(["gap", "pid", "comm", "role", "cpu"], as_index=False)["ns"].sum()
    total = p.groupby("gap")["ns"].transform("sum")
    p["share"] = p["ns"] / total
    p["stream"] = name
    p["t_start_ns"] = a[p["gap"].to_numpy()]
    p = p.sort_values(["t_start_ns", "ns"], ascending=[True, False], kind="stable")
    return p[PREEMPTER_COLUMNS].reset_index(drop=True)


def describe(pre: pd.DataFrame, a: np.ndarray) -> np.ndarray:
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
