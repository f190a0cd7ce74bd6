"""Every run of a campaign beside the model's prediction for its point: model.parquet and
model.csv (one row per run), and the summary line (the share of points within 10 %, the worst
point and why)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from hostwire.campaign.repetitions import relative_half_width
from hostwire.model.calibration import setup_key, setup_of
from hostwire.model.layers import Calibration, predict
from hostwire.model.measure import sender_cpu_wait_share
from hostwire.safewrite import write_with

WITHIN_PCT = 10.0  # the DCE paper's mark: predictions within 10 % of the reference
GRID_COLUMNS = ("run_id", "repetition", "senders", "background", "sender_cpu_share", "link_qdisc", "link_rate",
                "link_queue", "setup")


def error_pct(model: pd.Series, measured: pd.Series) -> pd.Series:
    """(model - measured) / measured in %; nan where nothing was measured."""
    measured = measured.astype(float)
    return 100.0 * (model.astype(float) - measured) / measured.where(measured != 0)


def model_table(campaign: Path, summary: pd.DataFrame, calibrations: dict[tuple, Calibration]) -> pd.DataFrame:
    """One row per run: its grid parameters, the measured and the predicted figures, the errors."""
    rows = []
    for _, run in summary.iterrows():
        key = setup_key(run)
        prediction = predict(int(run["senders"]), int(run["background"]), setup_of(key), calibrations[key])
        rows.append({
            **{c: run[c] for c in GRID_COLUMNS if c in run},
            "setup": setup_of(key).describe(),  # the summary's label does not name the shaper's queue
            "status": run.get("status"), "marked": run.get("marked"), "limit": run.get("limit"),
            "regime_model": prediction.regime,
            "goodput_mbps": run["goodput_bit_s"] / 1e6, "goodput_model_mbps": prediction.goodput_bit_s / 1e6,
            "goodput_per_sender_mbps": run["goodput_bit_s"] / 1e6 / run["senders"],
            "goodput_per_sender_model_mbps": prediction.goodput_per_sender_bit_s / 1e6,
            "jain": run["jain"], "jain_model": prediction.jain,
            "cpu_wait_share": sender_cpu_wait_share(campaign / str(run["directory"])),
            "cpu_wait_model": prediction.cpu_wait_share,
            "sender_share_model": prediction.sender_share,
            "cpu_bound_mbps": prediction.cpu_bound_bit_s / 1e6, "wire_bound_mbps": prediction.wire_bound_bit_s / 1e6,
            "flags": " ".join(prediction.flags), "why": prediction.why,
        })
    table = pd.DataFrame(rows)
    table["goodput_error_pct"] = error_pct(table["goodput_model_mbps"], table["goodput_mbps"])
    table["jain_error_pct"] = error_pct(table["jain_model"], table["jain"])
    for measured, column in (("goodput_mbps", "goodput_repeat_error_pct"), ("jain", "jain_repeat_error_pct")):
        table[column] = error_pct(others_mean(table, measured), table[measured])
    if "goodput_mean_bit_s" in summary:
        # each point's mean over its repetitions (campaign.repetitions), the fairer reference
        for part in ("mean", "ci95_low", "ci95_high"):
            table[f"goodput_point_{part}_mbps"] = summary[f"goodput_{part}_bit_s"].to_numpy(float) / 1e6
        table["goodput_point_n"] = summary["goodput_n"].to_numpy()
        table["goodput_point_error_pct"] = error_pct(table["goodput_model_mbps"], table["goodput_point_mean_mbps"])
    return table


def others_mean(table: pd.DataFrame, column: str) -> pd.Series:
    """For each run, the mean of `column` over the other repetitions of its point (same set-up,
    senders, background); nan for a point recorded once. Used as a predictor, it is the best a
    model that sees only the point's inputs can hope for: the measurement's own repeatability."""
    values = table[column].astype(float)
    groups = table.groupby(["setup", "senders", "background"], sort=False)[column]
    total = groups.transform(lambda g: g.astype(float).sum())
    count = groups.transform("count")
    return ((total - values) / (count - 1)).where(count > 1)


def write_model_table(campaign: Path, table: pd.DataFrame) -> Path:
    write_with(campaign / "model.parquet", lambda handle: table.to_parquet(handle, index=False))
    write_with(campaign / "model.csv", lambda handle: table.to_csv(handle, index=False, float_format="%.6g"))
    return campaign / "model.parquet"


def within_share(errors: pd.Series) -> tuple[int, int]:
    """How many of the finite errors are within WITHIN_PCT, and how many there are."""
    finite = errors[np.isfinite(errors.astype(float))]
    return int((finite.abs() <= WITHIN_PCT).sum()), int(len(finite))


def summary_lines(table: pd.DataFrame) -> list[str]:
    """The verdict: share of runs within 10 % for goodput and Jain's index, per regime, and the
    worst point of each with the model's reason."""
    lines = []
    for what, column in (("goodput", "goodput_error_pct"), ("Jain's index", "jain_error_pct")):
        hit, total = within_share(table[column])
        if total == 0:
            lines.append(f"{what}: nothing measured to judge the model against")
            continue
        line = f"{what}: {hit} of {total} runs ({100 * hit / total:.0f} %) predicted within {WITHIN_PCT:g} %"
        parts = []
        for regime, group in table.groupby("regime_model"):
            h, t = within_share(group[column])
            if t:
                parts.append(f"{regime}-limited {h} of {t}")
        if parts:
            line += " (" + ", ".join(parts) + ")"
        lines.append(line)
        repeat_column = column.replace("_error_pct", "_repeat_error_pct")
        if repeat_column in table and table[repeat_column].notna().any():
            repeated = table[table[repeat_column].notna()]
            r_hit, r_total = within_share(repeated[repeat_column])
            m_hit, _ = within_share(repeated[column])
            lines.append(f"  repeatability: the mean of a point's other repetitions is within {WITHIN_PCT:g} % of "
                         f"{r_hit} of {r_total} runs ({100 * r_hit / r_total:.0f} %), the model of {m_hit}; "
                         f"repetitions differ by up to {repeated[repeat_column].abs().max():.0f} %")
        worst = table.loc[table[column].abs().idxmax()] if table[column].notna().any() else None
        if worst is not None:
            measured, model = (("goodput_mbps", "goodput_model_mbps") if column == "goodput_error_pct"
                               else ("jain", "jain_model"))
            lines.append(f"  worst: M={int(worst['senders'])} N={int(worst['background'])} ({worst['setup']}): "
                         f"measured {worst[measured]:.3g}, model {worst[model]:.3g} ({worst[column]:+.1f} %); "
                         f"{worst['why']}" + (f"; measured limit {worst['limit']}" if isinstance(worst['limit'], str) else ""))
    return lines


