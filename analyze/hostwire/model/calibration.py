"""The model's measured inputs (docs/model.md, "Calibration"): short runs of their own, none of
them a point the model predicts, so that a prediction never sees the run it is judged against.

Per set-up (the quota, the shaper, its rate and queue) the calibration records M_c senders with
0, N_1 and N_2 sieves. Under weighted fair sharing the CPU-limited goodput is
G = C wM / (wM + N), so 1/G = 1/C + N / (C w M) is a straight line in N: its intercept gives C
(the senders' goodput with the whole CPU they are given) and its slope w (a sender's weight
against a sieve). The runs whose `limit` is `cpu` make the line; the busy share of a run the CPU
did not limit gives the wire's efficiency. A set-up without a quota is calibrated on the CPU side
by the same runs without a shaper (the whole CPU, nothing else in the way)."""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from hostwire.errors import InputError
from hostwire.linkrate import link_rate
from hostwire.model.layers import Calibration, Setup

log = logging.getLogger(__name__)

SETUP_KEYS = ("sender_cpu_share", "link_qdisc", "link_rate", "link_queue")
CALIBRATION_SENDERS = (3, 4, 6, 7, 8, 9)  # the first not in the predicted grid is used
CALIBRATION_BACKGROUND = ((3, 12), (4, 16), (6, 24), (7, 14))
CALIBRATION_TIMING = {"warmup_s": 2.0, "duration_s": 10.0, "quiet_s": 1.0}


@dataclass(frozen=True)
class CalibrationPlan:
    senders: int
    background: tuple[int, int, int]  # 0, N_1, N_2
    setups: tuple[tuple[float, str, str, int], ...]  # SETUP_KEYS values of each set-up
    window_s: float = CALIBRATION_TIMING["duration_s"]


def setup_key(row: pd.Series | dict) -> tuple[float, str, str, int]:
    return (float(row["sender_cpu_share"] or 0.0), str(row["link_qdisc"]), str(row["link_rate"]),
            int(row["link_queue"]))


def match_key(key: tuple[float, str, str, int]) -> tuple[float, str, str, int]:
    """What a calibration must share with a set-up: without a shaper nothing holds the link to its
    rate or queue, so those do not tell set-ups apart."""
    share, qdisc, rate, queue = key
    return key if qdisc != "none" else (share, qdisc, "", 0)


def setup_of(key: tuple[float, str, str, int]) -> Setup:
    share, qdisc, rate, queue = key
    link = link_rate({"point": {"link_rate": rate, "link_qdisc": qdisc}})  # the runs' own rule
    return Setup(cpu_share=share, link_rate_bit_s=float(link.bit_s), rate_enforced=link.enforced, queue_frames=queue)


def cpu_side_key(key: tuple[float, str, str, int]) -> tuple[float, str, str, int]:
    """The set-up whose runs calibrate the CPU side of `key`: itself under a quota; without a
    quota, the same without a shaper (a shaper would make the wire the limit and hide the CPU)."""
    share, _, rate, queue = key
    return key if share > 0 else (share, "none", rate, queue)


def plan_for(points: Iterable[tuple[int, int]], keys: Iterable[tuple[float, str, str, int]],
             window_s: float = CALIBRATION_TIMING["duration_s"]) -> CalibrationPlan:
    """Calibration points that are not among the predicted ones (M, N)."""
    predicted = set(points)
    for senders in CALIBRATION_SENDERS:
        for first, second in CALIBRATION_BACKGROUND:
            if not {(senders, 0), (senders, first), (senders, second)} & predicted:
                wanted: dict[tuple, tuple] = {}
                for key in keys:
                    for k in (key, cpu_side_key(key)):
                        wanted.setdefault(match_key(k), k)
                return CalibrationPlan(senders, (0, first, second), tuple(sorted(wanted.values())), window_s)
    raise InputError("every calibration point is among the predicted ones: give --calibration DIR")


