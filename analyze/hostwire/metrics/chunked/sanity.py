"""`hostwire metrics sanity` on a capture file or a run's capture over chunks of its rows: the
table of hostwire.metrics.sanity.df_sanity, counter for counter, in memory that grows with the
streams and directions, not with the frames. On a run the manifest, the receivers' reads and the
clock exchange are small and taken as in memory; of the capture the wire clock check needs only
the clock exchange's datagrams, which the second pass collects.

After the streams are found (hostwire.metrics.chunked.labels.scan, every TCP connection: sanity
takes no --stream), a first pass over the whole capture notes per (stream, direction) the scale
its last SYN offered (the in-memory rule reads every SYN, even one after the window) and per stream
the sequence number of its first data frame in the window (the base of the bytes in flight).
The second pass, from the capture's start to the window's end (to the capture's end on a run
with a clock exchange: its closing exchange follows the window), carries from chunk to chunk:
- per (source, destination) address pair: the stamp and wire length of its last frame in the
  window (a gap straddling a chunk boundary is judged like any other) and its gap counts;
- per stream: the covered byte ranges of hostwire.metrics.chunked.delivered (retransmissions and
  new bytes), the base and the running top of the bytes sent for the zero windows (both from the
  stream's first data frame in the capture), and the running tops of bytes sent and acknowledged
  relative to the first data frame in the window, as the in-memory cumulative maxima take them;
- per stream: the smallest raw window its receiver advertised in the window, apart for SYNs
  (never scaled).
Goodput's maximum takes exact integer sums of the window's frame sizes (sanity.DataSums)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from hostwire.errors import InputError
from hostwire.linkrate import link_rate
from hostwire.metrics import clockcheck, sanity
from hostwire.metrics.chunked.delivered import Coverage
from hostwire.metrics.chunked.labels import EP_SPAN, LABEL_COLUMNS, StreamLabels, is_tcp, scan
from hostwire.metrics.damage import DamagedSource
from hostwire.metrics.inputs import Source
from hostwire.metrics.options import MetricsRequest
from hostwire.metrics.run_streams import sanity_context
from hostwire.metrics.sanity import TCP_ACK, TCP_RST, TCP_SYN
from hostwire.metrics.streams import TCP, seq_offset
from hostwire.window import Window
from hostwire.read.pcapchunks import CaptureChunks, Chunk

COLUMNS = ("seq", "ack", "flags", "window", "wscale", "wire_len")  # read beside LABEL_COLUMNS
NONE = -2  # offered shift of a (stream, direction) without a SYN; a SYN without the option offers -1


class Gaps:
    """impossible_intervals over chunks: per direction (sorted keys) the last frame's stamp and
    wire length, its gaps, impossible ones and whether it carried payload."""

    def __init__(self, link_rate_bit_s: float, tolerance: float) -> None:
        self.rate, self.tolerance = link_rate_bit_s, tolerance
        self.keys = np.zeros(0, dtype=np.int64)
        self.last_t = np.zeros(0, dtype=np.int64)
        self.last_len = np.zeros(0, dtype=np.int64)
        self.gaps = np.zeros(0, dtype=np.int64)
        self.impossible = np.zeros(0, dtype=np.int64)
        self.payload = np.zeros(0, dtype=bool)

    def feed(self, key: np.ndarray, t: np.ndarray, length: np.ndarray, payload: np.ndarray) -> None:
        """Rows of the window in time order: direction key, stamp, wire length, payload length."""
        if len(key) == 0:
            return
        uniq = np.unique(key)
        at = np.minimum(np.searchsorted(self.keys, uniq), max(len(self.keys) - 1, 0))
        held = at[self.keys[at] == uniq] if len(self.keys) else at[:0]
        # each direction's carried last frame goes ahead of its rows, as the frame before them
        k = np.concatenate([self.keys[held], key])
        order = np.argsort(k, kind="stable")
        d = k[order]
        tt = np.concatenate([self.last_t[held], t.astype(np.int64)])[order]
        ln = np.concatenate([self.last_len[held], length.astype(np.int64)])[order]
        same = d[1:] == d[:-1]
        gap = (tt[1:] - tt[:-1])[same]
        smaller = np.minimum(ln[1:], ln[:-1])[same]
        serialization_ns = smaller * 8 * 1e9 / self.rate
        impossible = gap < (1.0 - self.tolerance) * serialization_ns
        where = np.searchsorted(uniq, d[1:][same])
        last = np.flatnonzero(np.append(d[1:] != d[:-1], True))  # one per direction, in uniq's order
        keys = np.union1d(self.keys, uniq)
        old, new = np.searchsorted(keys, self.keys), np.searchsorted(keys, uniq)
        state = {}
        for name, dtype in (("last_t", np.int64), ("last_len", np.int64), ("gaps", np.int64),
                            ("impossible", np.int64), ("payload", bool)):
            merged = np.zeros(len(keys), dtype=dtype)
            merged[old] = getattr(self, name)
            state[name] = merged
        state["last_t"][new] = tt[last]
        state["last_len"][new] = ln[last]
        state["gaps"][new] += np.bincount(where, minlength=len(uniq))
        state["impossible"][new] += np.bincount(where[impossible], minlength=len(uniq))
        state["payload"][new] |= np.bincount(np.searchsorted(uniq, key), weights=payload, minlength=len(uniq)) > 0
        self.keys = keys
        for name, value in state.items():
            setattr(self, name, value)

    def totals(self, payload_only: bool) -> tuple[int, int]:
        """(impossible, gaps) of every direction, or of the directions that carried payload."""
        keep = self.payload if payload_only else np.ones(len(self.keys), dtype=bool)
        return int(self.impossible[keep].sum()), int(self.gaps[keep].sum())


def _set_last(target: np.ndarray, index: np.ndarray, values: np.ndarray) -> None:
    """target[index] = values where each index takes its last row's value (pandas' groupby last)."""
    if len(index):
        uniq, first = np.unique(index[::-1], return_index=True)
        target[uniq] = values[::-1][first]


def _set_first(target: np.ndarray, index: np.ndarray, values: np.ndarray) -> None:
    """target[i] = the value of i's first row, where target[i] is still unset (-1)."""
    if len(index):
        uniq, first = np.unique(index, return_index=True)
        unset = target[uniq] < 0
        target[uniq[unset]] = values[first[unset]]


