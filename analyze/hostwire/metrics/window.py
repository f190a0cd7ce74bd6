"""The analysis window (DESIGN.md section 8): on a run, the logging window; on a bare pcap, from its
first to its last frame. Both ends are inclusive; bins start at the window's start."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from hostwire.errors import InputError, UsageError


@dataclass(frozen=True)
class Window:
    start_ns: int
    end_ns: int

    @property
    def length_ns(self) -> int:
        return self.end_ns - self.start_ns

    def describe(self) -> str:
        return f"[{self.start_ns}, {self.end_ns}] ns ({self.length_ns / 1e9:.6f} s)"


def frame_window(frames: pd.DataFrame) -> Window:
    """From the first to the last frame of a capture."""
    if len(frames) == 0:
        raise InputError("the capture has no frames, so it has no window")
    t = frames["t_ns"].to_numpy()
    return Window(int(t.min()), int(t.max()))


def narrow(default: Window, from_s: float | None, to_s: float | None) -> Window:
    """The part of `default` between from_s and to_s seconds after its start (--from, --to)."""
    start, end = default.start_ns, default.end_ns
    if from_s is not None:
        if not (math.isfinite(from_s) and 0 <= from_s <= 9.0e9):
            raise UsageError(f"--from {from_s}: expected a finite number of seconds >= 0 after the window start")
        start = default.start_ns + int(round(from_s * 1e9))
    if to_s is not None:
        if not (math.isfinite(to_s) and 0 <= to_s <= 9.0e9):
            raise UsageError(f"--to {to_s}: expected a finite number of seconds >= 0 after the window start")
        end = min(end, default.start_ns + int(round(to_s * 1e9)))
    if (from_s is not None or to_s is not None) and end <= start:
        raise UsageError(f"empty window: --from/--to leave nothing of {default.describe()}")
    return Window(start, end)


def clip(df: pd.DataFrame, window: Window, column: str = "t_ns") -> pd.DataFrame:
    """The rows of df whose `column` lies within the window (both ends included)."""
    t = df[column].to_numpy()
    keep = (t >= window.start_ns) & (t <= window.end_ns)
    return df[keep] if not keep.all() else df


def require_rows(df: pd.DataFrame, what: str, window: Window, at_least: int = 1) -> None:
    if len(df) < at_least:
        have = "no" if len(df) == 0 else f"only {len(df)}"
        what = what if len(df) == 0 else what.replace("frames", "frame(s)").replace("writes", "write(s)")
        raise InputError(f"{have} {what} in the window {window.describe()}; need at least {at_least}")


def as_int64(values: object) -> np.ndarray:
    return np.asarray(values, dtype=np.int64)
