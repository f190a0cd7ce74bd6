"""The probe effect of each collector (`hostwire overhead`): what it adds to the ping-pong, per
context switch or per traced call, and what it costs at the switch rates of the user's own runs.

The yardstick is `hw-bench pingpong` pinned to one CPU (two processes passing one byte through two
pipes: per round trip two context switches and four I/O system calls, a write and a read in each
process). Every configuration (bare, each hostwire collector, the ptrace floor, the peer tools)
runs once per round, the rounds round-robin, so that a slow stretch of the machine touches every
configuration alike. The estimator is paired: in each round r, d_r = (round trip of the
configuration - round trip of bare in the same round) / units per round trip; the added cost is
the median of d_r and its 95 % interval a percentile bootstrap of that median over the rounds.
The paper's derivation (Peuhkuri 1997, section 3.2.1) follows: a cost c per switch costs 1 % of a
CPU at 0.01 / c switches per second.

The method is checked by `hw-bench pingpong --inject-ns N`, a known cost per round trip (tests):
the estimator, comparing bare with injected rounds, must give N back."""

from __future__ import annotations

import csv
import json
import logging
import math
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hostwire import paths
from hostwire.errors import HostwireError

log = logging.getLogger(__name__)

TRACEFS = Path("/sys/kernel/tracing")
SWITCHES_PER_RT = 2  # per round trip: parent -> child, child -> parent
CALLS_PER_RT = 4  # per round trip: write and read in the parent, read and write in the child
IO_CALLS = ("read,write,readv,writev,pread64,pwrite64,sendto,sendmsg,sendmmsg,recvfrom,recvmsg,sendfile,splice,"
            "connect,accept,accept4,close")
SCHED_EVENTS = ("sched:sched_switch", "sched:sched_wakeup", "sched:sched_wakeup_new", "sched:sched_migrate_task",
                "sched:sched_process_fork", "sched:sched_process_exec", "sched:sched_process_exit",
                "net:net_dev_queue", "net:net_dev_xmit", "net:netif_receive_skb", "sock:inet_sock_set_state")
BOOTSTRAP_RESAMPLES = 4000


class ConfigFailed(Exception):
    """A configuration could not be measured: the message is its one line."""


# ---- the estimator ----------------------------------------------------------------------------

@dataclass
class Estimate:
    """The added cost per unit from paired rounds: median of the per-round differences and its 95 %
    bootstrap interval (in the unit of the differences)."""

    median: float
    low: float
    high: float
    mean: float
    rounds: int

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high


def paired_estimate(config: Sequence[float], bare: Sequence[float], per_rt: float = 1.0,
                    seed: int = 1997) -> Estimate:
    """Added cost per unit of `config` over `bare`, the two measured in the same rounds (round i
    of one paired with round i of the other): d_i = (config_i - bare_i) / per_rt; the median of d
    with a 95 % percentile-bootstrap interval (resampling the rounds; fixed seed: the same data
    give the same interval). Rounds where either value is missing (NaN) are left out."""
    c = np.asarray(config, dtype=float)
    b = np.asarray(bare, dtype=float)
    if c.shape != b.shape:
        raise ValueError(f"paired rounds differ in number: {len(c)} and {len(b)}")
    d = (c - b) / per_rt
    d = d[np.isfinite(d)]
    if len(d) == 0:
        return Estimate(math.nan, math.nan, math.nan, math.nan, 0)
    if len(d) == 1:
        return Estimate(float(d[0]), math.nan, math.nan, float(d[0]), 1)
    rng = np.random.default_rng(seed)
    resampled = np.median(d[rng.integers(0, len(d), size=(BOOTSTRAP_RESAMPLES, len(d)))], axis=1)
    low, high = np.percentile(resampled, [2.5, 97.5])
    return Estimate(float(np.median(d)), float(low), float(high), float(np.mean(d)), int(len(d)))


def rate_for_one_percent(cost_us: float) -> float:
    """Events per second whose added cost, cost_us each, is 1 % of a CPU (paper 3.2.1)."""
    if not math.isfinite(cost_us) or cost_us <= 0:
        return math.inf
    return 0.01 / (cost_us * 1e-6)


# ---- the configurations -------------------------------------------------------------------------

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
                              stdin=subprocess.DEVNULL)
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
        from hostwire.collectors import BackgroundTool

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


def run_everything(setup: Setup) -> float:
    with Wirecap(setup):
        return _round_trip([*_schedtrace(setup, True), *_iotrace(setup), *setup.pingpong()], setup,
                           "hw-schedtrace -s + hw-iotrace + hw-wirecap")


