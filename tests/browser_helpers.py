"""A report as a person sees it: headless Chromium loads an HTML page from disk and a script run
after load counts its images, the broken ones and how far the page runs wider than the window;
the browser's console errors and failed file loads are collected."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

PROBE = ("<script>window.addEventListener('load', () => { const bad = [...document.images]"
         ".filter(i => !i.complete || i.naturalWidth === 0).map(i => i.src); document.title = "
         "'images:' + document.images.length + ':broken:' + bad.length + ':wide:' + "
         "(document.documentElement.scrollWidth - document.documentElement.clientWidth); });</script></body>")


@dataclass
class Loaded:
    images: int
    broken: int
    wider_px: int  # how much wider than the window the page is (<= 0: it fits)
    console: list[str]


def chromium_argv() -> list[str]:
    browser = shutil.which("chromium")
    if browser is None:
        pytest.fail("chromium is not installed (make setup installs it)", pytrace=False)
    return [browser, "--headless", "--no-sandbox", "--disable-gpu", "--allow-file-access-from-files",
            "--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000"]


def load_in_chromium(page: Path, screenshot: Path | None = None) -> Loaded:
    """Loads `page` (a copy with the probe, written beside it) at 1200 x 3000 px; with `screenshot`,
    also saves what the browser drew there."""
    common = chromium_argv()
    errors = ""
    if screenshot is not None:
        shot = subprocess.run([*common, f"--screenshot={screenshot}", "--window-size=1200,3000", page.as_uri()],
                              capture_output=True, text=True, timeout=120)
        assert screenshot.exists() and screenshot.stat().st_size > 10000, shot.stderr[-2000:]
        errors += shot.stderr
    probe = page.with_name("probe.html")
    probe.write_text(page.read_text().replace("</body>", PROBE))
    dom = subprocess.run([*common, "--window-size=1200,3000", "--dump-dom", probe.as_uri()], capture_output=True,
                         text=True, timeout=120)
    probe.unlink()
    title = re.search(r"<title>([^<]*)</title>", dom.stdout)
    assert title is not None, dom.stderr[-2000:]
    found = re.fullmatch(r"images:(\d+):broken:(\d+):wide:(-?\d+)", title.group(1))
    assert found is not None, title.group(1)
    errors += dom.stderr
    console = [line for line in errors.splitlines() if "CONSOLE" in line or "ERR_FILE" in line]
    return Loaded(int(found.group(1)), int(found.group(2)), int(found.group(3)), console)
