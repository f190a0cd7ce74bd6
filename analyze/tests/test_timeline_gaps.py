"""Gap explanation against a hand-built timeline whose every part is known: each cause, the
precedence when several hold, the tasks named as preempters, the threshold, the sum of the parts,
and what a run without a kernel trace or writes cannot tell."""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd
import pytest

from hostwire.errors import InputError
from hostwire.metrics import synth
from hostwire.metrics.streams import label_streams
from hostwire.timeline import gaps, intervals, sequence
from hostwire.timeline.gaps import GapInputs
from hostwire.timeline.kernel_slabs import Slab, no_kernel_tables
from hostwire.window import Window

S, O = "s:1>r:2", "o:3>r:2"
SENDER, BG0, BG1, KS, OTHER = 10, 20, 21, 99, 50
RATE = 8e9  # one byte per ns: a frame of wire_len bytes holds the link wire_len ns
PARTS = [f"{c}_ns" for c in gaps.CAUSES]


def _inputs(**over: object) -> GapInputs:
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
    args: dict = dict(
        data=data, rate_bit_s=RATE, senders={S: SENDER}, states=states, running=running,
        sends=pd.DataFrame({"stream": [S], "t_enter_ns": [5_500], "t_exit_ns": [7_000]}),
        backlog=pd.DataFrame({"stream": [S, S], "t_ns": [0, 2_000], "backlog_bytes": [1000, 0]}),
        window=pd.DataFrame({"stream": [S, S], "t_ns": [1_200, 1_400], "window_bytes": [50.0, 64_000.0]}),
        transmit_pids=[KS])
    args.update(over)
    return GapInputs(**args)  # type: ignore[arg-type]


def _check_sum(table: pd.DataFrame) -> None:
    assert len(table)
    assert (table[PARTS].sum(axis=1) - table["gap_ns"]).abs().max() <= 5_000  # within 5 us
    assert (table[PARTS].sum(axis=1) == table["gap_ns"]).all()  # integer ns: exactly


def test_every_cause_of_a_known_gap() -> None:
    table, pre = gaps.explain(_inputs())
    _check_sum(table)
    assert table["stream"].tolist() == [S]  # the 150 ns gap is below 2 x 100 ns; O has one frame
    row = table.iloc[0]
    assert (row["t_start_ns"], row["t_end_ns"], row["gap_ns"], row["threshold_ns"]) == (0, 10_000, 10_000, 200)
    assert {c: int(row[c]) for c in PARTS} == {
        "on_wire_ns": 100,              # [0, 100): the gap's first frame
        "receiver_window_ns": 200,      # [1200, 1400): window 50 < one segment (1000), over wire-busy
        "wire_busy_ns": 300,            # [1000, 1200) and [1400, 1500): O's frame, backlog not empty
        "preempted_ns": 2_200,          # [1600, 1800): ksoftirqd waits with bytes queued; [3000, 5000): sender
        "blocked_in_call_ns": 1_500,    # [5500, 7000)
        "app_idle_ns": 4_500,           # [2000, 3000), [5000, 5500), [7000, 10000)
        "unexplained_ns": 1_200,        # [100, 1000), [1500, 1600), [1800, 2000): bytes queued, link free
        "retransmit_timeout_ns": 0, "awaiting_ack_ns": 0,  # no acknowledgement or retransmission given
        "vcpu_stolen_ns": 0,  # no freeze given
        "qdisc_ns": 0, "send_path_ns": 0,  # no kernel below TCP given
    }
    assert (row["proto"], row["pid"], row["comm"]) == ("tcp", SENDER, "")
    got = pre[["pid", "role", "cpu", "ns"]].values.tolist()
    assert got == [[BG0, "bg-0", 0, 1_000], [BG1, "bg-1", 0, 1_000], [OTHER, "other", 1, 200]]
    assert pre["share"].round(4).tolist() == [round(1000 / 2200, 4), round(1000 / 2200, 4), round(200 / 2200, 4)]
    assert row["preempted_by"].startswith(f"{BG0} hw-bench bg-0 45.5%")
    assert table.attrs["cannot_tell"] == []


