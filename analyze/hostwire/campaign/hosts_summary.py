"""Real hosts in the summary and the report (docs/hosts.md): each run's /proc means and maxima per
host and its clocks' offsets and bounds as summary columns; the report's "Hosts" section, a table
of them and a figure of one run's samples on every host."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hostwire.campaign import figure
from hostwire.errors import InputError
from hostwire.read.procsamples import CPU_STATES, read_proc_samples

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


def samples_figure(run_dir: Path) -> Any:
    """One run's /proc samples on every host: CPU busy share, and the bytes per second of each
    interface that carried traffic, against the seconds since each host's first sample."""
    order = {"sender": 0, "receiver": 1, "capture": 2}
    hosts = sorted((p.name for p in (run_dir / "raw" / "hosts").iterdir() if (p / "proc.txt").exists()),
                   key=lambda name: order.get(name, 3))
    fig, axes = figure.new_figure(figure.WIDE, 2.0 * len(hosts), nrows=len(hosts), ncols=2, squeeze=False)
    for row, role in enumerate(hosts):
        df = read_proc_samples(run_dir / "raw" / "hosts" / role / "proc.txt")
        if len(df) < 2:
            continue
        t0 = df["t_s"].iloc[0]
        cpu = [f"cpu_{s}" for s in CPU_STATES if f"cpu_{s}" in df]
        sampled = df[["t_s", *cpu]].dropna()
        ticks = np.diff(sampled[cpu].to_numpy(dtype=np.float64), axis=0)
        idle = ticks[:, cpu.index("cpu_idle")] + ticks[:, cpu.index("cpu_iowait")]
        with np.errstate(invalid="ignore", divide="ignore"):
            axes[row][0].step(sampled["t_s"].to_numpy()[1:] - t0, 1 - idle / ticks.sum(axis=1), where="pre", lw=0.8)
        axes[row][0].set_ylabel(f"{role}\nCPU busy", fontsize=8)
        axes[row][0].set_ylim(0, 1.05)
        for col in (c for c in df.columns if c.startswith("net.") and c.endswith("_bytes") and ".lo." not in c):
            kept = df[["t_s", col]].dropna()
            t, v = kept["t_s"].to_numpy(), kept[col].to_numpy(dtype=np.float64)
            dt = np.diff(t)
            rate = np.diff(v) / np.where(dt > 0, dt, np.nan)
            if np.nansum(rate) > 0:
                axes[row][1].step(t[1:] - t0, rate * 8 / 1e6, where="pre", lw=0.8, label=col[4:-6])
        axes[row][1].set_ylabel("Mbit/s", fontsize=8)
        axes[row][1].legend(fontsize=6, loc="upper right")
    for ax in axes[-1]:
        ax.set_xlabel("seconds since the host's first sample", fontsize=8)
    return fig


def hosts_section(builder: Any, section: Any) -> None:
    """The report's "Hosts" section when the campaign ran on real hosts (else nothing)."""
    table = hosts_table(builder.summary)
    if table.empty:
        return
    text = ("<p>Each host's /proc sampled through the run (docs/hosts.md): the CPU's busy share, "
            "context switches per second and TCP retransmissions per run and host, and each clock "
            "method's error bound (microseconds) for the hosts mapped onto the sender's clock.</p>")
    names = []
    first = next((builder.campaign / d for d in builder.summary["directory"]
                  if (builder.campaign / d / "raw" / "hosts").is_dir()), None)
    if first is not None:
        try:
            names.append(builder.save(samples_figure(first), "hosts_proc"))
            text += f"<p>The figure: the samples of run {html.escape(first.name)} on every host.</p>"
        except (InputError, OSError, ValueError, KeyError):
            pass
    from hostwire.campaign.html_table import table_html as _table_html

    builder.sections.append(section("Hosts", text + _table_html(table), names))
