"""What TCP itself holds a stream back by, read from the capture at the sender's end
(docs/timeline.md, "Gaps"): between two consecutive data frames of a stream, the time it waits for
an acknowledgement that its congestion window or its ACK clock needs (awaiting-ack), and the
silence a retransmission timer ends (retransmit-timeout).

Both are read from the frames alone, per pair of consecutive data frames a, b of a stream:

- awaiting-ack, [a, the last acknowledgement before b): the bytes in flight when a left (the
  highest byte sent minus the highest acknowledged) were within one segment of the most the
  stream had in flight since its last retransmission (what the acknowledgements had let it put in
  flight before: its window then was full), and b left at most `release_ns` after an
  acknowledgement arrived (that acknowledgement released it);
- retransmit-timeout, [a, b): b is a retransmission (it starts below the highest byte sent
  before) and no acknowledgement arrived in the `release_ns` before it (a timer sent it, not
  duplicate acknowledgements).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hostwire.timeline.sequence import SequenceSteps

# "Right after an acknowledgement": a Linux sender transmits what an acknowledgement releases in
# the softirq that processes it, tens of microseconds after the acknowledgement crossed the
# capture point; 200 us leaves room for a busy CPU while staying far below the round trips over
# which windows fill (docs/timeline.md, "Gaps").
RELEASE_NS = 200_000

_NONE = np.iinfo(np.int64).min


def _empty() -> pd.DataFrame:
    return pd.DataFrame({"stream": pd.Series(dtype=str), "t_start_ns": pd.Series(dtype=np.int64),
                         "t_end_ns": pd.Series(dtype=np.int64)})


def sender_waits(steps: SequenceSteps, release_ns: int = RELEASE_NS) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(awaiting_ack, retransmit_timeout): per stream, the intervals (stream, t_start_ns,
    t_end_ns) in which each of the two conditions of the module doc holds."""
    awaiting, timeouts = [_empty()], [_empty()]
    bounds = np.flatnonzero(np.diff(steps.code, prepend=-1, append=-1) != 0)
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        found = _one_stream(steps.t_ns[lo:hi], steps.is_data_dir[lo:hi], steps.position[lo:hi],
                            steps.payload[lo:hi], release_ns)
        if found is None:
            continue
        name = steps.names[lo]
        (a_s, a_e), (r_s, r_e) = found
        awaiting.append(pd.DataFrame({"stream": name, "t_start_ns": a_s, "t_end_ns": a_e}))
        timeouts.append(pd.DataFrame({"stream": name, "t_start_ns": r_s, "t_end_ns": r_e}))
    return pd.concat(awaiting, ignore_index=True), pd.concat(timeouts, ignore_index=True)


def _one_stream(t: np.ndarray, dd: np.ndarray, pos: np.ndarray, payload: np.ndarray, release_ns: int
                ) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]] | None:
    """One stream's rows (time-ordered; dd: the data direction's frames, pos: their end, or the
    acknowledgement number): the awaiting-ack and retransmit-timeout intervals."""
    data = np.flatnonzero(dd & (payload > 0))
    if len(data) < 2 or dd.all():
        return None
    acked = np.maximum.accumulate(np.where(dd, _NONE, pos))
    high = np.maximum.accumulate(np.where(dd, pos, _NONE))
    # the row of the latest acknowledgement at or before each row (-1: none yet)
    last_ack = np.maximum.accumulate(np.where(dd, -1, np.arange(len(t))))
    start = pos[data] - payload[data]
    high_before = np.where(data > 0, high[np.maximum(data - 1, 0)], _NONE)
    retransmit = (high_before > _NONE) & (start < high_before)
    known = acked[data] > _NONE
    flight = np.where(known, high[data] - np.where(known, acked[data], 0), -1)
    # the most in flight since the last retransmission (a loss shrinks the window), this frame included
    episode = np.cumsum(retransmit)
    peak = pd.Series(flight).groupby(episode).cummax().to_numpy()
    mss = int(payload[data].max())
    full = known & (flight > 0) & (flight >= peak - mss)
    a, b = t[data[:-1]], t[data[1:]]
    ack_row = last_ack[data[1:] - 1]  # the latest acknowledgement before b
    ack_in_gap = ack_row > data[:-1]
    ack_t = t[np.maximum(ack_row, 0)]
    released = ack_in_gap & (b - ack_t <= release_ns)
    waits = full[:-1] & released & (ack_t > a)
    timer = retransmit[1:] & ~released
    return (a[waits], ack_t[waits]), (a[timer], b[timer])