def _sched_events() -> list[str]:
    events = list(SCHED_EVENTS)
    if (TRACEFS / "events" / "tcp" / "tcp_probe").is_dir():
        events.append("tcp:tcp_probe")
    return events


def run_tracecmd(setup: Setup) -> float:
    """trace-cmd record with hw-schedtrace's event set, into its own tracefs instance. trace-cmd 3.1
    writes /proc/sys/kernel/ftrace_enabled and the function-tracer files even when it records
    events only, and this kernel refuses those writes ("Can't enable ftrace"): it runs in a private
    mount namespace (unshare -m) where a scratch file is bind-mounted over each refused file;
    nothing outside that namespace sees the mounts. Readers at SCHED_FIFO 1 (-r 1), clock mono."""
    instance = f"hw-{os.getpid()}-tc"
    inst_dir = TRACEFS / "instances" / instance
    dummy = setup.work / "ftrace-dummy"
    dummy.write_text("1\n")
    files = ["/proc/sys/kernel/ftrace_enabled"]
    for name in ("set_ftrace_filter", "set_ftrace_notrace", "set_ftrace_pid", "set_ftrace_notrace_pid"):
        files += [str(TRACEFS / name), str(inst_dir / name)]
    events = [arg for ev in _sched_events() for arg in ("-e", ev)]
    script = ('dummy=$1; shift; n=$1; shift; i=0; while [ $i -lt "$n" ]; do [ -e "$1" ] && '
              'mount --bind "$dummy" "$1"; shift; i=$((i+1)); done; exec "$@"')
    try:
        inst_dir.mkdir()
    except OSError as err:
        raise ConfigFailed(f"failed to create tracefs instance {inst_dir}: {err.strerror}") from None
    try:
        argv = [*setup.on(setup.tracer_cpu), "unshare", "-m", "sh", "-c", script, "sh", str(dummy), str(len(files)),
                *files, "trace-cmd", "record", "-q", "-B", instance, "-C", "mono", "-r", "1", *events, "-o",
                str(setup.work / "tc.dat"), "--", *setup.pingpong()]
        return _round_trip(argv, setup, "trace-cmd record")
    finally:
        try:
            inst_dir.rmdir()
        except OSError:
            pass


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
    Config("trace-cmd record", "trace-cmd record (same scheduler events)", "switch", run_tracecmd, "trace-cmd", True),
    Config("perf sched record", "perf sched record", "switch", run_perf_sched, "perf", True),
    Config("strace -f", "strace -f -ttt -e trace=<hw-iotrace's calls>", "call", run_strace, "strace", True),
]


# ---- one measurement --------------------------------------------------------------------------

@dataclass
class Row:
    name: str
    what: str
    unit: str
    per_rt: int
    status: str  # "ok", "not installed", "failed"
    message: str = ""
    round_trips_us: list[float] = field(default_factory=list)  # one per round (NaN: not measured)
    median_rt_us: float = math.nan
    p25_rt_us: float = math.nan
    p75_rt_us: float = math.nan
    min_rt_us: float = math.nan
    added_us: float = math.nan  # per unit (switch or call), median of the paired differences
    added_low_us: float = math.nan
    added_high_us: float = math.nan
    added_min_us: float = math.nan  # per unit, from the minima: (min config - min bare) / per_rt
    rate_1pct_per_s: float = math.nan  # units per second whose added cost is 1 % of a CPU


@dataclass
class Result:
    loops: int
    runs: int
    cpu: int
    tracer_cpu: int
    rows: list[Row]
    probes: list[dict[str, Any]]
    campaign_rates: list[dict[str, Any]]
    notes: list[str]
    rt_prio: int = 0
    accuracy: list[dict[str, Any]] = field(default_factory=list)

    def row(self, name: str) -> Row | None:
        return next((r for r in self.rows if r.name == name), None)

    def to_json(self) -> dict[str, Any]:
        def clean(v: Any) -> Any:
            if isinstance(v, float) and not math.isfinite(v):
                return None
            if isinstance(v, list):
                return [clean(x) for x in v]
            if isinstance(v, dict):
                return {k: clean(x) for k, x in v.items()}
            return v
        return clean({"loops": self.loops, "runs": self.runs, "cpu": self.cpu, "tracer_cpu": self.tracer_cpu,
                      "rt_prio": self.rt_prio,
                      "rows": [asdict(r) for r in self.rows], "probes": self.probes,
                      "campaign_switch_rates": self.campaign_rates, "notes": self.notes,
                      "accuracy": self.accuracy})


def other_cpu(cpu: int) -> int:
    """A CPU for the collectors' own threads, other than the ping-pong's where there is one."""
    cpus = sorted(os.sched_getaffinity(0))
    others = [c for c in cpus if c != cpu]
    return others[0] if others else cpu


