"""The HTML page both reports write (a campaign's, hostwire.report.campaign_report; one run's,
hostwire.report.run_report): sections of text, tables and figures, each figure saved as PNG
(shown) and SVG (linked) under plots/ beside the page."""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hostwire.report import figure
from hostwire.safewrite import write_text, write_with

CSS = """
body { font-family: sans-serif; max-width: 1100px; margin: 2em auto; color: #222; }
table { border-collapse: collapse; font-size: 0.8em; margin: 0.5em 0; }
.scroll { overflow-x: auto; max-width: 100%; }
th, td { border: 1px solid #ccc; padding: 2px 6px; text-align: right; }
tr.bad td { background: #fdd; }
.warn { color: #a00; font-weight: bold; }
.small { font-size: 0.8em; color: #666; }
img { max-width: 100%; }
"""


@dataclass
class Section:
    title: str
    body: str
    figures: list[str] = field(default_factory=list)


def save_figure(fig: Any, plots: Path, name: str) -> str:
    """plots/<name>.png and .svg; plots/ is not followed if it is a symbolic link, nor any name in
    it. Returns name."""
    import matplotlib.pyplot as plt

    try:
        write_with(plots / f"{name}.png", lambda handle: fig.savefig(handle, format="png", dpi=figure.DPI),
                   below=plots.parent, create=True)  # at most figure.PAGE_WIDTH_PX wide
        write_with(plots / f"{name}.svg", lambda handle: fig.savefig(handle, format="svg"),
                   below=plots.parent, create=True)
    finally:
        plt.close(fig)
    return name


def write_page(out: Path, title: str, heading: str, byline: str, sections: list[Section]) -> Path:
    """The page: `heading` on top, `byline` (HTML) under it, then each section with its figures
    (plots/<name>.png, linked to its SVG)."""
    parts = [f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>",
             f"<style>{CSS}</style></head><body>",
             f"<h1>{html.escape(heading)}</h1>",
             f"<p class=\"small\">{byline}</p>"]
    for section in sections:
        parts.append(f"<section><h2>{html.escape(section.title)}</h2>{section.body}")
        for fig in section.figures:
            parts.append(f'<figure><a href="plots/{fig}.svg"><img src="plots/{fig}.png" alt="{fig}"></a></figure>')
        parts.append("</section>")
    parts.append("</body></html>")
    write_text(out, "\n".join(parts))
    return out
