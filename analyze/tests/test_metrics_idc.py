"""IDC and Hurst against processes whose dispersion is known (DESIGN.md section 8)."""

from __future__ import annotations

import numpy as np
import pytest

from hostwire.errors import InputError
from hostwire.metrics import synth
from hostwire.metrics.hurst import variance_time_fit
from hostwire.metrics.idc import MIN_BINS, bin_counts, idc_curve, t_grid
from hostwire.window import Window

S = 10**9


def idc_by_loop(t_ns: list[int], start: int, end: int, t: int, weights: list[int] | None = None) -> tuple[int, float, float]:
    """The definition, literally: K = floor(W / t) bins from the start; N_k; var (ddof 1) / mean."""
    k = (end - start) // t
    counts = [0.0] * k
    for i, x in enumerate(t_ns):
        b = (x - start) // t
        if 0 <= b < k:
            counts[b] += 1 if weights is None else weights[i]
    mean = sum(counts) / k
    var = sum((c - mean) ** 2 for c in counts) / (k - 1)
    return k, mean, var


def idc_sd_poisson(bins: np.ndarray, mean: np.ndarray) -> np.ndarray:
    """Standard deviation of the sample IDC of K independent Poisson(m) counts:
    Var(s^2) = 2 m^2 / (K - 1) + m / K, divided by m."""
    return np.sqrt(2.0 / (bins - 1) + 1.0 / (mean * bins))


def test_matches_the_definition_by_loop() -> None:
    rng = np.random.default_rng(7)
    t = np.sort(rng.integers(5 * 10**6, 5 * 10**6 + 2 * S, 3000))
    w = rng.integers(1, 1500, len(t))
    window = Window(5 * 10**6, 5 * 10**6 + 2 * S)
    ts = t_grid(window.length_ns, 12)
    frames_curve = idc_curve(t, window, ts)
    bytes_curve = idc_curve(t, window, ts, w)
    assert len(frames_curve) == len(ts)
    for row, brow in zip(frames_curve.itertuples(), bytes_curve.itertuples()):
        k, mean, var = idc_by_loop(list(t), window.start_ns, window.end_ns, row.t_ns)
        assert (row.bins, row.mean) == (k, pytest.approx(mean, rel=1e-12))
        assert row.var == pytest.approx(var, rel=1e-9)
        _, bmean, bvar = idc_by_loop(list(t), window.start_ns, window.end_ns, brow.t_ns, list(w))
        assert brow.idc == pytest.approx(bvar / bmean, rel=1e-9)


def test_bins_start_at_the_window_start_and_are_half_open() -> None:
    t = np.array([100, 109, 110, 119, 120, 125, 150], dtype=np.int64)
    assert list(bin_counts(t, 100, 10, 4)) == [2, 2, 2, 0]
    cum = np.concatenate([[0.0], np.cumsum([1, 2, 3, 4, 5, 6, 7])])
    assert list(bin_counts(t, 100, 10, 4, cum)) == [3, 7, 11, 0]


