"""The receiver's clock mapped onto the sender's: a synthetic receiver 123 ms ahead and drifting by
50 ppm is realigned within 50 us from its clock exchanges and the traffic, by the end exchange
when it is trustworthy and by the convex hull of the traffic's bounds when it is not; no read
lands before the frame that brought its bytes; the logged reads are found among the traced ones."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hostwire.errors import InputError
from hostwire.timeline import clocks

T0 = 5_000_000_000_000
OFFSET = 123_000_000
DRIFT = 50e-6


def receiver_clock(t: np.ndarray) -> np.ndarray:
    return np.rint(t + OFFSET + DRIFT * (t - T0)).astype(np.int64)


def _sync(end_rtt_ns: int) -> pd.DataFrame:
    rows = []
    for phase, base, one_way in (("start", T0 - 500_000_000, 40_000), ("end", T0 + 2_500_000_000, end_rtt_ns // 2)):
        for seq in range(8):
            t1 = base + seq * 5_000_000
            extra = 0 if seq == 3 else 30_000 * (seq + 1)  # one clean exchange per phase
            t2_true = t1 + one_way + extra
            t3_true = t2_true + 500
            t4 = t3_true + one_way + extra
            rows.append({"phase": phase, "seq": seq, "t1_ns": t1, "t2_ns": int(receiver_clock(np.array([t2_true]))[0]),
                         "t3_ns": int(receiver_clock(np.array([t3_true]))[0]), "t4_ns": t4})
    df = pd.DataFrame(rows)
    return df.assign(rtt_ns=(df.t4_ns - df.t1_ns) - (df.t3_ns - df.t2_ns),
                     offset_ns=((df.t2_ns - df.t1_ns) + (df.t3_ns - df.t4_ns)) // 2)


@pytest.fixture
def traffic() -> tuple[pd.DataFrame, pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(7)
    n = 2000
    t_send = T0 + np.arange(n, dtype=np.int64) * 1_000_000
    frames = pd.DataFrame({"stream": "s>r", "t_ns": t_send, "seq_end": 12 + 1448 * np.arange(1, n + 1)})
    latency = 20_000 + rng.exponential(200_000, n).astype(np.int64)
    latency[::50] = 20_000  # the floor is reached now and then
    t_true = t_send + latency
    reads = pd.DataFrame({"stream": "s>r", "t_raw_ns": receiver_clock(t_true), "bytes": 1448,
                          "upto_bytes": frames["seq_end"].to_numpy()})
    return frames, reads, t_true


@pytest.mark.parametrize("end_rtt_ns, method", [(90_000, "exchanges"), (24_000_000, "traffic-hull")])
def test_offset_and_drift_are_recovered(traffic: tuple, end_rtt_ns: int, method: str) -> None:
    frames, reads, t_true = traffic
    bounds = clocks.read_bounds(frames, reads)
    assert len(bounds) == len(reads)
    fit = clocks.fit(_sync(end_rtt_ns), bounds)
    assert fit.method == method
    assert fit.drift_ppm == pytest.approx(50.0, abs=5.0)
    aligned = fit.to_sender(reads["t_raw_ns"].to_numpy())
    assert np.abs(aligned - t_true).max() <= 50_000
    assert (aligned >= bounds["t_send_ns"].to_numpy()).all()  # no read before its frame was sent
    assert fit.bound_lo_ns <= fit.offset_ns <= fit.bound_hi_ns
    # the bound holds the error; with a 24 ms end round trip the constraints leave the drift open
    # (lines up to milliseconds apart at the run's end meet them all), and the bound says so
    assert np.abs(aligned - t_true).max() <= fit.bound_ns + 1
    assert 0 < fit.bound_ns < (100_000 if method == "exchanges" else np.inf)
    # the bound holds the truth at t_ref
    truth = OFFSET + DRIFT * (fit.t_ref_ns - T0)
    assert fit.bound_lo_ns - 1 <= truth <= fit.bound_hi_ns + 1


def test_traffic_lowers_an_estimate_that_would_receive_before_sending(traffic: tuple) -> None:
    frames, reads, _ = traffic
    sync = _sync(90_000)
    sync["offset_ns"] += 300_000  # an exchange estimate 300 us too high: reads would precede sends
    fit = clocks.fit(sync, clocks.read_bounds(frames, reads))
    assert fit.lowered_ns > 200_000
    aligned = fit.to_sender(reads["t_raw_ns"].to_numpy())
    assert (aligned >= frames["t_ns"].to_numpy()).all()


def test_bytes_before_uses_stamps_when_sizes_repeat() -> None:
    traced = np.array([12, 1448, 1448, 1448, 1448, 1448, 1448, 1448, 1448], dtype=np.int64)
    # reads complete at irregular times (a regular beat would make every shift fit)
    traced_t = np.cumsum(np.array([5, 900, 1300, 700, 2100, 800, 1500, 1100, 950], dtype=np.int64) * 1_000)
    logged_idx = np.arange(4, 8)  # the receiver logged reads 4..7 (all 1448 bytes)
    logged_t = receiver_clock(traced_t[logged_idx] + T0)
    got = clocks.bytes_before(traced[logged_idx], logged_t, traced, traced_t + T0, probe=4)
    assert got == int(traced[:4].sum())
    assert clocks.bytes_before(np.array([999]), np.array([1]), traced, traced_t) is None


def test_no_start_exchange() -> None:
    sync = _sync(90_000)
    with pytest.raises(InputError, match="phase start"):
        clocks.fit(sync[sync["phase"] == "end"], pd.DataFrame(columns=["stream", "t_send_ns", "t_raw_ns", "upper_ns"]))


def _exchanges(phases: list[tuple[str, int, list[tuple[int, int, int]]]]) -> pd.DataFrame:
    """Exchanges with known delays: per phase (name, first t1, [(request's one-way, the receiver's
    wait before it stamps t2, answer's one-way)]), 5 ms apart. A wait delays t2, t3 and t4 alike:
    the round trip grows by it and the estimate by half of it."""
    rows = []
    for phase, base, delays in phases:
        for seq, (one_way, wait, back) in enumerate(delays):
            t1 = base + seq * 5_000_000
            t2 = t1 + one_way + wait
            t4 = t2 + 500 + back
            rows.append({"phase": phase, "seq": seq, "t1_ns": t1, "t2_ns": int(receiver_clock(np.array([t2]))[0]),
                         "t3_ns": int(receiver_clock(np.array([t2 + 500]))[0]), "t4_ns": t4})
    df = pd.DataFrame(rows)
    return df.assign(rtt_ns=(df.t4_ns - df.t1_ns) - (df.t3_ns - df.t2_ns),
                     offset_ns=((df.t2_ns - df.t1_ns) + (df.t3_ns - df.t4_ns)) // 2)


START = T0 - 500_000_000
END = T0 + 2_500_000_000


def _errors(fit: clocks.ClockFit, traffic: tuple, bounds: pd.DataFrame) -> np.ndarray:
    """The fit's error on every read, after checking that no read lands before its frame was sent."""
    _, reads, t_true = traffic
    assert (fit.to_sender(bounds["t_raw_ns"].to_numpy()) >= bounds["t_send_ns"].to_numpy()).all()
    return np.abs(fit.to_sender(reads["t_raw_ns"].to_numpy()) - t_true)


def test_late_end_exchanges_tilt_the_line(traffic: tuple) -> None:
    """Every end exchange waited 300 us in the receiver before it stamped t2 (a receiver sharing
    its CPU): round trip 340 us, still trusted next to the start's 120 us, estimate 150 us high,
    drift 50 ppm high. Lowering the whole line under the traffic's bounds put its start 80 us
    below the truth, under the start exchanges' lower bounds (bound_ns came out 0); the feasible
    line nearest the exchanges keeps the prompt start and moves the late end."""
    frames, reads, _ = traffic
    bounds = clocks.read_bounds(frames, reads)
    sync = _exchanges([("start", START, [(60_000, 0, 60_000)] * 8), ("end", END, [(20_000, 300_000, 20_000)] * 8)])
    fit = clocks.fit(sync, bounds)
    error = _errors(fit, traffic, bounds)
    assert error.max() <= 30_000  # 78 us by lowering
    assert error.max() <= fit.bound_ns < 100_000
    assert fit.method == "exchanges" and fit.crossed_ns == 0


def test_one_outlier_start_exchange_moves_most(traffic: tuple) -> None:
    """The start phase's only answered exchange waited 1.4 ms before t2 was stamped (estimate 700
    us high); the end's are prompt. Lowering the line that joins them left its far end 450 us
    low; the nearest feasible line, each estimate's miss counted in its own half round trip,
    moves the outlier and keeps the prompt end."""
    frames, reads, _ = traffic
    bounds = clocks.read_bounds(frames, reads)
    sync = _exchanges([("start", START, [(40_000, 1_400_000, 40_000)]), ("end", END, [(40_000, 0, 40_000)] * 8)])
    fit = clocks.fit(sync, bounds)
    error = _errors(fit, traffic, bounds)
    assert error.max() <= 30_000  # 447 us by lowering
    assert error.max() <= fit.bound_ns < 100_000
    assert fit.method == "exchanges" and fit.lowered_ns > 500_000  # the start's estimate moved down


def test_crossing_constraints_give_no_bound(traffic: tuple) -> None:
    """One read's bytes credited to a frame sent 1 ms after the read (a wrong byte count): no line
    meets every constraint. The line stays under every upper bound, crossed_ns says by how much
    the constraints cross, and bound_ns is NaN instead of the 0 of a line lowered below them."""
    frames, reads, t_true = traffic
    bounds = clocks.read_bounds(frames, reads)
    bounds.loc[1000, "t_send_ns"] = t_true[1000] + 1_000_000
    bounds.loc[1000, "upper_ns"] = bounds.loc[1000, "t_raw_ns"] - bounds.loc[1000, "t_send_ns"]
    fit = clocks.fit(_sync(90_000), bounds)
    assert not fit.bound_ns < 200_000  # lowering said 0 with the line 1 ms off
    assert np.isnan(fit.bound_ns) and 900_000 < fit.crossed_ns < 1_100_000
    assert fit.bound_lo_ns > fit.bound_hi_ns
    _errors(fit, traffic, bounds)


def test_bytes_before_when_stamps_lag_their_reads() -> None:
    """A receiver sharing its CPU: while data waits, each read returns 15 us after it is called and
    the receiver stamps it 0.5 us later, but now and then a preemption delays the stamp by
    milliseconds; a read that finds no data waits 0.3-1.5 ms. Then the logged stamps differ from
    the exits of the reads one position later by a nearly constant amount (the next call's 16 us),
    which fooled the most-constant-difference rule by one read (64 KiB: its upper bounds then lay
    up to milliseconds below the truth); every stamp lies between its read's exit and the next
    one's only at the right position."""
    rng = np.random.default_rng(3)
    n = 200
    exits, stamps = [], []
    t = T0
    for i in range(n):
        t += 15_000 if rng.random() < 0.8 else int(rng.integers(300_000, 1_500_000))  # the read
        exits.append(t)
        t += 500 + (int(rng.integers(2_000_000, 30_000_000)) if rng.random() < 0.1 else 0)  # the stamp
        stamps.append(t)
        t += 1_000  # the next call
    exits, stamps = np.array(exits), np.array(stamps)
    sizes = np.full(n, 65536, dtype=np.int64)
    first = 60
    got = clocks.bytes_before(sizes[first:], receiver_clock(stamps[first:]), sizes, exits)
    assert got == 65536 * first


def test_bytes_before_when_every_read_waits_alike() -> None:
    """A slow link: every read waits about 1.2 ms for its one segment and is stamped 0.5 us after
    it returns, but two stamps come 54 and 324 us late. Every position then meets the interval
    condition (each stamp, shifted by whole reads, still falls between two exits); the spread of
    the differences (max - min) is smallest at a wrong position whose jitter happens to cancel the
    late stamps; the typical delay beyond the least (the median) is near zero only at the right one."""
    rng = np.random.default_rng(11)
    n = 300
    exits = T0 + np.cumsum(1_200_000 + rng.integers(-40_000, 40_000, n))
    lag = 500 + rng.integers(-50, 50, n)
    lag[[75, 92]] = [324_000, 54_000]
    sizes = np.full(n, 1448, dtype=np.int64)
    first = 70
    got = clocks.bytes_before(sizes[first:], receiver_clock(exits[first:] + lag[first:]), sizes, exits)
    assert got == 1448 * first
