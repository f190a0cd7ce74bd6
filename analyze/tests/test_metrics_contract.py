"""ATM cells and the zero-loss GCRA contract, checked by a plain, separate GCRA (DESIGN.md section 8)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hostwire.errors import InputError
from hostwire.metrics import cells, contract


def plain_cells(a: list[int], n: list[int], d: float) -> list[float]:
    out: list[float] = []
    for ai, ni in zip(a, n):
        for _ in range(ni):
            out.append(ai if not out else max(ai, out[-1] + d))
    return out


def plain_gcra_conforms(c: list[float], t: float, tau: float) -> bool:
    """ITU-T I.371 virtual scheduling: TAT := c_1; c conforms iff c >= TAT - tau; then
    TAT := max(c, TAT) + T. A non-conforming cell leaves TAT alone."""
    tat = c[0]
    ok = True
    for x in c:
        if x < tat - tau:
            ok = False
            continue
        tat = max(x, tat) + t
    return ok


def random_frames(rng: np.random.Generator, n: int, mean_gap_ns: float) -> tuple[np.ndarray, np.ndarray]:
    gaps = rng.exponential(mean_gap_ns, n)
    gaps[rng.random(n) < 0.3] = 0  # some frames arrive together: back-to-back cells
    t = (10**9 + np.cumsum(gaps)).astype(np.int64)
    return t, rng.integers(40, 1501, n)


def test_cells_per_frame_by_hand() -> None:
    # ceil((L + 16) / 48): 40 -> 56/48 -> 2; 80 -> 96/48 -> 2; 81 -> 97 -> 3; 1500 -> 1516 -> 32.
    assert list(cells.cells_per_frame(np.array([40, 80, 81, 1500]))) == [2, 2, 3, 32]
    assert list(cells.cells_per_frame(np.array([40, 80]), encap=0)) == [1, 2]


def test_cells_per_write_segments_at_the_mss() -> None:
    # 3000 bytes = 1448 + 1448 + 104: (1448+52+16)/48 -> 32 cells each, (104+52+16)/48 -> 4 cells.
    assert list(cells.cells_per_write(np.array([3000, 0, 1448]))) == [68, 0, 32]


def test_cell_time_is_integral_at_10_100_1000_mbit() -> None:
    assert [cells.cell_time_ns(r) for r in (10**7, 10**8, 10**9)] == [42400, 4240, 424]
    assert isinstance(cells.cell_time_ns(34_000_000), float)


@pytest.mark.parametrize("rate", [10**7, 34_000_000])
def test_cell_stamps_follow_the_back_to_back_recursion(rate: int) -> None:
    rng = np.random.default_rng(rate % 1000)
    a, ip_len = random_frames(rng, 400, 400_000)
    n = cells.cells_per_frame(ip_len)
    d = cells.cell_time_ns(rate)
    cs = cells.cell_stamps(a, n, d)
    expect = plain_cells(list(a), list(n), d)
    assert cs.count == len(expect) == n.sum()
    # float64 rounding: the running sum of the plain loop drifts by ulps, the closed form does not
    np.testing.assert_allclose(cs.c, expect, rtol=0, atol=1e-3)
    if isinstance(d, int):
        assert cs.c.dtype == np.int64 and list(cs.c) == expect
    assert cs.mean_rate_per_ns() == pytest.approx(len(expect) / (expect[-1] - expect[0] + d))


@pytest.mark.parametrize("seed", range(6))
def test_mbs_min_conforms_and_one_less_does_not(seed: int) -> None:
    rng = np.random.default_rng(seed)
    a, ip_len = random_frames(rng, int(rng.integers(20, 200)), float(rng.choice([2e6, 5e6, 1e7])))
    d = cells.cell_time_ns(10**7)
    cs = cells.cell_stamps(a, cells.cells_per_frame(ip_len), d)
    c = [int(x) for x in cs.c]
    t_p = d
    grid = contract.scr_grid(cs.mean_rate_per_ns(), t_p, 50)
    assert len(grid) >= 40 and grid[-1] == t_p
    checked_below = 0
    for t_s in grid:
        t_s = int(t_s)
        tau = contract.tau_min(cs.c, t_s)
        assert contract.tau_min_cells(cs, t_s) == tau  # the busy-period shortcut agrees
        mbs = contract.mbs_min(tau, t_s, t_p)
        assert mbs is not None
        assert plain_gcra_conforms(c, t_s, (mbs - 1) * (t_s - t_p))
        assert plain_gcra_conforms(c, t_s, tau) and (tau == 0 or not plain_gcra_conforms(c, t_s, tau - 1))
        if mbs >= 2:
            assert not plain_gcra_conforms(c, t_s, (mbs - 2) * (t_s - t_p))
            checked_below += 1
    assert checked_below >= 10
    # The peak-rate bucket at the line cell rate never needs a tolerance: cells are 1/R apart.
    assert contract.tau_min(cs.c, t_p) == 0


def test_tau_min_by_hand() -> None:
    c = np.array([0, 10, 20, 100], dtype=np.int64)
    # T = 30: TAT 0 -> 30 (c=10 late by 20) -> 60 (c=20 late by 40) -> 90 -> c=100 early: tau = 40.
    assert contract.tau_min(c, 30) == 40
    assert contract.tau_min(c, 10) == 0
    assert contract.mbs_min(40, 30, 10) == 3  # 1 + ceil(40 / 20)
    assert contract.mbs_min(41, 30, 10) == 4
    assert contract.mbs_min(0, 10, 10) == 1 and contract.mbs_min(5, 10, 10) is None


def test_float_cell_time_contract_conforms() -> None:
    rng = np.random.default_rng(42)
    a, ip_len = random_frames(rng, 150, 1e6)
    d = cells.cell_time_ns(34_000_000)
    cs = cells.cell_stamps(a, cells.cells_per_frame(ip_len), d)
    c = list(cs.c)
    for t_s in contract.scr_grid(cs.mean_rate_per_ns(), d, 20):
        tau = contract.tau_min(cs.c, int(t_s))
        assert contract.tau_min_cells(cs, int(t_s)) == pytest.approx(tau, abs=1e-3)
        mbs = contract.mbs_min(tau, int(t_s), d)
        if mbs is None:
            continue
        assert plain_gcra_conforms(c, int(t_s), (mbs - 1) * (int(t_s) - d) + 1e-6)


def test_busy_periods_by_hand() -> None:
    cs = cells.cell_stamps(np.array([0, 100, 10**6]), np.array([2, 3, 1]), 42400)
    # cells 0, 42400 | 100 -> 84800, 127200, 169600 continue the run | 1e6 starts a new one
    assert list(cs.c) == [0, 42400, 84800, 127200, 169600, 10**6]
    first, last = cs.busy_periods()
    assert list(first) == [0, 5] and list(last) == [4, 5]


def test_min_scr_is_the_edge_of_the_mbs_curve() -> None:
    rng = np.random.default_rng(5)
    a, ip_len = random_frames(rng, 300, 5e6)
    d = cells.cell_time_ns(10**7)
    cs = cells.cell_stamps(a, cells.cells_per_frame(ip_len), d)
    for mbs in (1, 2, 32, 200, 1000):
        row = contract.min_scr("s", cs, d, mbs)
        t_s = row["t_s_ns"]
        assert contract.mbs_min(contract.tau_min(cs.c, t_s), t_s, d) <= mbs
        if not row["bounded_by_trace"]:
            assert contract.mbs_min(contract.tau_min(cs.c, t_s + 1), t_s + 1, d) > mbs
        assert plain_gcra_conforms(list(cs.c), t_s, row["bt_ns"])
    # A burst tolerance shorter than the longest back-to-back run of cells forces SCR = PCR.
    assert contract.min_scr("s", cs, d, 2)["t_s_ns"] == d
    scrs = [contract.min_scr("s", cs, d, m)["scr_cells_s"] for m in (200, 1000)]
    assert scrs[1] < scrs[0] < 1e9 / d


def test_min_scr_with_a_huge_mbs_is_bounded_by_the_trace() -> None:
    c = cells.cell_stamps(np.array([0, 10**6]), np.array([3, 3]), 42400)
    row = contract.min_scr("s", c, 42400, 10**6)
    assert row["bounded_by_trace"] and row["t_s_ns"] == math.ceil(c.c[-1] - c.c[0] + 42400)


def test_contract_table_averages_over_streams() -> None:
    rng = np.random.default_rng(9)
    d = cells.cell_time_ns(10**7)
    streams = {}
    for name in ("x", "y"):
        a, ip_len = random_frames(rng, 100, 2e6)
        streams[name] = cells.cell_stamps(a, cells.cells_per_frame(ip_len), d)
    table = contract.df_contract(streams, 1e9 / d, points=10)
    assert set(table["stream"]) == {"x", "y", "all"}
    for t_s, rows in table.groupby("t_s_ns"):
        per = rows[rows["stream"] != "all"]
        avg = rows[rows["stream"] == "all"]
        assert avg["mbs_min"].iloc[0] == pytest.approx(per["mbs_min"].mean())
        assert avg["scr_cells_s"].iloc[0] == pytest.approx(1e9 / t_s)
    assert not table.isna().any().any()


def test_no_cells_is_an_error() -> None:
    with pytest.raises(InputError, match="no cells"):
        cells.cell_stamps(np.array([5]), np.array([0]), 42400)
