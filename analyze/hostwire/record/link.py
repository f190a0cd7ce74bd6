"""The emulated link as parameters (rate, shaper, queue): what a run point names. Pure values, no
commands: hostwire.record.topology installs a LinkSpec (rates and CPU lists are parsed by
hostwire.units)."""

from __future__ import annotations

from dataclasses import dataclass

from hostwire.errors import UsageError
from hostwire.units import parse_rate


@dataclass(frozen=True)
class LinkSpec:
    """The emulated link on the sender's egress.

    qdisc: 'tbf-peak' (default: a token bucket of exactly one frame plus a peak-rate bucket of one
    frame at peak_ppm above the rate, so a late timer can never send a catch-up burst), 'tbf' (a
    1600-byte bucket, no peak rate: late timers let it send frames closer than the line allows),
    'htb' (one class, rate = ceil; sends bursts on this kernel), or 'none' (the bare veth).
    Measured at 10 Mbit/s with a 10 s bulk TCP transfer, see capture/README.md. burst: bucket
    bytes (None: 1600 for tbf and htb, frame_bytes for tbf-peak). frame_bytes: the largest frame as
    the qdisc counts it (Ethernet header + MTU 1500)."""

    rate: str = "10mbit"
    qdisc: str = "tbf-peak"
    burst: int | None = None
    peak_ppm: int = 1
    frame_bytes: int = 1514
    htb_quantum: int | None = None
    queue_frames: int | None = None  # the tbf queue in full frames (None: what 50 ms at the rate holds)

    def tc_args(self, dev: str) -> list[list[str]]:
        """The `tc` command lines (without 'tc') that install this shaper on dev."""
        if self.qdisc == "none":
            return []
        rate_bit_s = parse_rate(self.rate)
        if self.queue_frames is not None and not (isinstance(self.queue_frames, int) and self.queue_frames >= 1):
            raise UsageError(f"link queue {self.queue_frames!r}: expected a whole number of frames, 1 or more")
        queue = (["limit", str(self.queue_frames * self.frame_bytes)] if self.queue_frames is not None
                 else ["latency", "50ms"])
        burst = self.burst if self.burst is not None else (self.frame_bytes if self.qdisc == "tbf-peak" else 1600)
        if self.qdisc == "tbf":
            # A bucket of about one frame: back-to-back frames leave at the line rate.
            return [["qdisc", "add", "dev", dev, "root", "handle", "1:", "tbf", "rate",
                     str(rate_bit_s) + "bit", "burst", str(burst), *queue]]
        if self.qdisc == "tbf-peak":
            # The peak bucket holds one frame and refills just above the rate: two frames can
            # never leave closer than about one frame time, however late the watchdog fires.
            peak = rate_bit_s + max(8, rate_bit_s * self.peak_ppm // 1_000_000)  # > rate in bytes/s
            return [["qdisc", "add", "dev", dev, "root", "handle", "1:", "tbf", "rate",
                     str(rate_bit_s) + "bit", "burst", str(burst), *queue,
                     "peakrate", str(peak) + "bit", "mtu", str(self.frame_bytes)]]
        if self.qdisc == "htb":
            cls = ["class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb", "rate",
                   str(rate_bit_s) + "bit", "ceil", str(rate_bit_s) + "bit", "burst", str(burst),
                   "cburst", str(burst)]
            if self.htb_quantum:
                cls += ["quantum", str(self.htb_quantum)]
            return [["qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "1"], cls]
        raise UsageError(f"link qdisc {self.qdisc!r}: expected tbf, tbf-peak, htb or none")
