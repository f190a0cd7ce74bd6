"""hostwire's model against closed forms: MVA's own (one station, balanced stations), one sender
alone on the wire, N sieves and one sender under a quota with no wire limit; the calibration's
straight line recovered from points made by the formula; the guard that keeps predicted points
out of the calibration; the command's errors."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hostwire.errors import InputError
from hostwire.model import calibration as cal
from hostwire.model.layers import PAYLOAD_SHARE, Calibration, Setup, predict, sender_share
from hostwire.model.mva import solve_closed
from hostwire.campaign.repetitions import point_key, with_point_stats
from hostwire.model.validate import model_table, point_mean_lines, summary_lines, within_share

ANALYZE = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("population", [1, 2, 7, 40])
def test_mva_one_station_serves_at_its_rate(population: int) -> None:
    result = solve_closed([0.004], population)
    assert result.throughput == pytest.approx(250.0, rel=1e-12)
    assert result.queue_lengths[0] == pytest.approx(population, rel=1e-12)


@pytest.mark.parametrize("stations,population", [(2, 1), (2, 5), (3, 10), (5, 30)])
def test_mva_balanced_stations(stations: int, population: int) -> None:
    demand = 0.002
    result = solve_closed([demand] * stations, population)
    assert result.throughput == pytest.approx(population / ((population + stations - 1) * demand), rel=1e-12)
    assert result.queue_lengths.sum() == pytest.approx(population, rel=1e-12)


def test_mva_one_customer_with_think_time() -> None:
    result = solve_closed([0.001, 0.003], 1, think_s=0.006)
    assert result.throughput == pytest.approx(1 / 0.010, rel=1e-12)


def test_mva_tends_to_the_bottleneck() -> None:
    assert solve_closed([0.001, 0.004], 400).throughput == pytest.approx(250.0, rel=1e-9)
    # one customer sees no queue: 1 / (D1 + D2); two see the other half the time (exact MVA by hand)
    assert solve_closed([0.001, 0.004], 1).throughput == pytest.approx(200.0, rel=1e-12)
    q1, q2 = 200.0 * 0.001, 200.0 * 0.004
    assert solve_closed([0.001, 0.004], 2).throughput == pytest.approx(2 / (0.001 * (1 + q1) + 0.004 * (1 + q2)))


def test_mva_refuses_what_has_no_answer() -> None:
    with pytest.raises(ValueError):
        solve_closed([0.0, 0.0], 3)
    with pytest.raises(ValueError):
        solve_closed([0.001], 0)


@pytest.mark.parametrize("rate,efficiency", [(10e6, 0.98), (100e6, 0.89), (1e9, 1.0)])
def test_one_sender_alone_on_the_wire(rate: float, efficiency: float) -> None:
    """No CPU bound (C = inf): the goodput is the payload share of the enforced rate times eta."""
    setup = Setup(cpu_share=0.0, link_rate_bit_s=rate, rate_enforced=True, queue_frames=1000)
    p = predict(1, 0, setup, Calibration(math.inf, 1.0, efficiency, "formula"))
    assert p.goodput_bit_s == pytest.approx(efficiency * rate * 1448 / 1514, rel=1e-12)
    assert p.regime == "wire" and p.jain == 1.0 and p.cpu_wait_share == 0.0
    # and the mix cannot matter where only the wire limits
    assert predict(1, 20, setup, Calibration(math.inf, 1.0, efficiency, "formula")).goodput_bit_s == p.goodput_bit_s


@pytest.mark.parametrize("background", [0, 1, 2, 5, 10, 20])
@pytest.mark.parametrize("weight", [1.0, 0.7, 1.8])
def test_sieves_and_one_sender_under_a_quota(background: int, weight: float) -> None:
    """No wire limit: the sender's goodput is C w / (w + N), the weighted fair share of the quota."""
    setup = Setup(cpu_share=0.05, link_rate_bit_s=100e6, rate_enforced=False, queue_frames=1000)
    capacity = 176e6
    p = predict(1, background, setup, Calibration(capacity, weight, 1.0, "formula"))
    assert p.goodput_bit_s == pytest.approx(capacity * weight / (weight + background), rel=1e-12)
    assert p.regime == "cpu"
    assert p.cpu_wait_share == pytest.approx(1.0, rel=1e-12)  # every frame of the loop waits at the CPU


