"""The zero-loss contract over chunks of time-ordered data frames (hostwire.metrics.contract), for
an integral cell time and T >= the cell time (the grid of every default contract).

No cell is made: a frame's cells are back to back, so the recursion c_j = max(a_j, c_(j-1) + D)
is taken per frame (its first cell at J D + max over earlier frames k of (a_k - J_k D), J the cell
index; its last n - 1 cells later) and a busy period breaks only between two frames. tau_min(T)
needs only each busy period's first and last cell (hostwire.metrics.contract.tau_min_cells);
per stream and T the running maximum of the firsts and the largest drop are carried across
chunks, and a chunk's last frame stays pending until the next frame says whether its period
ended. Two passes: the mean cell rates (they set the SCR grid), then every T of the grid at once."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from hostwire.errors import InputError
from hostwire.metrics.cells import cells_per_frame
from hostwire.metrics.chunked.quantiles import by_group
from hostwire.metrics.contract import curve_of, scr_grid, with_average
from hostwire.metrics.window import require_rows
from hostwire.window import Window
from hostwire.read.pcapchunks import Chunk

NO_VALUE = np.iinfo(np.int64).min


@dataclass
class StreamCells:
    """One stream's cell recursion carried across chunks, and per T the running top and tau."""

    d: int
    frame_count: int = 0
    cells: int = 0              # cells so far (the next frame's first cell index)
    u: int = NO_VALUE           # max over frames so far of a - J D
    first_c: int | None = None  # stamp of the stream's first cell
    last_c: int = 0             # stamp of its last cell so far
    last_j: int = -1            # index of its last cell so far
    ts: list[int | float] = field(default_factory=list)
    top: list[int | float] = field(default_factory=list)
    tau: list[int | float] = field(default_factory=list)

    def frames(self, a: np.ndarray, ip_len: np.ndarray, encap: int) -> tuple[np.ndarray, ...]:
        """Per frame: first cell stamp, last cell stamp, first cell index, last cell index; and
        which frames open a busy period."""
        n = cells_per_frame(ip_len, encap)
        j = self.cells + np.concatenate([[0], np.cumsum(n)[:-1]])
        u = np.maximum(np.maximum.accumulate(a - j * self.d), self.u)
        cf = j * self.d + u
        cl = cf + (n - 1) * self.d
        jl = j + n - 1
        before = np.concatenate([[self.last_c], cl[:-1]])
        opens = cf - before > self.d
        if self.first_c is None:
            opens[0] = True
            self.first_c = int(cf[0])
        self.cells = int(jl[-1]) + 1
        self.u = int(u[-1])
        return cf, cl, j, jl, opens

    def feed(self, a: np.ndarray, ip_len: np.ndarray, encap: int) -> None:
        self.frame_count += len(a)
        had_pending = self.last_j >= 0
        pending_c, pending_j = self.last_c, self.last_j
        cf, cl, j, jl, opens = self.frames(a, ip_len, encap)
        first_pos = np.flatnonzero(opens)
        # A period ends just before each opening frame: the period before the k-th opening began
        # at the (k-1)-th, or in an earlier chunk for k = 0 (at position 0: the carried frame).
        open_c, open_j = cf[first_pos], j[first_pos]
        closes = first_pos[1:] - 1
        close_c, close_j = cl[closes], jl[closes]
        head = len(first_pos) == 0 or first_pos[0] > 0  # the chunk starts inside an open period
        head_pos = (first_pos[0] if len(first_pos) else len(a)) - 1
        carried = had_pending and not head
        exact = all(isinstance(t, int) for t in self.ts)
        run = np.empty(len(open_c), dtype=np.int64 if exact else np.float64)
        drop = np.empty(len(close_c), dtype=run.dtype)
        for i, t in enumerate(self.ts):
            top, tau = self.top[i], self.tau[i]
            if carried:
                tau = max(tau, top - (pending_c - pending_j * t))
            if head and head_pos >= 0 and len(first_pos):
                tau = max(tau, top - (cl[head_pos] - jl[head_pos] * t).item())
            if len(first_pos):
                # the running top of the openings, the carried top folded into the first
                np.multiply(open_j, t, out=run, casting="unsafe")
                np.subtract(open_c, run, out=run, casting="unsafe")
                run[0] = max(run[0].item(), top)
                if not np.greater_equal(run[1:], run[:-1]).all():  # rising already (steady traffic): its own maximum
                    np.maximum.accumulate(run, out=run)
                if len(closes):
                    np.multiply(close_j, t, out=drop, casting="unsafe")
                    np.subtract(drop, close_c, out=drop, casting="unsafe")
                    np.add(drop, run[:-1], out=drop)  # top before each close - the close's value
                    tau = max(tau, drop.max().item())
                top = max(top, run[-1].item())
            self.top[i], self.tau[i] = top, tau
        self.last_c, self.last_j = int(cl[-1]), int(jl[-1])

    def finish(self) -> list[int | float]:
        """tau_min at each T (the last frame closes the last busy period)."""
        out = []
        for i, t in enumerate(self.ts):
            if self.cells < 2:
                out.append(0 if isinstance(t, int) else 0.0)
                continue
            tau = max(self.tau[i], self.top[i] - (self.last_c - self.last_j * t))
            out.append(max(0, int(tau)) if isinstance(t, int) else max(0.0, float(tau)))
        return out