def measure(loops: int, runs: int, cpu: int, configs: Sequence[Config] | None = None, *,
            tracer_cpu: int | None = None, inject_ns: int = 0, rt_prio: int = 0,
            progress: Callable[[str], None] | None = None) -> list[Row]:
    """Runs every configuration once per round, `runs` rounds, round-robin (the order rotates by
    one each round so that no configuration always follows the same one). A configuration whose
    program is missing, or that fails, gives one line and is left out of the later rounds."""
    configs = list(configs or CONFIGS)
    if configs[0].name != "bare":
        raise ValueError("the first configuration must be bare")
    if cpu not in os.sched_getaffinity(0):
        raise HostwireError(f"CPU {cpu} is not available here (available: "
                            f"{','.join(map(str, sorted(os.sched_getaffinity(0))))})")
    paths.tool("hw-bench")
    rows = {c.name: Row(c.name, c.what, c.unit, c.per_rt, "ok") for c in configs}
    for c in configs:
        if c.needs and shutil.which(c.needs) is None:
            rows[c.name].status = "not installed"
            rows[c.name].message = f"{c.needs} is not installed: {c.name} not measured"
        rows[c.name].round_trips_us = [math.nan] * runs
    with tempfile.TemporaryDirectory(prefix="hw-overhead-") as tmp:
        setup = Setup(loops, cpu, other_cpu(cpu) if tracer_cpu is None else tracer_cpu, Path(tmp), inject_ns, rt_prio)
        for r in range(runs):
            order = configs[r % len(configs):] + configs[:r % len(configs)]
            for c in order:
                row = rows[c.name]
                if row.status != "ok":
                    continue
                try:
                    row.round_trips_us[r] = c.run(setup)
                except ConfigFailed as err:
                    if c.name == "bare":
                        raise HostwireError(f"the bare ping-pong failed: {err}") from None
                    row.status, row.message = "failed", str(err)
                    if progress:
                        progress(f"{c.name}: {err}; left out of the remaining rounds")
                for leftover in ("syscalls.tsv", "syscalls.json", "strace.txt", "perf.data", "tc.dat", "lo.pcap"):
                    (setup.work / leftover).unlink(missing_ok=True)
            if progress:
                progress(f"round {r + 1} of {runs} done")
    bare = rows[configs[0].name]
    for row in rows.values():
        summarize(row, bare)
    return list(rows.values())


def summarize(row: Row, bare: Row) -> None:
    """Fills the statistics of a row from its round trips and bare's of the same rounds."""
    rt = np.asarray(row.round_trips_us, dtype=float)
    ok = rt[np.isfinite(rt)]
    if row.status != "ok" or len(ok) == 0:
        return
    row.median_rt_us = float(np.median(ok))
    row.p25_rt_us, row.p75_rt_us = (float(x) for x in np.percentile(ok, [25, 75]))
    row.min_rt_us = float(ok.min())
    if row is bare:
        return
    est = paired_estimate(row.round_trips_us, bare.round_trips_us, row.per_rt)
    row.added_us, row.added_low_us, row.added_high_us = est.median, est.low, est.high
    row.added_min_us = (row.min_rt_us - bare.min_rt_us) / row.per_rt
    row.rate_1pct_per_s = rate_for_one_percent(row.added_us)


# ---- the probes and the user's switch rates ------------------------------------------------------

PROBE_RE = re.compile(r"probe: name=(\S+)(?: calls=(\d+) ns_per_call=([-\d.]+)| unavailable=(.*))")


def measure_probes(calls: int = 1_000_000, cpu: int | None = None) -> list[dict[str, Any]]:
    """ns per call of each probe, from `hw-bench probes` (one line per probe)."""
    argv = [str(paths.tool("hw-bench")), "probes", "--calls", str(calls)]
    if cpu is not None:
        argv = ["taskset", "-c", str(cpu), *argv]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise HostwireError(f"hw-bench probes failed (exit {proc.returncode}): {proc.stderr.strip()[-300:]}")
    return parse_probes(proc.stdout)


def parse_probes(text: str) -> list[dict[str, Any]]:
    out = []
    for m in PROBE_RE.finditer(text):
        name, calls, ns, why = m.groups()
        out.append({"probe": name, "ns_per_call": float(ns) if ns is not None else math.nan,
                    "calls": int(calls) if calls else 0, "note": (why or "").strip()})
    return out


