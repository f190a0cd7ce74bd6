"""Records and analyses the calibration campaign of hostwire's model (hostwire.model.calibration
plans it): the recording side of `hostwire model`, kept out of the model so that the model reads
runs without importing what records them."""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd

from hostwire.model.calibration import CalibrationPlan, config_text

log = logging.getLogger(__name__)


LIGHT_SUMMARY = "calibration.parquet"


def light_summary(directory: Path) -> pd.DataFrame:
    """What the model reads of each run of a calibration campaign, computed as `hostwire analyze`
    computes it (goodput on the wire, Jain's index, the wire's busy share from sanity, the sender
    CPU's busy share, the quota's throttled share and the limit they give) but without the joined timeline,
    which a calibration does not need and which costs most of an analysis. Written as
    DIRECTORY/calibration.parquet."""
    import math

    from hostwire.campaign.analyze import host_load, limit_columns, run_directories
    from hostwire.errors import HostwireError
    from hostwire.metrics import table
    from hostwire.run_directory import load_run
    from hostwire.safewrite import write_with

    rows = []
    for run_dir in run_directories(directory):
        run = load_run(run_dir)
        config = run.manifest.get("config")
        row = {**run.point, "run_id": run_dir.name, "directory": run_dir.name,
               "repetition": config.get("repetition", 0) if isinstance(config, dict) else 0,
               "status": run.manifest.get("status"), "goodput_bit_s": math.nan, "wire_busy_share": math.nan,
               "jain": math.nan}
        try:
            goodput = table("goodput", run).set_index("stream")
            row["goodput_bit_s"] = float(goodput.loc["all", "bit_s"])
            sanity = table("sanity", run).set_index("counter")["value"]
            row["wire_busy_share"] = float(sanity.get("wire_busy_share", math.nan))
            row["jain"] = float(table("fairness", run).set_index("stream").loc["all", "jain"])
        except (HostwireError, KeyError) as err:
            row["errors"] = str(err)
        row.update(host_load(run))
        row.update(limit_columns(run, row))
        rows.append(row)
    summary = pd.DataFrame(rows)
    write_with(directory / LIGHT_SUMMARY, lambda handle: summary.to_parquet(handle, index=False))
    return summary


def record_calibration(plan: CalibrationPlan, directory: Path) -> pd.DataFrame:
    """Records the plan's runs into directory (the complete ones already there are kept, as
    `hostwire run --resume` keeps them) and reads them (light_summary)."""
    from hostwire.campaign.batch import run_campaign
    from hostwire.campaign.config import load_config
    from hostwire.safewrite import write_text

    directory.mkdir(parents=True, exist_ok=True)
    config_path = directory / "calibration.toml"
    write_text(config_path, config_text(plan))
    config = load_config(config_path)
    log.info("calibration: %d runs into %s", len(config.points()), directory)
    result = run_campaign(config, directory, resume=True)
    if result.failed:
        log.warning("calibration: %d runs failed; the model uses the others", len(result.failed))
    return light_summary(directory)
