"""Jain's index, goodput and bytes delivered, on hand-computed cases with a starved stream."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hostwire.errors import InputError
from hostwire.metrics import synth
from hostwire.metrics.fairness import bytes_per_stream, df_fairness, jain_index
from hostwire.metrics.goodput import df_goodput, goodput_against_mix, goodput_bps
from hostwire.metrics.streams import delivered_bytes, label_streams
from hostwire.window import Window

A = "198.18.0.1:40000>198.18.0.2:5001"
B = "198.18.0.1:40001>198.18.0.2:5001"
C = "198.18.0.1:40002>198.18.0.2:5001"


def capture() -> pd.DataFrame:
    """A: 9 new segments of 1000 bytes plus one retransmission; B: 3 segments of 1000 bytes;
    C: a handshake and nothing else (starved). Receiver ACKs in between."""
    ms = 10**6
    a_t = np.arange(1, 11) * ms
    a_seq = np.array([0, 1000, 2000, 3000, 4000, 3000, 5000, 6000, 7000, 8000]) + 2**32 - 3500  # wraps
    a = synth.frame_table(a_t, np.full(10, 1000), a_seq % 2**32, np.zeros(10), synth.SENDER, synth.RECEIVER,
                          40000, 5001)
    b = synth.frames(np.array([2, 4, 6]) * ms + 500, payload=1000, sport=40001, seq0=77)
    syn = synth.frame_table(np.array([0]), np.array([0]), np.array([5]), np.array([0]), synth.SENDER,
                            synth.RECEIVER, 40002, 5001, flags=0x02)
    synack = synth.frame_table(np.array([100]), np.array([0]), np.array([9]), np.array([6]), synth.RECEIVER,
                               synth.SENDER, 5001, 40002, flags=0x12)
    acks = synth.frame_table(np.arange(1, 11) * ms + 300, np.zeros(10, np.int64), np.zeros(10),
                             (a_seq + 1000) % 2**32, synth.RECEIVER, synth.SENDER, 5001, 40000, flags=0x10,
                             window=2000)
    return synth.concat([a, b, syn, synack, acks])


def test_jain_by_hand() -> None:
    assert jain_index([5, 5, 5, 5]) == 1.0
    assert jain_index([8, 0, 0, 0]) == pytest.approx(0.25)  # one stream has everything: 1/n
    # (9000 + 3000 + 0)^2 / (3 * (9000^2 + 3000^2)) = 144e6 / 270e6
    assert jain_index([9000, 3000, 0]) == pytest.approx(144 / 270)
    with pytest.raises(InputError, match="none of the 2"):
        jain_index([0, 0])
    with pytest.raises(InputError):
        jain_index([])


def test_streams_take_the_direction_of_their_payload() -> None:
    lab = label_streams(capture())
    assert sorted(lab["stream"].cat.categories) == [A, B, C]
    acks = lab[(lab["sport"] == 5001).to_numpy() & (lab["dport"] == 40000).to_numpy()]
    assert (acks["stream"] == A).all() and not acks["data_dir"].any()
    assert lab["is_data"].sum() == 13


def test_delivered_bytes_counts_a_retransmission_once_across_a_sequence_wrap() -> None:
    data = delivered_bytes(label_streams(capture()))
    per = data.groupby(data["stream"].astype(str))["new_bytes"].sum()
    assert per[A] == 9000 and per[B] == 3000
    assert data["retransmit"].sum() == 1
    assert data.loc[data["retransmit"], "t_ns"].iloc[0] == 6 * 10**6


def test_fairness_and_goodput_with_a_starved_stream() -> None:
    lab = label_streams(capture())
    data = delivered_bytes(lab)
    per = data.groupby(data["stream"].astype(str))["new_bytes"].sum().reindex([A, B, C], fill_value=0)
    table = df_fairness(per)
    assert list(table["stream"]) == [A, B, C, "all"]
    assert list(table["bytes"]) == [9000, 3000, 0, 12000]
    assert table["jain"].iloc[0] == pytest.approx(144 / 270) and (table["n"] == 3).all()
    window = Window(0, 20 * 10**6)  # 20 ms
    gp = df_goodput(per, window)
    assert gp.set_index("stream").loc["all", "bit_s"] == pytest.approx(12000 * 8 / 0.020)
    assert gp.set_index("stream").loc[C, "bit_s"] == 0
    assert (gp["seconds"] == 0.020).all()


def test_bytes_per_stream_from_receiver_logs_keeps_the_window_and_the_starved() -> None:
    received = pd.DataFrame({"t_ns": [5, 10, 15, 20, 25], "stream": ["x", "x", "y", "y", "x"],
                             "bytes": [100, 200, 300, 400, 500]})
    per = bytes_per_stream(received, Window(10, 20), streams=["x", "y", "z"])
    assert per.to_dict() == {"x": 200, "y": 700, "z": 0}
    assert goodput_bps(900, Window(10, 20)) == pytest.approx(900 * 8 / 10e-9)


def test_goodput_against_mix() -> None:
    m = np.array([1, 2, 3, 1, 2])
    n = np.array([3, 2, 1, 1, 6])
    mix = m / (m + n)
    g = 1e6 + 4e6 * mix
    fit = goodput_against_mix(m, n, g)
    assert fit["pearson_r"] == pytest.approx(1.0)
    assert fit["slope_bit_s"] == pytest.approx(4e6) and fit["intercept_bit_s"] == pytest.approx(1e6)
    fit = goodput_against_mix(m, n, 5e6 - 2e6 * mix + np.array([1e4, -1e4, 0, 2e4, -2e4]))
    assert -1 < fit["pearson_r"] < -0.9
    with pytest.raises(InputError, match="at least 3"):
        goodput_against_mix(m[:2], n[:2], g[:2])
