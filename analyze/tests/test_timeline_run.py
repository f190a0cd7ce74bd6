"""The timeline tables as methods of a Run: read from a hand-written raw/sched.tsv, kept as Parquet
under the run's tables/, and rebuilt when a source's digest differs from the one the copy was made
from or the copy does not read back."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pandas as pd
import pytest

from hostwire.run_directory import Run
from hostwire.timeline import cache
from hostwire.timeline.build import Timeline

COLUMNS = ["t_ns", "cpu", "event", "pid", "comm", "prev_comm", "prev_pid", "prev_state", "next_comm", "next_pid",
           "arg_comm", "arg_pid", "target_cpu", "orig_cpu", "dest_cpu"]
TYPES = ["int", "int", "str", "int", "str", "str", "int", "int", "str", "int", "str", "int", "int", "int", "int"]


def _switch(t: int, cpu: int, prev: int, state: int, nxt: int) -> list[str]:
    return [str(t), str(cpu), "sched_switch", str(prev), "x", "p", str(prev), str(state), "n", str(nxt),
            "", "", "", "", ""]


def _write_sched(run: Path, records: list[list[str]]) -> None:
    raw = run / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    lines = ["# format: hostwire-tsv 2", "# source: test", "# clock: CLOCK_MONOTONIC", "# trace_clock: mono",
             "# column_types: " + " ".join(TYPES), "\t".join(COLUMNS)]
    lines += ["\t".join(r) for r in records]
    lines.append(f"# end: records={len(records)}")
    (raw / "sched.tsv").write_text("\n".join(lines) + "\n")


def test_run_methods_and_their_parquet_copies(tmp_path: Path) -> None:
    _write_sched(tmp_path, [_switch(100, 0, 0, 0, 10), _switch(300, 0, 10, 256, 20), _switch(500, 0, 20, 1, 0)])
    run = Run(tmp_path, {})
    running = Timeline.of(run).df_running()
    assert running[["t_start_ns", "t_end_ns", "pid", "role"]].values.tolist() == [
        [100, 300, 10, "other"], [300, 500, 20, "other"]]
    states = Timeline.of(run).df_task_states()
    # the trace starts at 100: 10 runs, then waits; 20 waits (it is switched in later), runs, sleeps
    assert states[states["pid"] == 10][["t_start_ns", "state"]].values.tolist() == [[100, "running"], [300, "runnable"]]
    assert states[states["pid"] == 20][["t_start_ns", "state"]].values.tolist() == [
        [100, "runnable"], [300, "running"]]
    assert Timeline.of(run).df_runqueue()[["t_ns", "nr_running", "nr_waiting"]].values.tolist() == [
        [100, 2, 1], [300, 2, 1], [500, 0, 0]]
    copy = cache.path_of(tmp_path, "running")
    assert copy.exists()
    pd.testing.assert_frame_equal(pd.read_parquet(copy), running, check_dtype=False)
    # a second Run reads the copy (told apart from a rebuild by a marker written as its copy)
    marker = running.assign(comm="from-copy")
    cache.write_copy(copy, marker, cache.made_by(Run(tmp_path, {}).sources_fingerprint()))
    assert Timeline.of(Run(tmp_path, {})).df_running()["comm"].tolist() == ["from-copy", "from-copy"]
    # a raw file changed under the same size and modification time: its digest tells, rebuilt
    sched = tmp_path / "raw" / "sched.tsv"
    before = sched.stat()
    text = sched.read_text()
    sched.write_text(text.replace("300", "301", 1))
    assert sched.stat().st_size == before.st_size
    os.utime(sched, ns=(before.st_atime_ns, before.st_mtime_ns))
    again = Timeline.of(Run(tmp_path, {})).df_running()
    assert again["comm"].tolist() != ["from-copy", "from-copy"]
    assert pd.read_parquet(copy)["comm"].tolist() == again["comm"].tolist()


def test_a_damaged_timeline_copy_is_rebuilt_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    _write_sched(tmp_path, [_switch(100, 0, 0, 0, 10), _switch(300, 0, 10, 1, 0)])
    Timeline.of(Run(tmp_path, {})).df_running()
    copy = cache.path_of(tmp_path, "running")
    copy.write_bytes(b"")  # a disk that filled
    with caplog.at_level(logging.WARNING):
        assert Timeline.of(Run(tmp_path, {})).df_running()["pid"].tolist() == [10]
    assert any(str(copy) in r.getMessage() and "damaged" in r.getMessage() for r in caplog.records)
    assert copy.stat().st_size > 0


def test_read_only_run_still_builds(tmp_path: Path) -> None:
    _write_sched(tmp_path, [_switch(100, 0, 0, 0, 10), _switch(300, 0, 10, 1, 0)])
    (tmp_path / "tables").write_text("not a directory")  # the copy cannot be written
    assert Timeline.of(Run(tmp_path, {})).df_running()["pid"].tolist() == [10]
