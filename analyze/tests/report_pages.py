"""What the tests of `hostwire report RUN` read of the page it writes: each section's text and
tables (report.html as the report writes it: <h2> titles, plain <table>s), and the figures it
shows, each checked on disk."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd

SECTIONS = ("What was recorded", "Streams", "Why the long gaps happen", "Process trace around the longest off period",
            "Frame intervals", "Index of dispersion for counts", "Zero-loss traffic contracts")
WIRE_SECTIONS = SECTIONS[2:]


class _Tables(HTMLParser):
    """Each <section>'s title and its tables, as text cells."""

    def __init__(self) -> None:
        super().__init__()
        self.sections: dict[str, list[list[list[str]]]] = {}
        self.texts: dict[str, str] = {}
        self._title: str | None = None
        self._in_h2 = False
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag == "h2":
            self._in_h2, self._title = True, ""
        elif tag == "table" and self._title is not None:
            self.sections[self._title].append([])
        elif tag == "tr" and self._title is not None and self.sections.get(self._title):
            self.sections[self._title][-1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "h2":
            self._in_h2 = False
            assert self._title is not None
            self.sections[self._title] = []
            self.texts[self._title] = ""
        elif tag in ("td", "th") and self._cell is not None and self._title is not None:
            self.sections[self._title][-1][-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._in_h2:
            self._title = (self._title or "") + data
        elif self._cell is not None:
            self._cell.append(data)
        elif self._title is not None:
            self.texts[self._title] += data


def parse(page: Path) -> tuple[dict[str, list[pd.DataFrame]], dict[str, str]]:
    parser = _Tables()
    parser.feed(page.read_text())
    tables = {title: [pd.DataFrame(rows[1:], columns=rows[0]) for rows in found if rows]
              for title, found in parser.sections.items()}
    return tables, parser.texts


def figures_on_disk(run: Path) -> list[str]:
    """The figures report.html shows, each checked to be a PNG with its SVG beside it."""
    images = re.findall(r'src="(plots/[^"]+)"', (run / "report.html").read_text())
    for image in images:
        assert (run / image).stat().st_size > 1000, image
        assert (run / image).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", image
        assert (run / image).with_suffix(".svg").stat().st_size > 1000, image
    return images
