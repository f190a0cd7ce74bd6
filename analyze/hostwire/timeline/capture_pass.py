"""The capture's part of the gap inputs (hostwire.timeline.gap_sources) made in three passes over
the run's capture read in chunks (hostwire.read.pcapchunks), in time order, never holding the
capture or its labelled frames whole:

1. the flows and what the later passes need of each TCP stream's whole capture
   (hostwire.timeline.capture_flows);
2. each TCP stream's shortest round trip and the base of its relative sequence numbers, and the
   addresses that send data;
3. the data frames (as hostwire.timeline.build.data_frames gives them, with the columns the gaps
   read), the frames sharing the data direction of the link, the usable window, the late
   acknowledgements and the sender's waits (hostwire.timeline.sequence_chunks), and the silences of
   the capture's stamps (hostwire.timeline.stolen.silences).

The tables are those the whole capture gives in memory, row for row
(analyze/tests/test_capture_pass.py); what they hold is a few numbers per frame, not a frame."""

from __future__ import annotations

import os

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from hostwire.errors import InputError
from hostwire.metrics.chunked.labels import EP_SPAN
from hostwire.metrics.streams import TCP, UDP
from hostwire.read.pcapchunks import CaptureChunks, Chunk
from hostwire.run_directory import Run
from hostwire.spill import Columns, code_dtype, spilled_array
from hostwire.timeline.capture_flows import Flows, TcpStream, scan, tcp_or_udp
from hostwire.timeline.sequence import TCP_ACK, TCP_SYN
from hostwire.timeline.sequence_chunks import Cursor, RoundTrips, Unwrap
from hostwire.timeline.stolen import MIN_SILENCE_NS, OPEN

COLUMNS = ("t_ns", "proto", "src", "dst", "sport", "dport", "payload_len", "flags", "seq", "ack", "window",
           "wscale", "wire_len")


@dataclass
class CaptureSide:
    """What gap_inputs reads of the capture: data (t_ns, stream, wire_len, payload_len, seq_end;
    by stream, then time), protos (stream -> tcp or udp, streams with data frames), sender_side
    (the addresses that send data), link (t_ns, stream, wire_len), window, late_acks, awaiting,
    timeouts (as gap_sources._capture_tables gives them) and silences (stolen.silences of every
    frame's stamp)."""

    data: pd.DataFrame
    protos: dict[str, str]
    sender_side: set[str]
    link: pd.DataFrame
    window: pd.DataFrame
    late_acks: pd.DataFrame
    awaiting: pd.DataFrame
    timeouts: pd.DataFrame
    silences: tuple[np.ndarray, np.ndarray]
    first_ns: int | None = None
    last_ns: int | None = None
    bases: dict[str, int] = field(default_factory=dict)  # TCP stream -> sequence number of its relative byte 0


def readable_in_chunks(capture: CaptureChunks) -> bool:
    """Whether the flows' endpoints fit the chunked labels (hostwire.metrics.chunked.labels.EP_SPAN)."""
    return len(capture.addresses) <= EP_SPAN >> 16


def long_capture(run: Run) -> bool:
    """Whether the run's capture is read in chunks even where its kernel trace is read whole: as
    long as the metrics' `auto` engine reads in chunks (hostwire.metrics.chunked.engine.AUTO_BYTES)."""
    from hostwire.metrics.chunked.engine import AUTO_BYTES

    pcap = run.path / "raw" / "wire.pcap"
    return pcap.is_file() and pcap.stat().st_size >= AUTO_BYTES


def open_capture(run: Run, progress: Callable[[int, int], None] | None = None,
                 columns: Sequence[str] = COLUMNS) -> CaptureChunks:
    """The run's capture read in chunks on the run's clock (those of its columns), refused as
    Run.df_frames refuses it (damaged, or different from its recorded digest)."""
    from hostwire.metrics.chunked.runs import clock_pairs, digest_problem

    pcap = run.path / "raw" / "wire.pcap"
    if not pcap.is_file():
        raise InputError(f"{pcap}: missing: this run has no wire capture")
    differs = digest_problem(run)
    if differs is not None:
        raise InputError(differs[1])
    return CaptureChunks(pcap, clock_pairs(run), columns=columns, progress=progress,
                         chunk_rows=int(os.environ.get("HOSTWIRE_CHUNK_ROWS") or PASS_ROWS))


