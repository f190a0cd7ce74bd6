"""The kernel trace read in slabs (hostwire.timeline.kernel_slabs) against the whole trace: the
pieces of the reader, the task states and CPU intervals cut into slabs, the host's silences, and
the gap table; on the recorded fixture and on a hand-built trace whose tasks cross slab bounds in
every way the slabs carry (a wake-up switched in slabs later, a wake-up never switched in, a
migration of a waiting task, a task and a CPU first seen late)."""

from __future__ import annotations

import shutil
from typing import Any
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hostwire.errors import InputError
from hostwire.read.sched import iter_sched_tsv, read_sched_tsv
from hostwire.run_directory import load_run
from hostwire.timeline import gap_sources, gaps, kernel_slabs, stolen, tables
from hostwire.timeline.build import Timeline
from hostwire.window import Window

FIXTURE = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "run-small"
SCHED = FIXTURE / "raw" / "sched.tsv"
PIECES = [1, 200, 2_000, 1 << 30]  # from one event a slab to the whole trace in one

A, B, C, D, E, F, G = 10, 11, 12, 13, 14, 15, 16
# (t, cpu, event, fields): the hand-built trace (the module doc)
HAND = [
    (100, 0, "sched_switch", dict(prev_pid=0, prev_comm="swapper/0", prev_state=0, next_pid=A, next_comm="a")),
    (200, 1, "sched_wakeup", dict(arg_pid=B, arg_comm="b", target_cpu=1)),
    (300, 0, "sched_migrate_task", dict(arg_pid=C, arg_comm="c", orig_cpu=0, dest_cpu=1)),
    (400, 0, "sched_switch", dict(prev_pid=A, prev_comm="a", prev_state=256, next_pid=D, next_comm="d")),
    (500, 0, "sched_wakeup", dict(arg_pid=A, arg_comm="a", target_cpu=0)),
    (600, 1, "sched_wakeup", dict(arg_pid=E, arg_comm="e", target_cpu=1)),
    (700, 0, "sched_migrate_task", dict(arg_pid=A, arg_comm="a", orig_cpu=0, dest_cpu=1)),
    (800, 1, "sched_switch", dict(prev_pid=F, prev_comm="f", prev_state=1, next_pid=A, next_comm="a")),
    (900, 1, "sched_switch", dict(prev_pid=A, prev_comm="a", prev_state=0, next_pid=B, next_comm="b")),
    (1000, 0, "sched_switch", dict(prev_pid=D, prev_comm="d", prev_state=1, next_pid=0, next_comm="swapper/0")),
    (1050, 0, "sched_wakeup", dict(arg_pid=G, arg_comm="g", target_cpu=0)),
    (1080, 0, "sched_switch", dict(prev_pid=0, prev_comm="swapper/0", prev_state=0, next_pid=G, next_comm="g")),
    (1080, 1, "sched_switch", dict(prev_pid=B, prev_comm="b", prev_state=1, next_pid=0, next_comm="swapper/1")),
    (1200, 0, "sched_process_fork", dict(child_pid=17, child_comm="g", parent_pid=G, parent_comm="g")),
]


def _write_trace(path: Path, rows: list[tuple[int, int, str, dict]]) -> Path:
    """A sched.tsv with the fixture's header and these events (pid/comm: the task that ran)."""
    head = [line for line in SCHED.read_text().splitlines() if line.startswith("#") and not line.startswith("# end")]
    columns = next(line for line in SCHED.read_text().splitlines() if not line.startswith("#")).split("\t")
    lines = [*head, "\t".join(columns)]
    for t, cpu, event, fields in rows:
        values = {"t_ns": t, "cpu": cpu, "event": event, "pid": 1, "comm": "x", **fields}
        lines.append("\t".join(str(values.get(c, "")) for c in columns))
    lines.append(f"# end: records={len(rows)}")
    path.write_text("\n".join(lines) + "\n")
    return path


