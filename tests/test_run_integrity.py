"""A run is never lost and never looks whole when it is not: bad points are refused before
anything starts, a full or read-only output directory gives one line, a runner killed with
SIGKILL at any moment leaves a run directory with a manifest and a reason, and doctor finds and
removes everything it left behind."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

import hostwire
from hostwire import manifest
from hostwire.errors import UsageError
from hostwire.record.runner import RunPoint
from hostwire.record.topology import list_namespaces

HOSTWIRE = [sys.executable, "-m", "hostwire"]


def hostwire_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*HOSTWIRE, *args], capture_output=True, text=True, timeout=timeout)


def own_namespaces(pid: int) -> list[str]:
    return [ns for ns in list_namespaces() if ns.startswith(f"hw{pid}-")]


def tracefs_instances(pid: int) -> list[str]:
    root = Path("/sys/kernel/tracing/instances")
    return [p.name for p in root.glob(f"hw-{pid}*")] if root.is_dir() else []


@pytest.mark.parametrize("change, named", [
    ({"senders": -1}, "senders = -1"),
    ({"senders": 100000}, "senders = 100000"),
    ({"senders": 0, "background": 0}, "at least one process"),
    ({"senders": 600, "background": 600}, "at most 1024"),
    ({"log_capacity": 0}, "log_capacity = 0"),
    ({"sieve_log2": 31}, "sieve_log2 = 31"),
    ({"read_size": 0}, "read_size = 0"),
    ({"write_size": 1 << 30}, "write_size"),
    ({"warmup_s": -1.0}, "warmup_s = -1.0"),
    ({"duration_s": 0}, "duration_s = 0"),
    ({"quiet_s": float("nan")}, "quiet_s"),
    ({"senders": "2"}, "senders = '2'"),
    ({"capture_side": "middle"}, "capture_side = 'middle'"),
    ({"link_rate": "fast"}, "link_rate = 'fast': expected a number and a unit"),
    ({"link_qdisc": "red"}, "link_qdisc = 'red': expected tbf, tbf-peak, htb or none"),
    ({"sender_cpus": "99"}, "sender_cpus = '99'"),
])
def test_impossible_points_are_refused_with_the_parameter_named(change: dict, named: str) -> None:
    with pytest.raises(UsageError, match=named.replace("(", r"\(").replace("+", r"\+")):
        replace(RunPoint(), **change).validate()


def test_default_point_is_valid_and_matches_hw_bench_defaults() -> None:
    RunPoint().validate()
    assert RunPoint().sieve_log2 == 20  # hw-bench main --log2 default (benchmark/main.c)


@pytest.mark.privileged("netns")
@pytest.mark.parametrize("senders", ["-1", "100000"])
def test_demo_refuses_a_bad_point_before_anything_starts(tmp_path: Path, build_dir: Path, senders: str) -> None:
    proc = subprocess.Popen([*HOSTWIRE, "demo", "--out", str(tmp_path), "--senders", senders],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 2, stderr
    assert stderr.strip().splitlines() == [f"hostwire: senders = {senders}: expected a whole number from 0 to 1000"]
    assert list(tmp_path.iterdir()) == []
    assert own_namespaces(proc.pid) == []


@pytest.fixture
def small_mount(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs, removed afterwards."""
    mount = tmp_path / "mnt"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.mark.privileged()
def test_read_only_output_gives_one_line_naming_the_path(small_mount: Path, build_dir: Path) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(small_mount)], check=True)
    proc = hostwire_cli("demo", "--out", str(small_mount / "runs"), "--duration", "1", timeout=60)
    assert proc.returncode == 1
    errors = [line for line in proc.stderr.splitlines() if "recording run" not in line]
    assert len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert f"failed to create {small_mount}/runs/" in errors[0] and "Read-only file system" in errors[0]


