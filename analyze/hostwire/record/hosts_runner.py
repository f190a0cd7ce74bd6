"""Recording one run on real hosts into a run directory: as hostwire.record.runner does for the
namespaces (a `.partial` directory renamed when complete, a sealed manifest, the run lock), with
record.remote_run doing the work on the hosts. Then, from what came back: the clocks of every host
on the sender's and the canonical raw/wirecap.json of the capture host (by the AlignClocks it is
handed), and each host's /proc summary."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import hostwire
from hostwire.errors import HostwireError, InputError, Terminated
from hostwire.lifeline import sigterm_unwinds
from hostwire.locks import locked
from hostwire.manifest import (MANIFEST_FORMAT, MANIFEST_NAME, raw_digests, register_live, runner_identity, seal,
                               unregister_live, write_json_atomic)
from hostwire.read.procsamples import read_proc_samples, run_summary
from hostwire.record.hosts import Host, HostLost
from hostwire.record.point import RunPoint
from hostwire.record.remote_prepare import Prepared
from hostwire.record.remote_run import record_on_hosts, role_of, unique_hosts
from hostwire.record.runner import RunRecord, create_run_dir, git_revision, publish_run

log = logging.getLogger(__name__)


# What maps every host's clocks onto the sender's from the files that came back (raw, each role's
# machine folder, the receiver's address), written into the manifest as "clocks": the analysis's
# (timeline.host_alignment.align), handed in by the campaign so that recording imports no analysis.
AlignClocks = Callable[[Path, dict[str, str], str], dict[str, Any]]


def record_run_on_hosts(run_root: Path, run_id: str, point: RunPoint, hosts: dict[str, Host],
                        prepared: dict[str, Prepared], config: dict[str, Any], *,
                        align_clocks: AlignClocks) -> RunRecord:
    """Records one run; never raises for a host's or a tool's failure (the run is kept and marked)."""
    final, partial = run_root / run_id, run_root / f"{run_id}.partial"
    record = RunRecord(run_id=run_id, directory=partial)
    manifest: dict[str, Any] = {
        "format": MANIFEST_FORMAT, "run_id": run_id, "status": "running", "reason": "",
        "runner": runner_identity(), "config": config, "point": asdict(point),
        "tools": {"hostwire": hostwire.__version__}, "git_revision": git_revision(),
        "host": dict(prepared["sender"].facts),
        "hosts": {role: {**prepared[role].as_dict(), "roles": [r for r in hosts
                                                                 if role_of(hosts, r) == role]}
                  for role in unique_hosts(hosts)},
        "start": {"realtime_ns": time.time_ns(), "monotonic_ns": time.monotonic_ns()},
        "losses": {}, "exit": {},
    }
    create_run_dir(partial, manifest)
    with locked(partial, f"hostwire run: recording {run_id}"):
        live = register_live(partial)
        raw = partial / "raw"
        try:
            with sigterm_unwinds():
                try:
                    code = record_on_hosts(raw, point, hosts, prepared, run_id, manifest)
                    manifest["exit"]["hw-bench"] = code
                    record.status, record.reason = _judge(code, manifest)
                except HostLost as err:
                    record.status, record.reason = "partial", str(err)
                except HostwireError as err:
                    record.status, record.reason = "failed", str(err)
                _after(raw, point, hosts, manifest, align_clocks)
        except (KeyboardInterrupt, Terminated):
            record.status, record.reason = "partial", "interrupted"
            raise
        finally:
            manifest["end"] = {"realtime_ns": time.time_ns(), "monotonic_ns": time.monotonic_ns()}
            manifest["status"], manifest["reason"] = record.status, record.reason
            if record.status == "complete":
                manifest["raw_digests"] = raw_digests(partial)
            write_json_atomic(partial / MANIFEST_NAME, seal(manifest))
            record.manifest = manifest
        if record.status == "complete":
            record.directory = publish_run(partial, final)
        unregister_live(live)
    return record


def _judge(code: int | None, manifest: dict[str, Any]) -> tuple[str, str]:
    if code is None:
        return "failed", "the benchmark did not run"
    if code != 0:
        return "failed", manifest.get("bench_stderr") or f"hw-bench main exited with {code}"
    failed = [f"{name} exited with {value}" for name, value in manifest["exit"].items()
              if name != "hw-bench" and value not in (0, None)]
    if failed:
        return "partial", "; ".join(failed)
    if manifest.get("fetch_errors"):
        return "partial", manifest["fetch_errors"][0]
    return "complete", ""


def _after(raw: Path, point: RunPoint, hosts: dict[str, Host], manifest: dict[str, Any],
           align_clocks: AlignClocks) -> None:
    """What is computed from the files that came back; a file that is missing or damaged leaves
    its entry out with the reason (the run's status is not changed by it)."""
    spec = next(iter(hosts.values())).spec
    address = spec.receiver_address or hosts["receiver"].destination.hostname
    proc: dict[str, Any] = {}
    for role in unique_hosts(hosts):
        path = raw / "hosts" / role / "proc.txt"
        if path.exists():
            try:
                proc[role] = run_summary(read_proc_samples(path))
                proc[role]["interval_s"] = spec.resources_interval_s
            except InputError as err:
                proc[role] = {"error": str(err)}
    manifest["proc"] = proc
    if point.kernel_trace:  # each traced host's ring-buffer losses, named by its role
        from hostwire.record.collectors import TRACE_OVERRUNS, sched_losses

        overruns = manifest["losses"][TRACE_OVERRUNS] = {}
        for role in {"sender", role_of(hosts, "receiver")}:
            path = raw / "hosts" / role / "sched.json"
            overruns.update(sched_losses(path, f"{role}_"))
            if role != "sender" and path.exists():
                # the timeline maps this host's trace through its own pair of clocks (trace_pair),
                # not by their being equal: what must hold is that the pair stayed put over the run
                overruns[f"{role}_sched_clock_check_ok"] = pair_steady(json.loads(path.read_text()))
    try:
        manifest["clocks"] = align_clocks(raw, {role: role_of(hosts, role) for role in hosts}, address)
    except (InputError, HostwireError, OSError, ValueError, KeyError) as err:
        manifest["clocks"] = {"error": str(err)}


PAIR_STEADY_NS = 10_000  # as hw-schedtrace's own clock check (sched.json clock_check limit_ns)


def pair_steady(sched_meta: dict[str, Any]) -> bool | None:
    """Whether a host's trace clock minus its user-space clock was the same, within
    PAIR_STEADY_NS, at the trace's start and stop (None: a pair is missing)."""
    check = sched_meta.get("clock_check") or {}
    diffs = [check[k]["diff_ns"] for k in ("start", "stop") if isinstance(check.get(k), dict)]
    return abs(diffs[0] - diffs[1]) <= PAIR_STEADY_NS if len(diffs) == 2 else None
