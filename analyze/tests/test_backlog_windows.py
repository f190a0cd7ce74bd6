"""The backlog of a long run made window by window (hostwire.timeline.backlog_windows) against
stream_tables.backlog(), the whole arrays' definition, and a hand-computed case."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pandas as pd
import pytest

from hostwire.spill import Columns
from hostwire.timeline import stream_tables
from hostwire.timeline.backlog_windows import stream_backlog, stream_rows


def _on_disk(table: pd.DataFrame, dtypes: dict[str, type]) -> pd.DataFrame:
    """The table as the capture pass and the writes on disk hold it: by stream in name order, a
    categorical over mapped columns."""
    columns = Columns(dtypes)
    names = sorted(table["stream"].unique())
    for key, name in enumerate(names):
        rows = table[table["stream"] == name]
        columns.append(key, **{c: rows[c].to_numpy() for c in dtypes})
    return columns.table(pd.Index(names, dtype=object))


def _random_run(seed: int, sorted_writes: bool = True) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Three streams on few stamps (many equal ones, so windows end inside runs of a stamp),
    writes of 0 bytes among them, and one stream whose first frames carry bytes no traced write
    held (an offset)."""
    rng = np.random.default_rng(seed)
    frames, writes = [], []
    for name, offset in (("c>r", 0), ("a>r", 40_000), ("b>r", 0)):
        t = np.sort(rng.integers(0, 3_000, 900))
        frames.append(pd.DataFrame({"t_ns": t, "stream": name,
                                    "seq_end": offset + np.cumsum(rng.integers(1, 1_448, 900))}))
        enter = rng.integers(0, 3_000, 200)
        enter = np.sort(enter) if sorted_writes else enter
        writes.append(pd.DataFrame({"stream": name, "t_enter_ns": enter, "t_exit_ns": enter + rng.integers(0, 9, 200),
                                    "bytes": rng.integers(-1, 8_000, 200)}))
    # a stream whose writes carry no byte (no offset: none is known) and one with writes and no
    # frame (no backlog row), as in backlog()
    frames.append(pd.DataFrame({"t_ns": [3, 8, 8], "stream": "d>r", "seq_end": [500, 900, 1_000]}))
    writes.append(pd.DataFrame({"stream": "d>r", "t_enter_ns": [1, 2], "t_exit_ns": [4, 8], "bytes": [0, -1]}))
    writes.append(pd.DataFrame({"stream": "z>r", "t_enter_ns": [5], "t_exit_ns": [6], "bytes": [100]}))
    return pd.concat(frames, ignore_index=True), pd.concat(writes, ignore_index=True)


def _expected(frames: pd.DataFrame, writes: pd.DataFrame) -> pd.DataFrame:
    return stream_tables.backlog(frames, writes)[["stream", "t_ns", "backlog_bytes"]].reset_index(drop=True)


def _plain(steps: pd.DataFrame) -> pd.DataFrame:
    return steps.assign(stream=steps["stream"].astype(str)).reset_index(drop=True)


@pytest.mark.parametrize("rows", [1, 2, 7, 64, 1 << 18])
@pytest.mark.parametrize("sorted_writes", [True, False])
def test_windows_give_the_whole_backlog(rows: int, sorted_writes: bool) -> None:
    frames, writes = _random_run(rows, sorted_writes)
    expected = _expected(frames, writes)
    assert len(expected) > 1_500 and (expected["backlog_bytes"] > 0).any()
    disk = _on_disk(frames, {"t_ns": np.int64, "seq_end": np.int64}), _on_disk(
        writes, {"t_enter_ns": np.int64, "t_exit_ns": np.int64, "bytes": np.int64})
    for f, w in ((frames, writes), disk):
        pd.testing.assert_frame_equal(_plain(stream_tables.backlog_steps(f, w, rows)), expected)


