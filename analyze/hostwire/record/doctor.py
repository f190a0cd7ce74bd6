"""Facility checks (`hostwire doctor`) and removal of what killed runs left behind."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from hostwire.record import cpulimit, parts, topology
from hostwire.record.finding import Finding

from hostwire import manifest, paths
from hostwire.errors import HostwireError
from hostwire.locks import locked

TRACEFS_CANDIDATES = (Path("/sys/kernel/tracing"), Path("/sys/kernel/debug/tracing"))
LIBRARIES = ("libpcap", "libtracefs", "libtraceevent")
PROGRAMS = ("ip", "tc", "ethtool", "tcpdump", "tshark", "strace")
INSTANCE_PREFIX = "hw-"


def tracefs_root() -> Path | None:
    for path in TRACEFS_CANDIDATES:
        if (path / "instances").is_dir():
            return path
    return None


def check_root() -> Finding:
    ok = os.geteuid() == 0
    return Finding("root", ok, "running as root" if ok else f"running as uid {os.geteuid()}",
                   "run as root (namespaces, tracefs and capture need it)")


def check_tracefs() -> Finding:
    root = tracefs_root()
    if root is None:
        return Finding("tracefs", False, "tracefs is not mounted",
                       "mount -t tracefs nodev /sys/kernel/tracing")
    ok = os.access(root / "instances", os.W_OK)
    return Finding("tracefs", ok, f"mounted at {root}" + ("" if ok else ", not writable"),
                   "run as root")


def check_netns() -> Finding:
    if shutil.which("ip") is None:
        return Finding("network namespaces", False, "the ip command is missing", "make setup (iproute2)")
    probe = f"{topology.NAME_PREFIX}{os.getpid()}-doctor-tx"
    add = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if add.returncode != 0:
        return Finding("network namespaces", False, add.stderr.strip() or "ip netns add failed",
                       "run as root on a kernel with CONFIG_NET_NS")
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return Finding("network namespaces", True, "can create and remove namespaces")


def check_ptrace() -> Finding:
    scope_file = Path("/proc/sys/kernel/yama/ptrace_scope")
    scope = scope_file.read_text().strip() if scope_file.exists() else "0"
    ok = scope in ("0", "1") or os.geteuid() == 0 and scope == "2"
    return Finding("ptrace", ok, f"yama ptrace_scope = {scope}",
                   "echo 1 > /proc/sys/kernel/yama/ptrace_scope")


def check_libraries() -> list[Finding]:
    """The libraries the C tools link: as the installed tools load them, or, in a checkout, as
    pkg-config finds them for building; and the programs hostwire runs."""
    findings = []
    if paths.build_dir_origin()[1] == "installed":
        findings += parts.check_linked_libraries(LIBRARIES)
    for lib in LIBRARIES if not findings else ():
        ok = shutil.which("pkg-config") is not None and subprocess.run(
            ["pkg-config", "--exists", lib], capture_output=True).returncode == 0
        findings.append(Finding(f"library {lib}", ok, "found" if ok else "not found by pkg-config",
                                "make setup"))
    for prog in PROGRAMS:
        where = shutil.which(prog)
        findings.append(Finding(f"program {prog}", where is not None, where or "not on PATH", "make setup"))
    return findings


def check_cpus() -> Finding:
    count = os.cpu_count() or 1
    return Finding("CPUs", count >= 2, f"{count} CPU(s)",
                   "the two-host topology pins sender and receiver to different CPUs; use 2 or more")


def run_checks() -> list[Finding]:
    return [*parts.check_package(), *parts.check_tools(), check_root(), check_tracefs(), check_netns(),
            check_ptrace(), *check_libraries(), check_cpus(), *parts.check_documentation()]


def stale_instances() -> list[Path]:
    """tracefs instances named hw-<pid>[...] whose owning process is gone."""
    root = tracefs_root()
    if root is None:
        return []
    stale = []
    for inst in sorted((root / "instances").glob(f"{INSTANCE_PREFIX}*")):
        owner = inst.name[len(INSTANCE_PREFIX):].split("-")[0]
        if owner.isdigit() and topology.pid_alive(int(owner)):
            continue
        stale.append(inst)
    return stale


def killed_runs() -> list[tuple[Path, Path]]:
    """(registry entry, run directory) of runs whose runner is gone without marking them."""
    found = []
    for entry, run_dir, runner in manifest.registered_runs():
        if not manifest.runner_alive(runner):
            found.append((entry, run_dir))
    return found


def mark_killed_run(run_dir: Path) -> str | None:
    """Gives a killed run's `running` manifest its status (partial, "runner killed") and the
    window it really recorded, or finishes the rename of a run that was sealed complete; returns
    what was done, None when there was nothing to do."""
    path = run_dir / manifest.MANIFEST_NAME
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    if data.get("status") == "complete" and run_dir.name.endswith(".partial"):
        final = run_dir.with_name(run_dir.name.removesuffix(".partial"))
        if final.exists():
            return f"run {run_dir} is complete but {final.name} exists; left as it is"
        run_dir.rename(final)  # the runner was killed after sealing the manifest, before the rename
        return f"renamed complete run {run_dir} to {final.name}"
    if data.get("status") != "running":
        return None
    status, reason = manifest.effective_status(data)
    if status == "running":  # its runner still runs
        return None
    data["status"], data["reason"] = status, reason
    try:
        from hostwire.run_directory import Run

        start, end = Run(run_dir, data).window_ns()
        data["window_ns_recorded"] = [int(start), int(end)]
    except Exception as err:  # noqa: BLE001 - a run too damaged for a window is still marked
        data["window_ns_recorded"] = None
        data["window_error"] = str(err)
    manifest.write_json_atomic(path, manifest.seal(data))
    return f"marked run {run_dir} partial ({reason})"


def mark_killed() -> list[str]:
    """Marks the runs of killed runners (mark_killed_run) and, in a campaign directory, its
    campaign.json: the campaign `interrupted`, the run `partial`. Each campaign directory is
    locked meanwhile (hostwire.locks): a runner that holds it raises LockedError naming its pid."""
    done: list[str] = []

    def killed_run(run_dir: Path) -> str | None:
        line = mark_killed_run(run_dir)
        if (run_dir.parent / manifest.CAMPAIGN_FILE).is_file():
            line = "; ".join(filter(None, [line, mark_campaign_interrupted(run_dir.parent, run_dir)]))
        return line

    work = [(entry, run_dir.parent, f"run {run_dir}", lambda d=run_dir: killed_run(d))
            for entry, run_dir in killed_runs()]
    # a campaign killed between two runs: no run names it, its own entry does
    work += [(entry, campaign, f"campaign {campaign}", lambda c=campaign: mark_campaign_interrupted(c, None))
             for entry, campaign in killed_campaigns() if (campaign / manifest.CAMPAIGN_FILE).is_file()]
    for entry, campaign, what, mark in work:
        guard = locked(campaign, "hostwire doctor --cleanup", wait_s=1.0) if campaign.is_dir() else nullcontext()
        with guard:  # a live holder raises LockedError naming its pid
            try:
                line = mark()
            except (HostwireError, OSError) as err:
                done.append(f"could not mark {what}: {getattr(err, 'strerror', None) or err}")
                continue
        if line:
            done.append(line)
        manifest.unregister_live(entry)
    for entry, campaign in killed_campaigns():  # nothing to mark: the entry alone is stale
        if not (campaign / manifest.CAMPAIGN_FILE).is_file():
            manifest.unregister_live(entry)
    return done


def killed_campaigns() -> list[tuple[Path, Path]]:
    """(registry entry, campaign directory) of campaigns whose runner is gone."""
    return [(entry, campaign) for entry, campaign, runner in manifest.registered_runs("campaign")
            if not manifest.runner_alive(runner)]


def mark_campaign_interrupted(campaign: Path, run_dir: Path | None) -> str | None:
    """Gives campaign.json the state a killed runner could not write: the campaign `interrupted`
    (when it says `running`), and the killed run's entry (None: the runner was killed between two
    runs) the status its manifest now has. The caller holds the campaign's lock, so no runner is
    writing it."""
    path = campaign / manifest.CAMPAIGN_FILE
    try:
        book = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        return f"could not read {path}: {getattr(err, 'strerror', None) or err}"
    if not isinstance(book, dict):
        return f"{path}: not a campaign file; left as it is"
    changed = []
    if book.get("state") in ("running", "pending"):
        book["state"] = "interrupted"
        changed.append("campaign interrupted")
    if run_dir is not None:
        changed += _mark_campaign_run(book, campaign, run_dir)
    if not changed:
        return None
    manifest.write_json_atomic(path, book)
    return f"{path}: " + ", ".join(changed)


def _mark_campaign_run(book: dict[str, Any], campaign: Path, run_dir: Path) -> list[str]:
    changed = []
    run_id = run_dir.name.removesuffix(".partial")
    final = campaign / run_id
    where = final if final.is_dir() and not run_dir.is_dir() else run_dir
    try:
        data = json.loads((where / manifest.MANIFEST_NAME).read_text())
        status, reason = manifest.effective_status(data)
    except (OSError, ValueError, AttributeError):
        status, reason = "partial", manifest.KILLED_REASON
    for item in book.get("runs") or []:
        if isinstance(item, dict) and item.get("run_id") == run_id and item.get("status") in ("running", "pending"):
            item["status"], item["reason"] = status, reason
            changed.append(f"run {run_id} {status}")
    return changed


def cleanup() -> list[str]:
    """Remove stale hw* namespaces (their veths and qdiscs go with them) and tracefs instances;
    mark the runs of killed runners."""
    removed = [f"namespace {ns}" for ns in topology.remove_namespaces(topology.stale_namespaces())]
    for group in cpulimit.stale_groups(topology.pid_alive):
        removed.append(f"cgroup {group}" if cpulimit.remove_group(group, wait_s=1.0)
                       else f"cgroup {group} (could not remove: processes in it)")
    removed += mark_killed()
    for inst in stale_instances():
        try:
            inst.rmdir()
            removed.append(f"tracefs instance {inst.name}")
        except OSError as err:
            removed.append(f"tracefs instance {inst.name} (could not remove: {err.strerror})")
    return removed


def leftovers() -> list[str]:
    """What killed runs left behind, one line each (what `cleanup` would remove or mark)."""
    lines = [f"stale network namespace {ns}" for ns in topology.stale_namespaces()]
    lines += [f"stale tracefs instance {inst.name}" for inst in stale_instances()]
    lines += [f"stale CPU-cap cgroup {group}" for group in cpulimit.stale_groups(topology.pid_alive)]
    lines += [f"run {run_dir} not marked (its runner was killed)" for _, run_dir in killed_runs()]
    lines += [f"campaign {campaign} not marked (its runner was killed)" for _, campaign in killed_campaigns()
              if (campaign / manifest.CAMPAIGN_FILE).is_file()]
    return lines
