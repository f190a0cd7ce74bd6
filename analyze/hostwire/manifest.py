"""The run manifest (DESIGN.md section 7): its format, its atomic writes, and how a reader tells a
run in progress from one whose runner was killed.

A run's manifest exists from its first second: the runner writes it with status `running` and
its own identity (pid, process start time, boot id) before anything starts, replaces it
atomically (temporary file, fsync, rename) as the run goes on, and gives it its final status at
the end. A runner killed with SIGKILL leaves a `running` manifest whose runner is gone; readers
report such a run as `partial` ("runner killed"), and `hostwire doctor --cleanup` writes that
status into it. Live runs are also listed in a registry of small files under /run/hostwire, so
that doctor finds the runs of a killed runner wherever their output directory was.

This module imports nothing of the recording side, so reading a run never does."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hostwire.errors import HostwireError, InputError
from hostwire.safewrite import write_text

MANIFEST_FORMAT = "hostwire-run 1"
MANIFEST_NAME = "manifest.json"
REGISTRY_DIR = Path(os.environ.get("HOSTWIRE_REGISTRY", "/run/hostwire/live"))
KILLED_REASON = "runner killed"
CAMPAIGN_FILE = "campaign.json"  # a campaign's own state, beside its runs (hostwire.campaign.batch)


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Writes data as JSON to path through a fresh temporary file and a rename (safewrite), so the
    path holds either the old or the new content, never a half-written one, and no symbolic link
    is followed. A failure (disk full, read-only) removes the temporary file and raises
    HostwireError naming the path."""
    write_text(path, json.dumps(data, indent=2) + "\n")


def boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def process_start_ticks(pid: int) -> int | None:
    """The start time of a process in clock ticks since boot (/proc/PID/stat field 22): with the
    pid it names one process, even after the pid is reused."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: count from its closing one.
    fields = stat[stat.rindex(")") + 2:].split()
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def runner_identity() -> dict[str, Any]:
    pid = os.getpid()
    return {"pid": pid, "start_ticks": process_start_ticks(pid), "boot_id": boot_id()}


def runner_alive(runner: Any) -> bool:
    """Whether the process described by a manifest's `runner` entry still runs."""
    if not isinstance(runner, dict) or not isinstance(runner.get("pid"), int):
        return False
    if runner.get("boot_id") and runner.get("boot_id") != boot_id():
        return False
    ticks = process_start_ticks(runner["pid"])
    return ticks is not None and ticks == runner.get("start_ticks")


def effective_status(manifest: dict[str, Any]) -> tuple[str, str]:
    """(status, reason) of a run as a reader should take it: a `running` manifest whose runner is
    gone is a partial run killed before it could mark itself."""
    status = str(manifest.get("status", "unknown"))
    reason = str(manifest.get("reason", "") or "")
    if status == "running" and not runner_alive(manifest.get("runner")):
        return "partial", f"{KILLED_REASON} (pid {manifest.get('runner', {}).get('pid', '?')} is gone)"
    return status, reason


def _registry_entry(run_dir: Path) -> Path:
    digest = hashlib.sha1(str(run_dir.resolve()).encode()).hexdigest()[:12]
    return REGISTRY_DIR / f"{os.getpid()}-{digest}.json"


def register_live(run_dir: Path, kind: str = "run") -> Path | None:
    """Lists a run (or, with kind "campaign", a campaign directory) in progress in the registry;
    returns the entry (None when it cannot be written: the work goes on, only doctor's search for
    it after a kill is lost)."""
    entry = _registry_entry(run_dir)
    try:
        REGISTRY_DIR.mkdir(parents=True, exist_ok=True)
        write_json_atomic(entry, {f"{kind}_dir": str(run_dir.resolve()), "runner": runner_identity()})
    except (OSError, HostwireError):
        return None
    return entry


def unregister_live(entry: Path | None) -> None:
    if entry is not None:
        try:
            entry.unlink()
        except OSError:
            pass


