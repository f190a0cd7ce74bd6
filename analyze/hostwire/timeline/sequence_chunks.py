"""One TCP stream's sequence facts made chunk by chunk, its state carried from one chunk to the next:
the shortest round trip (RoundTrips), then the usable window, the late acknowledgements and the
sender's waits (Cursor). Fed the stream's rows of hostwire.timeline.sequence.sequence_steps in
time order, in any cut, they give what sequence.usable_window, sequence.late_acknowledgements and
tcp_waits.sender_waits give of the whole stream: the same rows, the same values.

What is carried stays small: running maxima, the last acknowledgement and data frame, and the
data frames the acknowledgements have not passed yet (a window's worth, not the stream)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from hostwire.metrics.streams import seq_offset
from hostwire.timeline.tcp_waits import RELEASE_NS

NONE = np.iinfo(np.int64).min


class Unwrap:
    """32-bit sequence numbers made monotone int64 as hostwire.metrics.streams.unwrap_seq makes
    one group's, across chunks."""

    def __init__(self) -> None:
        self.last_raw: int | None = None
        self.last: int = 0

    def __call__(self, raw: np.ndarray) -> np.ndarray:
        if len(raw) == 0:
            return raw.astype(np.int64)
        raw = raw.astype(np.int64)
        step = np.empty(len(raw), np.int64)
        step[1:] = seq_offset(raw[1:], raw[:-1])
        if self.last_raw is None:
            step[0], base = 0, int(raw[0])
        else:
            step[0], base = int(seq_offset(raw[:1], np.int64(self.last_raw))[0]), self.last
        out = base + np.cumsum(step)
        self.last_raw, self.last = int(raw[-1]), int(out[-1])
        return out


def _running_max(first: int, values: np.ndarray) -> np.ndarray:
    return np.maximum.accumulate(np.r_[np.int64(first), values])[1:]


