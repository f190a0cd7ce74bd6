"""What `hostwire record` learns of the network namespace of the program it records: the
interfaces that are up, their MTUs, and the rate that bounds the wire (docs/record.md, "Link
rate"): --link-rate, else the rate of a shaping qdisc (tbf, htb) on a captured interface, else the
interface's speed, else unknown."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass, field
from typing import Any

from hostwire.errors import HostwireError, UsageError
from hostwire.linkrate import NOMINAL_ONLY_DRIVERS


@dataclass
class Interface:
    name: str
    index: int
    up: bool
    mtu: int
    loopback: bool


@dataclass
class LinkFacts:
    interfaces: list[Interface]
    rate_bit_s: int | None
    rate_source: str  # "option", "shaper", "interface", "interface-nominal", "unknown"
    qdiscs: dict[str, Any] = field(default_factory=dict)

    def as_manifest(self) -> dict[str, Any]:
        return {"interfaces": [vars(i) for i in self.interfaces], "rate_bps": self.rate_bit_s,
                "rate_source": self.rate_source, "qdiscs": self.qdiscs}


def _in_netns(netns: str | None, argv: list[str]) -> list[str]:
    return ["nsenter", f"--net={netns}", *argv] if netns else argv


def _json_of(netns: str | None, argv: list[str]) -> Any:
    try:
        proc = subprocess.run(_in_netns(netns, argv), capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise HostwireError(f"{' '.join(argv)}: {err}") from None
    if proc.returncode != 0:
        raise HostwireError(f"{' '.join(argv)}: {proc.stderr.strip() or f'exit {proc.returncode}'}")
    try:
        return json.loads(proc.stdout or "[]")
    except json.JSONDecodeError as err:
        raise HostwireError(f"{' '.join(argv)}: unreadable output: {err}") from None


def interfaces(netns: str | None) -> list[Interface]:
    """Every interface of the namespace (`netns`: a path such as /proc/PID/ns/net, None: this one)."""
    out = []
    for link in _json_of(netns, ["ip", "-j", "link", "show"]):
        flags = link.get("flags", [])
        out.append(Interface(name=str(link.get("ifname")), index=int(link.get("ifindex", 0)),
                             up="UP" in flags, mtu=int(link.get("mtu", 1500)),
                             loopback="LOOPBACK" in flags))
    return out


def chosen_interfaces(netns: str | None, names: list[str]) -> list[Interface]:
    """The interfaces to capture on: those named (each must exist), else every one that is up."""
    every = interfaces(netns)
    if not names:
        return [i for i in every if i.up]
    by_name = {i.name: i for i in every}
    missing = [n for n in names if n not in by_name]
    if missing:
        where = "the program's network namespace" if netns else "this network namespace"
        raise UsageError(f"-i {missing[0]}: no such interface in {where} "
                         f"(there: {', '.join(sorted(by_name)) or 'none'})")
    return [by_name[n] for n in names]


def _shaper_rate(netns: str | None, iface: str) -> tuple[int | None, dict[str, Any]]:
    try:
        qdiscs = _json_of(netns, ["tc", "-j", "qdisc", "show", "dev", iface])
    except HostwireError:
        return None, {}
    rates = []
    for q in qdiscs:
        kind = q.get("kind")
        options = q.get("options", {}) or {}
        if kind == "tbf" and options.get("rate"):
            rates.append(int(options["rate"]) * 8)  # tc reports bytes per second
    if not rates:
        try:
            for c in _json_of(netns, ["tc", "-j", "class", "show", "dev", iface]):
                if c.get("class") == "htb" and (c.get("rate") or (c.get("options") or {}).get("rate")):
                    rates.append(int(c.get("rate") or c["options"]["rate"]) * 8)
        except (HostwireError, ValueError, TypeError):
            pass
    return (min(rates) if rates else None), {"kinds": [q.get("kind") for q in qdiscs]}


def _speed(netns: str | None, iface: str) -> tuple[int | None, str]:
    try:
        proc = subprocess.run(_in_netns(netns, ["sh", "-c", f"cat /sys/class/net/{iface}/speed; "
                                                 f"basename $(readlink /sys/class/net/{iface}/device/driver) "
                                                 f"2>/dev/null; ethtool -i {iface} 2>/dev/null"]),
                              capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None, ""
    lines = proc.stdout.splitlines()
    driver = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("driver:")), "")
    speed = lines[0].strip() if lines else ""
    return (int(speed) * 1_000_000 if speed.isdigit() and int(speed) > 0 else None), driver


def link_facts(netns: str | None, chosen: list[Interface], given_bit_s: int | None) -> LinkFacts:
    """The link rate by the rule of the module doc, over the captured interfaces other than
    loopback (the slowest one bounds the program's traffic)."""
    wired = [i for i in chosen if not i.loopback]
    facts = LinkFacts(chosen, None, "unknown")
    if given_bit_s is not None:
        facts.rate_bit_s, facts.rate_source = given_bit_s, "option"
        return facts
    shaped = []
    for iface in wired:
        rate, info = _shaper_rate(netns, iface.name)
        facts.qdiscs[iface.name] = info
        if rate:
            shaped.append(rate)
    if shaped:
        facts.rate_bit_s, facts.rate_source = min(shaped), "shaper"
        return facts
    speeds = []
    for iface in wired:
        speed, driver = _speed(netns, iface.name)
        if speed:
            speeds.append((speed, driver in NOMINAL_ONLY_DRIVERS))
    if speeds:
        speed, nominal = min(speeds)
        facts.rate_bit_s, facts.rate_source = speed, "interface-nominal" if nominal else "interface"
    return facts