def _running_max(code: np.ndarray, values: np.ndarray, carried: np.ndarray) -> np.ndarray:
    """Per row: the largest value of its stream up to it (groupby cummax), the carried top of the
    earlier chunks included; the carry is raised to the chunk's top."""
    if len(code) == 0:
        return values
    high = np.maximum(pd.Series(values).groupby(code).cummax().to_numpy(), carried[code])
    np.maximum.at(carried, code, values)
    return high


def _relative(seq: np.ndarray, base: np.ndarray) -> np.ndarray:
    """Sequence numbers relative to a base, modulo 2**32, as the in-memory counters take them."""
    return (seq.astype(np.int64) - base) % 2**32


def _first_pass(capture: CaptureChunks, labels: StreamLabels, window: Window) -> tuple[np.ndarray, np.ndarray]:
    """(offered shift per stream * 2 + data_dir, NONE without a SYN; seq of each stream's first data
    frame in the window, -1 without one)."""
    n = len(labels.names)
    offered = np.full(2 * n, NONE, dtype=np.int64)
    base = np.full(n, -1, dtype=np.int64)
    for chunk in capture.time_ordered((*LABEL_COLUMNS, "seq", "flags", "wscale"), is_tcp):
        t = chunk["t_ns"]
        if len(t) == 0:
            continue
        stream, data_dir = labels.directions(chunk)
        syn = (chunk["flags"].astype(np.int64) & TCP_SYN) != 0
        _set_last(offered, stream[syn] * 2 + data_dir[syn], chunk["wscale"][syn].astype(np.int64))
        rows = np.flatnonzero(data_dir & (chunk["payload_len"] > 0) & (t >= window.start_ns) & (t <= window.end_ns))
        _set_first(base, stream[rows], chunk["seq"][rows].astype(np.int64))
    return offered, base


