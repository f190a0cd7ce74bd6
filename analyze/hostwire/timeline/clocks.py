"""The receiver's clock mapped onto the run's (the sender host's CLOCK_MONOTONIC): offset and drift
from the clock exchanges of raw/bench/main.tsv, bounded by the run's own traffic (DESIGN.md
section 4). offset(t) = receiver clock - sender clock at sender time t, modelled as a line
offset_ns + drift * (t - t_ref_ns).

Constraints, each a point (t, value):
- upper bounds: an exchange's t2 - t1 (the request arrives after it is sent) and, for every
  receiver read, r - t_send: the read at receiver stamp r returned bytes that the frame carrying
  their last byte, on the wire at t_send, brought (a segment is received after it is sent);
- lower bounds: an exchange's t3 - t4 (the answer is received after it is sent).
The lines that meet them all, the feasible region, lie between the lower convex hull of the
upper bounds and the upper convex hull of the lower bounds (the convex-hull method).

The line: through the start and end exchanges' minimum-round-trip estimates when the end's round
trip is near the start's (at most twice it plus 100 us); else the start's estimate with the drift
of the lower convex hull of the traffic's upper bounds (the edge under the bounds' mean time: the
line that stays below every bound with the least total slack). A line outside the feasible region
is replaced by the feasible line nearest it: for the exchanges, the least-squares one, each
exchange's miss counted in its own half round trip (an exchange whose request waited in the
receiver has a longer round trip and moves more than a prompt one, so a late end estimate tilts
the line instead of lowering it all); for the traffic's drift, the nearest feasible drift, then the
nearest feasible offset at t_ref_ns. So no frame arrives before it was sent, nor an answer.

The bound: bound_ns is the largest distance, over the constraints' span, between the line and any
line of the feasible region: the largest error the line can have when every constraint holds.
When no line meets every constraint (a stamp or a byte count is wrong: crossed_ns > 0, by how much
the least crossing line misses), the line is the least crossing one, moved under every upper bound,
and bound_ns is NaN: the constraints bound nothing."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from hostwire.errors import InputError

END_RTT_FACTOR = 2.0
END_RTT_SLACK_NS = 100_000
READ_CALLS = ("read", "readv", "recvfrom", "recvmsg")
ALIGN_DRIFT = 500e-6        # bytes_before: the most two clocks drift apart within its probe
ALIGN_SLACK_NS = 1_000
MAX_DRIFT = 1e-3            # the drifts the feasible region is searched in: +-1000 ppm


@dataclass(frozen=True)
class ClockFit:
    """offset(t) = offset_ns + drift_ppm * 1e-6 * (t - t_ref_ns), receiver minus sender, ns."""

    t_ref_ns: int
    offset_ns: float
    drift_ppm: float
    method: str            # "exchanges" or "traffic-hull"
    bound_lo_ns: float     # the tightest lower constraint at t_ref_ns (with this drift)
    bound_hi_ns: float     # the tightest upper constraint at t_ref_ns (with this drift)
    bound_ns: float        # the largest error over the span if every constraint holds; NaN when they cross
    lowered_ns: float      # the start exchange's estimate minus offset_ns (negative: raised)
    reads: int             # receiver reads used as bounds
    start_rtt_ns: int
    end_rtt_ns: int | None
    crossed_ns: float = 0.0  # by how much the least crossing line misses a constraint (0: a line meets all)

    def offset_at(self, t_ns: np.ndarray) -> np.ndarray:
        t = np.asarray(t_ns, dtype=np.float64)
        return self.offset_ns + self.drift_ppm * 1e-6 * (t - self.t_ref_ns)

    def to_sender(self, t_raw_ns: np.ndarray) -> np.ndarray:
        """Receiver stamps onto the sender's clock: solve t + offset(t) = t_raw for t."""
        raw = np.asarray(t_raw_ns, dtype=np.float64)
        d = self.drift_ppm * 1e-6
        t = (raw - self.offset_ns + d * self.t_ref_ns) / (1.0 + d)
        return np.rint(t).astype(np.int64)

    def as_dict(self) -> dict:
        return asdict(self)


