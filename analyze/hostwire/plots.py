"""The report's figures (DESIGN.md section 9): each `plot_*` function draws one table that a
`df_*` function or the campaign summary returned, and returns the matplotlib Figure. Nothing here
reads files or computes a metric."""

from __future__ import annotations

import logging

import matplotlib

matplotlib.use("Agg")
logging.getLogger("matplotlib").setLevel(logging.WARNING)  # its font cache notices are not hostwire's

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

WIDTH, HEIGHT = 7.0, 4.2


def _point_label(senders: int, background: int) -> str:
    return f"M={senders} N={background}"


def plot_goodput_vs_mix(summary: pd.DataFrame, fit: dict[str, float] | None, paper_r: float | None = None) -> Figure:
    """Figure 5 of the paper: goodput on the wire against M / (M + N), each run a point (marked
    runs hollow), with the least-squares line and Pearson's r."""
    fig, ax = plt.subplots(figsize=(WIDTH, HEIGHT))
    ok = summary["marked"].fillna(1).astype(int) == 0 if "marked" in summary else np.ones(len(summary), bool)
    mix = summary["mix"].to_numpy(float)
    goodput = summary["goodput_bit_s"].to_numpy(float) / 1e6
    ax.scatter(mix[ok], goodput[ok], color="tab:blue", label="run")
    if (~ok).any():
        ax.scatter(mix[~ok], goodput[~ok], facecolors="none", edgecolors="tab:red", label="marked run")
    if fit is not None:
        xs = np.linspace(0, 1, 50)
        ax.plot(xs, (fit["slope_bit_s"] * xs + fit["intercept_bit_s"]) / 1e6, color="black", lw=1,
                label=f"fit, r = {fit['pearson_r']:.2f}" + (f" (paper: {paper_r:.2f})" if paper_r is not None else ""))
    ax.set_xlabel("M / (M + N): share of sending processes")
    ax.set_ylabel("goodput on the wire [Mbit/s]")
    ax.set_xlim(0, 1.05)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    fig.tight_layout()
    return fig


def plot_jain_heatmap(jain: pd.DataFrame, title: str) -> Figure:
    """Table 3 of the paper as a heatmap: Jain's index, rows background processes N, columns
    sending processes M (a pivot of the summary)."""
    fig, ax = plt.subplots(figsize=(WIDTH * 0.8, HEIGHT))
    values = jain.to_numpy(float)
    image = ax.imshow(values, cmap="viridis", vmin=min(0.85, np.nanmin(values) if values.size else 0.85), vmax=1.0,
                      aspect="auto", origin="upper")
    ax.set_xticks(range(len(jain.columns)), [str(c) for c in jain.columns])
    ax.set_yticks(range(len(jain.index)), [str(i) for i in jain.index])
    ax.set_xlabel("sending processes M")
    ax.set_ylabel("background processes N")
    for (i, j), value in np.ndenumerate(values):
        if np.isfinite(value):
            ax.text(j, i, f"{value:.4f}", ha="center", va="center", fontsize=8,
                    color="white" if value < 0.95 else "black")
    ax.set_title(title)
    fig.colorbar(image, ax=ax, label="Jain's index")
    fig.tight_layout()
    return fig


GAP_CAUSE_COLORS = {"on_wire": "tab:gray", "receiver_window": "tab:purple", "wire_busy": "tab:olive",
                    "preempted": "tab:red", "blocked_in_call": "tab:orange", "app_idle": "tab:green",
                    "unexplained": "lightgray"}


def plot_gap_causes(shares: pd.DataFrame) -> Figure:
    """Where the long gaps' time goes, per grid point: one stacked bar per point (index M, N),
    each cause's share of the gap time (columns named by the causes, rows summing to 1)."""
    fig, ax = plt.subplots(figsize=(WIDTH, HEIGHT))
    labels = [_point_label(int(m), int(n)) for m, n in shares.index]
    bottom = np.zeros(len(shares))
    for cause in shares.columns:
        values = shares[cause].to_numpy(float)
        ax.bar(range(len(shares)), values, bottom=bottom, color=GAP_CAUSE_COLORS.get(cause), label=cause.replace("_", "-"))
        bottom += np.nan_to_num(values)
    ax.set_xticks(range(len(shares)), labels, rotation=90, fontsize=7)
    ax.set_ylabel("share of the long gaps' time")
    ax.set_ylim(0, 1)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    fig.tight_layout()
    return fig