def point_mean_lines(table: pd.DataFrame) -> list[str]:
    """The model against each point's mean over its repetitions, with how well the mean itself is
    known: the interval's half-width is the floor under any model's error at that point."""
    if "goodput_point_n" not in table or not (table["goodput_point_n"] > 1).any():
        return []
    points = table[table["goodput_point_n"] > 1].drop_duplicates(["setup", "senders", "background"])
    hit, total = within_share(points["goodput_point_error_pct"])
    half = 100 * relative_half_width(points["goodput_point_ci95_low_mbps"], points["goodput_point_ci95_high_mbps"],
                                     points["goodput_point_mean_mbps"])
    inside = ((points["goodput_model_mbps"] >= points["goodput_point_ci95_low_mbps"])
              & (points["goodput_model_mbps"] <= points["goodput_point_ci95_high_mbps"])).sum()
    known = int((half <= WITHIN_PCT).sum())
    return [f"goodput against each point's mean over its repetitions (n = {int(points['goodput_point_n'].min())}"
            f"-{int(points['goodput_point_n'].max())}): {hit} of {total} points ({100 * hit / total:.0f} %) "
            f"within {WITHIN_PCT:g} %; the model inside the mean's 95 % interval at {inside}",
            f"  floor: the means' 95 % intervals are ±{half.min():.1f} to ±{half.max():.1f} % (median "
            f"±{half.median():.1f} %); {known} of {total} points' means are known to within {WITHIN_PCT:g} %"]


def point_lines(table: pd.DataFrame) -> list[str]:
    """One line per run, sorted by set-up and point."""
    lines = []
    order = table.sort_values(["setup", "senders", "background", "repetition"])
    for _, row in order.iterrows():
        wait = "" if not math.isfinite(row["cpu_wait_share"]) else f"{row['cpu_wait_share']:.2f}"
        lines.append(
            f"M={int(row['senders']):>2} N={int(row['background']):>2} {row['regime_model']:>4}  goodput "
            f"{row['goodput_mbps']:7.2f} model {row['goodput_model_mbps']:7.2f} Mbit/s ({row['goodput_error_pct']:+6.1f} %)"
            f"  per sender {row['goodput_per_sender_mbps']:6.2f}/{row['goodput_per_sender_model_mbps']:6.2f}"
            f"  Jain {row['jain']:.3f} model {row['jain_model']:.3f} ({row['jain_error_pct']:+6.1f} %)"
            f"  CPU wait {wait or '  - '}/{row['cpu_wait_model']:.2f}"
            + (f"  windows: Jain cwnd {row['jain_cwnd']:.3f}, in flight {row['jain_inflight']:.3f}, "
               f"r(in flight, goodput) {row['r_inflight_bytes']:+.2f}" if "jain_cwnd" in row and math.isfinite(row["jain_cwnd"]) else "")
            + (f"  [{row['flags']}]" if row["flags"] else ""))
    return lines


def calibration_lines(calibrations: dict[tuple, Calibration]) -> list[str]:
    lines = []
    for key, cal in calibrations.items():
        if cal.by_senders:
            cpu = "; ".join(f"M_c = {m}: C = {c / 1e6:.1f} Mbit/s, w = {w:.3f}" for m, c, w in cal.by_senders)
        else:
            cpu = "C: the CPU never limited the calibration"
        lines.append(f"{setup_of(key).describe()}: {cpu}; wire efficiency {cal.wire_efficiency:.3f} ({cal.source})")
    return lines
