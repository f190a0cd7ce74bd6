"""The /proc sampler of real hosts (docs/hosts.md, after dproc's resource modules): one
hw-procsample process per host (procsample/, sent with the other tools) reads each resource's /proc
file at its own interval and prints it as the kernel wrote it, unless the differential filter
drops it: a sample is kept only when one of its numbers differs by at least `min_change` (a share)
from the last one kept; the drops are counted and printed. The runner adds one unfiltered sample
of every file at the end, so the counters' totals over the run are exact whatever the filter
dropped. (An awk program did this before; its rounds cost 1.7 ms at a 2 s period with the filter,
hw-procsample's a tenth of that: perf/bench_procsampler.py.)"""

from __future__ import annotations

from dataclasses import dataclass

# name -> the file it reads (hostwire.read.procsamples parses each)
RESOURCES = {"load": "/proc/loadavg", "cpu": "/proc/stat", "memory": "/proc/meminfo", "net": "/proc/net/dev",
             "tcp": "/proc/net/snmp", "disk": "/proc/diskstats"}

@dataclass(frozen=True)
class ResourceSpec:
    interval_s: float | None = None  # None: the sampler's period
    min_change: float = 0.0          # 0: every sample kept


def sampler_argv(program: str, period_s: float, resources: dict[str, ResourceSpec]) -> list[str]:
    """hw-procsample's command line: each resource every round(interval / period) rounds (at
    least one)."""
    argv = [program, "--period", f"{round(period_s * 1e9)}ns"]
    for name, path in RESOURCES.items():
        spec = resources.get(name, ResourceSpec())
        every = max(1, round((spec.interval_s or period_s) / period_s))
        argv += ["--resource", f"{name}:{path}:{every}:{spec.min_change:g}"]
    return argv


def final_sample_script() -> str:
    """One unfiltered sample of every file, stamped `@ <uptime> all`."""
    return ("printf '@ %s all\\n' \"$(cut -d ' ' -f 1 /proc/uptime)\"; cat " + " ".join(RESOURCES.values()))