def campaign_switch_rates(runs_dir: Path) -> list[dict[str, Any]]:
    """The switch rates of the user's campaigns: `switches_per_s` of runs/*/summary.parquet."""
    import pandas as pd

    out = []
    for summary in sorted(runs_dir.glob("*/summary.parquet")):
        try:
            df = pd.read_parquet(summary, columns=["switches_per_s"])
        except Exception as err:  # a summary without the column, or unreadable: one line
            log.debug("%s: no switches_per_s (%s)", summary, err)
            continue
        s = df["switches_per_s"].astype(float)
        s = s[np.isfinite(s)]
        if len(s):
            out.append({"campaign": summary.parent.name, "runs": int(len(s)),
                        "median_switches_per_s": float(s.median()),
                        "max_switches_per_s": float(s.max())})
    return out


def run_overhead(loops: int, runs: int, cpu: int, *, runs_dir: Path | None = None, probe_calls: int = 1_000_000,
                 configs: Sequence[Config] | None = None, rt_prio: int = 0,
                 progress: Callable[[str], None] | None = None) -> Result:
    tracer_cpu = other_cpu(cpu)
    rows = measure(loops, runs, cpu, configs, tracer_cpu=tracer_cpu, rt_prio=rt_prio, progress=progress)
    notes = [r.message for r in rows if r.message]
    try:
        probes = measure_probes(probe_calls, cpu)
    except HostwireError as err:
        probes = []
        notes.append(str(err))
    rates = campaign_switch_rates(runs_dir or paths.REPO_ROOT / "runs")
    return Result(loops, runs, cpu, tracer_cpu, rows, probes, rates, notes, rt_prio)


# ---- output -----------------------------------------------------------------------------------------

def _f(v: float, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float) and math.isinf(v):
        return "inf"
    return f"{v:.{digits}f}"


def _rate(v: float) -> str:
    if v is None or math.isnan(v):
        return "-"
    if math.isinf(v):
        return "no measurable cost"
    return f"{v:,.0f}"


def markdown(result: Result) -> str:
    fifo = f"; the ping-pong at SCHED_FIFO {result.rt_prio}" if result.rt_prio else ""
    lines = [f"ping-pong: `hw-bench pingpong --loops {result.loops} --cpu {result.cpu}`, {result.runs} rounds "
             f"round-robin; collectors' own threads on CPU {result.tracer_cpu} (ptrace tracers on the ping-pong's "
             f"CPU){fifo}. Per round trip: {SWITCHES_PER_RT} context switches, {CALLS_PER_RT} system calls. "
             "Added cost: "
             "median over rounds of (configuration - bare of the same round) / units per round trip, 95 % "
             "bootstrap interval; `min` from the minima.", "",
             "| configuration | median µs/rt | p25-p75 µs/rt | min µs/rt | unit | added µs/unit | 95 % CI | "
             "added µs/unit (min) | units/s costing 1 % |",
             "|---|---:|---:|---:|---|---:|---|---:|---:|"]
    for r in result.rows:
        if r.status != "ok":
            lines.append(f"| {r.name} | {r.status}: {r.message} | | | | | | | |")
            continue
        ci = "-" if r.name == "bare" else f"[{_f(r.added_low_us)}, {_f(r.added_high_us)}]"
        lines.append(f"| {r.name} | {_f(r.median_rt_us)} | {_f(r.p25_rt_us)}-{_f(r.p75_rt_us)} | {_f(r.min_rt_us)} | "
                     f"{r.unit} | {_f(r.added_us)} | {ci} | {_f(r.added_min_us)} | "
                     f"{_rate(r.rate_1pct_per_s) if r.name != 'bare' else '-'} |")
    lines += ["", "Switch rates of your campaigns (runs/*/summary.parquet, `switches_per_s`), and the share of "
              "a CPU each scheduler tracer would cost at them (rate x added cost per switch):", ""]
    sched = [r for r in result.rows if r.unit == "switch" and r.name != "bare" and r.status == "ok"]
    if result.campaign_rates:
        lines += ["| campaign | runs | median switches/s | max switches/s | " +
                  " | ".join(f"{r.name} at max" for r in sched) + " |",
                  "|---|---:|---:|---:|" + "---:|" * len(sched)]
        for c in result.campaign_rates:
            shares = [f"{100 * c['max_switches_per_s'] * max(r.added_us, 0) * 1e-6:.2f} %" for r in sched]
            lines.append(f"| {c['campaign']} | {c['runs']} | {c['median_switches_per_s']:,.0f} | "
                         f"{c['max_switches_per_s']:,.0f} | " + " | ".join(shares) + " |")
    else:
        lines.append("no campaign summary with a switches_per_s column under runs/ (run `hostwire run` and "
                     "`hostwire analyze` first).")
    lines += ["", "Probe costs (`hw-bench probes`, ns per call, the empty loop subtracted):", "",
              "| probe | ns/call |", "|---|---:|"]
    for p in result.probes:
        lines.append(f"| {p['probe']} | {_f(p['ns_per_call'], 1) if not p['note'] else 'unavailable: ' + p['note']} |")
    if not result.probes:
        lines.append("| (not measured) | |")
    return "\n".join(lines) + "\n"


