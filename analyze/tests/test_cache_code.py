"""Caches keyed on the code that made them (hostwire.code_digest): a run's metrics.json and the
timeline's Parquet copies are recomputed, without --force, once a module that computes them has
changed, and served when nothing has. The package is copied to a folder of the test's own and run
from there (PYTHONPATH), as an upgrade replaces the installed modules."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import hostwire
from hostwire.paths import REPO_ROOT

FIXTURE = REPO_ROOT / "tests" / "fixtures" / "run-small"


def _analyze(package_root: Path, campaign: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(package_root)}
    proc = subprocess.run([sys.executable, "-m", "hostwire", "analyze", str(campaign), "--workers", "1"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "PYTHONPATH" not in proc.stderr


def _made(run: Path) -> dict[str, int]:
    """When metrics.json and each timeline copy was last written (ns)."""
    files = [run / "metrics.json", *sorted((run / "tables").glob("timeline-*.parquet"))]
    return {f.name: f.stat().st_mtime_ns for f in files}


def test_a_changed_module_recomputes_the_caches_without_force(tmp_path: Path) -> None:
    package = tmp_path / "site"
    shutil.copytree(Path(hostwire.__file__).parent, package / "hostwire",
                    ignore=shutil.ignore_patterns("__pycache__"))
    campaign = tmp_path / "campaign"
    shutil.copytree(FIXTURE, campaign / "run-small")
    run = campaign / "run-small"

    _analyze(package, campaign)
    first, code = _made(run), json.loads((run / "metrics.json").read_text())["code"]
    assert "timeline-running.parquet" in first and len(first) > 2
    summary = (campaign / "summary.csv").read_bytes()

    _analyze(package, campaign)  # nothing changed: every cache serves
    assert _made(run) == first

    # a module of the summary's gap causes, not of the timeline's tables: the row alone
    with open(package / "hostwire" / "timeline" / "gaps.py", "a") as module:
        module.write("\n# changed\n")
    _analyze(package, campaign)
    second = _made(run)
    assert second["metrics.json"] != first["metrics.json"]
    assert json.loads((run / "metrics.json").read_text())["code"] != code
    assert {k: v for k, v in second.items() if k != "metrics.json"} == \
           {k: v for k, v in first.items() if k != "metrics.json"}
    assert (campaign / "summary.csv").read_bytes() == summary  # a comment changes no number

    # a module the timeline's tables are built by: its copies too
    with open(package / "hostwire" / "timeline" / "stream_tables.py", "a") as module:
        module.write("\nCHANGED = 1\n")
    _analyze(package, campaign)
    third = _made(run)
    assert all(third[name] != second[name] for name in second), (second, third)
