"""hostwire diff's outputs: the terminal's tables (per group, the largest change first) and the
JSON document."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from hostwire.diff.compare import Comparison
from hostwire.diff.noise import ALPHA
from hostwire.diff.terms import Facts, goodput, uncharged_per_byte

GROUPS = {"time": "time terms: stream-time per byte [ns/B] (streams: their count)",
          "cpu": "CPU terms: the senders' CPU per byte [ns/B] (cpu-granted: CPU-seconds per second)"}


def as_json(comparisons: Sequence[Comparison], a: Path, b: Path) -> dict[str, Any]:
    """Two runs: the one comparison's fields. Two campaigns: the campaigns' pooled goodputs and one
    entry per grid point under `points`."""
    if len(comparisons) == 1 and not comparisons[0].point:
        return {"a": str(a), "b": str(b), **comparisons[0].as_dict()}
    all_a = [f for c in comparisons for f in c.a]
    all_b = [f for c in comparisons for f in c.b]
    return {"a": str(a), "b": str(b), "goodput_a_bit_s": goodput(all_a), "goodput_b_bit_s": goodput(all_b),
            "points": [c.as_dict() for c in comparisons]}


def _mbit(x: float) -> str:
    return f"{x / 1e6:+.3f}" if math.isfinite(x) else "-"


def _side(sides: Sequence[Facts]) -> str:
    return f"{goodput(sides) / 1e6:.3f} Mbit/s" + (f" (mean of {len(sides)} runs)" if len(sides) > 1 else "")


def comparison_text(c: Comparison, show_all: bool) -> str:
    lines = [f"A: {_side(c.a)}", f"B: {_side(c.b)}"]
    change = c.goodput_b_bit_s - c.goodput_a_bit_s
    pct = 100 * change / c.goodput_a_bit_s if c.goodput_a_bit_s else math.nan
    lines.append(f"change: {change / 1e6:+.3f} Mbit/s ({pct:+.1f} %)"
                 + ("" if c.goodput_p is None else
                    f"; {'within' if c.goodput_p > ALPHA else 'beyond'} the runs' spread (Welch p = {c.goodput_p:.2g})"))
    if c.cannot:
        return "\n".join(lines + [f"not split: {c.cannot}"]) + "\n"
    for group, title in GROUPS.items():
        terms = [t for t in c.terms if t.group == group]
        if not terms:
            missing = [f"{f.label}: {f.cpu_missing}" for f in (*c.a, *c.b) if f.cpu_missing]
            if group == "cpu" and missing:
                lines.append("\nno CPU terms: " + "; ".join(missing[:2]) + ("; ..." if len(missing) > 2 else ""))
            continue
        rows = pd.DataFrame({"term": [t.term + (" ~" if t.noise else "") for t in terms],
                             "a": [t.a for t in terms], "b": [t.b for t in terms],
                             "change [Mbit/s]": [t.delta_bit_s for t in terms],
                             "share": [t.share for t in terms]})
        rows = rows.iloc[rows["change [Mbit/s]"].abs().sort_values(ascending=False, kind="stable").index]
        shown = rows if show_all else rows[(rows["a"] != 0) | (rows["b"] != 0)]
        table = shown.assign(**{"change [Mbit/s]": shown["change [Mbit/s]"].map(_mbit),
                                "share": shown["share"].map(lambda s: f"{100 * s:+.1f} %" if math.isfinite(s) else "-"),
                                "a": shown["a"].map(lambda v: f"{v:.4g}"), "b": shown["b"].map(lambda v: f"{v:.4g}")})
        total = sum(t.delta_bit_s for t in terms)
        lines += ["", title, table.to_string(index=False), f"sum of the terms: {total / 1e6:+.3f} Mbit/s"]
        if group == "cpu":
            lines.append(f"the network's softirqs in other tasks (charged to no sender) [ns/B]: "
                         f"A {uncharged_per_byte(c.a):.4g}, B {uncharged_per_byte(c.b):.4g}")
    if any(t.noise is not None for t in c.terms):
        lines.append("~: within the repetitions' spread (Welch's t-test, Holm, family-wise 1 %)")
    return "\n".join(lines) + "\n"


def point_label(point: dict[str, Any]) -> dict[str, Any]:
    """M, N and the parameters the point sets away from a run's defaults: what tells it apart."""
    from dataclasses import asdict

    from hostwire.record.point import RunPoint

    defaults = asdict(RunPoint())
    return {k: v for k, v in point.items() if k in ("senders", "background") or defaults.get(k, object()) != v}


def as_text(comparisons: Sequence[Comparison], a: Path, b: Path, show_all: bool = False) -> str:
    head = f"A: {a}\nB: {b}\n"
    if len(comparisons) == 1 and not comparisons[0].point:
        return head + "\n" + comparison_text(comparisons[0], show_all)
    parts = [head]
    for c in comparisons:
        point = ", ".join(f"{k}={v}" for k, v in point_label(c.point).items())
        parts.append(f"\n== {point} ({len(c.a)} and {len(c.b)} runs)\n" + comparison_text(c, show_all))
    return "".join(parts)
