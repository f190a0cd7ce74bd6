"""A collector that is still writing its files when told to stop (hw-schedtrace converting an
hour's trace) is waited for; one that has stopped writing is killed stop_timeout_s after its last
write. Real processes: a script that ignores SIGTERM and appends to a file for a set time."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from hostwire.record.collectors import BackgroundTool

WRITER = """
import signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("up", flush=True)
end = time.monotonic() + float(sys.argv[2])
with open(sys.argv[1], "ab", buffering=0) as out:
    while time.monotonic() < end:
        out.write(b"x" * 100)
        time.sleep(0.2)
time.sleep(float(sys.argv[3]))
"""


def tool_writing(tmp_path: Path, write_s: float, then_idle_s: float) -> BackgroundTool:
    out = tmp_path / "sched.tsv"
    tool = BackgroundTool("writer", [], tmp_path / "writer.log", stop_timeout_s=1.0)
    tool.progress_files = [out]
    tool.proc = subprocess.Popen([sys.executable, "-c", WRITER, str(out), str(write_s), str(then_idle_s)],
                                 stdout=subprocess.PIPE)
    assert tool.proc.stdout is not None and tool.proc.stdout.readline() == b"up\n"
    return tool


def test_a_collector_still_writing_is_waited_for(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr("hostwire.record.collectors.PROGRESS_POLL_S", 0.3)
    tool = tool_writing(tmp_path, write_s=3.0, then_idle_s=0.0)
    t0 = time.monotonic()
    assert tool.stop() == 0  # it finished by itself, 3 s in: past the 1 s timeout, never killed
    assert time.monotonic() - t0 >= 2.5


def test_a_collector_that_stopped_writing_is_killed(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr("hostwire.record.collectors.PROGRESS_POLL_S", 0.3)
    tool = tool_writing(tmp_path, write_s=1.0, then_idle_s=60.0)
    t0 = time.monotonic()
    assert tool.stop() == -9
    assert 1.5 <= time.monotonic() - t0 < 10
