"""Bursts over chunks of time-ordered data frames (the definitions of hostwire.metrics.bursts): the
off threshold from each stream's exact median gap (hostwire.metrics.chunked.quantiles), then the
bursts, each stream's burst in progress carried from one chunk to the next, so that a burst or an
off period that a chunk boundary cuts is one. Means are exact sums over counts; p50 and p99 exact
order statistics, interpolated as np.quantile does."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import numpy as np
import pandas as pd

from hostwire.errors import InputError, UsageError
from hostwire.metrics.bursts import COLUMNS, STAT_NAMES
from hostwire.metrics.chunked.intervals import gap_chunks
from hostwire.metrics.chunked.quantiles import FirstPass, GroupedValues, by_group, interpolate, \
    order_statistics, quantile_ranks
from hostwire.metrics.window import require_rows
from hostwire.window import Window
from hostwire.read.pcapchunks import Chunk

KINDS = ("frames", "bytes", "on", "off")


def thresholds(passes: Callable[[], Iterable[Chunk]], streams: int, factor: float,
               theta_ns: float | None) -> tuple[list[float], int]:
    """(theta of each group: the streams, then all; data frames in the window)."""
    frames = [0]
    if theta_ns is not None:
        if theta_ns <= 0:
            raise UsageError(f"off threshold {theta_ns} ns: expected > 0")
        return [float(theta_ns)] * (streams + 1), sum(len(c["t_ns"]) for c in passes())
    if factor <= 0:
        raise UsageError(f"off threshold factor {factor}: expected > 0")
    first = FirstPass(streams + 1)
    for g, v in gap_chunks(passes(), streams, frames=frames):
        first.feed(g, v)
    plans = {g: quantile_ranks(int(first.count[g]), [0.5])[0] for g in range(streams + 1) if first.count[g]}
    values = order_statistics(first, {g: [lo, hi] for g, (_, lo, hi, _) in plans.items()},
                              lambda: gap_chunks(passes(), streams))
    medians = {g: interpolate(values[(g, lo)], values[(g, hi)], gamma) for g, (_, lo, hi, gamma) in plans.items()}
    # a median gap of 0 (frames stamped together) would make every gap an off period
    return [factor * max(medians.get(g, 0.0), 1.0) for g in range(streams + 1)], frames[0]


class Carry:
    """One group's burst in progress (start and last stamp, frames, bytes; start -1: none yet)
    and the end of its last closed burst."""

    def __init__(self) -> None:
        self.start = self.last = -1
        self.frames = self.bytes = 0
        self.prev_end: int | None = None


def burst_values(chunks: Iterable[Chunk], streams: int, theta: list[float]) -> Iterator[GroupedValues]:
    """(kind * (streams + 1) + group, value) of each closed burst: frames, bytes, on (end - start)
    and, after a group's first burst, the off period before it. The open bursts close at the end."""
    carries = [Carry() for _ in range(streams + 1)]
    groups = streams + 1
    for chunk in chunks:
        t, stream, w = chunk["t_ns"], chunk["stream"], chunk["payload_len"].astype(np.int64)
        order, bounds = by_group(stream, streams)
        parts = [(g, order[bounds[g]:bounds[g + 1]]) for g in range(streams) if bounds[g + 1] > bounds[g]]
        out_g: list[np.ndarray] = []
        out_v: list[np.ndarray] = []
        for g, rows in [*parts, (streams, None)]:
            tg = t if rows is None else t[rows]
            wg = w if rows is None else w[rows]
            for kind, values in _closed(carries[g], tg, wg, theta[g]):
                out_g.append(np.full(len(values), KINDS.index(kind) * groups + g, dtype=np.int64))
                out_v.append(values)
        if out_v:
            yield np.concatenate(out_g), np.concatenate(out_v)
    last_g, last_v = [], []
    for g, c in enumerate(carries):
        if c.start >= 0:
            for kind, value in (("frames", c.frames), ("bytes", c.bytes), ("on", c.last - c.start)):
                last_g.append(KINDS.index(kind) * groups + g)
                last_v.append(value)
            if c.prev_end is not None:
                last_g.append(KINDS.index("off") * groups + g)
                last_v.append(c.start - c.prev_end)
    if last_v:
        yield np.asarray(last_g, dtype=np.int64), np.asarray(last_v, dtype=np.int64)


