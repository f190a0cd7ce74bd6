"""Clocks across real hosts (docs/hosts.md): every host's stamps onto the sender's, by two
independent methods.

- `udp`: hw-bench's clock exchanges between the sender and the receiver (raw/bench/main.tsv):
  the offset and drift of the receiver's user-space CLOCK_MONOTONIC, bounded by the round trips
  (hostwire.timeline.clocks.fit without the traffic's bounds).
- `traffic`: the same TCP frames captured on the sender and on another host. A frame toward the
  receiver is stamped on the sender before the other host sees it (an upper bound on the other's
  capture clock minus the sender's), a frame from the receiver after (a lower bound); the lines
  meeting every bound lie between two convex hulls (Trace Compass's convex-hull synchronisation).
  It aligns the kernels' capture clocks (CLOCK_REALTIME stamps of libpcap).

A host's wirecap.json pairs its CLOCK_REALTIME with its CLOCK_MONOTONIC (read together in user
space), so the traffic's offset also maps that host's user-space monotonic clock: both methods
then speak of the same offset, and the tighter bound wins."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from hostwire.timeline.clocks import ClockFit, FitRegion

KEY = ["src", "dst", "sport", "dport", "seq", "ack", "flags", "payload_len", "window"]


@dataclass(frozen=True)
class HullFit:
    """other - sender = offset_ns + drift_ppm * 1e-6 * (t - t_ref_ns), t on the sender's stamp."""

    t_ref_ns: int
    offset_ns: float
    drift_ppm: float
    bound_ns: float   # the largest error of the line over the span if every bound holds; NaN: they cross
    upper: int        # frames toward the receiver matched on both captures
    lower: int        # frames from the receiver matched on both captures
    crossed_ns: float = 0.0

    def as_dict(self) -> dict:
        return asdict(self)


def _unique(frames: pd.DataFrame) -> pd.DataFrame:
    """Frames keyed by their headers; keys seen twice in one capture (a retransmission, a repeated
    acknowledgment) are ambiguous and left out."""
    df = frames.loc[frames["proto"].to_numpy() == 6, [*KEY, "t_pcap_ns" if "t_pcap_ns" in frames else "t_ns"]]
    df = df.rename(columns={"t_pcap_ns": "t", "t_ns": "t"})
    df = df.astype({"src": str, "dst": str})
    return df.drop_duplicates(subset=KEY, keep=False)


def traffic_fit(sender_frames: pd.DataFrame, other_frames: pd.DataFrame, receiver_address: str) -> HullFit | None:
    """The other capture's clock against the sender's from the frames both saw (raw stamps). None
    when there are no bounds on both sides."""
    both = _unique(sender_frames).merge(_unique(other_frames), on=KEY, suffixes=("_s", "_o"))
    if both.empty:
        return None
    t_s = both["t_s"].to_numpy().astype(np.int64)
    diff = (both["t_o"].to_numpy().astype(np.int64) - t_s).astype(np.float64)
    toward = both["dst"].to_numpy() == receiver_address
    if not toward.any() or toward.all():
        return None
    t_ref = int(t_s.min())
    x = (t_s - t_ref).astype(np.float64)
    region = FitRegion(x[toward], diff[toward], x[~toward], diff[~toward])
    drift, width = region.widest()
    if width < 0:
        offset = region.hi(drift)
        return HullFit(t_ref, offset, drift * 1e6, float("nan"), int(toward.sum()), int((~toward).sum()), -width)
    offset = (region.lo(drift) + region.hi(drift)) / 2
    drifts = region.drifts(drift)
    bound = 0.0
    for at in (float(x.min()), float(x.max())):
        low, high = region.extent(at, drifts)
        y = offset + drift * at
        bound = max(bound, y - low, high - y)
    return HullFit(t_ref, offset, drift * 1e6, bound, int(toward.sum()), int((~toward).sum()))


def realtime_minus_monotonic(pairs: list[dict]) -> float:
    """A host's CLOCK_REALTIME minus its CLOCK_MONOTONIC, from its wirecap.json pairs (their mean)."""
    return float(np.mean([int(p["realtime_ns"]) - int(p["monotonic_ns"]) for p in pairs]))


def monotonic_offset(fit: HullFit, sender_pairs: list[dict], other_pairs: list[dict]) -> float:
    """The traffic's offset as other's CLOCK_MONOTONIC minus the sender's, at the fit's t_ref."""
    return fit.offset_ns - realtime_minus_monotonic(other_pairs) + realtime_minus_monotonic(sender_pairs)


def pairs_onto_sender(fit: HullFit, sender_pairs: list[dict]) -> list[dict]:
    """(the other host's CLOCK_REALTIME, the sender's CLOCK_MONOTONIC) pairs: a capture of the other
    host read with these lands on the sender's clock."""
    out = []
    for pair in sender_pairs:
        real_s = int(pair["realtime_ns"])
        real_o = real_s + fit.offset_ns + fit.drift_ppm * 1e-6 * (real_s - fit.t_ref_ns)
        out.append({"realtime_ns": int(round(real_o)), "monotonic_ns": int(pair["monotonic_ns"])})
    return out


def chosen_receiver_fit(manifest: dict) -> ClockFit | None:
    """The receiver's clock of a run on real hosts as the timeline's ClockFit, when the manifest's
    clocks chose the traffic method for it (its line through the hosts' realtime/monotonic pairs,
    on the sender's CLOCK_MONOTONIC); None otherwise (the receiver's own exchanges then fit it)."""
    hosts, clocks = manifest.get("hosts"), manifest.get("clocks")
    if not isinstance(hosts, dict) or not isinstance(clocks, dict):
        return None
    role = next((r for r, h in hosts.items() if isinstance(h, dict) and "receiver" in (h.get("roles") or [])), None)
    entry = clocks.get(role) if role is not None else None
    if not isinstance(entry, dict) or entry.get("chosen") != "traffic" or "t_ref_monotonic_ns" not in entry["traffic"]:
        return None
    line, udp = entry["traffic"], entry.get("udp") or {}
    offset, bound = line["monotonic_offset_us"] * 1e3, line["bound_us"] * 1e3
    end_rtt = udp.get("end_rtt_us")
    return ClockFit(t_ref_ns=int(line["t_ref_monotonic_ns"]), offset_ns=offset, drift_ppm=line["drift_ppm"],
                    method="hosts-traffic", bound_lo_ns=offset - bound, bound_hi_ns=offset + bound, bound_ns=bound,
                    lowered_ns=0.0, reads=0, start_rtt_ns=int(udp.get("start_rtt_us", 0) * 1e3),
                    end_rtt_ns=None if end_rtt is None else int(end_rtt * 1e3),
                    crossed_ns=line.get("crossed_us", 0.0) * 1e3)
