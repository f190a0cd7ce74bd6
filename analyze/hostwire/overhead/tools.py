"""The configurations of `hostwire overhead`: each collector, the ptrace floor and the peer tools
(trace-cmd record, perf sched record, strace) wrapped around `hw-bench pingpong` pinned to one CPU,
each returning the round trip it measured; and a known injected cost that checks the method."""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from hostwire.lifeline import die_with_parent
from hostwire import paths
from hostwire.errors import HostwireError

log = logging.getLogger(__name__)


TRACEFS = Path("/sys/kernel/tracing")
SWITCHES_PER_RT = 2  # per round trip: parent -> child, child -> parent
CALLS_PER_RT = 4  # per round trip: write and read in the parent, read and write in the child
IO_CALLS = ("read,write,readv,writev,pread64,pwrite64,sendto,sendmsg,sendmmsg,recvfrom,recvmsg,sendfile,splice,"
            "connect,accept,accept4,close,socket,dup,dup2,dup3,fcntl,close_range,pwritev,pwritev2,vmsplice,tee,"
            "ioctl,recvmmsg")  # the system calls of hw-iotrace's default set
SCHED_EVENTS = ("sched:sched_switch", "sched:sched_wakeup", "sched:sched_wakeup_new", "sched:sched_migrate_task",
                "sched:sched_process_fork", "sched:sched_process_exec", "sched:sched_process_exit",
                "net:net_dev_queue", "net:net_dev_xmit", "net:netif_receive_skb", "sock:inet_sock_set_state")
class ConfigFailed(Exception):
    """A configuration could not be measured: the message is its one line."""


RT_RE = re.compile(r"round_trip_us=([\d.]+)")


@dataclass
class Setup:
    """What every configuration's command needs."""

    loops: int
    cpu: int
    tracer_cpu: int
    work: Path
    inject_ns: int = 0
    rt_prio: int = 0  # > 0: the ping-pong runs at SCHED_FIFO of this priority (chrt)

    def pingpong(self, inject_ns: int | None = None) -> list[str]:
        inject = self.inject_ns if inject_ns is None else inject_ns
        argv = [str(paths.tool("hw-bench")), "pingpong", "--loops", str(self.loops), "--cpu", str(self.cpu)]
        if self.rt_prio > 0:
            argv = ["chrt", "-f", str(self.rt_prio), *argv]
        return argv + (["--inject-ns", str(inject)] if inject else [])

    def on(self, cpu: int) -> list[str]:
        return ["taskset", "-c", str(cpu)]


