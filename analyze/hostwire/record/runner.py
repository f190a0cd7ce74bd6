"""Recording one run (DESIGN.md sections 2 and 7): topology up, collectors started, the benchmark
run in the sender host, collectors stopped, topology down, manifest written. A run is written
under `<run-id>.partial/` and renamed when complete; a failed or interrupted run keeps its data
there, marked in its manifest, and is never deleted."""

from __future__ import annotations

import logging
import os
import platform
import shutil
import sys
import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import hostwire
from hostwire.record import collectors
from hostwire.read.bench import BenchResult
from hostwire.record.bench import run_benchmark
from hostwire.record.cpulimit import CpuLimit
from hostwire.errors import HostwireError, Terminated, UsageError
from hostwire.locks import locked
from hostwire.manifest import (MANIFEST_FORMAT, MANIFEST_NAME, raw_digests, register_live, runner_identity, seal,
                               unregister_live, write_json_atomic)
from hostwire.lifeline import sigterm_unwinds
from hostwire import paths
from hostwire.record.point import RunPoint  # defined apart so that reading a run never imports this module
from hostwire.record.resources import ResourceSampler
from hostwire.record.topology import Topology, run_cmd

log = logging.getLogger(__name__)


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
        facts.update(_interface_speed(topology))
    return facts


def _interface_speed(topology: Topology) -> dict[str, Any]:
    """The sender interface's driver and speed (hostwire.linkrate: the rate of a link that no shaper
    limits, when the driver's speed is a line rate and not a label, as a veth's is)."""
    facts: dict[str, Any] = {}
    info = run_cmd(["ethtool", "-i", topology.tx_dev], netns=topology.tx_ns, check=False).stdout
    for line in info.splitlines():
        if line.startswith("driver:"):
            facts["interface_driver"] = line.split(":", 1)[1].strip()
    speed = run_cmd(["cat", f"/sys/class/net/{topology.tx_dev}/speed"], netns=topology.tx_ns, check=False).stdout
    if speed.strip().isdigit() and int(speed) > 0:  # -1 or an error: the driver does not say
        facts["interface_speed_bps"] = int(speed) * 1_000_000
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
    """The source revision (recorded at install time, or the checkout's HEAD) for the manifest."""
    return paths.source_revision()


@dataclass
class RunRecord:
    run_id: str
    directory: Path
    status: str = "failed"
    reason: str = ""
    manifest: dict[str, Any] = field(default_factory=dict)
    bench: BenchResult | None = None


