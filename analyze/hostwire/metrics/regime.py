"""What limited a run's traffic, decided from what was measured, never from the config
(docs/metrics.md, "What limited a run"):

- `cpu`: the sender host's CPU. Under a CPU cap, its cgroup was throttled in at least half of the
  periods in which it ran; with no cap, the sender's CPU was busy at least 95 % of the window
  while the wire was not busy (below): background processes keep an uncapped CPU busy whatever
  the senders need, so a busy CPU beside a busy wire says nothing about the senders.
- `wire`: else, the link was busy sending at least 90 % of the window (the shaped direction's
  frames at the enforced link rate).
- `neither`: else (the receiver, TCP's windows, or the benchmark's pacing held the traffic).

The paper's effect, goodput following the share of sending processes, can exist only where the
CPU limits: where the wire does, every mix fills the same wire."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from hostwire.errors import InputError
from hostwire.metrics.goodput import goodput_against_mix

CPU_THROTTLED_SHARE = 0.5   # throttled periods / periods of a capped sender host
CPU_BUSY_SHARE = 0.95       # busy share of an uncapped sender's CPU over the window
WIRE_BUSY_SHARE = 0.90      # share of the window the link spent sending
LIMITS = ("cpu", "wire", "neither")
FIT_COLUMNS = ["limit", "runs", "mixes", "goodput_mbit_s", "spread_pct", "pearson_r", "slope_mbit_s",
               "intercept_mbit_s", "note"]


def setup_label(point: Mapping[str, Any]) -> str:
    """The conditions a run's senders worked under, beside its mix: the link and the sender host's
    CPU cap, e.g. "10mbit tbf-peak" or "no shaper, CPU cap 5 %" (runs compare like for like only
    within one)."""
    qdisc = str(point.get("link_qdisc", "?"))
    link = "no shaper" if qdisc == "none" else f"{point.get('link_rate', '?')} {qdisc}"
    share = float(point.get("sender_cpu_share") or 0)
    return (link + (f", CPU cap {100 * share:g} %" if share else "")
            + (", ACKs on the sender's CPU" if point.get("sender_rps") else ""))


def throttled_share(cpu_cap: object) -> float:
    """nr_throttled / nr_periods of the manifest's `cpu_cap` (the group's cpu.stat); NaN without a
    cap or before the group ran a period."""
    if not isinstance(cpu_cap, dict):
        return math.nan
    periods, throttled = cpu_cap.get("nr_periods"), cpu_cap.get("nr_throttled")
    if not isinstance(periods, int) or not isinstance(throttled, int) or periods <= 0:
        return math.nan
    return throttled / periods


def limits(capped: pd.Series, throttled: pd.Series, sender_cpu_busy: pd.Series, wire_busy: pd.Series) -> pd.Series:
    """The limit of each run (rows aligned): `capped` says whether the sender host had a CPU cap;
    the other three are shares in [0, 1], NaN where not measured (an unmeasured share limits
    nothing)."""
    capped = capped.fillna(False).astype(bool).to_numpy()
    wire = wire_busy.fillna(0).to_numpy(float) >= WIRE_BUSY_SHARE
    cpu = np.where(capped, throttled.fillna(0).to_numpy(float) >= CPU_THROTTLED_SHARE,
                   (sender_cpu_busy.fillna(0).to_numpy(float) >= CPU_BUSY_SHARE) & ~wire)
    return pd.Series(np.select([cpu, wire], ["cpu", "wire"], "neither"), index=throttled.index, name="limit")


def limit_of(capped: bool, throttled: float, sender_cpu_busy: float, wire_busy: float) -> str:
    """One run's limit (see `limits`)."""
    return str(limits(pd.Series([capped]), pd.Series([throttled], dtype=float),
                      pd.Series([sender_cpu_busy], dtype=float), pd.Series([wire_busy], dtype=float)).iloc[0])


def df_goodput_fit_by_limit(summary: pd.DataFrame) -> pd.DataFrame:
    """Goodput against M/(M+N) in each regime (columns FIT_COLUMNS: the mean goodput and its spread,
    (max - min) / mean, tell a flat regime from one that follows the mix; r, slope and intercept NaN
    where a regime has too few runs or mixes to fit, and `note` says why). Uses the unmarked runs
    with senders and a goodput figure; the rows follow LIMITS and leave out regimes with no run."""
    if "limit" not in summary.columns or "goodput_bit_s" not in summary.columns:
        return pd.DataFrame(columns=FIT_COLUMNS)
    usable = summary[(summary["senders"] > 0) & summary["goodput_bit_s"].notna()]
    if "marked" in usable.columns:
        usable = usable[usable["marked"].fillna(1).astype(int) == 0]
    rows = []
    for limit in LIMITS:
        part = usable[usable["limit"] == limit]
        if len(part) == 0:
            continue
        mixes = int((part["senders"] / (part["senders"] + part["background"])).round(6).nunique())
        goodput = part["goodput_bit_s"].to_numpy(float)
        row = {"limit": limit, "runs": int(len(part)), "mixes": mixes, "goodput_mbit_s": goodput.mean() / 1e6,
               "spread_pct": 100 * np.ptp(goodput) / goodput.mean() if goodput.mean() > 0 else math.nan,
               "pearson_r": math.nan,
               "slope_mbit_s": math.nan, "intercept_mbit_s": math.nan, "note": ""}
        try:
            fit = goodput_against_mix(part["senders"].to_numpy(), part["background"].to_numpy(),
                                      part["goodput_bit_s"].to_numpy())
            row.update(pearson_r=fit["pearson_r"], slope_mbit_s=fit["slope_bit_s"] / 1e6,
                       intercept_mbit_s=fit["intercept_bit_s"] / 1e6)
        except InputError as err:
            row["note"] = str(err).split(": ", 1)[-1]
        rows.append(row)
    return pd.DataFrame(rows, columns=FIT_COLUMNS)


WHY_WIRE_CANNOT_DEPEND = (
    "Where the wire limits, the link sends nearly all the time: the senders keep its queue full with "
    "a small share of a CPU far faster than the link, so background processes take only CPU time "
    "that the senders did not need, and goodput stays at the link's rate whatever the mix.")
