"""The joined timeline tables against hand-built kernel, system-call and wire events whose answers
are known: what ran on each CPU, each task's state, the run queues, socket owners, streams, frames
joined to writes, and the backlog."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hostwire.errors import InputError
from hostwire.timeline import socket_states, stream_tables, tables

A, B, C, D = 10, 20, 30, 40


def _sched(rows: list[dict]) -> pd.DataFrame:
    cols = ["t_ns", "cpu", "event", "pid", "comm", "prev_pid", "prev_comm", "prev_state", "next_pid", "next_comm",
            "arg_pid", "arg_comm", "target_cpu", "orig_cpu", "dest_cpu", "parent_pid", "child_pid"]
    df = pd.DataFrame([{c: r.get(c) for c in cols} for r in rows], columns=cols)
    for c in cols:
        if c in ("event", "comm", "prev_comm", "next_comm", "arg_comm"):
            df[c] = df[c].fillna("").astype(str)
        else:
            df[c] = df[c].astype("Int64")
    df["t_ns"] = df["t_ns"].astype("int64")
    df["cpu"] = df["cpu"].astype("int64")
    df["pid"] = df["pid"].astype("int64")
    return df


def _switch(t: int, cpu: int, prev: int, state: int, nxt: int) -> dict:
    name = {0: "swapper", A: "send", B: "sieve", C: "other", D: "hw-wirecap"}
    return {"t_ns": t, "cpu": cpu, "event": "sched_switch", "pid": prev, "comm": name[prev], "prev_pid": prev,
            "prev_comm": name[prev], "prev_state": state, "next_pid": nxt, "next_comm": name[nxt]}


def _wake(t: int, pid: int, target: int, by: int = 0) -> dict:
    return {"t_ns": t, "cpu": target, "event": "sched_wakeup", "pid": by, "comm": "x", "arg_pid": pid,
            "arg_comm": "w", "target_cpu": target}


@pytest.fixture
def sched() -> pd.DataFrame:
    return _sched([
        {"t_ns": 0, "cpu": 0, "event": "print", "pid": 0, "comm": ""},
        {"t_ns": 50, "cpu": 0, "event": "sched_process_fork", "pid": 5, "comm": "hw-bench", "parent_pid": 5,
         "child_pid": A},
        _switch(100, 0, 0, 0, A),
        _wake(150, D, 1),
        {"t_ns": 160, "cpu": 1, "event": "sched_migrate_task", "pid": 0, "comm": "", "arg_pid": D, "arg_comm": "d",
         "orig_cpu": 1, "dest_cpu": 0},
        _wake(200, B, 0, by=A),
        _switch(300, 0, A, 256, B),   # A preempted, still runnable
        _switch(500, 0, B, 1, A),     # B sleeps
        _switch(600, 0, A, 1, 0),     # A sleeps
        _switch(650, 0, 0, 0, D),
        _switch(700, 0, D, 1, 0),
        _wake(750, C, 1),             # no switch-in follows: C stays asleep
        {"t_ns": 1000, "cpu": 1, "event": "print", "pid": 0, "comm": ""},
    ])


def test_switches_and_wakeups(sched: pd.DataFrame) -> None:
    sw = tables.switches(sched)
    assert sw["t_ns"].tolist() == [100, 300, 500, 600, 650, 700]
    assert sw["prev_runnable"].tolist() == [True, True, False, False, True, False]
    wk = tables.wakeups(sched)
    assert wk[["pid", "target_cpu", "waker_pid"]].values.tolist() == [[D, 1, 0], [B, 0, A], [C, 1, 0]]
    mg = tables.migrations(sched)
    assert mg[["pid", "orig_cpu", "dest_cpu"]].values.tolist() == [[D, 1, 0]]


def test_running_intervals_and_roles(sched: pd.DataFrame) -> None:
    summary = {"processes": [{"role": "send-0", "pid": A}, {"role": "bg-0", "pid": B}],
               "receivers": [{"role": "recv-0", "pid": 99}]}
    roles = tables.role_map(summary, sched)
    assert roles == {A: "send-0", B: "bg-0", 99: "recv-0", 5: "main"}
    run = tables.running(tables.switches(sched), 0, 1000, roles)
    cpu0 = run[run["cpu"] == 0]
    assert cpu0[["t_start_ns", "t_end_ns", "pid", "role"]].values.tolist() == [
        [0, 100, 0, "idle"], [100, 300, A, "send-0"], [300, 500, B, "bg-0"], [500, 600, A, "send-0"],
        [600, 650, 0, "idle"], [650, 700, D, "collector"], [700, 1000, 0, "idle"]]
    assert int(cpu0["dur_ns"].sum()) == 1000  # the CPU's whole span, no overlap, no hole
    assert tables.roles_of(np.array([7]), np.array(["bash"]), roles).tolist() == ["other"]


def test_task_states(sched: pd.DataFrame) -> None:
    st = tables.task_states(tables.switches(sched), tables.wakeups(sched), tables.migrations(sched), 0, 1000)

    def of(pid: int) -> list[list]:
        return st[st["pid"] == pid][["t_start_ns", "t_end_ns", "state", "cpu"]].values.tolist()

    assert of(A) == [[0, 100, "runnable", 0], [100, 300, "running", 0], [300, 500, "runnable", 0],
                     [500, 600, "running", 0], [600, 1000, "sleeping", 0]]
    assert of(B) == [[0, 200, "sleeping", 0], [200, 300, "runnable", 0], [300, 500, "running", 0],
                     [500, 1000, "sleeping", 0]]
    assert of(D) == [[0, 150, "sleeping", 1], [150, 160, "runnable", 1], [160, 650, "runnable", 0],
                     [650, 700, "running", 0], [700, 1000, "sleeping", 0]]
    assert [s for _, _, s, _ in of(C)] == ["sleeping"]  # a wake-up no switch-in follows changes nothing


def test_runqueue(sched: pd.DataFrame) -> None:
    st = tables.task_states(tables.switches(sched), tables.wakeups(sched), tables.migrations(sched), 0, 1000)
    rq = tables.runqueue(st)
    cpu0 = rq[rq["cpu"] == 0][["t_ns", "nr_running", "nr_waiting"]].values.tolist()
    assert cpu0 == [[0, 1, 1], [100, 1, 0], [160, 2, 1], [200, 3, 2], [300, 3, 2], [500, 2, 1], [600, 1, 1],
                    [650, 1, 0], [700, 0, 0]]
    cpu1 = rq[rq["cpu"] == 1][["t_ns", "nr_running", "nr_waiting"]].values.tolist()
    assert cpu1 == [[150, 1, 1], [160, 0, 0]]


def test_switches_missing_fields() -> None:
    bad = pd.DataFrame({"t_ns": [1], "cpu": [0], "event": ["sched_switch"], "pid": [1], "comm": ["x"]})
    with pytest.raises(InputError, match="prev_pid"):
        tables.switches(bad)


def test_socket_owner_is_the_connecting_process_not_the_softirq_context() -> None:
    rows = [
        {"t_ns": 1, "cpu": 0, "event": "inet_sock_set_state", "pid": A, "comm": "hw-bench", "skaddr": "0xa",
         "saddr": "c6120001", "daddr": "c6120002", "sport": 0, "dport": 5001, "family": 2, "oldstate": 7,
         "newstate": 2},
        # established in softirq while another task (C) ran: C owns nothing
        {"t_ns": 2, "cpu": 0, "event": "inet_sock_set_state", "pid": C, "comm": "other", "skaddr": "0xa",
         "saddr": "c6120001", "daddr": "c6120002", "sport": 40000, "dport": 5001, "family": 2, "oldstate": 2,
         "newstate": 1},
        # a passively opened socket: no owner can be told
        {"t_ns": 3, "cpu": 1, "event": "inet_sock_set_state", "pid": C, "comm": "other", "skaddr": "0xb",
         "saddr": "c6120002", "daddr": "c6120001", "sport": 5001, "dport": 40000, "family": 2, "oldstate": 3,
         "newstate": 1},
    ]
    owners = socket_states.socket_owners(pd.DataFrame(rows)).set_index("skaddr")
    assert owners.loc["0xa", ["local", "remote", "owner_pid", "active"]].tolist() == [
        "198.18.0.1:40000", "198.18.0.2:5001", A, True]
    assert owners.loc["0xb", "owner_pid"] == -1 and not owners.loc["0xb", "active"]


def test_streams_table_joins_bench_sockets_and_fds() -> None:
    senders = pd.DataFrame([{"role": "send-0", "pid": A, "local": "198.18.0.1:40000", "peer": "198.18.0.2:5001"}])
    receivers = pd.DataFrame([{"role": "recv-0", "pid": 99, "sender_pid": A}])
    sockets = pd.DataFrame([
        {"skaddr": "0xa", "local": "198.18.0.1:40000", "remote": "198.18.0.2:5001", "owner_pid": A, "active": True},
        {"skaddr": "0xc", "local": "198.18.0.1:40010", "remote": "198.18.0.2:80", "owner_pid": 77, "active": True},
        {"skaddr": "0xd", "local": "198.18.0.1:40020", "remote": "198.18.0.2:81", "owner_pid": 78, "active": True},
    ])
    fds = pd.DataFrame([{"pid": A, "fd": 4, "stream": ""},            # tracefs: no description
                        {"pid": 77, "fd": 9, "stream": "198.18.0.1:40010>198.18.0.2:80"},  # ptrace: described
                        {"pid": 78, "fd": 3, "stream": ""}])          # not a benchmark sender: no guess
    st = stream_tables.streams_table(senders, receivers, sockets, fds).set_index("stream")
    bench = st.loc["198.18.0.1:40000>198.18.0.2:5001"]
    assert (bench["sender_pid"], bench["sender_role"], bench["sender_fd"], bench["receiver_pid"],
            bench["receiver_role"], bench["skaddr"], bench["sport"]) == (A, "send-0", 4, 99, "recv-0", "0xa", 40000)
    assert bench["evidence"] == "bench,inet_sock_set_state,fd"
    other = st.loc["198.18.0.1:40010>198.18.0.2:80"]
    assert (other["sender_pid"], other["sender_fd"], other["evidence"]) == (77, 9, "inet_sock_set_state,fd_desc")
    assert st.loc["198.18.0.1:40020>198.18.0.2:81", "sender_fd"] == -1


def test_calls_get_role_stream_and_bytes() -> None:
    sc = pd.DataFrame({"t_enter_ns": [1, 5, 9], "t_exit_ns": [2, 6, 10], "pid": [A, A, A], "tid": [A, A, A],
                       "call": ["read", "write", "write"], "fd": [3, 4, 4], "req_bytes": [10, 10, 10],
                       "result": pd.array([10, 10, -11], dtype="Int64"), "fd_kind": ["file", "unknown", "unknown"],
                       "fd_desc": ["/data", "", ""], "unfinished": [False, False, False]})
    streams = pd.DataFrame([{"stream": "s>r", "sender_pid": A, "sender_fd": 4}])
    out = stream_tables.calls(sc, {A: "send-0"}, streams)
    assert out["role"].tolist() == ["send-0"] * 3
    assert out["is_send"].tolist() == [False, True, True]
    assert out["bytes"].tolist() == [10, 10, 0]
    assert out["stream"].tolist() == ["", "s>r", "s>r"]
    fds = stream_tables.main_send_fds(sc)
    assert fds.values.tolist() == [[A, 4, ""]]


def _frames(rows: list[tuple[int, int, int]], isn: int | None = None) -> pd.DataFrame:
    df = pd.DataFrame({"t_ns": [r[0] for r in rows], "stream": "s>r", "seq": [r[1] for r in rows],
                       "payload_len": [r[2] for r in rows], "wire_len": [r[2] + 66 for r in rows]})
    df.attrs = {"isn": {"s>r": isn}} if isn is not None else {}
    return df


def test_stream_bytes_unwraps_and_marks_retransmissions() -> None:
    isn = 2**32 - 5
    f = stream_tables.stream_bytes(_frames([(1, 2**32 - 4, 10), (2, 6, 10), (3, 6, 10), (4, 16, 5)], isn=isn))
    assert f[["seq_start", "seq_end"]].values.tolist() == [[0, 10], [10, 20], [10, 20], [20, 25]]
    assert f["retransmit"].tolist() == [False, False, True, False]


@pytest.fixture
def joined() -> tuple[pd.DataFrame, pd.DataFrame]:
    frames = stream_tables.stream_bytes(_frames([(5, 1001, 12), (25, 1013, 1448), (35, 2461, 1448), (45, 3909, 1104)],
                                         isn=1000))
    writes = pd.DataFrame({"stream": "s>r", "t_enter_ns": [0, 20, 40], "t_exit_ns": [10, 30, 50],
                           "bytes": [12, 3000, 1000]})
    return frames, writes


def test_segments_join_frames_to_writes(joined: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    frames, writes = joined
    seg = stream_tables.segments(frames, writes)
    assert seg[["frame_t_ns", "write_id", "bytes"]].values.tolist() == [
        [5, 0, 12], [25, 1, 1448], [35, 1, 1448], [45, 1, 104], [45, 2, 1000]]
    per_frame = seg.groupby("frame_t_ns")["bytes"].sum()
    assert per_frame.tolist() == frames["payload_len"].tolist()
    assert seg.loc[seg["write_id"] == 2, "t_enter_ns"].tolist() == [40]


def test_segments_offset_when_the_first_writes_are_unknown(joined: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    frames, writes = joined
    later = writes.iloc[1:]
    assert stream_tables.writes_offset(frames, later) == 12
    seg = stream_tables.segments(frames, later)
    assert seg[["frame_t_ns", "write_id", "bytes"]].values.tolist() == [
        [5, -1, 12], [25, 1, 1448], [35, 1, 1448], [45, 1, 104], [45, 2, 1000]]


def test_backlog(joined: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    frames, writes = joined
    bl = stream_tables.backlog(frames, writes)
    assert bl[["t_ns", "written_bytes", "sent_bytes", "backlog_bytes"]].values.tolist() == [
        [5, 0, 12, 0], [10, 12, 12, 0], [25, 12, 1460, 0], [30, 3012, 1460, 1552], [35, 3012, 2908, 104],
        [45, 3012, 4012, 0], [50, 4012, 4012, 0]]


def test_backlog_steps_are_the_backlogs_levels() -> None:
    """backlog_steps (what the gap analysis of a long run reads) holds backlog()'s stream, stamps
    and levels, on two streams whose writes and frames share stamps (the last of a stamp counts)."""
    rng = np.random.default_rng(2)
    parts, writes = [], []
    for name in ("b>r", "a>r"):
        t = np.sort(rng.integers(0, 5_000, 300))
        payload = rng.integers(1, 1_448, 300)
        parts.append(pd.DataFrame({"t_ns": t, "stream": name, "seq_end": np.cumsum(payload)}))
        writes.append(pd.DataFrame({"stream": name, "t_enter_ns": np.sort(rng.integers(0, 5_000, 80)),
                                    "bytes": rng.integers(0, 6_000, 80)}).assign(t_exit_ns=lambda w: w["t_enter_ns"] + 7))
    frames, written = pd.concat(parts, ignore_index=True), pd.concat(writes, ignore_index=True)
    whole = stream_tables.backlog(frames, written)
    steps = stream_tables.backlog_steps(frames, written)
    assert len(whole) > 500 and (whole["backlog_bytes"] > 0).any() and not whole.duplicated(["stream", "t_ns"]).any()
    pd.testing.assert_frame_equal(steps.assign(stream=steps["stream"].astype(str)),
                                  whole[["stream", "t_ns", "backlog_bytes"]].reset_index(drop=True))
    assert list(steps["stream"].cat.categories) == ["a>r", "b>r"]
