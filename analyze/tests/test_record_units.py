"""The pieces of `hostwire record` that need no kernel: frames attributed to the sockets a
program held (hand-built tables), GSO/TSO super-packets counted as the segments they carry, the
receiver of a stream the program received, and every task of a running tree handed to the kernel
trace's pid filter (--pid)."""

from __future__ import annotations


import pandas as pd

from hostwire.read.sockets import attribute_frames, attribution_counts
from hostwire.record.program_attribution import segments_carried
from hostwire.record.sockets import endpoint, parse_net_table


def frames(rows: list[tuple]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["proto", "src", "sport", "dst", "dport", "ip_len", "payload_len"])


def sockets(rows: list[tuple]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["t_ns", "pid", "comm", "fd", "inode", "proto", "local", "remote", "state"])


def test_frames_go_to_the_socket_that_sent_or_received_them() -> None:
    f = frames([
        (6, "198.18.0.1", 40000, "198.18.0.2", 5201, 1500, 1448),   # sent by the connected socket
        (6, "198.18.0.2", 5201, "198.18.0.1", 40000, 52, 0),        # its ACK, received
        (17, "198.18.0.1", 5353, "198.18.0.9", 53, 60, 32),        # an unconnected UDP socket bound to *:5353
        (6, "198.18.0.7", 1111, "198.18.0.8", 2222, 52, 0),         # someone else's
        (6, "::1", 5201, "::1", 40002, 100, 48),                    # IPv6 loopback: received by the client
    ])
    s = sockets([
        (1, 10, "client", 3, 100, "tcp", "198.18.0.1:40000", "198.18.0.2:5201", "ESTABLISHED"),
        (1, 11, "child", 3, 100, "tcp", "198.18.0.1:40000", "198.18.0.2:5201", "ESTABLISHED"),  # after fork
        (2, 10, "client", 4, 101, "udp", "0.0.0.0:5353", "0.0.0.0:0", ""),
        (2, 10, "client", 5, 102, "tcp", "[::1]:40002", "[::1]:5201", "ESTABLISHED"),
    ])
    owners = attribute_frames(f, s)
    assert owners["pid"].tolist() == [11, 11, 10, -1, 10]  # the youngest holder of a shared socket
    assert owners["direction"].tolist() == ["out", "in", "out", "", "in"]
    counts = attribution_counts(f, owners)
    assert (counts["frames"], counts["frames_attributed"], counts["frames_foreign"]) == (5, 4, 1)
    assert {(p["pid"], p["frames_sent"], p["frames_received"]) for p in counts["processes"]} == {(10, 1, 1), (11, 1, 1)}


def test_super_packets_count_as_their_segments() -> None:
    f = frames([
        (6, "198.18.0.1", 1, "198.18.0.2", 2, 1500, 1448),       # one MTU-sized frame
        (6, "198.18.0.1", 1, "198.18.0.2", 2, 14532, 14480),     # 10 segments of 1448
        (6, "198.18.0.1", 1, "198.18.0.2", 2, 3000, 2948),       # 2 full segments and 52 bytes: 3
        (6, "127.0.0.1", 1, "127.0.0.1", 2, 65000, 64948),       # loopback: a frame is a frame
        (6, "198.18.0.1", 1, "198.18.0.2", 2, 52, 0),            # a bare ACK
    ])
    assert segments_carried(f, 1500).tolist() == [1, 10, 3, 1, 1]
    assert segments_carried(f, None).tolist() == [1, 1, 1, 1, 1]


def test_proc_net_endpoints() -> None:
    assert endpoint("0100007F:1F90", 2) == "127.0.0.1:8080"
    assert endpoint("00000000000000000000000001000000:1451", 10) == "[::1]:5201"
    assert endpoint("0000000000000000FFFF00000200A8C0:0050", 10) == "192.168.0.2:80"  # IPv4-mapped
    table = ("  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
             "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1\n")
    (inode, entry), = parse_net_table(table, "tcp", 2).items()
    assert inode == 4242 and (entry.local, entry.remote, entry.state) == ("127.0.0.1:8080", "0.0.0.0:0", "LISTEN")


def test_a_stream_the_program_received_from_a_peer_names_its_receiver() -> None:
    """A server recorded alone (iperf3 -s under -R): the client's control messages come from the
    peer, whose process the recording does not hold; the server's socket receives them, so the
    stream is a row with the server as its receiver (the one-run report called it foreign), and
    the server's own data stream keeps its sender."""
    from hostwire.timeline.program_streams import owners
    from hostwire.timeline.stream_tables import streams_table

    held = sockets([(1, 7, "iperf3", 3, 100, "tcp", "198.18.0.1:5201", "0.0.0.0:0", "LISTEN"),
                    (1, 7, "iperf3", 4, 101, "tcp", "198.18.0.1:5201", "198.18.0.2:57338", "ESTABLISHED"),
                    (1, 7, "iperf3", 5, 102, "tcp", "198.18.0.1:5201", "198.18.0.2:57348", "ESTABLISHED")])
    control, data = "198.18.0.2:57338>198.18.0.1:5201", "198.18.0.1:5201>198.18.0.2:57348"
    names = pd.DataFrame({"proto": [6, 6], "stream": [control, data]})
    senders, receivers = owners(names, held)
    assert senders[["pid", "local", "fd"]].values.tolist() == [[7, "198.18.0.1:5201", 5]]
    assert receivers.values.tolist() == [["iperf3", 7, -1, control]]
    no_sockets = pd.DataFrame(columns=["skaddr", "local", "remote", "owner_pid", "active"])
    table = streams_table(senders.assign(source="sockets"), receivers, no_sockets,
                          pd.DataFrame(columns=["pid", "fd", "stream"])).set_index("stream")
    assert table.loc[control, ["sender_pid", "receiver_pid", "receiver_role"]].tolist() == [-1, 7, "iperf3"]
    assert table.loc[data, ["sender_pid", "sender_role", "sender_fd", "receiver_pid"]].tolist() == [7, "iperf3", 5, -1]
