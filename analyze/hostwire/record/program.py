"""`hostwire record`: the three timelines of any program on this host (docs/record.md).

The command is started held at a barrier (forked, not yet exec'd), so that every collector follows
it from its first instruction: the capture on every interface that is up in its network namespace
(or those named), the kernel trace of every CPU with its system calls (tracefs, following its pid
and descendants) or hw-iotrace around it (ptrace, preload), and the socket sampler that maps its
sockets to its processes. With --pid a running process is recorded instead, and left running.

The command runs in a process group of its own. In a terminal that group is made the foreground
one, so Ctrl-C reaches the command as it would without hostwire; a SIGINT that reaches hostwire
itself (sent by kill) is passed on to the group. hostwire then waits briefly for the command to
end (SIGTERM, then SIGKILL to its group after that), stops the collectors and keeps everything,
marked partial. Like strace, `record` exits with the command's exit status (128+N when signal N
ended it), which the manifest records too."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hostwire
from hostwire import paths
from hostwire.errors import HostwireError, UsageError
from hostwire.lifeline import die_with_parent
from hostwire.locks import locked
from hostwire.manifest import (MANIFEST_FORMAT, MANIFEST_NAME, raw_digests, register_live, runner_identity, seal,
                               unregister_live, write_json_atomic)
from hostwire.record import collectors
from hostwire.record.netlink_facts import LinkFacts, chosen_interfaces, link_facts
from hostwire.record.program_attribution import attribute_run
from hostwire.record.runner import create_run_dir, git_revision, host_facts, publish_run
from hostwire.record.resources import ResourceSampler
from hostwire.record.sockets import SocketSampler, process_tree

log = logging.getLogger(__name__)

SYSCALL_MODES = ("tracefs", "ptrace", "preload", "none")
GRACE_S = 3.0  # how long the command is given to end after an interrupt, per step


@dataclass
class RecordRequest:
    command: list[str] = field(default_factory=list)
    pid: int | None = None
    output: Path | None = None
    interfaces: list[str] = field(default_factory=list)
    duration_ns: int | None = None
    syscalls: str = "tracefs"
    link_rate_bit_s: int | None = None  # --link-rate, parsed by the command line
    kernel_trace: bool = True
    # tracefs: also the calls the program blocks in (futex, epoll_wait, ...): what an idle sender waited for
    waits: bool = True


@dataclass
class RecordResult:
    directory: Path
    status: str
    reason: str
    exit_status: int  # what `hostwire record` exits with
    manifest: dict[str, Any]


def check(req: RecordRequest) -> tuple[str | None, list[str], str | None]:
    """Everything that can be wrong before anything starts: UsageError with one line. Returns the
    program's network namespace (None: this one), the command with its path resolved, and the
    netns path for hw-wirecap."""
    if bool(req.command) == (req.pid is not None):
        raise UsageError("record: give either a command after '--' or --pid PID")
    if req.syscalls not in SYSCALL_MODES:
        raise UsageError(f"record: --syscalls {req.syscalls}: expected one of {', '.join(SYSCALL_MODES)}")
    command = list(req.command)
    netns: str | None = None
    if req.pid is not None:
        if req.syscalls == "preload":
            raise UsageError("record: --syscalls preload cannot attach to a running process (--pid); "
                             "use tracefs or ptrace")
        if req.pid <= 0 or not Path(f"/proc/{req.pid}").exists():
            raise UsageError(f"record: --pid {req.pid}: no such process")
        if req.pid == os.getpid():
            raise UsageError(f"record: --pid {req.pid}: that is hostwire itself")
        try:
            if os.readlink(f"/proc/{req.pid}/ns/net") != os.readlink("/proc/self/ns/net"):
                netns = f"/proc/{req.pid}/ns/net"
        except OSError as err:
            raise UsageError(f"record: --pid {req.pid}: {err.strerror}") from None
    else:
        found = shutil.which(command[0])
        if found is None:
            what = "no such file" if "/" in command[0] else "command not found"
            raise UsageError(f"record: {command[0]}: {what}")
        command[0] = found if "/" not in command[0] else command[0]
    return netns, command, netns


def default_output() -> Path:
    return paths.runs_root() / time.strftime("record-%Y%m%d-%H%M%S")


class _Signals:
    """SIGINT and SIGTERM noted instead of raised while recording: the main loop reacts."""

    def __init__(self) -> None:
        self.received: int | None = None
        self._old: dict[int, Any] = {}

    def __enter__(self) -> _Signals:
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._old[sig] = signal.signal(sig, self._note)
        return self

    def _note(self, signum: int, frame: Any) -> None:
        self.received = signum

    def __exit__(self, *exc: Any) -> None:
        for sig, handler in self._old.items():
            signal.signal(sig, handler)


class _Terminal:
    """Hands the terminal's foreground to the command's process group, and takes it back."""

    def __init__(self) -> None:
        self.fd: int | None = None
        try:
            if os.isatty(0) and os.tcgetpgrp(0) == os.getpgrp():
                self.fd = 0
        except OSError:
            self.fd = None

    def give(self, pgid: int) -> None:
        if self.fd is not None:
            self._set(pgid)

    def take_back(self) -> None:
        if self.fd is not None:
            self._set(os.getpgrp())

    def _set(self, pgid: int) -> None:
        old = signal.signal(signal.SIGTTOU, signal.SIG_IGN)  # a background group may not set it otherwise
        try:
            os.tcsetpgrp(self.fd, pgid)  # type: ignore[arg-type]
        except OSError:
            pass
        finally:
            signal.signal(signal.SIGTTOU, old)


def record(req: RecordRequest, progress: Callable[[str], None] | None = None) -> RecordResult:
    netns, command, wirecap_netns = check(req)
    chosen = chosen_interfaces(netns, req.interfaces)
    if not chosen:
        raise UsageError("record: no interface is up in the program's network namespace; name one with -i")
    facts = link_facts(netns, chosen, req.link_rate_bit_s)
    final = Path(req.output) if req.output else default_output()
    partial = final.with_name(final.name + ".partial")
    for existing in (final, partial):
        if existing.exists():
            raise UsageError(f"record: {existing} exists already; choose another -o")
    if not final.parent.is_dir():
        raise UsageError(f"record: {final.parent}: no such directory")
    manifest = _first_manifest(final.name, req, command, facts)
    create_run_dir(partial, manifest, inner="raw")
    with locked(partial, f"hostwire record: recording {final.name}"):
        return _record_into(partial, final, req, command, wirecap_netns, facts, manifest, progress)


def _first_manifest(run_id: str, req: RecordRequest, command: list[str], facts: LinkFacts) -> dict[str, Any]:
    point = {"kind": "program", "topology": "host", "command": command, "pid": req.pid, "syscalls": req.syscalls,
             "waits": req.waits and req.syscalls == "tracefs", "capture": True, "kernel_trace": req.kernel_trace, "interfaces": [i.name for i in facts.interfaces],
             "duration_s": req.duration_ns / 1e9 if req.duration_ns else None,
             "link_rate": f"{facts.rate_bit_s}bit" if facts.rate_bit_s else None,
             "link_rate_bps": facts.rate_bit_s, "link_rate_source": facts.rate_source,
             "sender_cpus": ",".join(str(c) for c in range(os.cpu_count() or 1)), "sender_cpu_share": 0.0}
    return {"format": MANIFEST_FORMAT, "run_id": run_id, "status": "running", "reason": "",
            "runner": runner_identity(), "config": {}, "point": point, "tools": {"hostwire": hostwire.__version__},
            "git_revision": git_revision(), "host": host_facts(None), "link": facts.as_manifest(),
            "start": {"realtime_ns": time.time_ns(), "monotonic_ns": time.monotonic_ns()},
            "losses": {}, "exit": {}}


def _collectors(raw: Path, req: RecordRequest, facts: LinkFacts, wirecap_netns: str | None) -> list[Any]:
    names = [i.name for i in facts.interfaces]
    if len(names) == 1:
        capture = collectors.Wirecap(raw, names[0], wirecap_netns, None)
    else:  # one file on one clock: the "any" device, narrowed to the chosen interfaces when named
        only = " or ".join(f"ifindex {i.index}" for i in facts.interfaces) if req.interfaces else None
        capture = collectors.Wirecap(raw, "any", wirecap_netns, None, capture_filter=only)
    chosen: list[Any] = [capture]
    if req.kernel_trace or req.syscalls == "tracefs":
        waits = ["--syscalls", "--waits"] if req.waits and req.syscalls == "tracefs" else []
        chosen.append(collectors.Schedtrace(raw, None, req.pid, syscalls=req.syscalls == "tracefs", options=waits))
    if req.pid is not None and req.syscalls == "ptrace":
        chosen.append(AttachedIotrace(raw, req.pid))
    for tool in chosen:
        tool.own_session = True
    return chosen


class AttachedIotrace(collectors.BackgroundTool):
    """hw-iotrace attached to a running process and its threads, following new children."""

    def __init__(self, raw: Path, pid: int) -> None:
        super().__init__("hw-iotrace", [str(paths.tool("hw-iotrace")), "-p", str(pid), "--follow",
                                        "-o", str(raw / "syscalls.tsv")], raw / "iotrace.log")
        self.raw = raw

    def start(self, pid: int | None = None, timeout_s: float = 30.0) -> None:
        # hw-iotrace has no ready descriptor: it records once its output file exists
        with open(self.log_path, "wb") as stderr:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=stderr, preexec_fn=die_with_parent, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while not (self.raw / "syscalls.tsv").exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise HostwireError(f"hw-iotrace failed to attach (exit {self.returncode}): {self.last_message()}")
            time.sleep(0.02)

    def losses(self) -> dict[str, dict[str, Any]]:
        return collectors.Iotrace(self.raw, "ptrace").losses()


def _record_into(partial: Path, final: Path, req: RecordRequest, command: list[str], wirecap_netns: str | None,
                 facts: LinkFacts, manifest: dict[str, Any], progress: Callable[[str], None] | None) -> RecordResult:
    say = progress or (lambda text: None)
    raw = partial / "raw"
    live = register_live(partial)
    started: list[Any] = []
    sampler = SocketSampler(raw / "sockets.tsv", [req.pid] if req.pid else [])
    # /proc/stat through the recording: the CPUs' use and the hypervisor's steal (gap cause vcpu-stolen)
    resources = ResourceSampler(raw / "resources.tsv")
    launch = _Launch(raw, req, command)
    status, reason, exit_status = "complete", "", 0
    with _Signals() as signals:
        try:
            chosen = _collectors(raw, req, facts, wirecap_netns)
            for tool in chosen:
                if not tool.follows_pid:
                    tool.start(None)
                    started.append(tool)
                if signals.received:
                    raise _Interrupted()
            resources.start()
            sampler.start()
            if req.pid is None:
                launch.fork_held()
                for tool in chosen:
                    if tool.follows_pid:
                        tool.start(launch.root_pid)
                        started.append(tool)
                sampler.follow(launch.root_pid)
                if signals.received:
                    raise _Interrupted()
                launch.release()
                say(f"recording {' '.join(command)} (pid {launch.root_pid}) into {partial}")
            else:
                say(f"recording pid {req.pid} into {partial}")
            manifest["window_start_ns"] = time.monotonic_ns()
            how_ended = launch.wait(req, signals)
            if how_ended:
                status, reason = "partial", how_ended
        except _Interrupted:
            status, reason = "partial", "interrupted before the command started"
        except HostwireError as err:
            status, reason = "failed", str(err)
        finally:
            window_end = time.monotonic_ns()
            launch.end()
            sampler_stats = sampler.stop() if sampler.rounds else None
            manifest["resources"] = resources.stop()
            for tool in reversed(started):
                manifest["exit"][tool.name] = tool.stop()
            for tool in started:
                for category, counters in tool.losses().items():
                    manifest["losses"].update(counters)
                    manifest.setdefault("loss_categories", {}).update({key: category for key in counters})
    if launch.tracer_losses is not None:
        for category, counters in launch.tracer_losses().items():
            manifest["losses"].update(counters)
            manifest.setdefault("loss_categories", {}).update({key: category for key in counters})
    manifest["sockets"] = sampler_stats
    _say_io_uring_unseen(manifest, req.syscalls, sampler.rings)
    manifest["command"] = launch.summary(sampler.processes)
    if launch.exit_status is not None:
        manifest["exit"]["command"] = launch.exit_status
        exit_status = launch.exit_status
    elif req.pid is None:
        exit_status = 1
    start_ns = manifest.pop("window_start_ns", None)
    if start_ns is not None:
        manifest["window_ns"] = [start_ns, window_end]
    failed_tools = [f"{name} exited with {code}" for name, code in manifest["exit"].items()
                    if name.startswith("hw-") and code not in (0, None) and name != "hw-iotrace-command"]
    if status == "complete" and failed_tools:
        status, reason = "partial", "; ".join(failed_tools)
    manifest["attribution"] = attribute_run(partial, manifest)
    manifest["end"] = {"realtime_ns": time.time_ns(), "monotonic_ns": time.monotonic_ns()}
    manifest["status"], manifest["reason"] = status, reason
    if status == "complete":
        manifest["raw_digests"] = raw_digests(partial)
    write_json_atomic(partial / MANIFEST_NAME, seal(manifest))
    directory = partial
    if status == "complete":
        directory = publish_run(partial, final)
    unregister_live(live)
    if status == "failed" and req.pid is None and launch.exit_status is None:
        exit_status = 1
    return RecordResult(directory, status, reason, exit_status, manifest)


def _say_io_uring_unseen(manifest: dict[str, Any], backend: str, rings: dict[int, str]) -> None:
    """With ptrace or preload, the processes the sampler saw holding an io_uring instance (and the
    io_uring_setup calls ptrace counted): their rings' operations are in the program's memory,
    which neither tracer reads, so their I/O is in no record. Counted among the tracer's misses
    and said in one line (`io_uring_unseen`, which `hostwire gaps` repeats)."""
    if backend not in ("ptrace", "preload"):
        return
    setups = manifest["losses"].get("syscalls_io_uring_setups") or 0
    manifest["losses"]["syscalls_io_uring_processes"] = len(rings)
    manifest.setdefault("loss_categories", {})["syscalls_io_uring_processes"] = "tracer_misses"
    if rings or setups:
        who = ", ".join(f"{comm} (pid {pid})" for pid, comm in sorted(rings.items())) or "the program"
        manifest["io_uring_unseen"] = (f"{who} used io_uring ({max(setups, len(rings))} instance(s) seen): its "
                                       f"rings' I/O was not seen by the {backend} tracer (record with "
                                       f"--syscalls tracefs to see it)")


class _Interrupted(Exception):
    pass


class _Launch:
    """The recorded command: started held at a barrier, released once the collectors record,
    waited for, and ended (its whole process group) when hostwire must stop first."""

    def __init__(self, raw: Path, req: RecordRequest, command: list[str]) -> None:
        self.raw = raw
        self.req = req
        self.command = command
        self.proc: subprocess.Popen[bytes] | None = None
        self.exit_status: int | None = None
        self.signal_name: str | None = None
        self.ended_by: str = ""
        self.terminal = _Terminal()
        self.tracer_losses: Callable[[], dict[str, dict[str, Any]]] | None = None
        self.started_ns: int | None = None
        self.ended_ns: int | None = None
        self._barrier = -1

    @property
    def root_pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def argv(self) -> list[str]:
        if self.req.syscalls in ("ptrace", "preload"):
            tracer = collectors.Iotrace(self.raw, self.req.syscalls)
            self.tracer_losses = tracer.losses
            return [*tracer.wrapper, *self.command]
        return list(self.command)

    def fork_held(self) -> None:
        """The command forked and held before its exec: its pid is known to the collectors that
        follow it before it runs a single instruction of its own. The hold is a shell that waits
        for one line on a pipe and then execs the command in its place (same pid); Popen itself
        returns only after an exec."""
        barrier_r, barrier_w = os.pipe()
        hold = (f'IFS= read -r go <&{barrier_r} && [ "$go" = go ] || exit 127; '
                f'exec {barrier_r}<&-; exec "$0" "$@"')
        try:
            self.proc = subprocess.Popen(["/bin/sh", "-c", hold, *self.argv()], preexec_fn=die_with_parent,
                                         pass_fds=(barrier_r,), process_group=0)
        except OSError as err:
            os.close(barrier_w)
            raise HostwireError(f"{self.command[0]}: failed to start: {err.strerror or err}") from None
        finally:
            os.close(barrier_r)
        self._barrier = barrier_w

    def release(self) -> None:
        if self.req.syscalls not in ("ptrace", "preload"):  # hw-iotrace passes signals on itself
            self.terminal.give(self.root_pid)
        self.started_ns = time.monotonic_ns()
        os.write(self._barrier, b"go\n")
        os.close(self._barrier)
        self._barrier = -1

    def wait(self, req: RecordRequest, signals: _Signals) -> str:
        """Until the command (or the --pid process) ends, --duration passes or a signal comes;
        returns "" for a normal end, else why the recording stopped early."""
        deadline = time.monotonic_ns() + req.duration_ns if req.duration_ns else None
        while True:
            if self.proc is not None:
                code = self.proc.poll()
                if code is not None:
                    self._ended(code)
                    if signals.received:
                        return f"interrupted ({signal.Signals(signals.received).name})"
                    # a terminal's Ctrl-C reaches the command's group alone (it is the foreground)
                    return "interrupted (SIGINT)" if code == -signal.SIGINT else ""
            elif req.pid is not None and not _alive(req.pid):
                self.ended_by = "the process ended"
                return ""
            if deadline is not None and time.monotonic_ns() >= deadline:
                self.ended_by = "--duration"
                self._stop_command(signal.SIGINT)
                return ""
            if signals.received:
                name = signal.Signals(signals.received).name
                self.ended_by = name
                if self.proc is None:  # --pid: Ctrl-C is how a recording of a running process ends
                    return ""
                self._stop_command(signals.received)
                return f"interrupted ({name})"
            time.sleep(0.02)

    def _stop_command(self, first: int) -> None:
        """The signal to the command's group (to hw-iotrace alone when it wraps the command: it
        passes it on), then SIGTERM and SIGKILL to the group, each after GRACE_S."""
        if self.proc is None:
            return
        wrapped = self.req.syscalls in ("ptrace", "preload")
        for sig in (first, signal.SIGTERM, signal.SIGKILL):
            try:
                if wrapped and sig != signal.SIGKILL:
                    os.kill(self.proc.pid, sig)
                else:
                    os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass
            try:
                self._ended(self.proc.wait(timeout=GRACE_S))
                return
            except subprocess.TimeoutExpired:
                continue

    def _ended(self, code: int) -> None:
        self.ended_ns = self.ended_ns or time.monotonic_ns()
        if code < 0:
            self.signal_name = signal.Signals(-code).name
            self.exit_status = 128 - code
        else:
            self.exit_status = code

    def end(self) -> None:
        """Nothing of the command is left: its group is killed if any of it still runs."""
        self.terminal.take_back()
        if self.proc is None:
            return
        if self._barrier >= 0:  # never released: it ends without running
            os.close(self._barrier)
            self._barrier = -1
        if self.proc.poll() is None:
            self._stop_command(signal.SIGTERM)
        else:
            self._ended(self.proc.returncode)
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # a grandchild that outlived its parent
        except (ProcessLookupError, PermissionError):
            pass

    def summary(self, seen: dict[int, str] | None = None) -> dict[str, Any]:
        """The command's entry of the manifest. pid: the command's own (with ptrace or preload the
        first process hw-iotrace started, as the socket sampler saw it); root_pid: the process
        hostwire started (the hold, then the command or hw-iotrace, by exec); tasks: every process
        and thread of the program the socket sampler saw, tid -> comm."""
        root = self.proc.pid if self.proc else self.req.pid
        pid = root
        if self.proc is not None and self.req.syscalls in ("ptrace", "preload") and seen:
            pid = next((p for p in seen if p != root), root)
        return {"argv": self.command, "pid": pid, "root_pid": root,
                "tasks": {str(t): c for t, c in (seen or {}).items()},
                "exit_status": self.exit_status, "signal": self.signal_name, "stopped_by": self.ended_by,
                "started_ns": self.started_ns, "ended_ns": self.ended_ns}


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[-1][:1] not in ("Z", "X")
    except OSError:
        return False


def stderr_progress(text: str) -> None:
    sys.stderr.write(f"hostwire: {text}\n")
