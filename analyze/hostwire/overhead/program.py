"""The cost of recording a real program (`hostwire overhead --program`): Debian's iperf3 between
two network namespaces made for the measurement, alone and under `hostwire record` (tracefs and
ptrace system calls) and the peers `perf trace`, `strace -f` and `trace-cmd record -F`.

The link is the bare veth (link_qdisc none): the CPU, not a shaper, limits the transfer, so what a
tracer takes from the CPU shows in the throughput. Two figures per run, each measured inside the
program itself, so the tools' start and stop are not in them: the throughput iperf3 -J reports
(sender and receiver bits per second) and the mean round trip of `tcp-rr` (one-byte TCP request
and response over one connection, benchmark/tests/tcp_rr.c). The servers (iperf3 -s, tcp-rr
serve) run untraced in the receiver's namespace; the traced program is the client, in the
sender's. Every configuration runs once per round, the order rotating by one each round; each
figure is set against the baseline of the same round (hostwire.stats.paired_ratio)."""

from __future__ import annotations

import json
import logging
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ContextManager

import numpy as np

from hostwire import paths
from hostwire.errors import HostwireError
from hostwire.lifeline import die_with_parent, sigterm_unwinds
from hostwire.overhead.tools import IO_CALLS, ConfigFailed, sched_events, tracecmd_record, tracefs_instance
from hostwire.record.link import LinkSpec
from hostwire.record.topology import RECEIVER_ADDR, Topology
from hostwire.stats import paired_estimate, paired_ratio

log = logging.getLogger(__name__)

IPERF_PORT = 5201
RR_PORT = 5202


@dataclass
class ProgramSetup:
    """What every program configuration's command needs."""

    topology: Topology
    work: Path
    seconds: int  # iperf3 -t
    rr_loops: int
    rt_prio: int = 0  # > 0: the program, its tool and the servers at SCHED_FIFO of this priority

    def _rt(self) -> list[str]:
        return ["chrt", "-f", str(self.rt_prio)] if self.rt_prio > 0 else []

    def in_sender(self, argv: list[str]) -> list[str]:
        # nsenter changes the network namespace only: tracefs and every mount stay as they are
        return ["nsenter", f"--net=/run/netns/{self.topology.tx_ns}", *self._rt(), *argv]

    def in_receiver(self, argv: list[str]) -> list[str]:
        return ["nsenter", f"--net=/run/netns/{self.topology.rx_ns}", *self._rt(), *argv]

    def iperf3(self) -> list[str]:
        return ["iperf3", "-c", RECEIVER_ADDR, "-p", str(IPERF_PORT), "-t", str(self.seconds), "-J"]

    def tcp_rr(self) -> list[str]:
        return [str(tcp_rr_path()), RECEIVER_ADDR, str(RR_PORT), str(self.rr_loops)]


def tcp_rr_path() -> Path:
    path = paths.build_dir() / "test-progs" / "tcp-rr"
    if not os.access(path, os.X_OK):
        raise HostwireError(f"{path} is not built (run 'make build')")
    return path


# A wrapper turns the program's command into the configuration's command line; the context it
# returns holds what the tool needs around the run (trace-cmd's tracefs instance).
Wrapper = Callable[[ProgramSetup, list[str], str], tuple[list[str], ContextManager[Any]]]


def _alone(setup: ProgramSetup, command: list[str], label: str) -> tuple[list[str], ContextManager[Any]]:
    return command, nullcontext()


@contextmanager
def _record_complete(out: Path) -> Iterator[None]:
    """After the run: record must have left a complete run (a partial or failed one, the program
    having run to its end, means record did not record it all, and its cost is not record's)."""
    yield
    if (out / "manifest.json").is_file():
        return
    partial = out.with_name(out.name + ".partial") / "manifest.json"
    try:
        manifest = json.loads(partial.read_text())
    except (OSError, ValueError):
        raise ConfigFailed(f"hostwire record left no manifest in {out}") from None
    raise ConfigFailed(f"hostwire record left a {manifest.get('status')} run: {manifest.get('reason') or '-'}")


