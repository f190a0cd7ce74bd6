"""No output follows a symbolic link: a hostile link at every predictable name hostwire writes
(the outputs and their old temporary names) is replaced, never followed, and a symlinked output
folder (tables/, plots/, a run folder) is refused with one line. The file the links point at, owned
by the test, is unchanged."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hostwire.errors import HostwireError
from hostwire.safewrite import write_text, write_with

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "run-small"
PRECIOUS = b"owned by the test: must not change\n"


def _hostwire(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO / "analyze"))
    return subprocess.run([sys.executable, "-m", "hostwire", *args], capture_output=True, text=True, env=env,
                          timeout=300)


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    path = tmp_path / "victim"
    path.write_bytes(PRECIOUS)
    return path


@pytest.fixture
def campaign(tmp_path: Path) -> Path:
    root = tmp_path / "campaign"
    root.mkdir()
    for i in range(2):
        shutil.copytree(FIXTURE, root / f"run-{i}")
    return root


def test_links_at_every_output_name_are_replaced_not_followed(campaign: Path, victim: Path) -> None:
    names = [campaign / n for n in ("summary.parquet", "summary.csv", ".summary.csv.tmp", "report.html",
                                     ".report.html.tmp")]
    for run in ("run-0", "run-1"):
        (campaign / run / "tables").mkdir()
        names += [campaign / run / n for n in ("metrics.json", ".metrics.json.tmp")]
        names += [campaign / run / "tables" / n for n in ("idc.parquet", "contract.parquet", "intervals_hist.parquet",
                                                          "timeline-switches.parquet")]
    (campaign / "plots").mkdir()
    names += [campaign / "plots" / n for n in ("idc.png", "idc.svg")]
    for name in names:
        name.symlink_to(victim)
    analyzed = _hostwire("analyze", str(campaign), "--force", "--workers", "2")
    assert analyzed.returncode == 0, analyzed.stderr
    reported = _hostwire("report", str(campaign))
    assert reported.returncode == 0, reported.stderr
    assert victim.read_bytes() == PRECIOUS
    for name in names:
        if not name.name.endswith(".tmp") and name.parent.name != "plots":
            assert name.is_file() and not name.is_symlink(), name
    assert not (campaign / "summary.csv").is_symlink() and (campaign / "summary.csv").read_text().startswith("run_id")
    assert "<html" in (campaign / "report.html").read_text()


@pytest.mark.parametrize("folder", ["tables", "plots", "run"])
def test_a_symlinked_output_folder_is_refused_in_one_line(campaign: Path, tmp_path: Path, folder: str) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    if folder == "run":  # a run folder that is a link to a run kept elsewhere
        shutil.move(campaign / "run-1", elsewhere / "run-1")
        (campaign / "run-1").symlink_to(elsewhere / "run-1")
        watched = elsewhere / "run-1"
    else:
        if folder == "plots":
            assert _hostwire("analyze", str(campaign)).returncode == 0
        target = campaign / "plots" if folder == "plots" else campaign / "run-0" / "tables"
        target.symlink_to(elsewhere)
        watched = elsewhere
    before = sorted(p.name for p in watched.iterdir())
    result = _hostwire("report", str(campaign)) if folder == "plots" else \
        _hostwire("analyze", str(campaign), "--force", "--workers", "1")
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert "Traceback" not in result.stderr
    assert lines[-1].startswith("hostwire: ") and "symbolic link" in lines[-1], result.stderr
    assert sorted(p.name for p in watched.iterdir()) == before


def test_helper_replaces_a_link_and_leaves_no_temporary_on_failure(tmp_path: Path, victim: Path) -> None:
    target = tmp_path / "out.txt"
    target.symlink_to(victim)
    write_text(target, "new\n")
    assert target.read_text() == "new\n" and not target.is_symlink() and victim.read_bytes() == PRECIOUS

    def failing(handle: object) -> None:
        raise ValueError("writer failed")

    with pytest.raises(ValueError):
        write_with(tmp_path / "other.txt", failing)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt", "victim"]
    linked = tmp_path / "linked"
    linked.symlink_to(tmp_path)
    with pytest.raises(HostwireError, match="symbolic link"):
        write_text(linked / "x.txt", "x")
    with pytest.raises(HostwireError, match="symbolic link"):
        write_text(linked / "deeper" / "x.txt", "x", below=tmp_path, create=True)
    assert not (tmp_path / "deeper").exists() and not (tmp_path / "x.txt").exists()


def test_pcapcols_replaces_links_and_refuses_a_symlinked_folder(tmp_path: Path, victim: Path) -> None:
    from hostwire.paths import tool

    out = tmp_path / "cols"
    out.mkdir()
    for name in ("columns.json", ".columns.json.tmp"):
        (out / name).symlink_to(victim)
    done = subprocess.run([str(tool("hw-pcapcols")), str(FIXTURE / "raw" / "wire.pcap"), "-o", str(out)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert victim.read_bytes() == PRECIOUS
    assert not (out / "columns.json").is_symlink() and '"hostwire-columns 1"' in (out / "columns.json").read_text()
    (out / "t_ns.bin").unlink()
    (out / "t_ns.bin").symlink_to(victim)  # a column file that is a link is refused, not followed
    done = subprocess.run([str(tool("hw-pcapcols")), str(FIXTURE / "raw" / "wire.pcap"), "-o", str(out)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 or done.returncode == 1, done.stderr
    assert "symbolic link" in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert victim.read_bytes() == PRECIOUS
    linked = tmp_path / "linked"
    linked.symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    (tmp_path / "elsewhere").mkdir()
    done = subprocess.run([str(tool("hw-pcapcols")), str(FIXTURE / "raw" / "wire.pcap"), "-o", str(linked)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "symbolic link" in done.stderr, done.stderr
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_a_bare_file_name_is_written_in_the_working_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`hostwire timeline RUN -o x.pftrace`: the folder of a bare name is ".", which has no name of
    its own to open below its parent."""
    monkeypatch.chdir(tmp_path)
    write_text(Path("x.pftrace"), "trace")
    assert (tmp_path / "x.pftrace").read_text() == "trace"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.pftrace"]  # no temporary left
