"""`hostwire run --until-ci`: repetitions added to the points whose goodput interval is wider
than asked, up to --max-repetitions, checked against the rule recomputed from the recorded runs
with scipy's Student interval (an independent formula)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from hostwire.campaign.precision import run_goodput

HOSTWIRE = [sys.executable, "-m", "hostwire"]
# Two capped points: under 5 % of one CPU a one-second run's goodput scatters (14.9 % for one run
# in docs/model.md), so two repetitions are not within ±10 % and the rounds go on.
CONFIG = """
[campaign]
name = "until-ci"
repetitions = 2
order = "shuffled"
seed = 7

[defaults]
warmup_s = 0.5
duration_s = 1.0
quiet_s = 0.3
link_rate = "100mbit"
link_qdisc = "none"
sender_cpu_share = 0.05

[grid]
senders = [1]
background = [0, 3]
"""


def half_width(values: list[float]) -> float:
    v = np.asarray([x for x in values if math.isfinite(x)])
    if len(v) < 2 or v.mean() <= 0:
        return math.inf
    low, high = stats.t.interval(0.95, len(v) - 1, loc=v.mean(), scale=stats.sem(v))
    return (high - low) / 2 / v.mean() if math.isfinite(low) else 0.0


@pytest.mark.privileged("netns", "tracefs")
def test_repetitions_are_added_until_each_point_is_within_or_at_the_bound(tmp_path: Path) -> None:
    config = tmp_path / "until.toml"
    config.write_text(CONFIG)
    out = tmp_path / "campaign"
    target, bound = 0.10, 4
    proc = subprocess.run([*HOSTWIRE, "run", str(config), "--out", str(out), "--no-progress",
                           "--until-ci", "10%", "--max-repetitions", str(bound)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    book = json.loads((out / "campaign.json").read_text())
    assert book["state"] == "complete"
    by_point: dict[int, list[tuple[int, float]]] = {}
    for entry in book["runs"]:
        assert entry["status"] == "complete", entry
        point = 0 if entry["point"]["background"] == 0 else 1
        by_point.setdefault(point, []).append((entry["repetition"], run_goodput(out / entry["run_id"])))
    assert sorted(by_point) == [0, 1]
    extra = 0
    for point, runs in by_point.items():
        runs.sort()
        assert [r for r, _ in runs] == list(range(len(runs))), runs  # repetitions 0..k-1, none twice
        values = [g for _, g in runs]
        k = len(values)
        assert 2 <= k <= bound
        extra += k - 2
        # each round stopped the point as soon as its interval was within, and not before
        for j in range(2, k):
            assert half_width(values[:j]) > target, (point, values)
        if k < bound:
            assert half_width(values) <= target, (point, values)
    assert extra > 0, by_point  # the scatter of one-second capped runs asked for more than two
    within = sum(half_width([g for _, g in runs]) <= target for runs in by_point.values())
    assert f"--until-ci 10 %: {within} of 2 points within ±10 % of their mean goodput" in proc.stdout, proc.stdout
    # --resume decides the same rounds from the runs it finds, and records none of them again
    again = subprocess.run([*HOSTWIRE, "run", str(config), "--out", str(out), "--no-progress", "--resume",
                            "--until-ci", "10%", "--max-repetitions", str(bound)],
                           capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stdout + again.stderr
    resumed = json.loads((out / "campaign.json").read_text())["runs"]
    assert [r["run_id"] for r in resumed] == [r["run_id"] for r in book["runs"]]
    assert all(r.get("resumed") for r in resumed), resumed


def test_until_ci_options_are_checked_before_anything_starts(tmp_path: Path) -> None:
    config = tmp_path / "until.toml"
    config.write_text(CONFIG)
    for options, message in ((["--until-ci", "5x"], "expected a relative half-width such as 5% or 0.05"),
                             (["--until-ci", "150%"], "expected more than 0 % and less than 100 %"),
                             (["--max-repetitions", "4"], "--max-repetitions bounds --until-ci"),
                             (["--until-ci", "5%", "--max-repetitions", "1"], "expected 2 (the config's repetitions")):
        proc = subprocess.run([*HOSTWIRE, "run", str(config), "--out", str(tmp_path / "never"), *options],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert not (tmp_path / "never").exists()
    dry = subprocess.run([*HOSTWIRE, "run", str(config), "--dry-run", "--until-ci", "5%", "--max-repetitions", "6"],
                         capture_output=True, text=True, timeout=60)
    assert dry.returncode == 0 and "then, --until-ci 5 %: up to 6 runs a point (4 more each, at most)" in dry.stdout
