"""Frame intervals over chunks of time-ordered data frames (the definitions of
hostwire.metrics.intervals): each stream's last stamp is carried from one chunk to the next, so a
gap that a chunk boundary cuts is counted once, whole. The quantiles are exact
(hostwire.metrics.chunked.quantiles: passes over the gaps); the histogram takes one pass for the
largest gap (its bin edges) and one for the counts."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import numpy as np
import pandas as pd

from hostwire.errors import InputError
from hostwire.metrics.chunked.quantiles import FirstPass, GroupedValues, by_group, interpolate, order_statistics, \
    quantile_ranks
from hostwire.metrics.intervals import QUANTILES, SUMMARY_COLUMNS, bin_counts, histogram_table, \
    log_edges
from hostwire.metrics.window import require_rows
from hostwire.window import Window
from hostwire.read.pcapchunks import Chunk


def gap_chunks(chunks: Iterable[Chunk], streams: int, aggregate: bool = True,
               frames: list[int] | None = None) -> Iterator[GroupedValues]:
    """(group, gap) per chunk: group i < streams for the gaps of stream i, `streams` for those of
    all data frames merged (aggregate). `frames`, if given, gets the data frames counted."""
    last = np.full(streams, -1, dtype=np.int64)
    last_any = -1
    for chunk in chunks:
        t, stream = chunk["t_ns"], chunk["stream"]
        if frames is not None:
            frames[0] += len(t)
        order, bounds = by_group(stream, streams)
        ts = t[order]
        g = stream[order]
        gaps = np.empty(len(ts), dtype=np.int64)
        gaps[1:] = ts[1:] - ts[:-1]
        head = bounds[:-1][np.diff(bounds) > 0]  # first row of each stream present in the chunk
        prev = last[g[head]]
        gaps[head] = ts[head] - prev
        valid = np.ones(len(ts), dtype=bool)
        valid[head[prev < 0]] = False
        tail = bounds[1:][np.diff(bounds) > 0] - 1
        last[g[tail]] = ts[tail]
        parts_g, parts_v = [g[valid]], [gaps[valid]]
        if aggregate:
            all_gaps = np.diff(t) if last_any < 0 else np.diff(np.concatenate([[last_any], t]))
            last_any = int(t[-1])
            parts_g.append(np.full(len(all_gaps), streams, dtype=np.int64))
            parts_v.append(all_gaps)
        yield np.concatenate(parts_g).astype(np.int64), np.concatenate(parts_v)


def _require_two(frames: int, window: Window) -> None:
    """The in-memory path's error for fewer than two data frames in the window."""
    require_rows(pd.DataFrame(index=range(frames)), "data frames", window, at_least=2)


def df_intervals(passes: Callable[[], Iterable[Chunk]], names: list[str], window: Window) -> pd.DataFrame:
    """SUMMARY_COLUMNS (kind `frame`) of hostwire.metrics.intervals.df_intervals on a capture:
    `passes()` gives the time-ordered data-frame chunks of the window, once per pass."""
    streams = len(names)
    frames = [0]
    first = FirstPass(streams + 1)
    for g, v in gap_chunks(passes(), streams, frames=frames):
        first.feed(g, v)
    _require_two(frames[0], window)
    ranks: dict[int, list[int]] = {}
    plans: dict[int, list[tuple[float, int, int, float]]] = {}
    for g in range(streams + 1):
        n = int(first.count[g])
        if n == 0:
            continue
        plans[g] = quantile_ranks(n, [q for _, q in QUANTILES])
        ranks[g] = [r for _, lo, hi, _ in plans[g] for r in (lo, hi)]
    values = order_statistics(first, ranks, lambda: gap_chunks(passes(), streams))
    labels = names + ["all"]
    rows = []
    for g in sorted(plans, key=lambda i: labels[i]):
        qs = [interpolate(values[(g, lo)], values[(g, hi)], gamma) for _, lo, hi, gamma in plans[g]]
        rows.append((labels[g], "frame", int(first.count[g]), int(first.low[g]), *qs, int(first.high[g])))
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def df_interval_histogram(passes: Callable[[], Iterable[Chunk]], names: list[str], window: Window,
                          per_decade: int = 10) -> pd.DataFrame:
    """HIST_COLUMNS of hostwire.metrics.intervals.df_interval_histogram on a capture."""
    if per_decade < 1:
        raise InputError(f"bins per decade {per_decade}: expected at least 1")
    streams = len(names)
    top = 0
    frames = [0]
    for _, v in gap_chunks(passes(), streams, frames=frames):
        if len(v):
            top = max(top, int(v.max()))
    _require_two(frames[0], window)
    edges = log_edges(top, per_decade)
    counts = np.zeros((streams + 1) * (len(edges) - 1), dtype=np.int64)
    for g, v in gap_chunks(passes(), streams):
        counts += bin_counts(g, v, edges, streams + 1)
    return histogram_table(counts, edges, names + ["all"], "frame")