def _record(syscalls: str, *options: str) -> Wrapper:
    def wrap(setup: ProgramSetup, command: list[str], label: str) -> tuple[list[str], ContextManager[Any]]:
        out = setup.work / f"record-{label}"
        return [sys.executable, "-m", "hostwire", "record", "-o", str(out), "--syscalls", syscalls, *options, "--",
                *command], _record_complete(out)
    return wrap


def _perf_trace(setup: ProgramSetup, command: list[str], label: str) -> tuple[list[str], ContextManager[Any]]:
    return ["perf", "trace", "-e", IO_CALLS, "-o", str(setup.work / "perf-trace.txt"), "--", *command], nullcontext()


def _strace(setup: ProgramSetup, command: list[str], label: str) -> tuple[list[str], ContextManager[Any]]:
    return ["strace", "-f", "-ttt", "-e", f"trace={IO_CALLS}", "-o", str(setup.work / "strace.txt"), "--",
            *command], nullcontext()


@contextmanager
def _capture_beside(setup: ProgramSetup, label: str) -> Iterator[None]:
    """hw-wirecap as record runs it (every interface of the sender's namespace through "any",
    headers only), started before the program and stopped after it; at the program's priority."""
    from hostwire.record.collectors import BackgroundTool

    rt = ["chrt", "-f", str(setup.rt_prio)] if setup.rt_prio > 0 else []
    tool = BackgroundTool("hw-wirecap", [*rt, str(paths.tool("hw-wirecap")), "-i", "any", "-n", setup.topology.tx_ns,
                                         "-o", str(setup.work / f"capture-{label}.pcap")],
                          setup.work / "wirecap.log", stop_timeout_s=30.0)
    try:
        tool.start(timeout_s=30.0)
    except HostwireError as err:
        raise ConfigFailed(str(err)) from None
    try:
        yield
    finally:
        rc = tool.stop()
    if rc not in (0, None):
        raise ConfigFailed(f"hw-wirecap exited with status {rc}: {tool.last_message()}")


def _capture(setup: ProgramSetup, command: list[str], label: str) -> tuple[list[str], ContextManager[Any]]:
    return command, _capture_beside(setup, label)


def _kernel_trace(setup: ProgramSetup, command: list[str], label: str) -> tuple[list[str], ContextManager[Any]]:
    return [str(paths.tool("hw-schedtrace")), "-o", str(setup.work / f"kernel-{label}"), "-s", "--", *command], \
        nullcontext()


def tracecmd_events() -> list[str]:
    """hw-schedtrace's scheduler and network events and the system calls record traces."""
    # tracefs names sendfile by its 64-bit entry point, as hw-schedtrace enables it
    calls = ["sendfile64" if call == "sendfile" else call for call in IO_CALLS.split(",")]
    return [*sched_events(), *(f"syscalls:sys_{side}_{call}" for call in calls for side in ("enter", "exit")),
            # what hw-schedtrace -s records beside the calls: io_uring's operations, sendmmsg's bytes
            "io_uring:io_uring_submit_req", "io_uring:io_uring_file_get", "io_uring:io_uring_complete",
            "sock:sock_send_length"]


def _tracecmd(setup: ProgramSetup, command: list[str], label: str) -> tuple[list[str], ContextManager[Any]]:
    instance = f"hw-{os.getpid()}-tcp"
    events = [arg for ev in tracecmd_events() for arg in ("-e", ev)]
    options = ["-F", "-c", "-C", "mono", "-r", "1", *events, "-o", str(setup.work / "tc.dat")]
    return tracecmd_record(setup.work, instance, options, command), tracefs_instance(instance)


@dataclass
class ProgramConfig:
    name: str
    what: str  # the command line in short, for the table
    wrap: Wrapper
    needs: str | None = None  # a peer program that must be installed


