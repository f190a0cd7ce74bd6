"""The patched kernel's custom:sched_switch_ext_tp, recorded by hw-schedtrace through tracefs like
any event, against the stock events and against ground truth built in the guest
(guest_workloads.py): a known number of runnable sieves on one CPU, a sender blocked on full
socket buffers, a signal left pending, a reader that falls behind, a followed process whose pid
comes back to an unrelated one. One boot of the patched kernel records it all (make test-vm)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hostwire import paths
from hostwire.read.sched import read_sched_json, read_sched_tsv
from hostwire.read.syscalls import read_syscalls
from hostwire.record import vm

# the boot, emulated on a loaded host, takes minutes: it counts into the first test's time
pytestmark = [pytest.mark.vm, pytest.mark.privileged, pytest.mark.slow, pytest.mark.timeout(2400)]

WORKLOADS = Path(__file__).with_name("guest_workloads.py")
EXT = "sched_switch_ext_tp"
SIEVES, SIEVE_CPU = 3, 1
NICE_0_LOAD = 1024  # PELT load of one always-runnable nice-0 task (scale_load_down(NICE_0_LOAD))
PCPU_RESERVE_BYTES = 1 << 20  # net.core.mem_pcpu_rsv: pages a CPU may hold back from TCP's count
SIGUSR1_BIT = 1 << (10 - 1)


def tool(name: str) -> str:
    return str(paths.tool(name))


@pytest.fixture(scope="module")
def guest(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One boot of the patched kernel, the event enabled from its command line in the top buffer
    (then disabled): the recordings the tests below read."""
    try:
        vm.kernel_image("patched")
    except Exception as exc:  # noqa: BLE001 - the one line says what to do
        pytest.fail(str(exc), pytrace=False)
    share = tmp_path_factory.mktemp("event")
    bench, schedtrace, workloads = tool("hw-bench"), tool("hw-schedtrace"), f"python3 {WORKLOADS}"
    event = f"/sys/kernel/tracing/events/custom/{EXT}"
    script = f"""set -e
cat {event}/enable > boot_enable.txt
grep -c ' {EXT}: ' /sys/kernel/tracing/trace > boot_records.txt || true
echo 0 > {event}/enable
export HW_BENCH={bench}
taskset -c 0 {schedtrace} -o ev --switch-ext -- sh -c '
  {workloads} sieves {SIEVES} 2.0 {SIEVE_CPU} sieves.json
  {workloads} blocked-sender sender.json
  {workloads} pending-signal signal.json
  {bench} pingpong --loops 2000 --cpu 0 > pingpong.txt' > ev.log 2>&1
{schedtrace} -o all -e sched:sched_switch -- {schedtrace} -o behind -b 4 --no-drain -e custom:{EXT} -- \\
  sh -c '{bench} pingpong --loops 3000 --cpu 0 & {bench} pingpong --loops 3000 --cpu 1; wait' > behind.log 2>&1
{workloads} pid-reuse {schedtrace} reuse reuse.json
"""
    result = vm.boot("patched", script, share, timeout_s=1200, append=f"trace_event=custom:{EXT}")
    assert result.failure() is None, (result.failure(), (share / "guest.log").read_text()[-3000:],
                                      (share / "console.log").read_text()[-3000:])
    return share


@pytest.fixture(scope="module")
def recorded(guest: Path) -> pd.DataFrame:
    _, df = read_sched_tsv(guest / "ev" / "sched.tsv")
    return df


def switches(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["event"] == EXT]


def as_int(values: pd.Series) -> np.ndarray:
    return np.array([int(str(v), 0) for v in values], dtype=np.uint64)


def test_the_event_can_be_enabled_from_the_kernel_command_line(guest: Path) -> None:
    """trace_event= enables events before initcalls run, when the custom event has no tracepoint
    yet: patch 1 makes that attempt fail cleanly, and the later one (event_trace_enable_again)
    enables it, so the top buffer holds its records from boot on."""
    assert (guest / "boot_enable.txt").read_text().strip() == "1"
    assert int((guest / "boot_records.txt").read_text()) > 100
    console = (guest / "console.log").read_text(errors="replace")
    assert "BUG:" not in console and "Oops" not in console and "WARNING:" not in console


