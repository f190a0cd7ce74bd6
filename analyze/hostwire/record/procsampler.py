"""The /proc sampler of real hosts (docs/hosts.md, after dproc's resource modules): one awk
process per host (awk, sleep: nothing of hostwire there) reads each resource's /proc file at its own
interval and prints it as the kernel wrote it, unless the differential filter drops it: a sample
is kept only when one of its numbers differs by at least `min_change` (a share) from the last one
kept; the drops are counted and printed. The runner adds one unfiltered sample of every file at
the end, so the counters' totals over the run are exact whatever the filter dropped."""

from __future__ import annotations

from dataclasses import dataclass

# name -> the file it reads (hostwire.read.procsamples parses each)
RESOURCES = {"load": "/proc/loadavg", "cpu": "/proc/stat", "memory": "/proc/meminfo", "net": "/proc/net/dev",
             "tcp": "/proc/net/snmp", "disk": "/proc/diskstats"}

AWK = r"""
function differs(a, b, s,    na, nb, x, y, k, d, base) {
    na = split(a, x, /[ \t\n:|]+/)
    nb = split(b, y, /[ \t\n:|]+/)
    if (na != nb) return 1
    for (k = 1; k <= na; k++) {
        if (x[k] == y[k] || x[k] !~ /^-?[0-9.]+$/) continue
        d = x[k] - y[k]; if (d < 0) d = -d
        base = y[k]; if (base < 0) base = -base
        if (base == 0 || d >= s * base) return 1
    }
    return 0
}
BEGIN {
    n = split(spec, items, ",")
    for (i = 1; i <= n; i++) {
        split(items[i], f, ":")
        name[i] = f[1]; file[i] = f[2]; every[i] = f[3] + 0; share[i] = f[4] + 0; dropped[i] = 0
    }
    for (tick = 0; ; tick++) {
        up = ""
        getline up < "/proc/uptime"; close("/proc/uptime")
        split(up, u, " ")
        grew = 0
        for (i = 1; i <= n; i++) {
            if (tick % every[i]) continue
            text = ""
            while ((getline line < file[i]) > 0) text = text line "\n"
            close(file[i])
            if (tick > 0 && share[i] > 0 && !differs(text, last[i], share[i])) { dropped[i]++; grew = 1; continue }
            printf "@ %s %s\n%s", u[1], name[i], text
            last[i] = text
        }
        if (grew) {
            printf "%% %s dropped", u[1]
            for (i = 1; i <= n; i++) printf " %s=%d", name[i], dropped[i]
            printf "\n"
        }
        fflush()
        system("sleep " period)
    }
}
"""


@dataclass(frozen=True)
class ResourceSpec:
    interval_s: float | None = None  # None: the sampler's period
    min_change: float = 0.0          # 0: every sample kept


def sampler_argv(period_s: float, resources: dict[str, ResourceSpec]) -> list[str]:
    """awk's command line: each resource every round(interval / period) ticks (at least one)."""
    items = []
    for name, path in RESOURCES.items():
        spec = resources.get(name, ResourceSpec())
        every = max(1, round((spec.interval_s or period_s) / period_s))
        items.append(f"{name}:{path}:{every}:{spec.min_change:g}")
    return ["awk", "-v", f"period={period_s:g}", "-v", f"spec={','.join(items)}", AWK]


def final_sample_script() -> str:
    """One unfiltered sample of every file, stamped `@ <uptime> all`."""
    return ("printf '@ %s all\\n' \"$(cut -d ' ' -f 1 /proc/uptime)\"; cat " + " ".join(RESOURCES.values()))
