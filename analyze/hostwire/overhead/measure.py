"""The measurement of `hostwire overhead` (the probe effect of each collector): every configuration
once per round, the rounds round-robin, so that a slow stretch of the machine touches every
configuration alike; the paired estimate of each one's added cost per context switch or per traced
call (hostwire.stats.paired_estimate); the probes' own costs; and the switch rates of the user's
campaigns at which a cost reaches 1 % of a CPU (Peuhkuri 1997, section 3.2.1: a cost c per switch
costs 1 % of a CPU at 0.01 / c switches per second).

The yardstick is `hw-bench pingpong` (two processes passing one byte through two pipes: per round
trip two context switches and four I/O system calls). The method is checked by
`hw-bench pingpong --inject-ns N`, a known cost per round trip (tests): the estimator, comparing
bare with injected rounds, must give N back."""

from __future__ import annotations

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

from hostwire.lifeline import die_with_parent
from hostwire import paths
from hostwire.errors import HostwireError
from hostwire.overhead.program import ProgramRow
from hostwire.overhead.tools import CONFIGS, Config, ConfigFailed, Setup
from hostwire.stats import paired_estimate

log = logging.getLogger(__name__)


def rate_for_one_percent(cost_us: float) -> float:
    """Events per second whose added cost, cost_us each, is 1 % of a CPU (paper 3.2.1)."""
    if not math.isfinite(cost_us) or cost_us <= 0:
        return math.inf
    return 0.01 / (cost_us * 1e-6)


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
    program_rows: list[ProgramRow] = field(default_factory=list)  # iperf3 and tcp-rr under each tool
    program_settings: dict[str, Any] = field(default_factory=dict)  # runs, seconds, rr_loops

    def row(self, name: str) -> Row | None:
        return next((r for r in self.rows if r.name == name), None)

    def program_row(self, name: str) -> ProgramRow | None:
        return next((r for r in self.program_rows if r.name == name), None)

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
                      "accuracy": self.accuracy,
                      "program": {**self.program_settings, "rows": [asdict(r) for r in self.program_rows]}})


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


PROBE_RE = re.compile(r"probe: name=(\S+)(?: calls=(\d+) ns_per_call=([-\d.]+)| unavailable=(.*))")


def measure_probes(calls: int = 1_000_000, cpu: int | None = None) -> list[dict[str, Any]]:
    """ns per call of each probe, from `hw-bench probes` (one line per probe)."""
    argv = [str(paths.tool("hw-bench")), "probes", "--calls", str(calls)]
    if cpu is not None:
        argv = ["taskset", "-c", str(cpu), *argv]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600, preexec_fn=die_with_parent)
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
    rates = campaign_switch_rates(runs_dir or paths.runs_root())
    return Result(loops, runs, cpu, tracer_cpu, rows, probes, rates, notes, rt_prio)
