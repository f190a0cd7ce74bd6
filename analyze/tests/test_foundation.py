"""The hostwire package's foundation: CLI conventions, the TSV reader, doctor."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import hostwire
from hostwire import units
from hostwire.errors import InputError
from hostwire.record import doctor, topology
from hostwire.read.tsv import read_tsv

HOSTWIRE = [sys.executable, "-m", "hostwire"]


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*HOSTWIRE, *args], capture_output=True, text=True, timeout=120)


def test_version() -> None:
    proc = run_cli("--version")
    head = subprocess.run(["git", "-C", str(Path(hostwire.__file__).parents[2]), "rev-parse", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    assert proc.returncode == 0 and proc.stdout.startswith(f"hostwire {hostwire.__version__} (revision {head}, ")


def test_unknown_command_is_one_line_exit_2() -> None:
    proc = run_cli("frobnicate")
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "invalid choice: 'frobnicate'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_help_lists_commands() -> None:
    proc = run_cli("--help")
    assert proc.returncode == 0
    for command in ("doctor", "demo"):
        assert command in proc.stdout


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_tsv_reader_reads_metadata_and_typed_columns(tmp_path: Path) -> None:
    path = write(tmp_path / "a.tsv", "# format: hostwire-tsv 1\n# kind: demo\n# pid: 12\nt_ns\tevent\tbytes\n"
                                     "100\twrite_start\t8192\n250\twrite_end\t4096\n")
    log = read_tsv(path, dtypes={"t_ns": "int64", "bytes": "int64"})
    assert log.meta == {"format": "hostwire-tsv 1", "kind": "demo", "pid": "12"}
    assert list(log.df.columns) == ["t_ns", "event", "bytes"]
    assert log.df["t_ns"].tolist() == [100, 250] and str(log.df["t_ns"].dtype) == "int64"
    assert log.df["bytes"].sum() == 12288


def test_tsv_reader_accepts_a_header_without_records(tmp_path: Path) -> None:
    path = write(tmp_path / "a.tsv", "# format: hostwire-tsv 1\nt_ns\tbytes\n")
    assert read_tsv(path).df.empty


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "a.tsv:1: empty file"),
        ("t_ns\tbytes\n1\t2\n", "a.tsv:1: expected '# format: hostwire-tsv N', got ''"),
        ("# format: hostwire-tsv 3\nt_ns\n", "format version 3 is newer than this hostwire reads (2)"),
        ("# format: other 1\nt_ns\n", "expected '# format: hostwire-tsv N', got 'other 1'"),
        ("# format: hostwire-tsv 1\n# no colon here\n", "a.tsv:2: expected '# key: value'"),
        ("# format: hostwire-tsv 1\n", "no column header line"),
        ("# format: hostwire-tsv 1\nt_ns\tbytes\n1\t2\n3\tx\n", "malformed record"),
    ],
)
def test_tsv_reader_rejects_bad_input_naming_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path / "a.tsv", text)
    with pytest.raises(InputError, match="a.tsv") as info:
        read_tsv(path, dtypes={"t_ns": "int64", "bytes": "int64"})
    assert message in str(info.value)


def test_tsv_reader_names_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"nope.tsv: cannot open"):
        read_tsv(tmp_path / "nope.tsv")


def test_rate_and_cpu_parsing() -> None:
    assert units.parse_rate("10mbit") == 10_000_000
    assert units.parse_rate("1.5gbit") == 1_500_000_000
    assert units.parse_cpu_list("0,2-3") == [0, 2, 3]
    with pytest.raises(hostwire.UsageError):
        units.parse_rate("10 furlongs")
    with pytest.raises(hostwire.UsageError):
        units.parse_cpu_list("a-b")


@pytest.mark.privileged("netns", "tracefs")
def test_doctor_reports_every_facility_ok_here() -> None:
    from conftest import LEFTOVERS_BEFORE_SESSION
    proc = run_cli("doctor")
    not_ok = [line for line in proc.stdout.splitlines() if line.strip() and not line.startswith("ok ")]
    # a run killed before this session (by hand, or the OOM killer) is the machine's state, not a fault
    new = [line for line in not_ok if not any(old in line for old in LEFTOVERS_BEFORE_SESSION)]
    assert not new, proc.stdout
    assert proc.returncode == (1 if not_ok else 0), proc.stdout
    for facility in ("root", "tracefs", "network namespaces", "ptrace", "library libpcap", "library libtracefs",
                     "library libtraceevent", "CPUs"):
        assert f"ok      {facility}:" in proc.stdout


def test_doctor_names_the_fix_for_a_missing_facility(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(doctor, "TRACEFS_CANDIDATES", (Path("/nonexistent/tracing"),))
    finding = doctor.check_tracefs()
    assert not finding.ok and finding.fix == "mount -t tracefs nodev /sys/kernel/tracing"


@pytest.mark.privileged("netns", "tracefs")
def test_doctor_cleanup_removes_stale_namespaces_and_instances() -> None:
    # A pid that cannot be alive: above the kernel's pid_max.
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    stale_ns = f"hw{pid_max + 1}-t{os.getpid()}-tx"
    live_ns = f"hw{os.getpid()}-live-tx"
    subprocess.run(["ip", "netns", "add", stale_ns], check=True)
    subprocess.run(["ip", "netns", "add", live_ns], check=True)
    root = doctor.tracefs_root()
    assert root is not None
    stale_inst = root / "instances" / f"hw-{pid_max + 1}"
    live_inst = root / "instances" / f"hw-{os.getpid()}-live"
    stale_inst.mkdir()
    live_inst.mkdir()
    try:
        proc = run_cli("doctor", "--cleanup")
        assert proc.returncode == 0
        assert f"removed namespace {stale_ns}" in proc.stdout
        assert f"removed tracefs instance {stale_inst.name}" in proc.stdout
        assert stale_ns not in topology.list_namespaces()
        assert live_ns in topology.list_namespaces(), "a namespace whose owner lives must be kept"
        assert not stale_inst.exists()
        assert live_inst.exists(), "an instance whose owner lives must be kept"
    finally:
        for inst in (stale_inst, live_inst):
            if inst.exists():
                inst.rmdir()
        for ns in (stale_ns, live_ns):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
