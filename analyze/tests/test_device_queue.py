"""The shaped device's own queue (hostwire.timeline.device_queue) on hand-built enqueues and
frames whose pairing is worked out by hand: one buffer per frame in FIFO order, a GSO buffer the
qdisc segmented into two frames, a pure acknowledgement, a buffer the qdisc dropped, a frame whose
enqueue the trace lost, a frame stamped before a buffer of its length was enqueued; the table of
a trace read in slabs equal to the whole trace's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hostwire.read.sched import read_sched_tsv
from hostwire.timeline import device_queue, kernel_slabs
from hostwire.timeline.device_queue import enqueues, fifo_devices, pair, queue_holds

A = ("198.18.0.1", 7000, "198.18.0.2", 5000)
B = ("198.18.0.1", 7001, "198.18.0.2", 5000)
NAME_A, NAME_B = "198.18.0.1:7000>198.18.0.2:5000", "198.18.0.1:7001>198.18.0.2:5000"
HEADERS = 52  # IPv4 (20) and TCP with timestamps (32)

# (t_ns, len): skb->len at dev_queue_xmit, the Ethernet header (14) included
BUFFERS = [
    (1_000, 14 + HEADERS + 1000),      # b0: A, one frame
    (1_100, 14 + HEADERS + 2 * 1448),  # b1: B, GSO: segmented by tbf into two frames of 1448
    (1_200, 14 + HEADERS),             # b2: A's pure acknowledgement
    (1_300, 14 + HEADERS + 1000),      # b3: A, dropped by the qdisc: never transmitted
    (1_400, 14 + HEADERS + 500),       # b4: B
    (1_600, 14 + HEADERS + 200),       # b5: A (the frame before it, A's 700 bytes, has no enqueue)
]
# (t_ns, flow, payload) of the frames the device transmitted, in order
FRAMES = [(5_000, A, 1000), (6_000, B, 1448), (7_000, B, 1448), (8_000, A, 0), (9_000, B, 500),
          (10_000, A, 700), (11_000, A, 200)]
EXPECTED_ENQUEUED = [1_000, 1_100, 1_100, 1_200, 1_400, -1, 1_600]


def frames(rows: list[tuple[int, tuple[str, int, str, int], int]] = FRAMES, headers: int = HEADERS) -> pd.DataFrame:
    return pd.DataFrame({"t_ns": [t for t, _, _ in rows], "ip_len": [headers + p for _, _, p in rows],
                         "payload_len": [p for _, _, p in rows], "proto": 6,
                         "src": [f[0] for _, f, _ in rows], "sport": [f[1] for _, f, _ in rows],
                         "dst": [f[2] for _, f, _ in rows], "dport": [f[3] for _, f, _ in rows]})


def queued(rows: list[tuple[int, int]] = BUFFERS, device: str = "hwt") -> pd.DataFrame:
    return pd.DataFrame({"t_ns": [t for t, _ in rows], "len": [n for _, n in rows], "device": device})


def paired(q: pd.DataFrame, f: pd.DataFrame) -> device_queue.Pairing:
    flow = device_queue.frame_flows(f)
    return pair(q["t_ns"].to_numpy(), q["len"].to_numpy(), f["t_ns"].to_numpy(), f["ip_len"].to_numpy(),
                f["payload_len"].to_numpy(), flow)


def test_each_frame_pairs_with_its_buffer_through_gso_a_drop_and_a_lost_enqueue() -> None:
    got = paired(queued(), frames())
    assert got.enqueued_ns.tolist() == EXPECTED_ENQUEUED
    assert got.buffer_of.tolist() == [0, 1, 1, 2, 4, -1, 5]  # b3 dropped
    assert got.summary() == {"buffers": 6, "frames": 7, "paired_buffers": 5, "segmented_buffers": 1,
                             "unsent_buffers": 1, "unpaired_frames": 1, "swapped_buffers": 0, "link_header": 14}


def test_two_buffers_enqueued_by_two_cpus_at_once_pair_in_the_order_they_left() -> None:
    """As redis and the other CPU's softirq did: A's answer traced 100 ns before B's pure
    acknowledgement, the acknowledgement transmitted first; then a buffer in order again."""
    q = queued([(1_000, 14 + HEADERS + 30), (1_100, 14 + HEADERS), (2_000, 14 + HEADERS)])
    got = paired(q, frames([(5_000, B, 0), (6_000, A, 30), (7_000, A, 0)]))
    assert got.buffer_of.tolist() == [1, 0, 2] and got.enqueued_ns.tolist() == [1_100, 1_000, 2_000]
    assert (got.swapped_buffers, got.unsent_buffers, got.unpaired_frames) == (2, 0, 0)


def test_buffers_traced_further_apart_than_the_swap_slack_are_not_swapped() -> None:
    """The same, the second traced 25 us after the first: the re-synchronisation's smallest skip
    takes the acknowledgement's frame as without a buffer and its buffer as never sent."""
    q = queued([(1_000, 14 + HEADERS + 30), (26_000, 14 + HEADERS)])
    got = paired(q, frames([(30_000, B, 0), (31_000, A, 30)]))
    assert got.buffer_of.tolist() == [-1, 0]
    assert (got.swapped_buffers, got.unsent_buffers, got.unpaired_frames) == (0, 1, 1)


