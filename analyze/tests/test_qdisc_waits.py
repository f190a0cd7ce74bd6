"""The kernel below TCP (hostwire.timeline.qdisc_waits) on hand-built kernel events and frames
whose answers are worked out by hand: which probe names which socket and when its segment was
taken in, when a frame went into the queueing discipline, and the stack's path from a release."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hostwire.timeline import qdisc_waits
from hostwire.timeline.qdisc_waits import RELEASE_NS, probes, qdisc_holds, send_paths, sockaddr_text, stream_ends

S = "198.18.0.1:7000>198.18.0.2:5000"
# struct sockaddr_in (family 2 little-endian, port, address) and sockaddr_in6, padded to 28 bytes as tcp_probe has them
LOCAL = "0200" + "1b58" + "c6120001" + "00" * 20
REMOTE = "0200" + "1388" + "c6120002" + "00" * 20
V6 = "0a00" + "1b58" + "00000000" + "20010db8000000000000000000000001" + "00000000"


def event(t: int, name: str, skb: str, **fields: object) -> dict[str, object]:
    return {"t_ns": t, "cpu": 0, "event": name, "pid": 0, "comm": "", "skbaddr": skb, **fields}


def trace() -> pd.DataFrame:
    probe = dict(saddr=LOCAL, daddr=REMOTE, sport=7000, dport=5000)
    rows = [
        event(1_000, "netif_receive_skb", "0xffff888100000100"),
        event(1_600, "tcp_probe", "0xffff888100000100", snd_nxt=10, **probe),     # taken in at 1000
        event(2_000, "sched_switch", ""),
        event(400_000, "netif_receive_skb", "0xffff888100000200"),
        event(700_000, "tcp_probe", "0xffff888100000200", snd_nxt=20, **probe),   # 300 us later: its own stamp
        event(700_100, "tcp_probe", "0xffff888100000300", snd_nxt=30, **probe),   # no reception: its own stamp
        event(800_000, "netif_receive_skb", "0xffff888100000300"),
        event(800_000, "tcp_probe", "0xffff888100000300", snd_nxt=40, **probe),   # the same stamp: taken in then
    ]
    return pd.DataFrame(rows)


def test_each_probe_names_its_socket_and_when_its_segment_was_taken_in() -> None:
    table, _ = probes(trace())
    assert table["t_ns"].tolist() == [1_600, 700_000, 700_100, 800_000]
    assert table["received_ns"].tolist() == [1_000, 700_000, 700_100, 800_000]
    assert set(zip(table["local"], table["sport"], table["remote"], table["dport"])) == {
        ("198.18.0.1", 7000, "198.18.0.2", 5000)}
    assert table["snd_nxt"].tolist() == [10, 20, 30, 40]
    assert sockaddr_text(V6) == "2001:db8::1" and sockaddr_text("ffff") == "" and sockaddr_text("zz") == ""


@pytest.mark.parametrize("cut", range(1, 8))
def test_probes_read_in_pieces_are_the_whole_traces(cut: int) -> None:
    """A trace read in slabs carries its last RELEASE_NS of receptions into the next piece."""
    events = trace()
    whole, _ = probes(events)
    first, carry = probes(events.iloc[:cut])
    second, _ = probes(events.iloc[cut:], carry)
    pd.testing.assert_frame_equal(qdisc_waits.joined_probes([first, second]), whole)
    spilled = qdisc_waits.SpilledProbes()  # as the first pass over a trace keeps them: on scratch files
    spilled.add(first)
    spilled.add(second)
    pd.testing.assert_frame_equal(spilled.table(), whole)


def frames(t: list[int], seq_end: list[int]) -> pd.DataFrame:
    return pd.DataFrame({"t_ns": t, "stream": S, "seq_end": seq_end})


def probe_rows(t: list[int], snd_nxt: list[int], received: list[int] | None = None) -> pd.DataFrame:
    return pd.DataFrame({"t_ns": t, "local": "198.18.0.1", "sport": 7000, "remote": "198.18.0.2", "dport": 5000,
                         "snd_nxt": snd_nxt, "received_ns": received if received is not None else t})


@pytest.mark.parametrize("base", [1_000_000, (1 << 32) - 2_500])  # the second wraps between bytes 2500 and 2501
def test_a_frame_is_in_the_queueing_discipline_from_the_first_probe_past_its_last_byte(base: int) -> None:
    data = frames([100, 200, 300, 400, 500], [1_000, 2_000, 3_000, 4_000, 2_000])  # the last: a retransmission
    p = probe_rows([50, 250, 260], [(base + v) % (1 << 32) for v in (2_000, 4_000, 3_000)])
    got = qdisc_holds(p, data, {S: base})
    # frames 1-2 were sent by 50, frames 3-4 by 250 (a lower snd_nxt later changes nothing); the
    # retransmission's queueing is not told
    assert list(zip(got["t_start_ns"], got["t_end_ns"])) == [(50, 100), (50, 200), (250, 300), (250, 400)]
    assert set(got["stream"]) == {S}


def test_no_hold_without_the_sockets_probes_or_base() -> None:
    data = frames([100, 200], [1_000, 2_000])
    other = probe_rows([50], [5_000]).assign(sport=7001)  # another socket
    assert len(qdisc_holds(other, data, {S: 0})) == 0
    assert len(qdisc_holds(probe_rows([50], [5_000]), data, {})) == 0
    assert len(qdisc_holds(probe_rows([150], [1_500]), data, {S: 0})) == 0  # frame 1 left before 150; frame 2 not yet sent


def test_the_send_path_runs_from_the_latest_release_within_release_ns() -> None:
    data = pd.DataFrame({"t_ns": [0, 1_000_000, 1_100_000, 2_000_000], "stream": S})
    p = probe_rows([960_000], [0], received=[950_000])
    sends = pd.DataFrame({"stream": [S], "t_enter_ns": [1_050_000]})
    got = send_paths(p, data, sends)
    # frame 0: no release before it; frame 3: the latest release 950 us earlier, beyond RELEASE_NS
    assert list(zip(got["t_start_ns"], got["t_end_ns"])) == [(950_000, 1_000_000), (1_050_000, 1_100_000)]
    assert RELEASE_NS == 200_000
    assert send_paths(p, data, None)["t_start_ns"].tolist() == [950_000, 950_000]


def test_stream_names_give_their_ends() -> None:
    assert stream_ends(S) == ("198.18.0.1", 7000, "198.18.0.2", 5000)
    assert stream_ends("[2001:db8::1]:443>[2001:db8::2]:5000 udp") == ("2001:db8::1", 443, "2001:db8::2", 5000)
    assert stream_ends("nonsense") is None and stream_ends("a:b>c:d") is None
    assert np.issubdtype(qdisc_waits.empty_probes()["t_ns"].dtype, np.integer)


def test_a_trace_without_probes_says_what_it_cannot_tell() -> None:
    from hostwire.timeline.gap_inputs import GapInputs

    data = frames([100, 200], [1_000, 2_000]).assign(wire_len=100)
    told = GapInputs(data=data, rate_bit_s=1e9, no_probes=True).cannot_tell()
    assert any("no tcp_probe event" in line and "qdisc is never told" in line for line in told)
    assert not any("tcp_probe event" in line for line in GapInputs(data=data, rate_bit_s=1e9).cannot_tell())
