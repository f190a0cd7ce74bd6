"""Interval algebra on int64 ns stamps for the gap analysis (hostwire.timeline.gaps): unions of
half-open intervals, which points they cover, step functions turned into intervals, and tables
split once by stream, CPU or task."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd


def union(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint, sorted union of half-open intervals [start, end) (empty ones dropped)."""
    s = np.asarray(starts, dtype=np.int64)
    e = np.asarray(ends, dtype=np.int64)
    keep = e > s
    s, e = s[keep], e[keep]
    if len(s) == 0:
        return s, e
    o = np.argsort(s, kind="stable")
    s, e = s[o], e[o]
    reach = np.maximum.accumulate(e)
    new = np.ones(len(s), dtype=bool)
    new[1:] = s[1:] > reach[:-1]
    first = np.flatnonzero(new)
    return s[first], np.maximum.reduceat(e, first)


def overlap_ns(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> float:
    """The length of the intersection of two unions of intervals: |A| + |B| - |A u B|."""
    ua, ub = union(*a), union(*b)
    both = union(np.concatenate([ua[0], ub[0]]), np.concatenate([ua[1], ub[1]]))
    return float((ua[1] - ua[0]).sum() + (ub[1] - ub[0]).sum() - (both[1] - both[0]).sum())


def covered(x: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For sorted points and sorted disjoint intervals [start, end): whether each point lies in
    one, and which (-1: none). Counts, for every point, the starts and the ends at or before it
    (the intervals are placed among the points, fewer searches than the other way round)."""
    if len(starts) == 0:
        return np.zeros(len(x), dtype=bool), np.full(len(x), -1, dtype=np.int64)
    n = len(x)
    started = np.cumsum(np.bincount(np.searchsorted(x, starts, side="left"), minlength=n + 1)[:n])
    ended = np.cumsum(np.bincount(np.searchsorted(x, ends, side="left"), minlength=n + 1)[:n])
    ok = started > ended
    return ok, np.where(ok, started - 1, -1)


NONE = (np.zeros(0, np.int64), np.zeros(0, np.int64))


BLOCK_ROWS = 1 << 20  # rows a check over a whole table reads at a time: no array of its length is made


def is_ascending(values: np.ndarray) -> bool:
    """values never decrease (read a block at a time)."""
    return _ordered_by_key(values, None)


def _ordered_by_key(key: np.ndarray, sort_by: np.ndarray | None) -> bool:
    """Rows already by key, then by sort_by within a key (read a block at a time)."""
    for lo in range(0, len(key), BLOCK_ROWS):
        rows = slice(max(lo - 1, 0), lo + BLOCK_ROWS)
        k = key[rows]
        if bool((k[1:] < k[:-1]).any()):
            return False
        t = sort_by[rows] if sort_by is not None else None
        if t is not None and bool(((k[1:] == k[:-1]) & (t[1:] < t[:-1])).any()):
            return False
    return True


def split_by_key(key: np.ndarray, sort_by: np.ndarray | None, *columns: np.ndarray) -> dict[int, tuple[np.ndarray, ...]]:
    """Rows grouped by an integer key, each group ordered by sort_by (None: in the table's order;
    ties keep their order): key -> the group's slice of each column."""
    if len(key) == 0:
        return {}
    if _ordered_by_key(key, sort_by):  # a long run's inputs are: views, not copies
        groups: dict[int, tuple[np.ndarray, ...]] = {}
        lo = 0
        while lo < len(key):
            hi = int(np.searchsorted(key, key[lo], side="right"))  # key[lo] in the key's own type: no copy
            groups[int(key[lo])] = tuple(c[lo:hi] for c in columns)
            lo = hi
        return groups
    order = np.lexsort((sort_by, key)) if sort_by is not None else np.argsort(key, kind="stable")
    key = key[order]
    ordered = [c[order] for c in columns]
    bounds = np.flatnonzero(np.r_[True, key[1:] != key[:-1], True])
    return {int(key[lo]): tuple(c[lo:hi] for c in ordered) for lo, hi in zip(bounds[:-1], bounds[1:])}


def longest(starts: np.ndarray, ends: np.ndarray) -> int:
    """The longest interval's length (0 for none; read a block at a time)."""
    return max([0, *(int((ends[lo:lo + BLOCK_ROWS] - starts[lo:lo + BLOCK_ROWS]).max())
                     for lo in range(0, len(starts), BLOCK_ROWS))])


class ByStream:
    """Some int64 columns of a table with a stream column (and a numeric "value"), split by stream
    once (the string column is converted once, not once per stream)."""

    def __init__(self, df: pd.DataFrame | None, columns: tuple[str, ...], order_by: str | None = None) -> None:
        self.rows: dict[str, dict[str, np.ndarray]] = {}
        if df is None or len(df) == 0:
            return
        codes, names = stream_codes(df["stream"])
        # stamps as int64, a level as it is (numeric: numeric()); a view where they already are
        values = {c: np.asarray(df[c].to_numpy(), dtype=np.int64 if c != "value" else None) for c in columns}
        for code, parts in split_by_key(codes, values[order_by] if order_by else None, *values.values()).items():
            if code >= 0:  # -1: no stream
                self.rows[str(names[code])] = dict(zip(values, parts))

    def get(self, stream: str) -> dict[str, np.ndarray] | None:
        return self.rows.get(stream)


def stream_codes(stream: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Each row's stream as a code, and the names (a categorical's own codes: no string per row)."""
    if isinstance(stream.dtype, pd.CategoricalDtype):
        return stream.cat.codes.to_numpy(), stream.cat.categories.astype(str).to_numpy()  # small codes: no copy
    codes, names = pd.factorize(stream.astype(str).to_numpy())
    return codes, np.asarray(names)


def names_in(stream: pd.Series) -> list[str]:
    """The stream names a column holds, sorted (from a categorical's codes: no string per row)."""
    codes, known = stream_codes(stream)
    return sorted(str(known[c]) for c in np.flatnonzero(np.bincount(codes[codes >= 0], minlength=len(known))))


def steps(rows: dict[str, np.ndarray] | None, test: Callable[[np.ndarray], np.ndarray], t_end: int) -> tuple[np.ndarray, np.ndarray]:
    """Intervals [t_i, t_i+1) of one stream's step function (t_ns sorted, value) where test(value)
    holds."""
    if rows is None or len(rows["t_ns"]) == 0:
        return NONE
    t = rows["t_ns"]
    nxt = np.append(t[1:], max(t_end, int(t[-1])))
    hold = test(rows["value"])
    return union(t[hold], nxt[hold])


class Spans:
    """One per-row input of intervals (start, end columns), split by stream once, in start order,
    with each stream's longest interval: the rows that reach into [lo, hi) start no earlier than
    that before lo."""

    def __init__(self, rows: pd.DataFrame | None, start: str, end: str) -> None:
        self.start, self.end = start, end
        self.rows = ByStream(rows, (start, end), order_by=start)
        self.longest = {n: longest(r[start], r[end]) for n, r in self.rows.rows.items()}

    def between(self, name: str, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        r = self.rows.get(name)
        if r is None:
            return NONE
        starts = r[self.start]
        first = int(np.searchsorted(starts, lo - self.longest[name], side="left"))
        last = int(np.searchsorted(starts, hi, side="left"))
        return union(starts[first:last], r[self.end][first:last])


def level_rows(rows: dict[str, np.ndarray] | None, lo: int, hi: int) -> dict[str, np.ndarray] | None:
    """A step function's rows (t_ns sorted) that decide it on [lo, hi): the last at or before lo
    through the first at or after hi (a slice: no copy)."""
    if rows is None:
        return None
    t = rows["t_ns"]
    first = max(int(np.searchsorted(t, lo, side="right")) - 1, 0)
    last = min(int(np.searchsorted(t, hi, side="left")) + 1, len(t))
    return {k: v[first:last] for k, v in rows.items()}


def restrict(intervals: tuple[np.ndarray, np.ndarray], lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """The intervals of a sorted disjoint set that reach into [lo, hi) (a slice: no copy)."""
    starts, ends = intervals
    i0 = int(np.searchsorted(ends, lo, side="right"))
    i1 = int(np.searchsorted(starts, hi, side="left"))
    return starts[i0:max(i0, i1)], ends[i0:max(i0, i1)]


def numeric(df: pd.DataFrame | None, value: str) -> pd.DataFrame | None:
    """df's stream and t_ns, and its `value` column named "value": as it is when numeric, else as
    float64 (NaN where not a number); a long run's columns are mapped from disk: none is copied."""
    if df is None:
        return None
    column = df[value]
    values = column.to_numpy() if column.dtype.kind in "iuf" else \
        pd.to_numeric(column, errors="coerce").to_numpy(dtype=np.float64)
    return pd.DataFrame({"stream": df["stream"].array, "t_ns": df["t_ns"].to_numpy(), "value": values}, copy=False)


def within(x: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The points of sorted x that lie in some [a_i, b_i) of sorted disjoint intervals."""
    i0 = np.searchsorted(x, a, side="left")
    i1 = np.searchsorted(x, b, side="left")
    n = np.maximum(i1 - i0, 0)
    total = int(n.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    idx = np.repeat(i0 - (np.cumsum(n) - n), n) + np.arange(total)
    return x[idx]


def unique_sorted(x: np.ndarray) -> np.ndarray:
    """np.unique of int64 by sorting (numpy 2.4's hash-based np.unique is about 25 times slower
    on millions of stamps)."""
    x = np.sort(x)
    keep = np.ones(len(x), dtype=bool)
    keep[1:] = x[1:] != x[:-1]
    return x[keep]


def ascending(x: np.ndarray) -> np.ndarray:
    """x sorted (the ends of one task's intervals usually are already)."""
    return x if len(x) < 2 or bool((x[1:] >= x[:-1]).all()) else np.sort(x)


class Cpus:
    """The running table split by CPU once: sorted starts and ends, pids, comms, roles, and each
    row's task as a number (one per pid, comm and role: tasks are summed by it, not by text)."""

    def __init__(self, running: pd.DataFrame | None) -> None:
        self.by_cpu: dict[int, tuple[np.ndarray, ...]] = {}
        self.starts = np.zeros(0, np.int64)
        if running is None or len(running) == 0:
            return
        start = running["t_start_ns"].to_numpy().astype(np.int64)
        pid = running["pid"].to_numpy().astype(np.int64)
        comm = running["comm"].astype(str).to_numpy(dtype=object)
        role = running["role"].astype(str).to_numpy(dtype=object)
        task = pd.MultiIndex.from_arrays([pid, comm, role]).factorize()[0].astype(np.int64)
        self.by_cpu = split_by_key(running["cpu"].to_numpy().astype(np.int64), start, start,
                                   running["t_end_ns"].to_numpy().astype(np.int64), pid, comm, role, task)
        self.starts = np.sort(start)


class Runnable:
    """Every task's runnable (waiting) intervals, split by pid once (the task-state table of a
    long run has millions of rows; each stream asks for a few pids)."""

    def __init__(self, states: pd.DataFrame | None) -> None:
        self.by_pid: dict[int, tuple[np.ndarray, ...]] = {}
        if states is None or len(states) == 0:
            return
        st = states[np.asarray(states["state"].isin(["runnable"]), dtype=bool)]
        start = st["t_start_ns"].to_numpy().astype(np.int64)
        self.by_pid = split_by_key(st["pid"].to_numpy().astype(np.int64), start, start,
                             st["t_end_ns"].to_numpy().astype(np.int64), st["cpu"].to_numpy().astype(np.int64))

    def of(self, pid: int) -> tuple[np.ndarray, ...]:
        """One task's runnable intervals, sorted: starts, ends, CPUs."""
        z = np.zeros(0, np.int64)
        return self.by_pid.get(pid, (z, z, z)) if pid > 0 else (z, z, z)
