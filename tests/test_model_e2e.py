"""End to end: a small campaign recorded, analysed and modelled with a calibration that
`hostwire model` records itself (short windows), then a what-if point; the model's table holds
every run, and the calibration none of the predicted points."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest


HOSTWIRE = [sys.executable, "-m", "hostwire"]
# Two points under the paper's regime (the 5 % quota, no shaper), short windows.
CAMPAIGN = """[campaign]
name = "model-e2e"
[defaults]
warmup_s = 1.0
duration_s = 2.0
quiet_s = 0.3
sender_cpu_share = 0.05
link_rate = "100mbit"
link_qdisc = "none"
[grid]
senders = [1]
background = [0, 2]
"""


@pytest.mark.privileged("netns", "tracefs")
@pytest.mark.long
def test_model_calibrates_predicts_and_compares(tmp_path: Path) -> None:
    campaign, config = tmp_path / "c", tmp_path / "model-e2e.toml"
    config.write_text(CAMPAIGN)
    for step in (["run", str(config), "--out", str(campaign)],
                 ["analyze", str(campaign)]):
        proc = subprocess.run([*HOSTWIRE, *step], capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, proc.stdout + proc.stderr  # a marked run is recorded and analysed all the same
    proc = subprocess.run([*HOSTWIRE, "model", str(campaign), "--calibration-window", "3", "--points",
                           "--predict", "senders=8,background=4"], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "goodput:" in proc.stdout and "prediction (no run at this point) M=8 N=4" in proc.stdout
    table = pd.read_parquet(campaign / "model.parquet")
    summary = pd.read_parquet(campaign / "summary.parquet")
    assert sorted(table["run_id"]) == sorted(summary["run_id"])
    assert (table["goodput_model_mbps"] > 0).all() and table["regime_model"].eq("cpu").all()
    calibration = pd.read_parquet(campaign / "model-calibration" / "calibration.parquet")
    assert calibration["duration_s"].eq(3.0).all()
    # the light reading of the calibration agrees with the full analysis, run for run
    proc = subprocess.run([*HOSTWIRE, "analyze", str(campaign / "model-calibration")], capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    full = pd.read_parquet(campaign / "model-calibration" / "summary.parquet").set_index("run_id")
    light = calibration.set_index("run_id").loc[full.index]
    assert (light["limit"] == full["limit"]).all()
    for column in ("goodput_bit_s", "jain", "cpu_throttled_share"):
        assert light[column].to_numpy() == pytest.approx(full[column].to_numpy(), rel=1e-9, nan_ok=True), column
    assert not set(zip(calibration["senders"], calibration["background"])) & set(zip(table["senders"], table["background"]))