def test_grid_is_log_spaced_from_1ms_to_a_tenth_of_the_window() -> None:
    ts = t_grid(60 * S, 30)
    assert ts[0] == 10**6 and ts[-1] == 6 * S and len(ts) == 30
    ratios = ts[1:] / ts[:-1]
    assert np.allclose(ratios, ratios[0], rtol=1e-6)
    assert all((60 * S) // ts >= MIN_BINS)
    with pytest.raises(InputError, match="too short"):
        t_grid(9 * 10**6)


def test_poisson_is_one_within_sampling_error_at_every_t() -> None:
    rng = np.random.default_rng(11)
    t = synth.poisson(rng, 2000.0, 100 * S)
    curve = idc_curve(t, Window(0, 100 * S), t_grid(100 * S, 30))
    assert len(curve) == 30
    sd = idc_sd_poisson(curve["bins"].to_numpy(), curve["mean"].to_numpy())
    assert np.all(np.abs(curve["idc"].to_numpy() - 1.0) <= 4 * sd)
    # The same check rejects a process that is not Poisson.
    regular = synth.gamma_renewal(rng, 8.0, 500_000, 100 * S)
    curve = idc_curve(regular, Window(0, 100 * S), t_grid(100 * S, 30))
    sd = idc_sd_poisson(curve["bins"].to_numpy(), curve["mean"].to_numpy())
    assert not np.all(np.abs(curve["idc"].to_numpy() - 1.0) <= 4 * sd)


@pytest.mark.parametrize("shape", [0.5, 4.0])
def test_gamma_renewal_tends_to_the_squared_variation_coefficient(shape: float) -> None:
    rng = np.random.default_rng(int(shape * 10))
    t = synth.gamma_renewal(rng, shape, 200_000, 200 * S)
    curve = idc_curve(t, Window(0, 200 * S), t_grid(200 * S, 30))
    # Far beyond the mean gap (0.2 ms), where enough bins remain for a tight estimate.
    large = curve[(curve["t_ns"] >= 50 * 10**6) & (curve["bins"] >= 400)]
    assert len(large) >= 5
    sd = idc_sd_poisson(large["bins"].to_numpy(), large["mean"].to_numpy()) / shape
    assert np.all(np.abs(large["idc"].to_numpy() - 1.0 / shape) <= 4 * sd + 0.02 / shape)


def test_constant_rate_tends_to_zero() -> None:
    t = synth.constant_rate(1_000_000, 100 * S, phase_ns=123_457)
    curve = idc_curve(t, Window(0, 100 * S), t_grid(100 * S, 30))
    idc = curve["idc"].to_numpy()
    # Counts differ by at most one between bins: population variance <= 1/4, so with ddof 1
    # IDC <= (1/4) K / (K - 1) / mean, and the mean is t / gap.
    k = curve["bins"].to_numpy()
    assert np.all(idc <= 0.25 * k / (k - 1) / curve["mean"].to_numpy() + 1e-12)
    assert np.allclose(curve["mean"], curve["t_ns"] / 1_000_000, rtol=0.01)
    assert idc[-1] < 1e-3


def test_pareto_onoff_aggregate_is_long_range_dependent() -> None:
    alpha = 1.4
    rng = np.random.default_rng(0)
    duration = 4000 * S
    t = synth.pareto_onoff(rng, sources=50, duration_ns=duration, alpha=alpha, min_period_ns=1e8, gap_ns=2e7)
    ts = t_grid(duration, 30, t_min_ns=10**7)
    curve = idc_curve(t, Window(0, duration), ts)
    idc = curve["idc"].to_numpy()
    assert idc[-1] > 20 * idc[0]
    assert np.mean(np.diff(idc) > 0) >= 0.8
    fit = variance_time_fit(curve["t_ns"].to_numpy(), curve["var"].to_numpy(),
                            fit_from_ns=int(np.sqrt(float(ts[0]) * float(ts[-1]))))
    assert abs(fit["hurst"] - (3 - alpha) / 2) <= 0.1


def test_hurst_of_poisson_is_one_half() -> None:
    rng = np.random.default_rng(3)
    t = synth.poisson(rng, 1000.0, 200 * S)
    curve = idc_curve(t, Window(0, 200 * S), t_grid(200 * S, 30))
    fit = variance_time_fit(curve["t_ns"].to_numpy(), curve["var"].to_numpy(), fit_to_ns=S)
    assert abs(fit["hurst"] - 0.5) < 0.05
    assert fit["fit_to_ns"] <= S and fit["points"] >= 3


def test_hurst_fit_needs_three_points() -> None:
    with pytest.raises(InputError, match="at least 3"):
        variance_time_fit(np.array([1e6, 2e6, 4e6]), np.array([1.0, 2.0, 4.0]), fit_from_ns=2 * 10**6)


@pytest.mark.parametrize("edge_cost", [0, 10**9])
def test_both_counting_methods_agree_with_the_loop(edge_cost: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Per t the code counts either at the bin edges or by runs of events; force each in turn."""
    from hostwire.metrics import idc

    monkeypatch.setattr(idc, "EDGE_COST", edge_cost)
    rng = np.random.default_rng(5)
    t = np.sort(np.concatenate([rng.integers(0, S, 2000), np.full(50, 3 * 10**8), [S - 1]]))
    w = rng.integers(1, 100, len(t))
    window = Window(0, S)
    ts = t_grid(S, 8)
    frames_curve = idc_curve(t, window, ts)
    bytes_curve = idc_curve(t, window, ts, w)
    for row, brow in zip(frames_curve.itertuples(), bytes_curve.itertuples()):
        _, mean, var = idc_by_loop(list(t), 0, S, row.t_ns)
        assert row.mean == pytest.approx(mean) and row.var == pytest.approx(var, rel=1e-12)
        _, bmean, bvar = idc_by_loop(list(t), 0, S, brow.t_ns, list(w))
        assert brow.var == pytest.approx(bvar, rel=1e-9) and brow.mean == pytest.approx(bmean)
