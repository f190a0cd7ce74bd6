"""The collectors of a run, each a hostwire tool running beside the benchmark: started before it,
waited for until it says it records, stopped with SIGTERM after it, its loss counters read back
into the run's manifest."""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hostwire import paths
from hostwire.errors import HostwireError
from hostwire.proc import die_with_parent
from hostwire.topology import taskset_prefix

log = logging.getLogger(__name__)


@dataclass
class BackgroundTool:
    """A tool run in the background with its stderr in a log file. `ready_text` is the line
    fragment the tool prints on stderr once it is recording."""

    name: str
    argv: list[str]
    log_path: Path
    ready_text: str
    stop_timeout_s: float = 120.0
    cwd: Path | None = None  # where relative output names land (the run's raw/, so files name no path)
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    returncode: int | None = None

    def start(self, timeout_s: float = 30.0) -> None:
        log.debug("starting %s: %s", self.name, " ".join(self.argv))
        with open(self.log_path, "wb") as stderr:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=stderr, preexec_fn=die_with_parent, cwd=self.cwd)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.ready_text in self._log_text():
                return
            if self.proc.poll() is not None:
                self.returncode = self.proc.returncode
                raise HostwireError(f"{self.name} failed to start (exit {self.returncode}): {self.last_message()}")
            time.sleep(0.02)
        self.stop()
        raise HostwireError(f"{self.name} did not start recording within {timeout_s:g} s: {self.last_message()}")

    def stop(self) -> int | None:
        """SIGTERM, then up to stop_timeout_s for it to finish its files; SIGKILL after that."""
        if self.proc is None:
            return self.returncode
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=self.stop_timeout_s)
            except subprocess.TimeoutExpired:
                log.warning("%s did not stop within %g s; killing it", self.name, self.stop_timeout_s)
                self.proc.kill()
                self.proc.wait()
        self.returncode = self.proc.returncode
        self.proc = None
        return self.returncode

    def _log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def last_message(self) -> str:
        lines = [line for line in self._log_text().splitlines() if line.strip()]
        return lines[-1] if lines else "no message"


def wirecap(raw: Path, interface: str, netns: str | None, cpus: str | None) -> BackgroundTool:
    argv = [*taskset_prefix(cpus), str(paths.tool("hw-wirecap")), "-i", interface, "-o", "wire.pcap"]
    if netns:
        argv += ["-n", netns]
    return BackgroundTool("hw-wirecap", argv, raw / "wirecap.log", "capturing on", cwd=raw)


def schedtrace(raw: Path, cpus: str | None, syscall_pid: int | None = None) -> BackgroundTool:
    argv = [*taskset_prefix(cpus), str(paths.tool("hw-schedtrace")), "-o", str(raw)]
    if syscall_pid is not None:
        argv += ["--syscalls", "--pid", str(syscall_pid)]
    return BackgroundTool("hw-schedtrace", argv, raw / "schedtrace.log", "recording in tracefs instance")


def _load_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def wire_losses(raw: Path) -> dict[str, Any]:
    """pcap drops from wirecap.json; None where the file or a counter is missing."""
    meta = _load_json(raw / "wirecap.json") or {}
    return {"wire_ps_drop": meta.get("ps_drop"), "wire_ps_ifdrop": meta.get("ps_ifdrop")}


def sched_losses(raw: Path) -> dict[str, Any]:
    """Ring-buffer losses of each hw-schedtrace buffer from sched.json (None = unknown)."""
    meta = _load_json(raw / "sched.json")
    if meta is None:
        return {"sched_lost_events": None}
    losses: dict[str, Any] = {}
    for buf in meta.get("buffers", []):
        missed = [cpu.get("missed_in_stream") for cpu in buf.get("cpus", [])]
        lost = buf.get("lost_events")
        in_stream = None if any(m is None for m in missed) else sum(missed)
        losses[f"{buf.get('name', 'sched')}_lost_events"] = lost
        losses[f"{buf.get('name', 'sched')}_missed_in_stream"] = in_stream
    check = meta.get("clock_check") or {}
    losses["sched_clock_check_ok"] = check.get("ok")
    return losses


def iotrace_wrapper(raw: Path, backend: str) -> list[str]:
    """The argv prefix that runs hw-bench main under hw-iotrace (ptrace or preload backend)."""
    argv = [str(paths.tool("hw-iotrace")), "-o", str(raw / "syscalls.tsv")]
    if backend == "preload":
        argv += ["--preload"]
    return [*argv, "--"]


def iotrace_losses(raw: Path) -> dict[str, Any]:
    """Tracer misses from syscalls.json: records lost and calls left unfinished (None = unknown)."""
    meta = _load_json(raw / "syscalls.json") or {}
    return {"syscalls_lost": meta.get("lost"), "syscalls_unfinished": meta.get("unfinished")}