class _RunLog(logging.FileHandler):
    """raw/runner.log. A write that fails (disk full) ends the log quietly, never the run."""

    failure: str | None = None

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 (logging's name)
        if self.failure is None:
            self.failure = f"{self.baseFilename}: {sys.exc_info()[1]}"
        self.setLevel(logging.CRITICAL + 1)


def record_run(run_root: str | Path, run_id: str, point: RunPoint, config: dict[str, Any] | None = None) -> RunRecord:
    """Records one run into run_root/run_id (via run_id.partial). Never raises for a failure of the
    benchmark or a collector: the run is kept and marked. Raises UsageError for bad arguments and
    HostwireError when the run directory or its manifest cannot be written (disk full, read-only),
    after tearing everything down; what was recorded stays, marked `running` until
    `hostwire doctor --cleanup` marks it."""
    point.validate()
    if point.receiver_background:
        raise UsageError(f"receiver_background = {point.receiver_background}: background processes on the "
                         "receiver's host are for [hosts] runs (on namespaces use background)")
    run_root = Path(run_root)
    final = run_root / run_id
    partial = run_root / f"{run_id}.partial"
    for existing in (final, partial):
        if existing.exists():
            raise UsageError(f"{existing} exists already; choose another run id")
    record = RunRecord(run_id=run_id, directory=partial)
    manifest: dict[str, Any] = {
        "format": MANIFEST_FORMAT,
        "run_id": run_id,
        "status": "running",
        "reason": "",
        "runner": runner_identity(),
        "config": config or {},
        "point": asdict(point),
        "tools": {"hostwire": hostwire.__version__},
        "git_revision": git_revision(),
        "host": host_facts(None),
        "start": {"realtime_ns": time.time_ns(), "monotonic_ns": time.monotonic_ns()},
        "losses": {},
        "exit": {},
    }
    create_run_dir(partial, manifest)
    # Held until the run is renamed and marked (flock follows the directory's inode): an
    # analysis skips a run whose lock a runner holds.
    with locked(partial, f"hostwire run: recording {run_id}"):
        return _record_into(partial, final, point, record, manifest)


def _record_into(partial: Path, final: Path, point: RunPoint, record: RunRecord,
                 manifest: dict[str, Any]) -> RunRecord:
    manifest_path = partial / MANIFEST_NAME
    live = register_live(partial)
    runner_log = _RunLog(partial / "raw" / "runner.log")
    runner_log.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    logging.getLogger("hostwire").addHandler(runner_log)
    topology: Topology | None = None
    manifest_error: HostwireError | None = None
    try:
        with sigterm_unwinds():
            if point.topology == "netns":
                topology = Topology(link=point.link(), receiver_cpus=point.receiver_cpus,
                                    sender_rps_cpus=point.sender_cpus if point.sender_rps else None)
            with topology if topology is not None else nullcontext():
                manifest["host"] = host_facts(topology)
                link_start = topology.qdisc_stats() if topology is not None else None
                _update(manifest_path, manifest)
                sampler = ResourceSampler(partial / "raw" / "resources.tsv")
                sampler.start()
                try:
                    with _cpu_cap(point, topology) as cap:
                        try:
                            record.bench = _run_with_collectors(partial / "raw", point, topology, manifest, cap)
                        finally:
                            if cap is not None:
                                manifest["cpu_cap"] = cap.stats()
                finally:
                    manifest["resources"] = sampler.stop()
                    if topology is not None:
                        _record_shaper(manifest, link_start, topology.qdisc_stats())
        _fill_from_bench(manifest, record.bench)
        record.status, record.reason = _judge(record.bench, manifest)
    except (KeyboardInterrupt, Terminated):
        record.status, record.reason = "partial", "interrupted"
        raise
    except HostwireError as err:
        record.status, record.reason = "failed", str(err)
    finally:
        manifest["end"] = {"realtime_ns": time.time_ns(), "monotonic_ns": time.monotonic_ns()}
        timing = manifest.setdefault("timing", {})
        timing["run_ns"] = manifest["end"]["monotonic_ns"] - manifest["start"]["monotonic_ns"]
        if "benchmark_ns" in timing:
            timing["runner_ns"] = timing["run_ns"] - timing["benchmark_ns"]
        manifest["status"] = record.status
        manifest["reason"] = record.reason
        if runner_log.failure:
            manifest["runner_log_error"] = runner_log.failure
        record.manifest = manifest
        logging.getLogger("hostwire").removeHandler(runner_log)
        runner_log.close()
        try:
            if record.status == "complete":  # what readers check the files against
                manifest["raw_digests"] = raw_digests(partial)
            write_json_atomic(manifest_path, seal(manifest))
        except HostwireError as err:
            manifest_error = err
    if manifest_error is not None:
        raise HostwireError(f"{manifest_error}; the run's data stays in {partial}, marked 'running' "
                            "until 'hostwire doctor --cleanup' marks it")
    # The sealed manifest makes the run complete; the rename only shows it. A runner killed
    # between the two leaves its registry entry, and doctor --cleanup finishes the rename.
    if record.status == "complete":
        record.directory = publish_run(partial, final)
        if record.bench is not None:
            record.bench.directory = final / "raw" / "bench"
    unregister_live(live)
    return record


def _cpu_cap(point: RunPoint, topology: Topology | None) -> Any:
    """The sender host's CPU cap for this run (a context manager; none when not asked for)."""
    if not point.sender_cpu_share:
        return nullcontext()
    return CpuLimit(point.sender_cpu_share, tag=topology.run_id if topology is not None else "lo")


def publish_run(partial: Path, final: Path) -> Path:
    """A complete run's directory renamed from `partial` to its final name (the sealed manifest
    already says it is complete; the name only shows it)."""
    try:
        partial.rename(final)
    except OSError as err:
        raise HostwireError(f"failed to rename {partial} to {final.name}: {err.strerror or err}") from None
    return final


def create_run_dir(partial: Path, manifest: dict[str, Any], inner: str = "raw/bench") -> None:
    """Makes `partial` with its first manifest and `inner` inside: built under a hidden name and
    renamed, so that no run directory ever exists without a manifest, even when the runner is
    killed."""
    building = partial.with_name(f".{partial.name}.{os.getpid()}")
    try:
        (building / inner).mkdir(parents=True)
    except OSError as err:
        raise HostwireError(f"failed to create {partial}: {err.strerror or err}") from None
    try:
        write_json_atomic(building / MANIFEST_NAME, manifest)
        building.rename(partial)
    except (HostwireError, OSError) as err:
        shutil.rmtree(building, ignore_errors=True)  # nothing was recorded yet
        if isinstance(err, HostwireError):
            raise HostwireError(str(err).replace(str(building), str(partial))) from None
        raise HostwireError(f"failed to create {partial}: {err.strerror or err}") from None


def _update(path: Path, manifest: dict[str, Any]) -> None:
    """An intermediate manifest write: a failure is logged, the run goes on (the final write
    reports it)."""
    try:
        write_json_atomic(path, manifest)
    except HostwireError as err:
        log.warning("%s", err)


def _record_shaper(manifest: dict[str, Any], start: dict[str, int] | None, end: dict[str, int] | None) -> None:
    """The shaper's counters over the run (tc -s at start and end): drops are losses on the path
    and mark the run; overlimits (frames held back by the rate, normal for a shaper) and requeues
    are kept beside them."""
    manifest["link"] = {"qdisc_start": start, "qdisc_end": end}
    manifest.setdefault("loss_categories", {})["qdisc_drops"] = "shaper_drops"
    if start is None or end is None:
        manifest["losses"]["qdisc_drops"] = None
        return
    manifest["losses"]["qdisc_drops"] = end.get("drops", 0) - start.get("drops", 0)
    manifest["link"]["qdisc_overlimits"] = end.get("overlimits", 0) - start.get("overlimits", 0)
    manifest["link"]["qdisc_packets"] = end.get("packets", 0) - start.get("packets", 0)


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
    manifest.setdefault("loss_categories", {}).update(bench_log_overflow="log_overflows",
                                                      sieve_check_failures="sieve_failures")
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
                         manifest: dict[str, Any], cpu_cap: CpuLimit | None = None) -> BenchResult:
    """Starts the collectors, runs the benchmark, stops the collectors (always), and puts their
    exit statuses and loss counters into the manifest."""
    chosen = collectors.for_point(raw, point, topology)
    started: list[collectors.Collector] = []

    def start(tool: collectors.Collector, pid: int | None = None) -> None:
        tool.start(pid)
        started.append(tool)

    def start_late(pid: int) -> None:  # as the benchmark's pid is known, before it runs
        for tool in chosen:
            if tool.follows_pid:
                start(tool, pid)

    wrapper = [arg for tool in chosen for arg in tool.wrapper]
    try:
        for tool in chosen:
            if not tool.follows_pid and not tool.wrapper:
                start(tool)
        log.info("benchmark M=%d N=%d, %g s window; collectors: %s", point.senders, point.background,
                 point.duration_s, ", ".join(t.name for t in chosen) or "none")
        bench_start = time.monotonic_ns()
        try:
            return run_benchmark(
                raw / "bench", senders=point.senders, background=point.background,
                warmup_s=point.warmup_s, duration_s=point.duration_s, quiet_s=point.quiet_s,
                sieve_log2=point.sieve_log2, read_size=point.read_size, write_size=point.write_size,
                log_capacity=point.log_capacity, topology=topology,
                sender_cpus=point.sender_cpus, receiver_cpus=point.receiver_cpus,
                wrapper=wrapper or None,
                before_start=start_late if any(tool.follows_pid for tool in chosen) else None,
                cpu_cap=cpu_cap, think_s=point.think_s,
                receiver_pause=(point.receiver_pause_at_s, point.receiver_pause_s) if point.receiver_pause_s else None,
                receiver_rcvbuf=point.receiver_rcvbuf,
            )
        finally:
            # hw-bench main's own time (a gated tracer's start included): the rest of the run's
            # wall time is the runner's own cost (set-up, collectors, teardown).
            manifest["timing"] = {"benchmark_ns": time.monotonic_ns() - bench_start}
    finally:
        for tool in reversed(started):
            manifest["exit"][tool.name] = tool.stop()
            log.info("%s stopped (exit %s): %s", tool.name, manifest["exit"][tool.name], tool.last_message())
        for tool in chosen:
            for category, counters in tool.losses().items():
                manifest["losses"].update(counters)
                # Each counter's category as its collector declares it: the sanity metric reads
                # these instead of knowing each tool's counter names.
                manifest.setdefault("loss_categories", {}).update({key: category for key in counters})