PROGRAM_CONFIGS: list[ProgramConfig] = [
    ProgramConfig("alone", "the program alone (baseline)", _alone),
    ProgramConfig("record tracefs", "hostwire record -- CMD (wire, kernel trace, tracefs system calls and the "
                  "calls it blocks in)", _record("tracefs")),
    # what tracing the calls a program blocks in (futex, select, epoll_wait, ...: waited_in) costs
    ProgramConfig("record tracefs --no-waits", "hostwire record --no-waits -- CMD (the I/O calls only)",
                  _record("tracefs", "--no-waits")),
    ProgramConfig("record ptrace", "hostwire record --syscalls ptrace -- CMD", _record("ptrace")),
    # record's two largest parts alone: where its cost comes from
    ProgramConfig("record's capture", "hw-wirecap -i any in the sender's namespace, beside CMD", _capture),
    ProgramConfig("record's kernel trace", "hw-schedtrace -s -- CMD (scheduler, network and system-call events)",
                  _kernel_trace),
    ProgramConfig("perf trace", "perf trace -e <record's calls> -o FILE -- CMD", _perf_trace, "perf"),
    ProgramConfig("strace -f", "strace -f -ttt -e trace=<record's calls> -o FILE -- CMD", _strace, "strace"),
    ProgramConfig("trace-cmd record -F", "trace-cmd record -F -c -e <record's events and calls> -- CMD", _tracecmd,
                  "trace-cmd"),
]


@dataclass
class ProgramRow:
    name: str
    what: str
    status: str  # "ok", "not installed", "failed"
    message: str = ""
    sender_bps: list[float] = field(default_factory=list)  # one per round (NaN: not measured)
    receiver_bps: list[float] = field(default_factory=list)
    rr_us: list[float] = field(default_factory=list)  # mean round trip of tcp-rr
    rr_p50_us: list[float] = field(default_factory=list)
    median_receiver_bps: float = math.nan
    p25_receiver_bps: float = math.nan
    p75_receiver_bps: float = math.nan
    median_sender_bps: float = math.nan
    throughput_ratio: float = math.nan  # receiver bits/s over the baseline's of the same round: median
    throughput_ratio_low: float = math.nan
    throughput_ratio_high: float = math.nan
    sender_ratio: float = math.nan
    median_rr_us: float = math.nan
    p25_rr_us: float = math.nan
    p75_rr_us: float = math.nan
    rr_ratio: float = math.nan
    rr_ratio_low: float = math.nan
    rr_ratio_high: float = math.nan
    rr_added_us: float = math.nan  # per round trip, median of the paired differences
    rr_added_low_us: float = math.nan
    rr_added_high_us: float = math.nan


def _last_line(text: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else "no message"


def parse_iperf3(stdout: str) -> tuple[float, float]:
    """Sender and receiver bits per second from iperf3 -J's output (the JSON object may follow
    other lines a tool printed on the same stdout). ValueError with what was missing."""
    start = re.search(r"^\{", stdout, re.MULTILINE)
    if start is None:
        raise ValueError("no JSON object in iperf3's output")
    data, _ = json.JSONDecoder().raw_decode(stdout[start.start():])
    if data.get("error"):
        raise ValueError(f"iperf3: {data['error']}")
    try:
        end = data["end"]
        return float(end["sum_sent"]["bits_per_second"]), float(end["sum_received"]["bits_per_second"])
    except (KeyError, TypeError):
        raise ValueError("iperf3's JSON has no end.sum_sent/sum_received bits_per_second") from None


RR_RE = re.compile(r"round_trip_us=([\d.]+) p50_us=([\d.]+) p99_us=([\d.]+) loops=(\d+)")


def parse_tcp_rr(stdout: str) -> tuple[float, float]:
    """Mean and median round trip (µs) from tcp-rr's line."""
    found = RR_RE.findall(stdout)
    if not found:
        raise ValueError("no round_trip_us line in tcp-rr's output")
    mean, p50, _, _ = found[-1]
    return float(mean), float(p50)


def _run(argv: list[str], setup: ProgramSetup, what: str, timeout: float) -> str:
    """The configuration's command in a process group of its own, so that a timeout, Ctrl-C or
    SIGTERM ends all of it (trace-cmd's per-CPU recorders outlive their parent otherwise): SIGTERM
    first (hostwire record then stops its collectors and keeps its run), SIGKILL after."""
    # `hostwire record` is this hostwire, whether installed or run from the source tree
    source = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (source, os.environ.get("PYTHONPATH")) if p))
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                text=True, cwd=setup.work, env=env, preexec_fn=die_with_parent, process_group=0)
    except OSError as err:
        raise ConfigFailed(f"{what} failed to start: {err.strerror or err}") from None
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        running = group_processes(proc.pid)
        end_group(proc)
        raise ConfigFailed(f"{what} did not finish within {timeout:.0f} s (still running: {running})") from None
    except BaseException:
        end_group(proc)
        raise
    if proc.returncode != 0:
        raise ConfigFailed(f"{what} failed (exit {proc.returncode}): {_last_line(stderr + stdout)}")
    return stdout