def _round_trip(argv: list[str], setup: Setup, what: str, env: dict[str, str] | None = None) -> float:
    timeout = max(120.0, setup.loops * 200e-6)
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=setup.work, env=env,
                              stdin=subprocess.DEVNULL, preexec_fn=die_with_parent)
    except subprocess.TimeoutExpired:
        raise ConfigFailed(f"{what} did not finish within {timeout:.0f} s") from None
    except OSError as err:
        raise ConfigFailed(f"{what} failed to start: {err.strerror or err}") from None
    found = RT_RE.findall(proc.stdout)
    if proc.returncode != 0 or not found:
        lines = [ln for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
        raise ConfigFailed(f"{what} failed (exit {proc.returncode}): {lines[-1] if lines else 'no message'}")
    return float(found[-1])


class Wirecap:
    """hw-wirecap capturing loopback around one run (the ping-pong sends nothing there: what it
    costs is a capture process waiting beside the workload)."""

    def __init__(self, setup: Setup) -> None:
        from hostwire.record.collectors import BackgroundTool

        self.tool = BackgroundTool(
            "hw-wirecap", [*setup.on(setup.tracer_cpu), str(paths.tool("hw-wirecap")), "-i", "lo", "-o",
                           str(setup.work / "lo.pcap")], setup.work / "wirecap.log", stop_timeout_s=30.0)

    def __enter__(self) -> Wirecap:
        try:
            self.tool.start(timeout_s=30.0)
        except HostwireError as err:
            raise ConfigFailed(str(err)) from None
        return self

    def __exit__(self, *exc: object) -> None:
        rc = self.tool.stop()
        if rc not in (0, None) and exc[0] is None:
            raise ConfigFailed(f"hw-wirecap exited with status {rc}: {self.tool.last_message()}")


def _schedtrace(setup: Setup, syscalls: bool) -> list[str]:
    out = setup.work / "st"
    shutil.rmtree(out, ignore_errors=True)
    return [*setup.on(setup.tracer_cpu), str(paths.tool("hw-schedtrace")), "-o", str(out),
            *(["-s"] if syscalls else []), "--"]


def _iotrace(setup: Setup, preload: bool = False) -> list[str]:
    return [*setup.on(setup.cpu), str(paths.tool("hw-iotrace")), *(["--preload"] if preload else []), "-o",
            str(setup.work / "syscalls.tsv"), "--"]


def run_bare(setup: Setup) -> float:
    return _round_trip(setup.pingpong(), setup, "bare ping-pong")


def run_schedtrace(setup: Setup) -> float:
    return _round_trip([*_schedtrace(setup, False), *setup.pingpong()], setup, "hw-schedtrace")


def run_schedtrace_syscalls(setup: Setup) -> float:
    return _round_trip([*_schedtrace(setup, True), *setup.pingpong()], setup, "hw-schedtrace -s")


def run_iotrace_ptrace(setup: Setup) -> float:
    return _round_trip([*_iotrace(setup), *setup.pingpong()], setup, "hw-iotrace (ptrace)")


def run_ptrace_floor(setup: Setup) -> float:
    floor = paths.build_dir() / "test-progs" / "iotrace-ptrace-floor"
    if not os.access(floor, os.X_OK):
        raise ConfigFailed(f"{floor} is not built (run 'make build')")
    return _round_trip([*setup.on(setup.cpu), str(floor), "--read", "--", *setup.pingpong()], setup, "ptrace floor")


def run_iotrace_preload(setup: Setup) -> float:
    return _round_trip([*_iotrace(setup, preload=True), *setup.pingpong()], setup, "hw-iotrace --preload")


def run_wirecap(setup: Setup) -> float:
    with Wirecap(setup):
        return _round_trip(setup.pingpong(), setup, "ping-pong beside hw-wirecap")


def run_procsampler(setup: Setup) -> float:
    """The /proc sampler of real hosts (hostwire.record.procsampler, every resource at 100 ms, no
    filter) on the tracer's CPU beside the ping-pong."""
    from hostwire.record.procsampler import sampler_argv

    program = str(paths.tool("hw-procsample"))
    with open(setup.work / "proc.txt", "wb") as out:
        sampler = subprocess.Popen([*setup.on(setup.tracer_cpu), *sampler_argv(program, 0.1, {})], stdout=out,
                                   stdin=subprocess.DEVNULL, preexec_fn=die_with_parent)
    try:
        return _round_trip(setup.pingpong(), setup, "ping-pong beside the /proc sampler")
    finally:
        sampler.terminate()
        sampler.wait()


def run_everything(setup: Setup) -> float:
    with Wirecap(setup):
        return _round_trip([*_schedtrace(setup, True), *_iotrace(setup), *setup.pingpong()], setup,
                           "hw-schedtrace -s + hw-iotrace + hw-wirecap")


def sched_events() -> list[str]:
    events = list(SCHED_EVENTS)
    if (TRACEFS / "events" / "tcp" / "tcp_probe").is_dir():
        events.append("tcp:tcp_probe")
    return events


@contextmanager
def tracefs_instance(name: str) -> Iterator[Path]:
    """A tracefs instance for a peer tool (trace-cmd -B), removed after it (whatever happened)."""
    inst_dir = TRACEFS / "instances" / name
    try:
        inst_dir.mkdir()
    except OSError as err:
        raise ConfigFailed(f"failed to create tracefs instance {inst_dir}: {err.strerror}") from None
    try:
        yield inst_dir
    finally:
        # busy while a recorder that was just ended still has its files open
        for _ in range(100):
            try:
                inst_dir.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.05)
        else:
            log.warning("tracefs instance %s could not be removed ('hostwire doctor --cleanup' removes it)",
                        inst_dir)