def plot_idc_curves(idc: dict[tuple[int, int], pd.DataFrame]) -> Figure:
    """Figure 4 of the paper: IDC(t) of all data frames against the bin length t, one curve per
    grid point (runs of a point pooled by their mean)."""
    fig, ax = plt.subplots(figsize=(WIDTH, HEIGHT))
    for (senders, background), table in sorted(idc.items()):
        whole = table[table["stream"] == "all"]
        if len(whole) == 0:
            continue
        curve = whole.groupby("t_ns")["idc"].mean()
        ax.plot(curve.index.to_numpy(float) / 1e6, curve.to_numpy(float), marker=".",
                label=_point_label(senders, background))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("bin length t [ms]")
    ax.set_ylabel("IDC(t) of frames")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    return fig


def plot_interval_distributions(hists: dict[tuple[int, int], pd.DataFrame]) -> Figure:
    """Figure 3 of the paper: the distribution of frame intervals (left) and write intervals
    (right) of all streams (the `all` rows, else every stream's bins summed), as the share of gaps per log-spaced bin, one line per grid point."""
    fig, axes = plt.subplots(1, 2, figsize=(WIDTH * 1.4, HEIGHT), sharey=True)
    for ax, kind in zip(axes, ("frame", "write")):
        for (senders, background), table in sorted(hists.items()):
            part = table[table["kind"] == kind]
            if (part["stream"] == "all").any():  # the merged gaps of all streams where given
                part = part[part["stream"] == "all"]
            if len(part) == 0:
                continue
            bins = part.groupby(["lo_ns", "hi_ns"], as_index=False)["count"].sum()
            share = bins["count"].to_numpy(float) / max(1.0, bins["count"].sum())
            centre = np.sqrt(bins["lo_ns"].to_numpy(float) * bins["hi_ns"].to_numpy(float)) / 1e6
            ax.step(centre, share, where="mid", label=_point_label(senders, background))
        ax.set_xscale("log")
        ax.set_xlabel(f"{kind} interval [ms]")
        ax.grid(alpha=0.3, which="both")
        ax.set_title(f"{kind} intervals")
    axes[0].set_ylabel("share of intervals per bin")
    axes[1].legend(fontsize=7, ncol=2)
    fig.tight_layout()
    return fig


def plot_contract_curves(contracts: dict[tuple[int, int], pd.DataFrame]) -> Figure:
    """Zero-loss dual-leaky-bucket contracts: the smallest MBS against the SCR, averaged over the
    streams (the `all` rows; a run of one stream has only its own), one curve per grid point."""
    fig, ax = plt.subplots(figsize=(WIDTH, HEIGHT))
    for (senders, background), table in sorted(contracts.items()):
        whole = table[table["stream"] == "all"] if (table["stream"] == "all").any() else table
        if len(whole) == 0:
            continue
        curve = whole.groupby("scr_cells_s")["mbs_min"].mean()
        ax.plot(curve.index.to_numpy(float), curve.to_numpy(float), label=_point_label(senders, background))
    ax.set_yscale("log")
    ax.set_xlabel("sustainable cell rate SCR [cells/s]")
    ax.set_ylabel("smallest MBS for zero loss [cells]")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    return fig


def plot_process_trace(frames: pd.DataFrame, writes: pd.DataFrame, running: pd.DataFrame | None,
                       t0_ns: int, title: str) -> Figure:
    """Figure 2 of the paper: around an off period, each stream's data frames and each sender's
    writes (seconds since t0_ns), and, where the kernel was traced, which process ran on the
    sender's CPU (a step line, one level per role)."""
    fig, ax = plt.subplots(figsize=(WIDTH * 1.4, HEIGHT * 1.2))
    streams = sorted(frames["stream"].astype(str).unique()) if len(frames) else []
    for i, name in enumerate(streams):
        t = (frames.loc[frames["stream"].astype(str) == name, "t_ns"].to_numpy(np.int64) - t0_ns) / 1e9
        ax.plot(t, np.full(len(t), 10 * (i + 1)), "|", markersize=10, label=f"frames {name}")
    roles = sorted(writes["role"].astype(str).unique()) if len(writes) else []
    for i, role in enumerate(roles):
        t = (writes.loc[writes["role"].astype(str) == role, "t_ns"].to_numpy(np.int64) - t0_ns) / 1e9
        ax.plot(t, np.full(len(t), 10 * (i + 1) + 4), ".", markersize=4, label=f"writes {role}")
    if running is not None and len(running):
        levels = {role: -10 * (k + 1) for k, role in enumerate(sorted(running["role"].unique()))}
        t = (running["t_ns"].to_numpy(np.int64) - t0_ns) / 1e9
        ax.step(t, running["role"].map(levels).to_numpy(float), where="post", color="black", lw=0.8,
                label="running on the sender's CPU")
        ax.set_yticks(list(levels.values()) + [10 * (i + 1) for i in range(len(streams))],
                      list(levels) + [f"stream {i}" for i in range(len(streams))])
    ax.set_xlabel("time [s] (0: the start of the longest off period)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return fig
