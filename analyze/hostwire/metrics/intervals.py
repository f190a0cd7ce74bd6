"""Frame and write intervals (DESIGN.md section 8): per stream, the gaps between consecutive data
frames on the wire; per sending process, the gaps between consecutive write() starts."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from hostwire.errors import InputError
from hostwire.metrics.streams import data_frames
from hostwire.metrics.window import clip, require_rows
from hostwire.window import Window

QUANTILES = (("p1_ns", 0.01), ("p50_ns", 0.50), ("p90_ns", 0.90), ("p99_ns", 0.99))
SUMMARY_COLUMNS = ["stream", "kind", "count", "min_ns", "p1_ns", "p50_ns", "p90_ns", "p99_ns", "max_ns"]
HIST_COLUMNS = ["stream", "kind", "lo_ns", "hi_ns", "count"]


def gaps_by_group(t_ns: np.ndarray, group: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Gaps between consecutive stamps of the same group. Returns (group of each gap, gap_ns),
    ordered by group."""
    if np.all(t_ns[1:] >= t_ns[:-1]):  # time-ordered already: a stable sort by group keeps it
        order = np.argsort(group, kind="stable")
    else:
        order = np.lexsort((t_ns, group))
    g = group[order]
    t = t_ns[order]
    same = g[1:] == g[:-1]
    return g[1:][same], (t[1:] - t[:-1])[same]


@dataclass
class Gaps:
    """Gaps and their group: gap_ns[i] belongs to names[codes[i]]."""

    codes: np.ndarray
    gap_ns: np.ndarray
    names: list[str]

    def __len__(self) -> int:
        return len(self.gap_ns)


def summarize(gaps: Gaps, kind: str) -> pd.DataFrame:
    """count, min, p1, p50, p90, p99, max of the gaps of each name (quantiles interpolated
    linearly), rows sorted by name."""
    codes, values = gaps.codes, gaps.gap_ns
    if np.any(codes[1:] < codes[:-1]):
        order = np.argsort(codes, kind="stable")
        codes, values = codes[order], values[order]
    bounds = np.searchsorted(codes, np.arange(len(gaps.names) + 1))
    rows = []
    for i in sorted(range(len(gaps.names)), key=lambda i: gaps.names[i]):  # per stream, not per gap
        g = values[bounds[i]:bounds[i + 1]]
        if len(g) == 0:
            continue
        q = np.quantile(g, [q for _, q in QUANTILES])
        rows.append((gaps.names[i], kind, len(g), int(g.min()), *map(float, q), int(g.max())))
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def log_histogram(gaps: Gaps, kind: str, per_decade: int = 10) -> pd.DataFrame:
    """Counts of gaps in log-spaced bins, `per_decade` bins per decade of nanoseconds, a first bin
    [0, 1) for gaps of zero; empty bins are left out; rows sorted by name, then bin."""
    if per_decade < 1:
        raise InputError(f"bins per decade {per_decade}: expected at least 1")
    if len(gaps) == 0:
        return pd.DataFrame(columns=HIST_COLUMNS)
    edges = log_edges(int(gaps.gap_ns.max()), per_decade)
    return histogram_table(bin_counts(gaps.codes, gaps.gap_ns, edges, len(gaps.names)), edges, gaps.names, kind)


def log_edges(top_ns: int, per_decade: int = 10) -> np.ndarray:
    """Bin edges of log_histogram for gaps up to top_ns: 0, then per_decade log-spaced per decade."""
    top = max(1.0, float(top_ns))
    decades = int(np.ceil(np.log10(top + 1))) + 1
    edges = np.unique(np.floor(np.logspace(0, decades, decades * per_decade + 1)).astype(np.int64))
    return np.concatenate([[0], edges])


