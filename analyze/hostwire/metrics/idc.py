"""Index of dispersion for counts (DESIGN.md section 8). The window [start, end] is split into
K = floor(W / t) bins of length t starting at its start; N_k = frames (or bytes) in bin k;
IDC(t) = Var(N) / E(N) with the sample variance (ddof = 1). Only t with K >= 10 are used; t is
log-spaced from 1 ms to W / 10."""

from __future__ import annotations

import numpy as np
import pandas as pd

from hostwire.errors import InputError, UsageError
from hostwire.metrics.streams import data_frames
from hostwire.metrics.window import clip, require_rows
from hostwire.window import Window

MIN_BINS = 10
DEFAULT_T_MIN_NS = 1_000_000
DEFAULT_POINTS = 30
COLUMNS = ["stream", "t_ns", "bins", "mean", "var", "idc"]


def t_grid(window_ns: int, points: int = DEFAULT_POINTS, t_min_ns: int = DEFAULT_T_MIN_NS,
           t_max_ns: int | None = None) -> np.ndarray:
    """Integer bin lengths log-spaced from t_min to min(t_max, W / 10) (duplicates removed)."""
    if points < 1:
        raise UsageError(f"--points {points}: expected at least 1")
    if t_min_ns < 1:
        raise UsageError(f"--t-min {t_min_ns} ns: expected at least 1 ns")
    top = window_ns // MIN_BINS
    if t_max_ns is not None:
        if t_max_ns < t_min_ns:
            raise UsageError(f"--t-max {t_max_ns} ns is below --t-min {t_min_ns} ns")
        top = min(top, t_max_ns)
    if top < t_min_ns:
        raise InputError(
            f"window of {window_ns / 1e9:.6f} s is too short for IDC: it needs at least {MIN_BINS} bins "
            f"of the smallest t ({t_min_ns / 1e6:g} ms)")
    grid = np.geomspace(t_min_ns, top, points) if points > 1 else np.array([t_min_ns], float)
    return np.unique(np.floor(grid).astype(np.int64))


def bin_counts(t_sorted: np.ndarray, start_ns: int, t_ns: int, bins: int,
               cum_weights: np.ndarray | None = None) -> np.ndarray:
    """N_k for k < bins: the events in [start + k t, start + (k + 1) t). t_sorted ascending;
    cum_weights, if given, is [0, cumsum(weights)] and N_k sums the weights instead of counting."""
    edges = start_ns + t_ns * np.arange(bins + 1, dtype=np.int64)
    idx = np.searchsorted(t_sorted, edges, side="left")
    if cum_weights is None:
        return np.diff(idx)
    return np.diff(cum_weights[idx])


