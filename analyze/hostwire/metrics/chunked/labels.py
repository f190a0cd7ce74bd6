"""The streams of a capture found in one pass over its chunks, with the rule of
hostwire.metrics.streams.label_streams: a TCP connection is the pair of its endpoints; its data
direction carries more payload bytes (a tie: the direction of its first frame in time order); its
name is `src:port>dst:port` in that direction; streams are numbered in name order. Then each chunk
is labelled from these per-connection facts, so a stream that crosses a chunk boundary is one
stream."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from hostwire.errors import InputError
from hostwire.metrics.streams import TCP, host_label, selected_names
from hostwire.window import Window
from hostwire.read.pcapchunks import CaptureChunks, Chunk

LABEL_COLUMNS = ("t_ns", "proto", "src", "dst", "sport", "dport", "payload_len")


@dataclass
class Connections:
    """Per connection (numbered in order of first appearance): endpoint key, payload bytes each
    way, the direction of its first frame."""

    ids: dict[int, int] = field(default_factory=dict)
    fwd_bytes: list[int] = field(default_factory=list)
    rev_bytes: list[int] = field(default_factory=list)
    first_fwd: list[bool] = field(default_factory=list)
    lo: list[int] = field(default_factory=list)
    hi: list[int] = field(default_factory=list)

    def add(self, chunk: Chunk) -> tuple[np.ndarray, np.ndarray]:
        """Counts a chunk's rows (one protocol's, in time order) into their connections: (each
        row's connection number, whether it goes from the lower endpoint)."""
        key, lo, forward = endpoints(chunk)
        codes, uniques = pd.factorize(key, sort=False)
        payload = chunk["payload_len"].astype(np.int64)
        k = len(uniques)
        fwd = np.bincount(codes, weights=payload * forward, minlength=k)
        rev = np.bincount(codes, weights=payload * ~forward, minlength=k)
        first = np.full(k, len(codes), dtype=np.int64)
        np.minimum.at(first, codes, np.arange(len(codes)))
        conn_of = np.empty(k, dtype=np.int64)
        for j, unique in enumerate(uniques.tolist()):
            conn = self.ids.get(unique)
            if conn is None:
                conn = self.ids[unique] = len(self.fwd_bytes)
                self.fwd_bytes.append(0)
                self.rev_bytes.append(0)
                self.first_fwd.append(bool(forward[first[j]]))
                self.lo.append(int(lo[first[j]]))
                self.hi.append(int(unique - lo[first[j]] * EP_SPAN))
            self.fwd_bytes[conn] += int(fwd[j])
            self.rev_bytes[conn] += int(rev[j])
            conn_of[j] = conn
        return conn_of[codes], forward

    def named(self, addresses: Sequence[str]) -> tuple[np.ndarray, list[str]]:
        """(data_fwd: the data direction goes from the lower endpoint, name) of each connection:
        the direction that carried more payload (a tie: its first frame's), named
        `src:port>dst:port` that way."""
        fwd = np.asarray(self.fwd_bytes, dtype=np.int64)
        rev = np.asarray(self.rev_bytes, dtype=np.int64)
        data_fwd = np.where(fwd > rev, True, np.where(rev > fwd, False, np.asarray(self.first_fwd, dtype=bool)))
        lo, hi = np.asarray(self.lo, dtype=np.int64), np.asarray(self.hi, dtype=np.int64)
        a = np.where(data_fwd, lo, hi)
        b = np.where(data_fwd, hi, lo)
        return data_fwd, [f"{host_label(addresses[x >> 16])}:{x & 0xFFFF}>{host_label(addresses[y >> 16])}:{y & 0xFFFF}"
                          for x, y in zip(a.tolist(), b.tolist())]

    def of(self, chunk: Chunk) -> tuple[np.ndarray, np.ndarray]:
        """(connection number, goes from the lower endpoint) of each row of a chunk whose
        connections were all counted (add)."""
        key, _, forward = endpoints(chunk)
        codes, uniques = pd.factorize(key, sort=False)
        return np.asarray([self.ids[int(k)] for k in uniques], dtype=np.int64)[codes], forward


def endpoints(chunk: Chunk) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(key of the connection, lower endpoint, frame goes from the lower endpoint) of each row;
    an endpoint is address code * 65536 + port."""
    src_ep = chunk["src"].astype(np.int64) * 65536 + chunk["sport"].astype(np.int64)
    dst_ep = chunk["dst"].astype(np.int64) * 65536 + chunk["dport"].astype(np.int64)
    lo = np.minimum(src_ep, dst_ep)
    hi = np.maximum(src_ep, dst_ep)
    return lo * EP_SPAN + hi, lo, src_ep == lo


# Endpoints stay below 2**31 up to 32768 addresses; a key of two then fits in int64.
EP_SPAN = 1 << 31


def is_tcp(chunk: Chunk) -> np.ndarray:
    return chunk["proto"] == TCP


class StreamLabels:
    """The streams of a capture (found by `scan`), and each chunk's rows labelled by them."""

    def __init__(self, capture: CaptureChunks, conns: Connections, wanted: Sequence[str] | None) -> None:
        n = len(conns.fwd_bytes)
        if n == 0:
            raise InputError(f"no TCP frames among {capture.rows} frame(s): nothing to measure")
        self.data_fwd, names = conns.named(capture.addresses)
        keep = selected_names(sorted(names), wanted)
        self.names = [name for name in sorted(names) if name in keep]
        position = {name: i for i, name in enumerate(self.names)}
        # conn -> stream number among the kept names, -1 for a connection left out
        self.code_of_conn = np.asarray([position.get(name, -1) for name in names], dtype=np.int64)
        self.conns = conns

    def label(self, chunk: Chunk) -> tuple[np.ndarray, np.ndarray]:
        """(stream number, -1 for a stream left out; is_data) of each row of a TCP chunk."""
        stream, data_dir = self.directions(chunk)
        return stream, data_dir & (chunk["payload_len"] > 0) & (stream >= 0)

    def directions(self, chunk: Chunk) -> tuple[np.ndarray, np.ndarray]:
        """(stream number, -1 for a stream left out; data_dir: the row travels in its stream's data
        direction) of each row of a TCP chunk."""
        conn, forward = self.conns.of(chunk)
        return self.code_of_conn[conn], forward == self.data_fwd[conn]


def scan(capture: CaptureChunks, wanted: Sequence[str] | None = None) -> StreamLabels:
    """One pass over the TCP rows in time order: the connections and their facts."""
    if len(capture.addresses) > EP_SPAN >> 16:
        raise InputError(f"{capture.path}: more than {EP_SPAN >> 16} addresses; read it in memory")
    conns = Connections()
    for chunk in capture.time_ordered(LABEL_COLUMNS, is_tcp):
        if len(chunk["t_ns"]) == 0:
            continue
        conns.add(chunk)
    return StreamLabels(capture, conns, wanted)


def data_chunks(capture: CaptureChunks, labels: StreamLabels, window: Window,
                columns: Sequence[str] = ()) -> Iterator[Chunk]:
    """The data frames (data direction, payload > 0, a kept stream) within the window, in time
    order: {"t_ns", "stream", *columns}."""
    wanted = tuple(dict.fromkeys((*LABEL_COLUMNS, *columns)))
    for chunk in capture.time_ordered(wanted, is_tcp):
        if len(chunk["t_ns"]) == 0:
            continue
        stream, is_data = labels.label(chunk)
        t = chunk["t_ns"]
        keep = is_data & (t >= window.start_ns) & (t <= window.end_ns)
        out = {"t_ns": t[keep], "stream": stream[keep]}
        for name in columns:
            out[name] = chunk[name][keep]
        if len(out["t_ns"]):
            yield out