def test_late_acknowledgements_take_only_what_nothing_else_explains() -> None:
    """The receiver acknowledging late over [500, 1900) counts only where bytes are queued and no
    other cause holds: [500, 1000), [1500, 1600) and [1800, 1900), 700 ns of the unexplained time;
    the wire-busy and preempted pieces inside it keep their causes, and after 2000 (backlog empty)
    the sender's own state wins."""
    late = pd.DataFrame({"stream": [S, S], "t_start_ns": [500, 8_000], "t_end_ns": [1_900, 9_000]})
    row = gaps.explain(_inputs(late_acks=late))[0].iloc[0]
    assert {c: int(row[c]) for c in PARTS} == {
        "on_wire_ns": 100, "receiver_window_ns": 200 + 700, "wire_busy_ns": 300, "preempted_ns": 2_200,
        "blocked_in_call_ns": 1_500, "app_idle_ns": 4_500, "unexplained_ns": 1_200 - 700,
        "retransmit_timeout_ns": 0, "awaiting_ack_ns": 0, "vcpu_stolen_ns": 0, "qdisc_ns": 0, "send_path_ns": 0}


def test_the_kernel_below_tcp_takes_only_what_the_link_and_the_cpu_leave() -> None:
    """The next frame in the queueing discipline over [900, 1700) and the stack's path from a
    release over [1800, 2100), on the known gap: qdisc takes [900, 1000) and [1500, 1600) of the
    unexplained time (the link's [1000, 1200) and [1400, 1500), the window's [1200, 1400) and the
    waiting ksoftirqd's [1600, 1700) keep their causes); send-path takes [1800, 2000), and after
    2000 (backlog empty) the sender's own state wins."""
    held = pd.DataFrame({"stream": [S], "t_start_ns": [900], "t_end_ns": [1_700]})
    path = pd.DataFrame({"stream": [S], "t_start_ns": [1_800], "t_end_ns": [2_100]})
    row = gaps.explain(_inputs(qdisc_holds=held, send_paths=path))[0].iloc[0]
    assert {c: int(row[c]) for c in PARTS} == {
        "on_wire_ns": 100, "receiver_window_ns": 200, "wire_busy_ns": 300, "preempted_ns": 2_200,
        "blocked_in_call_ns": 1_500, "app_idle_ns": 4_500, "qdisc_ns": 200, "send_path_ns": 200,
        "unexplained_ns": 1_200 - 400, "retransmit_timeout_ns": 0, "awaiting_ack_ns": 0, "vcpu_stolen_ns": 0}


def test_under_a_cpu_quota_waiting_on_an_idle_cpu_is_throttling() -> None:
    """The sender runnable over [3000, 5000) while its CPU runs idle: without a quota that is its
    wake-up (app-idle: outside any call, backlog empty); under a cgroup quota the quota holds it:
    preempted, the idle task named with the role "throttled"."""
    running = pd.DataFrame([(0, 0, 5_000, 0, "swapper/0", "idle"), (0, 5_000, 20_000, SENDER, "hw-bench", "send-0"),
                            (1, 0, 20_000, OTHER, "busy", "other")],
                           columns=["cpu", "t_start_ns", "t_end_ns", "pid", "comm", "role"])
    free = gaps.explain(_inputs(running=running))[0].iloc[0]
    capped, pre = gaps.explain(_inputs(running=running, cpu_quota=True))
    row = capped.iloc[0]
    assert int(free["preempted_ns"]) == 200 and int(row["preempted_ns"]) == 200 + 2_000  # ksoftirqd's 200 both times
    assert int(row["app_idle_ns"]) == int(free["app_idle_ns"]) - 2_000
    assert pre[pre["pid"] == 0][["role", "ns"]].values.tolist() == [["throttled", 2_000]]


