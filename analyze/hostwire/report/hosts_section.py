"""The report's "Hosts" section (docs/hosts.md): the table of each run's hosts from the summary
(campaign.hosts_summary) and a figure of one run's /proc samples on every host."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import numpy as np

from hostwire.campaign.hosts_summary import hosts_table
from hostwire.errors import InputError
from hostwire.read.procsamples import CPU_STATES, read_proc_samples
from hostwire.report import figure
from hostwire.report.html_table import table_html


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
    builder.sections.append(section("Hosts", text + table_html(table), names))
