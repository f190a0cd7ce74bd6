"""A capture's TCP sequence space per stream, as the gap causes read it (docs/timeline.md, "Gaps"):
the frames that move it (sequence_steps), the window the receiver leaves the sender
(usable_window) and the intervals in which an acknowledgement is late (late_acknowledgements)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

TCP_SYN = 0x02
TCP_ACK = 0x10


@dataclass
class SequenceSteps:
    """A capture's TCP frames that move a stream's sequence space, sorted by stream, then time:
    the data direction's frames (position: the end of their bytes) and the receiver's
    acknowledgements (position: the acknowledgement number, window: the scaled window), positions
    unwrapped per stream as one series (acknowledgements live in the data direction's space)."""

    code: np.ndarray
    names: pd.Categorical  # each row's stream
    t_ns: np.ndarray
    is_data_dir: np.ndarray
    position: np.ndarray
    window: np.ndarray
    payload: np.ndarray  # the frame's payload bytes (0 for the receiver's acknowledgements)


def sequence_steps(labelled: pd.DataFrame) -> SequenceSteps:
    from hostwire.metrics.sanity import advertised_window_bytes
    from hostwire.metrics.streams import unwrap_seq

    scaled = advertised_window_bytes(labelled)[0]
    data_dir = labelled["data_dir"].to_numpy()
    flags = labelled["flags"].to_numpy().astype(np.int64)
    keep = data_dir | ((flags & TCP_ACK) != 0)  # a receiver frame without ACK names no edge
    code = labelled["stream"].cat.codes.to_numpy().astype(np.int64)[keep]
    order = np.argsort(code, kind="stable")  # labelled is time-ordered: by stream, then time
    code = code[order]
    dd = data_dir[keep][order]
    seq = labelled["seq"].to_numpy().astype(np.int64)[keep][order]
    payload = labelled["payload_len"].to_numpy().astype(np.int64)[keep][order]
    sent_end = seq + payload + ((flags[keep][order] & TCP_SYN) != 0)
    ack = labelled["ack"].to_numpy().astype(np.int64)[keep][order]
    # the names as a categorical's values: one byte or two per row, not a string each
    return SequenceSteps(code=code, names=labelled["stream"].array[keep][order],
                         t_ns=labelled["t_ns"].to_numpy().astype(np.int64)[keep][order], is_data_dir=dd,
                         position=unwrap_seq(np.where(dd, sent_end, ack), code), window=scaled[keep][order],
                         payload=np.where(dd, payload, 0))


def usable_window(frames: pd.DataFrame | SequenceSteps) -> pd.DataFrame:
    """Per stream, from each of its frames on: the bytes its sender may still put in flight, the
    right edge the receiver last advertised (acknowledgement number + scaled window) minus the
    highest byte sent so far. The advertised window alone is not what stops a sender: a window of
    30 KB with 30 KB in flight holds it back as a closed one does. NaN before the receiver's first
    acknowledgement, and for a stream whose window scale is unknown. Columns stream (categorical),
    t_ns, window_bytes; time-ordered per stream. Sequence numbers are unwrapped per stream (32 bits)."""
    st = frames if isinstance(frames, SequenceSteps) else sequence_steps(frames)
    dd = st.is_data_dir
    frame = pd.DataFrame({"code": st.code, "sent": np.where(dd, st.position, np.nan),
                          "edge": np.where(dd, np.nan, st.position + st.window)})
    by_stream = frame.groupby("code", sort=False)
    high_sent = by_stream["sent"].cummax().groupby(st.code).ffill().to_numpy()
    edge = by_stream["edge"].ffill().to_numpy()
    return pd.DataFrame({"stream": st.names, "t_ns": st.t_ns, "window_bytes": edge - high_sent})


def late_acknowledgements(frames: pd.DataFrame | SequenceSteps) -> pd.DataFrame:
    """Per stream, the intervals in which the oldest byte in flight has waited for its
    acknowledgement longer than twice the stream's shortest round trip (from the capture: a data
    frame's stamp to the first acknowledgement of its last byte). A sender whose bytes in flight
    fill its congestion window sends nothing until an acknowledgement comes; a receiver whose
    application stops reading delays them (Linux acknowledges at once only when the window would
    grow). The oldest byte's wait counts from the first frame that carried it. Columns stream,
    t_start_ns, t_end_ns."""
    st = frames if isinstance(frames, SequenceSteps) else sequence_steps(frames)
    empty = pd.DataFrame({"stream": pd.Series(dtype=str), "t_start_ns": pd.Series(dtype=np.int64),
                          "t_end_ns": pd.Series(dtype=np.int64)})
    names = pd.CategoricalDtype(st.names.categories)  # a byte or two per interval, not a string
    out = [empty.astype({"stream": names})]
    bounds = np.flatnonzero(np.diff(st.code, prepend=-1, append=-1) != 0)
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        t, dd, pos = st.t_ns[lo:hi], st.is_data_dir[lo:hi], st.position[lo:hi]
        if not dd.any() or dd.all():
            continue
        sent_t, sent_end = t[dd], np.maximum.accumulate(pos[dd])
        none = np.iinfo(np.int64).min
        acked = np.maximum.accumulate(np.where(dd, none, pos))
        high = np.maximum.accumulate(np.where(dd, pos, none))
        outstanding = (high > acked) & (acked > none)  # then some frame reaches past `acked`
        # the first frame whose bytes reach past the acknowledged point carried the oldest byte in flight
        first = np.minimum(np.searchsorted(sent_end, acked, side="right"), len(sent_t) - 1)
        # an acknowledgement's round trip: from the first frame that reached its number
        covering = np.searchsorted(sent_end, pos[~dd], side="left")
        known = covering < len(sent_t)
        rtt = t[~dd][known] - sent_t[covering[known]]
        rtt = rtt[rtt > 0]
        if len(rtt) == 0:
            continue
        late_from = np.where(outstanding, sent_t[first] + 2 * int(rtt.min()), 0)
        starts = np.maximum(t, late_from)
        ends = np.append(t[1:], t[-1])
        keep = outstanding & (starts < ends)
        stream = pd.Categorical.from_codes(np.full(int(keep.sum()), st.names.codes[lo]), dtype=names)
        out.append(pd.DataFrame({"stream": stream, "t_start_ns": starts[keep], "t_end_ns": ends[keep]}))
    return pd.concat(out, ignore_index=True)
