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


def _campaign_of_two_points() -> pd.DataFrame:
    """Point M=1 N=0 five times (1..5 Mbit/s, the case above), point M=2 N=2 once."""
    rows = []
    for goodput, (m, n) in zip([1e6, 2e6, 3e6, 4e6, 5e6, 7e6], [(1, 0)] * 5 + [(2, 2)]):
        point = {"senders": m, "background": n, "sender_cpu_share": 0.05, "link_rate": "100mbit",
                 "link_qdisc": "none"}
        rows.append({**point, "point_key": point_key(point), "goodput_bit_s": goodput, "jain": 1.0,
                     "mix": m / (m + n), "marked": 0, "limit": "cpu"})
    return with_point_stats(pd.DataFrame(rows))


def test_the_report_table_has_one_row_per_repeated_point() -> None:
    from hostwire.campaign.tables import df_point_intervals

    table = df_point_intervals(_campaign_of_two_points())
    assert len(table) == 1  # the point recorded once has no interval to give
    row = table.iloc[0]
    assert (row["M"], row["N"], row["n"]) == (1, 0, 5)
    assert row["goodput_mean_mbps"] == pytest.approx(3.0) and row["goodput_ci95_mbps"] == "1.04-4.96"
    assert row["goodput_ci95_half_pct"] == pytest.approx(100 * 1.963 / 3, rel=1e-3)
    assert df_point_intervals(with_point_stats(_campaign_of_two_points().iloc[5:])).empty


def test_the_goodput_figure_draws_each_repeated_points_interval() -> None:
    from hostwire.report.plots import POINT_MEAN_LABEL, plot_goodput_vs_mix

    fig = plot_goodput_vs_mix(_campaign_of_two_points(), None)
    bars = [c for ax in fig.axes for c in ax.containers if type(c).__name__ == "ErrorbarContainer"]
    assert len(bars) == 1
    line, _caps, (segments,) = bars[0]
    assert list(line.get_xdata()) == [1.0] and list(line.get_ydata()) == pytest.approx([3.0])
    (bottom, top), = [seg[:, 1] for seg in segments.get_segments()]
    assert (bottom, top) == pytest.approx((3.0 - 1.963, 3.0 + 1.963), rel=1e-3)
    assert POINT_MEAN_LABEL in [t.get_text() for legend in fig.legends for t in legend.get_texts()]
