"""The runner's collectors: readiness on a descriptor (--ready-fd), a collector that never gets
ready, one that exits early, and the loss counters each reads back, by category."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from hostwire.record import collectors
from hostwire.errors import HostwireError

# A stand-in collector: says something on stderr, then does what argv[1] asks with the descriptor
# that follows --ready-fd (the last argument).
FAKE = r"""
import os, sys, time, signal
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
mode, fd = sys.argv[1], int(sys.argv[-1])
print("fake: setting up", file=sys.stderr, flush=True)
if mode == "ready":
    time.sleep(0.2)
    print("fake: recording", file=sys.stderr, flush=True)  # said before ready: nothing races the stop
    os.write(fd, b"ready\n")
    os.close(fd)
    time.sleep(60)
elif mode == "never":
    print("fake: still waiting for the kernel", file=sys.stderr, flush=True)
    time.sleep(60)
elif mode == "fail":
    print("fake: failed to open the interface: no such device", file=sys.stderr, flush=True)
    sys.exit(3)
"""


def fake(tmp_path: Path, mode: str) -> collectors.BackgroundTool:
    return collectors.BackgroundTool("hw-fake", [sys.executable, "-c", FAKE, mode], tmp_path / "fake.log",
                                     stop_timeout_s=10)


def test_collector_is_ready_when_it_writes_its_line(tmp_path: Path) -> None:
    tool = fake(tmp_path, "ready")
    started = time.monotonic()
    tool.start(timeout_s=10)
    assert time.monotonic() - started < 5
    assert tool.proc is not None and tool.proc.poll() is None
    assert tool.stop() == 0
    assert tool.last_message() == "fake: recording"


def test_collector_that_never_gets_ready_times_out_with_a_clear_error(tmp_path: Path) -> None:
    tool = fake(tmp_path, "never")
    started = time.monotonic()
    with pytest.raises(HostwireError) as failure:
        tool.start(timeout_s=0.5)
    assert time.monotonic() - started < 10
    assert str(failure.value) == ("hw-fake did not start recording within 0.5 s: "
                                  "fake: still waiting for the kernel")
    assert tool.proc is None and tool.returncode is not None  # stopped, not left running


def test_collector_that_exits_early_is_reported_with_its_last_message(tmp_path: Path) -> None:
    tool = fake(tmp_path, "fail")
    started = time.monotonic()
    with pytest.raises(HostwireError) as failure:
        tool.start(timeout_s=30)
    assert time.monotonic() - started < 10  # at once, not after the timeout
    assert str(failure.value) == ("hw-fake failed to start (exit 3): "
                                  "fake: failed to open the interface: no such device")
    assert tool.stop() == 3


def test_losses_by_category_keep_the_manifest_key_names(tmp_path: Path, build_dir: Path) -> None:
    (tmp_path / "wirecap.json").write_text(json.dumps({"ps_drop": 2, "ps_ifdrop": 0}))
    (tmp_path / "sched.json").write_text(json.dumps({
        "clock_check": {"ok": True},
        "buffers": [{"name": "sched", "lost_events": 5, "cpus": [{"missed_in_stream": 1}, {"missed_in_stream": 2}]},
                    {"name": "syscalls", "lost_events": 0, "cpus": [{"missed_in_stream": None}]}]}))
    (tmp_path / "syscalls.json").write_text(json.dumps({"lost": 0, "unfinished": 4}))
    point = SimpleNamespace(capture=True, capture_side="tx", syscalls="ptrace", kernel_trace=True, receiver_cpus=None)
    chosen = collectors.for_point(tmp_path, point, None)
    assert [type(c).__name__ for c in chosen] == ["Wirecap", "Schedtrace", "Iotrace"]
    losses = {name: counters for c in chosen for name, counters in c.losses().items()}
    assert set(losses) == set(collectors.LOSS_CATEGORIES)
    assert losses[collectors.CAPTURE_DROPS] == {"wire_ps_drop": 2, "wire_ps_ifdrop": 0}
    assert losses[collectors.TRACE_OVERRUNS] == {
        "sched_lost_events": 5, "sched_missed_in_stream": 3, "syscalls_lost_events": 0,
        "syscalls_missed_in_stream": None, "sched_clock_check_ok": True}
    assert losses[collectors.TRACER_MISSES] == {"syscalls_lost": 0, "syscalls_unfinished": 4}
    # what is missing is unknown (None), never 0
    empty = tmp_path / "empty"
    empty.mkdir()
    assert [c.losses() for c in collectors.for_point(empty, point, None)] == [
        {collectors.CAPTURE_DROPS: {"wire_ps_drop": None, "wire_ps_ifdrop": None}},
        {collectors.TRACE_OVERRUNS: {"sched_lost_events": None}},
        {collectors.TRACER_MISSES: {"syscalls_lost": None, "syscalls_unfinished": None}}]


def test_a_point_chooses_its_collectors(tmp_path: Path, build_dir: Path) -> None:
    topo = SimpleNamespace(tx_dev="hwtx", tx_ns="ns-tx", rx_dev="hwrx", rx_ns="ns-rx")
    point = SimpleNamespace(capture=True, capture_side="rx", syscalls="tracefs", kernel_trace=True, receiver_cpus="1")
    wire, sched = collectors.for_point(tmp_path, point, topo)
    assert wire.argv[-3:] == ["wire.pcap", "-n", "ns-rx"] and "hwrx" in wire.argv
    assert sched.follows_pid and not sched.wrapper
    assert sched.command(4242)[-3:] == ["--syscalls", "--pid", "4242"]
    assert sched.argv[sched.argv.index(str(build_dir / "bin" / "hw-schedtrace")) + 1] == "-o"
    # the patched kernel's event: the same collector, with custom:sched_switch_ext_tp
    point.kernel_source = "event"
    _, ext = collectors.for_point(tmp_path, point, topo)
    tool = ext.argv.index(str(build_dir / "bin" / "hw-schedtrace"))
    assert ext.argv[tool + 1:tool + 4] == ["-o", str(tmp_path), "--switch-ext"]
    assert ext.command(4242)[-3:] == ["--syscalls", "--pid", "4242"]
    point = SimpleNamespace(capture=False, capture_side="tx", syscalls="preload", kernel_trace=False,
                            receiver_cpus=None)
    (iotrace,) = collectors.for_point(tmp_path, point, topo)
    assert iotrace.wrapper[-2:] == ["--preload", "--"] and iotrace.stop() is None
