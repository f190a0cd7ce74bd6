"""Each grid point's repetitions summed up in summary.parquet: per point (the runs whose point is
the same), n, the mean, the standard deviation and the 95 % confidence interval of the mean
(Student's t with n - 1 degrees of freedom) of goodput and of Jain's index, on every row of the
point."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pandas as pd

from hostwire.stats import t975

MEASURES = {"goodput": ("goodput_bit_s", "_bit_s"), "jain": ("jain", "")}


def point_key(point: dict[str, Any]) -> str:
    return json.dumps(point, sort_keys=True)


def confidence(values: np.ndarray) -> tuple[int, float, float, float, float]:
    """n, mean, standard deviation and the 95 % interval's ends of the finite values (NaN for
    what fewer values cannot give)."""
    v = values[np.isfinite(values)]
    n = len(v)
    if n == 0:
        return 0, math.nan, math.nan, math.nan, math.nan
    mean = float(v.mean())
    if n < 2:
        return n, mean, math.nan, math.nan, math.nan
    sd = float(v.std(ddof=1))
    half = t975(n - 1) * sd / math.sqrt(n)
    return n, mean, sd, mean - half, mean + half


def relative_half_width(low: Any, high: Any, mean: Any) -> Any:
    """The 95 % interval's half-width over its mean (scalars or columns alike): how well a point's
    mean is known, as --until-ci, the report's table and the model's floor read it."""
    return (high - low) / 2 / mean


def with_point_stats(summary: pd.DataFrame) -> pd.DataFrame:
    """summary with, per measure, {m}_n, {m}_mean, {m}_sd, {m}_ci95_low and {m}_ci95_high
    (goodput's with the _bit_s unit), the same on every row of a point."""
    if "point_key" not in summary or summary.empty:
        return summary
    out = summary.copy()
    for name, (column, unit) in MEASURES.items():
        if column not in out:
            continue
        stats = {key: confidence(pd.to_numeric(g[column], errors="coerce").to_numpy(np.float64))
                 for key, g in out.groupby("point_key", sort=False)}
        for i, part in enumerate(("n", "mean", "sd", "ci95_low", "ci95_high")):
            label = f"{name}_{part}" + (unit if part != "n" else "")
            out[label] = out["point_key"].map({k: s[i] for k, s in stats.items()})
    return out
