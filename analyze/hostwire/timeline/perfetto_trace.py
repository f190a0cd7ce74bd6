"""A run's timeline as a Perfetto trace (the protobuf bytes the perfetto package describes) and as
text, one line per event (docs/timeline.md, "hostwire timeline").

Tracks: one per CPU (what ran: a slice per task interval, idle left out), one per benchmark
process with its system calls as slices, one per stream with its data frames as instants, counter
tracks for each CPU's run-queue length and each stream's backlog; a flow joins each write to the
frames that carry its bytes. Each event is one protobuf packet; the packets of all tracks of a
kind are encoded at once with numpy (hostwire.timeline.protowire), byte for byte what the
perfetto package's TraceProtoBuilder gives (analyze/tests/test_timeline_trace.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from hostwire.errors import InputError
from hostwire.timeline import protowire
from hostwire.timeline.build import Timeline
from hostwire.window import Window

if TYPE_CHECKING:
    from hostwire.run_directory import Run
    from hostwire.timeline.kernel_slabs import KernelSlabs

SEQ_ID = 7341


@dataclass
class TraceTables:
    """What goes into the trace, each table already cut to the window (any may be empty)."""

    running: pd.DataFrame = field(default_factory=pd.DataFrame)     # cpu, t_start_ns, t_end_ns, pid, comm, role
    calls: pd.DataFrame = field(default_factory=pd.DataFrame)       # pid, role, call, fd, t_enter_ns, t_exit_ns, result
    frames: pd.DataFrame = field(default_factory=pd.DataFrame)      # stream, t_ns, seq_start, payload_len
    runqueue: pd.DataFrame = field(default_factory=pd.DataFrame)    # cpu, t_ns, nr_running
    backlog: pd.DataFrame = field(default_factory=pd.DataFrame)     # stream, t_ns, backlog_bytes
    segments: pd.DataFrame = field(default_factory=pd.DataFrame)    # stream, frame_t_ns, seq_start, write_id
    writes: pd.DataFrame = field(default_factory=pd.DataFrame)      # index = write_id; pid, t_enter_ns
    senders: dict[str, str] = field(default_factory=dict)            # stream -> "comm pid" of its sender


def _cut(df: pd.DataFrame, start: int, end: int, t0: str, t1: str | None = None) -> pd.DataFrame:
    if len(df) == 0:
        return df
    if t1 is None:
        t = df[t0].to_numpy()
        return df[(t >= start) & (t <= end)]
    return df[(df[t1].to_numpy() > start) & (df[t0].to_numpy() < end)]


def tables_of(run: Run, window: Window, slabs: KernelSlabs | None = None) -> TraceTables:
    """The run's tables for the trace, cut to the window; the sources the run lacks
    are left empty. slabs: a long kernel trace read in slabs up to the window's end
    (hostwire.timeline.kernel_slabs), whose CPU intervals are then cut at the window's bounds and
    whose run-queue counters start at its start with the value then."""
    start, end = window.start_ns, window.end_ns
    out = TraceTables()
    tl = Timeline.of(run)
    if run.has("raw/sched.tsv") and slabs is not None:
        from hostwire.timeline.tables import runqueue

        run_, states = slabs.between(start, end + 1)  # a change at `end` is still a counter's row
        run_ = run_[(run_["pid"] != 0).to_numpy() & (run_["t_start_ns"] < end).to_numpy()]
        out.running = run_.assign(t_end_ns=np.minimum(run_["t_end_ns"].to_numpy(), end))
        out.runqueue = _cut(runqueue(states), start, end, "t_ns")
    elif run.has("raw/sched.tsv"):
        run_ = tl.df_running()
        out.running = _cut(run_[run_["pid"] != 0], start, end, "t_start_ns", "t_end_ns")
        out.runqueue = _cut(tl.df_runqueue(), start, end, "t_ns")
    if run.has("raw/syscalls.tsv"):
        calls = tl.df_calls()
        out.calls = _cut(calls[calls["role"].astype(str) != ""], start, end, "t_enter_ns", "t_exit_ns")
    if run.has("raw/wire.pcap"):
        out.frames = _cut(tl.data_frames(), start, end, "t_ns")
        out.backlog = _cut(tl.df_backlog(), start, end, "t_ns")
        out.segments = _cut(tl.df_segments(), start, end, "frame_t_ns")
        out.writes = tl.writes()
        streams = tl.df_streams()
        known = streams[streams["sender_pid"].to_numpy() > 0]
        out.senders = {str(s): f"{r or 'pid'} {p}" for s, r, p in
                       zip(known["stream"], known["sender_role"], known["sender_pid"])}
    if not any(len(t) for t in (out.running, out.calls, out.frames)):
        raise InputError(f"{run.path}: nothing to draw in the window: no kernel trace, system calls or frames")
    return out


def build_trace(t: TraceTables) -> bytes:
    """The Perfetto trace (protobuf bytes) of the tables, in the order and bytes the perfetto
    package's builder gives: the tracks of each kind (CPUs, processes' calls, streams, backlogs,
    run queues) have their events encoded in one pass (hostwire.timeline.protowire), which is
    then cut at the tracks' bounds, each part after its track's descriptor."""
    trace = _Trace()
    links = _FlowLinks.of(t)
    if len(t.running):  # CPUs: what ran
        _cpu_tracks(trace, t.running)
    if len(t.calls):  # processes' calls
        _call_tracks(trace, t.calls, links)
    if len(t.frames):  # frames as instants
        _stream_tracks(trace, t.frames, t.senders, links)
    if len(t.backlog):
        _counter_tracks(trace, t.backlog, "stream", "backlog_bytes", "backlog {} (bytes)")
    if len(t.runqueue):
        _counter_tracks(trace, t.runqueue, "cpu", "nr_running", "CPU {} run queue (tasks)")
    return trace.bytes()


class _Trace:
    """The trace's packets, track by track: each track's descriptor, then its events' bytes."""

    def __init__(self) -> None:
        self._pieces: list[bytes | memoryview] = []
        self._last_uuid = 0
        self._cleared = False

    def new_tracks(self, count: int) -> np.ndarray:
        """The uuids of the next `count` tracks (numbered from 1 in the order they are added)."""
        first = self._last_uuid + 1
        self._last_uuid += count
        return np.arange(first, first + count, dtype=np.int64)

    def add(self, names: list[str], uuids: np.ndarray, sizes: np.ndarray, events: protowire.Rows,
            counter: bool = False) -> None:
        """Tracks (names, uuids) whose events, `sizes` rows each, are the `events` rows, track
        after track; the trace's very first event packet is given SEQ_INCREMENTAL_STATE_CLEARED."""
        row_end = np.concatenate([[0], np.cumsum(events.length)])
        bounds = row_end[np.concatenate([[0], np.cumsum(sizes)])].tolist()
        for name, uid, piece in zip(names, uuids.tolist(), events.pieces(bounds)):
            self._pieces.append(protowire.track_descriptor(uid, name, counter=counter))
            views = [p.data for p in piece]  # the arrays' memoryviews: copied once, by the final join
            if views and not self._cleared:  # a chunk holds whole rows: the first one, whole, is in piece[0]
                self._cleared = True
                first, rest = protowire.with_sequence_flags(piece[0], 1)
                self._pieces.append(first)
                views[0] = views[0][rest:]
            self._pieces.extend(views)

    def bytes(self) -> bytes:
        return b"".join(self._pieces)


