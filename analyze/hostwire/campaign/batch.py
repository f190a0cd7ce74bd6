"""A campaign (DESIGN.md sections 2 and 7): every run of a config's grid, each recorded by
hostwire.record.runner.record_run into `<campaign dir>/<run-id>/`, with `campaign.json` beside them.

Each run is keyed by a hash of its resolved parameters, its repetition and the host's facts
(kernel, CPU, clock source, and the link and offload settings the topology applies), so
`--resume` skips the complete runs whose key matches and records the rest again; what a failed or
interrupted attempt recorded is kept, renamed `<run-id>.partial-<k>`. A failed run is recorded
and the campaign goes on."""

from __future__ import annotations

import hashlib
import json
import logging
import math
import random
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hostwire import manifest as manifest_mod
from hostwire.campaign import diskuse
from hostwire.campaign.config import CampaignConfig
from hostwire.campaign.precision import Precision
from hostwire.errors import HostwireError, UsageError
from hostwire.lifeline import sigterm_unwinds
from hostwire.locks import locked
from hostwire.metrics.regime import setup_label
from hostwire.record.runner import RunPoint, host_facts, record_run

log = logging.getLogger(__name__)

CAMPAIGN_FORMAT = "hostwire-campaign 1"
CAMPAIGN_FILE = manifest_mod.CAMPAIGN_FILE
# A run's time beyond its warm-up, window and quiet time, for --dry-run's estimate: the runner's
# own 0.5 s and hw-bench main's 1.4 s (perf/bench_campaign.py), rounded up.
ESTIMATED_OVERHEAD_S = 2.5
# Host facts that change what a run measures, and that are known before it starts.
KEY_FACTS = ("kernel_release", "machine", "cpus", "cpu_model", "clocksource")
# What the topology sets up identically for every run (topology.py): part of the key, so that a
# change of these settings is a different run.
TOPOLOGY_SETTINGS = {"offloads": "tso gso gro tx rx off", "mtu": 1500}
# Run parameters that campaigns recorded before them did not have, with their defaults: a point
# that leaves one at its default keeps the key it had then.
LATER_FIELDS: dict[str, Any] = {"collectors": "", "kernel_source": "tracefs", "sender_rps": False}


@dataclass
class PlannedRun:
    index: int
    run_id: str
    key: str
    repetition: int
    point: RunPoint
    point_index: int = 0

    def describe(self) -> str:
        p = self.point
        return (f"M={p.senders} N={p.background} {setup_label(asdict(p))} syscalls={p.syscalls} "
                f"rep {self.repetition + 1}")


@dataclass
class CampaignResult:
    directory: Path
    runs: list[dict[str, Any]] = field(default_factory=list)

    @property
    def failed(self) -> list[dict[str, Any]]:
        return [r for r in self.runs if r.get("status") != "complete"]


def run_key(point: RunPoint, repetition: int, facts: dict[str, Any], hosts: dict[str, str] | None = None) -> str:
    described = asdict(point)
    for name, default in LATER_FIELDS.items():  # at their defaults, earlier campaigns' keys stay
        if described.get(name) == default:
            described.pop(name, None)
    material = {
        "point": described,
        "repetition": repetition,
        "host": {k: facts.get(k) for k in KEY_FACTS},
        "topology": TOPOLOGY_SETTINGS,
    }
    if hosts:  # real hosts: who plays each role is part of what a run measured
        material["hosts"] = hosts
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()


def plan(config: CampaignConfig, facts: dict[str, Any] | None = None) -> list[PlannedRun]:
    """The campaign's runs in the order they will be recorded."""
    facts = facts if facts is not None else host_facts(None)
    points = list(enumerate(config.points()))
    order = [(rep, i, point) for rep in range(config.repetitions)
             for i, point in (points[::-1] if config.order == "alternating" and rep % 2 else points)]
    if config.order == "shuffled":
        random.Random(config.seed).shuffle(order)
    return [planned_run(config, facts, index, i, point, rep) for index, (rep, i, point) in enumerate(order)]


