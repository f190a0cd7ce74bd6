"""Units that run points, manifests and command lines name, one parser each: link rates (tc's units),
durations and CPU lists. Shared by the recording and the reading side."""

from __future__ import annotations

import re

from hostwire.errors import UsageError

_RATE_UNITS = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9}


def parse_rate(text: str) -> int:
    """'10mbit' -> 10_000_000 bit/s (tc's units: bit, kbit, mbit, gbit)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmg]?bit)\s*", text.lower())
    if not match:
        raise UsageError(f"link rate {text!r}: expected a number and a unit, e.g. 10mbit")
    return int(float(match.group(1)) * _RATE_UNITS[match.group(2)])


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


_DURATION_UNITS = {"ns": 1, "us": 10**3, "ms": 10**6, "s": 10**9}


def parse_duration_ns(text: str) -> int:
    """'1ms', '2.5s', '300us', '800ns' -> int ns; a bare number is seconds, as in every hostwire
    tool (docs/cli.md)."""
    t = str(text).strip().lower()
    for unit in ("ns", "us", "ms", "s"):
        if t.endswith(unit):
            number = t[: -len(unit)]
            break
    else:
        unit, number = "s", t
    try:
        value = float(number) * _DURATION_UNITS[unit]
    except ValueError:
        raise UsageError(f"{text!r}: expected a duration like 1ms, 2.5s or 800ns (a bare number is seconds)") from None
    if not value >= 0 or value == float("inf"):
        raise UsageError(f"{text!r}: expected a finite duration >= 0")
    return int(round(value))
