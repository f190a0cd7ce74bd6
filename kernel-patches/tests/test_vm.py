"""Boot tests of the guest kernels (make test-vm; make kernel first). Each boots QEMU: with KVM in
seconds, emulated (TCG) in tens of seconds."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hostwire import paths

from hostwire.record import vm
from hostwire.read.sched import read_sched_tsv

pytestmark = [pytest.mark.vm, pytest.mark.privileged, pytest.mark.slow]

LOOPS = 100_000


def tool(name: str) -> str:
    return str(paths.tool(name))


def booted(flavour: str, command: str, share: Path, timeout_s: float = 900) -> vm.Boot:
    result = vm.boot(flavour, command, share, timeout_s=timeout_s)
    assert result.failure() is None, (result.failure(), (share / "guest.log").read_text()[-3000:],
                                      (share / "console.log").read_text()[-3000:])
    return result


@pytest.fixture(scope="module", autouse=True)
def kernels_built() -> None:
    for flavour in vm.FLAVOURS:
        try:
            vm.kernel_image(flavour)
        except Exception as exc:  # noqa: BLE001 - the one line says what to do
            pytest.fail(str(exc), pytrace=False)


def test_every_boot_is_fresh(tmp_path: Path) -> None:
    first = booted("stock", "cat /proc/sys/kernel/random/boot_id > again", tmp_path / "a")
    second = booted("stock", "true", tmp_path / "b")
    assert first.boot_id and second.boot_id and first.boot_id != second.boot_id
    assert (tmp_path / "a" / "again").read_text().strip() == first.boot_id
    assert first.kernel_release.endswith("-hostwire") and first.boot_s > 0
    assert first.emulated == (not vm.kvm_usable())


def test_a_guest_that_never_boots_is_one_line(tmp_path: Path) -> None:
    result = vm.boot("stock", "true", tmp_path, timeout_s=300, init=Path("/no/such/init"))
    assert not result.timed_out and result.failure() == (
        f"the stock guest never reached its command (console: {tmp_path / 'console.log'})")
    assert "Requested init /no/such/init failed" in (tmp_path / "console.log").read_text()


def test_a_guest_that_hangs_is_killed(tmp_path: Path) -> None:
    result = vm.boot("stock", "sleep 100000", tmp_path, timeout_s=60)
    assert result.timed_out and result.failure().startswith("the stock guest was killed after its timeout")
    assert not [p for p in Path("/proc").iterdir() if p.name.isdigit() and str(tmp_path).encode()
                in _cmdline(p)]


def _cmdline(proc: Path) -> bytes:
    try:
        return (proc / "cmdline").read_bytes()
    except OSError:
        return b""


def _executable_ranges(maps: str) -> np.ndarray:
    rows = []
    for line in maps.splitlines():
        span, perms = line.split()[:2]
        if "x" in perms:
            lo, hi = (int(v, 16) for v in span.split("-"))
            rows.append((lo, hi))
    return np.array(rows, dtype=np.uint64)


def test_schedtrace_agrees_with_tracefs(tmp_path: Path) -> None:
    """A ping-pong of 100,000 loops with /proc/schedtrace and tracefs sched_switch recording at
    once: the same switches, in the same order on each CPU, and every table-1 field plausible."""
    script = f"""
{tool('hw-schedtrace')} -o tracefs -e sched:sched_switch -- \\
  {tool('hw-schedtrace')} proc -o ring -- sh -c '
    {tool('hw-bench')} pingpong --loops {LOOPS} --cpu 0 > pingpong.txt & pid=$!
    sleep 0.5; cat /proc/$pid/maps > maps.txt; echo $pid > pingpong.pid; wait $pid'
