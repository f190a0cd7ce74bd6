"""The exact split of a goodput difference into terms (docs/timeline.md, "Why two runs differ").

Time terms. Over a window of length L, each of a run's n streams spends the whole window in one of
these: before its first or after its last data frame (`outside`), in intervals between data
frames shorter than the gap threshold (`sending`), or in a long gap of one cause (hostwire gaps:
the causes add up to the gap). Summed over the streams, the components T_k add up to n L, so with
B the payload bytes and tau_k = T_k / B the stream-time per byte,

    G = 8 B / L = 8 n / tau,   tau = sum_k tau_k.

CPU terms. The senders' tasks ran C ns in the window (granted by the scheduler and the quota),
spent as user time, time in their I/O calls and the network's softirqs that ran in their tasks:
C = C_user + C_call + C_softirq. With u = C / L and c_k = C_k / B,

    G = 8 u / c,   c = sum_k c_k.

Both are G = 8 x / y with y a sum. Between sides A and B the difference splits exactly, the two
orders of change averaged (a two-factor Shapley split, so A and B play the same part):

    G_B - G_A = 4 (x_B - x_A)(1/y_A + 1/y_B) - sum_k 4 (x_A + x_B)(y_k,B - y_k,A) / (y_A y_B).

Several repetitions of one side are pooled: their components and bytes summed, x weighted by
window (n: sum n_r L_r / sum L_r), so that G is their mean goodput when the windows are equal.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

BITS = 8e9  # bytes per ns to bit/s

TIME_PARTS = ("outside", "sending")  # the stream-time that is not a long gap's


@dataclass
class Facts:
    """What one run gives the split: its window, its payload bytes, its streams and their
    stream-time by component; and where the kernel trace had them, the senders' CPU by kind and
    the network's softirq time in other tasks (which no quota charges to the senders)."""

    window_ns: float
    bytes: float
    streams: int
    time_ns: dict[str, float]  # component -> stream-time summed over the streams (adds up to streams x window)
    cpu_ns: dict[str, float] | None = None  # user, call, softirq: the senders' tasks' CPU (adds up to their run time)
    uncharged_ns: float = math.nan  # the network's softirqs run in other tasks (idle, the receiver, ...)
    per_cpu: dict[str, dict[str, float]] = field(default_factory=dict)  # cpu -> softirq_senders/_other, steal ns
    label: str = ""
    cpu_missing: str = ""  # why cpu_ns is None

    @property
    def goodput_bit_s(self) -> float:
        return BITS * self.bytes / self.window_ns if self.window_ns > 0 else math.nan


@dataclass
class Term:
    term: str
    group: str  # time or cpu
    a: float  # the side's factor: streams, CPU share, or ns per byte
    b: float
    delta_bit_s: float
    share: float = math.nan  # of the goodput change
    noise: bool | None = None  # None: no repetitions to tell


def pooled(sides: Sequence[Facts], group: str) -> tuple[float, dict[str, float]]:
    """x and the y_k of G = 8 x / sum y_k for repetitions of one side (module docstring)."""
    window = sum(f.window_ns for f in sides)
    nbytes = sum(f.bytes for f in sides)
    if group == "time":
        x = sum(f.streams * f.window_ns for f in sides) / window
        keys = list(sides[0].time_ns)
        return x, {k: sum(f.time_ns.get(k, 0.0) for f in sides) / nbytes for k in keys}
    cpu = [f.cpu_ns or {} for f in sides]
    keys = list(cpu[0])
    run_ns = sum(sum(c.values()) for c in cpu)
    return run_ns / window, {k: sum(c.get(k, 0.0) for c in cpu) / nbytes for k in keys}


def split(x_a: float, y_a: dict[str, float], x_b: float, y_b: dict[str, float], group: str,
          x_name: str) -> list[Term]:
    """The terms of G_B - G_A for G = 8 x / sum(y): x's and each y_k's (module docstring)."""
    sa, sb = sum(y_a.values()), sum(y_b.values())
    out = [Term(x_name, group, x_a, x_b, BITS / 2 * (x_b - x_a) * (1 / sa + 1 / sb))]
    for k in y_a:
        out.append(Term(k, group, y_a[k], y_b.get(k, 0.0),
                        -BITS / 2 * (x_a + x_b) * (y_b.get(k, 0.0) - y_a[k]) / (sa * sb)))
    return out


def run_factor(f: Facts, group: str, term: str) -> float:
    """One repetition's own factor of a term (what its noise test compares)."""
    if group == "time":
        return float(f.streams) if term == "streams" else f.time_ns.get(term, 0.0) / f.bytes
    cpu = f.cpu_ns or {}
    return sum(cpu.values()) / f.window_ns if term == "cpu-granted" else cpu.get(term, 0.0) / f.bytes


def decompose(a: Sequence[Facts], b: Sequence[Facts]) -> list[Term]:
    """Every term of the difference between side A's repetitions and side B's: the time group,
    and the CPU group where both sides have the senders' CPU. Each group adds up to the
    difference of the pooled goodputs."""
    terms = split(*pooled(a, "time"), *pooled(b, "time"), "time", "streams")
    if all(f.cpu_ns for f in (*a, *b)) and all(sum((f.cpu_ns or {}).values()) > 0 for f in (*a, *b)):
        terms += split(*pooled(a, "cpu"), *pooled(b, "cpu"), "cpu", "cpu-granted")
    change = goodput(b) - goodput(a)
    for t in terms:
        t.share = t.delta_bit_s / change if change else math.nan
    return terms


def goodput(sides: Sequence[Facts]) -> float:
    """The pooled goodput of one side's repetitions: bytes over window, summed."""
    return BITS * sum(f.bytes for f in sides) / sum(f.window_ns for f in sides)


def uncharged_per_byte(sides: Sequence[Facts]) -> float:
    """The network's softirq time run outside the senders' tasks, ns per byte (NaN without it)."""
    if any(math.isnan(f.uncharged_ns) for f in sides):
        return math.nan
    return sum(f.uncharged_ns for f in sides) / sum(f.bytes for f in sides)