def test_late_acknowledgements_from_a_capture() -> None:
    """Hand-computed: the handshake's round trip (100 ns) is the shortest, so an acknowledgement is
    late 200 ns after the frame that first carried the oldest unacknowledged byte. Frames of 1000
    bytes at 1000, 2000, 3000; the first acknowledged at 2100, all at 10000."""
    isn = 2**32 - 1500
    syn = synth.frame_table(np.array([0]), np.array([0]), np.array([isn]), np.array([0]), synth.SENDER,
                            synth.RECEIVER, 40000, 5001, flags=0x02, wscale=7)
    syn_ack = synth.frame_table(np.array([100]), np.array([0]), np.array([7]), np.array([isn + 1]),
                                synth.RECEIVER, synth.SENDER, 5001, 40000, flags=0x12, wscale=7)
    data = synth.frames(np.array([1000, 2000, 3000]), payload=1000, seq0=(isn + 1) % 2**32)
    acks = synth.frame_table(np.array([2100, 10_000]), np.zeros(2, np.int64), np.full(2, 8),
                             np.array([(isn + 1001) % 2**32, (isn + 3001) % 2**32]), synth.RECEIVER,
                             synth.SENDER, 5001, 40000, flags=0x10)
    late = sequence.late_acknowledgements(label_streams(synth.concat([syn, syn_ack, data, acks])))
    starts, ends = intervals.union(late["t_start_ns"].to_numpy(), late["t_end_ns"].to_numpy())
    assert list(zip(starts.tolist(), ends.tolist())) == [(1200, 2100), (2200, 10_000)]


def test_preempted_takes_precedence_over_blocked_in_call() -> None:
    table, pre = gaps.explain(_inputs(sends=pd.DataFrame({"stream": [S], "t_enter_ns": [4_500], "t_exit_ns": [7_000]})))
    _check_sum(table)
    row = table.iloc[0]
    # [4500, 5000): inside the call and runnable -> preempted; the call's rest [5000, 7000) blocked
    assert (row["preempted_ns"], row["blocked_in_call_ns"], row["app_idle_ns"]) == (2_200, 2_000, 4_000)


def test_the_application_causes_need_an_empty_backlog() -> None:
    # bytes queued the whole gap: the sender's own preemption and calls do not hold the stream back
    table, pre = gaps.explain(_inputs(backlog=pd.DataFrame({"stream": [S], "t_ns": [0], "backlog_bytes": [5000]})))
    _check_sum(table)
    row = table.iloc[0]
    assert (row["blocked_in_call_ns"], row["app_idle_ns"]) == (0, 0)
    assert row["preempted_ns"] == 200  # only ksoftirqd's wait
    assert row["unexplained_ns"] == 10_000 - 100 - 200 - 300 - 200
    assert pre["pid"].tolist() == [OTHER]


def test_waiting_while_the_cpu_idles_is_not_preemption() -> None:
    base = _inputs()
    running = base.running.copy()
    running.loc[running["pid"] == BG1, "t_start_ns"] = 4_500  # CPU 0 idles [4000, 4500): the sender wakes up
    running = pd.concat([running, pd.DataFrame([(0, 4_000, 4_500, 0, "swapper/0", "idle")],
                                                columns=running.columns)], ignore_index=True)
    table, pre = gaps.explain(_inputs(running=running))
    _check_sum(table)
    row = table.iloc[0]
    assert (row["preempted_ns"], row["app_idle_ns"]) == (2_200 - 500, 4_500 + 500)
    assert pre.set_index("pid")["ns"].to_dict() == {BG0: 1_000, BG1: 500, OTHER: 200}


def test_min_gap_and_window_select_gaps() -> None:
    table, _ = gaps.explain(_inputs(), min_gap_ns=100)
    assert table["gap_ns"].tolist() == [10_000, 150]
    assert table["threshold_ns"].tolist() == [100, 100]
    _check_sum(table)
    table, _ = gaps.explain(_inputs(), min_gap_ns=100, window=Window(5_000, 20_000))
    assert table["gap_ns"].tolist() == [150]
    table, _ = gaps.explain(_inputs(), streams=[O])
    assert len(table) == 0