def group_processes(pgid: int) -> str:
    """The processes of a process group, each as name[pid] state wchan: what a timeout names."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(") ", 1)
            name = fields[0].split(" (", 1)[1]
            state, _, pgrp = fields[1].split()[:3]
            wchan = (stat.parent / "wchan").read_text().strip() or "-"
        except (OSError, IndexError, ValueError):
            continue
        if int(pgrp) == pgid:
            found.append(f"{name}[{stat.parent.name}] {state} {wchan}")
    return ", ".join(sorted(found)) or "nothing"


def end_group(proc: subprocess.Popen[str], grace_s: float = 30.0) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            proc.communicate(timeout=grace_s)
            break
        except subprocess.TimeoutExpired:
            continue
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # a member that outlived the leader
    except ProcessLookupError:
        pass


def _remove_outputs(setup: ProgramSetup, label: str) -> None:
    """The tools' output of one run: kept no longer than the run (a record of iperf3 is some
    150 MB per second)."""
    for leftover in (f"record-{label}", f"record-{label}.partial", f"capture-{label}.pcap", f"kernel-{label}",
                     "perf-trace.txt", "strace.txt", "tc.dat"):
        path = setup.work / leftover
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def run_config(cfg: ProgramConfig, setup: ProgramSetup) -> tuple[float, float, float, float]:
    """One run of iperf3 and one of tcp-rr under the configuration: sender and receiver bits per
    second, mean and median round trip (µs)."""
    figures: list[float] = []
    for label, command, parse in (("iperf3", setup.iperf3(), parse_iperf3), ("tcp-rr", setup.tcp_rr(), parse_tcp_rr)):
        argv, around = cfg.wrap(setup, command, label)
        timeout = 120.0 + 4 * setup.seconds + setup.rr_loops * 2e-3
        try:
            with around:
                stdout = _run(setup.in_sender(argv), setup, f"{label} under {cfg.name}", timeout)
            figures.extend(parse(stdout))
        except ValueError as err:
            raise ConfigFailed(f"{label} under {cfg.name}: {err}") from None
        finally:
            _remove_outputs(setup, label)
    return figures[0], figures[1], figures[2], figures[3]


class Servers:
    """iperf3 -s and tcp-rr serve in the receiver's namespace for the whole measurement (started
    again if one ends); ended by pid."""

    def __init__(self, setup: ProgramSetup) -> None:
        self.setup = setup
        self.procs: dict[int, subprocess.Popen[bytes]] = {}

    def argv(self, port: int) -> list[str]:
        if port == IPERF_PORT:
            return ["iperf3", "-s", "-B", RECEIVER_ADDR, "-p", str(port)]
        return [str(tcp_rr_path()), "serve", RECEIVER_ADDR, str(port)]

    def ensure(self) -> None:
        for port in (IPERF_PORT, RR_PORT):
            proc = self.procs.get(port)
            if proc is not None and proc.poll() is None:
                continue
            self.procs[port] = subprocess.Popen(self.setup.in_receiver(self.argv(port)), stdin=subprocess.DEVNULL,
                                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                                preexec_fn=die_with_parent)
            self._wait_listening(port)

    def _wait_listening(self, port: int, timeout_s: float = 10.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            ss = subprocess.run(self.setup.in_receiver(["ss", "-Hltn", f"sport = :{port}"]), capture_output=True,
                                text=True, timeout=30)
            if ss.stdout.strip():
                return
            if self.procs[port].poll() is not None:
                break
            time.sleep(0.05)
        raise HostwireError(f"the server on port {port} did not start listening in the receiver's namespace")

    def __enter__(self) -> Servers:
        self.ensure()
        return self

    def __exit__(self, *exc: object) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


@contextmanager
def program_setup(seconds: int, rr_loops: int, rt_prio: int = 0) -> Iterator[ProgramSetup]:
    """Two namespaces joined by a bare veth, a scratch directory (under TMPDIR) for the tools'
    output, removed after; SIGTERM unwinds it like Ctrl-C."""
    with sigterm_unwinds(), tempfile.TemporaryDirectory(prefix="hw-overhead-program-") as tmp, \
            Topology(link=LinkSpec(qdisc="none")) as topology:
        yield ProgramSetup(topology, Path(tmp), seconds, rr_loops, rt_prio)


def measure_program(runs: int, seconds: int = 3, rr_loops: int = 10000, configs: Sequence[ProgramConfig] | None = None,
                    rt_prio: int = 0,
                    progress: Callable[[str], None] | None = None) -> list[ProgramRow]:
    """Every configuration once per round, `runs` rounds, the order rotating by one each round. A
    configuration whose tool is missing, or that fails, gives one line and is left out of the later
    rounds; the baseline failing ends the measurement."""
    configs = list(configs or PROGRAM_CONFIGS)
    if configs[0].name != "alone":
        raise ValueError("the first configuration must be the program alone")
    if shutil.which("iperf3") is None:
        raise HostwireError("iperf3 is not installed (run 'make setup')")
    tcp_rr_path()
    rows = {c.name: ProgramRow(c.name, c.what, "ok") for c in configs}
    for c in configs:
        row = rows[c.name]
        if c.needs and shutil.which(c.needs) is None:
            row.status, row.message = "not installed", f"{c.needs} is not installed: {c.name} not measured"
        row.sender_bps, row.receiver_bps, row.rr_us, row.rr_p50_us = ([math.nan] * runs for _ in range(4))
    with program_setup(seconds, rr_loops, rt_prio) as setup, Servers(setup) as servers:
        for r in range(runs):
            for c in configs[r % len(configs):] + configs[:r % len(configs)]:
                row = rows[c.name]
                if row.status != "ok":
                    continue
                servers.ensure()
                try:
                    row.sender_bps[r], row.receiver_bps[r], row.rr_us[r], row.rr_p50_us[r] = run_config(c, setup)
                except ConfigFailed as err:
                    if c.name == "alone":
                        raise HostwireError(f"the program alone failed: {err}") from None
                    row.status, row.message = "failed", str(err)
                    if progress:
                        progress(f"{c.name}: {err}; left out of the remaining rounds")
            if progress:
                progress(f"program round {r + 1} of {runs} done")
    base = rows[configs[0].name]
    for row in rows.values():
        summarize_program(row, base)
    return list(rows.values())


def summarize_program(row: ProgramRow, base: ProgramRow) -> None:
    """The medians and spreads of a row, and its ratios to the baseline of the same rounds."""
    if row.status != "ok":
        return
    recv = np.asarray(row.receiver_bps, dtype=float)
    recv = recv[np.isfinite(recv)]
    rr = np.asarray(row.rr_us, dtype=float)
    rr = rr[np.isfinite(rr)]
    if len(recv) == 0 or len(rr) == 0:
        return
    row.median_receiver_bps = float(np.median(recv))
    row.p25_receiver_bps, row.p75_receiver_bps = (float(x) for x in np.percentile(recv, [25, 75]))
    row.median_sender_bps = float(np.nanmedian(np.asarray(row.sender_bps, dtype=float)))
    row.median_rr_us = float(np.median(rr))
    row.p25_rr_us, row.p75_rr_us = (float(x) for x in np.percentile(rr, [25, 75]))
    tput = paired_ratio(row.receiver_bps, base.receiver_bps)
    row.throughput_ratio, row.throughput_ratio_low, row.throughput_ratio_high = tput.median, tput.low, tput.high
    row.sender_ratio = paired_ratio(row.sender_bps, base.sender_bps).median
    lat = paired_ratio(row.rr_us, base.rr_us)
    row.rr_ratio, row.rr_ratio_low, row.rr_ratio_high = lat.median, lat.low, lat.high
    added = paired_estimate(row.rr_us, base.rr_us)
    row.rr_added_us, row.rr_added_low_us, row.rr_added_high_us = added.median, added.low, added.high
