"""The capture's clock against the benchmark's clock exchange, on hand-built exchanges."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hostwire.metrics.clockcheck import df_wire_clock_check
from hostwire.window import Window

PORT = 38920
WINDOW = Window(10**9, 2 * 10**9)


def exchange(t1: list[int], t4: list[int], phase: str = "start") -> pd.DataFrame:
    """main.tsv rows (t2, t3 do not matter here)."""
    n = len(t1)
    return pd.DataFrame({"phase": [phase] * n, "seq": range(n), "t1_ns": t1, "t2_ns": t1, "t3_ns": t4, "t4_ns": t4})


def datagrams(requests: list[int], replies: list[int]) -> pd.DataFrame:
    """Captured UDP frames: requests to the receiver's port (16 bytes), replies from it (32), and a
    TCP frame to the same port number that must be ignored."""
    rows = [(t, 17, 40000, PORT, 16) for t in requests] + [(t, 17, PORT, 40000, 32) for t in replies]
    rows.append((min(requests + replies) + 1, 6, 40000, PORT, 16))
    df = pd.DataFrame(rows, columns=["t_ns", "proto", "sport", "dport", "payload_len"])
    return df.sort_values("t_ns", ignore_index=True)


def test_residual_and_bound_hand_computed() -> None:
    # exchange 0: t1=1000, request captured 30 us later, reply 10 us before t4=101000:
    #   offset = (30000 + (-10000)) / 2 = 10000, rtt = 100000 - 60000 = 40000 -> bound 20000
    # exchange 1: slower (rtt 60000), so exchange 0 is the one that counts
    sync = exchange([1_000, 5_001_000], [101_000, 5_121_000])
    frames = datagrams([31_000, 5_031_000], [91_000, 5_091_000])
    table = df_wire_clock_check(frames, sync, PORT, WINDOW).set_index("phase")
    row = table.loc["start"]
    assert (row.samples, row.matched) == (2, 2)
    assert row.residual_ns == 10_000 and row.bound_ns == 20_000 and row.ok
    # the same capture mapped 50 us late: outside +-rtt/2, the check fails
    late = frames.assign(t_ns=frames["t_ns"] + 50_000)
    row = df_wire_clock_check(late, sync, PORT, WINDOW).set_index("phase").loc["start"]
    assert row.residual_ns == 60_000 and not row.ok
    # mapped 15 us early: still within the bound (the check cannot see errors below rtt/2)
    early = frames.assign(t_ns=frames["t_ns"] - 15_000)
    assert df_wire_clock_check(early, sync, PORT, WINDOW).set_index("phase").loc["start"].ok


def test_lost_datagrams_and_phases() -> None:
    # a request whose reply never came is not among the stored exchanges: replies still pair up
    sync = exchange([1_000, 10_001_000], [101_000, 10_101_000])
    frames = datagrams([31_000, 5_031_000, 10_031_000], [91_000, 10_091_000])
    row = df_wire_clock_check(frames, sync, PORT, WINDOW).set_index("phase").loc["start"]
    assert row.matched == 2 and row.residual_ns == 10_000 and row.ok
    # a reply the capture missed: the pairing is unknown, nothing matched, the check fails
    missing = datagrams([31_000, 10_031_000], [91_000])
    row = df_wire_clock_check(missing, sync, PORT, WINDOW).set_index("phase").loc["start"]
    assert row.matched == 0 and np.isnan(row.residual_ns) and not row.ok
    # the end phase is matched against the frames after the window only
    end_sync = exchange([2_500_000_000], [2_500_100_000], phase="end")
    both = pd.concat([sync, end_sync], ignore_index=True)
    frames = datagrams([31_000, 10_031_000, 2_500_030_000], [91_000, 10_091_000, 2_500_090_000])
    table = df_wire_clock_check(frames, both, PORT, WINDOW).set_index("phase")
    assert list(table.index) == ["start", "end"]
    assert table.loc["end"].matched == 1 and table.loc["end"].residual_ns == pytest.approx(10_000)
