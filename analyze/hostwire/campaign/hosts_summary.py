"""Real hosts in the summary (docs/hosts.md): each run's /proc means and maxima per host and its
clocks' offsets and bounds as summary columns, and the table of them that the report's "Hosts"
section (report.hosts_section) shows."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd


LEVELS = ("cpu_busy", "load1", "mem_available_kib", "dirty_kib", "slab_kib", "ctxt/s")
TOTALS = ("tcp_RetransSegs", "tcp_OutRsts")


def hosts_row(manifest: dict[str, Any]) -> dict[str, Any]:
    """proc_<role>_<value>_<mean|max> (levels, and each interface's bytes per second in each
    direction), proc_<role>_<counter> (TCP totals over the run), clock_<role>_<method>_<offset|bound>_us."""
    row: dict[str, Any] = {}
    for role, proc in (manifest.get("proc") or {}).items():
        if not isinstance(proc, dict) or "mean" not in proc:
            continue
        names = [*LEVELS, *(k for k in proc["mean"] if k.startswith("net.") and k.endswith("_bytes/s")
                            and not k.startswith("net.lo.") and proc["totals"].get(k[:-2]))]
        for name in names:
            column = name.replace("/s", "_per_s").replace(".", "_")
            for stat in ("mean", "max"):
                if name in proc[stat]:
                    row[f"proc_{role}_{column}_{stat}"] = proc[stat][name]
        for counter in TOTALS:
            if counter in proc.get("totals", {}):
                row[f"proc_{role}_{counter}"] = proc["totals"][counter]
    for role, entry in (manifest.get("clocks") or {}).items():
        if not isinstance(entry, dict):
            continue
        for method in ("udp", "traffic"):
            if method in entry:
                row[f"clock_{role}_{method}_offset_us"] = entry[method]["offset_us"]
                row[f"clock_{role}_{method}_bound_us"] = entry[method]["bound_us"]
    return row


def hosts_table(summary: pd.DataFrame) -> pd.DataFrame:
    """Per run and host: CPU busy (mean, max), context switches per second, RetransSegs, and the
    clocks' bounds (the report's table)."""
    roles = sorted({c.split("_")[1] for c in summary.columns if c.startswith("proc_") and c.endswith("_cpu_busy_mean")})
    rows = []
    for _, run in summary.iterrows():
        for role in roles:
            rows.append({"run": run["run_id"], "host": role,
                         "cpu busy mean": run.get(f"proc_{role}_cpu_busy_mean"),
                         "cpu busy max": run.get(f"proc_{role}_cpu_busy_max"),
                         "switches/s": run.get(f"proc_{role}_ctxt_per_s_mean"),
                         "RetransSegs": run.get(f"proc_{role}_tcp_RetransSegs"),
                         "udp bound us": run.get(f"clock_{role}_udp_bound_us", np.nan),
                         "traffic bound us": run.get(f"clock_{role}_traffic_bound_us", np.nan)})
    return pd.DataFrame(rows)