def _per_stream(chunks: Iterable[Chunk], state: list[StreamCells], encap: int) -> None:
    for chunk in chunks:
        order, bounds = by_group(chunk["stream"], len(state))
        t, ip_len = chunk["t_ns"], chunk["ip_len"].astype(np.int64)
        for i in np.flatnonzero(np.diff(bounds)).tolist():
            part = order[bounds[i]:bounds[i + 1]]
            state[i].feed(t[part], ip_len[part], encap)


def _states(names: list[str], d: int, ts: list[int | float]) -> list[StreamCells]:
    low = [float("-inf") if isinstance(t, float) else NO_VALUE for t in ts]
    return [StreamCells(d=d, ts=list(ts), top=list(low), tau=[0 if isinstance(t, int) else 0.0 for t in ts])
            for _ in names]


def tau_table(passes: Callable[[], Iterable[Chunk]], names: list[str], d: int, encap: int,
              ts: list[int | float], window: Window) -> tuple[dict[str, list[int | float]], dict[str, float]]:
    """({stream: tau_min at each T}, {stream: mean cell rate per ns}) of the streams with cells;
    the in-memory path's error for fewer than two data frames in the window."""
    state = _states(names, d, ts)
    _per_stream(passes(), state, encap)
    frames = sum(s.frame_count for s in state)
    require_rows(pd.DataFrame(index=range(min(frames, 2))), "data frames", window, at_least=2)
    taus = {name: s.finish() for name, s in zip(names, state) if s.first_c is not None}
    rates = {name: s.cells / (float(s.last_c - s.first_c) + float(d))
             for name, s in zip(names, state) if s.first_c is not None}
    return taus, rates


def df_contract(passes: Callable[[], Iterable[Chunk]], names: list[str], window: Window, d: int, encap: int,
                pcr_cells_s: float, points: int, scr_min_cells_s: float | None) -> tuple[pd.DataFrame, dict[str, float]]:
    """(hostwire.metrics.contract.df_contract's table, each stream's tau_min at T_p for the CDVT
    check). Two passes: the mean rates and tau at T_p, then the grid."""
    t_p = 1e9 / pcr_cells_s
    t_pcr: int | float = int(t_p) if float(t_p).is_integer() else t_p
    if t_pcr < d:
        raise NotImplementedError("a PCR above the line cell rate")
    first, rates = tau_table(passes, names, d, encap, [t_pcr], window)
    if not rates:
        raise InputError("no stream with cells in the window")
    lo = min(rates.values()) if scr_min_cells_s is None else scr_min_cells_s / 1e9
    grid = scr_grid(lo, t_p, points)
    if len(grid) and int(grid.min()) < d:
        raise NotImplementedError("an SCR above the line cell rate")
    taus, _ = tau_table(passes, names, d, encap, [int(t) for t in grid], window)
    parts = []
    for name, values in taus.items():
        by_t = dict(zip([int(t) for t in grid], values))
        parts.append(curve_of(name, by_t.__getitem__, t_p, grid))
    return with_average(pd.concat(parts, ignore_index=True), len(taus)), {n: float(v[0]) for n, v in first.items()}
