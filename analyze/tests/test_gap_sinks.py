"""The gap analysis gives each gap once it closes (gaps.explain_into): a gap carried across
slab bounds, its preempters too, comes out as the whole explanation has it; the sinks that hold
only sums or write each stream's rows to disk give what the whole tables give; and the command
writes its rows piece by piece in the very text of the whole table."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hostwire.commands.common import write_pieces, write_table
from hostwire.run_directory import load_run
from hostwire.timeline import gap_sources, gap_tables, gaps
from hostwire.timeline.gap_tasks import PREEMPTER_COLUMNS
from hostwire.timeline.waits import WAIT_COLUMNS
from hostwire.timeline.kernel_slabs import OPEN_HI, OPEN_LO, Slab
from hostwire.timeline.gaps import GapInputs

FIXTURE = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "run-small"
S, SENDER, BG0, BG1 = "198.18.0.1:5000>198.18.0.2:6000", 100, 200, 201


def _inputs() -> GapInputs:
    """One stream with a gap [0, 10,000) while its sender waits runnable from 3,000 to 5,000 ns
    on CPU 0, where two background tasks run; nothing queued from 2,000 ns on."""
    data = pd.DataFrame({"t_ns": [0, 10_000, 10_150], "stream": [S, S, S], "wire_len": [100, 100, 100],
                         "payload_len": [1000, 1000, 1000]})
    states = pd.DataFrame([(SENDER, 0, 3_000, "sleeping", 0), (SENDER, 3_000, 5_000, "runnable", 0),
                           (SENDER, 5_000, 20_000, "running", 0)],
                          columns=["pid", "t_start_ns", "t_end_ns", "state", "cpu"])
    running = pd.DataFrame([(0, 0, 3_000, 0, "swapper/0", "idle"), (0, 3_000, 4_000, BG0, "hw-bench", "bg-0"),
                            (0, 4_000, 5_000, BG1, "hw-bench", "bg-1"), (0, 5_000, 20_000, SENDER, "hw-bench", "send-0")],
                           columns=["cpu", "t_start_ns", "t_end_ns", "pid", "comm", "role"])
    return GapInputs(data=data, rate_bit_s=1e9, senders={S: SENDER}, states=states, running=running,
                     sends=pd.DataFrame({"stream": [S], "t_enter_ns": [5_500], "t_exit_ns": [7_000]}),
                     backlog=pd.DataFrame({"stream": [S, S], "t_ns": [0, 2_000], "backlog_bytes": [1000, 0]}),
                     transmit_pids=[])


def _cut(table: pd.DataFrame, lo: int, hi: int) -> pd.DataFrame:
    """A kernel table's intervals that reach into [lo, hi), cut to it (as a slab holds them)."""
    on = (table["t_end_ns"] > lo) & (table["t_start_ns"] < hi)
    part = table[on.to_numpy()].copy()
    part["t_start_ns"] = part["t_start_ns"].clip(lower=lo)
    part["t_end_ns"] = part["t_end_ns"].clip(upper=hi)
    return part.reset_index(drop=True)


