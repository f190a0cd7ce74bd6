"""`hostwire model CAMPAIGN`: calibrate (or read the calibration), predict every run's point,
write model.parquet / model.csv, and predict points that were not run."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable
from typing import Any

import pandas as pd

from hostwire.errors import InputError
from hostwire.model import calibration as cal
from hostwire.model.layers import Calibration, predict
from hostwire.model.validate import (calibration_lines, model_table, point_lines, point_mean_lines, summary_lines,
                                     write_model_table)

log = logging.getLogger(__name__)

CALIBRATION_DIR = "model-calibration"


@dataclass
class ModelResult:
    table: pd.DataFrame
    table_path: Path
    calibrations: dict[tuple, Calibration]
    calibration_lines: list[str]
    summary_lines: list[str]
    point_lines: list[str]
    prediction_lines: list[str] = field(default_factory=list)


def read_summary(campaign: Path) -> pd.DataFrame:
    path = campaign / "summary.parquet"
    if not path.exists():
        raise InputError(f"{path}: missing; run 'hostwire analyze {campaign}' first")
    try:
        summary = pd.read_parquet(path)
    except (OSError, ValueError) as err:
        raise InputError(f"{path}: cannot read: {err}") from None
    missing = [c for c in ("senders", "background", "goodput_bit_s", "jain", "limit", *cal.SETUP_KEYS)
               if c not in summary]
    if missing:
        raise InputError(f"{path}: no column {', '.join(missing)}; run 'hostwire analyze {campaign} --force'")
    if summary.empty:
        raise InputError(f"{path}: no runs")
    return summary


def _predicted_keys(summary: pd.DataFrame, predict: list[dict[str, Any]]) -> list[tuple]:
    keys = list(dict.fromkeys(summary.apply(cal.setup_key, axis=1)))
    for point in predict:
        keys.append(_point_key(summary, point))
    return list(dict.fromkeys(keys))


def _point_key(summary: pd.DataFrame, point: dict[str, Any]) -> tuple:
    """The set-up of a --predict point: the campaign's (its first run's) with the given keys over it."""
    base = dict(zip(cal.SETUP_KEYS, cal.setup_key(summary.iloc[0])))
    base.update({k: v for k, v in point.items() if k in cal.SETUP_KEYS})
    return cal.setup_key(base)


Recorder = Callable[[cal.CalibrationPlan, Path], pd.DataFrame]


def _calibrations(campaign: Path, summary: pd.DataFrame, keys: list[tuple],
                  calibration_dir: list[Path] | None, record: Recorder | None, window_s: float) -> dict[tuple, Calibration]:
    points = set(zip(summary["senders"].astype(int), summary["background"].astype(int)))
    if calibration_dir:
        source = " + ".join(str(d) for d in calibration_dir)
        table = cal.load_calibration(calibration_dir)
    else:
        source = campaign / CALIBRATION_DIR
        if record is None:
            raise InputError(f"{campaign}: no calibration given (--calibration DIR) and none may be recorded here")
        table = record(cal.plan_for(points, keys, window_s), source)
    used = set(zip(table["senders"].astype(int), table["background"].astype(int)))
    clash = sorted(used & points)
    if clash:
        raise InputError(f"{source}: the calibration holds predicted points {clash}: the model would see the "
                         "runs it is judged against; record a calibration with other points")
    return {key: cal.calibrate(table, key, str(source)) for key in keys}


def model_campaign(campaign: str | Path, *, calibration_dir: list[Path] | None = None,
                   predict: list[dict[str, Any]] | None = None, windows: bool = False,
                   record: Recorder | None = None,
                   calibration_window_s: float = cal.CALIBRATION_TIMING["duration_s"]) -> ModelResult:
    """The model over CAMPAIGN's runs. Without calibration_dir the calibration is recorded into
    CAMPAIGN/model-calibration by `record` (hostwire.campaign.calibrate.record_calibration)."""
    campaign = Path(campaign)
    predict = predict or []
    summary = read_summary(campaign)
    keys = _predicted_keys(summary, predict)
    calibrations = _calibrations(campaign, summary, keys, calibration_dir, record, calibration_window_s)
    table = model_table(campaign, summary, calibrations)
    if windows:
        table = add_window_columns(campaign, summary, table)
    path = write_model_table(campaign, table)
    result = ModelResult(table, path, calibrations, calibration_lines(calibrations),
                         summary_lines(table) + point_mean_lines(table),
                         point_lines(table))
    for point in predict:
        key = _point_key(summary, point)
        p = predict_point(point, key, calibrations[key])
        result.prediction_lines.append(p)
    return result


def add_window_columns(campaign: Path, summary: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """Each run's streams' windows from the kernel's tcp_probe (hostwire.model.windows): Jain's
    index of their mean congestion windows and bytes in flight, and r(bytes in flight, goodput)."""
    from hostwire.errors import HostwireError
    from hostwire.model.windows import window_summary

    rows = []
    for directory in summary["directory"]:
        try:
            rows.append(window_summary(campaign / str(directory)))
        except (HostwireError, OSError, KeyError, ValueError) as err:
            log.warning("%s: no stream windows: %s", directory, err)
            rows.append({})
    found = pd.DataFrame(rows, index=table.index)
    keep = [c for c in ("jain_cwnd", "jain_inflight", "r_inflight_bytes", "inflight_spread") if c in found]
    return table.join(found[keep])


def predict_point(point: dict[str, Any], key: tuple, calibration: Calibration) -> str:
    from hostwire.model.calibration import setup_of

    setup = setup_of(key)
    p = predict(int(point["senders"]), int(point.get("background", 0)), setup, calibration)
    return (f"prediction (no run at this point) M={p.senders} N={p.background}, {setup.describe()}: goodput "
            f"{p.goodput_bit_s / 1e6:.2f} Mbit/s ({p.goodput_per_sender_bit_s / 1e6:.2f} per sender), Jain's index "
            f"{p.jain:.3f}, CPU wait {p.cpu_wait_share:.2f}; {p.why}"
            + (f" [{' '.join(p.flags)}]" if p.flags else ""))
