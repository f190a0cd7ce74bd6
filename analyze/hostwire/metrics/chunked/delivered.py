"""The wire figure of goodput and fairness over chunks of a capture: per stream, the unique payload
bytes first seen within the window (hostwire.metrics.goodput.wire_bytes_per_stream over
hostwire.metrics.streams.delivered_bytes), in one pass over the data frames in time order.

A byte counts once, when it first crossed the wire, so the frames before the window are read too:
they cover bytes that a retransmission inside the window must not count again. Each stream carries
from one chunk to the next what the in-memory computation would have seen before the chunk: the
last raw and unwrapped sequence number (32-bit unwrapping continues across the boundary) and the
byte ranges covered so far, as disjoint intervals merged after each chunk. In steady TCP that is
one interval per stream; a hole (a segment lost before the capture point and not yet sent again)
keeps two apart until it is filled, so the carry grows with the streams and their open holes,
not with the capture."""

from __future__ import annotations

import numpy as np
import pandas as pd

from hostwire.errors import InputError
from hostwire.metrics.chunked.labels import LABEL_COLUMNS, StreamLabels, is_tcp
from hostwire.metrics.streams import TCP_SYN, first_coverage, previous_max_end, seq_offset, unwrap_seq
from hostwire.window import Window
from hostwire.read.pcapchunks import CaptureChunks

COLUMNS = ("seq", "flags")  # read beside LABEL_COLUMNS (payload_len is one of them)


class Coverage:
    """Per stream (0 .. streams - 1): the sequence state and the byte ranges seen so far."""

    def __init__(self, streams: int) -> None:
        self.seen = np.zeros(streams, dtype=bool)
        self.last_raw = np.zeros(streams, dtype=np.int64)
        self.last_seq = np.zeros(streams, dtype=np.int64)  # unwrapped
        # covered ranges of all streams, sorted by (group, start), disjoint and not touching
        self.group = np.zeros(0, dtype=np.int64)
        self.start = np.zeros(0, dtype=np.int64)
        self.end = np.zeros(0, dtype=np.int64)

    @property
    def intervals(self) -> int:
        return len(self.group)

    def feed(self, stream: np.ndarray, seq: np.ndarray, flags: np.ndarray, payload: np.ndarray) -> np.ndarray:
        """The new bytes of each data frame of one chunk (rows in time order, every stream >= 0):
        its part of the stream's sequence space that no earlier frame covered."""
        return self.feed_flagged(stream, seq, flags, payload)[0]

    def feed_flagged(self, stream: np.ndarray, seq: np.ndarray, flags: np.ndarray,
                     payload: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """feed's new bytes, and delivered_bytes' `retransmit` of each row: it starts below the
        highest byte an earlier frame of its stream reached (the carried ranges' top included)."""
        n = len(stream)
        new = np.zeros(n, dtype=np.int64)
        retransmit = np.zeros(n, dtype=bool)
        if n == 0:
            return new, retransmit
        order = np.argsort(stream, kind="stable")  # by stream, time order kept within each
        g = stream[order].astype(np.int64)
        start = self._unwrap(g, seq[order].astype(np.int64))
        start = start + ((flags[order].astype(np.int64) & TCP_SYN) != 0)
        end = start + payload[order].astype(np.int64)
        streams = np.unique(g)
        carried = np.isin(self.group, streams)
        k = int(carried.sum())
        # The carried ranges go ahead of the chunk's rows of their stream, as if they were earlier
        # frames: first_coverage then counts only what neither they nor earlier rows cover.
        all_g = np.concatenate([self.group[carried], g])
        all_s = np.concatenate([self.start[carried], start])
        all_e = np.concatenate([self.end[carried], end])
        by_group = np.argsort(all_g, kind="stable")
        sg, ss, se = all_g[by_group], all_s[by_group], all_e[by_group]
        prev_max, _ = previous_max_end(sg, ss, se)
        fresh = np.empty(len(all_g), dtype=np.int64)
        fresh[by_group] = first_coverage(sg, ss, se, prev_max)
        behind = np.empty(len(all_g), dtype=bool)
        behind[by_group] = ss < prev_max
        new[order] = fresh[k:]
        retransmit[order] = behind[k:]
        self._merge(~carried, all_g, all_s, all_e)
        return new, retransmit

    def _unwrap(self, g: np.ndarray, raw: np.ndarray) -> np.ndarray:
        """Unwrapped sequence numbers of rows sorted by stream: unwrap_seq within the chunk, each
        stream seen before shifted so that its first row steps from the carried last number."""
        unwrapped = unwrap_seq(raw, g)
        n = len(g)
        head = np.flatnonzero(np.concatenate([[True], g[1:] != g[:-1]]))
        hg = g[head]
        cont = self.seen[hg]
        shift = np.where(cont, self.last_seq[hg] + seq_offset(raw[head], self.last_raw[hg]) - raw[head], 0)
        unwrapped = unwrapped + np.repeat(shift, np.diff(np.append(head, n)))
        tail = np.append(head[1:], n) - 1
        self.seen[hg] = True
        self.last_raw[hg] = raw[tail]
        self.last_seq[hg] = unwrapped[tail]
        return unwrapped

    def _merge(self, kept: np.ndarray, g: np.ndarray, s: np.ndarray, e: np.ndarray) -> None:
        """The carried ranges of the streams absent from the chunk (`kept`), and the union of the
        ranges (g, s, e) for those present, touching ranges joined."""
        by_start = np.lexsort((s, g))
        g, s, e = g[by_start], s[by_start], e[by_start]
        reach, first = previous_max_end(g, s, e)
        begin = np.flatnonzero(first | (s > reach))
        group = np.concatenate([self.group[kept], g[begin]])
        start = np.concatenate([self.start[kept], s[begin]])
        end = np.concatenate([self.end[kept], np.maximum.reduceat(e, begin)])
        order = np.lexsort((start, group))
        self.group, self.start, self.end = group[order], start[order], end[order]


def wire_bytes(capture: CaptureChunks, labels: StreamLabels, window: Window, need_frames: bool = True) -> pd.Series:
    """Unique payload bytes first seen within the window, per kept stream in name order (0 for a
    stream without any), as hostwire.metrics.compute's bare-capture path gives them; the same
    error when no frame of a kept stream lies in the window (unless not `need_frames`: on a run
    the logs name the streams, and a window without frames gives them 0)."""
    names = labels.names
    cover = Coverage(len(names))
    total = np.zeros(len(names), dtype=np.int64)
    any_in_window = False
    for chunk in capture.time_ordered((*LABEL_COLUMNS, *COLUMNS), is_tcp):
        t = chunk["t_ns"]
        if len(t) == 0:
            continue
        if t[0] > window.end_ns:
            break  # chunks come in time order: no later frame is in the window or before it
        stream, is_data = labels.label(chunk)
        inside = (t >= window.start_ns) & (t <= window.end_ns)
        any_in_window = any_in_window or bool((inside & (stream >= 0)).any())
        if not is_data.any():
            continue
        new = cover.feed(stream[is_data], chunk["seq"][is_data], chunk["flags"][is_data],
                         chunk["payload_len"][is_data])
        counted = inside[is_data]
        # float sums of one chunk's bytes stay far below 2**53: exact
        total += np.bincount(stream[is_data][counted], weights=new[counted],
                             minlength=len(names)).astype(np.int64)
    if need_frames and not any_in_window:
        raise InputError(f"no TCP frames in the window {window.describe()}")
    return pd.Series(total, index=pd.Index(names, dtype=object), dtype=np.int64)
