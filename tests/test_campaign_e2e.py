"""End to end, the main job: the quick campaign recorded on the two-namespace topology (shorter
windows), analysed and reported; the report rendered by a real browser."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pandas as pd
import pytest

from hostwire.paths import REPO_ROOT
from hostwire.record.topology import list_namespaces
from hostwire.timeline.gap_tables import RECEIVER_PARTS
from hostwire.timeline.gaps import CAUSES
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the helpers beside this file (importlib mode)
from browser_helpers import load_in_chromium

# One worker records the quick campaign for every test of this module (pytest-xdist's loadgroup).
pytestmark = pytest.mark.xdist_group("quick_campaign")

HOSTWIRE = [sys.executable, "-m", "hostwire"]
# Shorter windows and one sender: the grid's six points of one sender in each regime.
SHORT = ["--set", "warmup_s=1.0", "--set", "duration_s=2.0", "--set", "quiet_s=0.3", "--set", "senders=1"]


@pytest.fixture(scope="module")
def quick_campaign(tmp_path_factory: pytest.TempPathFactory, processes_mentioning: Callable[[str], list[int]]) -> Path:
    out = tmp_path_factory.mktemp("quick") / "campaign"
    run = subprocess.Popen([*HOSTWIRE, "run", str(REPO_ROOT / "configs" / "quick.toml"), "--out", str(out), *SHORT],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stdout, stderr = run.communicate(timeout=600)
    assert run.returncode == 0, stdout + stderr
    # nothing of the runner's left: its namespaces (named by its pid, so other tests' do not count)
    assert [ns for ns in list_namespaces() if ns.startswith(f"hw{run.pid}-")] == []
    for step in (["analyze", str(out)], ["report", "--digest", str(out)]):
        proc = subprocess.run([*HOSTWIRE, *step], capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    assert processes_mentioning(str(out)) == []
    return out


@pytest.mark.privileged("netns", "tracefs")
@pytest.mark.slow
def test_quick_campaign_records_every_point_and_reports(quick_campaign: Path) -> None:
    book = json.loads((quick_campaign / "campaign.json").read_text())
    assert book["state"] == "complete"
    assert [r["status"] for r in book["runs"]] == ["complete"] * 6
    summary = pd.read_parquet(quick_campaign / "summary.parquet")
    assert sorted(zip(summary["senders"], summary["background"])) == sorted([(1, n) for n in (0, 2, 6)] * 2)
    assert summary["duration_s"].eq(2.0).all()
    capped, shaped = summary[summary["sender_cpu_share"] > 0], summary[summary["sender_cpu_share"] == 0]
    # Under 5 % of a CPU shared with six sieve processes a sender may not get to send in a short
    # window: that run is marked for having no data frame, and for nothing else.
    starved = (summary["sender_cpu_share"] > 0) & (summary["background"] == 6)
    assert not summary.loc[~starved, "marked"].any(), summary[["run_id", "marked", "errors"]].to_string()
    no_frames = re.compile(r"\w+: (no data frames in the window \[[^\]]*\] ns \([^)]*\); need at least \d+"
                           r"|fairness needs at least one stream)")
    for errors in summary.loc[starved & (summary["marked"] == 1), "errors"]:
        assert no_frames.sub("", errors).replace(";", "").strip() == "", errors
    # The shaped link: goodput on the wire never exceeds it (10 Mbit/s less the headers), the wire
    # is what limits, and the mix does not matter.
    assert (shaped["goodput_bit_s"] < 9.57e6).all() and (shaped["goodput_bit_s"] > 5e6).all()
    assert (shaped["limit"] == "wire").all() and (shaped["wire_busy_share"] > 0.9).all()
    assert (shaped["link_rate_source"] == "shaper").all()
    # The capped host with no shaper: its cgroup throttled, the CPU is what limits, nothing holds
    # the veth to the point's 100 Mbit/s (not enforced: no impossible interval, no mark), and one
    # sender alone sends more than one sender beside six sieve processes.
    assert (capped["limit"] == "cpu").all() and (capped["cpu_throttled_share"] >= 0.5).all()
    assert (capped["link_rate_source"] == "interface-nominal").all() and capped["impossible_share"].isna().all()
    alone = capped[(capped["senders"] == 1) & (capped["background"] == 0)]["goodput_bit_s"].iloc[0]
    crowded = capped[(capped["senders"] == 1) & (capped["background"] == 6)]["goodput_bit_s"].fillna(0).iloc[0]
    assert alone > 2 * crowded, (alone, crowded)
    # a starved run without a data frame has no fairness to give (its error says so above)
    assert (summary["jain"].between(0, 1) | (starved & summary["jain"].isna())).all(), summary["jain"].tolist()
    shares = summary[[f"gap_{c}_share" for c in CAUSES]]
    assert {c for c in summary.columns if c.startswith("gap_") and c.endswith("_share")} == {
        *shares.columns, *(f"gap_{p}_share" for p in RECEIVER_PARTS)}
    assert shares[summary["gaps"] > 0].sum(axis=1).sub(1).abs().max() < 1e-9
    # the receiver's parts split receiver_window's share (all 0 where the receiver's host was not traced)
    parts = summary[[f"gap_{p}_share" for p in RECEIVER_PARTS]].sum(axis=1)
    assert (parts - summary["gap_receiver_window_share"])[summary["gaps"] > 0].max() < 1e-9
    assert pd.read_csv(quick_campaign / "summary.csv")["run_id"].tolist() == summary["run_id"].tolist()
    html = (quick_campaign / "report.html").read_text()
    images = re.findall(r'src="(plots/[^"]+)"', html)
    assert {"plots/goodput_vs_mix.png", "plots/jain_heatmap.png", "plots/intervals.png", "plots/idc.png",
            "plots/contracts.png", "plots/process_trace.png", "plots/gap_causes.png"} <= set(images)
    for image in images:
        assert (quick_campaign / image).stat().st_size > 1000
        assert (quick_campaign / image).with_suffix(".svg").exists()
    assert "Paper, table 3" in html and "0.9997" in html  # the paper's figures beside today's


@pytest.mark.privileged("netns", "tracefs")
@pytest.mark.slow
def test_report_renders_in_a_real_browser(quick_campaign: Path) -> None:
    """Headless Chromium loads report.html: every image loads, the console shows no error, and a
    screenshot is kept beside the report."""
    loaded = load_in_chromium(quick_campaign / "report.html", quick_campaign / "report-screenshot.png")
    assert loaded.images >= 6 and loaded.broken == 0, loaded
    assert loaded.wider_px <= 0, \
        f"the page is {loaded.wider_px} px wider than the window: a table or figure runs off its edge"
    assert loaded.console == [], loaded.console


@pytest.fixture
def dask_cluster() -> Iterator[str]:
    """A Dask scheduler and two workers on loopback, started and stopped by the test."""
    import socket
    import time

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    address = f"tcp://127.0.0.1:{port}"
    bin_dir = Path(sys.executable).parent
    procs = [subprocess.Popen([str(bin_dir / "dask"), "scheduler", "--host", "127.0.0.1", "--port", str(port),
                               "--dashboard-address", ":0", "--no-show"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        time.sleep(1.0)
        for _ in range(2):
            procs.append(subprocess.Popen([str(bin_dir / "dask"), "worker", address, "--nworkers", "1",
                                           "--nthreads", "1", "--no-dashboard"],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        from distributed import Client

        with Client(address, timeout="30s") as client:
            client.wait_for_workers(2, timeout=60)
        yield address
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.mark.privileged("netns", "tracefs")
@pytest.mark.slow
def test_analyze_on_a_dask_cluster_equals_the_local_pool(quick_campaign: Path, dask_cluster: str) -> None:
    local = pd.read_parquet(quick_campaign / "summary.parquet")
    proc = subprocess.run([*HOSTWIRE, "analyze", str(quick_campaign), "--dask", dask_cluster, "--force"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    remote = pd.read_parquet(quick_campaign / "summary.parquet")
    pd.testing.assert_frame_equal(local, remote)


SMALL_CAMPAIGN = """[campaign]
name = "killed"
[defaults]
warmup_s = 0.3
duration_s = 0.6
quiet_s = 0.2
kernel_trace = false
[grid]
senders = [1, 2]
background = [0, 1]
"""


def _complete_runs(out: Path) -> dict[str, str]:
    """run id -> sha256 of the manifest, of every complete run directory."""
    import hashlib

    found = {}
    for path in out.iterdir() if out.exists() else []:
        manifest = path / "manifest.json"
        if path.is_dir() and not path.name.endswith(".partial") and "partial-" not in path.name and manifest.exists():
            if json.loads(manifest.read_text()).get("status") == "complete":
                found[path.name] = hashlib.sha256(manifest.read_bytes()).hexdigest()
    return found


@pytest.mark.privileged("netns", "tracefs")
@pytest.mark.slow
@pytest.mark.long
def test_campaign_killed_ten_times_and_resumed_ends_as_an_uninterrupted_one(tmp_path: Path) -> None:
    import random
    import signal
    import time

    from hostwire.campaign.batch import plan
    from hostwire.campaign.config import load_config

    config_path = tmp_path / "killed.toml"
    config_path.write_text(SMALL_CAMPAIGN)
    keys = {p.run_id: p.key for p in plan(load_config(config_path))}
    out = tmp_path / "campaign"
    rng = random.Random(1997)
    kept: dict[str, str] = {}
    for attempt in range(10):
        proc = subprocess.Popen([*HOSTWIRE, "run", str(config_path), "--out", str(out), "--resume", "--no-progress"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.5, 6.0))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        cleanup = subprocess.run([*HOSTWIRE, "doctor", "--cleanup"], capture_output=True, text=True, timeout=60)
        assert cleanup.returncode == 0, cleanup.stderr
        complete = _complete_runs(out)
        # runs complete before a kill keep their bytes
        assert {k: complete[k] for k in kept} == kept, f"attempt {attempt}"
        kept = complete
    final = subprocess.run([*HOSTWIRE, "run", str(config_path), "--out", str(out), "--resume", "--no-progress"],
                           capture_output=True, text=True, timeout=300)
    assert final.returncode == 0, final.stderr
    complete = _complete_runs(out)
    assert set(complete) == set(keys)  # no run missing, none twice (the run id carries the key)
    assert {k: complete[k] for k in kept} == kept
    book = json.loads((out / "campaign.json").read_text())
    assert book["state"] == "complete"
    assert {r["run_id"]: r["key"] for r in book["runs"]} == keys
    assert all(r["status"] == "complete" for r in book["runs"])
    for run_id in keys:
        manifest = json.loads((out / run_id / "manifest.json").read_text())
        assert manifest["config"]["run_key"] == keys[run_id]
    assert [line for line in subprocess.run([*HOSTWIRE, "doctor"], capture_output=True, text=True).stdout.splitlines()
            if line.startswith("LEFT")] == []