@dataclass(frozen=True)
class _Groups:
    """A table's rows as pandas' groupby(sort=True) gives them (the builder's tracks): the keys in
    order, how many rows each has, and the positions of the rows group after group, each group's
    in table order (None when the table is in that order already)."""

    keys: list[Any]
    sizes: np.ndarray
    order: np.ndarray | None

    @classmethod
    def of(cls, df: pd.DataFrame, by: str | list[str]) -> _Groups:
        grouped = df.groupby(by, sort=True)
        sizes = grouped.size()
        code = grouped.ngroup().to_numpy()
        if code.dtype.kind == "f":  # a row whose key is missing is in no group (groupby's dropna)
            code = np.where(np.isnan(code), -1, code).astype(np.int64)
        if code.min() >= 0 and (np.diff(code) >= 0).all():
            order = None
        else:
            order = np.argsort(code, kind="stable")[int((code < 0).sum()):]
        return cls(list(sizes.index), sizes.to_numpy(dtype=np.int64), order)

    def column(self, df: pd.DataFrame, name: str) -> pd.Series:
        """A column of df, its rows in group order."""
        column = df[name]
        return column if self.order is None else column.take(self.order)

    def array(self, df: pd.DataFrame, name: str) -> np.ndarray:
        """A column of df as numpy, its rows in group order."""
        values = df[name].to_numpy()
        return values if self.order is None else values[self.order]

    def track_of_rows(self, uuids: np.ndarray) -> np.ndarray:
        """Each row's entry of uuids (one per group)."""
        return np.repeat(uuids, self.sizes)


def _text(column: pd.Series) -> protowire.Text:
    """The column's values as pandas' astype(str) writes them (what the names were built from):
    integers straight from their digits (no string per row), the rest through pandas."""
    if pd.api.types.is_integer_dtype(column.dtype) and not column.hasnans:
        unsigned = pd.api.types.is_unsigned_integer_dtype(column.dtype)
        return protowire.decimal(column.to_numpy(dtype=np.uint64 if unsigned else np.int64))
    return protowire.strings(column.astype(str))


