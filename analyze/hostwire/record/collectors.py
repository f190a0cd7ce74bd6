"""The collectors of a run, each a hostwire tool recording beside the benchmark: started before it
(hw-wirecap, hw-schedtrace), or as the moment its pid is known (hw-schedtrace recording that
process's system calls), or wrapped around it (hw-iotrace); stopped after it; their loss counters
read back into the run's manifest.

A collector started in the background is given a pipe as `--ready-fd N` and is waited for until
it writes its line "ready" there (its recording has started), until it exits, or until the
timeout; its messages go to a log file in the run's raw/ directory."""

from __future__ import annotations

import json
import logging
import os
import select
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from hostwire import paths
from hostwire.errors import HostwireError
from hostwire.lifeline import die_with_parent
from hostwire.record.topology import taskset_prefix

log = logging.getLogger(__name__)

# The loss categories of DESIGN.md (section 8, "Sanity per run") that collectors report: each
# collector's losses() maps one of them to its counters, named as the manifest's "losses" keys
# (None: unknown, a file or counter missing).
CAPTURE_DROPS = "capture_drops"  # hw-wirecap: packets libpcap dropped
TRACE_OVERRUNS = "trace_overruns"  # hw-schedtrace: events the ring buffers lost (and its clock check)
TRACER_MISSES = "tracer_misses"  # hw-iotrace: calls not recorded, or left unfinished
LOSS_CATEGORIES = (CAPTURE_DROPS, TRACE_OVERRUNS, TRACER_MISSES)


def _load_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


class Collector:
    """One collector of a run. `wrapper` is an argv prefix put before hw-bench main (empty for a
    collector that runs on its own); a collector with `follows_pid` starts once the benchmark's
    pid is known, before the benchmark runs."""

    name = "collector"
    wrapper: list[str] = []
    follows_pid = False

    def start(self, pid: int | None = None, timeout_s: float = 30.0) -> None:
        """Returns once the collector records."""

    def stop(self) -> int | None:
        """Ends the recording; the exit status of the collector's own process (None: it has none)."""
        return None

    def losses(self) -> dict[str, dict[str, Any]]:
        """{category: {manifest key: count}} for the loss categories it reports."""
        return {}

    def last_message(self) -> str:
        return "no message"


PROGRESS_POLL_S = 5.0


class BackgroundTool(Collector):
    """A tool run in the background with its stderr in a log file, ready once it writes "ready"
    to the descriptor given by --ready-fd."""

    # In a session of its own, a terminal's Ctrl-C does not reach the tool: the recorder stops it
    # once the recorded program has ended (hostwire record).
    own_session = False

    def __init__(self, name: str, argv: list[str], log_path: Path, *, cwd: Path | None = None,
                 stop_timeout_s: float = 120.0) -> None:
        self.name = name
        self.argv = argv
        self.log_path = log_path
        self.cwd = cwd  # where relative output names land (the run's raw/, so files name no path)
        self.stop_timeout_s = stop_timeout_s
        # Files the tool writes while it stops: as long as they grow, stop() waits on (an hour's
        # trace takes minutes to convert); stop_timeout_s counts from their last growth.
        self.progress_files: list[Path] = []
        self.proc: subprocess.Popen[bytes] | None = None
        self.returncode: int | None = None

    def command(self, pid: int | None) -> list[str]:
        """The argv to run (a subclass adds what depends on the benchmark's pid)."""
        return list(self.argv)

    def start(self, pid: int | None = None, timeout_s: float = 30.0) -> None:
        ready_r, ready_w = os.pipe()
        argv = [*self.command(pid), "--ready-fd", str(ready_w)]
        log.debug("starting %s: %s", self.name, " ".join(argv))
        try:
            with open(self.log_path, "wb") as stderr:
                self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                             stderr=stderr, preexec_fn=die_with_parent, cwd=self.cwd,
                                             pass_fds=(ready_w,), start_new_session=self.own_session)
        except OSError as err:
            os.close(ready_r)
            raise HostwireError(f"{self.name} failed to start: {err.strerror or err}") from None
        finally:
            os.close(ready_w)  # the tool holds the only write end now: its exit ends the pipe
        try:
            self._wait_ready(ready_r, timeout_s)
        finally:
            os.close(ready_r)

    def _wait_ready(self, ready_r: int, timeout_s: float) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + timeout_s
        line = b""
        while time.monotonic() < deadline:
            readable, _, _ = select.select([ready_r], [], [], min(0.1, max(0.0, deadline - time.monotonic())))
            if not readable:
                continue
            chunk = os.read(ready_r, 64)
            line += chunk
            if line.startswith(b"ready\n"):
                return
            if not chunk:  # closed without a word: the tool failed before it recorded
                try:
                    self.proc.wait(timeout=self.stop_timeout_s)
                except subprocess.TimeoutExpired:
                    break
                self.returncode = self.proc.returncode
                self.proc = None
                raise HostwireError(f"{self.name} failed to start (exit {self.returncode}): {self.last_message()}")
        self.stop()
        raise HostwireError(f"{self.name} did not start recording within {timeout_s:g} s: {self.last_message()}")

    def stop(self) -> int | None:
        """SIGTERM, then up to stop_timeout_s for it to finish its files; SIGKILL after that."""
        if self.proc is None:
            return self.returncode
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + self.stop_timeout_s
            written = self._written()
            while True:
                try:
                    self.proc.wait(timeout=max(0.0, min(PROGRESS_POLL_S, deadline - time.monotonic())))
                    break
                except subprocess.TimeoutExpired:
                    now_written = self._written()
                    if now_written > written:
                        written, deadline = now_written, time.monotonic() + self.stop_timeout_s
                    elif time.monotonic() >= deadline:
                        log.warning("%s did not stop within %g s of its last write; killing it", self.name,
                                    self.stop_timeout_s)
                        self.proc.kill()
                        self.proc.wait()
                        break
        self.returncode = self.proc.returncode
        self.proc = None
        return self.returncode

    def _written(self) -> int:
        total = 0
        for path in self.progress_files:
            try:
                total += path.stat().st_size
            except OSError:
                pass
        return total

    def _log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def last_message(self) -> str:
        lines = [line for line in self._log_text().splitlines() if line.strip()]
        return lines[-1] if lines else "no message"