def bin_counts(codes: np.ndarray, gap_ns: np.ndarray, edges: np.ndarray, ngroups: int) -> np.ndarray:
    """Counts of gaps per (group, bin), flattened group-major."""
    nbins = len(edges) - 1
    idx = np.searchsorted(edges, gap_ns, side="right") - 1
    return np.bincount(codes * nbins + idx, minlength=ngroups * nbins)


def histogram_table(counts: np.ndarray, edges: np.ndarray, names: list[str], kind: str) -> pd.DataFrame:
    """HIST_COLUMNS from bin_counts' counts: empty bins left out, sorted by name, then bin."""
    nbins = len(edges) - 1
    nz = np.flatnonzero(counts)
    g, b = np.divmod(nz, nbins)
    table = pd.DataFrame({"stream": np.asarray(names, dtype=object)[g], "kind": kind,
                          "lo_ns": edges[b], "hi_ns": edges[b + 1], "count": counts[nz]})[HIST_COLUMNS]
    return table.sort_values(["stream", "lo_ns"], kind="stable").reset_index(drop=True)


def frame_gaps(labelled: pd.DataFrame, window: Window, aggregate: bool = True) -> Gaps:
    """Gaps between consecutive data frames within the window, per stream, plus the gaps of all
    streams merged under the name `all` when aggregate is true."""
    data = clip(data_frames(labelled), window)
    require_rows(data, "data frames", window, at_least=2)
    t = data["t_ns"].to_numpy().astype(np.int64)
    codes = data["stream"].cat.codes.to_numpy().astype(np.int64)
    names = [str(c) for c in data["stream"].cat.categories]
    g, gap = gaps_by_group(t, codes)
    if aggregate:
        all_gap = np.diff(np.sort(t))
        g = np.concatenate([g, np.full(len(all_gap), len(names), dtype=np.int64)])
        gap = np.concatenate([gap, all_gap])
        names = names + ["all"]
    return Gaps(g, gap, names)


def write_gaps(writes: pd.DataFrame, window: Window) -> Gaps:
    """Gaps between consecutive write() starts of each sending process within the window; named by
    the process's stream when known, else its role, else its pid."""
    for column in ("t_ns", "pid"):
        if column not in writes.columns:
            raise InputError(f"writes: missing column {column}")
    w = clip(writes, window)
    if len(w) == 0:
        return Gaps(np.zeros(0, np.int64), np.zeros(0, np.int64), [])
    codes, names = pd.factorize(process_label(w))
    g, gap = gaps_by_group(w["t_ns"].to_numpy().astype(np.int64), codes.astype(np.int64))
    return Gaps(g, gap, [str(n) for n in names])


def process_label(w: pd.DataFrame) -> np.ndarray:
    """Per write: its stream when known, else its process's role, else its pid."""
    label = w["pid"].astype(str).to_numpy().astype(object)
    for column in ("role", "stream"):
        if column in w.columns:
            values = w[column].astype(str).to_numpy().astype(object)
            usable = (values != "") & (values != "nan") & (values != "None")
            label = np.where(usable, values, label)
    return label


def df_intervals(labelled: pd.DataFrame, window: Window, writes: pd.DataFrame | None = None) -> pd.DataFrame:
    """Summary rows (SUMMARY_COLUMNS): kind `frame` per stream and `all`, kind `write` per process."""
    parts = [summarize(frame_gaps(labelled, window), "frame")]
    if writes is not None:
        wg = write_gaps(writes, window)
        if len(wg):
            parts.append(summarize(wg, "write"))
    return pd.concat(parts, ignore_index=True)


def df_interval_histogram(labelled: pd.DataFrame, window: Window, writes: pd.DataFrame | None = None,
                          per_decade: int = 10) -> pd.DataFrame:
    parts = [log_histogram(frame_gaps(labelled, window), "frame", per_decade)]
    if writes is not None:
        wg = write_gaps(writes, window)
        if len(wg):
            parts.append(log_histogram(wg, "write", per_decade))
    return pd.concat(parts, ignore_index=True)
