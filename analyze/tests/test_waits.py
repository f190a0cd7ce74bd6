"""waited_in against hand-built timelines whose every nanosecond is known: the calls the sending
thread was in during a gap's app-idle time and their shares, the same in slabs as whole, the
labels (a socket's peer from the tracer or the socket samples, a multiplexer named by the read
it woke for), the sending thread of a stream, and the per-stream summary."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hostwire.timeline import gap_tables, gaps
from hostwire.timeline.gaps import GapInputs
from hostwire.timeline.kernel_slabs import Slab
from hostwire.timeline.waits import NO_CALL, describe_fds, labels, sending_threads, stream_waits

S, O = "s:1>r:2", "o:3>r:2"
SENDER, BG0, BG1, KS, OTHER = 10, 20, 21, 99, 50
PEER = "198.18.0.2:40000"


def _inputs(waits: pd.DataFrame | None) -> GapInputs:
    """One gap of S, [0, 10000), whose app-idle time is [2000, 3000), [5000, 5500), [7000, 10000)
    (4500 ns; the other causes' parts: analyze/tests/test_timeline_gaps.py, which builds the same)."""
    data = pd.DataFrame({"t_ns": [0, 10_000, 10_150, 1_000], "stream": [S, S, S, O],
                         "wire_len": [100, 100, 100, 500], "payload_len": [1000, 1000, 1000, 400]})
    states = pd.DataFrame([
        (SENDER, 0, 3_000, "sleeping", 0), (SENDER, 3_000, 5_000, "runnable", 0),
        (SENDER, 5_000, 6_000, "running", 0), (SENDER, 6_000, 20_000, "sleeping", 0),
        (KS, 0, 1_600, "sleeping", 1), (KS, 1_600, 1_800, "runnable", 1), (KS, 1_800, 20_000, "sleeping", 1),
    ], columns=["pid", "t_start_ns", "t_end_ns", "state", "cpu"])
    running = pd.DataFrame([
        (0, 0, 3_000, 0, "swapper/0", "idle"), (0, 3_000, 4_000, BG0, "hw-bench", "bg-0"),
        (0, 4_000, 5_000, BG1, "hw-bench", "bg-1"), (0, 5_000, 20_000, SENDER, "hw-bench", "send-0"),
        (1, 0, 20_000, OTHER, "busy", "other"),
    ], columns=["cpu", "t_start_ns", "t_end_ns", "pid", "comm", "role"])
    return GapInputs(data=data, rate_bit_s=8e9, senders={S: SENDER}, states=states, running=running,
                     sends=pd.DataFrame({"stream": [S], "t_enter_ns": [5_500], "t_exit_ns": [7_000]}),
                     backlog=pd.DataFrame({"stream": [S, S], "t_ns": [0, 2_000], "backlog_bytes": [1000, 0]}),
                     window=pd.DataFrame({"stream": [S, S], "t_ns": [1_200, 1_400], "window_bytes": [50.0, 64_000.0]}),
                     transmit_pids=[KS], waits=waits)


# the sending thread's calls: futex [0, 2500) has 500 ns of app-idle time ([2000, 2500)),
# clock_nanosleep [2500, 5200) 700 ([2500, 3000) and [5000, 5200); [3000, 5000) is preempted), the
# send [5500, 7000) none (blocked-in-call), epoll_wait [7200, 9000) 1800; outside any call 1500
# ([5200, 5500), [7000, 7200), [9000, 10000)): of 4500 ns
WAITS = pd.DataFrame({"stream": S, "t_enter_ns": [0, 2_500, 5_500, 7_200], "t_exit_ns": [2_500, 5_200, 7_000, 9_000],
                      "waited_in": ["futex", "clock_nanosleep", f"sendto {PEER}", f"epoll_wait > recvfrom {PEER}"]})
EXPECTED = {f"epoll_wait > recvfrom {PEER}": 1_800, NO_CALL: 1_500, "clock_nanosleep": 700, "futex": 500}


def test_the_calls_of_a_known_gaps_app_idle_time() -> None:
    whole = gap_tables.Whole()
    gaps.explain_into(whole, _inputs(WAITS))
    table, _ = whole.tables()
    assert int(table["app_idle_ns"].iloc[0]) == 4_500  # the other causes keep their totals
    waits = whole.waits()
    assert dict(zip(waits["waited_in"], waits["ns"])) == EXPECTED
    assert list(waits["waited_in"]) == list(EXPECTED)  # the longest first
    assert waits["share"].tolist() == pytest.approx([0.4, 1_500 / 4_500, 700 / 4_500, 500 / 4_500])
    assert table["waited_in"].iloc[0] == (f"epoll_wait > recvfrom {PEER} 40.0%; (no call) 33.3%; "
                                          "clock_nanosleep 15.6%; futex 11.1%")


@pytest.mark.parametrize("bounds", [(2_200,), (2_600, 5_100, 8_000), (1, 2_000, 3_000, 5_000, 5_500, 7_000, 9_999)])
def test_a_gap_in_slabs_waited_in_what_it_waited_in_whole(bounds: tuple[int, ...]) -> None:
    """The app-idle pieces of a gap cut at slab bounds (inside calls, on their edges) add up to
    the same calls and shares."""
    inputs = _inputs(WAITS)
    whole_table, _ = gaps.explain(inputs)
    edges = [gaps.OPEN_LO, *bounds, gaps.OPEN_HI]
    sliced = gap_tables.Whole()
    gaps.explain_into(sliced, inputs, slabs=[Slab(lo, hi, inputs.states, inputs.running)
                                             for lo, hi in zip(edges[:-1], edges[1:])])
    table, _ = sliced.tables()
    pd.testing.assert_frame_equal(table, whole_table)
    assert dict(zip(sliced.waits()["waited_in"], sliced.waits()["ns"])) == EXPECTED


def test_without_the_senders_calls_nothing_is_said() -> None:
    """No call known of the sending thread (no system calls, or none in the stream's span): the
    app-idle time is not said to be outside any call."""
    for waits in (None, WAITS.assign(stream=O)):
        whole = gap_tables.Whole()
        gaps.explain_into(whole, _inputs(waits))
        assert whole.tables()[0]["waited_in"].tolist() == [""] and len(whole.waits()) == 0


def test_a_thread_with_calls_but_none_in_the_gap_was_outside_any_call() -> None:
    late = pd.DataFrame({"stream": S, "t_enter_ns": [10_050], "t_exit_ns": [10_100], "waited_in": ["futex"]})
    whole = gap_tables.Whole()
    gaps.explain_into(whole, _inputs(late))
    assert whole.tables()[0]["waited_in"].tolist() == ["(no call) 100.0%"]


def test_summary_names_the_top_calls_over_the_app_idle_time() -> None:
    """Two gaps of one stream: the summary's shares are of their app-idle time together."""
    totals, whole = gap_tables.Totals(), gap_tables.Whole()
    for sink in (totals, whole):
        gaps.explain_into(sink, _inputs(WAITS))
    summary = totals.summary()
    assert summary["waited_in"].tolist() == [f"epoll_wait > recvfrom {PEER} 40.0%; (no call) 33.3%; "
                                             "clock_nanosleep 15.6%"] * 2  # S and all
    table, _ = whole.tables()
    pd.testing.assert_frame_equal(gap_tables.summary(table, whole.waits()), summary)
    two = pd.DataFrame({"stream": [S, S, O], "waited_in": ["futex", "poll", "futex"], "ns": [300, 100, 600]})
    rows = pd.DataFrame({"stream": [S, O], "gap_ns": [1_000, 1_000], "app_idle_ns": [500, 600],
                         **{f"{c}_ns": 0 for c in gap_tables.CAUSES if c != "app_idle"}})
    got = gap_tables.summary(rows, two).set_index("stream")["waited_in"]
    # S: futex 300 and poll 100 of 500 ns (the rest outside a call); all: futex 900, poll 100 of 1100
    assert got.to_dict() == {O: "futex 100.0%", S: "futex 60.0%; poll 20.0%", "all": "futex 81.8%; poll 9.1%"}


def _calls(rows: list[tuple]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["t_enter_ns", "t_exit_ns", "pid", "tid", "call", "fd", "fd_kind", "fd_desc"])


def test_labels_name_the_peer_and_what_a_multiplexer_woke_for() -> None:
    calls = _calls([
        (0, 50, 7, 7, "epoll_wait", -1, "unknown", ""),
        (60, 70, 7, 7, "recvfrom", 5, "tcp", f"198.18.0.1:6379>{PEER}"),
        (80, 90, 7, 8, "poll", -1, "unknown", ""),           # thread 8's next call is no read
        (95, 99, 7, 8, "futex", -1, "unknown", ""),
        (100, 120, 7, 7, "accept4", 3, "tcp", "198.18.0.1:6379>*"),   # a listening socket: its own end
        (130, 140, 7, 7, "read", 9, "file", "/var/log/x"),
        (150, 160, 7, 7, "read", 4, "pipe", "pipe:[123]"),
        (170, 180, 7, 7, "select", -1, "unknown", ""),       # the thread's last call
    ])
    assert labels(calls).tolist() == [f"epoll_wait > recvfrom {PEER}", f"recvfrom {PEER}", "poll", "futex",
                                      "accept4 198.18.0.1:6379", "read /var/log/x", "read pipe", "select"]


def test_the_socket_samples_name_an_undescribed_descriptor() -> None:
    """tracefs does not describe fds: the (pid, fd)'s socket in the last sample at or before the
    call, else the first after it."""
    calls = _calls([(100, 110, 7, 7, "recvfrom", 5, "unknown", ""), (10, 20, 7, 7, "recvfrom", 6, "unknown", ""),
                    (30, 40, 7, 7, "futex", -1, "unknown", ""), (50, 60, 8, 8, "read", 5, "unknown", "")])
    sockets = pd.DataFrame({"t_ns": [50, 90, 60], "pid": [7, 7, 7], "fd": [5, 5, 6], "proto": ["tcp", "tcp", "udp"],
                            "local": ["a:1", "a:1", "a:2"], "remote": ["b:1", "c:1", "0.0.0.0:0"]})
    got = describe_fds(calls, sockets)
    assert got["fd_kind"].tolist() == ["tcp", "udp", "unknown", "unknown"]
    assert labels(got).tolist() == ["recvfrom c:1", "recvfrom a:2", "futex", "read"]


def test_a_streams_waits_are_its_sending_threads_within_its_span() -> None:
    """The thread that made most of the stream's sends; its calls reaching into the stream's
    span; an unfinished call cut at the thread's next entry."""
    calls = _calls([
        (0, 10, 7, 7, "sendto", 5, "tcp", ""), (20, 30, 7, 8, "sendto", 5, "tcp", ""),
        (40, 50, 7, 8, "sendto", 5, "tcp", ""), (55, 500, 7, 8, "futex", -1, "unknown", ""),
        (60, 70, 7, 8, "sendto", 5, "tcp", ""), (80, 90, 7, 7, "futex", -1, "unknown", ""),
        (1_000, 1_100, 7, 8, "nanosleep", -1, "unknown", ""),
    ])
    sends = pd.DataFrame({"stream": S, "pid": 7, "t_enter_ns": [0, 20, 40, 60]})
    threads = sending_threads(calls, sends, {S: 7, O: 7})
    assert threads == {S: 8, O: 7}  # O sent nothing known: the process's main thread
    got = stream_waits(calls, threads, {S: (25, 900), O: (0, 50)})
    s = got[got["stream"] == S]
    assert s[["t_enter_ns", "t_exit_ns"]].values.tolist() == [[20, 30], [40, 50], [55, 60], [60, 70]]
    assert got[got["stream"] == O]["waited_in"].astype(str).tolist() == ["sendto"]
    assert np.all(s["waited_in"].astype(str).to_numpy()[[0, 2]] == ["sendto", "futex"])


def test_a_call_below_a_twentieth_of_a_percent_is_in_the_rows_not_the_text() -> None:
    """The text names the calls of at least 0.05 % of the gap's app-idle time (below, '0.0%')."""
    from hostwire.timeline.waits import describe_waits, wait_table

    rows = [pd.DataFrame({"gap": [0, 0, 0], "waited_in": ["futex", "read x", "poll"], "ns": [9_990, 4, 6]})]
    table = wait_table(S, rows, np.array([100]), np.array([10_000]))
    assert table["waited_in"].tolist() == ["futex", "poll", "read x"]  # 6 and 4 ns: 0.06 % and 0.04 %
    assert describe_waits(table, np.array([100])).tolist() == ["futex 99.9%; poll 0.1%"]
