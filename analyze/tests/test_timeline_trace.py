"""The Perfetto trace of a timeline: read back with the perfetto package's own protobuf classes, its
slices, instants, counters and flows match the tables it was built from; the text form
interleaves every source in time."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace, TrackEvent

from hostwire.timeline.perfetto_trace import TraceTables, build_trace, text_lines



def _tables() -> TraceTables:
    running = pd.DataFrame({"cpu": [0, 0, 1], "t_start_ns": [100, 300, 150], "t_end_ns": [300, 500, 400],
                            "dur_ns": [200, 200, 250], "pid": [10, 20, 30], "comm": ["hw-bench"] * 3,
                            "role": ["send-0", "bg-0", "recv-0"]})
    calls = pd.DataFrame({"pid": [10, 10, 30], "role": ["send-0", "send-0", "recv-0"],
                          "call": ["read", "write", "read"], "fd": [3, 4, 8], "req_bytes": [8192, 3000, 65536],
                          "t_enter_ns": [110, 200, 260], "t_exit_ns": [150, 250, 350],
                          "result": [8192, 3000, 1448], "dur_ns": [40, 50, 90]})
    frames = pd.DataFrame({"stream": ["s>r", "s>r", "s>r"], "t_ns": [220, 240, 420], "seq_start": [0, 1448, 2896],
                           "payload_len": [1448, 1448, 104], "retransmit": [False, False, True]})
    writes = pd.DataFrame({"pid": [10], "t_enter_ns": [200]}, index=[5])
    segments = pd.DataFrame({"stream": ["s>r"] * 3, "frame_t_ns": [220, 240, 420], "seq_start": [0, 1448, 2896],
                             "write_id": [5, 5, 5]})
    runqueue = pd.DataFrame({"cpu": [0, 0, 1], "t_ns": [100, 300, 150], "nr_running": [1, 2, 1]})
    backlog = pd.DataFrame({"stream": ["s>r", "s>r"], "t_ns": [250, 420], "backlog_bytes": [104, 0]})
    return TraceTables(running=running, calls=calls, frames=frames, runqueue=runqueue, backlog=backlog,
                       segments=segments, writes=writes)


def test_trace_matches_its_tables() -> None:
    t = _tables()
    trace = Trace.FromString(build_trace(t))
    names = {p.track_descriptor.uuid: p.track_descriptor.name for p in trace.packet if p.HasField("track_descriptor")}
    counters = {p.track_descriptor.uuid for p in trace.packet
                if p.HasField("track_descriptor") and p.track_descriptor.HasField("counter")}
    events = [p for p in trace.packet if p.HasField("track_event")]
    begins = Counter(names[e.track_event.track_uuid] for e in events if e.track_event.type == TrackEvent.TYPE_SLICE_BEGIN)
    ends = Counter(names[e.track_event.track_uuid] for e in events if e.track_event.type == TrackEvent.TYPE_SLICE_END)
    assert begins == ends == Counter({"CPU 0": 2, "CPU 1": 1, "send-0 10 calls": 2, "recv-0 30 calls": 1})
    instants = [e for e in events if e.track_event.type == TrackEvent.TYPE_INSTANT]
    assert [(e.timestamp, names[e.track_event.track_uuid]) for e in instants] == [
        (220, "stream s>r"), (240, "stream s>r"), (420, "stream s>r")]
    values = [(names[e.track_event.track_uuid], e.timestamp, e.track_event.double_counter_value) for e in events
              if e.track_event.type == TrackEvent.TYPE_COUNTER]
    assert all(e.track_event.track_uuid in counters for e in events if e.track_event.type == TrackEvent.TYPE_COUNTER)
    assert ("backlog s>r (bytes)", 250, 104.0) in values and ("CPU 0 run queue (tasks)", 300, 2.0) in values
    # the write's slice starts the flow its three frames continue; the read carries none
    flows = {(names[e.track_event.track_uuid], e.timestamp): list(e.track_event.flow_ids) for e in events}
    fid = flows[("send-0 10 calls", 200)]
    assert len(fid) == 1
    assert [flows[("stream s>r", ts)] for ts in (220, 240, 420)] == [fid] * 3
    assert flows[("send-0 10 calls", 110)] == []
    cpu0 = [(e.timestamp, e.track_event.name) for e in events if names[e.track_event.track_uuid] == "CPU 0"
            and e.track_event.type == TrackEvent.TYPE_SLICE_BEGIN]
    assert cpu0 == [(100, "hw-bench 10 (send-0)"), (300, "hw-bench 20 (bg-0)")]


def test_text_interleaves_sources() -> None:
    lines = text_lines(_tables())
    assert lines["t_ns"].is_monotonic_increasing
    assert lines["source"].tolist() == ["sched", "call", "sched", "call", "wire", "wire", "call", "sched", "wire"]
    assert lines["text"].iloc[-1] == "s>r seq 2896 +104 retransmit"


def test_trace_processor_opens_it(tmp_path: Path) -> None:
    """Needs a trace_processor_shell on this machine (HOSTWIRE_TRACE_PROCESSOR): the perfetto
    package otherwise downloads one, which this host cannot."""
    shell = os.environ.get("HOSTWIRE_TRACE_PROCESSOR")
    if not shell or not Path(shell).is_file():
        pytest.skip("no trace_processor_shell (set HOSTWIRE_TRACE_PROCESSOR)")
    from perfetto.trace_processor import TraceProcessor, TraceProcessorConfig

    path = tmp_path / "t.pftrace"
    path.write_bytes(build_trace(_tables()))
    tp = TraceProcessor(trace=str(path), config=TraceProcessorConfig(bin_path=shell))
    try:
        n = tp.query("select count(*) as n from slice where dur > 0").as_pandas_dataframe()["n"].iloc[0]
        assert n == 3 + 3  # CPU slices and call slices
    finally:
        tp.close()


def flow_links(t: TraceTables) -> tuple[dict[int, int], dict[tuple[str, int], list[int]], dict[tuple[int, int], int]]:
    """The reference's flows, found one write at a time with dictionaries: a flow id per write that
    carries bytes in the window; the flows of each frame (stream, stamp); the flow of each write by
    (pid, its call's entry stamp). build_trace finds them with sorted arrays (_FlowLinks)."""
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


def _builder_trace(t: TraceTables) -> bytes:
    """The trace built one packet at a time with the perfetto package's TraceProtoBuilder: the
    reference the vectorized encoder must equal byte for byte."""
    from perfetto.trace_builder.proto_builder import TraceProtoBuilder

    from hostwire.timeline.perfetto_trace import SEQ_ID

    builder = TraceProtoBuilder()
    uuids = iter(range(1, 1 << 62))
    first = [True]

    def track(name: str, counter: bool = False) -> int:
        uid = next(uuids)
        pkt = builder.add_packet()
        pkt.track_descriptor.uuid = uid
        pkt.track_descriptor.name = name
        if counter:
            pkt.track_descriptor.counter.SetInParent()
        return uid

    def event(ts, uid, kind, name=None, value=None, flows=None):  # type: ignore[no-untyped-def]
        pkt = builder.add_packet()
        pkt.timestamp = int(ts)
        pkt.trusted_packet_sequence_id = SEQ_ID
        if first[0]:
            pkt.sequence_flags = 1
            first[0] = False
        ev = pkt.track_event
        ev.type = kind
        ev.track_uuid = uid
        if name is not None:
            ev.name = name
        if value is not None:
            ev.double_counter_value = float(value)
        if flows:
            ev.flow_ids.extend(flows)

    B, E, I, C = (TrackEvent.TYPE_SLICE_BEGIN, TrackEvent.TYPE_SLICE_END, TrackEvent.TYPE_INSTANT,
                  TrackEvent.TYPE_COUNTER)
    for cpu, r in t.running.groupby("cpu", sort=True):
        uid = track(f"CPU {cpu}")
        for s, e, c, p, role in zip(r["t_start_ns"], r["t_end_ns"], r["comm"], r["pid"], r["role"]):
            event(s, uid, B, f"{c} {p} ({role})")
            event(e, uid, E)
    _, frame_flows, write_at = flow_links(t)
    for (pid, role), c in t.calls.groupby(["pid", "role"], sort=True):
        uid = track(f"{role} {pid} calls")
        for s, e, call, fd, res in zip(c["t_enter_ns"], c["t_exit_ns"], c["call"], c["fd"], c["result"]):
            fid = write_at.get((int(pid), int(s)))
            event(s, uid, B, f"{call}({fd}) = {res}", flows=[fid] if fid else None)
            event(e, uid, E)
    for name, f in t.frames.groupby("stream", sort=True):
        sender = t.senders.get(str(name))
        uid = track(f"stream {name} ({sender})" if sender else f"stream {name}")
        for ts, seq, n in zip(f["t_ns"], f["seq_start"], f["payload_len"]):
            event(ts, uid, I, f"seq {seq} +{n}", flows=frame_flows.get((str(name), int(ts))))
    for name, b in t.backlog.groupby("stream", sort=True):
        uid = track(f"backlog {name} (bytes)", counter=True)
        for ts, v in zip(b["t_ns"], b["backlog_bytes"]):
            event(ts, uid, C, value=v)
    for cpu, q in t.runqueue.groupby("cpu", sort=True):
        uid = track(f"CPU {cpu} run queue (tasks)", counter=True)
        for ts, v in zip(q["t_ns"], q["nr_running"]):
            event(ts, uid, C, value=v)
    return builder.serialize()


def test_the_vectorized_trace_is_the_builders_byte_for_byte() -> None:
    """On the hand-built tables and on larger random ones (stamps past 2**32, names of every
    length, flows on some events, a frame carrying two writes), the bytes are the builder's."""
    import numpy as np

    assert build_trace(_tables()) == _builder_trace(_tables())
    rng = np.random.default_rng(5)
    n = 3000
    start = np.sort(rng.integers(0, 2**45, n))
    running = pd.DataFrame({"cpu": rng.integers(0, 3, n), "t_start_ns": start, "t_end_ns": start + rng.integers(1, 10**6, n),
                            "dur_ns": 1, "pid": rng.integers(1, 2**22, n), "comm": rng.choice(["hw-bench", "kworker/0:1", "é"], n),
                            "role": rng.choice(["send-0", "bg-12", ""], n)})
    enter = np.sort(rng.integers(0, 2**40, 400))
    calls = pd.DataFrame({"pid": rng.choice([10, 11], 400), "role": "send-0", "call": rng.choice(["read", "write"], 400),
                          "fd": 4, "req_bytes": 1, "t_enter_ns": enter, "t_exit_ns": enter + 5,
                          "result": rng.integers(-11, 70000, 400), "dur_ns": 5})
    ft = np.sort(rng.integers(0, 2**40, 500))
    frames = pd.DataFrame({"stream": rng.choice(["a>b", "c>d"], 500), "t_ns": ft, "seq_start": rng.integers(0, 2**32, 500),
                           "payload_len": 1448, "retransmit": False})
    writes = pd.DataFrame({"pid": calls["pid"].to_numpy()[:50], "t_enter_ns": enter[:50]}, index=np.arange(50) + 7)
    segments = pd.DataFrame({"stream": frames["stream"].to_numpy()[:120], "frame_t_ns": ft[:120], "seq_start": 0,
                             "write_id": np.concatenate([np.repeat(np.arange(50) + 7, 2), rng.integers(-1, 57, 20)])})
    runqueue = pd.DataFrame({"cpu": rng.integers(0, 2, 800), "t_ns": np.sort(rng.integers(0, 2**44, 800)),
                             "nr_running": rng.integers(0, 40, 800)})
    backlog = pd.DataFrame({"stream": "a>b", "t_ns": np.sort(rng.integers(0, 2**44, 300)),
                            "backlog_bytes": rng.integers(0, 2**33, 300)})
    big = TraceTables(running=running, calls=calls, frames=frames, runqueue=runqueue, backlog=backlog,
                      segments=segments, writes=writes, senders={"a>b": "send-3 77"})
    assert build_trace(big) == _builder_trace(big)