CSV_FIELDS = ["name", "what", "unit", "per_rt", "status", "message", "median_rt_us", "p25_rt_us", "p75_rt_us",
              "min_rt_us", "added_us", "added_low_us", "added_high_us", "added_min_us", "rate_1pct_per_s",
              "round_trips_us"]


def write_csv(result: Result, path: Path) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        w.writeheader()
        for r in result.rows:
            d = asdict(r)
            d["round_trips_us"] = " ".join(_f(x) for x in r.round_trips_us)
            w.writerow({k: d[k] for k in CSV_FIELDS})


def plot(result: Result, path: Path) -> None:
    from hostwire import plots  # noqa: F401  (selects the Agg backend)
    import matplotlib.pyplot as plt

    rows = [r for r in result.rows if r.status == "ok" and r.name != "bare" and math.isfinite(r.added_us)]
    fig, ax = plt.subplots(figsize=(7.0, 0.45 * max(len(rows), 3) + 1.2))
    y = np.arange(len(rows))
    med = np.array([r.added_us for r in rows])
    lo = np.array([r.added_low_us for r in rows])
    hi = np.array([r.added_high_us for r in rows])
    err = np.vstack([np.nan_to_num(med - lo), np.nan_to_num(hi - med)]).clip(min=0)
    ax.barh(y, med, xerr=err, color=["tab:blue" if r.unit == "switch" else "tab:orange" for r in rows],
            capsize=3)
    ax.set_yticks(y, [f"{r.name} (per {r.unit})" for r in rows])
    ax.invert_yaxis()
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_xscale("symlog", linthresh=0.1)
    ax.set_xlabel("added µs per switch (blue) or per traced call (orange), 95 % CI")
    ax.set_title(f"probe effect on hw-bench pingpong\n{result.runs} rounds of {result.loops} round trips",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_outputs(result: Result, out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    md, csv_path, png = out_dir / "overhead.md", out_dir / "overhead.csv", out_dir / "overhead.png"
    text = markdown(result) if result.rows else ""
    if result.accuracy:
        text += "\n" + accuracy_markdown(result.accuracy, result.accuracy[0].get("repeats", 0) or 0)
    md.write_text("# hostwire overhead\n\n" + text)
    write_csv(result, csv_path)
    plot(result, png)
    (out_dir / "overhead.json").write_text(json.dumps(result.to_json(), indent=1) + "\n")
    return [md, csv_path, png]


def ratio_lines(result: Result) -> list[str]:
    """The comparisons with the peers (the lines the earlier benchmark scripts printed)."""
    out = []

    def ratio(a: str, b: str, label: str, target: str) -> None:
        ra, rb = result.row(a), result.row(b)
        if not ra or not rb or ra.status != "ok" or rb.status != "ok":
            out.append(f"ratio {label}: not measured ({a if not ra or ra.status != 'ok' else b} missing)")
            return
        if rb.added_min_us <= 0 and rb.added_us <= 0:
            out.append(f"ratio {label}: undefined ({b} added nothing measurable)")
            return
        parts = []
        if rb.added_min_us > 0:
            parts.append(f"{ra.added_min_us / rb.added_min_us:.2f} from minima")
        if rb.added_us > 0:
            parts.append(f"{ra.added_us / rb.added_us:.2f} from paired medians")
        out.append(f"ratio {label}: {', '.join(parts)} ({target})")

    ratio("hw-schedtrace", "trace-cmd record", "hw-schedtrace / trace-cmd added cost per switch (same events)",
          "target <= 1.10")
    ratio("hw-schedtrace", "perf sched record", "hw-schedtrace / perf sched record added cost per switch",
          "for information")
    ratio("hw-iotrace ptrace", "strace -f", "hw-iotrace ptrace / strace -f added cost per call", "target <= 0.5")
    ratio("ptrace floor", "strace -f", "ptrace floor / strace -f added cost per call (the least a ptrace tracer pays)",
          "for information")
    pre = result.row("hw-iotrace preload")
    if pre and pre.status == "ok":
        ns = pre.added_us * 1000
        out.append(f"hw-iotrace preload added cost per call on the ping-pong: {ns:.0f} ns "
                   f"[{pre.added_low_us * 1000:.0f}, {pre.added_high_us * 1000:.0f}] (the < 100 ns target is "
                   "judged on bench_iotrace.py's write loop)")
    return out


def injected_config(inject_ns: int) -> Config:
    """The ping-pong with a known cost per round trip (the method check): unit "round trip"."""
    def run(setup: Setup) -> float:
        return _round_trip(setup.pingpong(inject_ns), setup, f"ping-pong with {inject_ns} ns injected")

    cfg = Config(f"inject {inject_ns} ns", f"hw-bench pingpong --inject-ns {inject_ns}", "round trip", run)
    return cfg


# ---- accuracy: does a collector change the answer? (MSHN, Jacobs 1999) -------------------------

ACCURACY_METRICS = ("goodput_bit_s", "jain", "idc_100ms", "sieve_rounds_per_s", "switches_per_s")


def sieve_rounds_per_s(run_dir: Path) -> float:
    """Sieve rounds finished per second of the window, all background processes together (their
    logs raw/bench/bg-*.tsv, one record per round)."""
    from hostwire.run import load_run

    run = load_run(run_dir)
    start, end = run.planned_window_ns()
    total = 0
    for path in sorted((run_dir / "raw" / "bench").glob("bg-*.tsv")):
        df = run.log(path.stem).df
        total += int(((df["t_ns"] >= start) & (df["t_ns"] < end)).sum())
    return total / ((end - start) / 1e9) if end > start else math.nan


def accuracy_row(run_dir: Path) -> dict[str, Any]:
    """The metrics compared for one run. Goodput and Jain's index on the receivers' basis (the
    same with and without a capture); IDC at 100 ms needs the wire (NaN without a capture)."""
    from hostwire.analysis import analyze_run

    row = analyze_run(run_dir, force=True)
    out = {"goodput_bit_s": row.get("goodput_app_bit_s", row.get("goodput_bit_s", math.nan)),
           "jain": row.get("jain", math.nan), "idc_100ms": row.get("idc_100ms", math.nan),
           "switches_per_s": row.get("switches_per_s", math.nan), "marked": row.get("marked", math.nan),
           "status": row.get("status")}
    try:
        out["sieve_rounds_per_s"] = sieve_rounds_per_s(run_dir)
    except HostwireError:
        out["sieve_rounds_per_s"] = math.nan
    return {k: (float(v) if isinstance(v, (int, float)) and v is not None else v) for k, v in out.items()}


# Student's t, 97.5 % quantile, for 1..30 degrees of freedom (beyond: 1.96 is within 2 %).
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
         2.045, 2.042)


def t975(df: int) -> float:
    return _T975[df - 1] if 1 <= df <= len(_T975) else 1.96


def t_interval(diffs: Sequence[float]) -> tuple[float, float, float]:
    """Mean of paired differences and its 95 % t-interval (NaN with fewer than two)."""
    d = np.asarray(diffs, dtype=float)
    d = d[np.isfinite(d)]
    if len(d) < 2:
        return (float(d.mean()) if len(d) else math.nan, math.nan, math.nan)
    half = t975(len(d) - 1) * d.std(ddof=1) / math.sqrt(len(d))
    return float(d.mean()), float(d.mean() - half), float(d.mean() + half)


def compare_sets(rows: dict[str, list[dict[str, Any]]], baseline: str = "none") -> list[dict[str, Any]]:
    """Per collector set and metric: the mean paired difference (set - baseline of the same
    repetition) with its 95 % t-interval; a set "changes the answer" when any interval excludes
    zero, else it is "within noise" (a metric measured in too few pairs is left out)."""
    base = rows[baseline]
    out = []
    for name, runs in rows.items():
        if name == baseline:
            continue
        changed, compared = [], []
        for metric in ACCURACY_METRICS:
            diffs = [r[metric] - b[metric] for r, b in zip(runs, base)]
            mean, low, high = t_interval(diffs)
            known = [b[metric] for b in base if math.isfinite(b[metric])]
            ref = float(np.mean(known)) if known else math.nan
            if math.isfinite(low):
                compared.append(metric)
                if not low <= 0 <= high:
                    changed.append(metric)
            out.append({"collectors": name, "metric": metric, "baseline_mean": float(ref), "diff": mean,
                        "low": low, "high": high})
        verdict = ("changes the answer (" + ", ".join(changed) + ")" if changed else
                   "within noise" if compared else "not enough runs")
        for row in out:
            if row["collectors"] == name:
                row["verdict"] = verdict
    return out


def run_accuracy(root: Path, repeats: int, sets: Sequence[str], base_point: Any = None,
                 progress: Callable[[str], None] | None = None) -> tuple[dict[str, list[dict[str, Any]]],
                                                                            list[dict[str, Any]]]:
    """Records the grid point R times bare (collectors "none") and R times with each set, the sets
    alternating within each repetition, through hostwire.runner.record_run; returns the rows per
    set and compare_sets' table."""
    from dataclasses import replace

    from hostwire.point import RunPoint
    from hostwire.runner import record_run

    point = base_point or RunPoint()
    names = ["none", *sets]
    rows: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    for r in range(repeats):
        for n in names:
            run_id = f"{n.replace('+', '-')}-r{r}"
            record_run(root, run_id, replace(point, collectors=n))
            rows[n].append(accuracy_row(root / run_id))
            try:
                flows, frames = loss_ledger(root / run_id)
                rows[n][-1]["ledger"] = {"flows": flows, "run": frames}
            except HostwireError as err:
                rows[n][-1]["ledger"] = {"flows": [], "run": {"note": str(err)}}
            if progress:
                progress(f"accuracy: {n} repetition {r + 1} of {repeats} recorded")
    table = compare_sets(rows)
    for row in table:
        row["repeats"] = repeats
        last = rows[row["collectors"]][-1].get("ledger") if rows[row["collectors"]] else None
        row["ledger"] = last if row["metric"] == ACCURACY_METRICS[0] else None
    return rows, table


def accuracy_markdown(table: list[dict[str, Any]], repeats: int) -> str:
    lines = [f"Accuracy (MSHN method): the default grid point recorded {repeats} times with no collector and "
             f"{repeats} times with each set (alternating); mean difference set - none of the same repetition, "
             "95 % t-interval; goodput and Jain's index on the receivers' basis.", "",
             "| collectors | metric | without collectors | difference | 95 % CI | verdict |",
             "|---|---|---:|---:|---|---|"]
    for r in table:
        lines.append(f"| {r['collectors']} | {r['metric']} | {_f(r['baseline_mean'])} | {_f(r['diff'])} | "
                     f"[{_f(r['low'])}, {_f(r['high'])}] | {r['verdict']} |")
    ledgers = [(r["collectors"], r["ledger"]) for r in table if r.get("ledger")]
    if ledgers:
        lines += ["", "Loss ledger of each set's last run (bytes passed to send, from the benchmark's log; "
                  "frames at net_dev_xmit on the captured interface, from sched.tsv; frames captured):", "",
                  "| collectors | flow | bytes sent | bytes on the wire | payload frames captured | gap | where |",
                  "|---|---|---:|---:|---:|---:|---|"]
        for name, ledger in ledgers:
            for f in ledger["flows"]:
                lines.append(f"| {name} | {f['role']} {f['stream']} | {f['bytes_sent']} | {f.get('bytes_on_wire', '-')} | "
                             f"{f.get('frames_captured', '-')} | {f.get('gap_bytes', '-')} B | {f.get('where', 'no capture')} |")
            run = ledger["run"]
            if "frames_at_xmit" in run:
                lines.append(f"| {name} | all flows, {run['interface']} | | | {run['frames_at_xmit']} at xmit, "
                             f"{run['frames_captured']} captured | {run['gap_frames']} frames | {run['where']} |")
            elif run.get("note"):
                lines.append(f"| {name} | all flows | | | | | {run['note']} |")
    return "\n".join(lines) + "\n"


# ---- the loss ledger: where did frames go missing? ----------------------------------------------

def loss_ledger(run_dir: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Per flow (each sender's stream), within the logging window: bytes passed to send (the
    benchmark's record of its writes), payload frames and the span of payload bytes captured in
    the sender's direction. Per run:
    frames handed to the captured interface (net_dev_xmit in sched.tsv, every flow together: the
    event names no socket) against the frames captured leaving it. A gap is named where it lies:
    bytes written but never on the wire (still in the socket buffer at the end, or lost before the
    interface), or frames transmitted but not captured (lost by the capture)."""
    from hostwire.run import load_run

    run = load_run(run_dir)
    flows: list[dict[str, Any]] = []
    try:
        frames = run.df_frames()
    except HostwireError:
        frames = None
    start, end = run.planned_window_ns()  # the benchmark logs its writes within its window only
    if frames is not None:
        frames = frames[(frames["t_ns"] >= start) & (frames["t_ns"] < end)]
    streams = run.df_streams()
    writes = run.timeline_writes()
    writes = writes[(writes["t_enter_ns"] >= start) & (writes["t_enter_ns"] < end)]
    sent = writes.groupby("stream")["bytes"].sum() if len(writes) else {}
    for s in streams.itertuples():
        if not str(s.sender_role).startswith("send-"):
            continue
        row: dict[str, Any] = {"stream": s.stream, "role": s.sender_role, "bytes_sent": int(sent.get(s.stream, 0))}
        if frames is not None:
            mine = frames[(frames["src"] == s.src) & (frames["sport"] == s.sport) & (frames["dst"] == s.dst)
                          & (frames["dport"] == s.dport) & (frames["payload_len"] > 0)]
            seq = mine["seq"].astype("int64").to_numpy()
            # unique payload: the span of sequence numbers (32-bit, relative to the first) covered
            rel = (seq - seq.min()) % (1 << 32) if len(seq) else seq
            ends = rel + mine["payload_len"].to_numpy()
            row["frames_captured"] = int(len(mine))
            row["bytes_on_wire"] = int(ends.max() - rel.min()) if len(seq) else 0
            gap = row["bytes_sent"] - row["bytes_on_wire"]
            row["gap_bytes"] = int(gap)
            row["where"] = ("none" if gap <= 0 else
                            "written but not on the wire (socket buffer at the end, or lost before the interface)")
        flows.append(row)
    _writes_against_tracer(run, flows, start, end)
    run_row: dict[str, Any] = {}
    if not (run_dir / "raw" / "wirecap.json").exists() or not (run_dir / "raw" / "sched.tsv").exists():
        return flows, {"note": "no per-run frame ledger: it needs the capture and the kernel trace"}
    try:
        meta = json.loads((run_dir / "raw" / "wirecap.json").read_text())
        iface = meta.get("interface")
        sched = run.df_sched()
        sender = set(streams.loc[streams["sender_role"].astype(str).str.startswith("send-"), "src"])
        ours = frames[frames["src"].isin(sender)] if frames is not None else None
        if ours is None or not len(ours):
            raise ValueError("no frame from the senders was captured")
        first, last = int(ours["t_ns"].min()), int(ours["t_ns"].max())
        xmit = int(((sched["event"] == "net_dev_xmit") & (sched["name"] == iface)
                    & (sched["t_ns"] >= first - 1_000_000) & (sched["t_ns"] <= last + 1_000_000)).sum())
        captured = int(len(ours))
        run_row = {"interface": iface, "frames_at_xmit": xmit, "frames_captured": captured,
                   "gap_frames": xmit - captured,
                   "where": "none" if xmit <= captured else
                   "transmitted but not among the captured IPv4 frames of the senders (capture drops, or "
                   "frames that are not IPv4 such as ARP)"}
    except (OSError, ValueError, HostwireError, KeyError) as err:
        run_row = {"note": f"no per-run frame ledger: {err}"}
    named = _named_losses(run.manifest)
    if named:  # a collector's own count of what it lost: the ledger's gaps are where it says
        run_row["losses"] = named
        run_row["where"] = "; ".join(named) + (
            "" if run_row.get("where") in (None, "none") else f"; and {run_row['where']}")
    return flows, run_row


def _writes_against_tracer(run: Any, flows: list[dict[str, Any]], start: int, end: int) -> None:
    """Adds to each flow the writes the benchmark logged in the window (`writes_logged`) and the
    sending calls the system-call tracer recorded on that stream in the same window
    (`writes_traced`, when the run traced them): one source checked against the other; the
    difference is a call one of them missed."""
    if not (run.path / "raw" / "syscalls.tsv").exists():
        return
    logged = run.df_writes()
    logged = logged[(logged["t_ns"] >= start) & (logged["t_ns"] < end)].groupby("stream").size()
    calls = run.df_calls()
    calls = calls[calls["is_send"].to_numpy() & (calls["t_enter_ns"] >= start).to_numpy()
                  & (calls["t_enter_ns"] < end).to_numpy()].groupby("stream").size()
    for flow in flows:
        flow["writes_logged"] = int(logged.get(flow["stream"], 0))
        flow["writes_traced"] = int(calls.get(flow["stream"], 0))
        flow["writes_gap"] = flow["writes_logged"] - flow["writes_traced"]


def _named_losses(manifest: dict[str, Any]) -> list[str]:
    """Each loss a collector counted in the run, named by its source: the capture's drops (the
    frames it saw leave are fewer than were sent), the kernel trace's lost events (its
    net_dev_xmit count is then a lower bound), the tracer's misses, the shaper's drops."""
    from hostwire.metrics.sanity import loss_category

    declared = manifest.get("loss_categories") or {}
    what = {"capture_drops": "the capture dropped {n} frame(s) ({key})",
            "trace_overruns": "the kernel trace lost {n} event(s) ({key}): its net_dev_xmit count is a lower bound",
            "tracer_misses": "the system-call tracer missed {n} call(s) ({key})",
            "shaper_drops": "the shaper dropped {n} frame(s) before the wire ({key})",
            "log_overflows": "the benchmark's log overflowed by {n} event(s) ({key})"}
    named = []
    for key, value in (manifest.get("losses") or {}).items():
        category = loss_category(key, declared)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0 and category in what:
            named.append(what[category].format(n=value, key=key))
    return named