def test_regime_follows_the_inputs() -> None:
    """The same grid point is wire- or CPU-limited as the quota's capacity is above or below the wire."""
    setup = Setup(cpu_share=0.05, link_rate_bit_s=100e6, rate_enforced=True, queue_frames=50)
    wire = 0.9 * 100e6 * PAYLOAD_SHARE
    high = predict(10, 2, setup, Calibration(400e6, 1.0, 0.9, "x"))
    low = predict(10, 20, setup, Calibration(100e6, 1.0, 0.9, "x"))
    assert high.regime == "wire" and high.goodput_bit_s <= wire and high.goodput_bit_s > 0.99 * wire
    assert low.regime == "cpu" and low.goodput_bit_s == pytest.approx(100e6 / 3, rel=0.02)
    deep = predict(10, 2, Setup(0.05, 100e6, True, 1000), Calibration(400e6, 1.0, 0.9, "x"))
    assert "deep-fifo" in deep.flags and "deep-fifo" not in high.flags


def _calibration_summary(capacity: float, weight: float, key: tuple, senders: int = 3,
                         background: tuple[int, ...] = (0, 3, 12)) -> pd.DataFrame:
    share, qdisc, rate, queue = key
    rows = [{"senders": senders, "background": n, "status": "complete", "limit": "cpu",
             "goodput_bit_s": capacity * sender_share(senders, n, weight), "wire_busy_share": float("nan"),
             "sender_cpu_share": share, "link_qdisc": qdisc, "link_rate": rate, "link_queue": queue}
            for n in background]
    return pd.DataFrame(rows)


@pytest.mark.parametrize("capacity,weight", [(176e6, 0.713), (480e6, 0.16), (50e6, 1.0)])
def test_calibration_recovers_the_line(capacity: float, weight: float) -> None:
    key = (0.05, "none", "100mbit", 1000)
    got = cal.calibrate(_calibration_summary(capacity, weight, key), key, "synthetic")
    assert got.cpu_goodput_bit_s == pytest.approx(capacity, rel=1e-9)
    assert got.sender_weight == pytest.approx(weight, rel=1e-9)


def test_calibration_of_unshaped_runs_without_a_wire_busy_share_column() -> None:
    # the summary of a campaign whose links were never shaped has no such column at all
    key = (0.05, "none", "100mbit", 1000)
    summary = _calibration_summary(176e6, 0.713, key).drop(columns="wire_busy_share")
    got = cal.calibrate(summary, key, "synthetic")
    assert got.sender_weight == pytest.approx(0.713, rel=1e-9) and got.wire_efficiency == 1.0


def test_calibration_without_a_cpu_limit_and_the_wire_efficiency() -> None:
    key = (0.0, "tbf-peak", "10mbit", 1000)
    wire = _calibration_summary(1e9, 1.0, key).assign(limit="wire", goodput_bit_s=9.4e6, wire_busy_share=0.9837)
    cpu = _calibration_summary(300e6, 0.5, (0.0, "none", "10mbit", 1000), background=(0, 12))
    got = cal.calibrate(pd.concat([wire, cpu], ignore_index=True), key, "synthetic")
    assert got.wire_efficiency == pytest.approx(0.9837)
    assert got.cpu_goodput_bit_s == pytest.approx(300e6, rel=1e-9) and got.sender_weight == pytest.approx(0.5)
    never = cal.calibrate(wire.assign(link_qdisc="none"), (0.0, "none", "10mbit", 1000), "synthetic")
    assert math.isinf(never.cpu_goodput_bit_s)


def test_calibration_of_a_missing_setup_names_it() -> None:
    key = (0.05, "none", "100mbit", 1000)
    with pytest.raises(InputError, match="no complete run of the set-up no shaper, CPU cap 10 %"):
        cal.calibrate(_calibration_summary(1e8, 1.0, key), (0.1, "none", "100mbit", 1000), "cal")


