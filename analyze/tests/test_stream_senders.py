"""Who sent a stream, against hand-built tables whose answer is known: a server that accepts and
forks a child per connection (the parent held the socket when it was sampled, the child sent every
byte), a benchmark's logged sender that stays exact, and a server whose short replies go against
its connection's data direction (requests larger than the answers)."""

from __future__ import annotations

import pandas as pd

from hostwire.timeline import stream_tables
from hostwire.timeline.program_streams import process_comms

PARENT, CHILD, BENCH = 100, 101, 200
FORKED = "198.18.0.1:8080>198.18.0.2:41000"
LOGGED = "198.18.0.1:40000>198.18.0.2:5001"
NO_SOCKETS = pd.DataFrame(columns=["skaddr", "local", "remote", "owner_pid", "active"])
NO_RECEIVERS = pd.DataFrame(columns=["role", "pid", "sender_pid", "stream"])


def table(send_fds: list[dict]) -> pd.DataFrame:
    senders = pd.DataFrame([
        {"role": "python3", "pid": PARENT, "local": "198.18.0.1:8080", "peer": "198.18.0.2:41000", "fd": 4,
         "source": "sockets"},
        {"role": "send-0", "pid": BENCH, "local": "198.18.0.1:40000", "peer": "198.18.0.2:5001", "fd": -1,
         "source": "bench"}])
    return stream_tables.streams_table(senders, NO_RECEIVERS, NO_SOCKETS, pd.DataFrame(send_fds)).set_index("stream")


def test_the_child_that_sent_the_bytes_is_the_sender_not_the_parent_that_held_the_socket() -> None:
    st = table([{"pid": CHILD, "fd": 4, "stream": FORKED, "source": "lifetime", "role": "python3-child"},
                {"pid": PARENT, "fd": 4, "stream": FORKED, "source": "fd_desc", "role": ""}])
    row = st.loc[FORKED]
    assert (row["sender_pid"], row["sender_fd"], row["sender_role"]) == (CHILD, 4, "python3-child")
    assert row["evidence"] == "sockets,lifetime,fd_desc"


def test_without_a_lifetime_sender_the_socket_samples_name_it() -> None:
    row = table([{"pid": CHILD, "fd": 4, "stream": FORKED, "source": "fd_desc", "role": ""}]).loc[FORKED]
    assert (row["sender_pid"], row["sender_role"]) == (PARENT, "python3")


def test_a_benchmark_log_stays_the_sender() -> None:
    row = table([{"pid": 999, "fd": 7, "stream": LOGGED, "source": "lifetime", "role": "other"}]).loc[LOGGED]
    assert (row["sender_pid"], row["sender_role"]) == (BENCH, "send-0")


def test_replies_against_the_data_direction_join_no_stream() -> None:
    """The server's socket is 198.18.0.1:6379>198.18.0.2:5000, whose connection carries its data
    the other way (the client's requests): the server's sends on it are no stream's bytes; a UDP
    flow each way is two streams, each direction its own."""
    request = "198.18.0.2:5000>198.18.0.1:6379"
    udp_out, udp_in = "198.18.0.1:53>198.18.0.2:7", "198.18.0.2:7>198.18.0.1:53"
    sc = pd.DataFrame({"t_enter_ns": [1, 2, 3], "t_exit_ns": [2, 3, 4], "pid": PARENT, "tid": PARENT,
                       "call": ["write", "sendto", "sendto"], "fd": [5, 6, 6], "req_bytes": -1,
                       "result": pd.array([5, 40, 40], dtype="Int64"), "fd_kind": "unknown",
                       "fd_desc": ["198.18.0.1:6379>198.18.0.2:5000", udp_out, udp_in], "unfinished": False})
    streams = pd.DataFrame({"stream": [request, udp_out, udp_in], "sender_pid": -1, "sender_fd": -1})
    assert stream_tables.calls(sc, {}, streams)["stream"].tolist() == ["", udp_out, udp_in]
    assert stream_tables.reversed_streams([request, udp_out, udp_in]).tolist() == ["198.18.0.1:6379>198.18.0.2:5000"]


def test_a_process_is_named_by_the_manifest_then_by_the_kernel_trace() -> None:
    sched = pd.DataFrame({"t_ns": [3, 1, 2], "pid": [CHILD, CHILD, 300], "comm": ["worker", "python3", "sh"]})
    assert process_comms({PARENT, CHILD, 400}, {str(PARENT): "python3", "x": "?"}, sched) == {
        PARENT: "python3", CHILD: "worker"}
