"""Every figure of the report is readable at the report's width: drawn from tables shaped like a
36-point campaign (M in 1, 2, 5, 10, 15, 20 and N in 0, 1, 2, 5, 10, 20) and like a 3 x 2 one, no
two tick labels of an axis overlap, tick labels and legends stay inside the figure, a legend
covers no axes, its entries have distinct colours, and the PNG saved at the report's dpi is at
most as wide as the page."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from matplotlib.axis import Axis
from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.transforms import Bbox

from hostwire.report import figure, plots
from hostwire.metrics.intervals import Gaps, log_histogram
from hostwire.timeline.gaps import CAUSES

DPI = 110
PAGE_PX = 1100
GRIDS = {"36 points": ([1, 2, 5, 10, 15, 20], [0, 1, 2, 5, 10, 20]), "3 x 2": ([1, 2, 5], [0, 2])}
FRAME_NS = 1_211_000  # a 1514-byte frame at 10 Mbit/s


def _points(grid: str) -> list[tuple[int, int]]:
    senders, background = GRIDS[grid]
    return [(m, n) for m in senders for n in background]


def _streams(m: int) -> list[str]:
    return [f"198.18.0.1:{40000 + i}>198.18.0.2:5001" for i in range(m)]


def summary(grid: str, limit: bool) -> pd.DataFrame:
    rng = np.random.default_rng(1)
    rows = []
    for repetition in range(3):
        for m, n in _points(grid):
            mix = m / (m + n)
            rows.append({"senders": m, "background": n, "repetition": repetition, "mix": mix,
                         "goodput_bit_s": (2 + 7 * mix) * 1e6 * rng.uniform(0.97, 1.03),
                         "marked": int(rng.uniform() < 0.1), "jain": float(1 - rng.uniform(0, 0.2) * (m > 1)),
                         "limit": "cpu" if n > 0 else ("wire" if m > 1 else "neither")})
    table = pd.DataFrame(rows)
    return table if limit else table.drop(columns="limit")


def gap_shares(grid: str) -> pd.DataFrame:
    rng = np.random.default_rng(2)
    index = pd.MultiIndex.from_tuples(_points(grid), names=["senders", "background"])
    return pd.DataFrame(rng.dirichlet(np.ones(len(CAUSES)), len(index)), index=index, columns=list(CAUSES))


def interval_hists(grid: str) -> dict[tuple[int, int], pd.DataFrame]:
    """Frame intervals of every stream and of the link (`all`), writes of every sender. In the
    3 x 2 grid the link's intervals span less than a decade (1.0 to 2.5 ms), as on a 10 Mbit/s
    link; in the 36-point grid the background processes add tails of up to seconds."""
    rng = np.random.default_rng(3)
    out = {}
    for m, n in _points(grid):
        names = _streams(min(m, 3))
        link = rng.normal(FRAME_NS, 20_000, 4000).clip(1_000_000, 2_400_000)
        if grid == "36 points" and n:
            link = np.concatenate([link, rng.pareto(1.2, 40 * n) * 5e6 * n / m + FRAME_NS])
        per_stream = [rng.normal(FRAME_NS * m, 30_000, 500).clip(1_000_000, None) for _ in names]
        writes = [np.concatenate([rng.uniform(3_000, 12_000, 300), rng.uniform(1e8, 2e9, 2 + n)]) for _ in names]
        frames = Gaps(np.repeat(np.arange(len(names) + 1), [*map(len, per_stream), len(link)]),
                      np.concatenate([*per_stream, link]).astype(np.int64), names + ["all"])
        write = Gaps(np.repeat(np.arange(len(names)), list(map(len, writes))),
                     np.concatenate(writes).astype(np.int64), names)
        out[(m, n)] = pd.concat([log_histogram(frames, "frame"), log_histogram(write, "write")], ignore_index=True)
    return out


def idc_tables(grid: str) -> dict[tuple[int, int], pd.DataFrame]:
    """Three runs per point, each with its own grid of t (windows a little different)."""
    rng = np.random.default_rng(4)
    out = {}
    for m, n in _points(grid):
        parts = []
        for run in range(3):
            t = np.unique(np.geomspace(1e6, 3e9 * (1 + 0.001 * run), 30).astype(np.int64))
            slope = 0.6 * n / (m + n)
            idc = 0.05 * (t / 1e6) ** slope * rng.uniform(0.8, 1.2, len(t))
            for stream in [*_streams(min(m, 3)), "all"]:
                parts.append(pd.DataFrame({"stream": stream, "t_ns": t, "bins": 3e10 // t, "mean": 1.0,
                                           "var": idc, "idc": idc, "run": f"r{run}"}))
        out[(m, n)] = pd.concat(parts, ignore_index=True)
    return out


def contract_tables(grid: str) -> dict[tuple[int, int], pd.DataFrame]:
    """Two runs per point; one sender alone fills the link: a single point at the peak rate."""
    rng = np.random.default_rng(5)
    pcr = 23_584.9
    out = {}
    for m, n in _points(grid):
        parts = []
        for run in range(2):
            if (m, n) == (1, 0):
                scr = np.array([pcr])
                mbs = np.array([1.0])
            else:
                scr = np.linspace(pcr * rng.uniform(0.05, 0.6), pcr, 20)
                mbs = np.maximum(1, 3e3 * (m + n) / (scr / 1e3) ** 1.5 * rng.uniform(0.9, 1.1))
                mbs[-1] = 1
            for stream in [*_streams(min(m, 3)), "all"][-2 if m > 1 else -1:]:
                parts.append(pd.DataFrame({"stream": stream if m > 1 else _streams(1)[0], "scr_cells_s": scr,
                                           "t_s_ns": np.round(1e9 / scr), "tau_min_ns": mbs * 4e4,
                                           "mbs_min": mbs, "run": f"r{run}"}))
        out[(m, n)] = pd.concat(parts, ignore_index=True)
    return out


def trace(m: int, n: int) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """0.6 s around an off period: frames of M streams in bursts, each sender's writes, and the
    switches on the sender's CPU among the senders, the background processes, others and idle."""
    rng = np.random.default_rng(6)
    t0 = 10_000_000_000
    names = _streams(m)
    frames, writes = [], []
    for i, name in enumerate(names):
        starts = t0 - 200_000_000 + np.arange(0, 600_000_000, 60_000_000) + i * 3_000_000
        t = (starts[:, None] + np.arange(12)[None, :] * FRAME_NS * m).ravel()
        frames.append(pd.DataFrame({"stream": name, "t_ns": t}))
        writes.append(pd.DataFrame({"t_ns": starts + 1000, "role": f"send-{i}", "stream": name}))
    roles = [f"send-{i}" for i in range(m)] + [f"bg-{i}" for i in range(n)] + ["other", "idle"]
    switches = np.sort(rng.integers(t0 - 200_000_000, t0 + 400_000_000, 3000))
    running = pd.DataFrame({"t_ns": switches, "role": rng.choice(roles, len(switches))})
    frame_table = pd.concat(frames, ignore_index=True)
    frame_table["stream"] = frame_table["stream"].astype("category")
    return frame_table, pd.concat(writes, ignore_index=True), running


