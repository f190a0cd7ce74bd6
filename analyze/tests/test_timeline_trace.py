"""The Perfetto trace of a timeline: read back with the perfetto package's own protobuf classes, its
slices, instants, counters and flows match the tables it was built from; the text form
interleaves every source in time."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from hostwire.timeline.perfetto_trace import TraceTables, build_trace, text_lines

pytest.importorskip("perfetto")
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace, TrackEvent  # noqa: E402


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
