"""Each grid point's repetitions in summary.parquet (hostwire.campaign.repetitions): n, mean,
standard deviation and Student's 95 % interval, by hand."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from hostwire.campaign.repetitions import point_key, with_point_stats


def test_each_point_gets_its_repetitions_interval() -> None:
    """Goodputs 1..5 Mbit/s at one point: mean 3, sd sqrt(2.5) = 1.5811, t(0.975, 4) = 2.776, so
    the interval is 3 -+ 2.776 * 1.5811 / sqrt(5) = 3 -+ 1.963; the other point's single run has
    no spread."""
    one, two = point_key({"senders": 1, "background": 0}), point_key({"background": 2, "senders": 1})
    summary = pd.DataFrame({"point_key": [one] * 5 + [two], "goodput_bit_s": [1e6, 2e6, 3e6, 4e6, 5e6, 7e6],
                            "jain": [1.0, 1.0, 1.0, 1.0, math.nan, 0.5]})
    out = with_point_stats(summary)
    first = out.iloc[0]
    assert first["goodput_n"] == 5 and first["goodput_mean_bit_s"] == pytest.approx(3e6)
    assert first["goodput_sd_bit_s"] == pytest.approx(1.5811e6, rel=1e-4)
    assert first["goodput_ci95_low_bit_s"] == pytest.approx(3e6 - 1.963e6, rel=1e-3)
    assert first["goodput_ci95_high_bit_s"] == pytest.approx(3e6 + 1.963e6, rel=1e-3)
    assert first["jain_n"] == 4 and first["jain_sd"] == 0  # a NaN is not a repetition
    last = out.iloc[-1]
    assert last["goodput_n"] == 1 and last["goodput_mean_bit_s"] == 7e6 and math.isnan(last["goodput_sd_bit_s"])
    assert (out["goodput_mean_bit_s"].iloc[:5] == 3e6).all()  # every row of the point
    assert point_key({"a": 1, "b": 2}) == point_key({"b": 2, "a": 1})
