"""The report's figures (DESIGN.md section 9): each `plot_*` function draws one table that a
`df_*` function or the campaign summary returned, and returns the matplotlib Figure. Nothing here
reads files or computes a metric.

Every figure fits the report's page (hostwire.report.figure: at most PAGE_WIDTH_PX wide at DPI) and is laid out
by matplotlib's constrained layout with its legend outside the axes. Log axes are labelled only
where labels cannot crowd (`log_axis`: decades, else 1-2-5, else every leading digit; minor ticks
never). Where a campaign has many grid points a figure picks the points that tell its story or
draws one panel per number of background processes N."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import matplotlib.ticker as mticker
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from hostwire.report.figure import (HEIGHT, SERIES_COLOURS, WIDE, WIDTH, Curves, Key, is_grid_point, key_label,
                                      log_axis, new_figure, outside_legend)

HIGHLIGHT = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple")
LIMIT_STYLE = {"cpu": ("tab:red", "CPU-limited"), "wire": ("tab:blue", "wire-limited"),
               "neither": ("tab:gray", "neither")}  # summary column `limit` (hostwire.metrics.regime)


def plot_goodput_vs_mix(summary: pd.DataFrame, fit: dict[str, float] | None, paper_r: float | None = None) -> Figure:
    """Figure 5 of the paper: goodput on the wire against M / (M + N), each run a point (marked
    runs hollow), with the least-squares line `fit` and Pearson's r. Where the summary has the
    column `limit` (hostwire.metrics.regime: cpu, wire, neither) each regime gets its own panel and
    y scale from 0 (a wire-limited regime, flat at the link's rate, would hug the axis beside a
    CPU-limited one),
    its points coloured by it, and the line is the fit of the CPU-limited runs, in their panel."""
    ok = (summary["marked"].fillna(1).astype(int) == 0).to_numpy() if "marked" in summary \
        else np.ones(len(summary), bool)
    mix = summary["mix"].to_numpy(float)
    goodput = summary["goodput_bit_s"].to_numpy(float) / 1e6
    regimes = "limit" in summary.columns
    limit = summary["limit"].fillna("neither").astype(str).to_numpy() if regimes else np.full(len(summary), "")
    names = [n for n in [*LIMIT_STYLE, *sorted(set(limit) - set(LIMIT_STYLE))] if (limit == n).any()] \
        if regimes else [""]
    styles = {name: LIMIT_STYLE.get(name, ("tab:brown", name)) for name in names} if regimes \
        else {"": ("tab:blue", "run")}
    fig, axes = new_figure(WIDTH if len(names) == 1 else WIDE, HEIGHT, ncols=max(1, len(names)), squeeze=False)
    handles: list[Any] = []
    for ax, (name, (colour, label)) in zip(axes[0], styles.items()):
        mine = limit == name
        ax.scatter(mix[mine & ok], goodput[mine & ok], color=colour)
        ax.scatter(mix[mine & ~ok], goodput[mine & ~ok], facecolors="none", edgecolors=colour)
        handles.append(Line2D([], [], marker="o", ls="", color=colour, label=label))
        if _draw_point_means(ax, summary, mine) and not any(h.get_label() == POINT_MEAN_LABEL for h in handles):
            handles.append(Line2D([], [], marker="D", ls="-", color="black", markersize=4, label=POINT_MEAN_LABEL))
        if fit is not None and name in ("cpu", ""):
            xs = np.linspace(0, 1, 50)
            text = ("fit of the CPU-limited runs" if regimes else "fit") + f", r = {fit['pearson_r']:.2f}"
            handles += ax.plot(xs, (fit["slope_bit_s"] * xs + fit["intercept_bit_s"]) / 1e6, color="black", lw=1,
                               label=text + (f" (paper: {paper_r:.2f})" if paper_r is not None else ""))
        if regimes:
            ax.set_title(label, fontsize=9)
        ax.set_xlabel("M / (M + N): share of sending processes")
        ax.set_xlim(0, 1.05)
        ax.set_ylim(bottom=0, top=max(1e-3, np.nanmax(goodput[mine], initial=0)) * 1.1)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("goodput on the wire [Mbit/s]")
    if (~ok).any():
        handles.append(Line2D([], [], marker="o", ls="", color="0.3", markerfacecolor="none",
                              label="marked run (hollow)"))
    outside_legend(fig, handles)
    return fig


POINT_MEAN_LABEL = "a point's mean and its 95 % interval"


def _draw_point_means(ax: Axes, summary: pd.DataFrame, rows: np.ndarray) -> bool:
    """Each grid point recorded more than once (campaign.repetitions' columns) among `rows`: its
    mean goodput as a diamond with its 95 % confidence interval as the bar, beside its runs.
    Whether any was drawn."""
    if "goodput_n" not in summary or "point_key" not in summary:
        return False
    points = summary[rows & (summary["goodput_n"].fillna(0).to_numpy() > 1)].drop_duplicates("point_key")
    if points.empty:
        return False
    mean = points["goodput_mean_bit_s"].to_numpy(float) / 1e6
    low = mean - points["goodput_ci95_low_bit_s"].to_numpy(float) / 1e6
    high = points["goodput_ci95_high_bit_s"].to_numpy(float) / 1e6 - mean
    ax.errorbar(points["mix"].to_numpy(float), mean, yerr=np.vstack([low, high]), fmt="D", color="black",
                markersize=4, capsize=3, lw=1, zorder=3)
    return True


def plot_jain_heatmap(jain: pd.DataFrame, title: str) -> Figure:
    """Table 3 of the paper as a heatmap: Jain's index, rows background processes N, columns
    sending processes M (a pivot of the summary), each cell's value written in it."""
    rows, columns = jain.shape
    fig, ax = new_figure(WIDTH * 0.85, max(HEIGHT, 1.4 + 0.35 * rows))
    values = jain.to_numpy(float)
    finite = values[np.isfinite(values)]
    norm = Normalize(vmin=min(0.85, float(finite.min())) if finite.size else 0.85, vmax=1.0)
    image = ax.imshow(values, cmap="viridis", norm=norm, aspect="auto", origin="upper")
    ax.set_xticks(range(columns), [str(c) for c in jain.columns])
    ax.set_yticks(range(rows), [str(i) for i in jain.index])
    ax.set_xlabel("sending processes M")
    ax.set_ylabel("background processes N")
    # the axes are about 4.3 x 3 inches: "0.9984" takes about 3.6 font sizes across
    size = float(np.clip(min(72 * 4.3 / max(1, columns) / 4.2, 72 * 3.0 / max(1, rows) / 1.8), 5, 9))
    for (i, j), value in np.ndenumerate(values):
        if np.isfinite(value):
            ax.text(j, i, f"{value:.4f}", ha="center", va="center", fontsize=size,
                    color="white" if norm(value) < 0.5 else "black")
    ax.set_title(title)
    fig.colorbar(image, ax=ax, label="Jain's index")
    return fig


GAP_CAUSE_COLORS = {"on_wire": "tab:gray", "vcpu_stolen": "black", "receiver_window": "tab:purple", "retransmit_timeout": "tab:brown",
                    "wire_busy": "tab:olive", "preempted": "tab:red", "blocked_in_call": "tab:orange",
                    "app_idle": "tab:green", "awaiting_ack": "tab:cyan", "qdisc": "tab:blue", "send_path": "tab:pink",
                    "unexplained": "lightgray"}


def plot_gap_causes(shares: pd.DataFrame) -> Figure:
    """Where the long gaps' time goes: one stacked bar per row, each cause's share of the gap time
    (columns named by the causes, rows summing to 1). Rows indexed by grid point (M, N): the bars
    grouped by N (named above each group), M under each bar. Rows indexed by text (one run's
    streams, and all): the bars in the given order, each named by its index (lines split at
    newlines)."""
    grid = shares.index.nlevels == 2
    if grid:
        shares = shares.sort_index(level=[1, 0])
        names = [str(m) for m in shares.index.get_level_values(0).astype(int)]
        background = shares.index.get_level_values(1).astype(int).to_numpy()
        group = np.cumsum(np.r_[0, background[1:] != background[:-1]]) if len(shares) else np.zeros(0, int)
    else:
        names = [str(k) for k in shares.index]
        background = np.zeros(len(shares), int)
        group = np.zeros(len(shares), int)
    x = np.arange(len(shares)) + 0.8 * group  # a gap between the groups
    fig, ax = new_figure(WIDE, HEIGHT)
    bottom = np.zeros(len(shares))
    handles = []
    for cause in shares.columns:
        values = shares[cause].to_numpy(float)
        ax.bar(x, np.nan_to_num(values), bottom=bottom, width=0.85, color=GAP_CAUSE_COLORS.get(cause))
        handles.append(Patch(color=GAP_CAUSE_COLORS.get(cause), label=cause.replace("_", "-")))
        bottom += np.nan_to_num(values)
    if len(x):  # room for at least eight bars, so that a few are not drawn as wide as the page
        pad = max(0.6, (8 - (x[-1] - x[0])) / 2)
        ax.set_xlim(x[0] - pad, x[-1] + pad)
    ax.set_xticks(x, names)
    for g in np.unique(group) if grid else []:
        centre = x[group == g].mean()
        ax.annotate(f"N = {background[group == g][0]}", xy=(centre, 1.0), xycoords=("data", "axes fraction"),
                    xytext=(0, 3), textcoords="offset points", ha="center", va="bottom", fontsize=8)
    ax.set_xlabel("sending processes M, grouped by background processes N" if grid else "stream")
    ax.set_ylabel("share of the long gaps' time")
    ax.set_ylim(0, 1)
    outside_legend(fig, handles[::-1], title="cause")  # top to bottom as stacked
    fig.draw_without_rendering()  # lays the axes out: the room per bar decides the labels' size
    slot_pt = 72 * ax.get_position().width * fig.get_figwidth() / float(np.ptp(ax.get_xlim()))
    widest = max((len(line) for name in names for line in name.splitlines()), default=1)
    size = slot_pt / (0.62 * widest + 0.3)  # a digit is about 0.6 of the font size wide
    if size >= 6:
        ax.tick_params(axis="x", labelsize=min(9.0, size))
    else:  # too narrow side by side: upright
        ax.tick_params(axis="x", labelsize=float(np.clip(slot_pt / 1.3, 4, 8)), labelrotation=90)
    return fig


def _pool_on_t(curve: pd.DataFrame) -> pd.DataFrame:
    """Mean IDC per bin length over the runs of a point: each run has its own grid of t (log-spaced
    up to a tenth of its window), so t within 2 % of each other count as one (t their geometric
    mean)."""
    t = np.sort(curve["t_ns"].unique().astype(float))
    cluster = np.r_[0, np.cumsum(t[1:] / t[:-1] > 1.02)]
    key = pd.Series(cluster, index=t)
    pooled = curve.assign(key=key.reindex(curve["t_ns"].astype(float)).to_numpy(),
                          log_t=np.log(curve["t_ns"].astype(float)))
    out = pooled.groupby("key").agg(log_t=("log_t", "mean"), idc=("idc", "mean"))
    return pd.DataFrame({"t_ns": np.exp(out["log_t"].to_numpy()), "idc": out["idc"].to_numpy()})


def _whole(table: pd.DataFrame) -> pd.DataFrame:
    """A curve's rows: the `all` rows of a table of several streams, else the table (one run's
    stream, or a run of one stream)."""
    return table[table["stream"] == "all"] if (table["stream"] == "all").any() else table


def plot_idc_curves(idc: Mapping[Key, pd.DataFrame]) -> Figure:
    """Figure 4 of the paper: IDC(t) of all data frames (the `all` rows) against the bin length t;
    keyed by grid point, one panel per number of background processes N, one curve per number of
    senders M (runs of a point pooled by their mean); keyed by a run's series (text), one curve
    each (figure.Curves). IDC = 1, a Poisson stream's, dashed."""
    curves = {}
    for key, table in idc.items():
        whole = _whole(table)
        if len(whole):
            curves[key] = _pool_on_t(whole)
    layout = Curves(curves or idc)
    for key, curve in (sorted(curves.items()) if layout.grid else curves.items()):
        layout.ax(key).plot(curve["t_ns"].to_numpy() / 1e6, curve["idc"].to_numpy(), color=layout.colour(key),
                            lw=1.3)
    for ax in layout.axes():
        ax.axhline(1.0, color="0.4", ls="--", lw=0.8)
        ax.grid(alpha=0.3, which="major")
        log_axis(ax.xaxis)
        log_axis(ax.yaxis)
    layout.fig.supxlabel("bin length t [ms]", fontsize=10)
    layout.fig.supylabel("IDC(t) of the frames", fontsize=10)
    layout.legend([Line2D([], [], color="0.4", ls="--", lw=0.8, label="1 (Poisson)")])
    return layout.fig


def _ccdf(bins: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The share of intervals longer than x from a histogram (x in ms; counts of equal bins
    summed): exact at the bins' edges, and across each bin the share at its lower edge (an upper
    bound), so the last bin reaches out to its upper edge, the longest interval's bound. The edge
    x = 0 and the share 0 past the last bin are left out (log axes)."""
    table = bins.groupby(["lo_ns", "hi_ns"], as_index=False)["count"].sum().sort_values("lo_ns")
    count = table["count"].to_numpy(float)
    total = count.sum()
    if total <= 0:
        return np.zeros(0), np.zeros(0)
    at_least = np.cumsum(count[::-1])[::-1] / total
    lo, hi = table["lo_ns"].to_numpy(float) / 1e6, table["hi_ns"].to_numpy(float) / 1e6
    x = np.column_stack([lo, hi, hi]).ravel()
    y = np.column_stack([at_least, at_least, np.r_[at_least[1:], 0.0]]).ravel()
    keep = (x > 0) & (y > 0)
    return x[keep], y[keep]


def _interval_bins(table: pd.DataFrame, kind: str) -> pd.DataFrame:
    part = table[table["kind"] == kind]
    if (part["stream"] == "all").any():  # the merged gaps of all streams where given
        part = part[part["stream"] == "all"]
    return part


def story_points(points: Iterable[tuple[int, int]], longest: tuple[int, int] | None = None,
                 ) -> list[tuple[int, int]]:
    """The grid points (M, N) that tell the intervals' story: the fewest senders with the fewest
    background processes (the paper's figure 3: one sender alone), the most senders with the
    fewest, the fewest and the most senders with the most background processes, and `longest`
    (the point with the longest interval) if not one of those."""
    points = sorted(set(points))
    if not points:
        return []
    backgrounds = sorted({n for _, n in points})
    chosen: list[tuple[int, int]] = []
    for n in dict.fromkeys((backgrounds[0], backgrounds[-1])):
        ms = sorted(m for m, k in points if k == n)
        for m in dict.fromkeys((ms[0], ms[-1])):
            chosen.append((m, n))
    if longest is not None and longest in points and longest not in chosen:
        chosen.append(longest)
    return chosen


def interval_highlights(hists: Mapping[Key, pd.DataFrame]) -> tuple[list[Key], Key | None]:
    """The keys plot_interval_distributions colours (grid points: `story_points`; a run's series:
    every one, as many as there are colours) and the key whose frame intervals reach furthest
    (the largest upper bin edge; None without frame rows)."""
    tops = {key: float(part["hi_ns"].max()) for key, table in hists.items()
            if len(part := _interval_bins(table, "frame"))}
    if hists and not all(is_grid_point(k) for k in hists):
        return list(hists)[:len(HIGHLIGHT)], max(tops, key=lambda k: tops[k]) if tops else None
    longest = max(tops, key=lambda p: (tops[p], p)) if tops else None
    return story_points(hists, longest), longest  # type: ignore[arg-type]


def plot_interval_distributions(hists: Mapping[Key, pd.DataFrame]) -> Figure:
    """Figure 3 of the paper, the tails: the share of intervals longer than x against x (the
    complementary distribution on log-log axes, read off the histograms as `_ccdf` says) of frame
    intervals on the link (left: the `all` rows, the gaps between any two data frames; else every
    stream's bins summed) and of write intervals (right: every sending process's, summed); the
    runs of a point pooled. Coloured: the points `interval_highlights` picks, the one whose frame
    intervals reach furthest named; grey: every other point. Keyed by a run's series (text), each
    series a colour."""
    chosen, longest = interval_highlights(hists)
    grid = all(is_grid_point(k) for k in hists)
    palette = HIGHLIGHT if grid else SERIES_COLOURS  # a run's series as in its other figures
    fig, axes = new_figure(WIDE, HEIGHT, ncols=2, sharey=True)
    for ax, kind in zip(axes, ("frame", "write")):
        drawn = 0
        for point, table in (sorted(hists.items()) if all(is_grid_point(k) for k in hists) else hists.items()):
            x, y = _ccdf(_interval_bins(table, kind))
            if len(x) == 0:
                continue
            drawn += 1
            if point in chosen:
                ax.plot(x, y, color=palette[chosen.index(point) % len(palette)], lw=1.6, zorder=3)
            else:
                ax.plot(x, y, color="0.6", lw=0.8, alpha=0.7, zorder=2)
        if not drawn:
            ax.text(0.5, 0.5, f"no {kind} intervals", transform=ax.transAxes, ha="center", va="center", color="0.4")
        ax.grid(alpha=0.3, which="major")
        log_axis(ax.xaxis)
        log_axis(ax.yaxis)
    axes[0].set_xlabel("interval between data frames on the link [ms]")
    axes[1].set_xlabel("interval between one process's writes [ms]")
    axes[0].set_title("frame intervals", fontsize=10)
    axes[1].set_title("write intervals", fontsize=10)
    axes[0].set_ylabel("share of intervals longer than x")
    handles = [Line2D([], [], color=palette[k % len(palette)], lw=1.6,
                      label=key_label(point) + ("\n(longest frame interval)" if point == longest else ""))
               for k, point in enumerate(chosen)]
    if len(chosen) < len(hists):
        handles.append(Line2D([], [], color="0.6", lw=0.8, label="other points" if grid else "other streams"))
    outside_legend(fig, handles, title="grid point" if grid else "stream")
    return fig


def plot_contract_curves(contracts: Mapping[Key, pd.DataFrame]) -> Figure:
    """Zero-loss dual-leaky-bucket contracts: the smallest MBS against the SCR, averaged over the
    streams (the `all` rows; a run of one stream has only its own); keyed by grid point, one
    panel per number of background processes N, a colour per number of senders M, one line per
    run (their SCR grids differ: each starts at its run's smallest mean cell rate); keyed by a
    run's series (text), one line each. A run or series with a single point (its mean rate is the
    peak rate) is a dot."""
    layout = Curves(contracts)
    for key, table in (sorted(contracts.items()) if layout.grid else contracts.items()):
        whole = _whole(table)
        runs = whole["run"] if "run" in whole.columns else pd.Series(0, index=whole.index)
        for _, run in whole.groupby(runs.to_numpy(), sort=False):
            curve = run.groupby("scr_cells_s")["mbs_min"].mean()
            layout.ax(key).plot(curve.index.to_numpy(float) / 1e3, curve.to_numpy(float), color=layout.colour(key),
                                lw=1.2, marker="o" if len(curve) == 1 else None, markersize=4)
    for ax in layout.axes():
        log_axis(ax.yaxis)
        ax.xaxis.set_major_locator(mticker.MaxNLocator(nbins=5))
        ax.grid(alpha=0.3, which="major")
    layout.fig.supxlabel("sustainable cell rate SCR [1000 cells/s]", fontsize=10)
    layout.fig.supylabel("smallest MBS for zero loss [cells]", fontsize=10)
    layout.legend()
    return layout.fig


ROLE_CLASSES = {"send": ("senders", "tab:blue"), "bg": ("background", "tab:red"), "recv": ("receivers", "tab:green"),
                "main": ("main", "tab:purple"), "other": ("other", "tab:gray"), "idle": ("idle", "0.8")}
MAX_ROLE_ROWS = 8  # more roles than this are drawn one row per class


def _role_class(role: str) -> str:
    return role.split("-", 1)[0] if role.split("-", 1)[0] in ROLE_CLASSES else "other"


def _role_classes(roles: pd.Series) -> np.ndarray:
    head = roles.astype(str).str.split("-", n=1).str[0]
    return head.where(head.isin(list(ROLE_CLASSES)), "other").to_numpy()


def _role_order(role: str) -> tuple[int, int, str]:
    tail = role.partition("-")[2]
    rank = list(ROLE_CLASSES).index(_role_class(role))
    return rank, int(tail) if tail.isdigit() else -1, role


def _thin_labels(ax: Axes, positions: Sequence[float], labels: Sequence[str], row_pt: float, size: float) -> None:
    """Row labels on the y axis, every k-th when the rows are closer than the font."""
    step = max(1, math.ceil(1.3 * size / max(row_pt, 1e-9)))
    ax.set_yticks(list(positions)[::step], list(labels)[::step], fontsize=size)


def plot_process_trace(frames: pd.DataFrame, writes: pd.DataFrame, running: pd.DataFrame | None,
                       t0_ns: int, title: str, role_colours: Mapping[str, str] | None = None,
                       cpus: str = "sender's CPU") -> Figure:
    """Figure 2 of the paper: around an off period, each stream's data frames (bars) and its
    sender's writes (dots above the bars; a write whose stream sent no frame here gets a row of
    its own), seconds since t0_ns, and, where the kernel was traced, which process ran on `cpus`
    (`running`: t_ns and role of each switch, and t_end_ns where several CPUs are drawn, else each
    runs until the next switch):
    one row per role, or per class of role (senders, background, ...) when there are more than
    MAX_ROLE_ROWS roles. `role_colours` gives roles outside the benchmark's classes (a recorded
    program's processes, the tasks that preempted it) a colour of their own, and their rows come
    first, in its order."""
    streams = sorted(frames["stream"].astype(str).unique()) if len(frames) else []
    w_stream = writes["stream"].astype(str) if "stream" in writes.columns else pd.Series("", index=writes.index)
    w_role = writes["role"].astype(str) if "role" in writes.columns else pd.Series("?", index=writes.index)
    owner = (pd.DataFrame({"stream": w_stream, "role": w_role}).drop_duplicates()
             .groupby("stream")["role"].agg(lambda r: ",".join(sorted(r, key=_role_order))))
    orphans = sorted(set(w_role[~w_stream.isin(streams)]), key=_role_order)
    labels = [owner.get(name, f"stream {i}") for i, name in enumerate(streams)] + orphans
    stream_rows = len(labels)
    own = list(role_colours or {})
    roles = sorted(running["role"].astype(str).unique(),
                   key=lambda r: (own.index(r) if r in own else len(own), _role_order(r))) \
        if running is not None and len(running) else []
    by_class = len(roles) > MAX_ROLE_ROWS
    levels = list(dict.fromkeys(_role_class(r) for r in roles)) if by_class else roles
    top_height = max(1.6, 0.16 * stream_rows)
    bottom_height = max(1.0, 0.22 * len(levels)) if levels else 0.0
    height = min(9.0, 1.3 + top_height + bottom_height)
    if levels:
        fig, (ax, run_ax) = new_figure(WIDE, height, nrows=2, sharex=True,
                                    gridspec_kw={"height_ratios": [top_height, bottom_height]})
    else:
        fig, ax = new_figure(WIDE, height)
        run_ax = None
    row_of = {name: stream_rows - i for i, name in enumerate(streams)}
    row_of.update({f"role:{r}": stream_rows - len(streams) - k for k, r in enumerate(orphans)})
    if len(frames):
        y = frames["stream"].astype(str).map(row_of).to_numpy(float)
        ax.plot((frames["t_ns"].to_numpy(np.int64) - t0_ns) / 1e9, y, "|", color="tab:blue", markersize=7,
                markeredgewidth=0.8)
    if len(writes):
        y = np.where(w_stream.isin(streams), w_stream.map(row_of), ("role:" + w_role).map(row_of)).astype(float)
        ax.plot((writes["t_ns"].to_numpy(np.int64) - t0_ns) / 1e9, y + 0.35, ".", color="tab:orange", markersize=3)
    ax.set_ylim(0.3, stream_rows + 0.8)
    row_pt = 72 * top_height * 0.8 / max(1, stream_rows)
    size = 8.0 if row_pt >= 10 else 7.0
    _thin_labels(ax, [stream_rows - i for i in range(stream_rows)], labels, row_pt, size)
    ax.axvline(0.0, color="0.3", ls=":", lw=0.8)
    ax.grid(alpha=0.3, axis="x")
    ax.set_title(title, fontsize=10)
    handles = []
    if len(frames):
        handles.append(Line2D([], [], marker="|", ls="", color="tab:blue", markersize=7, label="data frame"))
    if len(writes):
        handles.append(Line2D([], [], marker=".", ls="", color="tab:orange", markersize=5, label="write"))
    last = ax
    if run_ax is not None and running is not None:
        running = running.sort_values("t_ns", kind="stable")
        t = (running["t_ns"].to_numpy(np.int64) - t0_ns) / 1e9
        level = _role_classes(running["role"]) if by_class else running["role"].astype(str).to_numpy()
        if "t_end_ns" in running.columns:  # each CPU's own intervals: several CPUs overlap
            ends = (running["t_end_ns"].to_numpy(np.int64) - t0_ns) / 1e9
        else:
            ends = np.r_[t[1:], t[-1]]  # each switch's process runs until the next switch
        for k, name in enumerate(levels):
            mine = level == name
            colour = (role_colours or {}).get(name) or ROLE_CLASSES[_role_class(name)][1]
            run_ax.broken_barh(list(zip(t[mine], (ends - t)[mine])), (len(levels) - k - 0.4, 0.8), color=colour)
        run_ax.set_ylim(0.4, len(levels) + 0.6)
        names = [ROLE_CLASSES[name][0] for name in levels] if by_class else levels
        _thin_labels(run_ax, [len(levels) - k for k in range(len(levels))], names,
                     72 * bottom_height * 0.8 / max(1, len(levels)), 8.0)
        run_ax.axvline(0.0, color="0.3", ls=":", lw=0.8)
        run_ax.grid(alpha=0.3, axis="x")
        run_ax.set_ylabel(f"running on the\n{cpus}", fontsize=8)
        last = run_ax
    last.set_xlabel("time [s] (0: the start of the longest off period)")
    if handles:
        outside_legend(fig, handles)
    return fig