def idc_curve(t_ns: np.ndarray, window: Window, ts: np.ndarray, weights: np.ndarray | None = None) -> pd.DataFrame:
    """Columns t_ns, bins, mean, var, idc for each bin length in ts with at least 10 bins.
    Rows whose mean is 0 (no event in any whole bin) are left out.

    Per t, the cheaper of two exact ways gives the sums of N_k and N_k^2: with few bins, the
    event count at each bin edge (a binary search per edge, cost ~ K); with many bins, the runs
    of events sharing a bin (one pass over the events, cost ~ n; empty bins cost nothing)."""
    t_ns = np.asarray(t_ns, dtype=np.int64)
    order = None if np.all(t_ns[1:] >= t_ns[:-1]) else np.argsort(t_ns, kind="stable")
    t_sorted = t_ns if order is None else t_ns[order]
    cum = None
    if weights is not None:
        w = np.asarray(weights, dtype=np.float64)
        cum = np.concatenate([[0.0], np.cumsum(w if order is None else w[order])])
    width = window.length_ns
    first = int(np.searchsorted(t_sorted, window.start_ns, side="left"))
    rel: np.ndarray | None = None  # stamps from the window start, made when the run method needs them
    rows = []
    for t in ts:  # one vectorized pass per bin length (30 of them), never per frame
        t = int(t)
        k = int(width // t)
        if k < MIN_BINS:
            continue
        s1: int | float
        s2: int | float
        if k * EDGE_COST > (len(t_sorted) - first) * RUN_COST:
            if rel is None:
                rel = t_sorted[first:] - window.start_ns
            s1, s2 = _run_sums(rel, t, k, None if cum is None else cum[first:] - cum[first])
        else:
            n = bin_counts(t_sorted, window.start_ns, t, k, cum)
            s1, s2 = (int(n.sum()), int((n * n).sum())) if cum is None else (float(n.sum()), float(np.dot(n, n)))
        row = idc_row(t, k, s1, s2)
        if row is not None:
            rows.append(row)
    return pd.DataFrame(rows, columns=["t_ns", "bins", "mean", "var", "idc"])


def idc_row(t: int, k: int, s1: int | float, s2: int | float) -> tuple[int, int, float, float, float] | None:
    """(t, K, mean, var, idc) from the sums of N_k and N_k^2 over K bins; None when the mean is 0.
    Integer sums (counts) are exact; float sums (bytes) go through the float formula. Both the
    in-memory and the chunked path end here, so equal sums give equal rows."""
    mean = s1 / k
    if mean <= 0:
        return None
    if isinstance(s1, int):  # exact integer sums: no cancellation
        var = (k * int(s2) - s1 * s1) / (k * (k - 1))
    else:
        var = max(0.0, (s2 - s1 * mean) / (k - 1))
    return (t, k, mean, float(var), float(var) / mean)


# Relative cost per bin edge (binary search with cache misses) and per event (a few array passes).
EDGE_COST = 40
RUN_COST = 4


def _run_sums(rel: np.ndarray, t: int, k: int, cum: np.ndarray | None) -> tuple[int | float, int | float]:
    """Sums of N_k and of N_k^2 over the K whole bins from the events' bin numbers: rel holds the
    sorted stamps minus the window start (all >= 0); runs of equal bin numbers are the non-empty
    bins. cum, if given, is [0, cumsum(weights)] aligned with rel."""
    inside = int(np.searchsorted(rel, k * t, side="left"))
    if inside == 0:
        return 0, 0
    b = rel[:inside] // t
    same = b[1:] == b[:-1]
    if cum is None:
        # Sum of N_k^2 = n + 2 * (pairs of events sharing a bin); with many bins, events that share
        # one are rare, so only those (runs of `same`) are looked at.
        idx = np.flatnonzero(same)
        if len(idx) == 0:
            return inside, inside
        brk = np.flatnonzero(np.diff(idx) != 1)
        length = np.diff(np.concatenate([[-1], brk, [len(idx) - 1]]))  # run of L `same` = bin of L + 1
        return inside, inside + int((length * (length + 1)).sum())
    starts = np.flatnonzero(np.concatenate([[True], ~same]))
    sums = np.diff(cum[np.concatenate([starts, [inside]])])
    return float(sums.sum()), float(np.dot(sums, sums))


def df_idc(labelled: pd.DataFrame, window: Window, by_bytes: bool = False, points: int = DEFAULT_POINTS,
           t_min_ns: int = DEFAULT_T_MIN_NS, t_max_ns: int | None = None, aggregate: bool = True) -> pd.DataFrame:
    """IDC of the data frames (or of their payload bytes) per stream and `all`: COLUMNS."""
    data = clip(data_frames(labelled), window)
    require_rows(data, "data frames", window, at_least=2)
    ts = t_grid(window.length_ns, points, t_min_ns, t_max_ns)
    t = data["t_ns"].to_numpy().astype(np.int64)
    w = data["payload_len"].to_numpy().astype(np.int64) if by_bytes else None
    codes = data["stream"].cat.codes.to_numpy()
    cats = data["stream"].cat.categories.astype(str)
    parts = []
    for i, name in enumerate(cats):  # per stream
        sel = codes == i
        if sel.sum() == 0:
            continue
        curve = idc_curve(t[sel], window, ts, None if w is None else w[sel])
        parts.append(curve.assign(stream=name))
    if aggregate:
        parts.append(idc_curve(t, window, ts, w).assign(stream="all"))
    out = pd.concat(parts, ignore_index=True)[COLUMNS] if parts else pd.DataFrame(columns=COLUMNS)
    if len(out) == 0:
        raise InputError(f"no IDC value: no bin length has {MIN_BINS} bins with frames in {window.describe()}")
    return out
