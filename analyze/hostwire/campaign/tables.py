"""The campaign's own tables, from its summary (one row per run): what the report shows beside
the paper, computed here so that the report only draws and writes. Runs compare like for like
only within one setup (hostwire.metrics.regime.setup_label)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from hostwire.campaign.repetitions import relative_half_width
from hostwire.metrics.regime import setup_label
from hostwire.stats import ACCURACY_METRICS, compare_sets
from hostwire.timeline.gaps import CAUSES


def setups(summary: pd.DataFrame) -> pd.Series:
    """Each run's setup: the summary's column, else made from the run-point columns of a summary
    written before it had one."""
    if "setup" in summary.columns:
        return summary["setup"].astype(str)
    columns = [c for c in ("link_rate", "link_qdisc", "sender_cpu_share") if c in summary.columns]
    if not columns:
        return pd.Series("", index=summary.index)
    return summary[columns].apply(lambda row: setup_label(row.to_dict()), axis=1).astype(str)


def df_twenty_against_one(summary: pd.DataFrame) -> pd.DataFrame:
    """Per setup with runs of 1 and of 20 senders and no background process: their mean goodput
    and the share, the paper's figure under the paper's conditions (columns setup, one_bit_s,
    twenty_bit_s, share)."""
    s = summary[summary["goodput_bit_s"].notna() & (summary["background"] == 0)]
    rows = []
    for setup, part in s.groupby(setups(s), sort=False):
        one = part[part["senders"] == 1]["goodput_bit_s"].mean()
        twenty = part[part["senders"] == 20]["goodput_bit_s"].mean()
        if np.isfinite(one) and np.isfinite(twenty) and one > 0:
            rows.append((setup, one, twenty, twenty / one))
    return pd.DataFrame(rows, columns=["setup", "one_bit_s", "twenty_bit_s", "share"])


def df_one_sender_intervals(summary: pd.DataFrame) -> pd.DataFrame:
    """Per setup, the frame intervals at the paper's point (one sender, no background process):
    columns setup, limit (what limited those runs), p50_ms, p99_ms, max_ms."""
    single = summary[(summary["senders"] == 1) & (summary["background"] == 0)]
    rows = []
    if "frame_gap_p50_ns" in single:
        for setup, part in single.groupby(setups(single), sort=False):
            limit = ", ".join(sorted(set(part["limit"].astype(str)))) if "limit" in part else "not measured"
            rows.append((setup, limit, part["frame_gap_p50_ns"].mean() / 1e6, part["frame_gap_p99_ns"].mean() / 1e6,
                         part["frame_gap_max_ns"].max() / 1e6))
    return pd.DataFrame(rows, columns=["setup", "limit", "p50_ms", "p99_ms", "max_ms"])


@dataclass
class JainTable:
    """Jain's index of one setup as the paper's table 3 (rows N, columns M, mean over
    repetitions), with the windows and limits of its runs and its agreement with the paper over
    the grid points both have (r NaN with fewer than 3 or no spread)."""

    setup: str
    table: pd.DataFrame
    windows_s: list[float]
    limits: dict[str, int]
    common_points: int
    pearson_r: float
    mean_difference: float


def jain_tables(summary: pd.DataFrame, paper: pd.DataFrame) -> list[JainTable]:
    """One JainTable per setup, beside `paper` (the paper's table 3: rows N, columns M)."""
    out = []
    for setup, part in summary.groupby(setups(summary), sort=False):
        today = part.pivot_table(index="background", columns="senders", values="jain", aggfunc="mean")
        if today.empty:
            continue
        common = pd.merge(today.stack().rename("today").reset_index(), paper.stack().rename("paper").reset_index(),
                          on=["background", "senders"]).dropna()
        r = diff = np.nan
        if len(common) >= 3 and common["today"].std() > 0:
            r = float(np.corrcoef(common["today"], common["paper"])[0, 1])
            diff = float((common["today"] - common["paper"]).mean())
        out.append(JainTable(str(setup), today,
                             sorted(part["duration_s"].dropna().unique().tolist()) if "duration_s" in part else [],
                             part["limit"].value_counts().to_dict() if "limit" in part else {},
                             len(common), r, diff))
    return out


def df_gap_cause_shares(summary: pd.DataFrame) -> pd.DataFrame:
    """Per setup and grid point: the long gaps, their time, and each cause's share of it, weighted
    by each run's gap time (columns setup, senders, background, gaps, gap_s, one per cause), the
    setups in the summary's order, the points by M, then N."""
    columns = [f"gap_{c}_share" for c in CAUSES]
    if "gap_time_ns" not in summary or not set(columns) <= set(summary.columns):
        return pd.DataFrame(columns=["setup", "senders", "background", "gaps", "gap_s", *CAUSES])
    have = summary[(summary["gap_time_ns"].fillna(0) > 0) & (summary["senders"] > 0)]
    labels = setups(have)
    time_per_cause = have[columns].mul(have["gap_time_ns"], axis=0).assign(
        setup=labels, senders=have["senders"], background=have["background"], gap_time_ns=have["gap_time_ns"],
        gaps=have["gaps"])
    per_point = time_per_cause.groupby(["setup", "senders", "background"], sort=False).sum()
    order = {setup: k for k, setup in enumerate(dict.fromkeys(labels))}
    per_point = per_point.sort_index(level=["senders", "background"]).sort_index(
        level="setup", key=lambda level: level.map(order), sort_remaining=False)
    shares = per_point[columns].div(per_point["gap_time_ns"], axis=0)
    shares.columns = list(CAUSES)
    table = shares.reset_index()
    table.insert(3, "gaps", per_point["gaps"].astype(int).to_numpy())
    table.insert(4, "gap_s", per_point["gap_time_ns"].to_numpy() / 1e9)
    return table


def df_collector_accuracy(summary: pd.DataFrame) -> tuple[pd.DataFrame, str] | None:
    """The MSHN method over a campaign that varies the collector set: per set, each metric's mean
    paired difference from the baseline's runs (same grid point and repetition) with its 95 %
    interval and the verdict (hostwire.stats.compare_sets), and the baseline's name; an empty
    table when the sets have different numbers of runs; None when the campaign does not vary
    the collectors."""
    s = summary
    if "collectors" not in s or s["collectors"].nunique() < 2:
        return None
    names = list(dict.fromkeys(s["collectors"].astype(str)))
    baseline = "none" if "none" in names else names[0]
    pair_keys = [c for c in ("senders", "background", "link_rate", "sender_cpu_share", "repetition") if c in s]
    rows: dict[str, list[dict[str, float]]] = {}
    for name in names:
        part = s[s["collectors"].astype(str) == name].sort_values(pair_keys, kind="stable")
        rows[name] = [{m: float(r[m]) if m in part and pd.notna(r[m]) else float("nan") for m in ACCURACY_METRICS}
                      for _, r in part.iterrows()]
        if "goodput_app_bit_s" in part:  # the receivers' figure: the same with and without a capture
            for row, value in zip(rows[name], part["goodput_app_bit_s"]):
                row["goodput_bit_s"] = float(value)
    if len({len(v) for v in rows.values()}) != 1:
        return pd.DataFrame(), baseline
    table = pd.DataFrame(compare_sets(rows, baseline))
    return (table[table["low"].notna()] if "low" in table else table), baseline


def df_point_intervals(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per grid point recorded more than once: its set-up, M, N, n, and the mean, standard
    deviation and 95 % interval of goodput (Mbit/s) and of Jain's index (campaign.repetitions), the
    goodput interval's half-width relative to the mean beside them. Empty when no point repeats."""
    if "goodput_n" not in summary or not (summary["goodput_n"].fillna(0) > 1).any():
        return pd.DataFrame()
    points = summary[summary["goodput_n"] > 1].assign(setup=setups(summary)).drop_duplicates("point_key")
    out = pd.DataFrame({
        "setup": points["setup"], "M": points["senders"].astype(int), "N": points["background"].astype(int),
        "n": points["goodput_n"].astype(int),
        "goodput_mean_mbps": points["goodput_mean_bit_s"] / 1e6, "goodput_sd_mbps": points["goodput_sd_bit_s"] / 1e6,
        "goodput_ci95_mbps": [f"{lo / 1e6:.2f}-{hi / 1e6:.2f}" for lo, hi in
                              zip(points["goodput_ci95_low_bit_s"], points["goodput_ci95_high_bit_s"])],
        "goodput_ci95_half_pct": 100 * relative_half_width(
            points["goodput_ci95_low_bit_s"], points["goodput_ci95_high_bit_s"], points["goodput_mean_bit_s"]),
    })
    if "jain_mean" in points:
        out["jain_mean"] = points["jain_mean"]
        out["jain_ci95"] = [f"{lo:.4f}-{hi:.4f}" for lo, hi in zip(points["jain_ci95_low"], points["jain_ci95_high"])]
    return out.sort_values(["setup", "M", "N"]).reset_index(drop=True)