# Frames per chunk: the third pass holds about 190 bytes per frame of its chunk (its columns, each
# stream's rows, their steps), 190 MiB at pcapchunks' 1 M; a quarter of that is as fast here.
PASS_ROWS = 1 << 18


def capture_side(capture: CaptureChunks) -> CaptureSide:
    """The three passes of the module doc over an open capture."""
    flows = scan(capture)
    if not flows.names:
        raise InputError(f"no TCP or UDP frames among {capture.rows} frame(s): nothing to measure")
    bases, rtts, sender_codes = _second_pass(capture, flows)
    third = _ThirdPass(flows, bases, rtts, sender_codes)
    for chunk in capture.time_ordered(COLUMNS):
        third.add(chunk)
    return third.result(capture)


def _by_proto(flows: Flows, chunk: Chunk) -> list[tuple[int, Chunk, np.ndarray, np.ndarray]]:
    """A time-ordered chunk's TCP and UDP rows: (proto, rows, stream code, data_dir)."""
    out = []
    for proto in (TCP, UDP):
        rows = chunk["proto"] == proto
        if proto in flows.conns and flows.conns[proto].fwd_bytes and rows.any():
            part = {k: v[rows] for k, v in chunk.items()}
            out.append((proto, part, *flows.label(part, proto)))
    return out