@pytest.mark.parametrize("bounds", [(2_500, 4_500, 12_000), (1, 2, 3_500, 3_501, 9_999), (4_000,)])
@pytest.mark.parametrize("batch", [1, 2, gaps.EMIT_GAPS])
def test_a_gap_across_slab_bounds_is_the_whole_gap(bounds: tuple[int, ...], batch: int,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The sender waits runnable from 3,000 to 5,000 ns inside its gap [0, 10,000) while two
    background tasks run: the gap crosses every bound, and its preempted time and preempters with
    it; each slab holds the kernel's intervals cut to it."""
    monkeypatch.setattr(gaps, "EMIT_GAPS", batch)
    inputs = _inputs()
    whole, whole_pre = gaps.explain(inputs, min_gap_ns=100)
    edges = [OPEN_LO, *bounds, OPEN_HI]
    slabs = [Slab(lo, hi, _cut(inputs.states, lo, hi), _cut(inputs.running, lo, hi))
             for lo, hi in zip(edges[:-1], edges[1:])]
    sliced, sliced_pre = gaps.explain(inputs, min_gap_ns=100, slabs=slabs)
    crossing = whole[(whole["t_start_ns"] < bounds[-1]) & (whole["t_end_ns"] > bounds[0])]
    assert len(crossing) and crossing["preempted_ns"].sum() == 2_000  # hand-computed: 3,000 to 5,000
    assert set(whole_pre["comm"]) == {"hw-bench"} and len(whole_pre) == 2
    pd.testing.assert_frame_equal(sliced, whole)
    pd.testing.assert_frame_equal(sliced_pre, whole_pre)
    digest = gap_tables.Digest(1)
    gaps.explain_into(digest, inputs, min_gap_ns=100, slabs=slabs)
    assert digest.per_task().to_dict("records") == [  # hand-computed: each ran 1,000 ns of the one gap
        {"pid": BG0, "comm": "hw-bench", "role": "bg-0", "ns": 1_000, "gaps": 1},
        {"pid": BG1, "comm": "hw-bench", "role": "bg-1", "ns": 1_000, "gaps": 1}]
    assert digest.longest()["t_start_ns"].tolist() == [0]


def test_a_gap_still_open_after_the_last_slab_is_a_defect() -> None:
    """Slabs that stop short of the end leave a gap open: refused, not dropped."""
    inputs = _inputs()
    with pytest.raises(AssertionError, match="every gap has closed"):
        gaps.explain(inputs, min_gap_ns=100, slabs=[Slab(OPEN_LO, 5_000, inputs.states, inputs.running)])


@pytest.mark.parametrize("slab_bytes, batch", [(400, 7), (5_000, 1), (5_000, gaps.EMIT_GAPS)])
def test_sinks_give_the_whole_tables_of_a_recorded_run(tmp_path: Path, slab_bytes: int, batch: int,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """On the recorded fixture read in slabs, the closed gaps handed on in batches of any size:
    the sums and the rows written to disk are the whole tables', and gaps cross the slabs' bounds."""
    run_dir = tmp_path / "run"
    shutil.copytree(FIXTURE, run_dir)
    monkeypatch.setenv("HOSTWIRE_SLAB_BYTES", str(slab_bytes))
    whole_at_once = gaps.explain(gap_sources.gap_inputs(load_run(run_dir)), 1_000, load_run(run_dir).window())
    monkeypatch.setattr(gaps, "EMIT_GAPS", batch)
    window = load_run(run_dir).window()
    whole_sink, totals, on_disk = gap_tables.Whole(), gap_tables.Totals(), gap_tables.OnDisk()
    digest = gap_tables.Digest(40)
    bounds: list[int] = []
    for sink in (whole_sink, totals, on_disk, digest):
        run = load_run(run_dir)
        inputs, slabs = gap_sources.slabbed_gap_inputs(run)
        kept = list(slabs)
        bounds = [s.hi for s in kept[:-1]]
        gaps.explain_into(sink, inputs, 1_000, window, slabs=kept,
                          on_comms=lambda: gap_sources.name_senders(inputs, slabs))
    table, pre = whole_sink.tables()
    pd.testing.assert_frame_equal(table, whole_at_once[0])
    starts, ends = table["t_start_ns"].to_numpy(), table["t_end_ns"].to_numpy()
    crossing = ((starts[:, None] < np.array(bounds)) & (ends[:, None] > np.array(bounds))).any(axis=1)
    assert len(table) > 100 and crossing.sum() > 5  # (the fixture has no preempters: the hand-built test has)
    assert (table["comm"] != "").all()  # named once the slabs were read
    pd.testing.assert_frame_equal(totals.summary(), gaps.summary(table))
    pd.testing.assert_frame_equal(digest.summary(), gaps.summary(table))
    longest = table.sort_values("gap_ns", ascending=False, kind="stable").head(40).reset_index(drop=True)
    assert longest["gap_ns"].duplicated().any()  # ties, broken as the whole table's order breaks them
    pd.testing.assert_frame_equal(digest.longest(), longest)
    assert totals.cannot_tell == table.attrs["cannot_tell"]
    pd.testing.assert_frame_equal(pd.concat(list(on_disk.pieces("gaps")), ignore_index=True), table)
    assert len(pre) == 0 and not list(on_disk.pieces("preempters"))
    assert not on_disk.files  # each stream's file closed once read


def test_the_longest_gaps_break_ties_as_the_whole_table() -> None:
    """Gaps of equal length come in the whole table's order (its streams', then time), whatever
    the order the slabs close them in."""
    def batch(stream: str, starts: list[int], lengths: list[int]) -> pd.DataFrame:
        rows = gap_tables.empty_gaps().reindex(range(len(starts))).fillna(0)
        return rows.assign(stream=stream, t_start_ns=starts, gap_ns=lengths, proto="tcp", comm="", preempted_by="")

    digest = gap_tables.Digest(3)
    digest.begin(["a", "b"], [], {})
    digest.add("b", batch("b", [10, 20], [5, 7]), pd.DataFrame(columns=PREEMPTER_COLUMNS), pd.DataFrame(columns=WAIT_COLUMNS))
    digest.add("a", batch("a", [30, 40], [5, 1]), pd.DataFrame(columns=PREEMPTER_COLUMNS), pd.DataFrame(columns=WAIT_COLUMNS))
    digest.finish({})
    got = digest.longest()
    assert list(zip(got["stream"], got["t_start_ns"])) == [("b", 20), ("a", 30), ("b", 10)]


def _tables() -> list[pd.DataFrame]:
    a = pd.DataFrame({"stream": ["x", "x"], "t": [1, 2], "share": [0.5, float("nan")], "text": ["a,b", 'q"']})
    b = pd.DataFrame({"stream": ["y"], "t": [3], "share": [1 / 3], "text": [""]})
    return [a, b]


@pytest.mark.parametrize("as_json", [False, True])
@pytest.mark.parametrize("pieces", [2, 1, 0])
def test_pieces_are_written_as_their_concatenation(as_json: bool, pieces: int) -> None:
    chosen = _tables()[:pieces]
    whole = pd.concat(chosen, ignore_index=True) if chosen else pd.DataFrame(columns=["stream", "t", "share", "text"])
    expected, got = io.StringIO(), io.StringIO()
    write_table(whole, as_json, expected)
    write_pieces(iter(chosen), ["stream", "t", "share", "text"], as_json, got)
    assert got.getvalue() == expected.getvalue()
    if as_json:
        assert len(json.loads(got.getvalue())) == len(whole)


def test_the_command_streams_rows_as_the_whole_table(tmp_path: Path) -> None:
    """`hostwire gaps` (rows, --preempters, --json, --summary) prints what the whole tables print."""
    import subprocess
    import sys

    run_dir = tmp_path / "run"
    shutil.copytree(FIXTURE, run_dir)
    table, pre = gaps.explain(gap_sources.gap_inputs(load_run(run_dir)), 1_000, load_run(run_dir).window())
    for extra, expected in (([], table), (["--preempters"], pre), (["--summary"], gaps.summary(table))):
        for as_json in (False, True):
            text = io.StringIO()
            write_table(expected if len(expected) or extra != ["--preempters"]
                        else pd.DataFrame(columns=PREEMPTER_COLUMNS), as_json, text)
            done = subprocess.run([sys.executable, "-m", "hostwire", "gaps", str(run_dir), "--min-gap", "1us",
                                   *extra, *(["--json"] if as_json else [])],
                                  capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, done.stderr
            assert done.stdout == text.getvalue(), (extra, as_json)


def test_a_task_that_preempts_twice_in_one_gap_is_summed() -> None:
    """bg-0 runs 3,000-3,500 and 4,500-5,000 ns, bg-1 between, while the sender waits runnable:
    bg-0 has one row of 1,000 ns and half the preempted time (hand-computed)."""
    inputs = _inputs()
    inputs.running = pd.DataFrame([(0, 0, 3_000, 0, "swapper/0", "idle"), (0, 3_000, 3_500, BG0, "hw-bench", "bg-0"),
                                   (0, 3_500, 4_500, BG1, "hw-bench", "bg-1"), (0, 4_500, 5_000, BG0, "hw-bench", "bg-0"),
                                   (0, 5_000, 20_000, SENDER, "hw-bench", "send-0")],
                                  columns=["cpu", "t_start_ns", "t_end_ns", "pid", "comm", "role"])
    _, pre = gaps.explain(inputs, min_gap_ns=100)
    assert pre[["pid", "role", "ns", "share"]].to_dict("records") == [
        {"pid": BG0, "role": "bg-0", "ns": 1_000, "share": 0.5}, {"pid": BG1, "role": "bg-1", "ns": 1_000, "share": 0.5}]


@pytest.mark.parametrize("seed", range(5))
def test_preempters_are_each_tasks_overlap_with_the_waits(seed: int) -> None:
    """gap_tasks.preempters against a count of the overlap of every (wait, running interval) pair,
    on two CPUs whose tasks run many times (one pid under two names, as after an exec)."""
    from hostwire.timeline.gap_tasks import preempters
    from hostwire.timeline.intervals import Cpus

    rng = np.random.default_rng(seed)
    rows = []
    for cpu in (0, 1):
        bounds = np.unique(rng.integers(0, 10_000, 60))
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            pid = int(rng.integers(1, 5))
            rows.append((cpu, int(lo), int(hi), pid, f"task{pid}" if rng.random() < 0.8 else "renamed", f"bg-{pid}"))
    running = pd.DataFrame(rows, columns=["cpu", "t_start_ns", "t_end_ns", "pid", "comm", "role"])
    n = 40
    start = np.sort(rng.integers(0, 9_000, n))
    end = start + rng.integers(1, 1_500, n)
    gap, cpu = np.sort(rng.integers(0, 8, n)), rng.integers(0, 2, n)
    expected: dict[tuple, int] = {}
    for s, e, g, c in zip(start, end, gap, cpu):
        for r in running[running["cpu"] == c].itertuples():
            ns = min(e, r.t_end_ns) - max(s, r.t_start_ns)
            if ns > 0:
                key = (int(g), r.pid, r.comm, r.role, int(c))
                expected[key] = expected.get(key, 0) + int(ns)
    got = preempters(start, end, gap, cpu, Cpus(running))
    assert len(expected) > 20 and not got.duplicated(["gap", "pid", "comm", "role", "cpu"]).any()
    assert {(g, p, c, r, u): ns for g, p, c, r, u, ns in got.itertuples(index=False)} == expected
