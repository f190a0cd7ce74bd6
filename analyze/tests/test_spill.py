"""Tables held on disk (hostwire.spill): the same values, read through the page cache instead of the
process's anonymous memory, pieces joined in key order, and no file left in the scratch directory."""

from __future__ import annotations

import gc
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hostwire.heap import give_back
from hostwire.procmem import anon_bytes
from hostwire.spill import Columns, code_dtype, spilled_array

MiB = 1 << 20


@pytest.fixture(autouse=True)
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOSTWIRE_SCRATCH", str(tmp_path))
    return tmp_path


def test_a_spilled_column_leaves_the_anonymous_memory(scratch: Path) -> None:
    values = np.arange(40 * MiB // 8, dtype=np.int64) * 3
    expected = int(values[-1]), int(values.sum())
    gc.collect()
    give_back()
    held = anon_bytes(os.getpid())
    mapped = spilled_array(values)
    del values
    gc.collect()
    give_back()
    assert anon_bytes(os.getpid()) < held - 30 * MiB  # the 40 MiB are the page cache's now
    assert (int(mapped[-1]), int(mapped.sum())) == expected
    assert list(scratch.iterdir()) == []  # unlinked at once: nothing left whatever ends the process


def test_a_table_of_columns_names_each_key_in_the_order_given() -> None:
    """Columns.table: the rows of the keys in the order given (a key without rows included), the
    stream a categorical of the names given, every column read from the mapping."""
    columns = Columns({"t_ns": np.int64, "value": np.float64})
    columns.append(5, t_ns=np.array([1, 2]), value=np.array([0.5, np.nan]))
    columns.append(2, t_ns=np.array([3]), value=np.array([2.0]))
    columns.append(5, t_ns=np.array([4]), value=np.array([1.0]))
    out = columns.table(pd.Index(["a", "b", "c"], dtype=object), [2, 9, 5])
    expected = pd.DataFrame({"stream": pd.Categorical.from_codes([0, 2, 2, 2], categories=pd.Index(["a", "b", "c"], dtype=object)),
                             "t_ns": np.array([3, 1, 2, 4], np.int64), "value": [2.0, 0.5, np.nan, 1.0]})
    pd.testing.assert_frame_equal(out, expected)
    assert not out["t_ns"].to_numpy().flags.writeable  # read from the mapping


def test_columns_appended_by_key_are_joined_in_key_order(scratch: Path) -> None:
    rng = np.random.default_rng(4)
    columns = Columns({"t_ns": np.int64, "value": np.float64})
    expected: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
    for _ in range(60):  # pieces of three keys, interleaved as a capture's chunks give them
        key = int(rng.integers(0, 3)) * 7
        t = rng.integers(0, 10**9, int(rng.integers(0, 500)))
        v = rng.random(len(t))
        columns.append(key, t_ns=t, value=v)
        expected.setdefault(key, []).append((t, v))
    keys = sorted(k for k, parts in expected.items() if sum(len(p[0]) for p in parts))
    assert columns.keys() == keys
    codes = columns.key_codes()
    joined = columns.joined()
    np.testing.assert_array_equal(joined["t_ns"], np.concatenate([p[0] for k in keys for p in expected[k]]))
    np.testing.assert_array_equal(joined["value"], np.concatenate([p[1] for k in keys for p in expected[k]]))
    np.testing.assert_array_equal(codes, np.repeat(np.arange(len(keys)), [sum(len(p[0]) for p in expected[k]) for k in keys]))
    assert codes.dtype == code_dtype(len(keys)) == np.int8
    assert list(scratch.iterdir()) == []