def registered_runs(kind: str = "run") -> list[tuple[Path, Path, dict[str, Any]]]:
    """(entry, directory, runner) of every registered run (kind "campaign": campaign)."""
    found = []
    for entry in sorted(REGISTRY_DIR.glob("*.json")) if REGISTRY_DIR.is_dir() else []:
        try:
            data = json.loads(entry.read_text())
            if not isinstance(data, dict) or not any(k.endswith("_dir") for k in data):
                raise ValueError("not an entry")
        except (OSError, ValueError, TypeError):
            if kind == "run":  # an unreadable entry: doctor names it with the runs
                found.append((entry, Path(), {}))
            continue
        if f"{kind}_dir" in data:
            found.append((entry, Path(data[f"{kind}_dir"]), data.get("runner", {})))
    return found


# -- digests: a complete run's files as they were when the runner finished --------------------

DIGEST_FIELD = "digest"


def file_digest(path: Path) -> str:
    """sha256 of a file's bytes (what `sha256sum` prints)."""
    sha = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            sha.update(chunk)
    return sha.hexdigest()


def raw_digests(run_dir: Path) -> dict[str, dict[str, Any]]:
    """{path relative to the run: {sha256, bytes}} of every file under raw/."""
    out = {}
    for path in sorted((run_dir / "raw").rglob("*")):
        if path.is_file():
            out[str(path.relative_to(run_dir))] = {"sha256": file_digest(path), "bytes": path.stat().st_size}
    return out


def _canonical(manifest: dict[str, Any]) -> bytes:
    body = {k: v for k, v in manifest.items() if k != DIGEST_FIELD}
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def seal(manifest: dict[str, Any]) -> dict[str, Any]:
    """Sets the manifest's own digest (over everything else in it), so that a changed value is
    found when it is read."""
    manifest[DIGEST_FIELD] = hashlib.sha256(_canonical(manifest)).hexdigest()
    return manifest


def seal_holds(data: dict[str, Any]) -> bool:
    """Whether a sealed file (seal) still has the content its digest was made from."""
    return data.get(DIGEST_FIELD) == hashlib.sha256(_canonical(data)).hexdigest()


def check_seal(path: Path, manifest: dict[str, Any]) -> None:
    """Raises InputError when a sealed manifest's content no longer matches its digest (a manifest
    without a digest, written by an older hostwire or still running, passes)."""
    expected = manifest.get(DIGEST_FIELD)
    if expected is None:
        # the runner seals a manifest when it writes its raw files' digests: one with those and
        # without its own digest lost it (a flipped bit in the key's name)
        if "raw_digests" in manifest:
            raise InputError(f"{path}: the manifest has the raw files' digests but not its own: changed or "
                             "damaged after the run")
        return
    if hashlib.sha256(_canonical(manifest)).hexdigest() != expected:
        raise InputError(f"{path}: content does not match its digest (the manifest was changed or damaged "
                         "after the run)")


def check_raw_file(run_dir: Path, manifest: dict[str, Any], relative: str,
                   digest: Callable[[], str | None] | None = None) -> str | None:
    """Why a raw file differs from what the runner recorded (None when it matches, or when the run
    recorded no digest for it). `digest` gives the file's sha256 when a caller keeps it (a Run
    digests each file once); the size may tell a change without it, never sameness."""
    recorded = (manifest.get("raw_digests") or {}).get(relative)
    if not isinstance(recorded, dict):
        return None
    path = run_dir / relative
    try:
        size = path.stat().st_size
    except OSError:
        return f"{run_dir / relative}: missing (the run recorded {recorded.get('bytes')} bytes)"
    if size != recorded.get("bytes"):
        return (f"{path}: {size} bytes, the run recorded {recorded.get('bytes')} (cut or changed after "
                "the run)")
    if (digest() if digest is not None else file_digest(path)) != recorded.get("sha256"):
        return f"{path}: content differs from the sha256 the run recorded (damaged or changed after the run)"
    return None
