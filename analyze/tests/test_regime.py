"""What limited a run (hostwire.metrics.regime), the one link-rate rule (hostwire.linkrate) and the
wire's busy share, on hand-computed cases."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from hostwire.linkrate import given_rate, link_rate
from hostwire.metrics import synth
from hostwire.metrics.goodput import wire_busy_share
from hostwire.metrics.regime import df_goodput_fit_by_limit, limit_of, limits, throttled_share
from hostwire.metrics.sanity import Context, df_sanity
from hostwire.metrics.streams import label_streams
from hostwire.metrics.window import frame_window
from hostwire.window import Window

NAN = math.nan


@pytest.mark.parametrize("capped, throttled, busy, wire, expected", [
    (True, 0.6, 0.1, NAN, "cpu"),        # throttled in most periods
    (True, 0.5, 0.1, 0.99, "cpu"),       # at the threshold, whatever the wire
    (True, 0.4, 1.0, 0.95, "wire"),      # a cap that rarely bit, behind a busy shaper
    (True, 0.4, 1.0, 0.5, "neither"),
    (True, NAN, NAN, NAN, "neither"),    # a cap whose group never ran a period
    (False, NAN, 0.97, 0.5, "cpu"),      # no cap: a busy CPU beside an idle wire
    (False, NAN, 1.0, 0.98, "wire"),     # sieves keep the CPU busy; the wire is what limits
    (False, NAN, 0.94, 0.89, "neither"),
    (False, 0.9, 0.2, 0.2, "neither"),   # a throttled share without a cap is not read
    (False, NAN, NAN, NAN, "neither"),
])
def test_limit_by_hand(capped: bool, throttled: float, busy: float, wire: float, expected: str) -> None:
    assert limit_of(capped, throttled, busy, wire) == expected


def test_limits_keep_the_summary_index() -> None:
    index = pd.Index([7, 3, 5])
    out = limits(pd.Series([True, False, None], index=index), pd.Series([0.9, NAN, NAN], index=index),
                 pd.Series([0.0, 0.99, 0.99], index=index), pd.Series([NAN, 0.95, 0.1], index=index))
    assert list(out.index) == [7, 3, 5] and list(out) == ["cpu", "wire", "cpu"]


def test_throttled_share() -> None:
    assert throttled_share({"nr_periods": 52, "nr_throttled": 47}) == pytest.approx(47 / 52)
    assert math.isnan(throttled_share(None))
    assert math.isnan(throttled_share({"share": 0.05}))           # cpu.stat could not be read
    assert math.isnan(throttled_share({"nr_periods": 0, "nr_throttled": 0}))


def _summary(rows: list[tuple[int, int, float, str, int]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["senders", "background", "goodput_bit_s", "limit", "marked"])


def test_goodput_fit_per_regime_against_a_known_line() -> None:
    # cpu: goodput = 100 Mbit/s x mix exactly -> r 1, slope 100, intercept 0; a marked run off the
    # line is left out. wire: 10 Mbit/s whatever the mix.
    cpu = [(m, n, 100e6 * m / (m + n), "cpu", 0) for m, n in [(1, 0), (1, 1), (1, 3), (2, 6)]]
    wire = [(m, n, 10e6 + d, "wire", 0) for (m, n), d in zip([(1, 0), (1, 1), (1, 3)], [0, 20e3, -10e3])]
    rows = cpu + wire + [(1, 3, 99e6, "cpu", 1), (0, 2, NAN, "neither", 0)]
    fits = df_goodput_fit_by_limit(_summary(rows)).set_index("limit")
    assert list(fits.index) == ["cpu", "wire"]
    assert fits.loc["cpu", "runs"] == 4 and fits.loc["cpu", "mixes"] == 3   # 1/4 twice
    assert fits.loc["cpu", "pearson_r"] == pytest.approx(1.0)
    assert fits.loc["cpu", "slope_mbit_s"] == pytest.approx(100.0)
    assert fits.loc["cpu", "intercept_mbit_s"] == pytest.approx(0.0, abs=1e-9)
    assert fits.loc["wire", "goodput_mbit_s"] == pytest.approx(10.00333, rel=1e-4)
    assert fits.loc["wire", "spread_pct"] == pytest.approx(100 * 30e3 / 10.00333e6, rel=1e-4)


def test_goodput_fit_says_why_a_regime_has_none() -> None:
    fits = df_goodput_fit_by_limit(_summary([(1, 0, 5e6, "wire", 0), (2, 0, 5e6, "wire", 0)]))
    assert fits["note"].iloc[0] == "goodput against mix needs at least 3 runs, got 2"
    assert math.isnan(fits["pearson_r"].iloc[0])
    assert df_goodput_fit_by_limit(pd.DataFrame({"senders": [1]})).empty   # no limit column: no fit


def test_wire_busy_share_by_hand() -> None:
    # 10 frames of 1514 bytes at 10 Mbit/s: 10 x 1211.2 us = 12.112 ms of a 100 ms window
    window = Window(0, 100_000_000)
    assert wire_busy_share(np.full(10, 1514), window, 10**7) == pytest.approx(0.12112)
    assert wire_busy_share(np.full(10, 1514), window, 10**7, frame_overhead=24) == pytest.approx(0.12304)
    assert math.isnan(wire_busy_share(np.full(3, 1514), Window(5, 5), 10**7))


@pytest.mark.parametrize("manifest, given, expected", [
    ({"point": {"link_rate": "100mbit", "link_qdisc": "tbf-peak"}}, None, (10**8, True, "shaper")),
    ({"point": {"link_rate": "100mbit", "link_qdisc": "tbf-peak"}}, "1gbit", (10**9, True, "option")),
    ({"point": {"link_rate": "100mbit", "link_qdisc": "none"},
      "host": {"interface_driver": "veth", "interface_speed_bps": 10**10}}, None, (10**10, False, "interface-nominal")),
    ({"point": {"link_rate": "100mbit", "link_qdisc": "none"},
      "host": {"interface_driver": "ixgbe", "interface_speed_bps": 10**10}}, None, (10**10, True, "interface")),
    ({"point": {"link_rate": "100mbit", "link_qdisc": "none"}, "host": {}}, None, (10**8, False, "unshaped")),
    ({"point": {"link_rate": "10mbit", "topology": "loopback"}}, None, (10**7, False, "guess")),
    ({"point": {"senders": 1}}, None, (10**7, False, "guess")),
    (None, None, (10**7, False, "guess")),
])
def test_one_link_rate_rule(manifest: dict | None, given: str | None, expected: tuple) -> None:
    rate = link_rate(manifest, None if given is None else given_rate(given))
    assert (rate.bit_s, rate.enforced, rate.source) == expected
    assert rate.unbounded == (expected[2] in ("interface-nominal", "unshaped"))


def test_an_unshaped_veth_run_is_not_judged_against_its_nominal_rate() -> None:
    # frames 10 us apart: a 1514-byte frame takes 1.2 us at the veth's nominal 10 Gbit/s and
    # 121 us at the point's unenforced 100 Mbit/s; nothing may be called impossible or too fast
    f = synth.frames(np.arange(0, 2000) * 10_000, payload=1448)
    lab = label_streams(f)
    unshaped = Context(link_rate_known=False, link_unbounded=True)
    table = df_sanity(f, lab, frame_window(f), 10**8, {}, context=unshaped).set_index("counter")["value"]
    assert "impossible_intervals" not in table and "goodput_above_max" not in table and "wire_busy_share" not in table
    assert table["marked"] == 0 and table["goodput_wire_bit_s"] > 10**9
    shaped = df_sanity(f, lab, frame_window(f), 10**8, {}).set_index("counter")["value"]
    assert shaped["impossible_share"] == 1.0 and shaped["goodput_above_max"] == 1 and shaped["marked"] == 1
    assert shaped["wire_busy_share"] == pytest.approx(1999 * 1514 * 8 / 1e8 / 19.99e-3, rel=0.01)
