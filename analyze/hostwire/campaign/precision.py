"""`hostwire run --until-ci 5%`: repetitions added to a campaign's points until each point's
95 % confidence interval of goodput (campaign.repetitions.confidence) is no wider than asked.

The target is the interval's half-width relative to the point's mean: "5%" stops a point once
its mean is known to within ±5 %. After the config's repetitions, every point still wider (or
with fewer than two complete runs) gets one more repetition a round, in the config's order, until
it is within the target or has --max-repetitions runs. Goodput is the wire's (the `goodput`
metric over the run's window), read from each complete run; a failed or partial run counts as a
repetition but gives no value."""

from __future__ import annotations

import logging
import math
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from hostwire.errors import HostwireError, UsageError

if TYPE_CHECKING:
    from hostwire.campaign.config import CampaignConfig
    from hostwire.record.runner import RunPoint


class PlannedRun(Protocol):
    """What the rounds read of a campaign's planned run (campaign.batch.PlannedRun)."""

    run_id: str
    point: RunPoint
    point_index: int

log = logging.getLogger(__name__)

# Enough for a ±5 % interval at the 14.9 % scatter of one run measured in docs/model.md
# ((2.09 · 14.9 / 5)² ≈ 39 would be needed; 20 gives ±7 %), and a bound on an unlucky point's time.
DEFAULT_MAX_REPETITIONS = 20


def parse_target(text: str) -> float:
    """'5%' or '0.05' as the relative half-width 0.05; UsageError for anything else."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(%?)\s*", text)
    if not match:
        raise UsageError(f"--until-ci: expected a relative half-width such as 5% or 0.05, got {text!r}")
    value = float(match.group(1)) / (100.0 if match.group(2) else 1.0)
    if not 0.0 < value < 1.0:
        raise UsageError(f"--until-ci: expected more than 0 % and less than 100 %, got {text!r}")
    return value


@dataclass
class PointPrecision:
    """One point's goodput over its complete repetitions."""

    point_index: int
    runs: int
    n: int
    mean_bit_s: float
    half_width: float  # relative: the interval's half-width over the mean (NaN below two values)

    def within(self, target: float) -> bool:
        return self.n >= 2 and math.isfinite(self.half_width) and self.half_width <= target


@dataclass
class Precision:
    target: float
    max_repetitions: int = DEFAULT_MAX_REPETITIONS
    points: dict[int, PointPrecision] = field(default_factory=dict)

    def next_round(self, config: CampaignConfig, planned: list[PlannedRun], directory: Path,
                   round_number: int) -> list[tuple[int, RunPoint, int]]:
        """(point index, point, repetition) of the next round's runs, in the config's order:
        one for each point still wider than the target that has fewer than max_repetitions runs."""
        self.points = measure(planned, directory)
        wanted = []
        for i, state in sorted(self.points.items()):
            if state.within(self.target) or state.runs >= self.max_repetitions:
                continue
            point = next(p.point for p in planned if p.point_index == i)
            wanted.append((i, point, state.runs))
        if config.order == "shuffled":
            random.Random(f"{config.seed}-{round_number}").shuffle(wanted)
        elif config.order == "alternating" and round_number % 2 == 0:
            wanted.reverse()
        if wanted:
            log.info("--until-ci %.1f %%: round %d adds a repetition to %d of %d points (widest ±%.1f %%)",
                     100 * self.target, round_number + 1, len(wanted), len(self.points), 100 * self.widest())
        return wanted

    def widest(self) -> float:
        widths = [s.half_width if math.isfinite(s.half_width) else math.inf for s in self.points.values()]
        return max(widths, default=math.nan)

    def describe(self) -> str:
        """One line: how many points reached the target, how many stopped at the bound."""
        within = sum(s.within(self.target) for s in self.points.values())
        stopped = [s for s in self.points.values() if not s.within(self.target)]
        line = (f"--until-ci {100 * self.target:g} %: {within} of {len(self.points)} points within "
                f"±{100 * self.target:g} % of their mean goodput")
        if stopped:
            worst = max(stopped, key=lambda s: s.half_width if math.isfinite(s.half_width) else math.inf)
            line += (f"; {len(stopped)} stopped at --max-repetitions {self.max_repetitions} "
                     f"(widest: point {worst.point_index}, ±{100 * worst.half_width:.1f} % over {worst.n} runs)")
        return line


def measure(planned: list[PlannedRun], directory: Path) -> dict[int, PointPrecision]:
    """Each point's runs so far and its goodput interval."""
    import numpy as np

    from hostwire.campaign.repetitions import confidence, relative_half_width

    values: dict[int, list[float]] = {}
    for item in planned:
        values.setdefault(item.point_index, []).append(run_goodput(directory / item.run_id))
    out = {}
    for i, v in values.items():
        n, mean, _sd, low, high = confidence(np.asarray(v, dtype=np.float64))
        half = relative_half_width(low, high, mean) if n >= 2 and mean > 0 else math.nan
        out[i] = PointPrecision(point_index=i, runs=len(v), n=n, mean_bit_s=mean, half_width=half)
    return out


def run_goodput(run_dir: Path) -> float:
    """The wire's goodput of a complete run over its window (bit/s); NaN for a run that is not
    complete or whose capture cannot be read."""
    from hostwire.metrics.chunked.engine import metrics_input
    from hostwire.metrics.compute import table
    from hostwire.run_directory import load_run

    if not run_dir.is_dir():  # failed before its directory was made, or kept as .partial
        return math.nan
    try:
        run = load_run(run_dir)
        if run.status != "complete":
            return math.nan
        goodput = table("goodput", metrics_input(run))
        return float(goodput.loc[goodput["stream"] == "all", "bit_s"].iloc[0])
    except (HostwireError, IndexError, KeyError) as err:
        log.warning("%s: goodput not read for --until-ci (%s); counted as a run without a value", run_dir, err)
        return math.nan