def _trace_figure(m: int, n: int) -> Figure:
    return plots.plot_process_trace(*trace(m, n), 10_000_000_000, f"M={m} N={n}: longest off period 60.0 ms")


def run_series(tables: dict[tuple[int, int], pd.DataFrame], grid: str, lines: int = 1) -> dict[str, pd.DataFrame]:
    """One run's table (the grid's largest point) keyed as the one-run report keys it: all
    streams first, then each stream by its process and ports."""
    table = tables[max(_points(grid))]
    out = {"all streams": table[table["stream"] == "all"]}
    for i, stream in enumerate(sorted(set(table["stream"]) - {"all"})):
        out[f"iperf3 {4200 + i}{chr(10) if lines > 1 else ' '}:{40000 + i}>:5001"] = table[table["stream"] == stream]
    return out


def _program_trace_figure() -> Figure:
    """A recorded program on two CPUs: each switch with its own end, the program's processes and
    its top preempters named and coloured."""
    frames, writes, running = trace(2, 2)
    cpu = np.arange(len(running)) % 2
    ends = running.groupby(cpu)["t_ns"].shift(-1).fillna(running["t_ns"].max()).astype(np.int64)
    names = np.where(running["role"].str.startswith("send"), "iperf3 4200",
                     np.where(running["role"].str.startswith("bg"), "sh 4300", running["role"]))
    return plots.plot_process_trace(frames, writes.assign(role="iperf3 4200"),
                                    running.assign(t_end_ns=ends, role=names), 10_000_000_000,
                                    "iperf3 4200 :40000>:5001: longest off period 60.0 ms",
                                    {"iperf3 4200": "tab:blue", "sh 4300": "tab:red"}, "CPUs 0,1")


