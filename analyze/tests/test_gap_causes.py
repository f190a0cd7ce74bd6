"""Each cause of a gap as its own condition on hand-built segments, and the precedence among them
declared once (hostwire.timeline.gaps.PRECEDENCE)."""

from __future__ import annotations

import numpy as np
import pytest

from hostwire.timeline import gaps
from hostwire.timeline.gaps import CAUSES, Segments, classify

# Fourteen segments (the eleventh: everything but on-wire holds); each condition set below holds on the segments marked 1.
HOLDS = {
    "on_wire":            [1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
    "receiver_window":    [0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0],
    "retransmit_timeout": [0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0],
    "busy":               [1, 1, 1, 1, 0, 1, 0, 0, 0, 0, 1, 1, 0, 0],
    "backlog":            [1, 1, 1, 1, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1],
    "in_call":            [0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 1, 0, 0, 0],
    "late_ack":           [0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1, 0, 1, 0],
    "awaiting_ack":       [0, 0, 0, 0, 0, 0, 1, 1, 1, 0, 1, 0, 1, 1],
    "vcpu_stolen":        [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0],
    "qdisc":              [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 0],
    "send_path":          [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 1],
}
WAIT_CPU = [-1, -1, -1, -1, 0, -1, -1, -1, -1, -1, 0, 0, -1, -1]
# what each segment is, by the module docstring's precedence: 11, the shaper's queue behind another
# stream's frame (the link first) over a waiting helper (the CPU first); 12, a frame in the queueing
# discipline is not held by the window or the ACK clock; 13, the stack's path only where nothing else holds
EXPECTED = ["on_wire", "receiver_window", "retransmit_timeout", "wire_busy", "preempted", "blocked_in_call",
            "app_idle", "receiver_window", "awaiting_ack", "unexplained", "vcpu_stolen", "wire_busy", "qdisc",
            "awaiting_ack"]


def segments(backlog_known: bool = True, **change: list[int]) -> Segments:
    holds = {k: np.array(change.get(k, v), dtype=bool) for k, v in HOLDS.items()}
    n = len(WAIT_CPU)
    return Segments(np.arange(n) * 10, np.arange(n) * 10 + 10, np.zeros(n, np.int64), holds,
                    np.array(change.get("wait_cpu", WAIT_CPU)), backlog_known)


@pytest.mark.parametrize("cause, expected", [
    (gaps.on_wire, [1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
    (gaps.vcpu_stolen, [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0]),
    (gaps.receiver_window, [0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0]),
    (gaps.retransmit_timeout, [0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0]),  # whatever is queued: the timer holds the bytes
    (gaps.wire_busy, [1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0]),           # busy only where bytes are queued
    (gaps.preempted, [0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 1, 0, 0]),
    (gaps.qdisc, [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 0]),
    (gaps.blocked_in_call, [0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0]),     # in a call with nothing queued
    (gaps.app_idle, [0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0]),            # out of any call with nothing queued
    (gaps.late_acknowledgement, [0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1, 0, 1, 0]),
    (gaps.awaiting_ack, [0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 1, 0, 1, 1]),        # a full window holds only queued bytes
    (gaps.send_path, [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 1]),
    (gaps.unexplained, [1] * 14),
])
def test_each_cause_by_hand(cause, expected: list[int]) -> None:
    assert cause(segments()).astype(int).tolist() == expected


def test_an_unknown_backlog_gates_nothing() -> None:
    s = segments(backlog_known=False)
    assert gaps.wire_busy(s).astype(int).tolist() == HOLDS["busy"]
    assert gaps.blocked_in_call(s).astype(int).tolist() == HOLDS["in_call"]
    assert gaps.app_idle(s).astype(int).tolist() == [1 - v for v in HOLDS["in_call"]]
    assert gaps.awaiting_ack(s).astype(int).tolist() == HOLDS["awaiting_ack"]


def test_the_first_cause_that_holds_takes_the_segment() -> None:
    assert [CAUSES[k] for k in classify(segments())] == EXPECTED
    # everything holds: the stream's own frame on the link comes first
    everything = segments(**{k: [1] * 14 for k in HOLDS}, wait_cpu=[0] * 14)
    assert {CAUSES[k] for k in classify(everything)} == {"on_wire"}
    # a preempted sender with bytes queued behind another stream's frame: the link comes first
    assert CAUSES[classify(segments(wait_cpu=[0] * 14))[3]] == "wire_busy"
    # a retransmission timer's silence over a preempted sender: the timer holds the bytes
    assert CAUSES[classify(segments(wait_cpu=[0] * 14))[2]] == "retransmit_timeout"
    # a full window with a preempted helper: the host's cause comes first
    assert CAUSES[classify(segments(wait_cpu=[0] * 14))[8]] == "preempted"


def test_precedence_names_every_cause_and_ends_with_unexplained() -> None:
    named = [cause for cause, _ in gaps.PRECEDENCE]
    assert set(named) == set(CAUSES) and named[-1] == "unexplained"
    # the receiver holds the sender back twice: first by its window, then by late acknowledgements
    assert [c for c, f in gaps.PRECEDENCE if c == "receiver_window"] == ["receiver_window"] * 2
    assert gaps.PRECEDENCE[2][1] is gaps.receiver_window and gaps.PRECEDENCE[-4][1] is gaps.late_acknowledgement
    assert gaps.PRECEDENCE[-3][1] is gaps.awaiting_ack and gaps.PRECEDENCE[3][1] is gaps.retransmit_timeout
    # the kernel below TCP: its queueing discipline after the host's CPU, its own path last of all
    named_at = {c: k for k, (c, _) in enumerate(gaps.PRECEDENCE)}
    assert named_at["qdisc"] == named_at["preempted"] + 1 and gaps.PRECEDENCE[-2][1] is gaps.send_path
    # a host the hypervisor stopped moves nothing: only the frame's own time on the link comes first
    assert gaps.PRECEDENCE[1][1] is gaps.vcpu_stolen
