"""The emulated link as parameters (rate, shaper, queue) and the parsers of rates and CPU lists: what
a run point names. Pure values, no commands: hostwire.topology installs a LinkSpec, and readers of
a recorded run parse its rate and CPU lists from here without importing the recording side."""

from __future__ import annotations

import re
from dataclasses import dataclass

from hostwire.errors import UsageError

_RATE_UNITS = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9}


def parse_rate(text: str) -> int:
    """'10mbit' -> 10_000_000 bit/s (tc's units: bit, kbit, mbit, gbit)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmg]?bit)\s*", text.lower())
    if not match:
        raise UsageError(f"link rate {text!r}: expected a number and a unit, e.g. 10mbit")
    return int(float(match.group(1)) * _RATE_UNITS[match.group(2)])


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
        rate_bit = parse_rate(self.rate)
        if self.queue_frames is not None and not (isinstance(self.queue_frames, int) and self.queue_frames >= 1):
            raise UsageError(f"link queue {self.queue_frames!r}: expected a whole number of frames, 1 or more")
        queue = (["limit", str(self.queue_frames * self.frame_bytes)] if self.queue_frames is not None
                 else ["latency", "50ms"])
        burst = self.burst if self.burst is not None else (self.frame_bytes if self.qdisc == "tbf-peak" else 1600)
        if self.qdisc == "tbf":
            # A bucket of about one frame: back-to-back frames leave at the line rate.
            return [["qdisc", "add", "dev", dev, "root", "handle", "1:", "tbf", "rate",
                     str(rate_bit) + "bit", "burst", str(burst), *queue]]
        if self.qdisc == "tbf-peak":
            # The peak bucket holds one frame and refills just above the rate: two frames can
            # never leave closer than about one frame time, however late the watchdog fires.
            peak = rate_bit + max(8, rate_bit * self.peak_ppm // 1_000_000)  # > rate in bytes/s
            return [["qdisc", "add", "dev", dev, "root", "handle", "1:", "tbf", "rate",
                     str(rate_bit) + "bit", "burst", str(burst), *queue,
                     "peakrate", str(peak) + "bit", "mtu", str(self.frame_bytes)]]
        if self.qdisc == "htb":
            cls = ["class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb", "rate",
                   str(rate_bit) + "bit", "ceil", str(rate_bit) + "bit", "burst", str(burst),
                   "cburst", str(burst)]
            if self.htb_quantum:
                cls += ["quantum", str(self.htb_quantum)]
            return [["qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "1"], cls]
        raise UsageError(f"link qdisc {self.qdisc!r}: expected tbf, tbf-peak, htb or none")


def parse_cpu_list(text: str) -> list[int]:
    """'0', '0,2', '1-3' -> CPU numbers."""
    cpus: list[int] = []
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        if not re.fullmatch(r"\d+(-\d+)?", part):
            raise UsageError(f"CPU list {text!r}: expected numbers and ranges like 0,2-3")
        lo, _, hi = part.partition("-")
        cpus.extend(range(int(lo), int(hi or lo) + 1))
    return cpus