def test_without_a_kernel_trace_or_writes_the_table_says_what_it_cannot_tell() -> None:
    table, pre = gaps.explain(_inputs(states=None, running=None))
    _check_sum(table)
    row = table.iloc[0]
    assert row["preempted_ns"] == 0
    assert row["app_idle_ns"] == 4_500 + 2_000  # the sender's wait is taken for idleness
    assert any("preempted cannot be told" in s for s in table.attrs["cannot_tell"])
    assert len(pre) == 0
    table, _ = gaps.explain(_inputs(sends=None, backlog=None, window=None))
    _check_sum(table)
    told = " ".join(table.attrs["cannot_tell"])
    assert "blocked-in-call cannot be told apart from app-idle" in told
    assert "backlog is unknown" in told and "receiver-window is never told" in told
    assert table.iloc[0]["blocked_in_call_ns"] == 0


def test_summary_shares() -> None:
    table, _ = gaps.explain(_inputs(), min_gap_ns=100)
    summ = gaps.summary(table).set_index("stream")
    assert summ.loc[S, "gaps"] == 2 and summ.loc["all", "gap_ns"] == 10_150
    shares = summ[[f"{c}_share" for c in gaps.CAUSES]]
    assert np.allclose(shares.sum(axis=1), 1.0)
    assert summ.loc[S, "blocked_in_call_share"] == pytest.approx(1_500 / 10_150)


def test_union_and_bad_input() -> None:
    s, e = intervals.union(np.array([5, 0, 2, 20, 30]), np.array([8, 3, 6, 20, 31]))
    assert s.tolist() == [0, 30] and e.tolist() == [8, 31]
    with pytest.raises(InputError, match="wire_len"):
        gaps.explain(GapInputs(data=pd.DataFrame({"t_ns": [1], "stream": ["x"]}), rate_bit_s=1e6))
    with pytest.raises(InputError, match="link rate"):
        gaps.explain(_inputs(rate_bit_s=0))


@pytest.mark.parametrize("seed", range(5))
def test_interval_helpers_against_a_loop(seed: int) -> None:
    """covered, within and unique_sorted (the vectorized searches the gaps are cut with) against
    a plain loop over random points and intervals, shared endpoints and empty intervals included."""
    rng = np.random.default_rng(seed)
    edges = np.sort(rng.choice(2_000, size=2 * 60, replace=False))
    starts, ends = edges[0::2], edges[1::2]
    ends[::7] = starts[::7]  # some empty
    starts[5::9] = ends[4::9][:len(starts[5::9])]  # some starting where the one before ends
    points = np.sort(rng.integers(-10, 2_010, size=500))
    points[:50] = np.sort(rng.choice(np.concatenate([starts, ends]), 50))
    points = np.sort(points)
    inside, which = intervals.covered(points, starts, ends)
    for x, hit, k in zip(points, inside, which):
        want = [i for i, (a, b) in enumerate(zip(starts, ends)) if a <= x < b]
        assert (hit, k) == ((True, want[0]) if want else (False, -1)), x
    disjoint = np.flatnonzero(ends > starts)
    a, b = starts[disjoint], ends[disjoint]
    got = intervals.within(points, a, b)
    assert got.tolist() == [x for x in points if any(lo <= x < hi for lo, hi in zip(a, b))]
    assert intervals.unique_sorted(points[::-1].copy()).tolist() == sorted(set(points.tolist()))
    key = rng.integers(-1, 4, size=200)
    order = rng.integers(0, 20, size=200)
    row = np.arange(200)
    groups = intervals.split_by_key(key, order, order, row)
    assert sorted(groups) == sorted(set(key.tolist()))
    for k, (o, r) in groups.items():
        assert r.tolist() == sorted(np.flatnonzero(key == k).tolist(), key=lambda i: (order[i], i))
    assert intervals.split_by_key(key[:0], order[:0], row[:0]) == {}


def test_cli_min_gap_units() -> None:
    from hostwire.commands.common import duration as _duration_ns

    assert _duration_ns("2ms") == 2_000_000 and _duration_ns("250us") == 250_000
    with pytest.raises(argparse.ArgumentTypeError):
        _duration_ns("soon")