def _per_stream(code: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """(stream code, its rows in time order) of a time-ordered chunk."""
    order = np.argsort(code, kind="stable")
    bounds = np.flatnonzero(np.diff(code[order], prepend=-1, append=-1) != 0)
    return [(int(code[order[lo]]), order[lo:hi]) for lo, hi in zip(bounds[:-1], bounds[1:])]


def _steps(part: Chunk, data_dir: np.ndarray, facts: TcpStream) -> dict[str, np.ndarray]:
    """One TCP stream's rows as hostwire.timeline.sequence.sequence_steps takes them: the data
    direction's frames and the receiver's acknowledgements, their raw position, scaled window and
    payload."""
    flags = part["flags"].astype(np.int64)
    keep = data_dir | ((flags & TCP_ACK) != 0)
    flags, dd = flags[keep], data_dir[keep]
    payload = part["payload_len"][keep].astype(np.int64)
    syn = (flags & TCP_SYN) != 0
    raw = np.where(dd, part["seq"][keep].astype(np.int64) + payload + syn, part["ack"][keep].astype(np.int64))
    shift = np.where(syn, 0, np.where(dd, facts.data_shift, facts.ack_shift))
    window = part["window"][keep].astype(np.float64) * np.exp2(shift)
    if not facts.scale_known:
        window[:] = np.nan
    return {"t": part["t_ns"][keep].astype(np.int64), "data_dir": dd, "raw": raw, "window": window,
            "payload": np.where(dd, payload, 0)}


@dataclass
class _DataBase:
    """The base of a TCP stream's relative sequence numbers (stream_tables.stream_bytes): the ISN
    + 1 when its SYN was captured, else the lowest sequence number of its data frames."""

    unwrap: Unwrap = field(default_factory=Unwrap)
    first_raw: int | None = None
    lowest: int | None = None

    def add(self, seq: np.ndarray) -> None:
        if len(seq) == 0:
            return
        if self.first_raw is None:
            self.first_raw = int(seq[0])
        low = int(self.unwrap(seq).min())
        self.lowest = low if self.lowest is None else min(self.lowest, low)

    def base(self, isn: int | None) -> int:
        assert self.first_raw is not None and self.lowest is not None
        if isn is None:
            return self.lowest
        # the unwrapped value of the ISN + 1, near the stream's first sequence number (which unwraps to itself)
        return self.first_raw - (((self.first_raw - (isn + 1)) + 2**31) % 2**32 - 2**31)


def _second_pass(capture: CaptureChunks, flows: Flows) -> tuple[dict[int, int], dict[int, int | None], set[int]]:
    """(TCP stream -> base of its relative sequence numbers, TCP stream -> shortest round trip,
    the address codes that send data frames)."""
    trips = {code: RoundTrips() for code in flows.tcp}
    bases = {code: _DataBase() for code in flows.tcp}
    senders: set[int] = set()
    for chunk in capture.time_ordered(COLUMNS, tcp_or_udp):
        for proto, part, code, data_dir in _by_proto(flows, chunk):
            is_data = data_dir & (part["payload_len"] > 0)
            senders.update(np.unique(part["src"][is_data]).tolist())
            if proto != TCP:
                continue
            for stream, rows in _per_stream(code):
                one = {k: v[rows] for k, v in part.items()}
                steps = _steps(one, data_dir[rows], flows.tcp[stream])
                trips[stream].add(steps["t"], steps["data_dir"], steps["raw"])
                bases[stream].add(one["seq"][is_data[rows]])
    return ({c: b.base(flows.tcp[c].isn) for c, b in bases.items() if b.first_raw is not None},
            {c: t.shortest for c, t in trips.items()}, senders)


# the tables of the third pass, written to disk as they are made (hostwire.spill)
_TABLES = {"data": {"t_ns": np.int64, "wire_len": np.int64, "payload_len": np.int64, "seq_end": np.int64},
           "link": {"t_ns": np.int64, "code": np.int64, "wire_len": np.int64},
           "window": {"t_ns": np.int64, "window_bytes": np.float64},
           **{what: {"t_start_ns": np.int64, "t_end_ns": np.int64} for what in ("late_acks", "awaiting", "timeouts")}}


class _ThirdPass:
    """The tables of CaptureSide, chunk by chunk, each piece written to disk as it is made."""

    def __init__(self, flows: Flows, bases: dict[int, int], rtts: dict[int, int | None], sender_codes: set[int]) -> None:
        self.flows, self.bases = flows, bases
        self.sender_codes = np.asarray(sorted(sender_codes), dtype=np.int64)
        self.cursors = {code: Cursor(f.mss, rtts[code], f.data_dir_frames > 0 and f.acknowledgements > 0,
                                     f.data_frames >= 2 and f.acknowledgements > 0) for code, f in flows.tcp.items()}
        self.unwraps = {code: Unwrap() for code in bases}
        self.udp_bytes: dict[int, int] = {}
        self.out = {what: Columns(columns) for what, columns in _TABLES.items()}  # keyed by stream code
        self.silence_starts: list[np.ndarray] = []
        self.silence_ends: list[np.ndarray] = []
        self.first_ns: int | None = None
        self.last_ns: int | None = None

    def add(self, chunk: Chunk) -> None:
        t = chunk["t_ns"]
        if len(t) == 0:
            return
        self._silences(t.astype(np.int64))
        # the link's frames in the chunk's (time) order: the TCP and UDP rows together
        flow = np.full(len(t), -1, np.int64)
        for proto, part, code, data_dir in _by_proto(self.flows, chunk):
            flow[chunk["proto"] == proto] = code
            is_data = data_dir & (part["payload_len"] > 0)
            for stream, rows in _per_stream(code):
                one = {k: v[rows] for k, v in part.items()}
                self._data(proto, stream, one, is_data[rows])
                if proto == TCP:
                    self.cursors[stream].add(*_steps(one, data_dir[rows], self.flows.tcp[stream]).values())
        on_link = (flow >= 0) & np.isin(chunk["src"].astype(np.int64), self.sender_codes)
        self.out["link"].append(0, t_ns=t[on_link], code=flow[on_link], wire_len=chunk["wire_len"][on_link])
        for code, cursor in self.cursors.items():  # what the chunk gave each stream goes to disk
            for what in ("window", "late_acks", "awaiting", "timeouts"):
                pieces = getattr(cursor, what)
                for first, second in pieces:
                    self.out[what].append(code, **dict(zip(_TABLES[what], (first, second))))
                pieces.clear()

    def _silences(self, t: np.ndarray) -> None:
        if self.first_ns is None:
            self.first_ns = int(t[0])
        joined = t if self.last_ns is None else np.r_[np.int64(self.last_ns), t]
        long = np.flatnonzero(np.diff(joined) >= MIN_SILENCE_NS)
        self.silence_starts.append(joined[long])
        self.silence_ends.append(joined[long + 1])
        self.last_ns = int(t[-1])

    def _data(self, proto: int, stream: int, one: Chunk, is_data: np.ndarray) -> None:
        if not is_data.any():
            return
        payload = one["payload_len"][is_data].astype(np.int64)
        if proto == TCP:
            start = self.unwraps[stream](one["seq"][is_data]) - self.bases[stream]
            end = start + payload
        else:  # a datagram's bytes in the order they crossed the wire
            end = self.udp_bytes.get(stream, 0) + np.cumsum(payload)
            self.udp_bytes[stream] = int(end[-1])
        self.out["data"].append(stream, t_ns=one["t_ns"][is_data], wire_len=one["wire_len"][is_data],
                                payload_len=payload, seq_end=end)

    def result(self, capture: CaptureChunks) -> CaptureSide:
        """The tables, their columns mapped from disk, by stream, then time (the link: in time order)."""
        flows = self.flows
        names = pd.Index(flows.names)
        data = self._table("data", names)
        link_columns = self.out["link"].joined()
        link = pd.DataFrame({"t_ns": link_columns["t_ns"], "stream": pd.Categorical.from_codes(
            spilled_array(link_columns["code"].astype(code_dtype(len(names)))), categories=names),
                             "wire_len": link_columns["wire_len"]}, copy=False)
        tcp_names = names[sorted(self.cursors)]
        tables = {what: self._table(what, names, tcp_names if what in ("window", "late_acks") else None)
                  for what in ("window", "late_acks", "awaiting", "timeouts")}
        open_ = np.int64(OPEN)
        silences = ((np.r_[-open_, *self.silence_starts, self.last_ns], np.r_[self.first_ns, *self.silence_ends, open_])
                    if self.first_ns is not None else (np.r_[-open_], np.r_[open_]))
        return CaptureSide(
            data=data, protos={flows.names[c]: "tcp" if flows.proto_of[c] == TCP else "udp" for c in self.out["data"].keys()},
            sender_side={capture.addresses[int(a)] for a in self.sender_codes}, link=link, silences=silences,
            first_ns=self.first_ns, last_ns=self.last_ns,
            bases={flows.names[c]: int(b) % (1 << 32) for c, b in self.bases.items()}, **tables)

    def _table(self, what: str, names: pd.Index, categories: pd.Index | None = None) -> pd.DataFrame:
        """One table of the pass, by stream then time; its stream a categorical of the streams it
        holds (categories: of these), or, without categories for a table of few rows, their names."""
        columns = self.out[what]
        keys = columns.keys()
        if categories is not None:  # every TCP stream, rows or not
            place = np.full(len(names), -1, np.int64)
            place[[names.get_loc(n) for n in categories]] = np.arange(len(categories))
            codes = spilled_array(np.repeat(place[keys].astype(code_dtype(len(categories))), [columns.rows[k] for k in keys]))
            stream: object = pd.Categorical.from_codes(codes, dtype=pd.CategoricalDtype(categories))
        elif what == "data":  # the data frames' table: t_ns first
            table = columns.table(names[keys])
            return table[["t_ns", "stream", *[c for c in table.columns if c not in ("t_ns", "stream")]]]
        else:
            stream = np.repeat(np.asarray([names[k] for k in keys], dtype=object), [columns.rows[k] for k in keys])
        return pd.DataFrame({"stream": stream, **columns.joined()}, copy=False)
