"""The rate that bounds a recorded run's wire: one rule for every reader (the metrics, the sanity
checks, the gap causes, the campaign summary), from the run's manifest.

- A rate given on the command line (`--link-rate`, parsed once by `given_rate`) wins.
- A shaped link (`link_qdisc` tbf, tbf-peak or htb): the point's `link_rate`, enforced.
- No shaper (`link_qdisc = "none"`): the interface's own speed, as the runner recorded it in the
  host facts. A veth pair has only a nominal speed (10 Gbit/s) and moves frames as fast as the
  CPU hands them over, so nothing there bounds the intervals or the goodput: the rate is not
  enforced, and no check holds a run against it. A physical interface enforces its speed.
- A program recorded by `hostwire record`: the rate it found (--link-rate, a shaping qdisc, the
  interface's speed; docs/record.md).
- A loopback run, or a manifest that names no rate: the point's rate (else 10 Mbit/s) as a guess,
  not enforced.

Where a number is needed although nothing enforces it (a frame's time on the wire in the gap
rules), `bit_s` is the best figure there is; `enforced` says whether checks may use it. A rate
travels as a LinkRate from where it is found to every rule that uses it; its unit is bit/s."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hostwire.units import parse_rate

GUESSED_RATE = "10mbit"
UNSHAPED_QDISCS = ("none",)
NOMINAL_ONLY_DRIVERS = ("veth",)  # interfaces whose speed is a label, not a line rate


@dataclass(frozen=True)
class LinkRate:
    bit_s: int
    enforced: bool  # something on the path holds the wire to bit_s: checks may judge against it
    source: str     # "option", "shaper", "interface", "interface-nominal", "unshaped", "guess"

    @property
    def unbounded(self) -> bool:
        """Known to run on a link that nothing shapes and whose speed is no line rate (a veth
        pair without a qdisc): no frame interval is impossible there, no goodput too high."""
        return self.source in ("interface-nominal", "unshaped")

    def describe(self) -> str:
        what = {"option": "given with --link-rate", "shaper": "the run's shaper",
                "interface": "the interface's speed", "interface-nominal": "the interface's nominal speed",
                "unshaped": "no shaper, the point's rate", "guess": "a guess"}[self.source]
        return f"{self.bit_s / 1e6:g} Mbit/s ({what}{'' if self.enforced else ', not enforced'})"


def given_rate(text: str) -> LinkRate:
    """The rate the command line gives (--link-rate 10mbit): enforced, from the option."""
    return LinkRate(parse_rate(text), True, "option")


def link_rate(manifest: Mapping[str, Any] | None, given: LinkRate | None = None) -> LinkRate:
    """The run's link rate by the rules above (`given`: the command line's --link-rate, which
    wins). A manifest that holds only a point (a set-up of the model) takes the point's rules."""
    if given is not None:
        return given
    point = manifest.get("point") if isinstance(manifest, Mapping) else None
    if not isinstance(point, Mapping):
        return LinkRate(parse_rate(GUESSED_RATE), False, "guess")
    if point.get("kind") == "program":  # hostwire record: the rate it found (hostwire.record.netlink_facts)
        bit_s, source = point.get("link_rate_bps"), str(point.get("link_rate_source", "unknown"))
        if not isinstance(bit_s, int) or bit_s <= 0:
            return LinkRate(parse_rate(GUESSED_RATE), False, "guess")
        return LinkRate(bit_s, source in ("option", "shaper", "interface"),
                        source if source in ("option", "shaper", "interface", "interface-nominal") else "guess")
    configured = point.get("link_rate")
    rate = parse_rate(str(configured)) if configured else parse_rate(GUESSED_RATE)
    if point.get("topology") == "loopback" or not configured:
        return LinkRate(rate, False, "guess")
    if str(point.get("link_qdisc", "")) in UNSHAPED_QDISCS:
        host = manifest.get("host") if isinstance(manifest, Mapping) else None
        speed = host.get("interface_speed_bps") if isinstance(host, Mapping) else None
        if not isinstance(speed, int) or speed <= 0:
            return LinkRate(rate, False, "unshaped")  # recorded before the runner noted the speed
        nominal = str(host.get("interface_driver", "")) in NOMINAL_ONLY_DRIVERS
        return LinkRate(speed, not nominal, "interface-nominal" if nominal else "interface")
    return LinkRate(rate, True, "shaper")