def tracecmd_record(work: Path, instance: str, options: list[str], command: list[str]) -> list[str]:
    """`trace-cmd record -q -B instance OPTIONS -- command`, made to run on this kernel. trace-cmd
    3.1 writes /proc/sys/kernel/ftrace_enabled and the function-tracer files even when it records
    events only, and this kernel refuses those writes ("Can't enable ftrace"): it runs in a private
    mount namespace (unshare -m) where a scratch file is bind-mounted over each refused file;
    nothing outside that namespace sees the mounts."""
    inst_dir = TRACEFS / "instances" / instance
    dummy = work / "ftrace-dummy"
    dummy.write_text("1\n")
    files = ["/proc/sys/kernel/ftrace_enabled"]
    for name in ("set_ftrace_filter", "set_ftrace_notrace", "set_ftrace_pid", "set_ftrace_notrace_pid"):
        files += [str(TRACEFS / name), str(inst_dir / name)]
    script = ('dummy=$1; shift; n=$1; shift; i=0; while [ $i -lt "$n" ]; do [ -e "$1" ] && '
              'mount --bind "$dummy" "$1"; shift; i=$((i+1)); done; exec "$@"')
    return ["unshare", "-m", "sh", "-c", script, "sh", str(dummy), str(len(files)), *files,
            "trace-cmd", "record", "-q", "-B", instance, *options, "--", *command]


def run_tracecmd(setup: Setup) -> float:
    """trace-cmd record with hw-schedtrace's event set, into its own tracefs instance (see
    tracecmd_record). Readers at SCHED_FIFO 1 (-r 1), clock mono."""
    instance = f"hw-{os.getpid()}-tc"
    events = [arg for ev in sched_events() for arg in ("-e", ev)]
    with tracefs_instance(instance):
        argv = [*setup.on(setup.tracer_cpu),
                *tracecmd_record(setup.work, instance, ["-C", "mono", "-r", "1", *events, "-o",
                                                        str(setup.work / "tc.dat")], setup.pingpong())]
        return _round_trip(argv, setup, "trace-cmd record")


def run_perf_sched(setup: Setup) -> float:
    return _round_trip([*setup.on(setup.tracer_cpu), "perf", "sched", "record", "-q", "-o",
                        str(setup.work / "perf.data"), "--", *setup.pingpong()], setup, "perf sched record")


def run_strace(setup: Setup) -> float:
    return _round_trip([*setup.on(setup.cpu), "strace", "-f", "-ttt", "-e", f"trace={IO_CALLS}", "-o",
                        str(setup.work / "strace.txt"), "--", *setup.pingpong()], setup, "strace -f")


@dataclass
class Config:
    name: str
    what: str  # the command line in short, for the table
    unit: str  # "switch" or "call": what the added cost is divided by
    run: Callable[[Setup], float]
    needs: str | None = None  # a peer program that must be installed
    peer: bool = False

    @property
    def per_rt(self) -> int:
        return {"switch": SWITCHES_PER_RT, "call": CALLS_PER_RT}.get(self.unit, 1)


CONFIGS: list[Config] = [
    Config("bare", "hw-bench pingpong", "switch", run_bare),
    Config("hw-schedtrace", "hw-schedtrace (scheduler events)", "switch", run_schedtrace),
    Config("hw-schedtrace -s", "hw-schedtrace -s (+ system-call events)", "call", run_schedtrace_syscalls),
    Config("hw-iotrace ptrace", "hw-iotrace (ptrace, seccomp filter)", "call", run_iotrace_ptrace),
    Config("ptrace floor", "iotrace-ptrace-floor --read (2 stops per read/write, nothing else)", "call",
           run_ptrace_floor),
    Config("hw-iotrace preload", "hw-iotrace --preload", "call", run_iotrace_preload),
    Config("hw-wirecap", "hw-wirecap -i lo beside the ping-pong", "switch", run_wirecap),
    Config("everything", "hw-wirecap + hw-schedtrace -s + hw-iotrace ptrace", "call", run_everything),
    Config("proc sampler", "the hosts' /proc sampler (hw-procsample, 100 ms) beside the ping-pong", "switch",
           run_procsampler),
    Config("trace-cmd record", "trace-cmd record (same scheduler events)", "switch", run_tracecmd, "trace-cmd", True),
    Config("perf sched record", "perf sched record", "switch", run_perf_sched, "perf", True),
    Config("strace -f", "strace -f -ttt -e trace=<hw-iotrace's calls>", "call", run_strace, "strace", True),
]


def injected_config(inject_ns: int) -> Config:
    """The ping-pong with a known cost per round trip (the method check): unit "round trip"."""
    def run(setup: Setup) -> float:
        return _round_trip(setup.pingpong(inject_ns), setup, f"ping-pong with {inject_ns} ns injected")

    cfg = Config(f"inject {inject_ns} ns", f"hw-bench pingpong --inject-ns {inject_ns}", "round trip", run)
    return cfg