def test_a_frame_never_pairs_with_a_buffer_enqueued_after_it() -> None:
    """The same length, but enqueued 45 us after the frame left: another buffer, never sent."""
    got = paired(queued([(50_000, 14 + HEADERS + 1000)]), frames([(5_000, A, 1000)]))
    assert got.enqueued_ns.tolist() == [-1]
    assert (got.unsent_buffers, got.unpaired_frames, got.paired_buffers) == (1, 1, 0)


def test_buffers_left_when_the_capture_stopped_are_counted_unsent() -> None:
    got = paired(queued(BUFFERS[:3] + [(1_250, 14 + HEADERS + 9)]), frames(FRAMES[:4]))
    assert got.enqueued_ns.tolist() == [1_000, 1_100, 1_100, 1_200]
    assert (got.unsent_buffers, got.unpaired_frames) == (1, 0)


def test_a_device_without_a_link_header_pairs_with_none() -> None:
    q = queued([(t, n - 14) for t, n in BUFFERS])
    got = paired(q, frames())
    assert got.link_header == 0 and got.enqueued_ns.tolist() == EXPECTED_ENQUEUED


def test_a_segment_of_another_flow_ends_a_gso_buffer() -> None:
    """B's buffer of 2 x 1448 followed by A's 1448: the segments must be of one flow."""
    f = frames([(6_000, B, 1448), (7_000, A, 1448)])
    got = paired(queued([(1_100, 14 + HEADERS + 2 * 1448)]), f)
    assert got.enqueued_ns.tolist() == [-1, -1] and got.unsent_buffers == 1 and got.unpaired_frames == 2


def test_data_frames_are_in_the_qdisc_from_their_buffers_enqueue() -> None:
    holds, found = queue_holds(pd.concat([queued(), queued([(3_000, 999)], "other")]), "hwt", frames())
    assert found.paired_buffers == 5  # the other device's buffer is not this one's
    rows = sorted(zip(holds["stream"], holds["t_start_ns"], holds["t_end_ns"]))
    # the pure acknowledgement (8000) and the frame without a buffer (10000) hold nothing
    assert rows == [(NAME_A, 1_000, 5_000), (NAME_A, 1_600, 11_000), (NAME_B, 1_100, 6_000),
                    (NAME_B, 1_100, 7_000), (NAME_B, 1_400, 9_000)]


def test_stream_names_are_the_timelines() -> None:
    f = pd.DataFrame({"src": ["2001:db8::1", "198.18.0.1"], "sport": [1, 2], "dst": ["2001:db8::2", "198.18.0.2"],
                      "dport": [3, 4], "proto": [6, 17]})
    assert device_queue.frame_streams(f).tolist() == ["[2001:db8::1]:1>[2001:db8::2]:3",
                                                      "198.18.0.1:2>198.18.0.2:4"]
    # the same ends in TCP and in UDP are two flows
    both = pd.DataFrame({"src": ["198.18.0.1"] * 3, "sport": [2] * 3, "dst": ["198.18.0.2"] * 3, "dport": [4] * 3,
                         "proto": [6, 17, 6]})
    assert device_queue.frame_flows(both).tolist() == [0, 1, 0]


def test_only_fifo_shaped_devices_other_than_loopback_are_paired() -> None:
    link = {"interfaces": [{"name": "lo", "loopback": True}, {"name": "a"}, {"name": "b"}, {"name": "c"},
                           {"name": "d"}, {"name": "e"}],
            "qdiscs": {"a": {"kinds": ["tbf"]}, "b": {"kinds": ["fq_codel"]}, "c": {"kinds": ["tbf", "sfq"]},
                       "d": {"kinds": ["noqueue"]}, "e": {"kinds": ["pfifo"]}, "lo": {"kinds": ["pfifo"]}}}
    assert fifo_devices(link) == ["a", "e"]  # noqueue holds nothing; loopback is never paired
    assert fifo_devices({}) == []


FIXTURE = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "run-small"


@pytest.mark.parametrize("piece_bytes", [300, 2_000, 1 << 30])
def test_the_enqueues_of_a_trace_read_in_slabs_are_the_whole_traces(piece_bytes: int) -> None:
    path = FIXTURE / "raw" / "sched.tsv"
    whole = enqueues(read_sched_tsv(path)[1])
    assert len(whole) == 25 and set(whole["device"]) and (whole["len"] > 0).all()
    first = kernel_slabs.first_pass(path, piece_bytes)
    pd.testing.assert_frame_equal(first.enqueues, whole, check_dtype=False)
    assert first.enqueues["t_ns"].dtype == np.int64


@pytest.mark.parametrize("note, warned", [
    ("not paired: the capture holds 2 devices besides loopback (a, b), whose frames it does not tell apart", True),
    ("partly paired: a: 6 buffers enqueued (net_dev_queue), 7 frames sent; ... 1 frames without a buffer", True),
    ("a: 6 buffers enqueued (net_dev_queue), 7 frames sent; ... 0 frames without a buffer", False)])
def test_a_device_not_or_partly_paired_is_a_warning(note: str, warned: bool) -> None:
    from hostwire.timeline.gap_inputs import GapInputs

    sentences = GapInputs(data=pd.DataFrame(), rate_bit_s=1e8, sources={"qdisc_queue": note}).cannot_tell()
    assert any(note in s for s in sentences) == warned
