"""Running hw-bench for a run point (its command line, the CPU cap's prefixes, the collectors' gate).
"""

from __future__ import annotations

import logging
import shlex
import signal
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from hostwire import paths
from hostwire.errors import HostwireError
from hostwire.read.bench import BenchResult
from hostwire.lifeline import die_with_parent

if TYPE_CHECKING:
    from hostwire.record.cpulimit import CpuLimit
    from hostwire.record.topology import Topology

log = logging.getLogger(__name__)


def seconds_arg(value: float) -> str:
    return f"{value:g}s"


def bench_argv(
    outdir: Path,
    *,
    senders: int,
    background: int,
    warmup_s: float,
    duration_s: float,
    quiet_s: float,
    sieve_log2: int,
    read_size: int,
    write_size: int | None,
    log_capacity: int,
    topology: "Topology | None",
    sender_cpus: str | None,
    receiver_cpus: str | None,
    wrapper: list[str] | None,
    extra_args: list[str],
    cpu_cap: "CpuLimit | None" = None,
    think_s: float = 0.0,
    receiver_pause: tuple[float, float] | None = None,
    receiver_rcvbuf: int = 0,
) -> list[str]:
    """The command line that runs hw-bench main (inside the sender namespace when a topology is
    given, with the receiver started in the receiver namespace)."""
    from hostwire.record.topology import RECEIVER_ADDR, taskset_prefix

    hw_bench = str(paths.tool("hw-bench"))
    connect = RECEIVER_ADDR if topology else "127.0.0.1"
    receiver = [hw_bench, "receive", "--listen", connect, "-o", str(outdir), "--log-capacity", str(log_capacity)]
    if receiver_pause is not None:
        receiver += ["--pause-at", seconds_arg(receiver_pause[0]), "--pause-for", seconds_arg(receiver_pause[1])]
    if receiver_rcvbuf:
        receiver += ["--rcvbuf", str(receiver_rcvbuf)]
    receiver = [*taskset_prefix(receiver_cpus), *receiver]
    if cpu_cap is not None:  # the receiver is another host: out of the sender's CPU cap
        receiver = [*cpu_cap.leave_prefix(), *receiver]
    if topology is not None:
        receiver = ["ip", "netns", "exec", topology.rx_ns, *receiver]
    main = [
        hw_bench, "main", "-o", str(outdir), "-M", str(senders), "-N", str(background),
        "--warmup", seconds_arg(warmup_s), "--duration", seconds_arg(duration_s), "--quiet", seconds_arg(quiet_s),
        "--log2", str(sieve_log2), "--read-size", str(read_size), "--write-size", str(write_size or read_size),
        "--log-capacity", str(log_capacity), "--connect", connect,
        "--receiver-cmd", shlex.join(receiver), *(["--think", seconds_arg(think_s)] if think_s else []), *extra_args,
    ]
    prefix: list[str] = []
    if topology is not None:
        prefix += ["ip", "netns", "exec", topology.tx_ns]
    prefix += taskset_prefix(sender_cpus)
    if cpu_cap is not None:
        prefix += cpu_cap.join_prefix()
    return [*prefix, *(wrapper or []), *main]


def run_benchmark(
    outdir: str | Path,
    *,
    senders: int = 2,
    background: int = 2,
    warmup_s: float = 1.0,
    duration_s: float = 2.0,
    quiet_s: float = 0.5,
    sieve_log2: int = 18,
    read_size: int = 8192,
    write_size: int | None = None,
    log_capacity: int = 262144,
    topology: "Topology | None" = None,
    sender_cpus: str | None = None,
    receiver_cpus: str | None = None,
    wrapper: list[str] | None = None,
    extra_args: list[str] | None = None,
    timeout_s: float | None = None,
    check: bool = False,
    before_start: "Callable[[int], None] | None" = None,
    cpu_cap: "CpuLimit | None" = None,
    think_s: float = 0.0,
    receiver_pause: tuple[float, float] | None = None,
    receiver_rcvbuf: int = 0,
) -> BenchResult:
    """Runs one benchmark and returns its result. Over loopback when topology is None; else
    hw-bench main runs in topology.tx_ns and its receiver in topology.rx_ns. `wrapper` is an argv
    prefix put right before hw-bench main (a tracer, for instance). With check=True a non-zero
    exit raises HostwireError with hw-bench's own message. `before_start(pid)` is called with
    the pid hw-bench main will have, before it starts (to attach a tracer to exactly it)."""
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    argv = bench_argv(
        outdir, senders=senders, background=background, warmup_s=warmup_s, duration_s=duration_s,
        quiet_s=quiet_s, sieve_log2=sieve_log2, read_size=read_size, write_size=write_size,
        log_capacity=log_capacity, topology=topology, sender_cpus=sender_cpus, receiver_cpus=receiver_cpus,
        wrapper=wrapper, extra_args=list(extra_args or []), cpu_cap=cpu_cap, think_s=think_s,
        receiver_pause=receiver_pause, receiver_rcvbuf=receiver_rcvbuf,
    )
    limit = timeout_s if timeout_s is not None else warmup_s + duration_s + quiet_s + 60
    log.debug("running %s", shlex.join(argv))
    if before_start is not None:
        # A gate: the shell waits for one line on stdin, then becomes hw-bench main (same pid).
        argv = ["sh", "-c", 'read _ && exec "$@"', "hw-bench-gate", *argv]
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE if before_start else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=die_with_parent,
                            pass_fds=cpu_cap.pass_fds if cpu_cap is not None else ())
    try:
        if before_start is not None:
            before_start(proc.pid)
        _, stderr = proc.communicate(input="go\n" if before_start else None, timeout=limit)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)  # main forwards it: children write what they logged
        try:
            _, stderr = proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, stderr = proc.communicate()
        raise HostwireError(f"hw-bench main did not finish within {limit:g} s; stopped it ({outdir})") from None
    except BaseException:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
        raise
    result = BenchResult(directory=outdir, returncode=proc.returncode, stderr=stderr, argv=argv)
    if check and proc.returncode != 0:
        lines = [line for line in stderr.splitlines() if line.strip()]
        raise HostwireError(
            f"hw-bench main failed (exit {proc.returncode}): " + ("; ".join(lines[-3:]) if lines else "no message")
        )
    return result