def test_the_event_repeats_sched_switch_field_by_field(recorded: pd.DataFrame) -> None:
    """Each switch gives sched_switch and then the event on the same CPU, with nothing between
    (interrupts are off in __schedule): prev/next pid, priorities and state are equal."""
    shared = ["prev_pid", "next_pid", "prev_prio", "next_prio", "prev_state"]
    pairs = 0
    for cpu, rows in recorded[recorded["event"].isin(["sched_switch", EXT])].groupby("cpu", sort=True):
        kinds = rows["event"].to_numpy()
        ext_at = np.flatnonzero(kinds == EXT)
        ext_at = ext_at[ext_at > 0]
        before = ext_at - 1
        assert (kinds[before] == "sched_switch").all(), cpu
        mine, theirs = rows.iloc[ext_at][shared].astype("int64"), rows.iloc[before][shared].astype("int64")
        assert (mine.to_numpy() == theirs.to_numpy()).all(), (cpu, mine[(mine.to_numpy() != theirs.to_numpy()).any(axis=1)])
        # and every sched_switch has its event (tracing may have stopped between the two at the end)
        assert len(ext_at) >= (kinds == "sched_switch").sum() - 1, cpu
        pairs += len(ext_at)
    assert pairs > 4000
    ext = switches(recorded)
    assert set(ext["prev_state"].astype(int)) <= {0, 1, 2, 4, 8, 16, 32, 64, 128, 256}
    steps = ext.groupby("prev_pid")["prev_runtime_ns"].diff().dropna()
    assert (steps >= 0).all()  # a task's CPU time never decreases


def test_runnable_sieves_give_the_run_queue_length_and_load(guest: Path, recorded: pd.DataFrame) -> None:
    """Three CPU-bound sieves pinned to one CPU, everything else on the other: at a switch from
    one to another that run queue holds the three (the one leaving is still runnable), all CFS; after half a second of
    it, PELT's load is three nice-0 loads. The sieves are preempted in user space: their program
    counters lie in their executable mappings."""
    truth = json.loads((guest / "sieves.json").read_text())
    pids = set(truth["pids"])
    ext = switches(recorded)
    between = ext[(ext["cpu"] == truth["cpu"]) & ext["prev_pid"].isin(pids) & ext["next_pid"].isin(pids)]
    assert len(between) > 50, len(between)
    # once all three run their own code (before, they are still loading; after, dying)
    steady = between[(between["t_ns"] >= truth["t_steady_ns"]) & (between["t_ns"] <= truth["t_end_ns"])]
    nr, queued = steady["nr_running"].astype(int), steady["cfs_queued"].astype(int)
    # never fewer than the three; more only while another task woken there waits (a kernel
    # thread of that CPU: the rest of the workload runs on CPU 0)
    assert len(steady) > 20 and (nr >= SIEVES).all() and (queued >= SIEVES).all(), nr.value_counts()
    assert nr.mode()[0] == SIEVES and (nr == SIEVES).mean() >= 0.75, nr.value_counts()
    assert (queued == nr).mean() >= 0.95
    load = steady["cfs_load_avg"].astype(float).median()
    assert abs(load - SIEVES * NICE_0_LOAD) <= 0.15 * SIEVES * NICE_0_LOAD, load
    # EEVDF: the chosen entity's deadline lies ahead of its virtual runtime
    assert (as_int(steady["next_deadline"]) > as_int(steady["next_vruntime"])).mean() >= 0.99
    inside = []
    for pid in pids:  # the maps of the steady state (before it, a sieve may still be taskset)
        ranges = [tuple(int(v, 16) for v in line.split()[0].split("-"))
                  for line in truth["maps"][str(pid)].splitlines() if "x" in line.split()[1]]
        ips = as_int(steady.loc[steady["prev_pid"] == pid, "prev_user_ip"])
        inside += [any(lo <= ip < hi for lo, hi in ranges) for ip in ips]
    assert len(inside) > 20 and np.mean(inside) >= 0.99, np.mean(inside)


