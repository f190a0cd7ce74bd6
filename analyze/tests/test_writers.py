"""One writer at a time (hostwire.locks) and doctor --cleanup's campaign.json: a second `run`
or `doctor --cleanup` on a locked campaign gets one line naming the holder's pid at once,
`analyze` skips a run a runner holds, and cleanup leaves campaign.json interrupted/partial."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hostwire import manifest
from hostwire.locks import LockedError, locked
from hostwire.paths import REPO_ROOT

FIXTURE = REPO_ROOT / "tests" / "fixtures" / "run-small"


def _hostwire(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "analyze")}
    return subprocess.run([sys.executable, "-m", "hostwire", *args], capture_output=True, text=True, env=env,
                          timeout=60, check=False)


def test_a_second_run_into_a_locked_campaign_gets_one_line_naming_the_holder(tmp_path: Path) -> None:
    campaign = tmp_path / "campaign"
    campaign.mkdir()
    with locked(campaign, "hostwire run"):
        started = time.monotonic()
        done = _hostwire("run", str(REPO_ROOT / "configs" / "quick.toml"), "--out", str(campaign), "--resume",
                         "--no-progress")
        elapsed = time.monotonic() - started
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"pid {os.getpid()}" in lines[0] and "Traceback" not in done.stderr, lines
    assert elapsed < 10  # the interpreter's start; the lock itself is not waited for
    assert not (campaign / "campaign.json").exists()


def test_the_lock_is_refused_within_a_second_and_names_the_holder(tmp_path: Path) -> None:
    with locked(tmp_path, "hostwire run"):
        started = time.monotonic()
        with pytest.raises(LockedError, match=f"pid {os.getpid()} \\(hostwire run\\)"):
            with locked(tmp_path, "hostwire doctor --cleanup", wait_s=0.5):
                pass
        assert time.monotonic() - started < 1.0
    with locked(tmp_path, "hostwire run"):  # released with its holder
        pass


def test_analyze_skips_a_run_a_runner_holds_with_a_line(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from hostwire.campaign.analyze import analyze_campaign

    campaign = tmp_path / "campaign"
    shutil.copytree(FIXTURE, campaign / "a")
    shutil.copytree(FIXTURE, campaign / "b")
    with locked(campaign / "b", "hostwire run: recording b"), caplog.at_level(logging.WARNING):
        summary = analyze_campaign(campaign, workers=1)
    assert summary["directory"].tolist() == ["a"]
    assert any("b" in r.getMessage() and f"pid {os.getpid()}" in r.getMessage() for r in caplog.records)
    assert not (campaign / "b" / "metrics.json").exists()


def _killed_campaign(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A campaign whose runner was killed while it recorded run r1: campaign.json says running and
    r1 pending, r1.partial's manifest says running with a runner that is gone, its registry entry
    is left."""
    campaign = tmp_path / "campaign"
    run_dir = campaign / "r1.partial"
    shutil.copytree(FIXTURE, run_dir)
    gone = subprocess.Popen(["true"])
    gone.wait()
    runner = {"pid": gone.pid, "start_ticks": 1, "boot_id": manifest.boot_id()}
    data = json.loads((run_dir / "manifest.json").read_text())
    data.update(status="running", reason="", runner=runner)
    data.pop("raw_digests", None)
    manifest.write_json_atomic(run_dir / "manifest.json", manifest.seal(data))
    manifest.write_json_atomic(campaign / "campaign.json", {
        "format": "hostwire-campaign 1", "name": "c", "state": "running",
        "runs": [{"run_id": "r1", "key": "k1", "status": "pending"}, {"run_id": "r2", "key": "k2", "status": "pending"}]})
    registry = tmp_path / "registry"
    registry.mkdir()
    monkeypatch.setattr(manifest, "REGISTRY_DIR", registry)
    manifest.write_json_atomic(registry / f"{gone.pid}-x.json", {"run_dir": str(run_dir), "runner": runner})
    return campaign


def test_doctor_cleanup_leaves_campaign_json_interrupted_and_the_run_partial(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hostwire.record import doctor

    campaign = _killed_campaign(tmp_path, monkeypatch)
    lines = doctor.mark_killed()
    assert any("marked run" in line for line in lines), lines
    book = json.loads((campaign / "campaign.json").read_text())
    assert book["state"] == "interrupted"
    assert [(r["run_id"], r["status"]) for r in book["runs"]] == [("r1", "partial"), ("r2", "pending")]
    assert "runner killed" in book["runs"][0]["reason"]
    assert json.loads((campaign / "r1.partial" / "manifest.json").read_text())["status"] == "partial"


def test_doctor_cleanup_waits_for_no_runner_holding_the_campaign(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from hostwire.record import doctor

    campaign = _killed_campaign(tmp_path, monkeypatch)
    started = time.monotonic()
    with locked(campaign, "hostwire run"), pytest.raises(LockedError, match=f"pid {os.getpid()}"):
        doctor.mark_killed()
    assert time.monotonic() - started < 2.0
    assert json.loads((campaign / "campaign.json").read_text())["state"] == "running"  # untouched


def test_doctor_marks_a_campaign_killed_between_two_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No run was being recorded: only the campaign's own registry entry names it."""
    from hostwire.record import doctor

    campaign = tmp_path / "campaign"
    shutil.copytree(FIXTURE, campaign / "r1")
    manifest.write_json_atomic(campaign / "campaign.json", {
        "format": "hostwire-campaign 1", "name": "c", "state": "running",
        "runs": [{"run_id": "r1", "key": "k1", "status": "complete"}, {"run_id": "r2", "key": "k2", "status": "pending"}]})
    registry = tmp_path / "registry"
    monkeypatch.setattr(manifest, "REGISTRY_DIR", registry)
    live = manifest.register_live(campaign, kind="campaign")
    assert live is not None and doctor.killed_campaigns() == []  # its runner (this process) lives
    gone = subprocess.Popen(["true"])
    gone.wait()
    entry = json.loads(live.read_text())
    entry["runner"] = {"pid": gone.pid, "start_ticks": 1, "boot_id": manifest.boot_id()}
    manifest.write_json_atomic(live, entry)
    assert manifest.registered_runs() == []  # a campaign is not a run
    assert f"campaign {campaign.resolve()} not marked (its runner was killed)" in doctor.leftovers()
    lines = doctor.mark_killed()
    assert any("campaign interrupted" in line for line in lines), lines
    book = json.loads((campaign / "campaign.json").read_text())
    assert book["state"] == "interrupted"
    assert [(r["run_id"], r["status"]) for r in book["runs"]] == [("r1", "complete"), ("r2", "pending")]
    assert not live.exists() and doctor.killed_campaigns() == []