def config_text(plan: CalibrationPlan) -> str:
    """The calibration campaign as a hostwire campaign file: one variant per set-up."""
    lines = ["# hostwire model's calibration: a few short runs, none of them a predicted point",
             "[campaign]", 'name = "model-calibration"', "repetitions = 1", 'order = "as-written"', "",
             "[defaults]"]
    lines += [f"{k} = {v!r}" for k, v in {**CALIBRATION_TIMING, "duration_s": float(plan.window_s)}.items()]
    lines += ["", "[grid]", f"senders = [{plan.senders}]",
              f"background = [{', '.join(str(n) for n in plan.background)}]"]
    for i, (share, qdisc, rate, queue) in enumerate(plan.setups):
        lines += ["", f"[variants.setup{i + 1}]", f"sender_cpu_share = {share!r}", f'link_qdisc = "{qdisc}"',
                  f'link_rate = "{rate}"', f"link_queue = {queue}"]
    return "\n".join(lines) + "\n"


def calibrate(summary: pd.DataFrame, key: tuple[float, str, str, int], source: str) -> Calibration:
    """The inputs of set-up `key` from an analysed calibration campaign's summary."""
    keys = pd.Series([match_key(setup_key(row)) for _, row in summary.iterrows()], index=summary.index, dtype=object)
    usable = summary["status"].eq("complete") & summary["goodput_bit_s"].gt(0)
    own_key, cpu_side = match_key(key), match_key(cpu_side_key(key))
    own = summary[keys.map(lambda k: k == own_key) & usable]
    cpu_runs = summary[keys.map(lambda k: k == cpu_side) & usable]
    if own.empty or cpu_runs.empty:
        raise InputError(f"{source}: the calibration has no complete run of the set-up {setup_of(key).describe()}; "
                         "run 'hostwire model' without --calibration to record one")
    lines = tuple((int(m), *cpu_line(runs)) for m, runs in cpu_runs.groupby("senders"))
    measured = [line for line in lines if math.isfinite(line[1])]
    _, capacity, weight = measured[0] if measured else lines[0]
    # a campaign whose links were never shaped has no wire busy share at all: the wire is no server
    busy = own["wire_busy_share"] if "wire_busy_share" in own.columns else pd.Series(np.nan, index=own.index)
    unlimited = busy[own["limit"].ne("cpu") & busy.notna()]
    efficiency = float(unlimited.max()) if len(unlimited) else 1.0
    return Calibration(capacity, weight, efficiency, source, tuple(measured))


def cpu_line(runs: pd.DataFrame) -> tuple[float, float]:
    """C and w from the CPU-limited runs of one set-up (1/G against N, a straight line); with one
    such run, w = 1 (the scheduler's fair share); with none, the CPU never limited: C = inf."""
    limited = runs[runs["limit"].eq("cpu")]
    if limited.empty:
        return math.inf, 1.0
    senders = int(limited["senders"].iloc[0])
    inverse = 1.0 / limited["goodput_bit_s"].to_numpy(float)
    background = limited["background"].to_numpy(float)
    if len(np.unique(background)) < 2:
        n = float(background.mean())
        return float(1.0 / inverse.mean() * (1.0 + n / senders)), 1.0
    slope, intercept = np.polyfit(background, inverse, 1)
    if intercept <= 0 or slope <= 0:
        # the line does not describe these runs (noise larger than the sieves' effect): fair share
        n = float(background.mean())
        return float(1.0 / inverse.mean() * (1.0 + n / senders)), 1.0
    return float(1.0 / intercept), float(intercept / (slope * senders))


def load_calibration(directories: Path | list[Path]) -> pd.DataFrame:
    """The summaries of one or more calibration campaigns, as one table: each one's
    summary.parquet (hostwire analyze) or else its calibration.parquet (the light reading that
    `hostwire model` makes of a calibration campaign that was recorded and not analysed)."""
    parts = []
    for directory in directories if isinstance(directories, list) else [directories]:
        path = directory / "summary.parquet"
        if not path.exists():
            path = directory / "calibration.parquet"  # hostwire.campaign.calibrate.light_summary
        if not path.exists():
            raise InputError(f"{directory / 'summary.parquet'}: missing; run 'hostwire analyze {directory}' first")
        try:
            parts.append(pd.read_parquet(path))
        except (OSError, ValueError) as err:
            raise InputError(f"{path}: cannot read: {err}") from None
    return pd.concat(parts, ignore_index=True)
