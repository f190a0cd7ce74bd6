"""One run on real hosts (`[hosts]`, docs/hosts.md): /proc sampled on every host, the captures and
the kernel trace started where they belong, the receiver on the receiver, hw-bench main on the
sender, everything stopped, each host's files brought back into raw/hosts/<role>/, the clocks
aligned onto the sender's. A host that drops out marks the run partial with the reason; every
remote command is tethered to its ssh session (hostwire.record.hosts), so nothing stays running.

hw-bench main learns the receiver's ports from its --receiver-cmd's standard output: the runner
starts the receiver itself, reads its ports, and hands main a command that prints them, so that
the sender never needs a way into the receiver."""

from __future__ import annotations

import json
import logging
import os
import select
import shlex
import subprocess
import tarfile
import time
from pathlib import Path
from typing import IO, Any

from hostwire.errors import HostwireError
from hostwire.record.bench import seconds_arg
from hostwire.record.hosts import SSH_EXIT_UNREACHABLE, Host, HostLost, last_line
from hostwire.record.remote_prepare import Prepared
from hostwire.record.remote_scratch import verify
from hostwire.record.point import RunPoint
from hostwire.record.procsampler import ResourceSpec, final_sample_script, sampler_argv
from hostwire.record.topology import taskset_prefix

log = logging.getLogger(__name__)

PORTS_LEN = 10  # benchmark/wire.h HB_PORTS_LEN
READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 60.0


