"""hostwire diff A B: two runs, or two campaigns whose grid points are matched (each point's
repetitions a group), as one comparison per pair: each side's goodput, the terms of the change
(hostwire.diff.terms), which lie within the repetitions' spread (hostwire.diff.noise), and the
network's softirq time no quota charged to the senders."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hostwire.diff import noise
from hostwire.diff.run_facts import run_facts
from hostwire.diff.terms import Facts, Term, decompose, goodput, uncharged_per_byte
from hostwire.errors import InputError

CAMPAIGN_FILE = "campaign.json"


@dataclass
class Comparison:
    """One pair: A's and B's repetitions (one each for two runs) and what diff found."""

    point: dict[str, Any]
    a: list[Facts]
    b: list[Facts]
    terms: list[Term] = field(default_factory=list)
    cannot: str = ""  # why the change was not split (a side moved no byte)
    goodput_p: float | None = None  # Welch's p of the runs' goodputs (None: one run on a side)

    @property
    def goodput_a_bit_s(self) -> float:
        return goodput(self.a)

    @property
    def goodput_b_bit_s(self) -> float:
        return goodput(self.b)

    def as_dict(self) -> dict[str, Any]:
        terms = [{**asdict(t), "a": _finite(t.a), "b": _finite(t.b), "share": _finite(t.share)} for t in self.terms]
        return {"point": self.point, "repetitions_a": len(self.a), "repetitions_b": len(self.b),
                "goodput_a_bit_s": self.goodput_a_bit_s, "goodput_b_bit_s": self.goodput_b_bit_s,
                "goodput_p": self.goodput_p,
                "goodput_noise": None if self.goodput_p is None else bool(self.goodput_p > noise.ALPHA),
                "terms": terms, "cannot_split": self.cannot or None,
                "uncharged_softirq_ns_per_byte": {"a": _finite(uncharged_per_byte(self.a)),
                                                  "b": _finite(uncharged_per_byte(self.b))},
                "per_cpu": {"a": _per_cpu(self.a), "b": _per_cpu(self.b)},
                "runs_a": [f.label for f in self.a], "runs_b": [f.label for f in self.b]}


def _finite(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def _per_cpu(sides: Sequence[Facts]) -> dict[str, dict[str, float | None]]:
    out: dict[str, dict[str, float]] = {}
    for f in sides:
        for cpu, values in f.per_cpu.items():
            mine = out.setdefault(cpu, {})
            for k, v in values.items():
                mine[k] = mine.get(k, 0.0) + v
    return {cpu: {k: _finite(v) for k, v in values.items()} for cpu, values in sorted(out.items())}


def is_campaign(path: Path) -> bool:
    return (path / CAMPAIGN_FILE).is_file()


def point_identity(point: dict[str, Any]) -> str:
    """The point as sorted JSON with every run parameter the point does not name at its default:
    a campaign recorded before a parameter existed matches one recorded after it at its default."""
    from hostwire.record.point import RunPoint

    return json.dumps({**asdict(RunPoint()), **point}, sort_keys=True, default=str)


def campaign_groups(path: Path) -> list[tuple[dict[str, Any], list[Path]]]:
    """The complete runs of a campaign by grid point, in the campaign's order."""
    try:
        book = json.loads((path / CAMPAIGN_FILE).read_text())
    except (OSError, ValueError) as err:
        raise InputError(f"{path / CAMPAIGN_FILE}: not a readable campaign file ({err})") from None
    groups: dict[str, tuple[dict[str, Any], list[Path]]] = {}
    for entry in book.get("runs", []):
        if entry.get("status") != "complete":
            continue
        point = entry.get("point") or {}
        key = point_identity(point)
        groups.setdefault(key, (point, []))[1].append(path / str(entry["run_id"]))
    return list(groups.values())


def compare(a: Path, b: Path, progress: Callable[[str], None] = lambda _: None) -> list[Comparison]:
    """The comparisons of two runs (one) or of two campaigns (one per grid point both have, with
    complete runs on each side), each with its terms and noise marks."""
    if is_campaign(a) != is_campaign(b):
        raise InputError(f"{a if is_campaign(a) else b} is a campaign and {b if is_campaign(a) else a} is a run: "
                         "diff compares two runs or two campaigns")
    if not is_campaign(a):
        pairs = [({}, [a], [b])]
    else:
        mine = {point_identity(p): (p, runs) for p, runs in campaign_groups(a)}
        theirs = {point_identity(p): runs for p, runs in campaign_groups(b)}
        pairs = [(p, runs, theirs[k]) for k, (p, runs) in mine.items() if k in theirs]
        if not pairs:
            raise InputError(f"{a} and {b}: no grid point with complete runs in both campaigns")
    out = []
    for point, runs_a, runs_b in pairs:
        facts = []
        for side in (runs_a, runs_b):
            group = []
            for run in side:
                progress(str(run))
                group.append(run_facts(str(run)))
            facts.append(group)
        out.append(finish(Comparison(point, *facts)))
    return out


def coarse_cpu(sides: Sequence[Facts]) -> None:
    """Where a side traced no system calls (its CPU split is cpu-task and cpu-softirq), the others'
    user and call time joined as cpu-task too, so that every side has the same terms."""
    if any(f.cpu_ns and "cpu-task" in f.cpu_ns for f in sides):
        for f in sides:
            if f.cpu_ns and "cpu-task" not in f.cpu_ns:
                cpu = dict(f.cpu_ns)
                f.cpu_ns = {"cpu-task": cpu.pop("cpu-user", 0.0) + cpu.pop("cpu-calls", 0.0), **cpu}


def finish(c: Comparison) -> Comparison:
    """Splits c's change and marks its noise (or says why it cannot be split)."""
    if any(f.bytes <= 0 for f in (*c.a, *c.b)):
        c.cannot = "a run moved no payload byte in its window: it has no time per byte to split"
        return c
    coarse_cpu(c.a + c.b)
    c.terms = decompose(c.a, c.b)
    noise.mark(c.terms, c.a, c.b)
    c.goodput_p = noise.goodput_p(c.a, c.b)
    return c