def test_a_sender_blocked_on_full_buffers_shows_them(guest: Path, recorded: pd.DataFrame) -> None:
    """The sender queued a known number of bytes without blocking, then blocked: its last switch
    out is a sleep with TCP's memory count as /proc/net/sockstat showed it while it was blocked
    (up to what the CPUs hold back), which grew by at least the bytes queued (less the same)."""
    truth = json.loads((guest / "sender.json").read_text())
    assert truth["state_blocked"] == "S" and truth["queued_bytes"] > 4 * PCPU_RESERVE_BYTES, truth
    ext = switches(recorded)
    mine = ext[(ext["prev_pid"] == truth["pid"]) & (ext["t_ns"] <= truth["t_blocked_ns"])]
    last = mine.iloc[-1]
    assert int(last["prev_state"]) == 1, last
    pages = int(last["tcp_mem_pages"])
    # the same counter; between the two readings a CPU may fold its reserve into it
    assert abs(pages - truth["pages_blocked"]) <= 2 * PCPU_RESERVE_BYTES // 4096, (pages, truth)
    grown = (pages - truth["pages_before"]) * 4096
    assert truth["queued_bytes"] - 2 * PCPU_RESERVE_BYTES <= grown <= 4 * truth["queued_bytes"], (grown, truth)


def test_a_pending_signal_shows_from_when_it_is_sent(guest: Path, recorded: pd.DataFrame) -> None:
    """SIGUSR1, blocked by its target, is pending from the moment it is sent until the target
    exits: its switches out before carry no pending signal, those after carry SIGUSR1's bit."""
    truth = json.loads((guest / "signal.json").read_text())
    ext = switches(recorded)
    mine = ext[ext["prev_pid"] == truth["pid"]]
    pending = as_int(mine["prev_sigpending"])
    t = mine["t_ns"].to_numpy()
    before, after = pending[t < truth["t_before_ns"]], pending[t > truth["t_after_ns"]]
    assert len(before) >= 3 and len(after) >= 3, (len(before), len(after))
    assert (before == 0).all() and (after == SIGUSR1_BIT).all(), (before, after)


def test_a_reader_that_falls_behind_counts_every_loss_per_cpu(guest: Path) -> None:
    """4 KiB per CPU, never drained, around two ping-pongs on both CPUs, while a drained
    recording of sched_switch counts every switch: on each CPU, the events kept plus the
    ring's overrun count are the switches of that CPU, and the stream marks where they went."""
    meta = read_sched_json(guest / "behind" / "sched.json")
    _, kept = read_sched_tsv(guest / "behind" / "sched.tsv")
    _, every = read_sched_tsv(guest / "all" / "sched.tsv")
    (buf,) = meta["buffers"]
    every = every[(every["event"] == "sched_switch") & (every["t_ns"] >= meta["start_mono_ns"])
                  & (every["t_ns"] <= meta["stop_mono_ns"])]
    assert buf["lost_events"] > 0
    for cpu in buf["cpus"]:
        overrun = cpu["end"]["overrun"] - cpu["start"]["overrun"]
        here = int((kept[(kept["event"] == EXT) & (kept["cpu"] == cpu["cpu"])]).shape[0])
        truth = int((every["cpu"] == cpu["cpu"]).sum())
        assert overrun > 0 and truth > 3000, (cpu, truth)
        assert abs(here + overrun - truth) <= 0.02 * truth + 20, (cpu["cpu"], here, overrun, truth)
        assert cpu["missed_in_stream"] > 0 or cpu["pages_with_unknown_missed"] > 0, cpu


def test_pid_reuse_cannot_make_an_unrelated_process_recorded(guest: Path) -> None:
    """Followed through set_event_pid with event-fork: the child's calls are recorded; once it
    exits its pid leaves the list, so the unrelated process that gets the same pid is not; a
    child forked later is followed again."""
    truth = json.loads((guest / "reuse.json").read_text())
    assert truth["reused"] and truth["tracer_status"] == 0, truth
    calls = read_syscalls(guest / "reuse" / "syscalls.tsv")
    writes = calls[calls["call"] == "write"]
    sizes = writes.groupby("req_bytes")["pid"].agg(lambda p: sorted(set(p)))
    assert sizes.get(3333) == [truth["child"]] and sizes.get(4444) == [truth["later_child"]], sizes
    assert 7777 not in sizes.index, sizes
    assert (writes["req_bytes"] == 3333).sum() == 5 and (writes["req_bytes"] == 4444).sum() == 5