class Wirecap(BackgroundTool):
    """hw-wirecap on the link: raw/wire.pcap and raw/wirecap.json; loses what libpcap drops."""

    def __init__(self, raw: Path, interface: str, netns: str | None, cpus: str | None, buffer_kib: int = 0,
                 capture_filter: str | None = None) -> None:
        argv = [*taskset_prefix(cpus), str(paths.tool("hw-wirecap")), "-i", interface, "-o", "wire.pcap"]
        if capture_filter:
            argv += ["-f", capture_filter]
        if netns:
            argv += ["-n", netns]
        if buffer_kib:
            argv += ["-b", str(buffer_kib)]
        super().__init__("hw-wirecap", argv, raw / "wirecap.log", cwd=raw)
        self.raw = raw

    def losses(self) -> dict[str, dict[str, Any]]:
        meta = _load_json(self.raw / "wirecap.json") or {}
        return {CAPTURE_DROPS: {"wire_ps_drop": meta.get("ps_drop"), "wire_ps_ifdrop": meta.get("ps_ifdrop")}}


class Schedtrace(BackgroundTool):
    """hw-schedtrace: the kernel timeline (raw/trace.dat, sched.tsv, sched.json); with
    `syscalls`, also the system calls of the benchmark's process tree, from its pid on (or of
    syscall_pid when given)."""

    def __init__(self, raw: Path, cpus: str | None, syscall_pid: int | None = None, *,
                 syscalls: bool = False, options: list[str] | None = None, source: str = "tracefs") -> None:
        # source "event": also the patched kernel's custom:sched_switch_ext_tp, in the same buffer
        extra = ["--switch-ext"] if source == "event" else []
        argv = [*taskset_prefix(cpus), str(paths.tool("hw-schedtrace")), "-o", str(raw), *extra, *(options or [])]
        super().__init__("hw-schedtrace", argv, raw / "schedtrace.log")
        self.raw = raw
        self.progress_files = [raw / name for name in ("trace.dat", "sched.tsv", "syscalls.dat", "syscalls.tsv")]
        self.syscall_pid = syscall_pid
        self.follows_pid = syscalls and syscall_pid is None

    def command(self, pid: int | None) -> list[str]:
        pid = pid if pid is not None else self.syscall_pid
        if pid is None:
            return list(self.argv)
        return [*self.argv, "--syscalls", "--pid", str(pid)]

    def losses(self) -> dict[str, dict[str, Any]]:
        """Ring-buffer losses of each hw-schedtrace buffer from sched.json (None = unknown)."""
        return {TRACE_OVERRUNS: sched_losses(_load_json(self.raw / "sched.json"))}