def _cpu_tracks(trace: _Trace, running: pd.DataFrame) -> None:
    g = _Groups.of(running, "cpu")
    uuids = trace.new_tracks(len(g.keys))
    name: list[protowire.NamePiece] = [_text(g.column(running, "comm")), " ", _text(g.column(running, "pid")), " (",
                                       _text(g.column(running, "role")), ")"]
    _slices(trace, g, uuids, [f"CPU {cpu}" for cpu in g.keys], g.array(running, "t_start_ns"),
            g.array(running, "t_end_ns"), name)


def _call_tracks(trace: _Trace, calls: pd.DataFrame, links: _FlowLinks) -> None:
    g = _Groups.of(calls, ["pid", "role"])
    uuids = trace.new_tracks(len(g.keys))
    enter = g.array(calls, "t_enter_ns")
    name: list[protowire.NamePiece] = [_text(g.column(calls, "call")), "(", _text(g.column(calls, "fd")), ") = ",
                                       _text(g.column(calls, "result"))]
    _slices(trace, g, uuids, [f"{role} {pid} calls" for pid, role in g.keys], enter, g.array(calls, "t_exit_ns"), name,
            links.of_calls(g.array(calls, "pid"), enter))


def _slices(trace: _Trace, g: _Groups, uuids: np.ndarray, names: list[str], start: np.ndarray, end: np.ndarray,
            name: list[protowire.NamePiece], flows: protowire.Flows | None = None) -> None:
    """A begin (named, with its flows) and an end per slice, one after the other: both packets of
    a slice are one row."""
    n = len(start)
    track = g.track_of_rows(uuids)
    begin = protowire.event_packets(start, track, SLICE_BEGIN, SEQ_ID, name=name, flows=flows)
    end_ = protowire.event_packets(end, track, SLICE_END, SEQ_ID)
    trace.add(names, uuids, g.sizes, protowire.concatenated(begin + end_, n))


def _stream_tracks(trace: _Trace, frames: pd.DataFrame, senders: dict[str, str], links: _FlowLinks) -> None:
    g = _Groups.of(frames, "stream")
    uuids = trace.new_tracks(len(g.keys))
    names = []
    for stream in g.keys:
        sender = senders.get(str(stream))
        names.append(f"stream {stream} ({sender})" if sender else f"stream {stream}")
    stamps = g.array(frames, "t_ns")
    label: list[protowire.NamePiece] = ["seq ", _text(g.column(frames, "seq_start")), " +",
                                        _text(g.column(frames, "payload_len"))]
    # the chain write -> frame -> next frame
    flows = links.of_frames([str(k) for k in g.keys], g.track_of_rows(np.arange(len(g.keys))), stamps)
    packets = protowire.event_packets(stamps, g.track_of_rows(uuids), INSTANT, SEQ_ID, name=label, flows=flows)
    trace.add(names, uuids, g.sizes, protowire.concatenated(packets, len(stamps)))


def _counter_tracks(trace: _Trace, table: pd.DataFrame, by: str, column: str, title: str) -> None:
    g = _Groups.of(table, by)
    uuids = trace.new_tracks(len(g.keys))
    stamps = g.array(table, "t_ns")
    packets = protowire.event_packets(stamps, g.track_of_rows(uuids), COUNTER, SEQ_ID,
                                      values=g.array(table, column).astype(np.float64))
    trace.add([title.format(k) for k in g.keys], uuids, g.sizes, protowire.concatenated(packets, len(stamps)),
              counter=True)


