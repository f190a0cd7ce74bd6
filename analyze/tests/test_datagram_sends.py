"""The sends of one unconnected UDP socket joined to the flows of their datagrams, against scripts
whose every datagram's call is known: a server answering many clients from one bound socket, its
datagrams leaving the queue in the order their calls entered, after them; another socket's
datagrams beside them; datagrams no traced call sent (another program's, on the same port)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hostwire.timeline import datagram_sends as ds
from hostwire.timeline import stream_tables

SERVER, OTHER = 700, 800


def script(seed: int, untraced: int = 0) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, dict[int, str]]:
    """(send calls, sampled sockets, datagrams on the wire, t_enter -> the flow of its datagram):
    the server's socket (fd 4, 198.18.0.1:53) answers 30 clients, sizes drawn from a few so that
    many repeat; a second program's socket (198.18.0.1:5353) sends too; `untraced` datagrams of
    the port 53 leave with sizes no traced call has (a datagram of the same size would be taken
    for the next call's: the rule is order and size)."""
    rng = np.random.default_rng(seed)
    count = 120
    enter = np.cumsum(rng.integers(5_000, 50_000, count)).astype(np.int64)
    clients = rng.integers(0, 30, count)
    sizes = rng.choice([40, 59, 60, 512], count)
    # a FIFO queue: each datagram leaves after its call entered and after the one before it
    leave = np.maximum.accumulate(enter + rng.integers(1_000, 200_000, count))
    calls = pd.DataFrame({"pid": SERVER, "tid": SERVER, "fd": 4, "t_enter_ns": enter, "bytes": sizes})
    flows = [f"198.18.0.1:53>198.18.0.2:{40000 + c}" for c in clients]
    wire = pd.DataFrame({"t_ns": leave, "proto": 17, "src": "198.18.0.1", "sport": 53, "payload_len": sizes,
                         "stream": flows})
    other_enter = enter[::7] + 3
    calls = pd.concat([calls, pd.DataFrame({"pid": OTHER, "tid": OTHER + 1, "fd": 4, "t_enter_ns": other_enter,
                                            "bytes": 59})], ignore_index=True)
    wire = pd.concat([wire, pd.DataFrame({"t_ns": other_enter + 500, "proto": 17, "src": "198.18.0.1",
                                          "sport": 5353, "payload_len": 59, "stream": "198.18.0.1:5353>198.18.0.3:53"}),
                      pd.DataFrame({"t_ns": np.sort(rng.integers(int(enter[0]), int(enter[-1]), untraced)),
                                    "proto": 17, "src": "198.18.0.1", "sport": 53, "payload_len": 1000,
                                    "stream": "198.18.0.1:53>198.18.0.9:1"})], ignore_index=True)
    sockets = pd.DataFrame({"pid": [SERVER, OTHER], "fd": [4, 4], "proto": "udp",
                            "local": ["0.0.0.0:53", "198.18.0.1:5353"], "remote": ["0.0.0.0:0", "0.0.0.0:0"]})
    truth = dict(zip(enter.tolist(), flows))
    truth_other = dict.fromkeys(other_enter.tolist(), "198.18.0.1:5353>198.18.0.3:53")
    wire = wire.sort_values("t_ns", kind="stable")  # the queue's order among equal stamps
    wire["frame"] = np.arange(len(wire))
    rows = wire.sample(frac=1, random_state=seed).reset_index(drop=True)  # the table's order is not time's
    return calls.sample(frac=1, random_state=seed + 1), ds.unconnected_udp(sockets), rows, {**truth, **truth_other}


@pytest.mark.parametrize("untraced", [0, 9])
@pytest.mark.parametrize("seed", range(10))
def test_each_send_joins_the_flow_of_its_own_datagram(seed: int, untraced: int) -> None:
    calls, sockets, wire, truth = script(seed, untraced)
    got = ds.datagram_sends(calls, sockets, wire)
    assert len(got) == len(calls)
    assert dict(zip(got["t_enter_ns"].tolist(), got["stream"].tolist())) == truth


def test_a_call_whose_datagram_never_crossed_joins_none_and_the_rest_stay_right() -> None:
    """A datagram dropped before the capture (its size unlike the next ones'): its call joins no
    flow, and the calls after it still join their own."""
    enter = np.array([10, 20, 30, 40], dtype=np.int64)
    calls = pd.DataFrame({"pid": SERVER, "tid": SERVER, "fd": 4, "t_enter_ns": enter, "bytes": [50, 70, 50, 50]})
    wire = pd.DataFrame({"t_ns": [15, 35, 45], "proto": 17, "src": "198.18.0.1", "sport": 53,
                         "payload_len": [50, 50, 50], "stream": ["a>x", "a>z", "a>w"]})
    sockets = pd.DataFrame({"pid": [SERVER], "fd": [4], "local": ["198.18.0.1:53"]})
    got = ds.datagram_sends(calls, sockets, wire)
    assert dict(zip(got["t_enter_ns"], got["stream"])) == {10: "a>x", 30: "a>z", 40: "a>w"}


def test_only_unconnected_udp_sockets_are_matched() -> None:
    samples = pd.DataFrame({"pid": [1, 1, 1], "fd": [3, 4, 5], "proto": ["udp", "udp", "tcp"],
                            "local": ["198.18.0.1:53", "198.18.0.1:9", "198.18.0.1:80"],
                            "remote": ["0.0.0.0:0", "198.18.0.2:9", "0.0.0.0:0"]})
    assert ds.unconnected_udp(samples).values.tolist() == [[1, 3, "198.18.0.1:53"]]


def test_the_calls_of_a_server_answering_from_one_socket_get_their_flows() -> None:
    """Through stream_tables.calls: the matched sends get their flows, its receives and the calls
    on another fd none."""
    sc = pd.DataFrame({"t_enter_ns": [5, 10, 20, 30], "t_exit_ns": [6, 12, 22, 32], "pid": SERVER,
                       "tid": SERVER, "call": ["recvfrom", "sendmsg", "sendto", "write"], "fd": [4, 4, 4, 9],
                       "req_bytes": -1, "result": pd.array([40, 59, 60, 3], dtype="Int64"),
                       "fd_kind": "unknown", "fd_desc": "", "unfinished": False})
    sockets = pd.DataFrame({"pid": [SERVER], "fd": [4], "local": ["198.18.0.1:53"]})
    flows = ["198.18.0.1:53>198.18.0.2:1", "198.18.0.1:53>198.18.0.2:2"]
    wire = pd.DataFrame({"t_ns": [11, 21], "proto": 17, "src": "198.18.0.1", "sport": 53,
                         "payload_len": [59, 60], "stream": flows})
    sends = ds.sends_on([sc], sockets)
    assert sends["t_enter_ns"].tolist() == [10, 20]  # the recvfrom sends nothing, fd 9 is another socket
    matched = ds.datagram_sends(sends, sockets, wire)
    out = stream_tables.calls(sc, {}, None, None, matched)
    assert out["stream"].tolist() == ["", *flows, ""]
