"""Records and analyses the calibration campaign of hostwire's model (hostwire.model.calibration
plans it): the recording side of `hostwire model`, kept out of the model so that the model reads
runs without importing what records them."""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd

from hostwire.model.calibration import CalibrationPlan, config_text

log = logging.getLogger(__name__)


def record_calibration(plan: CalibrationPlan, directory: Path) -> pd.DataFrame:
    """Records the plan's runs into directory (the complete ones already there are kept, as
    `hostwire run --resume` keeps them) and analyses them: the calibration's summary."""
    from hostwire.campaign.analyze import analyze_campaign
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
    return analyze_campaign(directory)
