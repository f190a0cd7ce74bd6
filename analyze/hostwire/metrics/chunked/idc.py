"""IDC over chunks of time-ordered data frames (the definition of hostwire.metrics.idc): per stream
and bin length t, the sums of N_k and N_k^2 over the K whole bins, accumulated exactly (Python
integers) chunk by chunk. A bin that a chunk boundary cuts is carried open into the next chunk, so
the sums equal the in-memory ones; the rows come out of hostwire.metrics.idc.idc_row, as there."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from hostwire.errors import InputError
from hostwire.metrics.idc import COLUMNS, EDGE_COST, MIN_BINS, RUN_COST, idc_row
from hostwire.metrics.window import require_rows
from hostwire.window import Window
from hostwire.read.pcapchunks import Chunk


class BinSums:
    """Sums of N_k and N_k^2 over the bins [0, K) of length t, fed sorted offsets from the window
    start chunk by chunk; the last bin each chunk touches stays open until a later bin appears."""

    def __init__(self, t: int, k: int) -> None:
        self.t, self.k, self.limit = t, k, k * t
        self.s1 = 0
        self.s2 = 0
        self.open_bin = -1
        self.open_value = 0

    def feed(self, rel: np.ndarray, weights: np.ndarray | None) -> None:
        inside = int(np.searchsorted(rel, self.limit, side="left"))
        if inside == 0:
            return
        rel = rel[:inside]
        t = self.t
        first, last = int(rel[0]) // t, int(rel[-1]) // t
        if (last - first + 1) * EDGE_COST > inside * RUN_COST:  # many bins: runs of events
            b = rel // t
            starts = np.flatnonzero(np.concatenate([[True], b[1:] != b[:-1]]))
            bins = b[starts]
            if weights is None:
                values = np.diff(np.append(starts, inside))
            else:
                values = np.add.reduceat(weights[:inside], starts)
        else:  # few bins: events before each edge
            bins = np.arange(first, last + 1, dtype=np.int64)
            idx = np.searchsorted(rel, (bins[1:]) * t, side="left")
            bounds = np.concatenate([[0], idx, [inside]])
            if weights is None:
                values = np.diff(bounds)
            else:
                cum = np.concatenate([[0], np.cumsum(weights[:inside])])
                values = np.diff(cum[bounds])
        values = values.astype(np.int64)
        if int(bins[0]) == self.open_bin:
            values[0] += self.open_value
        else:
            self._close(self.open_value)
        self._add(values[:-1])
        self.open_bin, self.open_value = int(bins[-1]), int(values[-1])

    def _close(self, value: int) -> None:
        self.s1 += value
        self.s2 += value * value

    def _add(self, values: np.ndarray) -> None:
        if len(values) == 0:
            return
        top = int(values.max())
        self.s1 += int(values.sum())
        if top < 2**31 and top * top * len(values) < 2**63:
            self.s2 += int(np.dot(values, values))
        else:  # byte sums large enough to overflow int64 squares: exact Python integers
            self.s2 += sum(int(v) * int(v) for v in values.tolist())

    def finish(self) -> tuple[int, int]:
        self._close(self.open_value)
        self.open_value = 0
        return self.s1, self.s2


def df_idc(chunks: Iterable[Chunk], names: list[str], window: Window, ts: np.ndarray,
           by_bytes: bool = False, aggregate: bool = True) -> pd.DataFrame:
    """COLUMNS of hostwire.metrics.idc.df_idc from time-ordered data-frame chunks ({t_ns, stream,
    payload_len}) of the window."""
    width = window.length_ns
    grid = [(int(t), int(width // t)) for t in ts if width // t >= MIN_BINS]
    groups = len(names) + (1 if aggregate else 0)
    sums = [[BinSums(t, k) for t, k in grid] for _ in range(groups)]
    seen = np.zeros(len(names), dtype=np.int64)
    for chunk in chunks:
        rel = chunk["t_ns"] - window.start_ns
        stream = chunk["stream"]
        w = chunk["payload_len"].astype(np.int64) if by_bytes else None
        order = np.argsort(stream.astype(np.int16 if len(names) < 2**15 else np.int64), kind="stable")
        bounds = np.searchsorted(stream[order], np.arange(len(names) + 1))
        seen += np.diff(bounds)
        for i in range(len(names)):
            part = order[bounds[i]:bounds[i + 1]]
            if len(part) == 0:
                continue
            r, pw = rel[part], None if w is None else w[part]
            for s in sums[i]:
                s.feed(r, pw)
        if aggregate:
            for s in sums[-1]:
                s.feed(rel, w)
    total = int(seen.sum())
    if total < 2:
        require_rows(pd.DataFrame(index=range(total)), "data frames", window, at_least=2)
    rows = []
    labels = names + (["all"] if aggregate else [])
    for i, label in enumerate(labels):
        if i < len(names) and seen[i] == 0:
            continue
        for s in sums[i]:
            s1, s2 = s.finish()
            row = idc_row(s.t, s.k, s1, s2) if not by_bytes else idc_row(s.t, s.k, float(s1), float(s2))
            if row is not None:
                rows.append((label, *row))
    out = pd.DataFrame(rows, columns=["stream", "t_ns", "bins", "mean", "var", "idc"])[COLUMNS]
    if len(out) == 0:
        raise InputError(f"no IDC value: no bin length has {MIN_BINS} bins with frames in {window.describe()}")
    return out
