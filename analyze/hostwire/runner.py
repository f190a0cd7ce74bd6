"""Recording one run (DESIGN.md sections 2 and 7): topology up, collectors started, the benchmark
run in the sender host, collectors stopped, topology down, manifest written. A run is written
under `<run-id>.partial/` and renamed when complete; a failed or interrupted run keeps its data
there, marked in its manifest, and is never deleted."""

from __future__ import annotations

import json
import logging
import os
import platform
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import hostwire
from hostwire import collectors
from hostwire.bench import BenchResult, run_benchmark
from hostwire.errors import HostwireError, Terminated, UsageError
from hostwire.paths import REPO_ROOT
from hostwire.resources import ResourceSampler
from hostwire.topology import LinkSpec, Topology, run_cmd

log = logging.getLogger(__name__)

MANIFEST_FORMAT = "hostwire-run 1"
SYSCALL_BACKENDS = ("none", "tracefs", "ptrace", "preload")


@dataclass
class RunPoint:
    """One grid point: the benchmark's parameters and the link."""

    senders: int = 2
    background: int = 2
    sieve_log2: int = 18
    read_size: int = 8192
    write_size: int | None = None
    warmup_s: float = 1.0
    duration_s: float = 3.0
    quiet_s: float = 0.5
    link_rate: str = "10mbit"
    link_qdisc: str = LinkSpec.qdisc  # the most wire-like shaper measured here (capture/README.md)
    topology: str = "netns"  # "netns" (two namespaces) or "loopback"
    sender_cpus: str = "0"
    receiver_cpus: str = "1"
    log_capacity: int = 262144
    capture: bool = True  # hw-wirecap on the receiver's interface
    kernel_trace: bool = True  # hw-schedtrace: scheduler and network events
    syscalls: str = "none"  # I/O system calls of the benchmark: none, tracefs, ptrace or preload

    def validate(self) -> None:
        if self.senders < 0 or self.background < 0 or self.senders + self.background == 0:
            raise UsageError("a run needs at least one sending or background process")
        if self.syscalls not in SYSCALL_BACKENDS:
            raise UsageError(f"syscalls {self.syscalls!r}: expected one of {', '.join(SYSCALL_BACKENDS)}")
        if self.topology not in ("netns", "loopback"):
            raise UsageError(f"topology {self.topology!r}: expected netns or loopback")
        if self.duration_s <= 0:
            raise UsageError("duration must be longer than 0 s")
        LinkSpec(self.link_rate, self.link_qdisc).tc_args("x")  # raises on a bad rate or qdisc
        cpus = os.cpu_count() or 1
        from hostwire.topology import parse_cpu_list

        for name in ("sender_cpus", "receiver_cpus"):
            for cpu in parse_cpu_list(getattr(self, name)):
                if cpu >= cpus:
                    raise UsageError(f"{name} = {getattr(self, name)!r}: this machine has CPUs 0..{cpus - 1}")