def test_an_offset_is_found_across_windows() -> None:
    """A frame far into the stream carries more than every write entered before it: the offset
    comes from a late window, and every earlier level depends on it."""
    frames = pd.DataFrame({"t_ns": np.arange(0, 100, 10), "stream": "s",
                           "seq_end": [10, 20, 30, 40, 50, 60, 70, 80, 590, 600]})
    writes = pd.DataFrame({"stream": "s", "t_enter_ns": np.arange(0, 100, 10) - 1,
                           "t_exit_ns": np.arange(0, 100, 10) - 1, "bytes": 10})
    expected = _expected(frames, writes)
    # offset 500 (590 at 80, after 9 writes of 10): the first write, at -1, leaves 510 to send
    assert expected[["t_ns", "backlog_bytes"]].iloc[0].tolist() == [-1, 510]
    for rows in (1, 3, 100):
        pd.testing.assert_frame_equal(_plain(stream_tables.backlog_steps(frames, writes, rows)), expected)


def test_hand_computed_levels() -> None:
    """One write entered at 10 (100 bytes, returned at 12) and frames at 5, 12 and 15 ending at
    30, 80 and 130: the frame at 5 carries 30 bytes no traced write held (the offset); at 12 the
    write counts before the frame (130 written, 80 sent), at 15 all is sent."""
    frames = {"t_ns": np.array([5, 12, 15]), "seq_end": np.array([30, 80, 130])}
    writes = {"t_enter_ns": np.array([10]), "t_exit_ns": np.array([12]), "bytes": np.array([100])}
    for rows in (1, 2, 10):
        got = list(stream_backlog(frames, writes, rows))
        t, level = np.concatenate([g[0] for g in got]), np.concatenate([g[1] for g in got])
        assert t.tolist() == [5, 12, 15] and level.tolist() == [0, 50, 0]


def test_stream_rows_are_slices_of_a_table_in_stream_order() -> None:
    table = _on_disk(pd.DataFrame({"stream": ["b", "a", "b", "c"], "x": [1, 2, 3, 4]}), {"x": np.int64})
    assert stream_rows(table["stream"]) == [("a", slice(0, 1)), ("b", slice(1, 3)), ("c", slice(3, 4))]
    mixed = pd.Series(["b", "a", "b"])  # not in stream order: masks, in name order
    assert [(n, m.tolist()) for n, m in stream_rows(mixed)] == [("a", [False, True, False]), ("b", [True, False, True])]


def test_a_long_stream_takes_a_windows_memory() -> None:
    """On mapped tables the steps of a stream of a million frames are made in a window's memory:
    the numpy arrays it allocates (traced) stay under 4 MiB, where the whole arrays' way takes
    over 60 MB; the steps are the same."""
    n = 1_000_000
    t = np.arange(n, dtype=np.int64) * 1_000
    frames = _on_disk(pd.DataFrame({"t_ns": t, "stream": "s", "seq_end": (np.arange(n) + 1) * 1_000}),
                      {"t_ns": np.int64, "seq_end": np.int64})
    writes = _on_disk(pd.DataFrame({"stream": "s", "t_enter_ns": t[::8] - 5, "t_exit_ns": t[::8] - 1,
                                    "bytes": 8_000}), {"t_enter_ns": np.int64, "t_exit_ns": np.int64, "bytes": np.int64})
    of_frames = {c: frames[c].to_numpy() for c in ("t_ns", "seq_end")}
    of_writes = {c: writes[c].to_numpy() for c in ("t_enter_ns", "t_exit_ns", "bytes")}
    tracemalloc.start()
    try:
        rows = sum(len(t) for t, _ in stream_backlog(of_frames, of_writes, 1 << 14))
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        whole = stream_tables.backlog(frames, writes)
        _, whole_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert rows == n + n // 8 and peak < 4 << 20 and whole_peak > 60 << 20, (peak, whole_peak)
    steps = stream_tables.backlog_steps(frames, writes, 1 << 14)
    assert np.array_equal(steps["backlog_bytes"].to_numpy(), whole["backlog_bytes"].to_numpy())
