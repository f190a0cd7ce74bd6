"""The flows of a run's capture found in one pass over its chunks in time order, named as
hostwire.metrics.streams.label_flows names them (a TCP connection or a UDP 4-tuple, in the
direction that carried more payload; a UDP flow whose name a TCP stream has gets ` udp`), with
what the later passes of hostwire.timeline.capture_pass need of each TCP stream's whole capture:
the window scale each end offered in its SYN, the data direction's ISN, its largest payload, and
how many data frames and acknowledgements it has."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hostwire.metrics.chunked.labels import Connections
from hostwire.metrics.streams import TCP, UDP
from hostwire.read.pcapchunks import CaptureChunks, Chunk
from hostwire.timeline.sequence import TCP_ACK, TCP_SYN

COLUMNS = ("t_ns", "proto", "src", "dst", "sport", "dport", "payload_len", "flags", "seq", "wscale")
NO_SYN = -2  # a direction whose SYN is not in the capture


class _TcpFacts:
    """Per TCP connection and direction (index connection * 2 + goes from the lower endpoint)."""

    def __init__(self) -> None:
        self.syn_seq = np.zeros(0, np.int64)  # the last SYN's sequence number
        self.wscale = np.zeros(0, np.int64)  # the shift the last SYN offered (-1: none; NO_SYN)
        self.max_payload = np.zeros(0, np.int64)
        self.data = np.zeros(0, np.int64)  # frames with payload
        self.acks = np.zeros(0, np.int64)  # frames with the ACK flag
        self.frames = np.zeros(0, np.int64)

    def add(self, chunk: Chunk, conn: np.ndarray, forward: np.ndarray, n_conns: int) -> None:
        size = 2 * n_conns
        if len(self.frames) < size:
            grow = size - len(self.frames)
            self.syn_seq = np.r_[self.syn_seq, np.zeros(grow, np.int64)]
            self.wscale = np.r_[self.wscale, np.full(grow, NO_SYN, np.int64)]
            for name in ("max_payload", "data", "acks", "frames"):
                setattr(self, name, np.r_[getattr(self, name), np.zeros(grow, np.int64)])
        side = conn * 2 + forward
        flags = chunk["flags"].astype(np.int64)
        payload = chunk["payload_len"].astype(np.int64)
        self.frames += np.bincount(side, minlength=size)
        self.data += np.bincount(side, weights=payload > 0, minlength=size).astype(np.int64)
        self.acks += np.bincount(side, weights=(flags & TCP_ACK) != 0, minlength=size).astype(np.int64)
        np.maximum.at(self.max_payload, side, payload)
        syn = np.flatnonzero((flags & TCP_SYN) != 0)
        if len(syn):
            # the last SYN of each direction: the first in reversed order
            sides, at = np.unique(side[syn][::-1], return_index=True)
            last = syn[::-1][at]
            self.syn_seq[sides] = chunk["seq"][last].astype(np.int64)
            self.wscale[sides] = chunk["wscale"][last].astype(np.int64)


@dataclass
class TcpStream:
    """What the later passes need of one TCP stream's whole capture."""

    data_shift: int  # the shift of the data direction's windows (0 when not scaling)
    ack_shift: int  # the shift of the receiver's windows
    scale_known: bool  # both SYNs captured: else the windows are unknown (NaN)
    isn: int | None  # the data direction's last SYN's sequence number
    mss: int  # the largest payload of its data frames
    data_frames: int
    data_dir_frames: int
    acknowledgements: int  # the receiver's frames with the ACK flag


class Flows:
    """The flows of a capture (found by `scan`): names (sorted, label_flows' categories), each
    chunk's rows labelled by them, and each TCP stream's facts."""

    def __init__(self, capture: CaptureChunks, conns: dict[int, Connections], tcp: _TcpFacts) -> None:
        named = {p: c.named(capture.addresses) for p, c in conns.items() if c.fwd_bytes}
        taken = set(named[TCP][1]) if TCP in named else set()
        if UDP in named:  # a UDP flow never merges with a TCP stream of its name
            named[UDP] = (named[UDP][0], [f"{n} udp" if n in taken else n for n in named[UDP][1]])
        self.names = sorted({n for _, names in named.values() for n in names})
        position = {name: i for i, name in enumerate(self.names)}
        self.conns = conns
        self.data_fwd = {p: d for p, (d, _) in named.items()}
        self.code_of_conn = {p: np.asarray([position[n] for n in names], dtype=np.int64) for p, (_, names) in named.items()}
        self.proto_of = np.zeros(len(self.names), np.int64)
        for p, codes in self.code_of_conn.items():
            self.proto_of[codes] = p
        self.tcp: dict[int, TcpStream] = {}
        if TCP in named:
            self._tcp_facts(tcp)

    def _tcp_facts(self, tcp: _TcpFacts) -> None:
        data_fwd = self.data_fwd[TCP]
        conn = np.arange(len(data_fwd))
        data_side, ack_side = conn * 2 + data_fwd, conn * 2 + ~data_fwd
        offered_data, offered_ack = tcp.wscale[data_side], tcp.wscale[ack_side]
        known = (offered_data != NO_SYN) & (offered_ack != NO_SYN)
        scaling = (offered_data >= 0) & (offered_ack >= 0)
        for c, code in enumerate(self.code_of_conn[TCP].tolist()):
            self.tcp[code] = TcpStream(
                data_shift=int(offered_data[c]) if scaling[c] else 0, ack_shift=int(offered_ack[c]) if scaling[c] else 0,
                scale_known=bool(known[c]), isn=int(tcp.syn_seq[data_side[c]]) if offered_data[c] != NO_SYN else None,
                mss=int(tcp.max_payload[data_side[c]]), data_frames=int(tcp.data[data_side[c]]),
                data_dir_frames=int(tcp.frames[data_side[c]]), acknowledgements=int(tcp.acks[ack_side[c]]))

    def label(self, chunk: Chunk, proto: int) -> tuple[np.ndarray, np.ndarray]:
        """(stream code, data_dir) of each row of a chunk of one protocol's rows."""
        conn, forward = self.conns[proto].of(chunk)
        return self.code_of_conn[proto][conn], forward == self.data_fwd[proto][conn]


def tcp_or_udp(chunk: Chunk) -> np.ndarray:
    return (chunk["proto"] == TCP) | (chunk["proto"] == UDP)


def scan(capture: CaptureChunks) -> Flows:
    """One pass over the TCP and UDP rows in time order: the flows and the TCP streams' facts."""
    conns = {TCP: Connections(), UDP: Connections()}
    tcp = _TcpFacts()
    for chunk in capture.time_ordered(COLUMNS, tcp_or_udp):
        for proto, c in conns.items():
            rows = chunk["proto"] == proto
            if not rows.any():
                continue
            part = {k: v[rows] for k, v in chunk.items()}
            conn, forward = c.add(part)
            if proto == TCP:
                tcp.add(part, conn, forward, len(c.fwd_bytes))
    return Flows(capture, conns, tcp)
