"""Frame and write intervals (DESIGN.md section 8): per stream, the gaps between consecutive data
frames on the wire; per sending process, the gaps between consecutive write() starts."""

from __future__ import annotations

import numpy as np
import pandas as pd

from hostwire.errors import InputError
from hostwire.metrics.streams import data_frames
from hostwire.metrics.window import Window, clip, require_rows

QUANTILES = (("p1_ns", 0.01), ("p50_ns", 0.50), ("p90_ns", 0.90), ("p99_ns", 0.99))
SUMMARY_COLUMNS = ["stream", "kind", "count", "min_ns", "p1_ns", "p50_ns", "p90_ns", "p99_ns", "max_ns"]
HIST_COLUMNS = ["stream", "kind", "lo_ns", "hi_ns", "count"]


def gaps_by_group(t_ns: np.ndarray, group: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Gaps between consecutive stamps of the same group; rows must be sorted by time. Returns
    (group of each gap, gap_ns)."""
    order = np.lexsort((t_ns, group))
    g = group[order]
    t = t_ns[order]
    same = g[1:] == g[:-1]
    return g[1:][same], (t[1:] - t[:-1])[same]


def summarize(names: np.ndarray, gap_ns: np.ndarray, kind: str) -> pd.DataFrame:
    """count, min, p1, p50, p90, p99, max of the gaps of each name (quantiles interpolated linearly)."""
    df = pd.DataFrame({"stream": names, "gap_ns": gap_ns})
    grouped = df.groupby("stream", sort=True, observed=True)["gap_ns"]
    out = pd.DataFrame({"count": grouped.size(), "min_ns": grouped.min()})
    for column, q in QUANTILES:
        out[column] = grouped.quantile(q)
    out["max_ns"] = grouped.max()
    out = out.reset_index()
    out.insert(1, "kind", kind)
    return out[SUMMARY_COLUMNS]


def log_histogram(names: np.ndarray, gap_ns: np.ndarray, kind: str, per_decade: int = 10) -> pd.DataFrame:
    """Counts of gaps in log-spaced bins, `per_decade` bins per decade of nanoseconds, a first bin
    [0, 1) for gaps of zero; empty bins are left out."""
    if per_decade < 1:
        raise InputError(f"bins per decade {per_decade}: expected at least 1")
    if len(gap_ns) == 0:
        return pd.DataFrame(columns=HIST_COLUMNS)
    top = max(1.0, float(gap_ns.max()))
    decades = int(np.ceil(np.log10(top + 1))) + 1
    edges = np.unique(np.floor(np.logspace(0, decades, decades * per_decade + 1)).astype(np.int64))
    edges = np.concatenate([[0], edges])
    idx = np.searchsorted(edges, gap_ns, side="right") - 1
    df = pd.DataFrame({"stream": names, "bin": idx})
    counts = df.groupby(["stream", "bin"], sort=True, observed=True).size().reset_index(name="count")
    b = counts["bin"].to_numpy()
    counts.insert(1, "kind", kind)
    counts.insert(2, "lo_ns", edges[b])
    counts.insert(3, "hi_ns", edges[b + 1])
    return counts[HIST_COLUMNS]


def frame_gaps(labelled: pd.DataFrame, window: Window, aggregate: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(name, gap_ns) of the data frames within the window: per stream, plus the gaps of all streams
    merged under the name `all` when aggregate is true."""
    data = clip(data_frames(labelled), window)
    require_rows(data, "data frames", window, at_least=2)
    t = data["t_ns"].to_numpy().astype(np.int64)
    codes = data["stream"].cat.codes.to_numpy().astype(np.int64)
    cats = np.asarray(data["stream"].cat.categories.astype(str))
    g, gap = gaps_by_group(t, codes)
    names = cats[g]
    if aggregate:
        all_gap = np.diff(np.sort(t))
        names = np.concatenate([names, np.full(len(all_gap), "all", dtype=object)])
        gap = np.concatenate([gap, all_gap])
    return names, gap


def write_gaps(writes: pd.DataFrame, window: Window) -> tuple[np.ndarray, np.ndarray]:
    """(name, gap_ns) between consecutive write() starts of each sending process within the window;
    named by the process's stream when known, else its role, else its pid."""
    for column in ("t_ns", "pid"):
        if column not in writes.columns:
            raise InputError(f"writes: missing column {column}")
    w = clip(writes, window)
    if len(w) == 0:
        return np.zeros(0, dtype=object), np.zeros(0, dtype=np.int64)
    label = _process_label(w)
    codes, names = pd.factorize(label)
    g, gap = gaps_by_group(w["t_ns"].to_numpy().astype(np.int64), codes.astype(np.int64))
    return np.asarray(names, dtype=object)[g], gap


def _process_label(w: pd.DataFrame) -> np.ndarray:
    label = w["pid"].astype(str).to_numpy().astype(object)
    for column in ("role", "stream"):
        if column in w.columns:
            values = w[column].astype(str).to_numpy().astype(object)
            usable = (values != "") & (values != "nan") & (values != "None")
            label = np.where(usable, values, label)
    return label


def df_intervals(labelled: pd.DataFrame, window: Window, writes: pd.DataFrame | None = None) -> pd.DataFrame:
    """Summary rows (SUMMARY_COLUMNS): kind `frame` per stream and `all`, kind `write` per process."""
    names, gaps = frame_gaps(labelled, window)
    parts = [summarize(names, gaps, "frame")]
    if writes is not None:
        wn, wg = write_gaps(writes, window)
        if len(wg):
            parts.append(summarize(wn, wg, "write"))
    return pd.concat(parts, ignore_index=True)


def df_interval_histogram(labelled: pd.DataFrame, window: Window, writes: pd.DataFrame | None = None,
                          per_decade: int = 10) -> pd.DataFrame:
    names, gaps = frame_gaps(labelled, window)
    parts = [log_histogram(names, gaps, "frame", per_decade)]
    if writes is not None:
        wn, wg = write_gaps(writes, window)
        if len(wg):
            parts.append(log_histogram(wn, wg, "write", per_decade))
    return pd.concat(parts, ignore_index=True)