def _whole(path: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    sched = read_sched_tsv(path)[1]
    sw, wk, mg = tables.switches(sched), tables.wakeups(sched), tables.migrations(sched)
    first, last = int(sched["t_ns"].min()), int(sched["t_ns"].max())
    return tables.task_states(sw, wk, mg, first, last), tables.running(sw, first, last, {})


def _sliced(path: Path, piece_bytes: int) -> tuple[pd.DataFrame, pd.DataFrame, int]:
    first = kernel_slabs.first_pass(path, piece_bytes)
    slabs = list(kernel_slabs.KernelSlabs(path, first, {}))
    return (pd.concat([s.states for s in slabs], ignore_index=True),
            pd.concat([s.running for s in slabs], ignore_index=True), len(slabs))


def _merged(df: pd.DataFrame, key: list[str]) -> pd.DataFrame:
    """The intervals of each key with touching ones joined (slabs cut an interval at their bounds)."""
    df = df.astype({"t_start_ns": "int64", "t_end_ns": "int64", **{k: str for k in key}})
    df = df.sort_values([*key, "t_start_ns"], kind="stable").reset_index(drop=True)
    same = np.ones(len(df), dtype=bool)
    for k in key:
        values = df[k].to_numpy()
        same[1:] &= values[1:] == values[:-1]
    same[0] = False
    same[1:] &= df["t_start_ns"].to_numpy()[1:] == df["t_end_ns"].to_numpy()[:-1]
    group = np.cumsum(~same)
    out = df.groupby(group).agg({**{k: "first" for k in key}, "t_start_ns": "first", "t_end_ns": "last"})
    return out.reset_index(drop=True)


@pytest.mark.parametrize("piece_bytes", PIECES)
def test_pieces_of_the_trace_are_the_whole_trace(piece_bytes: int) -> None:
    whole = read_sched_tsv(SCHED)[1]
    pieces = list(iter_sched_tsv(SCHED, piece_bytes=piece_bytes))
    pd.testing.assert_frame_equal(pd.concat(pieces, ignore_index=True), whole)
    assert len(pieces) == (len(whole) if piece_bytes == 1 else 1 if piece_bytes > SCHED.stat().st_size else len(pieces))


@pytest.mark.parametrize("damage, expected", [
    (lambda text: text.replace("# end: records=331", "# end: records=330"), "the trailer counts 330 records"),
    (lambda text: text[: text.index("# end:")], "no '# end: records=N' trailer"),
    (lambda text: text.replace("\tsched_switch\t", "\tsched_switch\t\t", 1), "fields, expected"),
])
def test_a_damaged_trace_is_refused_in_pieces_as_whole(tmp_path: Path, damage: object, expected: str) -> None:
    bad = tmp_path / "sched.tsv"
    bad.write_text(damage(SCHED.read_text()))  # type: ignore[operator]
    with pytest.raises(InputError) as whole:
        read_sched_tsv(bad)
    with pytest.raises(InputError) as pieces:
        list(iter_sched_tsv(bad, piece_bytes=500))
    assert expected in str(whole.value) and str(pieces.value) == str(whole.value)


@pytest.mark.parametrize("trace, piece_bytes", [("hand-built", p) for p in PIECES] + [
    ("fixture", 300), ("fixture", 2_000), ("fixture", 1 << 30)])
def test_slabs_hold_the_whole_traces_states_and_cpus(tmp_path: Path, trace: str, piece_bytes: int) -> None:
    path = SCHED if trace == "fixture" else _write_trace(tmp_path / "sched.tsv", HAND)
    states, running = _whole(path)
    slab_states, slab_running, count = _sliced(path, piece_bytes)
    if piece_bytes == 1:
        assert count == len(HAND) - 1 + 2  # an event a slab (two share a stamp), and the open slabs
    key_s, key_r = ["pid", "state", "cpu"], ["cpu", "pid", "comm", "role"]
    pd.testing.assert_frame_equal(_merged(slab_states, key_s), _merged(states, key_s))
    pd.testing.assert_frame_equal(_merged(slab_running, key_r), _merged(running, key_r))


def test_hand_built_trace_states_are_the_rules(tmp_path: Path) -> None:
    """The whole-trace rules the slabs must keep, worked by hand on the hand-built trace."""
    path = _write_trace(tmp_path / "sched.tsv", HAND)
    states = _sliced(path, 1)[0]

    def state_at(pid: int, t: int) -> tuple[str, int]:
        row = states[(states["pid"] == pid) & (states["t_start_ns"] <= t) & (states["t_end_ns"] > t)]
        assert len(row) == 1, (pid, t, row)
        return str(row["state"].iloc[0]), int(row["cpu"].iloc[0])

    assert state_at(B, 250) == ("runnable", 1)   # woken at 200, switched in at 900, six slabs on
    assert state_at(E, 650) == ("sleeping", 1)   # woken, never switched in: the wake-up changes nothing
    assert state_at(A, 750) == ("runnable", 1)   # preempted at 400, moved to CPU 1 at 700
    assert state_at(F, 150) == ("running", 1)    # first seen at 800, switched out: running before
    assert state_at(G, 150) == ("sleeping", 0)   # first seen at 1050, woken: asleep before


def test_common_silences_are_the_silences_of_both_sources_merged() -> None:
    rng = np.random.default_rng(7)
    for _ in range(50):
        a = np.sort(rng.integers(0, 10**8, rng.integers(0, 60)))
        b = np.sort(rng.integers(3 * 10**7, 2 * 10**8, rng.integers(0, 60)))
        merged = np.sort(np.concatenate([a, b]))
        if len(merged) < 2:
            continue
        long = np.flatnonzero(np.diff(merged) >= stolen.MIN_SILENCE_NS)
        start, end = stolen.common_silences(stolen.silences(a), stolen.silences(b), int(merged[0]), int(merged[-1]))
        np.testing.assert_array_equal(start, merged[long])
        np.testing.assert_array_equal(end, merged[long + 1])


@pytest.mark.parametrize("piece_bytes", [300, 3_000])
def test_gaps_explained_in_slabs_are_the_gaps_explained_whole(tmp_path: Path, piece_bytes: int,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(FIXTURE, run_dir)
    whole = gaps.explain(gap_sources.gap_inputs(load_run(run_dir)), min_gap_ns=1_000)
    monkeypatch.setenv("HOSTWIRE_SLAB_BYTES", str(piece_bytes))
    run = load_run(run_dir)
    inputs, slabs = gap_sources.slabbed_gap_inputs(run)
    # the whole tables the inputs were made from are let go of before the slabs are read
    assert not any(run.keeps(key) for key in ("frames", "syscalls"))
    assert not any(run.keeps(("timeline", name)) for name in (*gap_sources.WHOLE_TABLES, "task_states", "running"))
    sliced = gaps.explain(inputs, min_gap_ns=1_000, slabs=slabs,
                          on_comms=lambda: gap_sources.name_senders(inputs, slabs))
    assert len(whole[0]) > 100
    pd.testing.assert_frame_equal(sliced[0], whole[0])
    pd.testing.assert_frame_equal(sliced[1], whole[1])
    assert Timeline.of(run).roles() == Timeline.of(load_run(run_dir)).roles()


def test_analyze_takes_the_chunked_paths_for_a_long_run_with_the_same_row(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """hostwire analyze gives a long run (here: thresholds at 0 bytes) the chunked metrics and the
    slabbed gaps, in small chunks and slabs, and the same summary row and tables as in memory."""
    from hostwire.campaign import analyze

    whole_dir, long_dir = tmp_path / "whole", tmp_path / "long"
    shutil.copytree(FIXTURE, whole_dir)
    shutil.copytree(FIXTURE, long_dir)
    whole = analyze.analyze_run(whole_dir, force=True)
    calls = _as_long_runs(monkeypatch)
    long = analyze.analyze_run(long_dir, force=True)
    assert {"sanity", "goodput", "fairness", "intervals", "idc", "bursts", "contract", "gaps"} <= set(calls)
    assert "whole trace" not in calls  # the receiver's clock, the streams and roles read only the rare events
    assert whole["errors"] == "" and whole["gaps"] > 0
    differ = {k: (whole[k], long.get(k)) for k in whole if k not in ("directory",) and whole[k] != long.get(k)
              and not (isinstance(whole[k], float) and np.isnan(whole[k]) and np.isnan(long.get(k)))}
    assert differ == {}
    for name in analyze.TABLES:
        pd.testing.assert_frame_equal(pd.read_parquet(analyze._table_path(long_dir, name)),
                                      pd.read_parquet(analyze._table_path(whole_dir, name)))


def test_the_one_run_report_of_a_long_run_reads_it_in_slabs_and_chunks(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """hostwire report RUN on a long run (thresholds at 0 bytes): the same sections, word for word,
    as on the run read whole, the kernel trace never read whole, the process trace's CPUs from the
    slabs."""
    from hostwire.report import run_report

    whole_dir, long_dir = tmp_path / "whole", tmp_path / "long"
    shutil.copytree(FIXTURE, whole_dir)
    shutil.copytree(FIXTURE, long_dir)
    whole = run_report.RunReport(whole_dir)
    whole.build()
    calls = _as_long_runs(monkeypatch)
    long = run_report.RunReport(long_dir)
    long.build()
    assert gap_sources.long_trace(long.run) is not None and long.metrics_input == long_dir
    assert "whole trace" not in calls and {"goodput", "intervals", "idc", "contract"} <= set(calls)
    assert [s.title for s in whole.sections] == [s.title for s in long.sections]
    assert len(whole.sections) >= 6 and not any("Not drawn" in s.body for s in whole.sections)
    for a, b in zip(whole.sections, long.sections):
        assert a.body.replace(str(whole_dir), "RUN") == b.body.replace(str(long_dir), "RUN"), a.title
    # the CPUs of the excerpt: the slabs' rows are the whole table's rows
    from hostwire.timeline.excerpt import longest_off_period

    slabs = kernel_slabs.KernelSlabs(long_dir / "raw" / "sched.tsv", gap_sources.kernel_first_pass(long.run), {})
    lo, hi = 3860760000000, 3860780000000
    cut = slabs.running_between(lo, hi)
    full = Timeline.of(load_run(whole_dir)).df_running()
    full = kernel_slabs._clip(full[(full["t_end_ns"] > lo) & (full["t_start_ns"] < hi)], lo, hi)
    key = ["cpu", "t_start_ns", "t_end_ns", "pid", "comm"]
    assert len(cut) > 5
    pd.testing.assert_frame_equal(cut[key].reset_index(drop=True).astype(str),
                                  full[key].sort_values(["cpu", "t_start_ns"]).reset_index(drop=True).astype(str))
    assert longest_off_period(long.run, running_of=slabs.running_between) is not None


@pytest.mark.parametrize("window", [(3860760000000, 3860780000000), (3860758301997, 3860787675165)])
def test_the_timeline_of_a_long_trace_from_its_slabs(tmp_path: Path, window: tuple[int, int],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """hostwire timeline on a long trace: the CPU slices of the window are the whole table's cut
    at its bounds, the run-queue counters the whole table's after its start (where the slabs add
    the value the window starts with)."""
    from hostwire.timeline import perfetto_trace

    run_dir = tmp_path / "run"
    shutil.copytree(FIXTURE, run_dir)
    start, end = window
    whole = perfetto_trace.tables_of(load_run(run_dir), Window(start, end))
    run = load_run(run_dir)
    monkeypatch.setenv("HOSTWIRE_SLAB_BYTES", "500")
    first = gap_sources.kernel_first_pass(run)
    sliced = perfetto_trace.tables_of(run, Window(start, end), kernel_slabs.KernelSlabs(run_dir / "raw" / "sched.tsv", first,
                                                                            Timeline.of(run).roles()))
    key = ["cpu", "t_start_ns", "t_end_ns", "pid", "comm", "role"]
    expected = kernel_slabs._clip(whole.running, start, end)[key].sort_values(["cpu", "t_start_ns"])
    assert len(expected) > 10
    pd.testing.assert_frame_equal(sliced.running[key].reset_index(drop=True).astype(str),
                                  expected.reset_index(drop=True).astype(str))
    after = [r[r["t_ns"] > start].reset_index(drop=True) for r in (sliced.runqueue, whole.runqueue)]
    assert len(after[1]) > 10
    pd.testing.assert_frame_equal(after[0], after[1])
    assert int(sliced.runqueue["t_ns"].min()) == start
    for name in ("calls", "frames", "backlog", "segments"):
        pd.testing.assert_frame_equal(getattr(sliced, name).astype(str), getattr(whole, name).astype(str))


def test_gaps_in_slabs_from_the_command_line(tmp_path: Path) -> None:
    """--engine slabs prints what memory prints; a run without a kernel trace has nothing to read in
    slabs and is explained as in memory; a damaged trace is one line naming file and line, exit 1."""
    import subprocess
    import sys

    def gaps_cli(run_dir: Path, engine: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "hostwire", "gaps", str(run_dir), "--engine", engine,
                               "--min-gap", "1us"], capture_output=True, text=True, timeout=120)

    run_dir = tmp_path / "run"
    shutil.copytree(FIXTURE, run_dir)
    memory, slabs = gaps_cli(run_dir, "memory"), gaps_cli(run_dir, "slabs")
    assert memory.returncode == 0 and slabs.returncode == 0 and slabs.stdout == memory.stdout
    assert slabs.stdout.count("\n") > 100
    bare = tmp_path / "bare"
    shutil.copytree(FIXTURE, bare)
    (bare / "raw" / "sched.tsv").unlink()
    memory, slabs = gaps_cli(bare, "memory"), gaps_cli(bare, "slabs")
    assert slabs.returncode == 0 and slabs.stdout == memory.stdout and "without a kernel trace" in slabs.stderr
    damaged = tmp_path / "damaged"
    shutil.copytree(FIXTURE, damaged)
    trace = damaged / "raw" / "sched.tsv"
    trace.write_text(trace.read_text().replace("# end: records=331", "# end: records=332"))
    slabs = gaps_cli(damaged, "slabs")
    assert slabs.returncode == 1 and "Traceback" not in slabs.stderr
    assert slabs.stderr.strip().splitlines()[-1].startswith(f"hostwire: {trace}:"), slabs.stderr
    assert "the trailer counts 332 records" in slabs.stderr


def _as_long_runs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every run taken for a long one from here on (the chunked engine's and the slabs' thresholds
    at 0 bytes, chunks of 7 frames, slabs of 3 KB); returns the list that names each chunked
    metric, each slabbed gap reading and each whole read of a kernel trace as it happens."""
    import hostwire.read.sched as sched_reader
    from hostwire.metrics.chunked import engine

    monkeypatch.setattr(engine, "AUTO_BYTES", 0)
    monkeypatch.setattr(gap_sources, "SLABS_FROM_BYTES", 0)
    monkeypatch.setenv("HOSTWIRE_CHUNK_ROWS", "7")
    monkeypatch.setenv("HOSTWIRE_SLAB_BYTES", "3000")
    calls: list[str] = []
    compute, slabbed, whole_trace = engine.compute, gap_sources.slabbed_gap_inputs, sched_reader.read_sched_tsv

    def served(request: Any) -> Any:  # named once the chunked engine has served it (a decline raises first)
        out = compute(request)
        calls.append(request.kind)
        return out

    monkeypatch.setattr(engine, "compute", served)
    monkeypatch.setattr(gap_sources, "slabbed_gap_inputs", lambda *a: calls.append("gaps") or slabbed(*a))
    monkeypatch.setattr(sched_reader, "read_sched_tsv",
                        lambda *a, **k: calls.append("whole trace") or whole_trace(*a, **k))
    return calls


_HELD_AFTER_FIRST_PASS = """
import sys
from pathlib import Path
from hostwire.heap import give_back
from hostwire.timeline.kernel_slabs import first_pass, slab_bytes

def anon() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) << 10 for line in status if line.startswith("RssAnon:"))

import pandas, pyarrow  # noqa: E401,F401  (their own memory is not the pass's)
before = anon()
first = first_pass(Path(sys.argv[1]), slab_bytes())
give_back()
print(anon() - before, first.slabs)
"""


@pytest.mark.long
def test_what_the_first_pass_holds_does_not_follow_the_slabs(tmp_path: Path) -> None:
    """Over a thousand slabs (the fixture's events repeated, later in time), the memory held after
    the first pass stays within 24 MiB of what it was before: a small table kept from each slab
    pinned a page of the allocator's and held 125 MiB after 855 slabs, 310 MiB after 3,420."""
    import subprocess
    import sys

    lines = SCHED.read_text().splitlines()
    header = [line for line in lines if line.startswith("#") and not line.startswith("# end")]
    names = next(line for line in lines if line.startswith("t_ns"))
    rows = [line.split("\t", 1) for line in lines if line and not line.startswith(("#", "t_ns"))]
    stamps = np.array([int(t) for t, _ in rows])
    span = int(stamps[-1] - stamps[0]) + 1_000
    copies = 400
    trace = tmp_path / "sched.tsv"
    with trace.open("w") as out:
        out.write("\n".join([*header, names]) + "\n")
        for k in range(copies):
            out.write("".join(f"{t + k * span}\t{rest}\n" for t, (_, rest) in zip(stamps.tolist(), rows)))
        out.write(f"# end: records={len(rows) * copies}\n")
    env = {**__import__("os").environ, "HOSTWIRE_SLAB_BYTES": "16384"}
    done = subprocess.run([sys.executable, "-c", _HELD_AFTER_FIRST_PASS, str(trace)], env=env, check=True,
                          capture_output=True, text=True)
    held, slabs = (int(x) for x in done.stdout.split())
    assert slabs > 1_000 and held < 24 << 20, (held >> 20, slabs)