def test_calibration_points_avoid_the_predicted_ones() -> None:
    keys = [(0.05, "none", "100mbit", 1000)]
    plan = cal.plan_for({(m, n) for m in (1, 2, 5, 10, 15, 20) for n in (0, 1, 2, 5, 10, 20)}, keys)
    assert (plan.senders, plan.background) == (3, (0, 3, 12))
    plan = cal.plan_for({(3, 12), (4, 0)}, keys)
    assert (plan.senders, plan.background) == (3, (0, 4, 16))  # the next sieve counts
    assert cal.plan_for({(3, 0), (4, 3)}, keys).senders == 4  # no run of 3 senders can be used
    everything = {(m, n) for m in cal.CALIBRATION_SENDERS for n in (0,)}
    with pytest.raises(InputError, match="--calibration"):
        cal.plan_for(everything, keys)
    assert len(cal.plan_for(set(), keys + [(0.05, "none", "1gbit", 50)]).setups) == 1  # rate and queue unshaped: one
    unshaped_cpu = cal.plan_for(set(), [(0.0, "tbf-peak", "10mbit", 1000)]).setups
    assert (0.0, "none", "10mbit", 1000) in unshaped_cpu
    text = cal.config_text(plan)
    assert "senders = [3]" in text and 'link_qdisc = "none"' in text


def test_model_table_errors_and_verdict(tmp_path: Path) -> None:
    key = (0.05, "none", "100mbit", 1000)
    calibration = Calibration(176e6, 0.7, 1.0, "synthetic")
    rows = []
    for i, (m, n, factor) in enumerate([(1, 0, 1.0), (1, 2, 1.05), (5, 5, 0.8), (20, 20, 1.0)]):
        model = 176e6 * sender_share(m, n, 0.7)
        rows.append({"run_id": f"r{i}", "directory": f"r{i}", "repetition": 0, "senders": m, "background": n,
                     "sender_cpu_share": key[0], "link_qdisc": key[1], "link_rate": key[2], "link_queue": key[3],
                     "setup": "no shaper, CPU cap 5 %", "status": "complete", "marked": 0, "limit": "cpu",
                     "goodput_bit_s": model / factor, "jain": 0.95})
    table = model_table(tmp_path, pd.DataFrame(rows), {key: calibration})
    # MVA over 10 frames per sender with one station is exactly the bound: the errors are the factors'
    assert table["goodput_error_pct"].to_numpy() == pytest.approx([0.0, 5.0, -20.0, 0.0], abs=1e-9)
    assert table["jain_error_pct"].to_numpy() == pytest.approx([100 * (1 / 0.95 - 1)] * 4)
    assert np.isnan(table["cpu_wait_share"]).all()  # no timeline tables in these run directories
    assert within_share(table["goodput_error_pct"]) == (3, 4)
    lines = summary_lines(table)
    assert lines[0].startswith("goodput: 3 of 4 runs (75 %) predicted within 10 %")
    assert "worst: M=5 N=5" in lines[1] and "-20.0 %" in lines[1]


def test_repeatability_is_each_run_against_its_points_other_runs(tmp_path: Path) -> None:
    key = (0.05, "none", "100mbit", 1000)
    rows = []
    # point (10, 0) three times: 100, 200, 300 Mbit/s; point (5, 5) twice: 50 and 55; (1, 0) once
    for i, (m, n, mbps, jain) in enumerate([(10, 0, 100, 1.0), (10, 0, 200, 0.9), (10, 0, 300, 0.8),
                                            (5, 5, 50, 1.0), (5, 5, 55, 1.0), (1, 0, 7, 1.0)]):
        rows.append({"run_id": f"r{i}", "directory": f"r{i}", "repetition": i, "senders": m, "background": n,
                     "sender_cpu_share": key[0], "link_qdisc": key[1], "link_rate": key[2], "link_queue": key[3],
                     "status": "complete", "marked": 0, "limit": "cpu", "goodput_bit_s": mbps * 1e6, "jain": jain})
    table = model_table(tmp_path, pd.DataFrame(rows), {key: Calibration(176e6, 0.7, 1.0, "synthetic")})
    # by hand: 100 against (200 + 300) / 2 = 250 is +150 %; 200 against 200 is 0; 300 against 150 is -50 %;
    # 50 against 55 is +10 %; 55 against 50 is -9.09 %; a point recorded once has none
    assert table["goodput_repeat_error_pct"].to_numpy()[:5] == pytest.approx([150.0, 0.0, -50.0, 10.0, -100 / 11])
    assert np.isnan(table["goodput_repeat_error_pct"].iloc[5])
    assert table["jain_repeat_error_pct"].to_numpy()[:3] == pytest.approx([-15.0, 0.0, 100 * (0.95 / 0.8 - 1)])
    line = next(x for x in summary_lines(table) if "repeatability" in x)
    assert "within 10 % of 3 of 5 runs (60 %)" in line and "up to 150 %" in line