def _best(sync: pd.DataFrame, phase: str) -> pd.Series | None:
    rows = sync[sync["phase"].astype(str).to_numpy() == phase]
    if len(rows) == 0:
        return None
    return rows.loc[rows["rtt_ns"].idxmin()]


def read_bounds(frames: pd.DataFrame, reads: pd.DataFrame) -> pd.DataFrame:
    """Per receiver read: t_send_ns (when the frame carrying the last byte it returned first went on
    the wire) and the upper bound r - t_send on the offset. frames: stream, t_ns, seq_end (relative
    to the stream's first byte); reads: stream, t_raw_ns, upto_bytes (the stream's bytes read
    through this read). Reads whose bytes no frame carried are left out."""
    out = []
    for name, r in reads.groupby("stream", sort=False):
        f = frames[frames["stream"].astype(str).to_numpy() == str(name)].sort_values("t_ns", kind="stable")
        if len(f) == 0:
            continue
        reach = np.maximum.accumulate(f["seq_end"].to_numpy().astype(np.int64))
        idx = np.searchsorted(reach, r["upto_bytes"].to_numpy().astype(np.int64), side="left")
        ok = idx < len(f)
        t_send = f["t_ns"].to_numpy()[np.minimum(idx, len(f) - 1)]
        out.append(pd.DataFrame({"stream": str(name), "t_send_ns": t_send[ok],
                                 "t_raw_ns": r["t_raw_ns"].to_numpy()[ok],
                                 "upper_ns": (r["t_raw_ns"].to_numpy() - t_send)[ok]}))
    if not out:
        return pd.DataFrame(columns=["stream", "t_send_ns", "t_raw_ns", "upper_ns"])
    return pd.concat(out, ignore_index=True)


def hull_slope(t: np.ndarray, v: np.ndarray) -> float:
    """Slope of the lower convex hull edge of the points (t, v) under their mean t: the line below
    every point whose total distance to them is least."""
    order = np.lexsort((v, t))
    t, v = t[order].astype(np.float64), v[order].astype(np.float64)
    hull: list[int] = []
    for i in range(len(t)):  # monotone chain over a few hundred candidates (_candidates)
        while len(hull) >= 2:
            a, b = hull[-2], hull[-1]
            if (t[b] - t[a]) * (v[i] - v[a]) - (v[b] - v[a]) * (t[i] - t[a]) <= 0:
                hull.pop()
            else:
                break
        hull.append(i)
    if len(hull) < 2:
        return 0.0
    ht = t[hull]
    k = int(np.clip(np.searchsorted(ht, t.mean()), 1, len(hull) - 1))
    a, b = hull[k - 1], hull[k]
    return float((v[b] - v[a]) / (t[b] - t[a])) if t[b] != t[a] else 0.0


def _candidates(t: np.ndarray, v: np.ndarray, bins: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """The lowest point of each of `bins` time bins, for the hull's chain to walk few points: the
    lower hull of these lies on or above the true one by at most the bounds' rise within a bin."""
    if len(t) <= bins:
        return t, v
    edges = np.linspace(t.min(), t.max(), bins + 1)
    b = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, bins - 1)
    order = np.lexsort((v, b))
    first = np.ones(len(order), dtype=bool)
    first[1:] = b[order][1:] != b[order][:-1]
    keep = order[first]
    return t[keep], v[keep]


