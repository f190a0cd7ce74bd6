"""Campaign configs are checked in full before anything starts; a campaign records every point of
its grid, keyed so that --resume skips what is complete and keeps what an attempt recorded."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hostwire.campaign.batch import plan, run_campaign, run_key
from hostwire.campaign.config import load_config
from hostwire.errors import UsageError
from hostwire.paths import REPO_ROOT
from hostwire.record.runner import RunPoint


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "c.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("text, message", [
    ("[defaults]\nduraton_s = 2\n", r"c.toml:2: defaults.duraton_s: unknown key \(did you mean 'duration_s'\?\)"),
    ("[defaults]\nwarmup_s = 1\nduration_s = \"2\"\n", r"c.toml:3: defaults.duration_s: expected a number, got str '2'"),
    ("[grid]\nbackground = [0]\nsenders = [0, 1]\n", r"c.toml:3: grid.senders: a run needs at least one process"),
    ("[grid]\nsenders = 3\n", r"c.toml:2: grid.senders: expected a non-empty list"),
    ("[campain]\nname = 'x'\n", r"c.toml:1: campain: unknown section or key \(did you mean 'campaign'\?\)"),
    ("[campaign]\norder = 'random'\n", r"c.toml:2: campaign.order: expected one of as-written, shuffled"),
    ("[grid]\nlink_rate = ['10mbit', 'fast']\n", r"c.toml:2: grid.link_rate: expected a number and a unit, e.g. 10mbit"),
    ("[defaults]\ncapture = 1\n", r"c.toml:2: defaults.capture: expected true or false, got 1"),
    ("[defaults\n", r"c.toml: not valid TOML"),
    ("[defaults]\nkernel_source = 'ring'\n", r"c.toml:2: defaults.kernel_source: .*expected one of tracefs, event"),
    ("[defaults]\nkernel_source = 'proc'\n", r"c.toml:2: defaults.kernel_source: .*expected one of tracefs, event"),
    ("[host]\nmode = 'qemu'\n", r"c.toml:2: host.mode: expected one of netns, vm, got 'qemu'"),
    ("[host]\nkernel = 'custom'\n", r"c.toml:2: host.kernel: expected one of stock, patched"),
    ("[host]\nkernal = 'stock'\n", r"c.toml:2: host.kernal: unknown key \(did you mean 'kernel'\?\)"),
    ("[host]\nvm_timeout_s = 0\n", r"c.toml:2: host.vm_timeout_s: expected a positive number"),
    ("[grid]\nsenders = [1]\n[variants.a]\nlink_rate = '1mbit'\nsenders = 2\n",
     r"c.toml:5: variants.a.senders: also a \[grid\] key: give it in one place"),
    ("[variants.a]\nlink_qdsic = 'none'\n", r"c.toml:2: variants.a.link_qdsic: unknown key \(did you mean 'link_qdisc'\?\)"),
    ("[variants.a]\nsender_cpu_share = 0.001\n", r"c.toml:2: variants.a.sender_cpu_share: at least 0.01"),
    ("[variants]\na = 1\n", r"c.toml:2: variants.a: expected a \[variants.NAME\] table"),
])
def test_config_errors_name_file_line_and_key(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        load_config(write(tmp_path, text))


def test_missing_config_is_named(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"nothere.toml: no such campaign file"):
        load_config(tmp_path / "nothere.toml")


def test_cli_config_errors_are_one_line_and_exit_2(tmp_path: Path) -> None:
    path = write(tmp_path, "[defaults]\nduraton_s = 2\n")
    proc = subprocess.run([sys.executable, "-m", "hostwire", "run", str(path)], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"hostwire: {path}:2: defaults.duraton_s: unknown key (did you mean 'duration_s'?)"]
    assert not (REPO_ROOT / "runs" / "c").exists()


def test_grid_is_the_cross_product_in_written_order_with_defaults(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, "[defaults]\nduration_s = 2\n[grid]\nsenders = [1, 2]\n"
                                         "background = [0, 5, 10]\n[campaign]\nrepetitions = 2\n"))
    runs = plan(config, facts={})
    assert len(runs) == 12
    assert [(r.point.senders, r.point.background) for r in runs[:6]] == [
        (1, 0), (1, 5), (1, 10), (2, 0), (2, 5), (2, 10)]
    assert {r.point.duration_s for r in runs} == {2.0}
    assert len({r.key for r in runs}) == 12  # repetitions are distinct runs
    assert config.resolved()["defaults"]["duration_s"] == 2.0
    assert config.resolved()["defaults"]["sieve_log2"] == RunPoint().sieve_log2


def test_variants_record_the_grid_once_each_over_the_defaults(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, "[defaults]\nlink_rate = '10mbit'\nduration_s = 2\n"
                                         "[grid]\nsenders = [1, 2]\nbackground = [0, 3]\n"
                                         "[variants.capped]\nsender_cpu_share = 0.05\nlink_qdisc = 'none'\n"
                                         "[variants.shaped]\nlink_rate = '20mbit'\n"))
    runs = plan(config, facts={})
    assert [(r.point.sender_cpu_share, r.point.link_qdisc, r.point.link_rate, r.point.senders, r.point.background)
            for r in runs] == [
        (0.05, "none", "10mbit", 1, 0), (0.05, "none", "10mbit", 1, 3), (0.05, "none", "10mbit", 2, 0),
        (0.05, "none", "10mbit", 2, 3), (0.0, "tbf-peak", "20mbit", 1, 0), (0.0, "tbf-peak", "20mbit", 1, 3),
        (0.0, "tbf-peak", "20mbit", 2, 0), (0.0, "tbf-peak", "20mbit", 2, 3)]
    assert len({r.key for r in runs}) == 8
    assert config.resolved()["variants"] == {"capped": {"sender_cpu_share": 0.05, "link_qdisc": "none"},
                                             "shaped": {"link_rate": "20mbit"}}
    # --set overrides the variants' value too
    overridden = load_config(config.path, overrides={"link_rate": "30mbit"})
    assert {p.link_rate for p in overridden.points()} == {"30mbit"}


def test_same_seed_same_order_other_seed_other_order(tmp_path: Path) -> None:
    text = "[campaign]\norder = 'shuffled'\nseed = {}\n[grid]\nsenders = [1, 2, 5, 10]\nbackground = [0, 1, 2]\n"
    orders = [[r.run_id for r in plan(load_config(write(tmp_path, text.format(seed))), facts={})]
              for seed in (7, 7, 8)]
    assert orders[0] == orders[1] != orders[2]
    assert sorted(orders[0]) == sorted(orders[2])


def test_key_changes_with_any_parameter_and_with_the_host() -> None:
    base = run_key(RunPoint(), 0, {"kernel_release": "6.1"})
    assert run_key(RunPoint(), 0, {"kernel_release": "6.1"}) == base
    assert run_key(RunPoint(quiet_s=0.6), 0, {"kernel_release": "6.1"}) != base
    assert run_key(RunPoint(), 1, {"kernel_release": "6.1"}) != base
    assert run_key(RunPoint(), 0, {"kernel_release": "6.12"}) != base


def test_shipped_configs_are_valid() -> None:
    quick = load_config(REPO_ROOT / "configs" / "quick.toml")
    # both regimes: the capped host with no shaper (CPU-limited) and the shaped link (wire-limited)
    points = quick.points()
    assert len(points) == 12 and {(p.senders, p.background) for p in points} == {
        (m, n) for m in (1, 2) for n in (0, 2, 6)}
    assert {(p.sender_cpu_share, p.link_qdisc) for p in points} == {(0.05, "none"), (0.0, "tbf-peak")}
    assert len(plan(load_config(REPO_ROOT / "configs" / "collectors.toml"), facts={})) == 25
    assert len(plan(load_config(REPO_ROOT / "configs" / "paper-regime.toml"), facts={})) == 36
    paper = load_config(REPO_ROOT / "configs" / "paper.toml")
    assert len(plan(paper, facts={})) == 108
    assert {p.duration_s for p in paper.points()} == {20.0}


@pytest.mark.privileged("netns")
def test_campaign_records_every_point_and_resume_skips_complete_runs(tmp_path: Path, build_dir: Path) -> None:
    config = load_config(write(tmp_path, "[defaults]\nwarmup_s = 0.3\nduration_s = 0.8\nquiet_s = 0.3\n"
                                         "kernel_trace = false\n[grid]\nsenders = [1, 2]\nbackground = [1]\n"))
    out = tmp_path / "campaign"
    result = run_campaign(config, out)
    assert [r["status"] for r in result.runs] == ["complete", "complete"]
    book = json.loads((out / "campaign.json").read_text())
    assert book["state"] == "complete" and [r["key"] for r in book["runs"]] == [p.key for p in plan(config)]
    for entry in book["runs"]:
        manifest = json.loads((out / entry["run_id"] / "manifest.json").read_text())
        assert manifest["config"]["run_key"] == entry["key"]
        assert manifest["config"]["defaults"]["duration_s"] == 0.8
    stamps = {p.name: (p / "manifest.json").stat().st_mtime_ns for p in out.iterdir() if p.is_dir()}
    # An attempt that was interrupted is kept aside, not deleted, and the run is recorded again.
    (out / result.runs[1]["run_id"]).rename(out / (result.runs[1]["run_id"] + ".partial"))
    again = run_campaign(config, out, resume=True)
    assert [r["status"] for r in again.runs] == ["complete", "complete"]
    assert again.runs[0].get("resumed") and not again.runs[1].get("resumed")
    assert (out / result.runs[0]["run_id"] / "manifest.json").stat().st_mtime_ns == stamps[result.runs[0]["run_id"]]
    assert (out / (result.runs[1]["run_id"] + ".partial-1") / "manifest.json").exists()
    with pytest.raises(UsageError, match="holds runs already"):
        run_campaign(config, out)


def test_alternating_order_runs_the_grid_forwards_then_backwards(tmp_path: Path) -> None:
    """A/B/B/A: a drift of the host over the campaign falls on every collector set alike."""
    config = load_config(write(tmp_path, "[campaign]\norder = 'alternating'\nrepetitions = 3\n"
                                         "[grid]\ncollectors = ['none', 'kernel']\n"))
    assert [(r.point.collectors, r.repetition) for r in plan(config, facts={})] == [
        ("none", 0), ("kernel", 0), ("kernel", 1), ("none", 1), ("none", 2), ("kernel", 2)]


def test_host_section_defaults_and_vm_mode(tmp_path: Path) -> None:
    plain = load_config(write(tmp_path, "[grid]\nsenders = [1]\n"))
    assert plain.host == {"mode": "netns", "kernel": "stock", "vm_timeout_s": 900.0}
    guest = load_config(REPO_ROOT / "configs" / "vm-quick.toml")
    assert guest.host == {"mode": "vm", "kernel": "patched", "vm_timeout_s": 900.0}
    assert guest.resolved()["host"]["mode"] == "vm"


def test_vm_mode_without_kernels_says_make_kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hostwire.errors import HostwireError

    monkeypatch.setenv("HOSTWIRE_KERNEL_BUILD", str(tmp_path / "none"))
    config = load_config(write(tmp_path, "[host]\nmode = 'vm'\n[grid]\nsenders = [1]\n"))
    with pytest.raises(HostwireError, match=r"the stock guest kernel is not built: .* \(run 'make kernel'\)"):
        run_campaign(config, tmp_path / "out")
    assert not (tmp_path / "out").exists()