def test_the_model_against_each_points_mean_and_the_means_interval(tmp_path: Path) -> None:
    key = (0.05, "none", "100mbit", 1000)
    calibration = Calibration(176e6, 0.7, 1.0, "synthetic")
    rows = []
    # three points, the model's figure times: (1.00, 1.02, 0.98) mean 1.00 sd 0.02; (1.2, 1.2) mean 1.2;
    # (0.5, 1.5, 1.0) mean 1.0 sd 0.5
    for m, n, factors in ((1, 0, (1.00, 1.02, 0.98)), (5, 2, (1.2, 1.2)), (10, 10, (0.5, 1.5, 1.0))):
        for rep, factor in enumerate(factors):
            point = {"senders": m, "background": n, "sender_cpu_share": key[0], "link_qdisc": key[1],
                     "link_rate": key[2], "link_queue": key[3]}
            rows.append({"run_id": f"{m}-{n}-{rep}", "directory": f"{m}-{n}-{rep}", "repetition": rep, **point,
                         "point_key": point_key(point), "status": "complete", "marked": 0, "limit": "cpu",
                         "goodput_bit_s": 176e6 * sender_share(m, n, 0.7) * factor, "jain": 1.0})
    table = model_table(tmp_path, with_point_stats(pd.DataFrame(rows)), {key: calibration})
    by_point = table.drop_duplicates(["senders", "background"]).set_index("senders")
    # by hand: the model against the means 1.00, 1.2 and 1.0 of its own figure
    assert by_point["goodput_point_error_pct"].to_numpy() == pytest.approx([0.0, 100 * (1 / 1.2 - 1), 0.0])
    assert by_point["goodput_point_n"].tolist() == [3, 2, 3]
    lines = point_mean_lines(table)
    assert lines[0].startswith("goodput against each point's mean over its repetitions (n = 2-3): 2 of 3 points (67 %)")
    # t(0.975, 2) = 4.303: ±4.303 · 0.02 / √3 = ±4.97 % and ±4.303 · 0.5 / √3 = ±124.2 %; the sd-0 point ±0
    assert "the model inside the mean's 95 % interval at 2" in lines[0]
    assert "±0.0 to ±124.2 % (median ±5.0 %); 2 of 3 points' means are known to within 10 %" in lines[1]
    one_each = table.assign(goodput_point_n=1)
    assert point_mean_lines(one_each) == []


def _hostwire(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hostwire", *args], capture_output=True, text=True,
                          env={"PYTHONPATH": str(ANALYZE), "PATH": "/usr/bin:/bin"}, timeout=60)


def test_command_errors_are_one_line(tmp_path: Path) -> None:
    bad = _hostwire("model", str(tmp_path), "--predict", "senders=4,colour=blue")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "colour" in bad.stderr
    missing = _hostwire("model", str(tmp_path), "--calibration", str(tmp_path))
    assert missing.returncode == 1 and missing.stderr.count("\n") == 1
    assert "summary.parquet: missing" in missing.stderr and "Traceback" not in missing.stderr


def test_calibration_that_holds_a_predicted_point_is_refused(tmp_path: Path) -> None:
    key = (0.05, "none", "100mbit", 1000)
    campaign, calibration = tmp_path / "c", tmp_path / "cal"
    campaign.mkdir(), calibration.mkdir()
    grid = _calibration_summary(176e6, 0.7, key, senders=5, background=(0, 3)).assign(
        directory=["a", "b"], run_id=["a", "b"], repetition=0, setup="s", marked=0, jain=1.0)
    grid.to_parquet(campaign / "summary.parquet")
    _calibration_summary(176e6, 0.7, key, senders=5).to_parquet(calibration / "summary.parquet")
    refused = _hostwire("model", str(campaign), "--calibration", str(calibration))
    assert refused.returncode == 1 and "holds predicted points [(5, 0), (5, 3)]" in refused.stderr
    _calibration_summary(176e6, 0.7, key, senders=3).to_parquet(calibration / "summary.parquet")
    done = _hostwire("model", str(campaign), "--calibration", str(calibration),
                     "--predict", "senders=40,background=5,link_rate=1gbit")
    assert done.returncode == 0, done.stderr
    assert "goodput: 2 of 2 runs (100 %) predicted within 10 %" in done.stdout
    assert "prediction (no run at this point) M=40 N=5" in done.stdout
    assert (campaign / "model.parquet").exists() and (campaign / "model.csv").exists()