def _hull(x: np.ndarray, v: np.ndarray, lower: bool) -> tuple[np.ndarray, np.ndarray]:
    """The lower (or upper) convex hull of the points (x, v), as far as lines of drift within
    +-MAX_DRIFT can touch it: of the points of one time bin of width h, only those within
    MAX_DRIFT * h of the bin's lowest (highest) can be the lowest (highest) under such a line, so
    the chain walks those alone."""
    sign = 1.0 if lower else -1.0
    x, v = x.astype(np.float64), sign * v.astype(np.float64)
    if len(x) > 1024:
        edges = np.linspace(x.min(), x.max(), 1025)
        b = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, 1023)
        low = np.full(1024, np.inf)
        np.minimum.at(low, b, v)
        keep = v <= low[b] + MAX_DRIFT * (edges[1] - edges[0])
        x, v = x[keep], v[keep]
    order = np.lexsort((v, x))
    x, v = x[order], v[order]
    hull: list[int] = []
    for i in range(len(x)):
        while len(hull) >= 2:
            a, c = hull[-2], hull[-1]
            if (x[c] - x[a]) * (v[i] - v[a]) - (v[c] - v[a]) * (x[i] - x[a]) <= 0:
                hull.pop()
            else:
                break
        hull.append(i)
    return x[hull], sign * v[hull]


class FitRegion:
    """The lines a + b * x meeting every constraint (x: time since t_ref): upper points (ux, uv)
    with a + b * ux <= uv, lower points (lx, lv) with a + b * lx >= lv, b within +-MAX_DRIFT.
    For a drift b the offsets a lie in [lo(b), hi(b)]; hi is concave in b, lo convex, so their
    difference (the width) is concave and has one maximum."""

    def __init__(self, ux: np.ndarray, uv: np.ndarray, lx: np.ndarray, lv: np.ndarray) -> None:
        self.ux, self.uv = _hull(ux, uv, lower=True)
        self.lx, self.lv = _hull(lx, lv, lower=False)

    def hi(self, b: float) -> float:
        return float(np.min(self.uv - b * self.ux))

    def lo(self, b: float) -> float:
        return float(np.max(self.lv - b * self.lx))

    def widest(self) -> tuple[float, float]:
        """The drift where the offsets' range is widest, and that width (< 0: no line meets all)."""
        b = _ternary(lambda d: self.hi(d) - self.lo(d), -MAX_DRIFT, MAX_DRIFT, maximum=True)
        return b, self.hi(b) - self.lo(b)

    def drifts(self, widest: float) -> tuple[float, float]:
        """The feasible drifts (the region must not be empty): where the width is >= 0."""
        def edge(inside: float, outside: float) -> float:
            if self.hi(outside) - self.lo(outside) >= 0:
                return outside
            for _ in range(80):
                m = (inside + outside) / 2
                if self.hi(m) - self.lo(m) >= 0:
                    inside = m
                else:
                    outside = m
            return inside
        return edge(widest, -MAX_DRIFT), edge(widest, MAX_DRIFT)

    def extent(self, x: float, drifts: tuple[float, float]) -> tuple[float, float]:
        """The lowest and highest value at x of the region's lines."""
        top = _ternary(lambda b: self.hi(b) + b * x, *drifts, maximum=True)
        bottom = _ternary(lambda b: self.lo(b) + b * x, *drifts, maximum=False)
        return self.lo(bottom) + bottom * x, self.hi(top) + top * x


def _ternary(f: Callable[[float], float], lo: float, hi: float, maximum: bool, steps: int = 100) -> float:
    """The argument of the maximum (minimum) of a concave (convex) f on [lo, hi]."""
    sign = 1.0 if maximum else -1.0
    for _ in range(steps):
        m1, m2 = lo + (hi - lo) / 3, hi - (hi - lo) / 3
        if sign * f(m1) < sign * f(m2):
            lo = m1
        else:
            hi = m2
    return (lo + hi) / 2