FIGURES: dict[str, Callable[[str], Figure]] = {
    "goodput": lambda grid: plots.plot_goodput_vs_mix(
        summary(grid, False), {"pearson_r": 0.93, "slope_bit_s": 7e6, "intercept_bit_s": 2e6}, 0.99),
    "goodput by regime": lambda grid: plots.plot_goodput_vs_mix(
        summary(grid, True), {"pearson_r": 0.93, "slope_bit_s": 7e6, "intercept_bit_s": 2e6}, 0.99),
    "jain": lambda grid: plots.plot_jain_heatmap(
        summary(grid, False).pivot_table(index="background", columns="senders", values="jain"),
        "Jain's index: 10mbit tbf-peak, CPU cap 5 %"),
    "gap causes": lambda grid: plots.plot_gap_causes(gap_shares(grid)),
    "intervals": lambda grid: plots.plot_interval_distributions(interval_hists(grid)),
    "idc": lambda grid: plots.plot_idc_curves(idc_tables(grid)),
    "contracts": lambda grid: plots.plot_contract_curves(contract_tables(grid)),
    "process trace": lambda grid: _trace_figure(*((20, 20) if grid == "36 points" else (2, 2))),
    # the one-run report (hostwire.report.run_report): the same figures keyed by one run's streams
    "run gap causes": lambda grid: plots.plot_gap_causes(pd.DataFrame(
        {key: gap_shares(grid).iloc[k] for k, key in enumerate(run_series(idc_tables(grid), grid, 2))}).T),
    "run intervals": lambda grid: plots.plot_interval_distributions(run_series(interval_hists(grid), grid)),
    "run idc": lambda grid: plots.plot_idc_curves(run_series(idc_tables(grid), grid)),
    "run contracts": lambda grid: plots.plot_contract_curves(run_series(contract_tables(grid), grid)),
    "program trace": lambda grid: _program_trace_figure(),
}


ONE_RUN = ("run gap causes", "run intervals", "run idc", "run contracts", "program trace")


# one run's figures hold a few streams whatever the grid: drawn once
@pytest.fixture(params=[(figure, grid) for figure in FIGURES for grid in GRIDS
                        if figure not in ONE_RUN or grid == "3 x 2"], ids=lambda p: f"{p[0]}, {p[1]}")
def drawn(request: pytest.FixtureRequest) -> Iterator[tuple[Figure, str]]:
    import matplotlib.pyplot as plt

    name, grid = request.param
    fig = FIGURES[name](grid)
    fig.set_dpi(DPI)  # measure in the pixels of the saved PNG
    fig.canvas.draw()
    yield fig, name
    plt.close(fig)


def _tick_labels(axis: Axis) -> list[Text]:
    """The visible, non-empty major and minor tick labels of the ticks drawn (those in view)."""
    lo, hi = sorted(axis.get_view_interval())
    slack = 1e-9 * (hi - lo)
    labels = []
    for ticks, locs in ((axis.get_major_ticks(), axis.get_majorticklocs()),
                        (axis.get_minor_ticks(), axis.get_minorticklocs())):
        for tick, loc in zip(ticks, locs):
            if lo - slack <= loc <= hi + slack:
                labels += [label for label in (tick.label1, tick.label2)
                           if label.get_visible() and label.get_text().strip()]
    return labels


def _overlap(a: Bbox, b: Bbox, slack: float = 0.5) -> bool:
    return min(a.x1, b.x1) - max(a.x0, b.x0) > slack and min(a.y1, b.y1) - max(a.y0, b.y0) > slack


def _inside(inner: Bbox, outer: Bbox, slack: float = 1.0) -> bool:
    return (inner.x0 >= outer.x0 - slack and inner.x1 <= outer.x1 + slack and inner.y0 >= outer.y0 - slack
            and inner.y1 <= outer.y1 + slack)


def test_figure_fits_the_page(drawn: tuple[Figure, str]) -> None:
    fig, name = drawn
    assert fig.get_figwidth() * DPI <= PAGE_PX, f"{name}: {fig.get_figwidth() * DPI:.0f} px wide"


@pytest.mark.parametrize("name", ["intervals", "process trace"])
def test_saved_png_fits_the_page(name: str, tmp_path: Path) -> None:
    """What the report writes (ReportBuilder.save) is at most as wide as the page."""
    import matplotlib.image

    from hostwire.report.campaign_report import ReportBuilder

    ReportBuilder.save(SimpleNamespace(plots=tmp_path / "plots"), FIGURES[name]("36 points"), "figure")
    height, width = matplotlib.image.imread(tmp_path / "plots" / "figure.png").shape[:2]
    assert width <= PAGE_PX and height <= 1.2 * PAGE_PX