def test_windows_held_mean_and_jain() -> None:
    from hostwire.model.windows import held_mean, jain

    t = np.array([0, 100, 400, 1000])
    values = np.array([10.0, 20.0, 40.0, 80.0])
    # window [50, 600]: 10 held 50, 20 held 300, 40 held 200 -> (500 + 6000 + 8000) / 550
    assert held_mean(t, values, 50, 600) == pytest.approx(14500 / 550)
    assert held_mean(t, values, 1000, 2000) == pytest.approx(80.0)
    assert np.isnan(held_mean(np.array([3000]), np.array([1.0]), 0, 2000))
    assert jain(np.array([5.0, 5.0, 5.0])) == pytest.approx(1.0)
    assert jain(np.array([1.0, 0.0, 0.0, 0.0])) == pytest.approx(0.25)
    # 9 windows of 95 frames beside 11 of 9: the split measured behind the 1000-frame queue
    assert jain(np.array([95.0] * 9 + [9.0] * 11)) == pytest.approx((9 * 95 + 99) ** 2 / (20 * (9 * 95**2 + 11 * 81)))


def test_capacity_and_weight_between_calibrated_sender_counts() -> None:
    """Measured at 3 and 12 senders: at 6 (the middle in log M) the geometric means; outside, the nearest."""
    key = (0.05, "none", "100mbit", 1000)
    runs = pd.concat([_calibration_summary(150e6, 2.0, key, senders=3),
                      _calibration_summary(300e6, 1.0, key, senders=12)], ignore_index=True)
    got = cal.calibrate(runs, key, "synthetic")
    assert [m for m, _, _ in got.by_senders] == [3, 12]
    assert got.at(6)[0] == pytest.approx(math.sqrt(150e6 * 300e6), rel=1e-9)
    assert got.at(6)[1] == pytest.approx(math.sqrt(2.0), rel=1e-9)
    assert got.at(1) == pytest.approx((150e6, 2.0)) and got.at(20) == pytest.approx((300e6, 1.0))
    setup = Setup(cpu_share=0.05, link_rate_bit_s=100e6, rate_enforced=False, queue_frames=1000)
    assert predict(12, 4, setup, got).goodput_bit_s == pytest.approx(300e6 * 12 / 16, rel=1e-12)


def test_report_section_marks_the_misses(tmp_path: Path) -> None:
    from hostwire.report.model_section import plot_predicted_against_measured, read_model_table, section_text

    text, shown, classes = section_text(read_model_table(tmp_path), tmp_path)
    assert shown is None and "hostwire model" in text  # not modelled yet: says how
    key = (0.05, "none", "100mbit", 1000)
    rows = [{"run_id": f"r{i}", "directory": f"r{i}", "repetition": 0, "senders": m, "background": n,
             "sender_cpu_share": 0.05, "link_qdisc": "none", "link_rate": "100mbit", "link_queue": 1000,
             "setup": "s", "status": "complete", "marked": 0, "limit": "cpu",
             "goodput_bit_s": 176e6 * sender_share(m, n, 0.7) / f, "jain": j}
            for i, (m, n, f, j) in enumerate([(1, 0, 1.0, 1.0), (2, 2, 0.5, 0.99), (5, 5, 1.0, 0.6)])]
    table = model_table(tmp_path, pd.DataFrame(rows), {key: Calibration(176e6, 0.7, 1.0, "synthetic")})
    text, shown, classes = section_text(table, tmp_path)
    assert "1 of 3 runs" not in text and "goodput: 2 of 3 runs (67 %)" in text
    assert list(classes) == ["", "bad", "bad"]  # +100 % goodput; Jain 1 against 0.6
    assert plot_predicted_against_measured(table) is not None