def _closed(c: Carry, t: np.ndarray, w: np.ndarray, theta: float) -> list[tuple[str, np.ndarray]]:
    """The bursts of one group that this chunk closes, each with its frames, bytes, on time and
    the off period before it (none for the group's first); c keeps the one still open."""
    n = len(t)
    brk = np.empty(n, dtype=bool)
    brk[1:] = (t[1:] - t[:-1]) >= theta
    brk[0] = c.start < 0 or (int(t[0]) - c.last) >= theta
    starts = np.flatnonzero(brk)
    csum = np.concatenate([[0], np.cumsum(w)])
    closed: dict[str, list[np.ndarray]] = {k: [] for k in KINDS}
    if c.start >= 0:  # the carried burst takes the rows before the first start
        head = int(starts[0]) if len(starts) else n
        c.frames += head
        c.bytes += int(csum[head])
        if head:
            c.last = int(t[head - 1])
        if len(starts) == 0:
            return []
        for kind, value in (("frames", c.frames), ("bytes", c.bytes), ("on", c.last - c.start)):
            closed[kind].append(np.asarray([value], dtype=np.int64))
        if c.prev_end is not None:
            closed["off"].append(np.asarray([c.start - c.prev_end], dtype=np.int64))
        c.prev_end = c.last
    s, e = starts[:-1], starts[1:] - 1  # the bursts closed inside the chunk
    if len(s):
        closed["frames"].append(e - s + 1)
        closed["bytes"].append(csum[e + 1] - csum[s])
        closed["on"].append(t[e] - t[s])
        prev_end = np.concatenate([[c.prev_end if c.prev_end is not None else -1], t[e[:-1]]])
        off = t[s] - prev_end
        closed["off"].append(off if c.prev_end is not None else off[1:])
        c.prev_end = int(t[e[-1]])
    last = int(starts[-1])
    c.start, c.last = int(t[last]), int(t[-1])
    c.frames, c.bytes = n - last, int(csum[n] - csum[last])
    return [(k, np.concatenate(v).astype(np.int64)) for k, v in closed.items() if v]


def df_bursts(passes: Callable[[], Iterable[Chunk]], names: list[str], window: Window, factor: float,
              theta_ns: float | None) -> pd.DataFrame:
    """COLUMNS of hostwire.metrics.bursts.df_bursts on a capture."""
    streams = len(names)
    theta, frames = thresholds(passes, streams, factor, theta_ns)
    require_rows(pd.DataFrame(index=range(min(frames, 2))), "data frames", window, at_least=2)
    groups = streams + 1
    first = FirstPass(len(KINDS) * groups)
    sums = [0] * (len(KINDS) * groups)
    counts = np.zeros(groups, dtype=np.int64)
    for chunk_g, v in burst_values(_counted(passes(), counts, streams), streams, theta):
        first.feed(chunk_g, v)
        order, bounds = by_group(chunk_g, len(sums))
        for key in np.flatnonzero(np.diff(bounds)).tolist():
            sums[key] += int(v[order[bounds[key]:bounds[key + 1]]].sum())
    plans = {key: quantile_ranks(int(first.count[key]), [0.5, 0.99]) for key in range(len(sums)) if first.count[key]}
    values = order_statistics(first, {k: [r for _, lo, hi, _ in p for r in (lo, hi)] for k, p in plans.items()},
                              lambda: burst_values(passes(), streams, theta))
    rows = []
    labels = names + ["all"]
    for g in range(groups):
        if counts[g] == 0:
            continue
        row: dict[str, object] = {"stream": labels[g], "theta_ns": float(theta[g]), "frames": int(counts[g]),
                                  "bursts": int(first.count[KINDS.index("frames") * groups + g])}
        for kind in KINDS:
            key = KINDS.index(kind) * groups + g
            suffix = "_ns" if kind in ("on", "off") else ""
            n = int(first.count[key])
            for stat, _ in STAT_NAMES:
                row[f"{kind}_{stat}{suffix}"] = None if n == 0 else _stat(stat, key, n, sums, first, plans, values)
        on, off = sums[KINDS.index("on") * groups + g], sums[KINDS.index("off") * groups + g]
        row["on_total_ns"], row["off_total_ns"] = on, off
        row["on_off_ratio"] = float(np.int64(on) / np.int64(off)) if off > 0 else float("inf")
        rows.append(row)
    if not rows:
        raise InputError("no stream has data frames in the window")
    return pd.DataFrame(rows, columns=COLUMNS)


def _stat(stat: str, key: int, n: int, sums: list[int], first: FirstPass, plans: dict, values: dict) -> float:
    if stat == "mean":
        return sums[key] / n
    if stat == "max":
        return float(first.high[key])
    _, lo, hi, gamma = plans[key][0 if stat == "p50" else 1]
    return interpolate(values[(key, lo)], values[(key, hi)], gamma)


def _counted(chunks: Iterable[Chunk], counts: np.ndarray, streams: int) -> Iterator[Chunk]:
    """The chunks, counting each group's data frames (the streams', then all's) on the way."""
    for chunk in chunks:
        counts[:streams] += np.bincount(chunk["stream"], minlength=streams)[:streams]
        counts[streams] += len(chunk["t_ns"])
        yield chunk