def _nearest_to_exchanges(region: FitRegion, drifts: tuple[float, float], t_end: float, estimates: tuple[float, float],
                          halves: tuple[float, float]) -> tuple[float, float]:
    """The feasible line nearest the two exchanges' estimates (at x = 0 and x = t_end), each
    miss counted in units of that exchange's half round trip (the most its estimate can be off):
    least squares over the region. For a drift b the best offset is the weighted mean of what
    each estimate asks, clipped into [lo(b), hi(b)]; the least cost over b is convex (a convex cost
    minimised over a convex region), so a ternary search over the feasible drifts finds it."""
    (o_s, o_e), (w_s, w_e) = estimates, (1.0 / halves[0] ** 2, 1.0 / halves[1] ** 2)

    def best(b: float) -> tuple[float, float]:
        a = (w_s * o_s + w_e * (o_e - b * t_end)) / (w_s + w_e)
        a = min(max(a, region.lo(b)), region.hi(b))
        return a, w_s * (a - o_s) ** 2 + w_e * (a + b * t_end - o_e) ** 2

    b = _ternary(lambda d: best(d)[1], *drifts, maximum=False)
    return best(b)[0], b


def fit(sync: pd.DataFrame, bounds: pd.DataFrame) -> ClockFit:
    """The receiver clock's line from the exchanges (sync: phase, t1_ns..t4_ns, rtt_ns, offset_ns)
    and the traffic's upper bounds (read_bounds)."""
    for col in ("phase", "t1_ns", "t2_ns", "t3_ns", "t4_ns", "rtt_ns", "offset_ns"):
        if col not in sync.columns:
            raise InputError(f"clock exchanges: missing column {col}")
    start = _best(sync, "start")
    if start is None:
        raise InputError("clock exchanges: no exchange of phase start: the receiver's clock cannot be mapped")
    end = _best(sync, "end")
    t_s = int((int(start["t1_ns"]) + int(start["t4_ns"])) // 2)
    o_s = float(start["offset_ns"])
    trusted_end = end is not None and float(end["rtt_ns"]) <= END_RTT_FACTOR * float(start["rtt_ns"]) + END_RTT_SLACK_NS
    tb = bounds["t_send_ns"].to_numpy().astype(np.int64)
    ub = bounds["upper_ns"].to_numpy().astype(np.float64)
    t_e = 0
    if trusted_end:
        t_e = (int(end["t1_ns"]) + int(end["t4_ns"])) // 2
        drift = (float(end["offset_ns"]) - o_s) / (t_e - t_s) if t_e != t_s else 0.0
        method = "exchanges"
    elif len(tb) >= 2:
        ct, cv = _candidates(tb, ub)
        drift = hull_slope(ct, cv)
        method = "traffic-hull"
    else:
        drift = 0.0
        method = "exchanges"
    # every constraint, as (time since t_s, value)
    up_x = np.concatenate([sync["t1_ns"].to_numpy().astype(np.int64), tb]) - t_s
    up_v = np.concatenate([(sync["t2_ns"] - sync["t1_ns"]).to_numpy().astype(np.float64), ub])
    lo_x = sync["t4_ns"].to_numpy().astype(np.int64) - t_s
    lo_v = (sync["t3_ns"] - sync["t4_ns"]).to_numpy().astype(np.float64)
    region = FitRegion(up_x.astype(np.float64), up_v, lo_x.astype(np.float64), lo_v)
    widest, width = region.widest()
    offset, crossed, bound = o_s, 0.0, float("nan")
    if width < 0:
        # no line meets every constraint: the least crossing one, under every upper bound
        drift, crossed = widest, -width
        offset = region.hi(drift)
    else:
        drifts = region.drifts(widest)
        if not (drifts[0] <= drift <= drifts[1] and region.lo(drift) <= o_s <= region.hi(drift)):
            if trusted_end and t_e != t_s:
                offset, drift = _nearest_to_exchanges(region, drifts, float(t_e - t_s), (o_s, float(end["offset_ns"])),
                                                      (max(float(start["rtt_ns"]), 1.0) / 2, max(float(end["rtt_ns"]), 1.0) / 2))
            else:
                drift = min(max(drift, drifts[0]), drifts[1])
                offset = min(max(o_s, region.lo(drift)), region.hi(drift))
        # exactly inside (the bisections stop within a fraction of a nanosecond)
        offset = min(max(offset, region.lo(drift)), region.hi(drift))
        bound = 0.0
        for x in (float(min(up_x.min(), lo_x.min())), float(max(up_x.max(), lo_x.max()))):
            low, high = region.extent(x, drifts)
            y = offset + drift * x
            bound = max(bound, y - low, high - y)
    return ClockFit(t_ref_ns=t_s, offset_ns=offset, drift_ppm=drift * 1e6, method=method, bound_lo_ns=region.lo(drift),
                    bound_hi_ns=region.hi(drift), bound_ns=bound, lowered_ns=o_s - offset,
                    reads=int(len(tb)), start_rtt_ns=int(start["rtt_ns"]),
                    end_rtt_ns=None if end is None else int(end["rtt_ns"]), crossed_ns=crossed)


def bytes_before(logged: np.ndarray, logged_t: np.ndarray, traced: np.ndarray, traced_t: np.ndarray,
                 probe: int = 32) -> int | None:
    """Bytes a receiver read before its first logged read: the position where the logged reads
    occur in the tracer's reads of the receiver (the same reads, counted from the connection's
    start; traced_t their exits, ascending). Sizes alone repeat (full segments), so the stamps
    decide among the positions where the first `probe` sizes match. The receiver stamps a read
    after it returned and before it calls the next, so at the right position, with the two
    clocks' offset d, every logged stamp minus d lies between its read's exit and the next read's
    exit (within ALIGN_DRIFT times the probe's span). Where several positions meet that (reads that
    each wait about as long for data), the one where the typical stamp follows its read's exit by
    the least extra delay (the median beyond the least): most stamps come within a microsecond of
    the exit, but a preemption between a read's return and its stamp delays a few by up to tens of
    milliseconds, which made the spread of the differences (max - min) pick a position one read,
    or tens of reads, too far. When no position meets the condition (a read lost from the trace),
    the one that misses it least. None when the sizes occur nowhere."""
    n = min(len(logged), probe)
    if n == 0 or len(traced) < n:
        return None
    match = np.flatnonzero((np.lib.stride_tricks.sliding_window_view(traced, n) == logged[:n]).all(axis=1))
    if len(match) == 0:
        return None
    exits = traced_t.astype(np.int64)
    nexts = np.append(exits[1:], np.iinfo(np.int64).max // 4)  # the last read has no next
    at = match[:, None] + np.arange(n)[None, :]
    lt = logged_t[:n].astype(np.int64)[None, :]
    after = lt - exits[at]          # d <= these: each stamp after its read's exit
    before_next = lt - nexts[at]    # d > these: each stamp before the next read's exit
    slack = after.min(axis=1) - before_next.max(axis=1)
    tol = ALIGN_DRIFT * float(lt[0, -1] - lt[0, 0]) + ALIGN_SLACK_NS
    feasible = slack >= -tol
    if feasible.any():
        # how far the typical stamp follows its read's exit beyond the least such delay
        spread = np.median(after - after.min(axis=1, keepdims=True), axis=1)
        k = int(match[np.argmin(np.where(feasible, spread, np.inf))])
    else:
        k = int(match[np.argmax(slack)])
    return int(traced[:k].sum())


def bytes_before_from_traffic(frames: pd.DataFrame, reads: pd.DataFrame, offset_ns: float, margin_ns: float) -> int:
    """Without a trace of the receiver's reads: the most bytes it can have read before its first
    logged read such that each read's bytes were on the wire margin_ns before its stamp (mapped by
    offset_ns)."""
    f = frames.sort_values("t_ns", kind="stable")
    reach = np.maximum.accumulate(f["seq_end"].to_numpy().astype(np.int64))
    t = reads["t_raw_ns"].to_numpy().astype(np.float64) - offset_ns + margin_ns
    idx = np.searchsorted(f["t_ns"].to_numpy(), t, side="right") - 1
    sent = np.where(idx >= 0, reach[np.maximum(idx, 0)], 0)
    cum = np.cumsum(reads["bytes"].to_numpy().astype(np.int64))
    return int(max(0, (sent - cum).min()))