def _brute(inputs: GapInputs, a: int, b: int) -> dict[str, int]:
    """Each nanosecond of [a, b) classified by the precedence, straight from the definitions (every
    condition tested at every nanosecond by broadcasting, no interval arithmetic)."""
    t = np.arange(a, b)[:, None]

    def inside(s: object, e: object) -> np.ndarray:
        return ((t >= np.asarray(s)[None, :]) & (t < np.asarray(e)[None, :])).any(axis=1)

    def step(df: pd.DataFrame, col: str) -> np.ndarray:
        d = df[df["stream"] == S].sort_values("t_ns")
        seen = t >= d["t_ns"].to_numpy()[None, :]
        last = seen.shape[1] - 1 - np.argmax(seen[:, ::-1], axis=1)
        return np.where(seen.any(axis=1), d[col].to_numpy(dtype=float)[last], np.nan)

    def state_of(pid: int, want: str) -> np.ndarray:
        st = inputs.states[(inputs.states["pid"] == pid) & (inputs.states["state"] == want)]
        r = inputs.running[inputs.running["pid"] == 0]
        waiting = np.zeros(len(t), dtype=bool)
        for s0, e0, c in zip(st["t_start_ns"], st["t_end_ns"], st["cpu"]):
            on = (t[:, 0] >= s0) & (t[:, 0] < e0)
            idle_c = r[r["cpu"] == c]
            waiting |= on & ~inside(idle_c["t_start_ns"].to_numpy(), idle_c["t_end_ns"].to_numpy())
        return waiting

    mine = inputs.data[inputs.data["stream"] == S]
    d_first = int(mine.loc[mine["t_ns"] == a, "wire_len"].iloc[0] * 8e9 / inputs.rate_bit_s)
    others = inputs.data[inputs.data["stream"] != S]
    busy = inside(others["t_ns"].to_numpy(), others["t_ns"].to_numpy() + others["wire_len"].to_numpy() * 8e9 / inputs.rate_bit_s)
    queued = np.nan_to_num(step(inputs.backlog, "backlog_bytes")) > 0
    win = step(inputs.window, "window_bytes")
    in_call = inside(inputs.sends["t_enter_ns"].to_numpy(), inputs.sends["t_exit_ns"].to_numpy())
    waits = (state_of(SENDER, "runnable") & ~queued) | (state_of(KS, "runnable") & queued)
    awaiting = inside(inputs.awaiting_acks["t_start_ns"].to_numpy(), inputs.awaiting_acks["t_end_ns"].to_numpy())
    timer = inside(inputs.retransmit_timeouts["t_start_ns"].to_numpy(), inputs.retransmit_timeouts["t_end_ns"].to_numpy())
    stolen = inside(inputs.frozen["t_start_ns"].to_numpy(), inputs.frozen["t_end_ns"].to_numpy())
    held = inside(inputs.qdisc_holds["t_start_ns"].to_numpy(), inputs.qdisc_holds["t_end_ns"].to_numpy())
    path = inside(inputs.send_paths["t_start_ns"].to_numpy(), inputs.send_paths["t_end_ns"].to_numpy())
    conds = {"on_wire": t[:, 0] < a + d_first, "vcpu_stolen": stolen, "receiver_window": win < mine["payload_len"].max(),
             "retransmit_timeout": timer, "wire_busy": queued & busy, "preempted": waits, "qdisc": held,
             "blocked_in_call": in_call & ~queued, "app_idle": ~queued, "awaiting_ack": awaiting & queued,
             "send_path": path, "unexplained": np.ones(len(t), dtype=bool)}
    order = list(conds)  # the precedence (no late acknowledgements in these inputs)
    cause = np.select(list(conds.values()), np.arange(len(order)))
    return {c: int((cause == order.index(c)).sum()) for c in gaps.CAUSES}