def test_no_tick_labels_overlap(drawn: tuple[Figure, str]) -> None:
    fig, name = drawn
    renderer = fig.canvas.get_renderer()
    for k, ax in enumerate(fig.axes):
        for axis in (ax.xaxis, ax.yaxis):
            labels = _tick_labels(axis)
            boxes = [label.get_window_extent(renderer) for label in labels]
            for i in range(len(boxes)):
                assert _inside(boxes[i], fig.bbox), f"{name}: axes {k} {axis.axis_name} label " \
                                                   f"{labels[i].get_text()!r} outside the figure"
                for j in range(i + 1, len(boxes)):
                    assert not _overlap(boxes[i], boxes[j]), (
                        f"{name}: axes {k} {axis.axis_name} labels {labels[i].get_text()!r} and "
                        f"{labels[j].get_text()!r} overlap")


def test_legends_cover_no_axes(drawn: tuple[Figure, str]) -> None:
    fig, name = drawn
    renderer = fig.canvas.get_renderer()
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    for legend in legends:
        box = legend.get_window_extent(renderer)
        assert _inside(box, fig.bbox), f"{name}: a legend reaches beyond the figure"
        for k, ax in enumerate(fig.axes):
            assert not _overlap(box, ax.bbox, slack=1.0), f"{name}: the legend covers axes {k}"
        handles = legend.legend_handles
        assert len(handles) <= 12, f"{name}: {len(handles)} legend entries"
        colours = [tuple(np.round(_colour(h), 3)) for h in handles]
        assert len(set(colours)) == len(colours), f"{name}: legend entries share a colour"


def _colour(handle: object) -> tuple[float, ...]:
    """A legend entry's colour: a line's, else the face of a patch or of a scatter's markers."""
    import matplotlib.colors as mcolors
    from matplotlib.lines import Line2D

    if isinstance(handle, Line2D):
        return mcolors.to_rgba(handle.get_color())
    face = np.atleast_2d(handle.get_facecolor())
    return tuple(face[0]) if len(face) else (0.0, 0.0, 0.0, 0.0)


@pytest.mark.parametrize("grid", list(GRIDS))
def test_interval_figure_shows_the_tails(grid: str) -> None:
    """A log share axis (the tails are the point) and a handful of coloured points; the rest grey."""
    import matplotlib.colors as mcolors
    import matplotlib.pyplot as plt

    fig = plots.plot_interval_distributions(interval_hists(grid))
    try:
        for ax in fig.axes:
            assert ax.get_yscale() == "log" and ax.get_xscale() == "log"
            colours = {mcolors.to_hex(line.get_color()) for line in ax.get_lines()}
            assert len(colours - {mcolors.to_hex("0.6")}) <= 5
    finally:
        plt.close(fig)


@pytest.mark.parametrize("grid", list(GRIDS))
def test_heatmap_values_fit_their_cells(grid: str) -> None:
    import matplotlib.pyplot as plt

    jain = summary(grid, False).pivot_table(index="background", columns="senders", values="jain")
    fig = plots.plot_jain_heatmap(jain, "Jain's index (today)")
    fig.set_dpi(DPI)
    try:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        ax = fig.axes[0]
        texts = [t for t in ax.texts if t.get_text()]
        assert len(texts) == jain.size
        for text in texts:
            x, y = text.get_position()
            corner = ax.transData.transform([(x - 0.5, y - 0.5), (x + 0.5, y + 0.5)])
            cell = Bbox.from_extents(*corner.min(axis=0), *corner.max(axis=0))
            assert _inside(text.get_window_extent(renderer), cell, slack=0.0), text.get_text()
    finally:
        plt.close(fig)


def test_log_ticks_label_a_narrow_view_without_minor_labels() -> None:
    """A view of less than a decade (frame intervals of 1.0 to 1.6 ms) gets a few distinct
    labelled major ticks and no labelled minor tick."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4, 3))
    try:
        ax.plot([1.0, 1.6], [1, 2])
        figure.log_axis(ax.xaxis)
        ax.set_xlim(1.0, 1.6)
        fig.canvas.draw()
        major = [t.get_text() for t in ax.xaxis.get_majorticklabels() if t.get_text()]
        assert len(major) >= 2 and len(set(major)) == len(major)
        assert not any(t.get_text() for t in ax.xaxis.get_minorticklabels())
    finally:
        plt.close(fig)


@pytest.mark.parametrize(("lo", "hi", "expected"), [
    (0.5, 2.5, [0.5, 1.0, 2.0]), (1e-3, 1e3, [1e-3, 1e-2, 1e-1, 1.0, 1e1, 1e2, 1e3]), (3.0, 8.0, [3, 4, 5, 6, 7, 8])])
def test_log_ticks(lo: float, hi: float, expected: list[float]) -> None:
    assert np.allclose(figure.LogTicks().tick_values(lo, hi), expected)
