"""On/off periods and bursts (DESIGN.md section 8): an off period is a frame gap >= theta (default
20 x the stream's median frame interval); a burst is the run of frames between off periods."""

from __future__ import annotations

import numpy as np
import pandas as pd

from hostwire.errors import InputError, UsageError
from hostwire.metrics.streams import data_frames
from hostwire.metrics.window import clip, require_rows
from hostwire.window import Window

DEFAULT_FACTOR = 20.0
STAT_NAMES = (("mean", None), ("p50", 0.50), ("p99", 0.99), ("max", 1.0))
COLUMNS = (["stream", "theta_ns", "frames", "bursts"]
           + [f"frames_{s}" for s, _ in STAT_NAMES] + [f"bytes_{s}" for s, _ in STAT_NAMES]
           + [f"on_{s}_ns" for s, _ in STAT_NAMES] + [f"off_{s}_ns" for s, _ in STAT_NAMES]
           + ["on_total_ns", "off_total_ns", "on_off_ratio"])


def split_bursts(t_ns: np.ndarray, nbytes: np.ndarray, theta_ns: float) -> pd.DataFrame:
    """The bursts of one time-ordered frame sequence: columns start_ns, end_ns, frames, bytes,
    off_before_ns (the off period that precedes the burst, 0 for the first)."""
    if len(t_ns) == 0:
        return pd.DataFrame(columns=["start_ns", "end_ns", "frames", "bytes", "off_before_ns"])
    gap = np.diff(t_ns)
    brk = np.concatenate([[True], gap >= theta_ns])
    starts = np.flatnonzero(brk)
    ends = np.concatenate([starts[1:], [len(t_ns)]]) - 1
    frames = np.diff(np.concatenate([starts, [len(t_ns)]]))
    csum = np.concatenate([[0], np.cumsum(nbytes)])
    off = np.concatenate([[0], t_ns[starts[1:]] - t_ns[ends[:-1]]])
    return pd.DataFrame({
        "start_ns": t_ns[starts], "end_ns": t_ns[ends], "frames": frames,
        "bytes": csum[ends + 1] - csum[starts], "off_before_ns": off,
    })


def _stats(values: np.ndarray, prefix: str, suffix: str = "") -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for name, q in STAT_NAMES:
        key = f"{prefix}_{name}{suffix}"
        if len(values) == 0:
            out[key] = None
        elif q is None:
            out[key] = float(values.mean())
        else:
            out[key] = float(np.quantile(values, q))
    return out


def summarize_bursts(name: str, t_ns: np.ndarray, nbytes: np.ndarray, theta_ns: float) -> dict[str, object]:
    b = split_bursts(t_ns, nbytes, theta_ns)
    on = (b["end_ns"] - b["start_ns"]).to_numpy().astype(np.int64)
    off = b["off_before_ns"].to_numpy()[1:].astype(np.int64)
    row: dict[str, object] = {"stream": name, "theta_ns": float(theta_ns), "frames": int(len(t_ns)),
                              "bursts": int(len(b))}
    row.update(_stats(b["frames"].to_numpy(), "frames"))
    row.update(_stats(b["bytes"].to_numpy(), "bytes"))
    row.update(_stats(on, "on", "_ns"))
    row.update(_stats(off, "off", "_ns"))
    row["on_total_ns"] = int(on.sum())
    row["off_total_ns"] = int(off.sum())
    row["on_off_ratio"] = float(on.sum() / off.sum()) if off.sum() > 0 else float("inf")
    return row


def theta_for(t_ns: np.ndarray, factor: float, theta_ns: float | None) -> float:
    if theta_ns is not None:
        if theta_ns <= 0:
            raise UsageError(f"off threshold {theta_ns} ns: expected > 0")
        return float(theta_ns)
    if factor <= 0:
        raise UsageError(f"off threshold factor {factor}: expected > 0")
    gaps = np.diff(t_ns)
    med = float(np.median(gaps)) if len(gaps) else 0.0
    # A median gap of 0 (frames stamped together) would make every gap an off period.
    return factor * max(med, 1.0)


def df_bursts(labelled: pd.DataFrame, window: Window, factor: float = DEFAULT_FACTOR,
              theta_ns: float | None = None, aggregate: bool = True) -> pd.DataFrame:
    """One row per stream (and `all`, the merged data frames with their own threshold), COLUMNS."""
    data = clip(data_frames(labelled), window)
    require_rows(data, "data frames", window, at_least=2)
    t = data["t_ns"].to_numpy().astype(np.int64)
    nbytes = data["payload_len"].to_numpy().astype(np.int64)
    codes = data["stream"].cat.codes.to_numpy()
    cats = data["stream"].cat.categories.astype(str)
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(cats) + 1))
    rows = []
    for i, name in enumerate(cats):  # per stream; the work inside is vectorized
        sel = order[bounds[i]:bounds[i + 1]]
        if len(sel) == 0:
            continue
        rows.append(summarize_bursts(name, t[sel], nbytes[sel], theta_for(t[sel], factor, theta_ns)))
    if aggregate:
        rows.append(summarize_bursts("all", t, nbytes, theta_for(t, factor, theta_ns)))
    if not rows:
        raise InputError("no stream has data frames in the window")
    return pd.DataFrame(rows, columns=COLUMNS)
