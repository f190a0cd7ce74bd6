"""Zero-loss dual-leaky-bucket contract (DESIGN.md section 8). GCRA(T, tau), virtual scheduling:
TAT := c_1; a cell at c conforms iff c >= TAT - tau, then TAT := max(c, TAT) + T. With every cell
conforming, TAT_1 = c_1 and TAT_(j+1) = max(c_j, TAT_j) + T, so the smallest tolerance is
tau_min(T) = max_j (TAT_j - c_j), and MBS_min(SCR) = 1 + ceil(tau_min(T_s) / (T_s - T_p)) with
T_s = 1/SCR, T_p = 1/PCR.

Vectorized: with W_j = TAT_j - j T, W_(j+1) = max(c_j - j T, W_j), W_1 = c_1 - T, so
TAT_j = j T + max_(i < j) (c_i - i T) for j >= 2 (a max-plus recursion = a running maximum)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pandas as pd

from hostwire.errors import InputError, UsageError
from hostwire.metrics.cells import CellStream

CURVE_COLUMNS = ["stream", "scr_cells_s", "t_s_ns", "tau_min_ns", "mbs_min"]
MIN_SCR_COLUMNS = ["stream", "mbs", "scr_cells_s", "t_s_ns", "tau_min_ns", "bt_ns", "bounded_by_trace"]
DEFAULT_POINTS = 50


def tau_min(c: np.ndarray, t: int | float) -> int | float:
    """The smallest tau for which every cell at stamps c (ascending) conforms to GCRA(t, tau)."""
    n = len(c)
    if n < 2:
        return 0
    if isinstance(t, (int, np.integer)) and c.dtype.kind in "iu":
        j = np.arange(1, n + 1, dtype=np.int64)
        w = np.maximum.accumulate(c[:-1] - j[:-1] * int(t))
        late = w + j[1:] * int(t) - c[1:]
        return max(0, int(late.max()))
    j = np.arange(1, n + 1, dtype=np.float64)
    cf = c.astype(np.float64)
    w = np.maximum.accumulate(cf[:-1] - j[:-1] * float(t))
    late = w + j[1:] * float(t) - cf[1:]
    return max(0.0, float(late.max()))


def tau_min_cells(cells: CellStream, t: int | float) -> int | float:
    """tau_min(cells.c, t), faster. tau_min = max over i <= j of y_i - y_j with y_j = c_j - j T
    (the largest drop of y). Inside a run of back-to-back cells y falls by T - 1/R >= 0 per cell
    when T >= 1/R, so the drop is largest from the first cell of a run to the last cell of the
    same or a later run: only those 2 x (number of runs) cells are looked at."""
    if t < cells.cell_time or cells.count < 2:
        return tau_min(cells.c, t)
    first, last = cells.busy_periods()
    c = cells.c
    if isinstance(t, (int, np.integer)) and c.dtype.kind in "iu":
        top = np.maximum.accumulate(c[first] - first * int(t))
        bottom = c[last] - last * int(t)
        return max(0, int((top - bottom).max()))
    top = np.maximum.accumulate(c[first].astype(np.float64) - first * float(t))
    bottom = c[last].astype(np.float64) - last * float(t)
    return max(0.0, float((top - bottom).max()))


def mbs_min(tau: float, t_s: float, t_p: float) -> int | None:
    """1 + ceil(tau / (T_s - T_p)); None when T_s <= T_p and tau > 0 (no finite burst size)."""
    if t_s <= t_p:
        return 1 if tau <= 0 else None
    return 1 + int(math.ceil(tau / (t_s - t_p)))


def scr_grid(mean_rate_per_ns: float, t_p: float, points: int = DEFAULT_POINTS) -> np.ndarray:
    """Integer T_s (ns) for SCRs spaced evenly from the mean cell rate up to the PCR."""
    if points < 2:
        raise UsageError(f"--points {points}: expected at least 2")
    pcr = 1.0 / t_p
    lo = min(mean_rate_per_ns, pcr)
    scr = np.linspace(lo, pcr, points)
    t_s = np.unique(np.round(1.0 / scr).astype(np.int64))[::-1]
    return t_s[t_s >= 1]


def contract_curve(name: str, cells: CellStream, t_p: float, grid: np.ndarray) -> pd.DataFrame:
    return curve_of(name, lambda t_s: tau_min_cells(cells, t_s), t_p, grid)


def curve_of(name: str, tau_of: Callable[[int], int | float], t_p: float, grid: np.ndarray) -> pd.DataFrame:
    """CURVE_COLUMNS of one stream from its tau_min at each grid point (tau_of)."""
    rows = []
    for t_s in grid:  # one vectorized pass over the cells per SCR point
        t_s = int(t_s)
        tau = tau_of(t_s)
        mbs = mbs_min(tau, t_s, t_p)
        if mbs is None:
            continue
        rows.append((name, 1e9 / t_s, t_s, tau, mbs))
    return pd.DataFrame(rows, columns=CURVE_COLUMNS)


def df_contract(streams: dict[str, CellStream], pcr_cells_s: float, points: int = DEFAULT_POINTS,
                scr_min_cells_s: float | None = None) -> pd.DataFrame:
    """MBS_min over one SCR grid shared by all streams (from the smallest mean cell rate, or
    scr_min, up to the PCR), per stream, and the row `all` averaging tau_min and MBS_min over the
    streams at each grid point."""
    if not streams:
        raise InputError("no stream with cells in the window")
    if pcr_cells_s <= 0:
        raise UsageError(f"--pcr {pcr_cells_s}: expected cells/s > 0")
    t_p = 1e9 / pcr_cells_s
    lo = min(cs.mean_rate_per_ns() for cs in streams.values())
    if scr_min_cells_s is not None:
        lo = scr_min_cells_s / 1e9
    grid = scr_grid(lo, t_p, points)
    parts = [contract_curve(name, cs, t_p, grid) for name, cs in streams.items()]
    return with_average(pd.concat(parts, ignore_index=True), len(streams))


def with_average(table: pd.DataFrame, streams: int) -> pd.DataFrame:
    """The curves of `streams` streams and the row `all` at each grid point where every stream has
    one: tau_min and MBS_min averaged."""
    if streams > 1 and len(table):
        complete = table.groupby("t_s_ns")["stream"].transform("size") == streams
        avg = (table[complete].groupby("t_s_ns", sort=False)
               .agg(scr_cells_s=("scr_cells_s", "first"), tau_min_ns=("tau_min_ns", "mean"),
                    mbs_min=("mbs_min", "mean")).reset_index())
        avg.insert(0, "stream", "all")
        table = pd.concat([table, avg[CURVE_COLUMNS]], ignore_index=True)
    return table


def min_scr(name: str, cells: CellStream, t_p: float, mbs: int) -> dict[str, object]:
    """The smallest SCR (largest integer T_s) with MBS_min(T_s) <= mbs, i.e. with
    tau_min(T_s) <= (mbs - 1)(T_s - T_p). tau_min is convex and piecewise linear in T (a maximum
    of affine functions), so the feasible T_s form one interval: scan a geometric grid for its
    upper end, then bisect on integers. T_s is capped at the trace length (c_last - c_first + 1/R),
    beyond which the bucket never fills twice; `bounded_by_trace` says the cap was reached."""
    if mbs < 1:
        raise UsageError(f"--mbs {mbs}: expected at least 1")

    def feasible(t: int) -> bool:
        return tau_min_cells(cells, t) <= (mbs - 1) * (t - t_p)

    lo = max(1, math.ceil(t_p))
    hi = max(lo, int(math.ceil(float(cells.c[-1] - cells.c[0]) + float(cells.cell_time))))
    bounded = feasible(hi)
    if bounded:
        best = hi
    else:
        grid = np.unique(np.round(np.geomspace(lo, hi, 64)).astype(np.int64))
        ok = [int(t) for t in grid if feasible(int(t))]
        if not ok:
            raise InputError(f"{name}: no SCR between 1/{hi} ns and the PCR gives MBS <= {mbs}")
        good = max(ok)
        above = grid[grid > good]
        bad = int(above[0]) if len(above) else hi
        while bad - good > 1:
            mid = (good + bad) // 2
            if feasible(mid):
                good = mid
            else:
                bad = mid
        best = good
    tau = tau_min_cells(cells, best)
    return {"stream": name, "mbs": mbs, "scr_cells_s": 1e9 / best, "t_s_ns": best, "tau_min_ns": tau,
            "bt_ns": (mbs - 1) * (best - t_p), "bounded_by_trace": bounded}


def df_min_scr(streams: dict[str, CellStream], pcr_cells_s: float, mbs: int) -> pd.DataFrame:
    if not streams:
        raise InputError("no stream with cells in the window")
    t_p = 1e9 / pcr_cells_s
    return pd.DataFrame([min_scr(n, cs, t_p, mbs) for n, cs in streams.items()], columns=MIN_SCR_COLUMNS)


def pcr_tau(cells: CellStream, pcr_cells_s: float) -> float:
    """tau_min at the PCR: the CDVT the peak-rate bucket GCRA(1/PCR, CDVT) needs."""
    t_p = 1e9 / pcr_cells_s
    t = int(t_p) if float(t_p).is_integer() else t_p
    return float(tau_min_cells(cells, t))