"""
    boot = booted("patched", script, tmp_path)
    assert "-hostwire" in boot.kernel_release
    _, ring = read_sched_tsv(tmp_path / "ring" / "sched.tsv")
    _, traced = read_sched_tsv(tmp_path / "tracefs" / "sched.tsv")
    ring = ring[ring["event"] == "sched_switch"]
    traced = traced[traced["event"] == "sched_switch"]
    lo, hi = int(ring["t_ns"].min()), int(ring["t_ns"].max())
    inside = traced[(traced["t_ns"] >= lo) & (traced["t_ns"] <= hi)]
    assert len(ring) > 2 * LOOPS
    assert abs(len(ring) - len(inside)) <= 0.01 * len(inside), (len(ring), len(inside))
    # the same switches, CPU by CPU: each record's nearest tracefs switch on its CPU (both stamps are
    # CLOCK_MONOTONIC; the ring stamps a moment after trace_sched_switch) is the same switch, and a
    # different one for every record
    for cpu, mine in ring.groupby("cpu"):
        theirs = traced[traced["cpu"] == cpu]
        at, bt = mine["t_ns"].to_numpy(), theirs["t_ns"].to_numpy()
        i = np.clip(np.searchsorted(bt, at), 1, len(bt) - 1)
        nearest = np.where(np.abs(bt[i] - at) < np.abs(bt[i - 1] - at), i, i - 1)
        same = ((mine["prev_pid"].to_numpy() == theirs["prev_pid"].to_numpy()[nearest])
                & (mine["next_pid"].to_numpy() == theirs["next_pid"].to_numpy()[nearest]))
        assert same.mean() >= 0.99 and len(np.unique(nearest)) >= 0.99 * len(nearest), (cpu, same.mean())
        lag = at - bt[nearest]
        assert 0 <= np.median(lag) < 1_000_000, (cpu, np.median(lag))
    # a task's CPU-usage counter never decreases
    for col_pid, col_run in (("prev_pid", "prev_runtime_ns"), ("next_pid", "next_runtime_ns")):
        steps = ring[[col_pid, col_run, "t_ns"]].sort_values("t_ns", kind="stable").groupby(col_pid)[col_run].diff()
        assert (steps.dropna() >= 0).all()
    # the ping-pong's user program counters lie in its mapped text: while it runs hw-bench (before
    # that it was the shell that forked it; during the execve the old program's counter remains
    # until the call returns), and until it exits (an exiting task has no user address space: 0)
    pid = int((tmp_path / "pingpong.pid").read_text())
    ranges = _executable_ranges((tmp_path / "maps.txt").read_text())
    mine = ring[(ring["prev_pid"] == pid) & (ring["prev_comm"] == "hw-bench")].sort_values("t_ns")
    ips = np.array([int(str(v), 16) for v in mine["prev_user_ip"]], dtype=np.uint64)
    live = ips != 0
    assert live.sum() > LOOPS / 2
    if (~live).any():
        assert not live[np.argmax(~live):].any()  # the zeros come at the end only
    ips = ips[live]
    inside_text = ((ips[:, None] >= ranges[:, 0]) & (ips[:, None] < ranges[:, 1])).any(axis=1)
    assert inside_text.mean() >= 0.999, inside_text.mean()
    # the rest of table 1: states, priorities, queue lengths
    assert set(ring["prev_state"].astype(int)) <= {0, 1, 2, 4, 8, 16, 32, 64, 128, 256}
    assert (ring.loc[ring["preempt"].astype(int) == 1, "prev_state"].astype(int) == 256).all()
    assert ring["next_prio"].between(0, 139).all() and (ring["nr_running"] >= 0).all()
    assert int(json.loads((tmp_path / "ring" / "sched.json").read_text())["buffers"][0].get("lost", 0)) == 0


def test_quick_campaign_in_vm_mode(tmp_path: Path) -> None:
    """Every run boots a fresh guest (boot ids differ), records its kernel timeline from
    /proc/schedtrace, its results land in its run directory, and the analysis and report mark
    the emulated timing."""
    from hostwire.campaign.analyze import analyze_campaign
    from hostwire.campaign.batch import run_campaign
    from hostwire.campaign.config import load_config
    from hostwire.campaign.report import build_report

    config_path = tmp_path / "vm.toml"
    config_path.write_text("[campaign]\nname = 'vmtest'\n[host]\nmode = 'vm'\nkernel = 'patched'\n"
                           "[defaults]\nwarmup_s = 0.5\nduration_s = 2.0\nquiet_s = 0.3\nkernel_source = 'proc'\n"
                           "[grid]\nsenders = [1, 2]\nbackground = [1]\n")
    out = tmp_path / "campaign"
    result = run_campaign(load_config(config_path), out)
    assert [r["status"] for r in result.runs] == ["complete", "complete"], result.runs
    boots = []
    for entry in result.runs:
        run_dir = out / entry["run_id"]
        manifest = json.loads((run_dir / "manifest.json").read_text())
        guest = manifest["vm"]
        assert guest["flavour"] == "patched" and guest["kernel_release"].endswith("-hostwire")
        assert manifest["host"]["kernel_release"] == guest["kernel_release"]
        assert (run_dir / "vm-boot.log").stat().st_size > 0 and (run_dir / "raw" / "wire.pcap").stat().st_size > 0
        # the kernel timeline came from the patch's ring, into the usual files
        assert (run_dir / "raw" / "schedtrace.txt").stat().st_size > 0
        assert "# backend: proc" in (run_dir / "raw" / "sched.tsv").read_text(errors="replace")[:2000]
        assert manifest["losses"]["sched_lost_events"] == 0
        boots.append(guest["boot_id"])
    assert len(set(boots)) == 2 and all(boots)
    summary = analyze_campaign(out)
    assert set(summary["host_mode"]) == {"vm"}
    assert list(summary["timing_emulated"]) == [int(not vm.kvm_usable())] * 2
    report = build_report(out)
    text = Path(report).read_text()
    assert ("Timings are emulated" in text) == (not vm.kvm_usable())


def test_ring_records_the_io_calls_of_chosen_processes(tmp_path: Path) -> None:
    """The ping-pong passes one byte through pipes: each loop, each process writes one byte and
    reads one. The ring's system-call records of it (and of the child it forks) say exactly that;
    and the trace event schedtrace:sched_switch_ext carries the switch records to tracefs."""
    loops = 2000
    events = "/sys/kernel/tracing/events/schedtrace/sched_switch_ext"
    script = f"""
{tool('hw-schedtrace')} proc -s -o ring -- {tool('hw-bench')} pingpong --loops {loops} --cpu 0
{tool('hw-schedtrace')} -o tracefs -e schedtrace:sched_switch_ext -- {tool('hw-bench')} pingpong --loops {loops} --cpu 0
test -d {events}
"""
    booted("patched", script, tmp_path)
    from hostwire.read.syscalls import read_syscalls

    calls = read_syscalls(tmp_path / "ring" / "syscalls.tsv")
    assert calls.attrs["meta"]["backend"] == "proc"
    one_byte = calls[calls["result"] == 1]
    for call in ("write", "read"):
        per_process = one_byte[one_byte["call"] == call].groupby("pid").size()
        assert len(per_process) == 2 and (per_process >= loops).all(), (call, per_process)
    assert not calls["unfinished"].any()
    _, ext = read_sched_tsv(tmp_path / "tracefs" / "sched.tsv")
    ext = ext[ext["event"] == "sched_switch_ext"]
    assert len(ext) > 2 * loops
    for column in ("prev_runtime_ns", "prev_user_ip", "next_vruntime", "next_deadline", "queue_vruntime",
                   "nr_running", "cfs_queued", "rt_running", "net_backlog", "tcp_mem_pages"):
        assert column in ext.columns and ext[column].notna().all(), column
