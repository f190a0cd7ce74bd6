"""A run's timeline as a Perfetto trace (the protobuf bytes the perfetto package describes) and as
text, one line per event (docs/timeline.md, "hostwire timeline").

Tracks: one per CPU (what ran: a slice per task interval, idle left out), one per benchmark
process with its system calls as slices, one per stream with its data frames as instants, counter
tracks for each CPU's run-queue length and each stream's backlog; a flow joins each write to the
frames that carry its bytes. Each event is one protobuf packet; a track's packets are encoded at
once with numpy (hostwire.timeline.protowire), byte for byte what the perfetto package's
TraceProtoBuilder gives (analyze/tests/test_timeline_trace.py)."""

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
    """The Perfetto trace (protobuf bytes) of the tables: each track's events encoded at once
    (hostwire.timeline.protowire), in the order and bytes the perfetto package's builder gives."""
    parts: list[bytes] = []
    uuids = iter(range(1, 1 << 62))
    first = [True]

    def track(name: str, counter: bool = False) -> int:
        uid = next(uuids)
        parts.append(protowire.track_descriptor(uid, name, counter=counter))
        return uid

    def events(ts: np.ndarray, uid: int, kind: int | np.ndarray, **fields: Any) -> None:
        flags = 1 if first[0] and len(ts) else None  # SEQ_INCREMENTAL_STATE_CLEARED on the very first
        first[0] = first[0] and not len(ts)
        parts.append(protowire.track_events(np.asarray(ts, dtype=np.int64), uid, kind, SEQ_ID,
                                            first_flags=flags, **fields))

    def slices(uid: int, start: np.ndarray, end: np.ndarray, names: Any,
               flows: list[list[int] | None] | None = None) -> None:
        """A begin (named, with its flows) and an end per slice, one after the other."""
        n = len(start)
        ts = np.empty(2 * n, dtype=np.int64)
        ts[0::2], ts[1::2] = start, end
        kinds = np.empty(2 * n, dtype=np.int64)
        kinds[0::2], kinds[1::2] = SLICE_BEGIN, SLICE_END
        pairs: list[list[int] | None] | None = None
        if flows is not None:
            pairs = [None] * (2 * n)
            pairs[0::2] = flows
        events(ts, uid, kinds, names=names, named=kinds == SLICE_BEGIN, flows=pairs)

    for cpu, r in t.running.groupby("cpu", sort=True) if len(t.running) else []:  # CPUs: what ran
        uid = track(f"CPU {cpu}")
        names = r["comm"].astype(str) + " " + r["pid"].astype(str) + " (" + r["role"].astype(str) + ")"
        slices(uid, r["t_start_ns"].to_numpy(), r["t_end_ns"].to_numpy(), names)
    flow_of, frame_flows, write_at = flow_links(t)
    for (pid, role), c in t.calls.groupby(["pid", "role"], sort=True) if len(t.calls) else []:  # processes' calls
        uid = track(f"{role} {pid} calls")
        names = c["call"].astype(str) + "(" + c["fd"].astype(str) + ") = " + c["result"].astype(str)
        enter = c["t_enter_ns"].to_numpy()
        fids = [write_at.get((int(pid), int(s))) for s in enter] if write_at else []
        flows = [[f] if f else None for f in fids] if any(fids) else None
        slices(uid, enter, c["t_exit_ns"].to_numpy(), names, flows)
    for name, f in t.frames.groupby("stream", sort=True) if len(t.frames) else []:  # frames as instants
        sender = t.senders.get(str(name))
        uid = track(f"stream {name} ({sender})" if sender else f"stream {name}")
        labels = "seq " + f["seq_start"].astype(str) + " +" + f["payload_len"].astype(str)
        stamps = f["t_ns"].to_numpy()
        ends = [frame_flows.get((str(name), int(ts))) for ts in stamps] if frame_flows else None
        events(stamps, uid, INSTANT, names=labels, flows=ends)  # the chain write -> frame -> next frame
    for name, b in t.backlog.groupby("stream", sort=True) if len(t.backlog) else []:
        uid = track(f"backlog {name} (bytes)", counter=True)
        events(b["t_ns"].to_numpy(), uid, COUNTER, values=b["backlog_bytes"].to_numpy().astype(np.float64))
    for cpu, q in t.runqueue.groupby("cpu", sort=True) if len(t.runqueue) else []:
        uid = track(f"CPU {cpu} run queue (tasks)", counter=True)
        events(q["t_ns"].to_numpy(), uid, COUNTER, values=q["nr_running"].to_numpy().astype(np.float64))
    del flow_of
    return b"".join(parts)


# TrackEvent.Type (perfetto's track_event.proto)
SLICE_BEGIN, SLICE_END, INSTANT, COUNTER = 1, 2, 3, 4


def flow_links(t: TraceTables) -> tuple[dict[int, int], dict[tuple[str, int], list[int]], dict[tuple[int, int], int]]:
    """A flow id per write that carries bytes in the window; the flows of each frame (stream,
    stamp); the flow of each write by (pid, its call's entry stamp)."""
    flow_of: dict[int, int] = {}
    frame_flows: dict[tuple[str, int], list[int]] = {}
    if len(t.segments):
        seg = t.segments[t.segments["write_id"] >= 0]
        for wid in pd.unique(seg["write_id"]):
            flow_of[int(wid)] = len(flow_of) + 1
        for s_, ft, wid in zip(seg["stream"], seg["frame_t_ns"], seg["write_id"]):
            frame_flows.setdefault((str(s_), int(ft)), []).append(flow_of[int(wid)])
    write_at: dict[tuple[int, int], int] = {}
    if flow_of and len(t.writes):
        w = t.writes.loc[[i for i in flow_of if i in t.writes.index]]
        write_at = {(int(p), int(te)): flow_of[int(i)] for i, p, te in zip(w.index, w["pid"], w["t_enter_ns"])}
    return flow_of, frame_flows, write_at


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
