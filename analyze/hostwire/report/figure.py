"""The report's figure frame: the page's size and resolution, figures laid out by matplotlib's
constrained layout with one legend outside the axes, panels by number of background processes,
and log axes labelled only where labels cannot crowd (`log_axis`: decades, else 1-2-5, else
every leading digit; minor ticks never)."""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")
logging.getLogger("matplotlib").setLevel(logging.WARNING)  # its font cache notices are not hostwire's

import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker as mticker  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.axis import Axis  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

DPI = 110             # the report saves its PNGs at this resolution
PAGE_WIDTH_PX = 1100  # the report's page is at most this wide
WIDE = 9.6            # inches: a figure across the page (1056 px at DPI)
WIDTH, HEIGHT = 7.0, 4.2


def point_label(senders: int, background: int) -> str:
    return f"M={senders} N={background}"


# A figure's curves are keyed by a campaign's grid points (M, N) or, in the report of one run, by
# the names of that run's series (its streams and "all"): text.
Key = tuple[int, int] | str


def is_grid_point(key: object) -> bool:
    return isinstance(key, tuple) and len(key) == 2


def key_label(key: Key) -> str:
    """A curve's name in a legend: M=.. N=.. for a grid point, else the series' own name."""
    return point_label(*key) if is_grid_point(key) else str(key)


# -- axes ------------------------------------------------------------------------------------------