class _Sent:
    """The data direction's frames as (stamp, highest byte sent through it) where that highest byte
    grows, only those past a bound no later search goes below (searchsorted on the ends finds the
    first frame that reaches a position; frames that do not raise the highest byte are never first)."""

    def __init__(self) -> None:
        self.t = np.zeros(0, np.int64)
        self.end = np.zeros(0, np.int64)

    def joined(self, t: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return np.r_[self.t, t], np.r_[self.end, end]

    def keep_past(self, t: np.ndarray, end: np.ndarray, bound: int) -> None:
        rises = np.r_[True, end[1:] > end[:-1]] if len(end) else np.zeros(0, bool)
        keep = rises & (end > bound)
        self.t, self.end = t[keep], end[keep]


class RoundTrips:
    """The stream's shortest round trip (sequence.late_acknowledgements' rule: a data frame's stamp
    to the first acknowledgement of its last byte, above 0), from its steps chunk by chunk.
    An acknowledgement at or below the highest number already matched with a round trip above 0
    (the anchor) cannot give a shorter one (its first covering frame left no later, and it came no
    earlier), so the frames the anchor passed are let go of."""

    def __init__(self) -> None:
        self.unwrap = Unwrap()
        self.high = NONE
        self.sent = _Sent()
        self.anchor = NONE
        self.shortest: int | None = None

    def add(self, t: np.ndarray, data_dir: np.ndarray, raw: np.ndarray) -> None:
        pos = self.unwrap(raw)
        high = _running_max(self.high, np.where(data_dir, pos, NONE))
        sent_t, sent_end = self.sent.joined(t[data_dir], high[data_dir])
        acks = np.flatnonzero(~data_dir & (pos > self.anchor))
        if len(acks) and len(sent_t):
            covering = np.searchsorted(sent_end, pos[acks], side="left")
            known = covering < len(sent_t)
            rtt = t[acks][known] - sent_t[covering[known]]
            good = rtt > 0
            if good.any():
                shortest = int(rtt[good].min())
                self.shortest = shortest if self.shortest is None else min(self.shortest, shortest)
                self.anchor = max(self.anchor, int(pos[acks][known][good].max()))
        if len(high):
            self.high = int(high[-1])
        self.sent.keep_past(sent_t, sent_end, self.anchor)


class Cursor:
    """The usable window, late acknowledgements and sender's waits of one TCP stream, chunk by chunk.
    mss: the stream's largest payload; rtt: its shortest round trip (RoundTrips; None: none);
    late: the stream has both directions' steps (else no late acknowledgement); waits: it has two
    data frames and an acknowledgement (else no wait)."""

    def __init__(self, mss: int, rtt: int | None, late: bool, waits: bool, release_ns: int = RELEASE_NS) -> None:
        self.mss, self.rtt, self.late, self.waits, self.release_ns = mss, rtt, late and rtt is not None, waits, release_ns
        self.unwrap = Unwrap()
        self.high = NONE
        self.acked = NONE
        self.edge = np.nan
        self.sent = _Sent()
        self.pending: tuple[int, bool] | None = None  # the last row's late-from stamp and whether outstanding
        self.rows = 0  # steps seen (each row's number in the stream)
        self.last_ack = -1  # the number of the latest acknowledgement row
        self.last_ack_t = 0
        self.last_data: tuple[int, int, bool] | None = None  # the last data frame: row, stamp, window full
        self.peak: int | None = None  # the most in flight in the episode so far
        self.window: list[tuple[np.ndarray, np.ndarray]] = []
        self.late_acks: list[tuple[np.ndarray, np.ndarray]] = []
        self.awaiting: list[tuple[np.ndarray, np.ndarray]] = []
        self.timeouts: list[tuple[np.ndarray, np.ndarray]] = []

    def add(self, t: np.ndarray, data_dir: np.ndarray, raw: np.ndarray, window: np.ndarray, payload: np.ndarray) -> None:
        """The stream's next steps: stamps, data direction, raw position (the data frame's end or
        the acknowledgement number), scaled window, payload (0 for acknowledgements)."""
        if len(t) == 0:
            return
        pos = self.unwrap(raw)
        high = _running_max(self.high, np.where(data_dir, pos, NONE))
        acked = _running_max(self.acked, np.where(data_dir, NONE, pos))
        self._window(t, data_dir, pos, window, high)
        if self.late:
            self._late(t, data_dir, high, acked)
        if self.waits:
            self._waits(t, data_dir, pos, payload, high, acked)
        self.high, self.acked, self.rows = int(high[-1]), int(acked[-1]), self.rows + len(t)

    def _window(self, t: np.ndarray, data_dir: np.ndarray, pos: np.ndarray, window: np.ndarray, high: np.ndarray) -> None:
        high_sent = np.where(high > NONE, high.astype(np.float64), np.nan)
        edge = pd.Series(np.r_[self.edge, np.where(data_dir, np.nan, pos + window)]).ffill().to_numpy()
        self.edge = float(edge[-1])
        self.window.append((t, edge[1:] - high_sent))

    def _late(self, t: np.ndarray, data_dir: np.ndarray, high: np.ndarray, acked: np.ndarray) -> None:
        assert self.rtt is not None
        sent_t, sent_end = self.sent.joined(t[data_dir], high[data_dir])
        outstanding = (high > acked) & (acked > NONE)
        if len(sent_t):
            first = np.minimum(np.searchsorted(sent_end, acked, side="right"), len(sent_t) - 1)
            late_from = np.where(outstanding, sent_t[first] + 2 * self.rtt, 0)
        else:
            late_from = np.zeros(len(t), np.int64)
        starts, ends = np.maximum(t, late_from), np.r_[t[1:], 0]
        keep = outstanding & (starts < ends)
        keep[-1] = False  # the last row lasts until the stream's next one, in a later chunk
        if self.pending is not None and self.pending[1] and self.pending[0] < t[0]:
            self.late_acks.append((np.r_[self.pending[0]], t[:1]))
        self.late_acks.append((starts[keep], ends[keep]))
        self.pending = (int(starts[-1]), bool(outstanding[-1]))
        self.sent.keep_past(sent_t, sent_end, int(acked[-1]))

    def _waits(self, t: np.ndarray, data_dir: np.ndarray, pos: np.ndarray, payload: np.ndarray,
               high: np.ndarray, acked: np.ndarray) -> None:
        row = self.rows + np.arange(len(t))
        last_ack = _running_max(self.last_ack, np.where(data_dir, -1, row))
        data = np.flatnonzero(data_dir & (payload > 0))
        before_high = np.r_[self.high, high[:-1]][data]
        retransmit = (before_high > NONE) & (pos[data] - payload[data] < before_high)
        known = acked[data] > NONE
        flight = np.where(known, high[data] - np.where(known, acked[data], 0), -1)
        episode = np.cumsum(retransmit)
        peak = pd.Series(flight).groupby(episode).cummax().to_numpy()
        if self.peak is not None:
            peak = np.where(episode == 0, np.maximum(peak, self.peak), peak)
        full = known & (flight > 0) & (flight >= peak - self.mss)
        # each data frame b with the one before it, a (the stream's last one of an earlier chunk first)
        d_row, d_t, d_full = row[data], t[data], full
        if self.last_data is not None:
            d_row, d_t, d_full = (np.r_[self.last_data[0], d_row], np.r_[self.last_data[1], d_t],
                                  np.r_[self.last_data[2], d_full])
        a_row, a_t, a_full = d_row[:-1], d_t[:-1], d_full[:-1]
        b = data[len(data) + 1 - len(d_row):]
        ack_row = np.where(b > 0, last_ack[np.maximum(b - 1, 0)], self.last_ack)  # the latest before b
        here = ack_row >= self.rows
        ack_t = np.where(here, t[np.maximum(ack_row - self.rows, 0)], self.last_ack_t)
        released = (ack_row > a_row) & (t[b] - ack_t <= self.release_ns)
        waits = a_full & released & (ack_t > a_t)
        timer = retransmit[len(data) - len(b):] & ~released
        self.awaiting.append((a_t[waits], ack_t[waits]))
        self.timeouts.append((a_t[timer], t[b][timer]))
        if len(data):
            self.last_data = (int(row[data[-1]]), int(t[data[-1]]), bool(full[-1]))
            self.peak = int(peak[-1])
        if last_ack[-1] >= self.rows:
            self.last_ack, self.last_ack_t = int(last_ack[-1]), int(t[last_ack[-1] - self.rows])
