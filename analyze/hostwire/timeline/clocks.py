"""The receiver's clock mapped onto the run's (the sender host's CLOCK_MONOTONIC): offset and drift
from the clock exchanges of raw/bench/main.tsv, bounded by the run's own traffic (DESIGN.md
section 4). offset(t) = receiver clock - sender clock at sender time t, modelled as a line
offset_ns + drift * (t - t_ref_ns).

Constraints, each a point (t, value):
- upper bounds: an exchange's t2 - t1 (the request arrives after it is sent) and, for every
  receiver read, r - t_send: the read at receiver stamp r returned bytes that the frame carrying
  their last byte, on the wire at t_send, brought (a segment is received after it is sent);
- lower bounds: an exchange's t3 - t4 (the answer is received after it is sent).

The line: through the start and end exchanges' minimum-round-trip estimates when the end's round
trip is near the start's (at most twice it plus 100 us); else the start's estimate with the drift
of the lower convex hull of the traffic's upper bounds (the edge under the bounds' mean time: the
line that stays below every bound with the least total slack, the convex-hull method). The line
is then lowered by its largest violation of an upper bound, so no frame arrives before it was
sent. The bound: with that drift, the offset at t_ref_ns lies in [bound_lo_ns, bound_hi_ns] (the
tightest lower and upper constraints); bound_ns is the larger distance from the estimate to
either end."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from hostwire.errors import InputError

END_RTT_FACTOR = 2.0
END_RTT_SLACK_NS = 100_000
READ_CALLS = ("read", "readv", "recvfrom", "recvmsg")


@dataclass(frozen=True)
class ClockFit:
    """offset(t) = offset_ns + drift_ppm * 1e-6 * (t - t_ref_ns), receiver minus sender, ns."""

    t_ref_ns: int
    offset_ns: float
    drift_ppm: float
    method: str            # "exchanges" or "traffic-hull"
    bound_lo_ns: float     # the tightest lower constraint at t_ref_ns (with this drift)
    bound_hi_ns: float     # the tightest upper constraint at t_ref_ns
    bound_ns: float        # max distance from offset_ns to either end
    lowered_ns: float      # how far the traffic lowered the line (0 when it violated no bound)
    reads: int             # receiver reads used as bounds
    start_rtt_ns: int
    end_rtt_ns: int | None

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
    # every upper constraint, moved to t_s along the drift
    up_t = np.concatenate([sync["t1_ns"].to_numpy().astype(np.float64), tb.astype(np.float64)])
    up_v = np.concatenate([(sync["t2_ns"] - sync["t1_ns"]).to_numpy().astype(np.float64), ub])
    lo_t = sync["t4_ns"].to_numpy().astype(np.float64)
    lo_v = (sync["t3_ns"] - sync["t4_ns"]).to_numpy().astype(np.float64)
    hi = float(np.min(up_v - drift * (up_t - t_s)))
    lo = float(np.max(lo_v - drift * (lo_t - t_s)))
    lowered = max(0.0, o_s - hi)
    offset = o_s - lowered
    return ClockFit(t_ref_ns=t_s, offset_ns=offset, drift_ppm=drift * 1e6, method=method, bound_lo_ns=lo,
                    bound_hi_ns=hi, bound_ns=max(offset - lo, hi - offset), lowered_ns=lowered,
                    reads=int(len(tb)), start_rtt_ns=int(start["rtt_ns"]),
                    end_rtt_ns=None if end is None else int(end["rtt_ns"]))


def bytes_before(logged: np.ndarray, logged_t: np.ndarray, traced: np.ndarray, traced_t: np.ndarray,
                 probe: int = 32) -> int | None:
    """Bytes a receiver read before its first logged read: the position where the logged reads
    occur in the tracer's reads of the receiver (the same reads, counted from the connection's
    start). Sizes alone repeat (full segments), so among the positions where the first `probe`
    sizes match, the one whose stamps differ from the logged ones by the most constant amount (the
    two clocks' offset) is taken. None when the sizes occur nowhere."""
    n = min(len(logged), probe)
    if n == 0 or len(traced) < n:
        return None
    sizes = np.lib.stride_tricks.sliding_window_view(traced, n)
    match = (sizes == logged[:n]).all(axis=1)
    if not match.any():
        return None
    stamps = np.lib.stride_tricks.sliding_window_view(traced_t.astype(np.int64), n)
    diff = logged_t[:n].astype(np.int64)[None, :] - stamps
    spread = np.where(match, diff.max(axis=1) - diff.min(axis=1), np.iinfo(np.int64).max)
    return int(traced[: int(np.argmin(spread))].sum())


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