class LogTicks(mticker.Locator):
    """Major ticks of a log axis that can all be labelled side by side: the decades when at least
    two are in view (every k-th when more than the axis has room for), else 1, 2 and 5 of each
    decade, else every leading digit, else a few evenly spaced values (a view narrower than a
    factor of about 1.2)."""

    SUBS = ((1.0,), (1.0, 2.0, 5.0), tuple(float(d) for d in range(1, 10)))

    def __call__(self) -> Sequence[float]:
        lo, hi = self.axis.get_view_interval()
        return self.tick_values(lo, hi)

    def tick_values(self, vmin: float, vmax: float) -> Sequence[float]:
        lo, hi = sorted((float(vmin), float(vmax)))
        if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= 0:
            return np.array([])
        lo = lo if lo > 0 else hi / 10
        room = max(2, self.axis.get_tick_space()) if self.axis is not None else 9
        exponents = np.arange(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
        for subs in self.SUBS:
            ticks = (10.0 ** exponents[:, None] * np.asarray(subs)[None, :]).ravel()
            inside = ticks[(ticks >= lo * (1 - 1e-9)) & (ticks <= hi * (1 + 1e-9))]
            if len(inside) >= 2:
                if len(subs) == 1 and len(inside) > room:
                    step = math.ceil(len(inside) / room)
                    inside = inside[np.round(np.log10(inside)).astype(int) % step == 0]
                return inside
        linear = mticker.MaxNLocator(nbins=3, steps=[1, 2, 2.5, 5, 10]).tick_values(lo, hi)
        return linear[(linear >= lo) & (linear <= hi)]


class TickLabels(mticker.Formatter):
    """Labels for LogTicks, to at most six significant digits: plain numbers when every tick of
    the axis lies from 0.001 to below 10^5, else powers of ten (a mantissa where not a power)."""

    def __call__(self, x: float, pos: int | None = None) -> str:
        return self._format(x, 1e-3 <= abs(x) < 1e5)

    def format_ticks(self, values: Sequence[float]) -> list[str]:
        plain = all(v == 0 or 1e-3 <= abs(v) < 1e5 for v in values)
        return [self._format(v, plain) for v in values]

    @staticmethod
    def _format(value: float, plain: bool) -> str:
        if value == 0 or not math.isfinite(value):
            return f"{value:g}"
        if plain:
            return np.format_float_positional(value, precision=6, unique=True, fractional=False, trim="-")
        exponent = math.floor(math.log10(abs(value)) + 1e-9)
        mantissa = np.format_float_positional(value / 10.0 ** exponent, precision=3, unique=True, fractional=False,
                                              trim="-")
        return f"$10^{{{exponent}}}$" if mantissa == "1" else f"${mantissa}\\times10^{{{exponent}}}$"


def log_axis(axis: Axis) -> None:
    """Put `axis` on a log scale with LogTicks labelled by TickLabels and unlabelled minor ticks
    (matplotlib's own log formatter labels minor ticks when fewer than two decades are in view,
    and they overlap)."""
    if axis.axis_name == "x":
        axis.axes.set_xscale("log")
    else:
        axis.axes.set_yscale("log")
    axis.set_major_locator(LogTicks())
    axis.set_major_formatter(TickLabels())
    axis.set_minor_locator(mticker.LogLocator(base=10.0, subs=tuple(float(d) for d in range(2, 10)), numticks=99))
    axis.set_minor_formatter(mticker.NullFormatter())


def new_figure(width: float, height: float, **kwargs: Any) -> tuple[Figure, Any]:
    return plt.subplots(figsize=(width, height), layout="constrained", **kwargs)


def outside_legend(fig: Figure, handles: list[Any], title: str | None = None, fontsize: float = 8) -> None:
    """One legend for the whole figure, to the right of its axes."""
    fig.legend(handles=handles, loc="outside right upper", fontsize=fontsize, title=title,
               title_fontsize=fontsize, frameon=False)


def panels_by_background(points: Iterable[tuple[int, int]], row_height: float = 2.3,
                          ) -> tuple[Figure, dict[int, Axes], dict[int, Any]]:
    """Small multiples: one panel per number of background processes N (three to a row, axes
    shared), and a colour per number of senders M, light to dark as M grows."""
    points = sorted(set(points))
    backgrounds = sorted({n for _, n in points})
    senders = sorted({m for m, _ in points})
    columns = min(3, max(1, len(backgrounds)))
    rows = max(1, math.ceil(len(backgrounds) / columns))
    fig, grid = new_figure(WIDE, 0.9 + row_height * rows, nrows=rows, ncols=columns, sharex=True, sharey=True,
                        squeeze=False)
    panels: dict[int, Axes] = {}
    for k, ax in enumerate(grid.flat):
        if k < len(backgrounds):
            panels[backgrounds[k]] = ax
            ax.set_title(f"N = {backgrounds[k]}", fontsize=9)
            continue
        ax.remove()
        above = grid.flat[k - columns] if k >= columns else None
        if above is not None:  # the panel above an empty place shows the x tick labels
            above.xaxis.set_tick_params(labelbottom=True)
    cmap = plt.get_cmap("viridis")
    colours = {m: cmap(0.85 * (1 - i / max(1, len(senders) - 1))) for i, m in enumerate(senders)}
    return fig, panels, colours


SERIES_COLOURS = ("black", "tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink",
                  "tab:olive", "tab:cyan")


class Curves:
    """Where each curve of a small-multiples figure goes and its colour. A campaign's grid points
    (M, N): one panel per number of background processes N and a colour per number of senders M
    (panels_by_background). One run's series (keys that are text): one panel, a colour each, in
    the order given (the first, "all" where the caller puts it first, black)."""

    def __init__(self, keys: Iterable[Key], row_height: float = 2.3) -> None:
        keys = list(dict.fromkeys(keys))
        self.grid = bool(keys) and all(is_grid_point(k) for k in keys)
        if self.grid:
            self.fig, self._panels, self._colours = panels_by_background(keys, row_height)  # type: ignore[arg-type]
        else:
            self.fig, ax = new_figure(WIDE, 0.9 + 1.4 * row_height)
            self._panels = {None: ax}
            self._colours = {k: SERIES_COLOURS[i % len(SERIES_COLOURS)] for i, k in enumerate(keys)}

    def ax(self, key: Key) -> Axes:
        return self._panels[key[1]] if self.grid else self._panels[None]  # type: ignore[index]

    def colour(self, key: Key) -> Any:
        return self._colours[key[0]] if self.grid else self._colours[key]  # type: ignore[index]

    def axes(self) -> list[Axes]:
        return list(self._panels.values())

    def legend(self, extra: Sequence[Any] = ()) -> None:
        """One entry per colour (senders M, or each series), then `extra`."""
        names = sorted(self._colours) if self.grid else list(self._colours)
        handles = [Line2D([], [], color=self._colours[k], lw=1.5, label=str(k)) for k in names]
        outside_legend(self.fig, [*handles, *extra], title="senders M" if self.grid else "stream")


# -- figures ---------------------------------------------------------------------------------------