class Streams:
    """The per-stream carry of the second pass and the TCP counters it adds up."""

    def __init__(self, n: int, offered: np.ndarray, flight_base: np.ndarray) -> None:
        pair = offered.reshape(n, 2)
        self.known = (pair != NONE).all(axis=1)
        # the receiver's (reverse direction's) window is scaled by the shift it offered itself
        self.shift_rev = np.where((pair >= 0).all(axis=1), pair[:, 0], 0)
        self.unknown = int((~self.known).sum())
        self.cover = Coverage(n)
        self.zero_base = np.full(n, -1, dtype=np.int64)
        self.zero_high = np.full(n, -1, dtype=np.int64)
        self.flight_base = flight_base
        self.sent_high = np.full(n, sanity.NO_OFFSET, dtype=np.int64)
        self.ack_high = np.full(n, sanity.NO_OFFSET, dtype=np.int64)
        self.data_frames = self.retransmitted = self.reverse_frames = self.zero_windows = 0
        self.min_window = np.inf
        self.max_flight: int | None = None
        self.new_bytes = np.zeros(n, dtype=np.int64)  # per stream: a run's wire figure keeps its own streams
        self.sums = dict(wire_len=0, payload=0, largest_payload=0, shaped_frames=0, shaped_wire_len=0)

    def feed(self, c: Chunk, stream: np.ndarray, data_dir: np.ndarray, inside: np.ndarray) -> None:
        seq, ack, payload = c["seq"].astype(np.int64), c["ack"].astype(np.int64), c["payload_len"].astype(np.int64)
        flags = c["flags"].astype(np.int64)
        is_data = data_dir & (payload > 0)
        new, retransmit = self.cover.feed_flagged(stream[is_data], seq[is_data], flags[is_data], payload[is_data])
        counted = inside[is_data]
        self.data_frames += int(counted.sum())
        self.retransmitted += int(retransmit[counted].sum())
        # float sums of one chunk's bytes stay far below 2**53: exact
        self.new_bytes += np.bincount(stream[is_data][counted], weights=new[counted],
                                      minlength=len(self.new_bytes)).astype(np.int64)
        wire = c["wire_len"].astype(np.int64)
        data_in = is_data & inside
        self.sums["wire_len"] += int(wire[data_in].sum())
        self.sums["payload"] += int(payload[data_in].sum())
        if data_in.any():
            self.sums["largest_payload"] = max(self.sums["largest_payload"], int(payload[data_in].max()))
        shaped = data_dir & inside
        self.sums["shaped_frames"] += int(shaped.sum())
        self.sums["shaped_wire_len"] += int(wire[shaped].sum())
        syn = (flags & TCP_SYN) != 0
        reverse = ~data_dir & inside
        self.reverse_frames += int(reverse.sum())
        scaled = reverse & self.known[stream]
        if scaled.any():  # float as in memory: window x 2**shift
            shift = np.where(syn[scaled], 0, self.shift_rev[stream[scaled]])
            scaled_bytes = c["window"][scaled].astype(np.float64) * np.exp2(shift)
            self.min_window = min(self.min_window, float(scaled_bytes.min()))
        self._zero_windows(stream, data_dir, is_data, inside, seq, ack, payload, flags, c["window"])
        self._flight(stream, data_dir, is_data, inside, seq, ack, payload)

    def _zero_windows(self, stream: np.ndarray, data_dir: np.ndarray, is_data: np.ndarray, inside: np.ndarray,
                      seq: np.ndarray, ack: np.ndarray, payload: np.ndarray, flags: np.ndarray,
                      window: np.ndarray) -> None:
        rows = np.flatnonzero(is_data)
        _set_first(self.zero_base, stream[rows], seq[rows])
        base = self.zero_base[stream]
        sent = np.where(is_data, _relative(seq, base) + payload, -1)
        high = _running_max(stream, sent, self.zero_high)
        zero = (~data_dir & (window == 0) & ((flags & TCP_ACK) != 0) & ((flags & (TCP_RST | TCP_SYN)) == 0)
                & (high > _relative(ack, base)) & (high >= 0) & inside)
        self.zero_windows += int(zero.sum())

    def _flight(self, stream: np.ndarray, data_dir: np.ndarray, is_data: np.ndarray, inside: np.ndarray,
                seq: np.ndarray, ack: np.ndarray, payload: np.ndarray) -> None:
        keep = inside & (self.flight_base[stream] >= 0)
        if not keep.any():
            return
        s, d, dd = stream[keep], is_data[keep], data_dir[keep]
        base = self.flight_base[s]
        sent = np.where(d, seq_offset(seq[keep], base) + payload[keep], sanity.NO_OFFSET)
        acked = np.where(~dd, seq_offset(ack[keep], base), sanity.NO_OFFSET)
        high_sent = _running_max(s, sent, self.sent_high)
        high_ack = _running_max(s, acked, self.ack_high)
        top = int(np.where(d & (high_ack > sanity.NO_OFFSET), high_sent - high_ack, 0).max())
        self.max_flight = top if self.max_flight is None else max(self.max_flight, top)

    def counters(self) -> dict[str, Any]:
        n = self.data_frames
        return {
            "data_frames": n, "tcp_retransmissions": self.retransmitted,
            "retransmitted_share": self.retransmitted / n if n else 0.0,
            "min_advertised_window": int(self.min_window) if np.isfinite(self.min_window) else -1,
            "window_scale_unknown_streams": self.unknown, "zero_window_advertisements": self.zero_windows,
            "max_bytes_in_flight": 0 if n == 0 or self.reverse_frames == 0 or self.max_flight is None
            else int(max(0, self.max_flight)),
        }

    def data_sums(self) -> sanity.DataSums:
        return sanity.DataSums(data_frames=self.data_frames, **self.sums)


