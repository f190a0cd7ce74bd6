"""What TCP itself holds a stream back by (hostwire.timeline.tcp_waits) on hand-built captures whose
answer is known: a window of segments sent, silence until an acknowledgement, the next frame right
after it (awaiting-ack); a silence a retransmission ends (retransmit-timeout); and UDP flows, IPv4
and IPv6, labelled and explained with their own causes only."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hostwire.errors import InputError
from hostwire.metrics import synth
from hostwire.metrics.streams import label_flows, label_streams
from hostwire.timeline import gaps, sequence, stream_tables
from hostwire.timeline.gaps import GapInputs
from hostwire.timeline.tcp_waits import RELEASE_NS, sender_waits

ISN = 5_000
SEG = 1_000
NAME = f"{synth.SENDER}:40000>{synth.RECEIVER}:5001"


def _handshake() -> list[pd.DataFrame]:
    syn = synth.frame_table(np.array([0]), np.array([0]), np.array([ISN]), np.array([0]), synth.SENDER,
                            synth.RECEIVER, 40000, 5001, flags=0x02, wscale=7)
    syn_ack = synth.frame_table(np.array([100]), np.array([0]), np.array([7]), np.array([ISN + 1]),
                                synth.RECEIVER, synth.SENDER, 5001, 40000, flags=0x12, wscale=7)
    return [syn, syn_ack]


def _data(t: list[int], segment: list[int]) -> pd.DataFrame:
    """Data frames of SEG bytes: frame k at t[k] carries segment number segment[k] (0: the first)."""
    return synth.frame_table(np.array(t), np.full(len(t), SEG), ISN + 1 + SEG * np.array(segment),
                             np.full(len(t), 8), synth.SENDER, synth.RECEIVER, 40000, 5001)


def _acks(t: list[int], segments_acked: list[int]) -> pd.DataFrame:
    return synth.frame_table(np.array(t), np.zeros(len(t), np.int64), np.full(len(t), 8),
                             ISN + 1 + SEG * np.array(segments_acked), synth.RECEIVER, synth.SENDER, 5001, 40000,
                             flags=0x10)


def _waits(*tables: pd.DataFrame) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    labelled = label_streams(synth.concat([*_handshake(), *tables]))
    awaiting, timeouts = sender_waits(sequence.sequence_steps(labelled))
    assert set(awaiting["stream"]) <= {NAME} and set(timeouts["stream"]) <= {NAME}

    def pairs(df: pd.DataFrame) -> list[tuple[int, int]]:
        return list(zip(df["t_start_ns"].astype(int).tolist(), df["t_end_ns"].astype(int).tolist()))

    return pairs(awaiting), pairs(timeouts)


WINDOW = [10_000, 11_000, 12_000, 13_000]  # four segments in flight: the whole window


def test_a_full_window_released_by_an_acknowledgement_is_awaiting_ack() -> None:
    """Four segments sent by 13 us, silence, the acknowledgement of two at 500 us, the fifth
    segment 10 us later: the stream awaited that acknowledgement over [13 us, 500 us)."""
    awaiting, timeouts = _waits(_data(WINDOW + [510_000], [0, 1, 2, 3, 4]), _acks([500_000], [2]))
    assert awaiting == [(13_000, 500_000)] and timeouts == []


def test_a_frame_long_after_the_acknowledgement_was_not_released_by_it() -> None:
    late = 500_000 + RELEASE_NS + 1
    awaiting, timeouts = _waits(_data(WINDOW + [late], [0, 1, 2, 3, 4]), _acks([500_000], [2]))
    assert awaiting == [] and timeouts == []
    # exactly RELEASE_NS after it still is "right after"
    awaiting, _ = _waits(_data(WINDOW + [late - 1], [0, 1, 2, 3, 4]), _acks([500_000], [2]))
    assert awaiting == [(13_000, 500_000)]


def test_a_flight_below_what_the_acknowledgements_allowed_before_is_not_a_full_window() -> None:
    """After the window of four is acknowledged (100 us) the sender puts one segment in flight
    (101 us): 1000 bytes, more than one segment below the 4000 it had in flight before; the
    acknowledgement at 300 us and the frame right after it do not make that gap awaiting-ack."""
    awaiting, _ = _waits(_data(WINDOW + [101_000, 301_000], [0, 1, 2, 3, 4, 5]), _acks([100_000, 300_000], [4, 5]))
    assert awaiting == [(13_000, 100_000)]


def test_a_silence_ended_by_a_retransmission_is_retransmit_timeout() -> None:
    """No acknowledgement for 213 ms, then the first segment again: the timer's silence
    [13 us, 213 ms). The retransmission starts a new episode: its flight (4000 bytes, nothing
    acknowledged) is the episode's most, so the acknowledgement at 213.1 ms releasing the fifth
    segment 5 us later makes [213 ms, 213.1 ms) awaiting-ack."""
    awaiting, timeouts = _waits(_data(WINDOW + [213_000_000, 213_105_000], [0, 1, 2, 3, 0, 4]),
                                _acks([213_100_000], [4]))
    assert timeouts == [(13_000, 213_000_000)]
    assert awaiting == [(213_000_000, 213_100_000)]


def test_a_retransmission_right_after_duplicate_acknowledgements_is_no_timeout() -> None:
    """Three duplicate acknowledgements (300-302 us) and the fast retransmission 1 us later: an
    acknowledgement released it, so no timer held the stream; it waited for them."""
    awaiting, timeouts = _waits(_data(WINDOW + [303_000], [0, 1, 2, 3, 0]), _acks([300_000, 301_000, 302_000], [0, 0, 0]))
    assert timeouts == []
    assert awaiting == [(13_000, 302_000)]


def _explain(proto: str, **over: object) -> pd.Series:
    """The gap 13 us -> 510 us of the first case through gaps.explain: bytes queued throughout, a
    link of one byte per ns (each frame holds it wire_len = 1066 ns)."""
    labelled = label_streams(synth.concat([*_handshake(), _data(WINDOW + [510_000], [0, 1, 2, 3, 4]),
                                           _acks([500_000], [2])]))
    awaiting, timeouts = sender_waits(sequence.sequence_steps(labelled))
    data = labelled[labelled["is_data"].to_numpy()].assign(stream=NAME)
    args: dict = dict(data=data[["t_ns", "stream", "wire_len", "payload_len"]], rate_bit_s=8e9,
                      senders={NAME: 42}, comms={42: "iperf3"}, protos={NAME: proto},
                      backlog=pd.DataFrame({"stream": [NAME], "t_ns": [0], "backlog_bytes": [50_000]}),
                      sends=pd.DataFrame({"stream": [NAME], "t_enter_ns": [0], "t_exit_ns": [1]}),
                      awaiting_acks=awaiting, retransmit_timeouts=timeouts)
    args.update(over)
    table, _ = gaps.explain(GapInputs(**args), min_gap_ns=100_000)
    assert len(table) == 1
    row = table.iloc[0]
    assert sum(int(row[f"{c}_ns"]) for c in gaps.CAUSES) == int(row["gap_ns"]) == 497_000
    return row


def test_awaiting_ack_in_a_gap_and_the_rest_unexplained() -> None:
    row = _explain("tcp")
    assert (row["proto"], row["pid"], row["comm"]) == ("tcp", 42, "iperf3")
    assert int(row["on_wire_ns"]) == 1_066  # 1000 + 52 + 14 bytes
    assert int(row["awaiting_ack_ns"]) == 500_000 - 13_000 - 1_066
    assert int(row["unexplained_ns"]) == 10_000  # from the acknowledgement to the frame it released
    # nothing queued: the application's causes, not the window, hold the stream
    idle = _explain("tcp", backlog=pd.DataFrame({"stream": [NAME], "t_ns": [0], "backlog_bytes": [0]}))
    assert int(idle["awaiting_ack_ns"]) == 0 and int(idle["app_idle_ns"]) == 497_000 - 1_066


def test_a_udp_flow_never_gets_a_tcp_cause() -> None:
    """The same intervals handed in for a flow that is UDP: no window, acknowledgement or
    retransmission holds a datagram; the time is unexplained (bytes queued, link free)."""
    late = pd.DataFrame({"stream": [NAME], "t_start_ns": [0], "t_end_ns": [600_000]})
    window = pd.DataFrame({"stream": [NAME], "t_ns": [0], "window_bytes": [0.0]})
    row = _explain("udp", late_acks=late, window=window, retransmit_timeouts=late)
    assert row["proto"] == "udp"
    assert all(int(row[f"{c}_ns"]) == 0 for c in gaps.TCP_CAUSES)
    assert int(row["unexplained_ns"]) == 497_000 - 1_066


def test_a_udp_datagram_held_in_the_qdisc_is_qdisc() -> None:
    """A datagram the device's queue held (its enqueue paired with its frame: device_queue) is
    qdisc for a UDP flow as for TCP: from its enqueue at 200 us until it left at 510 us."""
    held = pd.DataFrame({"stream": [NAME], "t_start_ns": [200_000], "t_end_ns": [510_000]})
    row = _explain("udp", qdisc_holds=held)
    assert int(row["qdisc_ns"]) == 510_000 - 200_000
    assert int(row["unexplained_ns"]) == 497_000 - 1_066 - 310_000


def _udp(t: list[int], payload: list[int], src: str, dst: str, sport: int, dport: int) -> pd.DataFrame:
    f = synth.frame_table(np.array(t), np.array(payload), np.zeros(len(t), np.int64), np.zeros(len(t), np.int64),
                          src, dst, sport, dport, headers=28, flags=0)
    return f.assign(proto=np.full(len(t), 17, np.uint8), window=np.zeros(len(t), np.uint16))


def test_udp_flows_are_named_in_their_data_direction_ipv4_and_ipv6() -> None:
    """A TCP stream, a UDP flow with a small reply, an IPv6 UDP flow and a UDP flow on the TCP
    stream's very 4-tuple: each its own stream, named src:sport>dst:dport in the direction that
    carried more payload, IPv6 addresses in brackets, the UDP twin of a TCP name marked ` udp`."""
    v6a, v6b = "fd00::1", "fd00::2"
    frames = synth.concat([
        *_handshake(), _data([1_000, 2_000], [0, 1]),
        _udp([3_000, 4_000, 6_000], [1200, 1200, 800], synth.SENDER, synth.RECEIVER, 40001, 5201),
        _udp([5_000], [50], synth.RECEIVER, synth.SENDER, 5201, 40001),
        _udp([7_000, 8_000], [100, 300], v6b, v6a, 6000, 5000),
        _udp([9_000], [10], synth.SENDER, synth.RECEIVER, 40000, 5001),
    ])
    labelled = label_flows(frames)
    names = sorted(labelled["stream"].cat.categories)
    udp4, udp6 = f"{synth.SENDER}:40001>{synth.RECEIVER}:5201", f"[{v6b}]:6000>[{v6a}]:5000"
    assert names == sorted([NAME, udp4, udp6, f"{NAME} udp"])
    by_name = labelled.assign(stream=labelled["stream"].astype(str))
    reply = by_name[by_name["t_ns"] == 5_000].iloc[0]
    assert reply["stream"] == udp4 and not reply["data_dir"] and not reply["is_data"]
    data = by_name[by_name["is_data"].to_numpy()]
    assert (data["proto"].to_numpy() == 17).sum() == 6 and (data["proto"].to_numpy() == 6).sum() == 2
    # a datagram's bytes count in the order they crossed the wire
    udp = stream_tables.datagram_bytes(data[data["proto"].to_numpy() == 17])
    flow = udp[udp["stream"] == udp4]
    assert flow["seq_start"].tolist() == [0, 1200, 2400] and flow["seq_end"].tolist() == [1200, 2400, 3200]
    assert not udp["retransmit"].any()
    # the TCP reading stays TCP only, and a capture without either protocol is refused
    assert set(label_streams(frames)["stream"].cat.categories) == {NAME}
    with pytest.raises(InputError, match="no TCP or UDP frames"):
        label_flows(frames.iloc[:0])
    with pytest.raises(InputError, match="no TCP frames"):
        label_streams(frames[frames["proto"].to_numpy() == 17])
    only_udp = label_flows(frames[frames["proto"].to_numpy() == 17])
    assert set(only_udp["stream"].cat.categories) == {udp4, udp6, NAME}


def test_other_tools_ipv6_captures_name_their_flows(shared_corpus: Path, build_dir: Path) -> None:
    """Captures nobody here wrote: a raw-IP IPv6 UDP datagram (a DNS query) and an IPv6 TCP
    segment, each its own stream with the addresses in brackets."""
    from hostwire.read.pcap import read_pcap

    udp = label_flows(read_pcap(shared_corpus / "pcap" / "LINKTYPE_RAW_ipv6.pcap"))
    assert list(udp["stream"].cat.categories) == ["[2001:db8::1]:12345>[2620:fe::9]:53"]
    assert udp["is_data"].tolist() == [True] and udp["proto"].tolist() == [17]
    tcp = label_flows(read_pcap(shared_corpus / "pcap" / "gso-ipv6.pcap"))
    assert list(tcp["stream"].cat.categories) == ["[2604:1380:4091:ce00::b]:36539>[2604:1380:4091:ce00::d]:45393"]


def test_a_capture_of_udp_flows_only_has_no_sequence_steps() -> None:
    """A DNS server's run: datagrams each way and no TCP frame. The TCP part of the capture is
    empty, and so are its steps (unwrapping no sequence numbers raised IndexError)."""
    frames = synth.concat([_udp([1_000], [40], synth.RECEIVER, synth.SENDER, 40001, 53),
                           _udp([2_000], [60], synth.SENDER, synth.RECEIVER, 53, 40001)])
    labelled = label_flows(frames)
    steps = sequence.sequence_steps(labelled[labelled["proto"].to_numpy() == 6])
    assert len(steps.position) == 0 and len(steps.t_ns) == 0