@pytest.mark.parametrize("seed", range(20))
def test_random_timelines_against_a_nanosecond_by_nanosecond_reference(seed: int) -> None:
    rng = np.random.default_rng(seed)

    def intervals(n: int, span: int) -> tuple[np.ndarray, np.ndarray]:
        s = np.sort(rng.integers(0, span, n))
        e = s + rng.integers(1, span // 6, n)
        return s, e

    span = 3_000
    t_frames = np.array([0, span])
    o_t = np.sort(rng.integers(0, span, 4))
    data = pd.DataFrame({"t_ns": np.concatenate([t_frames, o_t]), "stream": [S, S] + [O] * 4,
                         "wire_len": np.concatenate([[40, 40], rng.integers(20, 200, 4)]),
                         "payload_len": np.concatenate([[1000, 1000], rng.integers(10, 100, 4)])})
    # states: sender and ksoftirqd alternate sleeping / runnable / running on random CPUs
    rows = []
    for pid in (SENDER, KS):
        cuts = np.unique(np.concatenate([[0], rng.integers(1, span, 6), [span + 1]]))
        for s0, e0 in zip(cuts[:-1], cuts[1:]):
            rows.append((pid, int(s0), int(e0), str(rng.choice(["sleeping", "runnable", "running"])), int(rng.integers(0, 2))))
    states = pd.DataFrame(rows, columns=["pid", "t_start_ns", "t_end_ns", "state", "cpu"])
    run_rows = []
    for cpu in (0, 1):
        cuts = np.unique(np.concatenate([[0], rng.integers(1, span, 5), [span + 1]]))
        for s0, e0 in zip(cuts[:-1], cuts[1:]):
            pid = int(rng.choice([0, BG0, BG1]))
            run_rows.append((cpu, int(s0), int(e0), pid, "c", "idle" if pid == 0 else "bg"))
    running = pd.DataFrame(run_rows, columns=["cpu", "t_start_ns", "t_end_ns", "pid", "comm", "role"])
    ss, se = intervals(3, span)
    bt = np.sort(rng.integers(0, span, 5))
    wt = np.sort(rng.integers(0, span, 4))
    aw_s, aw_e = intervals(2, span)
    rt_s, rt_e = intervals(1, span)
    fz_s, fz_e = intervals(1, span)
    qd_s, qd_e = intervals(2, span)
    sp_s, sp_e = intervals(2, span)
    inputs = _inputs(data=data, states=states, running=running,
                     frozen=pd.DataFrame({"t_start_ns": fz_s, "t_end_ns": fz_e}),
                     awaiting_acks=pd.DataFrame({"stream": S, "t_start_ns": aw_s, "t_end_ns": aw_e}),
                     retransmit_timeouts=pd.DataFrame({"stream": S, "t_start_ns": rt_s, "t_end_ns": rt_e}),
                     qdisc_holds=pd.DataFrame({"stream": S, "t_start_ns": qd_s, "t_end_ns": qd_e}),
                     send_paths=pd.DataFrame({"stream": S, "t_start_ns": sp_s, "t_end_ns": sp_e}),
                     sends=pd.DataFrame({"stream": S, "t_enter_ns": ss, "t_exit_ns": se}),
                     backlog=pd.DataFrame({"stream": S, "t_ns": bt, "backlog_bytes": rng.integers(0, 2, 5) * 500}),
                     window=pd.DataFrame({"stream": S, "t_ns": wt, "window_bytes": rng.choice([10.0, 9e4], 4)}))
    table, _ = gaps.explain(inputs, streams=[S])
    _check_sum(table)
    assert len(table) == 1
    got = {c: int(table.iloc[0][f"{c}_ns"]) for c in gaps.CAUSES}
    assert got == _brute(inputs, 0, span)


def test_a_bare_duration_is_seconds_as_in_every_tool() -> None:
    from hostwire.commands.common import duration as _duration_ns

    assert _duration_ns("2") == 2_000_000_000 and _duration_ns("0.005") == 5_000_000
    assert _duration_ns("800ns") == 800


def test_usable_window_is_the_advertised_right_edge_minus_what_is_in_flight() -> None:
    """Hand-computed: the handshake offers scales 3 and 7 (the receiver's windows count 128 bytes
    per unit) and the sequence numbers wrap past 2^32 during the stream."""
    isn = 2**32 - 1500
    syn = synth.frame_table(np.array([0]), np.array([0]), np.array([isn]), np.array([0]), synth.SENDER,
                            synth.RECEIVER, 40000, 5001, flags=0x02, window=64240, wscale=3)
    syn_ack = synth.frame_table(np.array([1000]), np.array([0]), np.array([7]), np.array([isn + 1]),
                                synth.RECEIVER, synth.SENDER, 5001, 40000, flags=0x12, window=65160, wscale=7)
    data = synth.frames(np.array([1, 2, 3, 4]) * 10**6, payload=1000, seq0=(isn + 1) % 2**32)
    acks = synth.frame_table(np.array([2_500_000, 4_500_000]), np.zeros(2, np.int64), np.full(2, 8),
                             np.array([(isn + 1001) % 2**32, (isn + 4001) % 2**32]), synth.RECEIVER,
                             synth.SENDER, 5001, 40000, flags=0x10)
    acks = acks.assign(window=np.array([30, 0], dtype=np.uint16))
    window = sequence.usable_window(label_streams(synth.concat([syn, syn_ack, data, acks])))
    assert window["t_ns"].tolist() == [0, 1000, 10**6, 2 * 10**6, 2_500_000, 3 * 10**6, 4 * 10**6, 4_500_000]
    got = window["window_bytes"].tolist()
    assert np.isnan(got[0])  # nothing advertised yet
    # the SYN-ACK's own window is never scaled; then 1001 + 30 * 128 = 4841 bytes past the ISN
    assert got[1:] == [65160, 64160, 63160, 4841 - 2001, 4841 - 3001, 4841 - 4001, 0]
    # the receiver's last advertised window was 3840 bytes, above one segment, while the sender could
    # put only 840 more bytes in flight: that is what holds it back
    rows = intervals.ByStream(intervals.numeric(window, "window_bytes"), ("t_ns", "value"), order_by="t_ns")
    held = intervals.steps(rows.get(window["stream"].iloc[0]), lambda v: v < 1000, 5 * 10**6)
    assert held[0].tolist() == [4 * 10**6] and held[1].tolist() == [5 * 10**6]


def test_a_frozen_host_is_a_silence_the_steal_counters_cover() -> None:
    """Events every 100 us except three silences: 30 ms (both CPUs' steal grew 30 ms in that
    sample: frozen), 5 ms (steal 0 on CPU 1: an idle host, not frozen), and two of 12 ms in one
    sample where each CPU lost 20 ms (ticks of 10 ms): the longer first, both fit 20 ms + one tick."""
    from hostwire.timeline.stolen import frozen

    ms = 1_000_000
    events = np.concatenate([np.arange(0, 100 * ms, 100_000), np.arange(130 * ms, 200 * ms, 100_000),
                             np.arange(205 * ms, 300 * ms, 100_000), np.arange(312 * ms, 320 * ms, 100_000),
                             np.arange(332 * ms, 400 * ms, 100_000)])
    when = np.array([0, 150, 250, 350, 450]) * ms
    steal = {0: [0, 30, 30, 50, 50], 1: [0, 30, 40, 60, 60]}
    samples = pd.DataFrame([(t, cpu, steal[cpu][k] * ms) for cpu in (0, 1) for k, t in enumerate(when)],
                           columns=["t_ns", "cpu", "steal_ns"])
    got = frozen(events, samples, tick_ns=10 * ms)
    starts, ends = got["t_start_ns"].tolist(), got["t_end_ns"].tolist()
    assert list(zip(starts, ends)) == [(int(99.9 * ms), 130 * ms), (int(299.9 * ms), 312 * ms),
                                       (int(319.9 * ms), 332 * ms)]
    # one CPU that lost nothing in the 30 ms sample: no freeze there
    samples.loc[(samples["cpu"] == 1) & (samples["t_ns"] == 150 * ms), "steal_ns"] = 0
    samples.loc[(samples["cpu"] == 1) & (samples["t_ns"] > 150 * ms), "steal_ns"] -= 30 * ms
    got = frozen(events, samples, tick_ns=10 * ms)
    assert got["t_start_ns"].tolist() == [int(299.9 * ms), int(319.9 * ms)]
    # three 12 ms silences between the samples at 250 and 350 ms, where each CPU lost 20 ms: the
    # third no longer fits (20 + one tick of 10 < 3 x 12)
    three = np.concatenate([np.arange(0, 260 * ms, 100_000), np.arange(272 * ms, 280 * ms, 100_000),
                            np.arange(292 * ms, 300 * ms, 100_000), np.arange(312 * ms, 400 * ms, 100_000)])
    assert len(frozen(three, samples, tick_ns=10 * ms)) == 2
    assert len(frozen(events, None, tick_ns=10 * ms)) == 0


@pytest.mark.parametrize("seed", range(6))
def test_the_link_is_busy_in_each_piece_as_in_the_whole(seed: int) -> None:
    """The busy link of a piece is made from the frames that reach into it, so no stream keeps the
    whole link's intervals: at every ns of the piece it holds exactly when some other stream's
    frame holds the link (frames overlap, and chains of them cross the piece's bounds)."""
    rng = np.random.default_rng(seed)
    span, n = 4_000, 60
    t = np.sort(rng.integers(0, span, n))
    stream = rng.choice([S, O, "p:5>r:2"], n)
    wire = np.where(rng.random(n) < 0.2, rng.integers(300, 900, n), rng.integers(5, 60, n))
    frames = pd.DataFrame({"t_ns": t, "stream": stream, "wire_len": wire, "payload_len": 100})
    explainer = gaps._Explainer(_inputs(data=frames, states=None, running=None))
    ns = np.arange(-100, span + 1_000)
    holds = (t[None, :] <= ns[:, None]) & (ns[:, None] < (t + wire)[None, :]) & (stream != S)[None, :]
    reference = holds.any(axis=1)
    for lo, hi in [(gaps.OPEN_LO, gaps.OPEN_HI), *zip(*np.sort(rng.integers(0, span, (2, 8)), axis=0))]:
        starts, ends = explainer.busy(S, int(lo), int(hi))
        inside = (ns >= lo) & (ns < hi)
        covered = ((starts[None, :] <= ns[:, None]) & (ns[:, None] < ends[None, :])).any(axis=1)
        np.testing.assert_array_equal(covered[inside], reference[inside])
    # and a gap explained in pieces of the link is the gap explained whole
    whole, _ = gaps.explain(_inputs(data=frames, states=None, running=None, backlog=None), min_gap_ns=50)
    cuts = np.unique(rng.integers(0, span, 5))
    empty = no_kernel_tables()
    slabs = [Slab(int(a), int(b), *empty) for a, b in zip([gaps.OPEN_LO, *cuts], [*cuts, gaps.OPEN_HI])]
    pieced, _ = gaps.explain(_inputs(data=frames, states=None, running=None, backlog=None), min_gap_ns=50, slabs=slabs)
    assert len(whole) > 3
    pd.testing.assert_frame_equal(pieced, whole)


@pytest.mark.parametrize("seed", range(4))
def test_split_by_key_read_in_blocks_is_the_sort(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """split_by_key, its order checked a few rows at a time (blocks of 3, so that a pair out of
    order can sit across a block's bound), gives what a stable sort by key then sort_by gives:
    on tables in order (views) and with one pair swapped anywhere, and the blockwise helpers what
    their whole-array forms give."""
    monkeypatch.setattr(intervals, "BLOCK_ROWS", 3)
    rng = np.random.default_rng(seed)
    key = np.sort(rng.integers(-1, 4, 40)).astype(np.int8)
    by = np.concatenate([np.sort(rng.integers(0, 9, int((key == k).sum()))) for k in np.unique(key)])
    tables = [(key, by)]
    for i in range(len(key) - 1):  # each neighbouring pair swapped in turn
        k, b = key.copy(), by.copy()
        k[[i, i + 1]], b[[i, i + 1]] = k[[i + 1, i]], b[[i + 1, i]]
        tables.append((k, b))
    for k, b in tables:
        rows = np.arange(len(k))
        for sort_by in (b, None):
            order = np.lexsort((b, k)) if sort_by is not None else np.argsort(k, kind="stable")
            expected = {int(g): rows[order][k[order] == g] for g in np.unique(k)}
            got = intervals.split_by_key(k, sort_by, rows)
            assert list(got) == sorted(expected) and all(np.array_equal(got[g][0], expected[g]) for g in expected)
        assert intervals.is_ascending(k) == bool((k[1:] >= k[:-1]).all())
        assert intervals.longest(b, b + rows) == int((rows).max())
    assert intervals.longest(np.zeros(0, np.int64), np.zeros(0, np.int64)) == 0
