"""Frame and write intervals, bursts and the sanity counters on hand-built cases."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hostwire.errors import InputError
from hostwire.metrics import synth
from hostwire.metrics.bursts import df_bursts, split_bursts
from hostwire.metrics.intervals import Gaps, df_interval_histogram, df_intervals, log_histogram
from hostwire.metrics.sanity import df_sanity, impossible_intervals, manifest_counters
from hostwire.metrics.streams import label_streams, select_streams
from hostwire.metrics.window import frame_window
from hostwire.window import Window

A = "198.18.0.1:40000>198.18.0.2:5001"
B = "198.18.0.1:40001>198.18.0.2:5001"


def two_streams() -> pd.DataFrame:
    a = synth.frames(np.array([0, 10, 30, 60, 100]) * 1000, payload=500)
    b = synth.frames(np.array([5, 6, 7]) * 1000, payload=100, sport=40001)
    return synth.concat([a, b])


def test_interval_summary_by_hand() -> None:
    lab = label_streams(two_streams())
    table = df_intervals(lab, frame_window(lab)).set_index("stream")
    assert list(table.index) == [A, B, "all"]
    row = table.loc[A]
    assert (row["count"], row["min_ns"], row["max_ns"]) == (4, 10_000, 40_000)
    assert row["p50_ns"] == pytest.approx(25_000)  # gaps 10, 20, 30, 40 us
    assert row["p1_ns"] == pytest.approx(10_000 + 0.03 * 10_000)
    assert table.loc[B, "count"] == 2 and table.loc[B, "max_ns"] == 1000
    # all: 0,5,6,7,10,30,60,100 us -> gaps 5,1,1,3,20,30,40
    assert table.loc["all", "count"] == 7 and table.loc["all", "min_ns"] == 1000
    assert not table.isna().any().any()


def test_write_intervals_per_process() -> None:
    lab = label_streams(two_streams())
    writes = pd.DataFrame({"t_ns": [0, 50, 200, 10, 15], "pid": [7, 7, 7, 8, 8],
                           "role": ["send-0", "send-0", "send-0", "send-1", "send-1"],
                           "stream": [A, A, A, B, B], "bytes": [1] * 5})
    table = df_intervals(lab, Window(0, 100_000), writes)
    w = table[table["kind"] == "write"].set_index("stream")
    assert w.loc[A, "count"] == 2 and w.loc[A, "max_ns"] == 150 and w.loc[B, "min_ns"] == 5


def test_log_histogram_counts_every_gap_once() -> None:
    gaps = np.array([0, 1, 9, 10, 11, 999, 1000, 12345])
    h = log_histogram(Gaps(np.zeros(len(gaps), np.int64), gaps, ["s"]), "frame", per_decade=1)
    assert h["count"].sum() == len(gaps)
    bins = {(r.lo_ns, r.hi_ns): r.count for r in h.itertuples()}
    assert bins[(0, 1)] == 1 and bins[(1, 10)] == 2 and bins[(10, 100)] == 2 and bins[(100, 1000)] == 1
    assert bins[(1000, 10000)] == 1 and bins[(10000, 100000)] == 1
    lab = label_streams(two_streams())
    full = df_interval_histogram(lab, frame_window(lab))
    assert full.groupby("stream")["count"].sum().to_dict() == {A: 4, B: 2, "all": 7}


def test_bursts_by_hand() -> None:
    t = np.array([0, 1, 2, 10, 11, 30], dtype=np.int64)
    b = split_bursts(t, np.array([1, 2, 3, 4, 5, 6]), theta_ns=5)
    assert list(b["frames"]) == [3, 2, 1] and list(b["bytes"]) == [6, 9, 6]
    assert list(b["start_ns"]) == [0, 10, 30] and list(b["end_ns"]) == [2, 11, 30]
    assert list(b["off_before_ns"]) == [0, 8, 19]
    # theta = 20 x median gap; stream A gaps 10,20,30,40 us: median 25 us -> theta 500 us: one burst.
    lab = label_streams(two_streams())
    table = df_bursts(lab, frame_window(lab)).set_index("stream")
    assert table.loc[A, "theta_ns"] == 500_000 and table.loc[A, "bursts"] == 1
    assert table.loc[A, "on_off_ratio"] == float("inf") and pd.isna(table.loc[A, "off_p50_ns"])
    fixed = df_bursts(lab, frame_window(lab), theta_ns=25_000).set_index("stream")
    # gaps >= 25 us are off: 30 and 40 -> bursts {0,10,30}, {60}, {100}
    assert fixed.loc[A, "bursts"] == 3 and fixed.loc[A, "frames_max"] == 3 and fixed.loc[A, "bytes_max"] == 1500
    assert fixed.loc[A, "off_total_ns"] == 70_000 and fixed.loc[A, "on_total_ns"] == 30_000
    assert fixed.loc[A, "on_off_ratio"] == pytest.approx(30 / 70)


def test_stream_filter_by_name_or_port() -> None:
    lab = label_streams(two_streams())
    assert list(select_streams(lab, ["40001"])["stream"].cat.categories) == [B]
    assert list(select_streams(lab, [A])["stream"].cat.categories) == [A]
    with pytest.raises(InputError, match="no such stream"):
        select_streams(lab, ["9"])


def test_errors_name_the_problem() -> None:
    lab = label_streams(two_streams())
    with pytest.raises(InputError, match="data frames in the window"):
        df_intervals(lab, Window(10**9, 2 * 10**9))
    one = label_streams(synth.frames(np.array([5])))
    with pytest.raises(InputError, match="only 1 data frame"):
        df_bursts(one, frame_window(one))
    udp = two_streams().assign(proto=np.uint8(17))
    with pytest.raises(InputError, match="no TCP frames"):
        label_streams(udp)


def test_impossible_intervals_at_the_link_rate() -> None:
    # 1000-byte IP packets, 1014 on the wire: 811.2 us at 10 Mbit/s; 5 % tolerance: 770.64 us.
    t = np.array([0, 811_200, 1_500_000, 2_400_000, 2_400_000 + 770_639, 4 * 10**6, 4 * 10**6 + 770_640],
                 dtype=np.int64)
    f = synth.frames(t, payload=948)
    # gaps 811200, 688800, 900000, 770639, 829361, 770640: below 770640 are 688800 and 770639
    assert impossible_intervals(f, frame_window(f), 10**7) == (2, 6)
    assert impossible_intervals(f, frame_window(f), 10**7, tolerance=0) == (3, 6)
    # A direction without payload (the ACKs coming back over the unshaped reverse path) does not
    # count; nor do its frames interleave with the data direction's.
    back = synth.frame_table(np.array([100, 200]), np.array([0, 0]), np.array([0, 0]), np.array([1, 2]),
                             synth.RECEIVER, synth.SENDER, 5001, 40000)
    both = synth.concat([f, back])
    assert impossible_intervals(both, frame_window(both), 10**7) == (2, 6)
    assert impossible_intervals(label_streams(both), frame_window(both), 10**7) == (2, 6)
    with pytest.raises(Exception, match="tolerance"):
        impossible_intervals(f, frame_window(f), 10**7, tolerance=1.5)


def test_sanity_counters_and_marking() -> None:
    f = synth.frames(np.arange(0, 100) * 2_000_000, payload=1000)
    lab = label_streams(f)
    # The counters as the runner names them.
    clean = {"losses": {"bench_log_overflow": 0, "sieve_check_failures": 0, "wire_ps_drop": 0, "wire_ps_ifdrop": 0,
                        "sched_lost_events": 0, "sched_missed_in_stream": 0, "sched_clock_check_ok": True,
                        "syscalls_lost": 0, "syscalls_unfinished": None},
             "exit": {"hw-bench": 0, "processes": {"send-0": "ok", "bg-0": "ok"}}}
    table = df_sanity(f, lab, frame_window(f), 10**7, clean).set_index("counter")["value"]
    assert table["impossible_intervals"] == 0 and table["frame_gaps"] == 99 and table["marked"] == 0
    assert table["frames"] == 100 and table["unknown_losses"] == 1 and table["check.sched_clock_check_ok"] == 1
    assert table["tcp_retransmissions"] == 0 and table["loss.wire_ps_drop"] == 0
    lossy = {"losses": {"wire_ps_drop": 3, "wire_ps_ifdrop": 1, "sched_lost_events": 5, "sched_missed_in_stream": 2,
                        "syscalls_lost": 7, "syscalls_unfinished": 1, "bench_log_overflow": 4,
                        "sieve_check_failures": 1, "sched_clock_check_ok": False},
             "exit": {"hw-bench": 0, "processes": {"send-0": "ok", "bg-1": "exit 1"}}}
    counters = manifest_counters(lossy)
    assert counters["capture_drops"] == 4 and counters["trace_overruns"] == 7 and counters["tracer_misses"] == 8
    assert counters["log_overflows"] == 4 and counters["sieve_failures"] == 1
    assert counters["unclean_exits"] == 1 and counters["failed_checks"] == 1
    table = df_sanity(f, lab, frame_window(f), 10**7, lossy).set_index("counter")["value"]
    assert table["marked"] == 1
    only_check = {"losses": {"sched_clock_check_ok": False}, "exit": {}}
    assert df_sanity(f, lab, frame_window(f), 10**7, only_check).set_index("counter")["value"]["marked"] == 1


def handshake(t_ns: int, sender_scale: int, receiver_scale: int, isn: int = 499) -> list[pd.DataFrame]:
    """SYN from the sender and SYN-ACK from the receiver, offering these window scales (-1: none)."""
    syn = synth.frame_table(np.array([t_ns]), np.array([0]), np.array([isn]), np.array([0]), synth.SENDER,
                            synth.RECEIVER, 40000, 5001, flags=0x02, window=64240, wscale=sender_scale)
    syn_ack = synth.frame_table(np.array([t_ns + 1000]), np.array([0]), np.array([7]), np.array([isn + 1]),
                                synth.RECEIVER, synth.SENDER, 5001, 40000, flags=0x12, window=65160,
                                wscale=receiver_scale)
    return [syn, syn_ack]


def receiver_acks(t_ns: list[int], ack: list[int], window: list[int]) -> pd.DataFrame:
    n = len(t_ns)
    table = synth.frame_table(np.array(t_ns), np.zeros(n, np.int64), np.full(n, 8), np.array(ack), synth.RECEIVER,
                              synth.SENDER, 5001, 40000, flags=0x10)
    return table.assign(window=np.array(window, dtype=np.uint16))


def test_bytes_in_flight_and_advertised_window() -> None:
    data = synth.frames(np.array([0, 1, 2, 3]) * 10**6 + 10**6, payload=1000, seq0=500)
    acks = receiver_acks([3_500_000, 4_800_000], [2500, 4500], [600, 1000])
    f = synth.concat([*handshake(0, sender_scale=2, receiver_scale=7), data, acks])
    after_handshake = Window(10**6, 10**7)
    table = df_sanity(f, label_streams(f), after_handshake, 10**7).set_index("counter")["value"]
    # highest byte sent at 4 ms: 500 + 4000; acked 2500 -> 2000 bytes in flight.
    assert table["max_bytes_in_flight"] == 2000
    # the receiver offered shift 7 and the sender offered one too: 600 << 7
    assert table["min_advertised_window"] == 600 * 128 and table["window_scale_unknown_streams"] == 0
    # with the handshake in the window, its SYN-ACK's 65160 (never scaled) is the smallest
    table = df_sanity(f, label_streams(f), frame_window(f), 10**7).set_index("counter")["value"]
    assert table["min_advertised_window"] == 65160


def test_window_scale_needs_both_ends_and_the_handshake() -> None:
    data = synth.frames(np.array([1, 2]) * 10**6, payload=1000, seq0=500)
    acks = receiver_acks([3_000_000], [1500], [600])
    # the sender offered no scale: the receiver's shift is not in effect (RFC 7323)
    f = synth.concat([*handshake(0, sender_scale=-1, receiver_scale=7), data, acks])
    table = df_sanity(f, label_streams(f), Window(10**6, 10**7), 10**7).set_index("counter")["value"]
    assert table["min_advertised_window"] == 600
    # a second stream seen without its handshake: its scale is unknown, so its windows are left out
    other = synth.frame_table(np.array([3_500_000]), np.array([0]), np.array([8]), np.array([1]), synth.RECEIVER,
                              synth.SENDER, 5002, 40002, flags=0x10, window=5)
    other_data = synth.frames(np.array([2_500_000]), payload=100, sport=40002, dport=5002)
    f2 = synth.concat([*handshake(0, sender_scale=3, receiver_scale=7), data, acks, other_data, other])
    table = df_sanity(f2, label_streams(f2), Window(10**6, 10**7), 10**7).set_index("counter")["value"]
    assert table["min_advertised_window"] == 600 * 128 and table["window_scale_unknown_streams"] == 1
    # frames that carry no wscale column: nothing is known
    bare = f.drop(columns="wscale")
    table = df_sanity(bare, label_streams(bare), Window(10**6, 10**7), 10**7).set_index("counter")["value"]
    assert table["min_advertised_window"] == -1 and table["window_scale_unknown_streams"] == 1