def sched_losses(meta: dict[str, Any] | Path | None, prefix: str = "") -> dict[str, Any]:
    """hw-schedtrace's ring-buffer losses per buffer and its clock check, from its sched.json
    (or its path; None: unknown); prefix: a host's role before each name (a [hosts] run traces two)."""
    if isinstance(meta, Path):
        meta = _load_json(meta)
    if meta is None:
        return {f"{prefix}sched_lost_events": None}
    losses: dict[str, Any] = {}
    for buf in meta.get("buffers", []):
        missed = [cpu.get("missed_in_stream") for cpu in buf.get("cpus", [])]
        in_stream = None if any(m is None for m in missed) else sum(missed)
        losses[f"{prefix}{buf.get('name', 'sched')}_lost_events"] = buf.get("lost_events")
        losses[f"{prefix}{buf.get('name', 'sched')}_missed_in_stream"] = in_stream
    # not a loss: whether the trace's stamps can be put on the run's clock at all
    losses[f"{prefix}sched_clock_check_ok"] = (meta.get("clock_check") or {}).get("ok")
    return losses


class Iotrace(Collector):
    """hw-iotrace wrapped around hw-bench main (ptrace or preload backend): raw/syscalls.tsv and
    raw/syscalls.json. It starts and ends with the benchmark, whose exit status it passes on."""

    name = "hw-iotrace"

    def __init__(self, raw: Path, backend: str) -> None:
        self.raw = raw
        argv = [str(paths.tool("hw-iotrace")), "-o", str(raw / "syscalls.tsv")]
        if backend == "preload":
            argv += ["--preload"]
        self.wrapper = [*argv, "--"]

    def losses(self) -> dict[str, dict[str, Any]]:
        """Tracer misses from syscalls.json: records lost and calls left unfinished (None = unknown)."""
        meta = _load_json(self.raw / "syscalls.json") or {}
        misses = {"syscalls_lost": meta.get("lost"), "syscalls_unfinished": meta.get("unfinished")}
        # io_uring instances the program made: their rings' operations were not recorded (ptrace
        # counts io_uring_setup; preload cannot see it, -1, and the socket sampler's count stands)
        setups = meta.get("io_uring_setups")
        if isinstance(setups, int) and setups >= 0:
            misses["syscalls_io_uring_setups"] = setups
        return {TRACER_MISSES: misses}


def for_point(raw: Path, point: Any, topology: Any | None) -> list[Collector]:
    """The collectors a run point asks for (its capture, kernel_trace, syscalls and capture_side
    settings), in the order they start: the capture first, the benchmark's tracers last."""
    chosen: list[Collector] = []
    if point.capture:
        if topology is None:
            iface, netns = "lo", None
        elif point.capture_side == "tx":
            iface, netns = topology.tx_dev, topology.tx_ns
        else:
            iface, netns = topology.rx_dev, topology.rx_ns
        chosen.append(Wirecap(raw, iface, netns, point.receiver_cpus, getattr(point, "capture_buffer_kib", 0)))
    trace_options = []
    if getattr(point, "trace_buffer_kib", 0):
        trace_options += ["-b", str(point.trace_buffer_kib)]
    if not getattr(point, "trace_drain", True):
        trace_options += ["--no-drain"]
    source = getattr(point, "kernel_source", "tracefs")
    if point.syscalls == "tracefs":
        chosen.append(Schedtrace(raw, point.receiver_cpus, syscalls=True, options=trace_options, source=source))
    elif point.kernel_trace:
        chosen.append(Schedtrace(raw, point.receiver_cpus, options=trace_options, source=source))
    if point.syscalls in ("ptrace", "preload"):
        chosen.append(Iotrace(raw, point.syscalls))
    return chosen


# The spellings of the previous release (one release more): factories of the classes above.
def wirecap(raw: Path, interface: str, netns: str | None, cpus: str | None) -> Wirecap:
    return Wirecap(raw, interface, netns, cpus)


def schedtrace(raw: Path, cpus: str | None, syscall_pid: int | None = None) -> Schedtrace:
    return Schedtrace(raw, cpus, syscall_pid)
