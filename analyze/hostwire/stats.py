"""Statistics that more than one part of hostwire uses: the paired estimate of an added cost (or
of a ratio) with its percentile-bootstrap interval (hostwire overhead), and the MSHN comparison of collector sets,
run for run, with Student's t interval of the mean difference (hostwire overhead --accuracy, the
campaign report)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


BOOTSTRAP_RESAMPLES = 4000


@dataclass
class Estimate:
    """The added cost per unit from paired rounds: median of the per-round differences and its 95 %
    bootstrap interval (in the unit of the differences)."""

    median: float
    low: float
    high: float
    mean: float
    rounds: int

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high


def paired_estimate(config: Sequence[float], bare: Sequence[float], per_rt: float = 1.0,
                    seed: int = 1997) -> Estimate:
    """Added cost per unit of `config` over `bare`, the two measured in the same rounds (round i
    of one paired with round i of the other): d_i = (config_i - bare_i) / per_rt; the median of d
    with a 95 % percentile-bootstrap interval (resampling the rounds; fixed seed: the same data
    give the same interval). Rounds where either value is missing (NaN) are left out."""
    c = np.asarray(config, dtype=float)
    b = np.asarray(bare, dtype=float)
    if c.shape != b.shape:
        raise ValueError(f"paired rounds differ in number: {len(c)} and {len(b)}")
    d = (c - b) / per_rt
    d = d[np.isfinite(d)]
    if len(d) == 0:
        return Estimate(math.nan, math.nan, math.nan, math.nan, 0)
    if len(d) == 1:
        return Estimate(float(d[0]), math.nan, math.nan, float(d[0]), 1)
    rng = np.random.default_rng(seed)
    resampled = np.median(d[rng.integers(0, len(d), size=(BOOTSTRAP_RESAMPLES, len(d)))], axis=1)
    low, high = np.percentile(resampled, [2.5, 97.5])
    return Estimate(float(np.median(d)), float(low), float(high), float(np.mean(d)), int(len(d)))


def paired_ratio(config: Sequence[float], base: Sequence[float], seed: int = 1997) -> Estimate:
    """The ratio of `config` to `base` measured in the same rounds: r_i = config_i / base_i, the
    median of r with a 95 % percentile-bootstrap interval (as paired_estimate). Rounds where either
    value is missing (NaN) or base is not positive are left out."""
    c = np.asarray(config, dtype=float)
    b = np.asarray(base, dtype=float)
    if c.shape != b.shape:
        raise ValueError(f"paired rounds differ in number: {len(c)} and {len(b)}")
    ok = np.isfinite(c) & np.isfinite(b) & (b > 0)
    ratios = np.full(c.shape, np.nan)
    ratios[ok] = c[ok] / b[ok]
    return paired_estimate(ratios, np.zeros_like(ratios), 1.0, seed)


ACCURACY_METRICS = ("goodput_bit_s", "jain", "idc_100ms", "sieve_rounds_per_s", "switches_per_s")


# Student's t, 97.5 % quantile, for 1..30 degrees of freedom (beyond: 1.96 is within 2 %).
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
         2.045, 2.042)


def t975(df: int) -> float:
    return _T975[df - 1] if 1 <= df <= len(_T975) else 1.96


def t_interval(diffs: Sequence[float]) -> tuple[float, float, float]:
    """Mean of paired differences and its 95 % t-interval (NaN with fewer than two)."""
    d = np.asarray(diffs, dtype=float)
    d = d[np.isfinite(d)]
    if len(d) < 2:
        return (float(d.mean()) if len(d) else math.nan, math.nan, math.nan)
    half = t975(len(d) - 1) * d.std(ddof=1) / math.sqrt(len(d))
    return float(d.mean()), float(d.mean() - half), float(d.mean() + half)


def compare_sets(rows: dict[str, list[dict[str, Any]]], baseline: str = "none") -> list[dict[str, Any]]:
    """Per collector set and metric: the mean paired difference (set - baseline of the same
    repetition) with its 95 % t-interval; a set "changes the answer" when any interval excludes
    zero, else it is "within noise" (a metric measured in too few pairs is left out)."""
    base = rows[baseline]
    out = []
    for name, runs in rows.items():
        if name == baseline:
            continue
        changed, compared = [], []
        for metric in ACCURACY_METRICS:
            diffs = [r[metric] - b[metric] for r, b in zip(runs, base)]
            mean, low, high = t_interval(diffs)
            known = [b[metric] for b in base if math.isfinite(b[metric])]
            ref = float(np.mean(known)) if known else math.nan
            if math.isfinite(low):
                compared.append(metric)
                if not low <= 0 <= high:
                    changed.append(metric)
            out.append({"collectors": name, "metric": metric, "baseline_mean": float(ref), "diff": mean,
                        "low": low, "high": high})
        verdict = ("changes the answer (" + ", ".join(changed) + ")" if changed else
                   "within noise" if compared else "not enough runs")
        for row in out:
            if row["collectors"] == name:
                row["verdict"] = verdict
    return out