@dataclass(frozen=True)
class _FlowLinks:
    """A flow id per write that carries bytes in the window (numbered in the order the segments
    first name them); each carrying segment's stream, frame stamp and flow; each such write's
    pid, entry stamp and flow."""

    segment_stream: pd.Series
    segment_stamp: np.ndarray
    segment_flow: np.ndarray
    write_pid: np.ndarray
    write_stamp: np.ndarray
    write_flow: np.ndarray

    @classmethod
    def of(cls, t: TraceTables) -> _FlowLinks:
        none = np.zeros(0, dtype=np.int64)
        if not len(t.segments):
            return cls(pd.Series([], dtype=str), none, none, none, none, none)
        seg = t.segments[(t.segments["write_id"] >= 0).to_numpy()]
        code, write_ids = pd.factorize(seg["write_id"].to_numpy())
        flows = pd.Index(write_ids)
        pid, stamp, flow = none, none, none
        if len(write_ids) and len(t.writes):
            w = t.writes.loc[write_ids[flows.isin(t.writes.index)]]
            pid, stamp, flow = w["pid"].to_numpy(), w["t_enter_ns"].to_numpy(), flows.get_indexer(w.index) + 1
        return cls(seg["stream"].astype(str), seg["frame_t_ns"].to_numpy(), code + 1, pid, stamp, flow)

    def of_calls(self, pid: np.ndarray, enter: np.ndarray) -> protowire.Flows | None:
        """The flow of each call that is a carrying write (by pid and entry stamp)."""
        if not len(self.write_flow):
            return None
        call_key, write_key = _pair_keys((pid, enter), (self.write_pid, self.write_stamp))
        order = np.argsort(write_key, kind="stable")
        ordered = write_key[order]
        # the last write of a pid and stamp, as a dictionary keyed by them keeps the last one given
        at = np.maximum(np.searchsorted(ordered, call_key, side="right") - 1, 0)
        found = ordered[at] == call_key
        if not found.any():
            return None
        ids = np.where(found, self.write_flow[order[at]], 0).astype(np.uint64)
        return protowire.Flows(ids[:, None], found.astype(np.int64))

    def of_frames(self, streams: list[str], track: np.ndarray, stamps: np.ndarray) -> protowire.Flows | None:
        """The flows of each frame (the index of its stream in `streams`, and its stamp): those of
        the segments of that stream and stamp, in the segments' order."""
        if not len(self.segment_flow):
            return None
        code, distinct = pd.factorize(self.segment_stream, use_na_sentinel=False)  # few streams: look each up once
        segment_track = pd.Index(streams).get_indexer(distinct)[code]  # -1: a stream with no frame here
        frame_key, segment_key = _pair_keys((track, stamps), (segment_track, self.segment_stamp))
        order = np.argsort(segment_key, kind="stable")
        ordered = segment_key[order]
        first = np.searchsorted(ordered, frame_key, side="left")
        count = np.searchsorted(ordered, frame_key, side="right") - first
        widest = int(count.max()) if len(count) else 0
        if not widest:
            return None
        ids = np.zeros((len(stamps), widest), dtype=np.uint64)
        for i in range(widest):
            has = count > i
            ids[has, i] = self.segment_flow[order[first[has] + i]]
        return protowire.Flows(ids, count)


def _pair_keys(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """One int64 per (x, y) pair of two lists of pairs, equal where the pairs are equal."""
    x = pd.factorize(np.concatenate([a[0], b[0]]), use_na_sentinel=False)[0]
    y, distinct = pd.factorize(np.concatenate([a[1], b[1]]), use_na_sentinel=False)
    key = x.astype(np.int64) * max(len(distinct), 1) + y
    return key[:len(a[0])], key[len(a[0]):]


# TrackEvent.Type (perfetto's track_event.proto)
SLICE_BEGIN, SLICE_END, INSTANT, COUNTER = 1, 2, 3, 4


def text_lines(t: TraceTables) -> pd.DataFrame:
    """One row per event of every source, in time order: t_ns, source (sched, call, wire), text."""
    parts = []
    if len(t.running):
        r = t.running
        parts.append(pd.DataFrame({"t_ns": r["t_start_ns"].to_numpy(), "source": "sched",
                                   "text": ("cpu" + r["cpu"].astype(str) + " runs " + r["comm"].astype(str) + " "
                                            + r["pid"].astype(str) + " (" + r["role"].astype(str) + ") for "
                                            + r["dur_ns"].astype(str) + " ns").to_numpy()}))
    if len(t.calls):
        c = t.calls
        parts.append(pd.DataFrame({"t_ns": c["t_enter_ns"].to_numpy(), "source": "call",
                                   "text": (c["role"].astype(str) + " " + c["pid"].astype(str) + " " + c["call"].astype(str)
                                            + "(" + c["fd"].astype(str) + ", " + c["req_bytes"].astype(str) + ") = "
                                            + c["result"].astype(str) + " in " + c["dur_ns"].astype(str)
                                            + " ns").to_numpy()}))
    if len(t.frames):
        f = t.frames
        parts.append(pd.DataFrame({"t_ns": f["t_ns"].to_numpy(), "source": "wire",
                                   "text": (f["stream"].astype(str).map(lambda s: f"{s} ({t.senders[s]})" if s in t.senders else s)
                                            + " seq " + f["seq_start"].astype(str) + " +"
                                            + f["payload_len"].astype(str)
                                            + np.where(f["retransmit"].to_numpy(), " retransmit", "")).to_numpy()}))
    if not parts:
        return pd.DataFrame(columns=["t_ns", "source", "text"])
    return pd.concat(parts, ignore_index=True).sort_values("t_ns", kind="stable").reset_index(drop=True)


def counts(t: TraceTables) -> dict[str, Any]:
    """How many slices and instants build_trace writes per kind (for checks)."""
    return {"cpu_slices": len(t.running), "call_slices": len(t.calls), "frame_instants": len(t.frames)}
