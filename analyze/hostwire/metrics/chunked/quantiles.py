"""Exact quantiles of integers (gap lengths in ns, all >= 0) seen in several passes over chunks,
in bounded memory: np.quantile's "linear" method, value for value.

Pass 1 counts each group's values, their minimum and maximum and a coarse histogram over the
float64 bit pattern (exponent and 12 mantissa bits: buckets 1/4096 of their value wide). The
order statistics the quantiles need (ranks floor(h) and floor(h) + 1 of h = q (n - 1)) are then
located in a bucket, an integer range [lo, hi] with a known count below it. Each further pass
counts the values of each open range in up to 2**18 equal sub-ranges and narrows it; a range of
one integer is the order statistic. Gaps below 2**30 ns (about a second) are exact after pass 2,
larger ones after pass 3. Memory: the buckets of the groups (small) and one 2**18 histogram per
open range."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import numpy as np

SHIFT = 40          # float64 bits kept: sign, exponent, 12 mantissa bits
SUB_BUCKETS = 1 << 18

GroupedValues = tuple[np.ndarray, np.ndarray]  # (group of each value, value)


ONE = 1023 << (52 - SHIFT)                 # the bucket of 1.0
BUCKETS = 1 + (64 << (52 - SHIFT))        # 0, then every bucket from 1 up to 2**64


def _bucket(values: np.ndarray) -> np.ndarray:
    """Bucket index of values >= 0: 0 for 0, else 1 + the float64 bits above SHIFT from those of 1."""
    raw = (values.astype(np.float64).view(np.uint64) >> np.uint64(SHIFT)).astype(np.int64) - (ONE - 1)
    return np.where(values == 0, 0, raw)


def _bucket_of(value: int) -> int:
    return int(_bucket(np.asarray([value], dtype=np.int64))[0])


def _first_in_bucket(index: int) -> int:
    """The smallest integer >= 0 whose bucket index is >= `index`."""
    if index <= 0:
        return 0
    guess = np.asarray([(index - 1 + ONE) << SHIFT], dtype=np.uint64).view(np.float64)[0]
    v = max(0, int(math.floor(guess)) - 2)
    while v > 0 and _bucket_of(v) >= index:
        v -= 1
    while _bucket_of(v) < index:
        v += 1
    return v


def by_group(group: np.ndarray, groups: int) -> tuple[np.ndarray, np.ndarray]:
    """(order that sorts the rows by group, stably; bounds of each group in that order)."""
    small = group.astype(np.int16) if groups < 2**15 else group
    order = np.argsort(small, kind="stable")
    return order, np.searchsorted(group[order], np.arange(groups + 1))


class FirstPass:
    """Counts, minimum, maximum and the coarse histogram of each group's values (a dense row of
    BUCKETS counts, 2 MB, per group that has values)."""

    def __init__(self, groups: int) -> None:
        self.groups = groups
        self.count = np.zeros(groups, dtype=np.int64)
        self.low = np.full(groups, np.iinfo(np.int64).max, dtype=np.int64)
        self.high = np.full(groups, -1, dtype=np.int64)
        self.hist: dict[int, np.ndarray] = {}

    def feed(self, group: np.ndarray, values: np.ndarray) -> None:
        if len(values) == 0:
            return
        order, bounds = by_group(group, self.groups)
        buckets = _bucket(values)
        for g in np.flatnonzero(np.diff(bounds)).tolist():
            part = order[bounds[g]:bounds[g + 1]]
            v = values[part]
            self.count[g] += len(v)
            self.low[g] = min(self.low[g], int(v.min()))
            self.high[g] = max(self.high[g], int(v.max()))
            row = self.hist.get(g)
            if row is None:
                row = self.hist[g] = np.zeros(BUCKETS, dtype=np.int64)
            b = buckets[part]
            low = int(b.min())
            counts = np.bincount(b - low)
            row[low:low + len(counts)] += counts


class Target:
    """One order statistic: rank `rank` (0-based) of group `group`, known to lie in [lo, hi] with
    `below` values of the group under lo."""

    def __init__(self, group: int, rank: int, lo: int, hi: int, below: int) -> None:
        self.group, self.rank, self.lo, self.hi, self.below = group, rank, lo, hi, below

    @property
    def done(self) -> bool:
        return self.lo == self.hi


def order_statistics(first: FirstPass, ranks: dict[int, list[int]],
                     passes: Callable[[], Iterable[GroupedValues]]) -> dict[tuple[int, int], int]:
    """{(group, rank): value} for the ranks asked of each group; `passes()` gives the values
    again, chunk by chunk, as often as needed."""
    targets: list[Target] = []
    for g, wanted in ranks.items():
        cum = np.cumsum(first.hist[g])
        for r in sorted(set(wanted)):
            bucket = int(np.searchsorted(cum, r, side="right"))
            below = int(cum[bucket - 1]) if bucket else 0
            lo = max(int(first.low[g]), _first_in_bucket(bucket))
            hi = min(int(first.high[g]), _first_in_bucket(bucket + 1) - 1)
            targets.append(Target(g, r, lo, hi, below))
    while any(not t.done for t in targets):
        _refine([t for t in targets if not t.done], passes())
    return {(t.group, t.rank): t.lo for t in targets}


def _refine(open_targets: list[Target], chunks: Iterable[GroupedValues]) -> None:
    ranges = sorted({(t.group, t.lo, t.hi) for t in open_targets})
    width = {r: max(1, -(-(r[2] - r[1] + 1) // SUB_BUCKETS)) for r in ranges}
    counts = {r: np.zeros(-(-(r[2] - r[1] + 1) // width[r]), dtype=np.int64) for r in ranges}
    of_group: dict[int, list[tuple[int, int, int]]] = {}
    for r in ranges:
        of_group.setdefault(r[0], []).append(r)
    groups = max(of_group) + 1
    for group, values in chunks:
        order, bounds = by_group(group, groups)
        for g, rs in of_group.items():
            v = values[order[bounds[g]:bounds[g + 1]]]
            for r in rs:
                inside = v[(v >= r[1]) & (v <= r[2])]
                if len(inside):
                    counts[r] += np.bincount((inside - r[1]) // width[r], minlength=len(counts[r]))
    for t in open_targets:
        r = (t.group, t.lo, t.hi)
        cum = np.cumsum(counts[r])
        j = int(np.searchsorted(cum, t.rank - t.below, side="right"))
        t.below += int(cum[j - 1]) if j else 0
        t.lo = r[1] + j * width[r]
        t.hi = min(r[2], t.lo + width[r] - 1)


def quantile_ranks(n: int, qs: Iterable[float]) -> list[tuple[float, int, int, float]]:
    """Per q: (q, rank below, rank above, weight) as np.quantile's linear method computes them."""
    out = []
    for q in qs:
        virtual = np.float64(q) * np.float64(n - 1)
        lo = int(np.floor(virtual))
        hi = min(lo + 1, n - 1)
        out.append((q, lo, hi, float(virtual - lo)))
    return out


def interpolate(below: int, above: int, gamma: float) -> float:
    """np.quantile's linear interpolation between two order statistics, bit for bit."""
    return float(np.quantile(np.asarray([below, above], dtype=np.int64), gamma))
