"""Goodput (DESIGN.md section 8): bytes delivered to the receivers within the window divided by the
window length; at campaign level, goodput against the mix M / (M + N) with the Pearson correlation
and a least-squares line."""

from __future__ import annotations

import numpy as np
import pandas as pd

from hostwire.errors import InputError
from hostwire.metrics.window import Window

COLUMNS = ["stream", "bytes", "seconds", "bit_s"]


def goodput_bps(nbytes: float, window: Window) -> float:
    if window.length_ns <= 0:
        raise InputError(f"goodput: the window {window.describe()} has no length")
    return nbytes * 8 * 1e9 / window.length_ns


def df_goodput(per_stream: pd.Series, window: Window) -> pd.DataFrame:
    """One row per stream and `all`: bytes, seconds (window length), bit_s."""
    seconds = window.length_ns / 1e9
    rows = [(str(n), int(b), seconds, goodput_bps(b, window)) for n, b in per_stream.items()]
    total = int(per_stream.sum())
    rows.append(("all", total, seconds, goodput_bps(total, window)))
    return pd.DataFrame(rows, columns=COLUMNS)


def goodput_against_mix(senders: np.ndarray, background: np.ndarray, goodput: np.ndarray) -> dict[str, float]:
    """Pearson r of goodput against M / (M + N) (M senders, N background processes) and the line
    goodput = slope * mix + intercept. Needs at least 3 points and a mix that varies."""
    m = np.asarray(senders, dtype=np.float64)
    n = np.asarray(background, dtype=np.float64)
    g = np.asarray(goodput, dtype=np.float64)
    if not (len(m) == len(n) == len(g)):
        raise InputError("goodput against mix: senders, background and goodput differ in length")
    if len(g) < 3:
        raise InputError(f"goodput against mix needs at least 3 runs, got {len(g)}")
    if np.any(m + n <= 0):
        raise InputError("goodput against mix: a run has no process")
    mix = m / (m + n)
    if np.ptp(mix) == 0 or np.ptp(g) == 0:
        raise InputError("goodput against mix: the mix or the goodput does not vary, no correlation")
    r = float(np.corrcoef(mix, g)[0, 1])
    slope, intercept = np.polyfit(mix, g, 1)
    return {"runs": int(len(g)), "pearson_r": r, "slope_bit_s": float(slope), "intercept_bit_s": float(intercept)}