def planned_run(config: CampaignConfig, facts: dict[str, Any], index: int, point_index: int,
                point: RunPoint, repetition: int) -> PlannedRun:
    """The run of the grid's point_index-th point, repetition `repetition` (from 0), recorded
    index-th: its key and the directory name that carries it."""
    key = run_key(point, repetition, facts, {role: d.text for role, d in config.hosts.destinations().items()}
                  if config.hosts.remote else None)
    run_id = f"p{point_index:03d}-M{point.senders}-N{point.background}-r{repetition + 1}-{key[:8]}"
    return PlannedRun(index=index, run_id=run_id, key=key, repetition=repetition, point=point,
                      point_index=point_index)


def complete_run(directory: Path, key: str) -> bool:
    """Whether directory holds a complete run recorded under this key."""
    try:
        data = json.loads((directory / manifest_mod.MANIFEST_NAME).read_text())
    except (OSError, ValueError):
        return False
    return data.get("status") == "complete" and data.get("config", {}).get("run_key") == key


def _keep_aside(partial: Path) -> Path:
    """Renames an earlier attempt's `.partial` directory so a new attempt can start; never
    deletes what it recorded."""
    k = 1
    while (aside := partial.with_name(f"{partial.name}-{k}")).exists():
        k += 1
    partial.rename(aside)
    return aside


def _write_campaign(directory: Path, config: CampaignConfig, planned: list[PlannedRun],
                    runs: dict[str, dict[str, Any]], state: str, hosts: Any = None) -> None:
    manifest_mod.write_json_atomic(directory / CAMPAIGN_FILE, {
        **({"hosts": hosts.facts()} if hosts is not None else {}),
        "format": CAMPAIGN_FORMAT,
        "name": config.name,
        "state": state,
        "config": config.resolved(),
        "host": host_facts(None),
        "runs": [runs.get(p.run_id, {"run_id": p.run_id, "key": p.key, "status": "pending",
                                     "point": asdict(p.point), "repetition": p.repetition})
                 for p in planned],
    })


def run_campaign(config: CampaignConfig, directory: Path, *, resume: bool = False,
                 progress: Callable[[PlannedRun, int, int], None] | None = None,
                 keep_remote: bool = False, until: Precision | None = None) -> CampaignResult:
    """Records every planned run into directory. `progress(run, done, total)` is called before
    each run; keep_remote leaves the real hosts' scratch folders in place; `until` adds
    repetitions to the points whose goodput interval is wider than it asks (campaign.precision).
    Raises UsageError when directory holds another campaign's runs and resume is off;
    KeyboardInterrupt and Terminated propagate after campaign.json is written."""
    planned = plan(config)
    if config.host["mode"] == "vm":
        from hostwire.record import vm

        vm.kernel_image(config.host["kernel"])  # one line naming 'make kernel' before any run
    directory.mkdir(parents=True, exist_ok=True)
    with locked(directory, "hostwire run"):  # one writer at a time (hostwire.locks)
        # listed while it records, so that doctor finds it when the runner is killed between runs
        live = manifest_mod.register_live(directory, kind="campaign")
        try:
            # real hosts: SIGTERM unwinds too, so that their scratch folders are removed
            with sigterm_unwinds() if config.hosts.remote else nullcontext():
                return _record_campaign(config, planned, directory, resume, progress, keep_remote, until)
        finally:
            manifest_mod.unregister_live(live)


