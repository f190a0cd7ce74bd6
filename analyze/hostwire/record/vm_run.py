"""vm mode of the campaign runner: every run boots a fresh guest (hostwire.record.vm) that records the run
with the same runner as on the host (hostwire.record.runner.record_run, its two namespaces inside the
guest), into the campaign directory, which the guest mounts read-write at the same path. The host
then adds the boot to the run's manifest (`vm`: kernel flavour and release, boot id, boot time,
accelerator, whether timings are emulated) and keeps the guest's console as `vm-boot.log`.

A guest that never boots, or hangs and is killed after the timeout, leaves its run failed (what it
recorded stays, marked), never the campaign stopped.

Guest side: `python -m hostwire.record.vm_run JOB.json` records the job's run."""

from __future__ import annotations

import json
import shutil
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable

from hostwire import paths
from hostwire.record import vm
from hostwire.errors import HostwireError, Terminated
from hostwire.manifest import MANIFEST_NAME, seal, write_json_atomic
from hostwire.record.point import RunPoint
from hostwire.lifeline import sigterm_unwinds

BOOT_DIR = ".vm"


def record_run_in_vm(run_root: Path, run_id: str, point: RunPoint, config: dict[str, Any], *, kernel: str,
                     timeout_s: float) -> tuple[str, str]:
    """Boots a guest of `kernel` that records run_root/run_id; returns (status, reason)."""
    run_root = run_root.resolve()
    work = run_root / BOOT_DIR / run_id
    work.mkdir(parents=True, exist_ok=True)
    job = work / "job.json"
    job.write_text(json.dumps({"run_root": str(run_root), "run_id": run_id, "point": asdict(point),
                               "config": config}, indent=2) + "\n")
    final, partial = run_root / run_id, run_root / f"{run_id}.partial"
    try:
        with sigterm_unwinds():  # Ctrl-C or SIGTERM: vm.boot kills the guest on the way out
            # the guest imports this checkout's hostwire, whatever the interpreter's own paths say
            guest = ["env", f"PYTHONPATH={paths.REPO_ROOT / 'analyze'}", sys.executable, "-m", "hostwire.record.vm_run", str(job)]
            boot = vm.boot(kernel, guest, work,
                           timeout_s=timeout_s, writable=(run_root,))
    except (KeyboardInterrupt, Terminated):
        _mark(partial, "partial", "interrupted")
        raise
    directory = final if final.is_dir() else partial if partial.is_dir() else None
    failure = boot.failure()
    if directory is None:
        return "failed", failure or f"the guest recorded no run (log: {boot.guest_log})"
    try:
        shutil.copyfile(boot.console_log, directory / "vm-boot.log")
    except OSError:
        pass

    def add_boot(manifest: dict[str, Any]) -> None:
        manifest["vm"] = {**boot.manifest(), "boot_log": "vm-boot.log", "timeout_s": timeout_s}
        if manifest.get("status") != "complete":
            manifest["status"] = "failed"
            manifest["reason"] = failure or manifest.get("reason") or "the guest ended before the run did"

    manifest = _update(directory, add_boot)
    if manifest is None:
        return "failed", failure or f"{directory / MANIFEST_NAME}: unreadable after the guest ended"
    return str(manifest["status"]), str(manifest.get("reason", ""))


def _update(directory: Path, change: Callable[[dict[str, Any]], None]) -> dict[str, Any] | None:
    """The run's manifest changed by `change` and sealed again; None when it cannot be read."""
    path = directory / MANIFEST_NAME
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    change(manifest)
    write_json_atomic(path, seal(manifest))
    return manifest


def _mark(directory: Path, status: str, reason: str) -> None:
    """What a guest left unfinished is kept, and says so."""
    _update(directory, lambda manifest: manifest.update(status=status, reason=reason))


def _guest_main(job_path: str) -> int:
    from hostwire.record.runner import record_run

    job = json.loads(Path(job_path).read_text())
    try:
        record = record_run(job["run_root"], job["run_id"], RunPoint(**job["point"]), config=job["config"])
    except HostwireError as err:
        sys.stderr.write(f"hostwire: {err}\n")
        return 1
    sys.stderr.write(f"hostwire: run {job['run_id']} {record.status} {record.reason}\n")
    return 0


if __name__ == "__main__":
    sys.exit(_guest_main(sys.argv[1]))
