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
    assert 0 < fit.bound_ns < 100_000
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