def _record_campaign(config: CampaignConfig, planned: list[PlannedRun], directory: Path, resume: bool,
                     progress: Callable[[PlannedRun, int, int], None] | None, keep_remote: bool,
                     until: Precision | None = None) -> CampaignResult:
    existing = [p for p in directory.iterdir() if not p.name.startswith(".") and p.name != CAMPAIGN_FILE]
    if existing and not resume:
        raise UsageError(f"{directory} holds runs already; --resume continues that campaign, "
                         "or choose another --out")
    runs: dict[str, dict[str, Any]] = {}
    state = "running"
    hosts = None
    if config.hosts.remote:  # real hosts: reached, checked and given the tools once, before the first run
        from hostwire.campaign.hosts_batch import CampaignHosts

        hosts = CampaignHosts.prepare(config, keep_remote)
    try:
        _write_campaign(directory, config, planned, runs, state, hosts)
        for item in _rounds(config, planned, directory, until):
            final = directory / item.run_id
            entry = {"run_id": item.run_id, "key": item.key, "point": asdict(item.point),
                     "repetition": item.repetition}
            if resume and complete_run(final, item.key):
                runs[item.run_id] = {**entry, "status": "complete", "reason": "", "resumed": True}
                continue
            if final.exists():  # a run directory that is not this key's complete run
                raise HostwireError(f"{final} exists but is not a complete run of this campaign's point; "
                                    "move it away and resume")
            partial = final.with_name(final.name + ".partial")
            if partial.exists():
                aside = _keep_aside(partial)
                log.info("kept the earlier attempt of %s as %s", item.run_id, aside.name)
            if progress is not None:
                progress(item, item.index, len(planned))
            run_config = {**config.resolved(), "run_key": item.key, "run_index": item.index,
                          "repetition": item.repetition}
            try:
                if hosts is not None:
                    status, reason = hosts.record(directory, item.run_id, item.point, run_config)
                elif config.host["mode"] == "vm":
                    from hostwire.record.vm_run import record_run_in_vm

                    status, reason = record_run_in_vm(directory, item.run_id, item.point, run_config,
                                                      kernel=config.host["kernel"],
                                                      timeout_s=config.host["vm_timeout_s"])
                else:
                    record = record_run(directory, item.run_id, item.point, config=run_config)
                    status, reason = record.status, record.reason
                runs[item.run_id] = {**entry, "status": status, "reason": reason}
            except UsageError:
                raise
            except HostwireError as err:  # the run directory could not be written: go on
                runs[item.run_id] = {**entry, "status": "failed", "reason": str(err)}
            if runs[item.run_id]["status"] != "complete":
                log.warning("run %s %s: %s", item.run_id, runs[item.run_id]["status"], runs[item.run_id]["reason"])
            _write_campaign(directory, config, planned, runs, state, hosts)
        state = "complete"
    except BaseException:
        state = "interrupted"
        raise
    finally:
        try:
            _write_campaign(directory, config, planned, runs, state, hosts)
        finally:
            if hosts is not None:  # the hosts' scratch folders, also after an error or Ctrl-C
                hosts.cleanup()
    return CampaignResult(directory=directory, runs=[runs[p.run_id] for p in planned])


def _rounds(config: CampaignConfig, planned: list[PlannedRun], directory: Path,
            until: Precision | None) -> Iterator[PlannedRun]:
    """The planned runs, then (with `until`) round after round of one more repetition of each
    point whose goodput interval is still too wide, appended to `planned` as they are decided
    from the runs recorded so far."""
    yield from list(planned)
    if until is None:
        return
    facts = host_facts(None)
    round_number = 0
    while wanted := until.next_round(config, planned, directory, round_number):
        extra = [planned_run(config, facts, len(planned) + k, i, point, rep)
                 for k, (i, point, rep) in enumerate(wanted)]
        planned.extend(extra)
        yield from extra
        round_number += 1


def estimated_seconds(config: CampaignConfig) -> float:
    """--dry-run's estimate of a campaign's time in netns mode (tests/test_campaign_e2e.py checks
    it against a short campaign's real time)."""
    return sum(p.point.warmup_s + p.point.duration_s + p.point.quiet_s + ESTIMATED_OVERHEAD_S
               for p in plan(config, facts={}))


def format_estimate(total_s: float) -> str:
    """H:MM:SS, with days in front past 24 hours ('3 days 01:00:00'), never wrapped."""
    whole = int(math.ceil(total_s))
    days, rest = divmod(whole, 86400)
    clock = f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return (f"{days} day{'s' if days != 1 else ''} " if days else "") + clock


def dry_run_lines(config: CampaignConfig) -> list[str]:
    planned = plan(config)
    lines = [f"{len(planned)} runs of campaign {config.name!r} ({config.order}"
             + (f", seed {config.seed}" if config.order == "shuffled" else "") + ")"]
    total_s = 0.0
    disk = 0
    for item in planned:
        p = item.point
        total_s += p.warmup_s + p.duration_s + p.quiet_s + ESTIMATED_OVERHEAD_S
        disk += sum(diskuse.estimate(p).values())
        lines.append(f"{item.index + 1:4d}  {item.run_id}  {item.describe()}")
    lines.append(f"estimated disk: {diskuse.describe(disk)} ({disk} bytes; the kernel trace at a quiet host's rate, more when other work shares the CPUs; "
                 "docs/performance.md)")
    lines.append(f"estimated time: {format_estimate(total_s)}"
                 + (f" plus a guest boot per run ({config.host['kernel']} kernel; minutes each without KVM)"
                    if config.host["mode"] == "vm" else ""))
    return lines
