"""hostwire report B --against A: B/diff.html, why B's goodput differs from A's (hostwire diff):
per group of terms a waterfall from A's goodput to B's, each term a step, the largest first,
and the table of the terms beside it."""

from __future__ import annotations

import html
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from hostwire.diff.compare import Comparison, compare
from hostwire.diff.noise import ALPHA
from hostwire.diff.render import GROUPS
from hostwire.report.figure import HEIGHT, WIDE, new_figure
from hostwire.report.html_table import table_html
from hostwire.report.page import Section, save_figure, write_page

SHOWN = 8  # steps drawn per waterfall; the rest summed into one


def plot_waterfall(start_bit_s: float, steps: list[tuple[str, float]], end_bit_s: float, title: str) -> Figure:
    """A bar at A's goodput, one floating bar per step (green up, red down), a bar at B's; in Mbit/s."""
    fig, ax = new_figure(WIDE, HEIGHT)
    level = start_bit_s / 1e6
    names = ["A"]
    ax.bar(0, level, color="#7f7f7f", width=0.7)
    for i, (name, delta) in enumerate(steps, start=1):
        d = delta / 1e6
        ax.bar(i, d, bottom=level, color="#2ca02c" if d >= 0 else "#d62728", width=0.7)
        level += d
        names.append(name)
    ax.bar(len(steps) + 1, end_bit_s / 1e6, color="#7f7f7f", width=0.7)
    names.append("B")
    ax.set_xticks(np.arange(len(names)), names, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("goodput [Mbit/s]")
    ax.set_title(title, fontsize=9)
    return fig


def waterfall_steps(c: Comparison, group: str) -> list[tuple[str, float]]:
    terms = sorted((t for t in c.terms if t.group == group), key=lambda t: -abs(t.delta_bit_s))
    steps = [(t.term + ("~" if t.noise else ""), t.delta_bit_s) for t in terms[:SHOWN]]
    rest = sum(t.delta_bit_s for t in terms[SHOWN:])
    if len(terms) > SHOWN:
        steps.append((f"{len(terms) - SHOWN} more", rest))
    return steps


def build_diff_report(b: Path, a: Path) -> Path:
    """Writes B/diff.html and B/plots/diff-*.png/svg; returns the page's path."""
    sections = []
    for k, c in enumerate(compare(a, b)):
        point = ", ".join(f"{key}={v}" for key, v in c.point.items()) or "the two runs"
        change = c.goodput_b_bit_s - c.goodput_a_bit_s
        text = (f"<p>A: {c.goodput_a_bit_s / 1e6:.3f} Mbit/s ({len(c.a)} run{'s' if len(c.a) > 1 else ''}), "
                f"B: {c.goodput_b_bit_s / 1e6:.3f} Mbit/s ({len(c.b)}); change {change / 1e6:+.3f} Mbit/s"
                + ("" if c.goodput_p is None else
                   f", {'within' if c.goodput_p > ALPHA else 'beyond'} the runs' spread (Welch p = {c.goodput_p:.2g})")
                + ". "
                "Each group's terms add up to the change (docs/timeline.md, \"Why two runs differ\"); "
                "~ marks a term within the repetitions' spread.</p>")
        if c.cannot:
            sections.append(Section(point, text + f"<p>{html.escape(c.cannot)}</p>"))
            continue
        figures = []
        for group, title in GROUPS.items():
            terms = [t for t in c.terms if t.group == group]
            if not terms:
                text += "<p>No CPU terms: a side's kernel trace lacks the network's softirq events.</p>"
                continue
            name = save_figure(plot_waterfall(c.goodput_a_bit_s, waterfall_steps(c, group), c.goodput_b_bit_s,
                                              title.split(":")[0]), b / "plots", f"diff-{k}-{group}")
            figures.append(name)
            rows = pd.DataFrame({"term": [t.term for t in terms], "A": [t.a for t in terms], "B": [t.b for t in terms],
                                 "change [Mbit/s]": [t.delta_bit_s / 1e6 for t in terms],
                                 "share": [t.share for t in terms],
                                 "noise": ["~" if t.noise else "" for t in terms]})
            rows = rows.iloc[rows["change [Mbit/s]"].abs().sort_values(ascending=False, kind="stable").index]
            text += f"<h3>{html.escape(title)}</h3>" + table_html(rows, float_format="{:.4g}")
        sections.append(Section(point, text, figures))
    return write_page(b / "diff.html", "hostwire diff", f"Why {b.name} differs from {a.name}",
                      html.escape(f"A: {a} · B: {b}"), sections)

