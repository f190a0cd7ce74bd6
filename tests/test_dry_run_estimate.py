"""--dry-run's estimate against the real time of a short campaign (issue 22, case 6): two runs of
0.5 s recorded on the two-namespace topology take within ESTIMATE_TOLERANCE of what --dry-run
printed beforehand."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

# The estimate is the windows plus batch.ESTIMATED_OVERHEAD_S a run; the real time on a loaded
# two-CPU machine lies within this share of it either way.
ESTIMATE_TOLERANCE = 0.5
HOSTWIRE = [sys.executable, "-m", "hostwire"]


def _seconds(line: str) -> int:
    match = re.fullmatch(r"estimated time: (?:(\d+) days? )?(\d\d):(\d\d):(\d\d)", line)
    assert match, line
    days, hours, minutes, seconds = (int(g or 0) for g in match.groups())
    return ((days * 24 + hours) * 60 + minutes) * 60 + seconds


@pytest.mark.privileged("netns")
def test_dry_run_estimate_matches_a_short_campaign(tmp_path: Path, build_dir: Path) -> None:
    config = tmp_path / "tiny.toml"
    config.write_text("[campaign]\nname = 'tiny'\n[defaults]\nwarmup_s = 0.3\nduration_s = 0.5\nquiet_s = 0.2\n"
                      "kernel_trace = false\n[grid]\nsenders = [1, 2]\nbackground = [0]\n")
    dry = subprocess.run([*HOSTWIRE, "run", str(config), "--dry-run"], capture_output=True, text=True, timeout=60)
    assert dry.returncode == 0, dry.stderr
    estimate = _seconds(dry.stdout.splitlines()[-1])
    started = time.monotonic()
    real = subprocess.run([*HOSTWIRE, "run", str(config), "--out", str(tmp_path / "out"), "--no-progress"],
                          capture_output=True, text=True, timeout=300)
    elapsed = time.monotonic() - started
    assert real.returncode == 0, real.stdout + real.stderr
    assert abs(elapsed - estimate) <= ESTIMATE_TOLERANCE * estimate, \
        f"dry run estimated {estimate} s, the campaign took {elapsed:.1f} s"
