"""One rule for a run's link rate (hostwire.linkrate): `hostwire metrics` and `hostwire gaps` read
the same rate from the same manifest, also from one that names none (the gap analysis refused such
a run; the metrics guessed 10 Mbit/s)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from hostwire.manifest import seal
from hostwire.paths import REPO_ROOT

FIXTURE = REPO_ROOT / "tests" / "fixtures" / "run-small"


def _without_link_rate(tmp_path: Path) -> Path:
    run = tmp_path / "run-small"
    shutil.copytree(FIXTURE, run)
    manifest = json.loads((run / "manifest.json").read_text())
    del manifest["point"]["link_rate"]
    (run / "manifest.json").write_text(json.dumps(seal(manifest)))
    return run


def _hostwire(*args: str) -> list[dict]:
    proc = subprocess.run([sys.executable, "-m", "hostwire", *args, "--json"], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_metrics_and_gaps_agree_on_a_run_without_link_rate(tmp_path: Path) -> None:
    run = str(_without_link_rate(tmp_path))
    # without --link-rate each command takes the rule's rate, the same as naming it: 10 Mbit/s
    gaps = _hostwire("gaps", run)
    assert gaps and gaps == _hostwire("gaps", run, "--link-rate", "10mbit")
    assert gaps != _hostwire("gaps", run, "--link-rate", "100mbit")  # the rate matters to the answer
    contract = _hostwire("metrics", "contract", run, "--points", "5")
    assert contract == _hostwire("metrics", "contract", run, "--points", "5", "--link-rate", "10mbit")
    assert contract != _hostwire("metrics", "contract", run, "--points", "5", "--link-rate", "100mbit")
    # a guessed rate is not held against the run: no goodput maximum, no mark for it
    sanity = {r["counter"]: r["value"] for r in _hostwire("metrics", "sanity", run)}
    assert "goodput_max_bit_s" not in sanity and "impossible_share" in sanity