def df_sanity(capture: CaptureChunks, window: Window, request: MetricsRequest, damaged: list[DamagedSource],
              source: Source | None = None) -> pd.DataFrame:
    """The sanity table of hostwire.metrics.compute for this capture (its window, the options
    --link-rate, --tolerance, --frame-overhead, --max-retransmit-share; --stream plays no part, as
    in memory). `source`: the run whose capture it is (its view on the chunked path): the link
    rate, loss counters, status, receivers' reads and clock exchange are the run's, and the wire
    goodput counts only the streams its logs name. NotImplementedError for more addresses than
    the stream labels take."""
    sanity.check_options(request.max_retransmit_share, request.frame_overhead)
    manifest = source.manifest if source is not None else None
    link = link_rate(manifest, request.link_rate)
    if not link.unbounded:
        sanity.check_tolerance(request.tolerance)
    if len(capture.addresses) > EP_SPAN >> 16:
        raise NotImplementedError(f"more than {EP_SPAN >> 16} addresses")
    try:
        labels: StreamLabels | None = scan(capture)
    except InputError:  # no TCP frame: gaps of the directions carrying payload, TCP counters zero
        labels = None
    if source is None:
        ctx = sanity.Context(damaged=damaged, link_rate_known=link.enforced, link_unbounded=link.unbounded,
                             frame_overhead=request.frame_overhead, max_retransmit_share=request.max_retransmit_share)
    else:

        ctx = sanity_context(source, request, link)
    sync_port = source.sync_port if source is not None and source.clock_sync is not None else None
    streams = None
    if labels is not None:
        offered, flight_base = _first_pass(capture, labels, window)
        streams = Streams(len(labels.names), offered, flight_base)
    gaps = Gaps(link.bit_s, request.tolerance)
    frames = 0
    clock: list[pd.DataFrame] = []
    span = len(capture.addresses)
    for chunk in capture.time_ordered((*LABEL_COLUMNS, *COLUMNS)):
        t = chunk["t_ns"]
        if len(t) == 0:
            continue
        if sync_port is not None:
            clock.append(_clock_frames(chunk, sync_port))
        if t[0] > window.end_ns:
            if sync_port is None:
                break  # time order: nothing later is in the window or before it
            continue  # the clock exchange at the run's end lies after the window
        inside = (t >= window.start_ns) & (t <= window.end_ns)
        frames += int(inside.sum())
        if streams is None or labels is None:
            fed = inside
        else:
            tcp = chunk["proto"] == TCP
            chunk = {k: v[tcp] for k, v in chunk.items()}
            inside = inside[tcp]
            stream, data_dir = labels.directions(chunk)
            streams.feed(chunk, stream, data_dir, inside)
            fed = data_dir & inside
        key = chunk["src"][fed].astype(np.int64) * span + chunk["dst"][fed]
        gaps.feed(key, chunk["t_ns"][fed], chunk["wire_len"][fed], chunk["payload_len"][fed])
    counters: dict[str, Any] = {"frames": frames}
    if not link.unbounded:
        counters.update(sanity.gap_counters(*gaps.totals(payload_only=streams is None)))
    counters.update(sanity.NO_TCP_COUNTERS if streams is None else streams.counters())
    wire = 0.0
    if streams is not None and labels is not None:
        # a run's figure: the streams its logs name (goodput.wire_bytes_per_stream's `streams`)
        kept = np.ones(len(labels.names), dtype=bool) if ctx.streams is None else \
            np.isin(np.asarray(labels.names, dtype=object), list(ctx.streams))
        wire = float(streams.new_bytes[kept].sum())
    sums = (streams.data_sums() if streams is not None else sanity.DataSums()) if link.enforced else None
    goodput_counters, above = sanity.goodput_figures(wire, sums, window, link.bit_s, ctx)
    wire_clock = None
    if source is not None and sync_port is not None:
        assert source.clock_sync is not None
        clock_frames = pd.concat(clock, ignore_index=True) if clock else _clock_frames({}, sync_port)
        wire_clock = clockcheck.df_wire_clock_check(clock_frames, source.clock_sync, sync_port, window)
    return sanity.assemble(counters, goodput_counters, above, window, manifest, wire_clock, ctx)


CLOCK_COLUMNS = ("t_ns", "proto", "sport", "dport", "payload_len")  # what the wire clock check reads


def _clock_frames(chunk: Chunk, port: int) -> pd.DataFrame:
    """The chunk's datagrams of the clock exchange (requests to the receiver's UDP port, replies
    from it, by their sizes): the only frames hostwire.metrics.clockcheck looks at."""
    if not chunk:
        return pd.DataFrame({c: np.zeros(0, dtype=np.int64) for c in CLOCK_COLUMNS})
    payload = chunk["payload_len"]
    keep = (chunk["proto"] == clockcheck.UDP) & (
        ((chunk["dport"] == port) & (payload == clockcheck.REQUEST_BYTES))
        | ((chunk["sport"] == port) & (payload == clockcheck.REPLY_BYTES)))
    return pd.DataFrame({c: chunk[c][keep] for c in CLOCK_COLUMNS})