class Remote:
    """One tethered command on a host: its ssh process, the file its stderr goes to."""

    def __init__(self, host: Host, label: str, script: str, log_path: Path, stdout: IO[bytes] | int | None) -> None:
        self.host, self.label, self.log_path = host, label, log_path
        self._stderr = open(log_path, "wb")
        self.proc = host.popen(script, stdout=stdout if stdout is not None else subprocess.PIPE, stderr=self._stderr)

    def read_exact(self, count: int, timeout_s: float) -> bytes:
        """Reads count bytes of its standard output (its ready word, its ports)."""
        assert self.proc.stdout is not None
        fd, data, deadline = self.proc.stdout.fileno(), b"", time.monotonic() + timeout_s
        while len(data) < count:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise HostwireError(f"{self.host.name}: {self.label} gave no answer within {timeout_s:g} s")
            chunk = os.read(fd, count - len(data))
            if not chunk:
                self.proc.wait()
                raise self.failure() or HostwireError(f"{self.host.name}: {self.label} ended before it answered")
            data += chunk
        return data

    def failure(self) -> HostwireError | None:
        """What its end says: HostLost when ssh itself failed, HostwireError for the command."""
        code = self.proc.poll()
        if code in (None, 0):
            return None
        message = last_line(self.log_path.read_bytes()) or f"exit {code}"
        if code == SSH_EXIT_UNREACHABLE and not self.host.destination.local:
            return HostLost(f"{self.host.name}: lost during the run: {message}")
        return HostwireError(f"{self.host.name}: {self.label} failed (exit {code}): {message}")

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> int | None:
        """Closes its lifeline (the tether ends the command) and waits for ssh to end."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()  # our ssh client, by its pid: its session ends, and the tether with it
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._stderr.close()
        return self.proc.returncode


def _printf_bytes(data: bytes) -> str:
    return "printf '" + "".join(f"\\{b:03o}" for b in data) + "'"


class HostRun:
    """The run's state on one host: its folder there and here, its tethered commands."""

    def __init__(self, host: Host, prepared: Prepared, run_id: str, raw: Path) -> None:
        if prepared.scratch is None:
            raise HostwireError(f"{host.name}: no scratch folder there (see the problems named before the first run)")
        self.host, self.prepared = host, prepared
        self.bin = prepared.scratch.bin
        self.dir = prepared.scratch.run_dir(run_id)
        self.local = raw / "hosts" / host.role
        self.local.mkdir(parents=True, exist_ok=True)
        self.remotes: list[Remote] = []

    def tethered(self, label: str, argv: list[str], stdout: IO[bytes] | int | None = None) -> Remote:
        script = f"cd {shlex.quote(self.dir)} && exec {shlex.quote(self.bin + '/hw-tether')} {shlex.join(argv)}"
        remote = Remote(self.host, label, script, self.local / f"{label}.log", stdout)
        self.remotes.append(remote)
        return remote

    def sampler(self, period_s: float, resources: dict[str, ResourceSpec]) -> Remote:
        out = open(self.local / "proc.txt", "wb")
        try:
            return self.tethered("proc-sampler", sampler_argv(f"{self.bin}/hw-procsample", period_s, resources),
                                 stdout=out)
        finally:
            out.close()

    def last_sample(self) -> None:
        """One unfiltered sample of every /proc file after the sampler stopped (its totals exact)."""
        sample = self.host.run(final_sample_script(), check=False).stdout
        with open(self.local / "proc.txt", "ab") as out:
            out.write(sample)

    def collector(self, label: str, argv: list[str]) -> Remote:
        """A tool that says `ready` on its standard output once it records (--ready-fd 1)."""
        remote = self.tethered(label, [*argv, "--ready-fd", "1"])
        if remote.read_exact(6, READY_TIMEOUT_S) != b"ready\n":
            raise HostwireError(f"{self.host.name}: {label} did not say it was ready")
        return remote

    def fetch(self) -> None:
        """Its run folder there into raw/hosts/<role>/, then removed there."""
        proc = subprocess.Popen(self.host.argv(f"tar -c -C {shlex.quote(self.dir)} . && rm -rf {shlex.quote(self.dir)}"),
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert proc.stdout is not None
        try:
            with tarfile.open(fileobj=proc.stdout, mode="r|") as tar:
                tar.extractall(self.local, filter="data")
        except tarfile.TarError as err:
            proc.kill()
            proc.wait()
            raise HostwireError(f"{self.host.name}: failed to bring its files back: {err}") from None
        _, err_text = proc.communicate(timeout=60)
        if proc.returncode == SSH_EXIT_UNREACHABLE and not self.host.destination.local:
            raise HostLost(f"{self.host.name}: lost while its files came back: {last_line(err_text)}")
        if proc.returncode != 0:
            raise HostwireError(f"{self.host.name}: failed to bring its files back: {last_line(err_text)}")

    def stop_all(self) -> dict[str, int | None]:
        return {remote.label: remote.stop() for remote in reversed(self.remotes)}


def unique_hosts(hosts: dict[str, Host]) -> dict[str, Host]:
    """One Host per machine, named by its first role (sender, receiver, capture)."""
    seen: dict[str, Host] = {}
    for host in hosts.values():
        if host.destination.text not in {h.destination.text for h in seen.values()}:
            seen[host.role] = host
    return seen


def role_of(hosts: dict[str, Host], role: str) -> str:
    """The folder (first role) of the machine that plays `role`."""
    text = hosts[role].destination.text
    return next(r for r, h in unique_hosts(hosts).items() if h.destination.text == text)


def record_on_hosts(raw: Path, point: RunPoint, hosts: dict[str, Host], prepared: dict[str, Prepared],
                    run_id: str, manifest: dict[str, Any]) -> int | None:
    """Records the run's files under raw/; returns hw-bench main's exit status (None: it did not
    run). Raises HostLost when a host dropped out (after stopping everything on every host)."""
    spec = next(iter(hosts.values())).spec
    machines = unique_hosts(hosts)
    runs = {role: HostRun(host, prepared[role], run_id, raw) for role, host in machines.items()}
    sender, receiver = runs[role_of(hosts, "sender")], runs[role_of(hosts, "receiver")]
    capture = runs[role_of(hosts, "capture")]
    address = spec.receiver_address or hosts["receiver"].destination.hostname
    shaped_dev = ""
    exits: dict[str, Any] = manifest.setdefault("exit", {})
    lost: HostLost | None = None
    main_exit: int | None = None
    for run in runs.values():  # the folder still private and the tools what was sent, then the run's folder
        assert run.prepared.scratch is not None
        verify(run.host, run.prepared.scratch, run.prepared.digests, then=f"mkdir -p {shlex.quote(run.dir)}/bench")
    try:
        for run in runs.values():
            run.sampler(spec.resources_interval_s, spec.resources)
        if spec.shape and point.link_qdisc != "none":
            shaped_dev = sender.prepared.facts.get("interface", "")
            if not shaped_dev:
                raise HostwireError(f"{sender.host.name}: no interface toward {address} to shape")
            steps = [f"tc qdisc del dev {shlex.quote(shaped_dev)} root 2>/dev/null;"]
            steps += [shlex.join(["tc", *args]) for args in point.link().tc_args(shaped_dev)]
            sender.host.run(" ".join(steps[:1]) + " " + " && ".join(steps[1:]))
        if point.capture:
            for role, run in runs.items():
                iface = (spec.capture_interface if run is capture and spec.capture_interface
                         else run.prepared.facts.get("interface", ""))
                if iface:
                    run.collector("hw-wirecap", [f"{run.bin}/hw-wirecap", "-i", iface, "-o", "wire.pcap",
                                                 "-f", f"host {address}"])
        if point.kernel_trace:  # the receiver's host too, for its side of the receiver's causes
            for run in {id(r): r for r in (sender, receiver)}.values():
                run.collector("hw-schedtrace", [f"{run.bin}/hw-schedtrace", "-o", "."])
        for k in range(point.receiver_background):  # sieves beside the receiver, on its CPUs
            receiver.tethered(f"hw-bench-sieve-{k}", [*taskset_prefix(point.receiver_cpus), f"{receiver.bin}/hw-bench",
                                                     "sieve", "--log2", str(point.sieve_log2), "--rounds", "1000000"])
        recv_argv = [*taskset_prefix(point.receiver_cpus), f"{receiver.bin}/hw-bench", "receive", "--listen", address,
                     "-o", f"{receiver.dir}/bench", "--log-capacity", str(point.log_capacity)]
        if point.receiver_pause_s:
            recv_argv += ["--pause-at", seconds_arg(point.receiver_pause_at_s), "--pause-for", seconds_arg(point.receiver_pause_s)]
        if point.receiver_rcvbuf:
            recv_argv += ["--rcvbuf", str(point.receiver_rcvbuf)]
        recv = receiver.tethered("hw-bench-receive", recv_argv)
        ports = recv.read_exact(PORTS_LEN, 30.0)
        main_argv = [
            *taskset_prefix(point.sender_cpus), f"{sender.bin}/hw-bench", "main", "-o", f"{sender.dir}/bench",
            "-M", str(point.senders), "-N", str(point.background), "--warmup", seconds_arg(point.warmup_s),
            "--duration", seconds_arg(point.duration_s), "--quiet", seconds_arg(point.quiet_s),
            "--log2", str(point.sieve_log2), "--read-size", str(point.read_size),
            "--write-size", str(point.write_size or point.read_size), "--log-capacity", str(point.log_capacity),
            "--connect", address, "--receiver-cmd", _printf_bytes(ports),
            *(["--think", seconds_arg(point.think_s)] if point.think_s else [])]
        shaper_start = _qdisc_counters(sender.host, shaped_dev) if shaped_dev else None
        bench_start = time.monotonic_ns()
        main = sender.tethered("hw-bench-main", main_argv, stdout=subprocess.DEVNULL)
        limit = point.warmup_s + point.duration_s + point.quiet_s + 60
        while main.proc.poll() is None:
            for run in runs.values():  # a host that drops out ends the run now, not at the timeout
                for remote in run.remotes:
                    failure = remote.failure() if remote is not main else None
                    if isinstance(failure, HostLost):
                        raise failure
            if time.monotonic_ns() - bench_start > limit * 1e9:
                raise HostwireError(f"hw-bench main did not finish within {limit:g} s; stopped it")
            time.sleep(0.1)
        manifest["timing"] = {"benchmark_ns": time.monotonic_ns() - bench_start}
        if shaped_dev:  # as the namespaces' runner records its shaper (runner._record_shaper)
            end = _qdisc_counters(sender.host, shaped_dev)
            manifest["link"] = {"qdisc_start": shaper_start, "qdisc_end": end}
            manifest.setdefault("loss_categories", {})["qdisc_drops"] = "shaper_drops"
            manifest["losses"]["qdisc_drops"] = (end["drops"] - shaper_start["drops"]
                                                 if end is not None and shaper_start is not None else None)
        failure = main.failure()
        if isinstance(failure, HostLost):
            raise failure
        main_exit = main.proc.returncode
        manifest["bench_stderr"] = last_line(main.log_path.read_bytes())
        recv.proc.wait(timeout=20)  # it ends once main has stopped it
    except HostLost as err:
        lost = err
    finally:
        for role, run in runs.items():
            for label, code in run.stop_all().items():
                if label not in ("proc-sampler", "hw-bench-main", "hw-bench-receive") and "sieve" not in label:
                    exits[f"{label}@{role}"] = code
            for remote in run.remotes:  # a session that ssh itself ended: the host dropped out
                failure = remote.failure()
                if isinstance(failure, HostLost):
                    lost = lost or failure
        if shaped_dev:
            try:
                sender.host.run(f"tc qdisc del dev {shlex.quote(shaped_dev)} root", check=False)
            except HostLost as err:
                lost = lost or err
    for role, run in runs.items():
        try:
            run.last_sample()
            run.fetch()
        except HostLost as err:
            lost = lost or err
        except HostwireError as err:
            manifest.setdefault("fetch_errors", []).append(str(err))
    _gather(raw, runs, sender, receiver, capture)
    if lost is not None:
        raise lost
    return main_exit


def _qdisc_counters(host: Host, dev: str) -> dict[str, int] | None:
    """The root qdisc's counters on a host's interface (tc -s -j); None when tc cannot tell."""
    proc = host.run(f"tc -s -j qdisc show dev {shlex.quote(dev)}", check=False)
    try:
        qdiscs = json.loads(proc.stdout) if proc.returncode == 0 else None
    except ValueError:
        return None
    root = next((q for q in qdiscs or [] if isinstance(q, dict) and q.get("root")), None)
    keys = ("packets", "bytes", "drops", "overlimits", "requeues", "backlog", "qlen")
    return None if root is None else {key: int(root.get(key, 0) or 0) for key in keys}


def _gather(raw: Path, runs: dict[str, HostRun], sender: HostRun, receiver: HostRun, capture: HostRun) -> None:
    """The files today's readers expect, where they expect them: the sender's and the receiver's
    benchmark logs in raw/bench, the capture host's capture as raw/wire.pcap (a hard link: one
    copy on disk). raw/wirecap.json is written by the runner once the clocks are aligned."""
    bench = raw / "bench"
    bench.mkdir(exist_ok=True)
    for run in (sender, receiver):
        source = run.local / "bench"
        if source.is_dir():
            for path in source.iterdir():
                if not (bench / path.name).exists():
                    os.link(path, bench / path.name)
    pcap = capture.local / "wire.pcap"
    if pcap.exists() and not (raw / "wire.pcap").exists():
        os.link(pcap, raw / "wire.pcap")
    for name in ("trace.dat", "sched.tsv", "sched.json"):
        if (sender.local / name).exists() and not (raw / name).exists():
            os.link(sender.local / name, raw / name)


def point_problems(point: RunPoint) -> list[str]:
    """What a run point asks for that hosts mode does not do (one line each)."""
    problems = []
    if point.syscalls != "none":
        problems.append(f"syscalls = {point.syscalls!r}: on real hosts only 'none' (the kernel trace runs there)")
    if point.sender_cpu_share:
        problems.append("sender_cpu_share: the CPU cap is set up by the namespaces' topology only")
    if point.sender_rps:
        problems.append("sender_rps: it steers the namespaces' veth; on real hosts set the NIC's rps_cpus")
    return problems