@contextmanager
def sigterm_unwinds() -> Iterator[None]:
    def raise_terminated(signum: int, frame: Any) -> None:
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def host_facts(topology: Topology | None) -> dict[str, Any]:
    facts: dict[str, Any] = {
        "kernel_release": platform.release(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "clocksource": _read("/sys/devices/system/clocksource/clocksource0/current_clocksource"),
    }
    if topology is not None and topology.up_done:
        facts["qdisc"] = topology.qdisc_text()
        offloads = run_cmd(["ethtool", "-k", topology.tx_dev], netns=topology.tx_ns, check=False).stdout
        facts["offloads"] = {
            key.strip(): value.split()[0]
            for key, _, value in (line.partition(":") for line in offloads.splitlines()[1:])
            if value.strip() and key.strip() in (
                "tcp-segmentation-offload", "generic-segmentation-offload", "generic-receive-offload",
                "tx-checksumming", "rx-checksumming")
        }
    return facts


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def _cpu_model() -> str | None:
    text = _read("/proc/cpuinfo") or ""
    for line in text.splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return None


def git_revision() -> str | None:
    try:
        proc = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() or None


@dataclass
class RunRecord:
    run_id: str
    directory: Path
    status: str = "failed"
    reason: str = ""
    manifest: dict[str, Any] = field(default_factory=dict)
    bench: BenchResult | None = None


def record_run(run_root: str | Path, run_id: str, point: RunPoint, config: dict[str, Any] | None = None) -> RunRecord:
    """Records one run into run_root/run_id (via run_id.partial). Never raises for a failure of the
    benchmark itself: the run is kept and marked; raises only for bad arguments."""
    point.validate()
    run_root = Path(run_root)
    final = run_root / run_id
    partial = run_root / f"{run_id}.partial"
    if final.exists():
        raise UsageError(f"{final} exists already; choose another run id")
    (partial / "raw" / "bench").mkdir(parents=True, exist_ok=True)
    record = RunRecord(run_id=run_id, directory=partial)
    manifest: dict[str, Any] = {
        "format": MANIFEST_FORMAT,
        "run_id": run_id,
        "config": config or {},
        "point": asdict(point),
        "tools": {"hostwire": hostwire.__version__},
        "git_revision": git_revision(),
        "start": {"realtime_ns": time.time_ns(), "monotonic_ns": time.monotonic_ns()},
        "losses": {},
        "exit": {},
    }
    runner_log = logging.FileHandler(partial / "raw" / "runner.log")
    runner_log.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    logging.getLogger("hostwire").addHandler(runner_log)
    topology: Topology | None = None
    try:
        with sigterm_unwinds():
            if point.topology == "netns":
                topology = Topology(link=LinkSpec(point.link_rate, point.link_qdisc),
                                    receiver_cpus=point.receiver_cpus)
            with topology if topology is not None else nullcontext():
                manifest["host"] = host_facts(topology)
                sampler = ResourceSampler(partial / "raw" / "resources.tsv")
                sampler.start()
                try:
                    record.bench = _run_with_collectors(partial / "raw", point, topology, manifest)
                finally:
                    manifest["resources"] = sampler.stop()
        _fill_from_bench(manifest, record.bench)
        record.status, record.reason = _judge(record.bench, manifest)
    except (KeyboardInterrupt, Terminated):
        record.status, record.reason = "partial", "interrupted"
        raise
    except HostwireError as err:
        record.status, record.reason = "failed", str(err)
    finally:
        manifest["end"] = {"realtime_ns": time.time_ns(), "monotonic_ns": time.monotonic_ns()}
        manifest["status"] = record.status
        manifest["reason"] = record.reason
        record.manifest = manifest
        (partial / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        logging.getLogger("hostwire").removeHandler(runner_log)
        runner_log.close()
        if record.status == "complete":
            partial.rename(final)
            record.directory = final
    return record


def _fill_from_bench(manifest: dict[str, Any], bench: BenchResult | None) -> None:
    if bench is None:
        return
    manifest["exit"]["hw-bench"] = bench.returncode
    try:
        summary = bench.summary
    except HostwireError:
        return
    manifest["window_ns"] = [summary["window_start_ns"], summary["window_end_ns"]]
    manifest["clock_sync"] = summary.get("clock_sync", {})
    manifest["losses"]["bench_log_overflow"] = summary.get("losses", {}).get("log_overflow")
    manifest["losses"]["sieve_check_failures"] = summary.get("losses", {}).get("sieve_check_failures")
    manifest["exit"]["processes"] = {p["role"]: p["exit"] for p in summary.get("processes", [])}
    manifest["failures"] = summary.get("failures", [])


def _judge(bench: BenchResult | None, manifest: dict[str, Any]) -> tuple[str, str]:
    if bench is None:
        return "failed", "the benchmark did not run"
    if bench.returncode != 0:
        lines = [line for line in bench.stderr.splitlines() if line.strip()]
        return "failed", "; ".join(lines[-3:]) or f"hw-bench exited with {bench.returncode}"
    failed = [f"{name} exited with {code}" for name, code in manifest["exit"].items()
              if name.startswith("hw-") and name != "hw-bench" and code != 0]
    if failed:
        return "partial", "; ".join(failed)
    return "complete", ""


def _run_with_collectors(raw: Path, point: RunPoint, topology: Topology | None,
                         manifest: dict[str, Any]) -> BenchResult:
    """Starts the collectors, runs the benchmark, stops the collectors (always), and puts their
    exit statuses and loss counters into the manifest."""
    started: list[collectors.BackgroundTool] = []
    before_start = None
    wrapper: list[str] | None = None
    try:
        if point.capture:
            iface, netns = (topology.rx_dev, topology.rx_ns) if topology is not None else ("lo", None)
            tool = collectors.wirecap(raw, iface, netns, point.receiver_cpus)
            tool.start()
            started.append(tool)
        if point.syscalls == "tracefs":
            def before_start(pid: int) -> None:
                tool = collectors.schedtrace(raw, point.receiver_cpus, syscall_pid=pid)
                tool.start()
                started.append(tool)
        elif point.kernel_trace:
            tool = collectors.schedtrace(raw, point.receiver_cpus)
            tool.start()
            started.append(tool)
        if point.syscalls in ("ptrace", "preload"):
            wrapper = collectors.iotrace_wrapper(raw, point.syscalls)
        log.info("benchmark M=%d N=%d, %g s window; collectors: %s", point.senders, point.background,
                 point.duration_s, ", ".join(t.name for t in started) or "none")
        return run_benchmark(
            raw / "bench", senders=point.senders, background=point.background,
            warmup_s=point.warmup_s, duration_s=point.duration_s, quiet_s=point.quiet_s,
            sieve_log2=point.sieve_log2, read_size=point.read_size, write_size=point.write_size,
            log_capacity=point.log_capacity, topology=topology,
            sender_cpus=point.sender_cpus, receiver_cpus=point.receiver_cpus,
            wrapper=wrapper, before_start=before_start,
        )
    finally:
        for tool in reversed(started):
            manifest["exit"][tool.name] = tool.stop()
            log.info("%s stopped (exit %s): %s", tool.name, tool.returncode, tool.last_message())
        if point.capture:
            manifest["losses"].update(collectors.wire_losses(raw))
        if any(t.name == "hw-schedtrace" for t in started):
            manifest["losses"].update(collectors.sched_losses(raw))
        if wrapper is not None:
            manifest["losses"].update(collectors.iotrace_losses(raw))
