"""The backlog of a long run, window by window (docs/timeline.md, "A long run's kernel trace, in
slabs"): stream_tables.backlog()'s steps of each stream made from a few hundred thousand of its
frames and writes at a time, the bytes written and sent carried from one window to the next, so
that no array as long as a stream is made. The tables it reads are the capture pass's data frames
and the writes on disk (hostwire.spill), mapped and in stream order.

A window takes every frame and write whose stamp is in [T0, T1), T1 the stamp after the window's
rows, so the rows of one stamp are never split and, inside a window, the stable order of
backlog()'s whole arrays (the writes before the frames, each in its table's order) is kept. The
arrays of a stream must be in time order for that; a stream whose are not (writes of one socket
from several threads) has them sorted, as backlog() does, in memory."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pandas as pd

from hostwire.timeline.intervals import is_ascending, stream_codes

WINDOW_ROWS = 1 << 18  # rows of each table a window takes at most (more only for one stamp's rows)
_LOWEST, _HIGHEST = np.iinfo(np.int64).min, np.iinfo(np.int64).max


def stream_rows(stream: pd.Series) -> list[tuple[str, slice | np.ndarray]]:
    """Each stream's rows in groupby(sort=True, observed=True)'s order: a slice of a table held in
    stream order (a categorical whose codes do not decrease: nothing per row is made), else a mask."""
    codes, names = stream_codes(stream)
    categorical = isinstance(stream.dtype, pd.CategoricalDtype)
    if categorical and is_ascending(codes):
        # a bound searched in the codes' own type: else the codes are copied to the wider one
        bounds = [*(int(np.searchsorted(codes, codes.dtype.type(k), side="left")) for k in range(len(names))),
                  len(codes)]
        return [(str(names[k]), slice(bounds[k], bounds[k + 1]))
                for k in range(len(names)) if bounds[k + 1] > bounds[k]]
    order = range(len(names)) if categorical else np.argsort(names.astype(str), kind="stable")
    masks = ((str(names[k]), codes == k) for k in order)
    return [(name, mask) for name, mask in masks if mask.any()]


def stream_backlog(frames: dict[str, np.ndarray], writes: dict[str, np.ndarray],
                   rows: int = WINDOW_ROWS) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """One stream's backlog steps (t_ns, backlog_bytes), window by window: what
    stream_tables.backlog() gives for it. frames: t_ns, seq_end; writes: t_enter_ns, t_exit_ns,
    bytes (those of 0 bytes or less are left out, as there), each in its table's order."""
    f_t, seq_end = _in_time_order(frames["t_ns"], frames["seq_end"])
    by_entry = _in_time_order(writes["t_enter_ns"], writes["bytes"])
    written = _offset(f_t, seq_end, *by_entry, rows)
    w_t, w_bytes = _in_time_order(writes["t_exit_ns"], writes["bytes"])
    sent = _LOWEST
    for fs, ws in _windows(f_t, w_t, rows):
        keep = w_bytes[ws] > 0
        t = np.concatenate([w_t[ws][keep], f_t[fs]]).astype(np.int64)
        dw = np.concatenate([w_bytes[ws][keep], np.zeros(fs.stop - fs.start, np.int64)]).astype(np.int64)
        hs = np.concatenate([np.zeros(int(keep.sum()), np.int64), seq_end[fs]]).astype(np.int64)
        if len(t) == 0:
            continue
        order = np.argsort(t, kind="stable")
        t, dw, hs = t[order], dw[order], hs[order]
        level = written + np.cumsum(dw)
        high = np.maximum(sent, np.maximum.accumulate(hs))
        written, sent = int(level[-1]), int(high[-1])
        last = np.r_[t[1:] != t[:-1], True]  # the window ends between stamps: its last row ends one
        yield t[last], np.maximum(0, level[last] - high[last])


def _offset(f_t: np.ndarray, seq_end: np.ndarray, enter: np.ndarray, nbytes: np.ndarray, rows: int) -> int:
    """stream_tables.writes_offset, window by window: the most any frame carries beyond the bytes
    of the writes entered before its stamp; 0 for a stream traced from its start, or without a
    write of any byte."""
    supplied, most = 0, 0
    for fs, ws in _windows(f_t, enter, rows):
        b = nbytes[ws]
        cum = supplied + np.r_[0, np.cumsum(np.where(b > 0, b, 0).astype(np.int64))]
        entered = np.searchsorted(enter[ws], f_t[fs], side="left")  # those before the window: supplied
        if fs.stop > fs.start:
            most = max(most, int((seq_end[fs] - cum[entered]).max()))
        supplied = int(cum[-1])
    return most if supplied > 0 else 0


def _in_time_order(t: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if is_ascending(t):
        return t, values
    order = np.argsort(t, kind="stable")  # ties keep the table's order, as backlog()'s sort does
    return t[order], values[order]


def _windows(a: np.ndarray, b: np.ndarray, rows: int) -> Iterator[tuple[slice, slice]]:
    """Consecutive windows of two stamp arrays in time order: rows [i0, i1) of a and [j0, j1) of b
    with every stamp in [T0, T1), about `rows` of each, the stamps of one window below the next's."""
    i = j = 0
    while i < len(a) or j < len(b):
        bound = min(int(a[i + rows]) if i + rows < len(a) else _HIGHEST,
                    int(b[j + rows]) if j + rows < len(b) else _HIGHEST)
        i1 = i + int(np.searchsorted(a[i:], bound, side="left"))
        j1 = j + int(np.searchsorted(b[j:], bound, side="left"))
        if i1 == i and j1 == j:  # more than `rows` rows of one stamp: they make a window
            i1 = i + int(np.searchsorted(a[i:], bound, side="right"))
            j1 = j + int(np.searchsorted(b[j:], bound, side="right"))
        yield slice(i, i1), slice(j, j1)
        i, j = i1, j1

