"""The metrics' side of the analysis window (hostwire.window.Window): a bare pcap's window from its
first to its last frame, the rows of a table inside one, and the rows a metric needs there. Bins
start at the window's start."""

from __future__ import annotations

import numpy as np
import pandas as pd

from hostwire.errors import InputError
from hostwire.window import Window


def frame_window(frames: pd.DataFrame) -> Window:
    """From the first to the last frame of a capture."""
    if len(frames) == 0:
        raise InputError("the capture has no frames, so it has no window")
    t = frames["t_ns"].to_numpy()
    return Window(int(t.min()), int(t.max()))


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