@pytest.mark.privileged("netns", "tracefs")
def test_full_disk_gives_one_line_and_leaves_nothing_that_looks_whole(small_mount: Path, build_dir: Path) -> None:
    proc = hostwire_cli("demo", "--out", str(small_mount), "--duration", "1", "--warmup", "0.3", timeout=120)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr and "Logging error" not in proc.stderr, proc.stderr
    final = [line for line in proc.stderr.splitlines() if line.startswith("hostwire: ") and "No space" in line]
    assert final and str(small_mount) in final[-1], proc.stderr
    (run_dir,) = [p for p in small_mount.iterdir() if not p.name.startswith(".")]
    assert run_dir.name.endswith(".partial")
    # No temporary or empty JSON file is left beside the data; the manifest is whole.
    leftovers = [p for p in run_dir.rglob("*") if p.name.endswith(".tmp") or (p.suffix == ".json" and
                                                                               p.stat().st_size == 0)]
    assert leftovers == []
    run = hostwire.load_run(run_dir)
    assert run.status in ("partial", "failed") and run.reason
    runner = run.manifest["runner"]["pid"]
    assert own_namespaces(runner) == [] and tracefs_instances(runner) == []


@pytest.mark.privileged("netns", "tracefs")
@pytest.mark.slow
@pytest.mark.long
def test_runner_killed_at_random_moments_always_leaves_a_marked_run(
        tmp_path: Path, build_dir: Path, processes_mentioning: Callable[[str], list[int]]) -> None:
    """SIGKILL of `hostwire demo` at 20 random moments of its run (set-up, collectors, warm-up,
    window, quiet time, teardown): each time one run directory with a manifest, which doctor
    --cleanup marks with a reason, and nothing left running or set up."""
    rng = random.Random(20261123)
    planned_s = 0.3 + 1.0 + 0.5 + 2.0  # warm-up, window, quiet, set-up and teardown
    outcomes: dict[str, int] = {}
    for attempt in range(20):
        out = tmp_path / f"k{attempt}"
        proc = subprocess.Popen([*HOSTWIRE, "demo", "--out", str(out), "--duration", "1", "--warmup", "0.3"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        assert proc.stderr is not None
        assert "recording run" in proc.stderr.readline()
        time.sleep(rng.uniform(0.0, planned_s))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 20  # children stop on their own (PR_SET_PDEATHSIG)
        while processes_mentioning(str(out)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert processes_mentioning(str(out)) == [], f"attempt {attempt}: processes left"
        cleanup = hostwire_cli("doctor", "--cleanup", timeout=60)
        assert cleanup.returncode == 0, cleanup.stderr
        assert own_namespaces(proc.pid) == [] and tracefs_instances(proc.pid) == []
        runs = [p for p in out.iterdir() if not p.name.startswith(".")] if out.exists() else []
        assert len(runs) == 1, f"attempt {attempt}: {runs}"
        data = json.loads((runs[0] / "manifest.json").read_text())
        if data["status"] == "complete":
            assert not runs[0].name.endswith(".partial")
        else:
            assert data["status"] in ("partial", "failed") and data["reason"], data
            assert runs[0].name.endswith(".partial")
        if data["reason"].startswith(manifest.KILLED_REASON):
            assert "window_ns_recorded" in data
        outcomes[data["status"]] = outcomes.get(data["status"], 0) + 1
    assert outcomes.get("partial", 0) >= 10, outcomes  # most kills land inside the run
    assert not [line for line in hostwire_cli("doctor").stdout.splitlines() if line.startswith("LEFT")]


@pytest.mark.privileged("netns")
def test_doctor_names_what_a_dead_runner_left(tmp_path: Path) -> None:
    child = subprocess.Popen(["true"])  # a pid that has just ended
    child.wait()
    namespace = f"hw{child.pid}-x1-tx"
    subprocess.run(["ip", "netns", "add", namespace], check=True)
    try:
        report = hostwire_cli("doctor")
        assert f"LEFT    stale network namespace {namespace} -> fix: hostwire doctor --cleanup" in report.stdout
        assert report.returncode == 1
        cleanup = hostwire_cli("doctor", "--cleanup")
        assert f"removed namespace {namespace}" in cleanup.stdout
        assert namespace not in list_namespaces()
    finally:
        subprocess.run(["ip", "netns", "del", namespace], capture_output=True)


@pytest.mark.privileged("netns", "tracefs")
def test_shaper_drops_are_read_from_the_kernel_into_the_manifest(tmp_path: Path, build_dir: Path) -> None:
    """Eight senders on a 10 Mbit/s link with tbf's 50 ms queue overflow it: its drops and the
    frames it passed are in the manifest, and the drops show on the wire as retransmissions."""
    from hostwire.metrics.streams import delivered_bytes, label_streams
    from hostwire.record.runner import record_run

    point = RunPoint(senders=8, background=0, warmup_s=0.3, duration_s=1.5, quiet_s=0.3, kernel_trace=False,
                     link_queue=0)
    record = record_run(tmp_path, "drops", point)
    assert record.status == "complete", record.reason
    link = record.manifest["link"]
    drops = record.manifest["losses"]["qdisc_drops"]
    assert drops == link["qdisc_end"]["drops"] - link["qdisc_start"]["drops"] > 0
    frames = hostwire.load_run(record.directory).df_frames()
    sent = frames[frames["src"].astype(str) == "198.18.0.1"]
    # The tap sits after the shaper: what it passed is what the capture saw leave (plus the few
    # frames that are not TCP or UDP, such as ARP and IPv6 neighbour discovery).
    assert 0 <= link["qdisc_packets"] - len(sent) <= 20
    assert int(delivered_bytes(label_streams(frames))["retransmit"].sum()) > 0


@pytest.mark.privileged("netns", "tracefs")
def test_default_run_captures_at_the_senders_end_with_wire_like_gaps(tmp_path: Path, build_dir: Path) -> None:
    """The default capture point is the sender's veth, where the shaper's frames are stamped as
    they leave (capture/README.md): under 1 % of the gaps below a frame time on a quiet host
    (the receiver's end showed 3-6 %), no shaper drop with the default 1000-frame queue, and the
    capture's metadata names its file relative to the run."""
    from hostwire.metrics.compute import table
    from hostwire.read.resources import df_cpu_use
    from hostwire.record.runner import record_run

    record = record_run(tmp_path, "tx", RunPoint(senders=2, background=0, warmup_s=0.5, duration_s=2.0,
                                                 quiet_s=0.3, kernel_trace=False))
    assert record.status == "complete", record.reason
    wirecap = json.loads((record.directory / "raw" / "wirecap.json").read_text())
    assert wirecap["pcap"] == "wire.pcap" and wirecap["interface"].endswith("t")  # hw<tag>t: the sender's veth
    assert record.manifest["losses"]["qdisc_drops"] == 0
    sanity = table("sanity", record.directory)
    counters = dict(zip(sanity["counter"], sanity["value"]))
    use = df_cpu_use(hostwire.load_run(record.directory).df_resources())
    stolen = float(use.loc[use["cpu"] == 1, "steal_share"].mean())
    assert counters["impossible_share"] < (0.01 if stolen < 0.02 else 0.05), (counters["impossible_share"], stolen)
    assert counters["marked"] == 0, sanity.to_string()


@pytest.mark.privileged("netns")
def test_sender_cpu_cap_limits_the_sender_host_only_and_leaves_no_group(tmp_path: Path, build_dir: Path) -> None:
    """sender_cpu_share puts hw-bench main and its children in a cgroup with a CPU quota: a
    background process capped at a tenth of a CPU completes about a tenth of the sieve rounds it
    completes uncapped (it shares the cap with the sender), and the group is gone after the run."""
    from hostwire.record.cpulimit import cpu_hierarchy
    from hostwire.record.runner import record_run

    base = RunPoint(senders=1, background=1, warmup_s=0.3, duration_s=1.5, quiet_s=0.3, kernel_trace=False,
                    capture=False)
    rounds = {}
    for share in (0.0, 0.1):
        record = record_run(tmp_path, f"cap{int(share * 100)}", replace(base, sender_cpu_share=share))
        assert record.status == "complete", record.reason
        procs = {p["role"]: p for p in record.bench.summary["processes"]}
        rounds[share] = procs["bg-0"]["calls_window"]
        if share:  # the kernel held the group back, period after period
            cap = record.manifest["cpu_cap"]
            assert cap["share"] == 0.1 and cap["nr_throttled"] > 0.5 * 1.5 / 0.1, cap
        else:
            assert "cpu_cap" not in record.manifest
    assert rounds[0.1] < 0.5 * rounds[0.0], rounds
    root = cpu_hierarchy()
    assert root is not None
    assert not [p for p in root[0].iterdir() if p.name.startswith(f"hw{os.getpid()}-")]
