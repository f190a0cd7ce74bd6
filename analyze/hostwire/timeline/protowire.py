"""Perfetto TracePackets encoded with numpy, many at a time: the protobuf wire format written out
for the few fields hostwire's trace uses, so that a million events cost a few array passes instead
of a million protobuf objects (hostwire.timeline.perfetto_trace). Each packet is field 1 of the
Trace message; fields go in field-number order, as protobuf serializes them, and the tests
compare every packet with the perfetto package's own messages.

TracePacket: timestamp (8, varint), trusted_packet_sequence_id (10, varint), track_event (11),
sequence_flags (13, varint), track_descriptor (60). TrackEvent: type (9), track_uuid (11), name
(23, string), double_counter_value (44, double), flow_ids (47, fixed64, one tag each).
TrackDescriptor: uuid (1), name (2), parent_uuid (5), counter (8, empty)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

VARINT_MAX = 10


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _key(field: int, wire_type: int) -> bytes:
    return varint(field << 3 | wire_type)


_VARINT_LIMITS = np.asarray([(1 << (7 * i)) - 1 for i in range(1, VARINT_MAX)], dtype=np.uint64)


def _varints(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(n x width bytes, lengths) of the varints of non-negative int64 values."""
    v = np.asarray(values).astype(np.uint64)
    length = np.searchsorted(_VARINT_LIMITS, v, side="left").astype(np.int64) + 1
    width = int(length.max()) if len(v) else 1
    shifts = (np.arange(width, dtype=np.uint64) * np.uint64(7))[None, :]
    out = ((v[:, None] >> shifts) & np.uint64(0x7F)).astype(np.uint8)
    out[np.arange(width)[None, :] < (length[:, None] - 1)] |= 0x80
    return out, length


def _fixed(data: bytes, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The same bytes on each of n rows."""
    row = np.frombuffer(data, dtype=np.uint8)
    return np.broadcast_to(row, (n, len(row))), np.full(n, len(row), dtype=np.int64)


def _assemble(parts: Sequence[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Row-wise concatenation of variable-length parts ((n x width bytes, length per row) each):
    (the rows one after the other as one byte array, each row's length). Rows whose parts have the
    same lengths are built together by column slices, then put in place."""
    n = len(parts[0][1])
    total = np.zeros(n, dtype=np.int64)
    key = np.zeros(n, dtype=np.int64)
    varying = False
    for _, length in parts:
        total += length
        top = int(length.max())
        if int(length.min()) != top:  # only the parts whose length varies tell the row shapes apart
            key = key * (top + 1) + length
            varying = True
    start = np.concatenate([[0], np.cumsum(total)[:-1]])
    out = np.empty(int(total.sum()), dtype=np.uint8)
    if varying:
        groups, shape = np.unique(key, return_inverse=True)
        order = np.argsort(shape, kind="stable")
        bounds = np.searchsorted(shape[order], np.arange(len(groups) + 1))
    else:
        order, bounds = np.arange(n), np.asarray([0, n])
    for g in range(len(bounds) - 1):
        rows = order[bounds[g]:bounds[g + 1]]
        widths = np.asarray([int(length[rows[0]]) for _, length in parts])
        row_len = int(widths.sum())
        for first in range(0, len(rows), BATCH_ROWS):
            batch = rows[first:first + BATCH_ROWS]
            block = np.empty((len(batch), row_len), dtype=np.uint8)
            at = 0
            for (data, _), w in zip(parts, widths.tolist()):
                if w:
                    block[:, at:at + w] = data[batch, :w]
                    at += w
            out[(start[batch][:, None] + np.arange(row_len)).ravel()] = block.ravel()
    return out, total


BATCH_ROWS = 1 << 16


def _strings(texts: object) -> tuple[np.ndarray, np.ndarray]:
    """(n x width UTF-8 bytes, lengths) of strings, through Arrow's buffers (no Python per string)."""
    import pyarrow as pa

    arr = pa.array(texts, type=pa.large_string()) if not isinstance(texts, (pa.Array, pa.ChunkedArray)) else texts
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    arr = arr.cast(pa.large_string())
    n = len(arr)
    if n == 0:
        return np.zeros((0, 1), dtype=np.uint8), np.zeros(0, dtype=np.int64)
    _, offsets_buf, data_buf = arr.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=np.int64)[arr.offset:arr.offset + n + 1]
    length = np.diff(offsets)
    data = np.frombuffer(data_buf, dtype=np.uint8)[offsets[0]:offsets[-1]] if data_buf is not None else np.zeros(0, np.uint8)
    width = max(1, int(length.max()))
    out = np.zeros((n, width), dtype=np.uint8)
    out[np.arange(width)[None, :] < length[:, None]] = data  # row-major order is the strings' order
    return out, length


def _length_prefixed(key: bytes, body: tuple[np.ndarray, np.ndarray]) -> list[tuple[np.ndarray, np.ndarray]]:
    """key, varint(length), body: a length-delimited field of each row."""
    return [_fixed(key, len(body[1])), _varints(body[1]), body]


def track_events(ts: np.ndarray, uid: int, kind: int | np.ndarray, seq_id: int, *,
                 names: object = None, named: np.ndarray | None = None, values: np.ndarray | None = None,
                 flows: Sequence[Sequence[int] | None] | None = None, first_flags: int | None = None) -> bytes:
    """Trace bytes (field 1 each) of one TrackEvent packet per stamp, on track uid, of type kind
    (one for all, or one per event), with a name (the strings `names`, one per event or one per
    event where `named` is true), a double counter value and flow ids per event where given; the
    first packet carries sequence_flags first_flags when given."""
    n = len(ts)
    if n == 0:
        return b""
    kinds = np.broadcast_to(np.asarray(kind, dtype=np.int64), (n,))
    body = [_fixed(_key(9, 0), n), _varints(kinds), _fixed(_key(11, 0) + varint(uid), n)]
    if names is not None:
        data, length = _strings(names)
        if named is not None:  # rows of the named events only: spread to all, empty elsewhere
            full = np.zeros((n, data.shape[1]), dtype=np.uint8)
            full[named] = data
            full_length = np.zeros(n, dtype=np.int64)
            full_length[named] = length
            data, length = full, full_length
        present = np.ones(n, dtype=bool) if named is None else named
        key, size = _fixed(_key(23, 2), n)
        size_bytes, size_len = _varints(length)
        body += [(key, np.where(present, size, 0)), (size_bytes, np.where(present, size_len, 0)), (data, length)]
    if values is not None:
        body.append(_fixed(_key(44, 1), n))
        body.append((np.ascontiguousarray(values, dtype="<f8").view(np.uint8).reshape(n, 8), np.full(n, 8, np.int64)))
    if flows is not None:
        widest = max((len(f) for f in flows if f), default=0)
        ids = np.zeros((n, widest), dtype="<u8")
        count = np.zeros(n, dtype=np.int64)
        for i, f in enumerate(flows):  # flows are few; most events carry none
            if f:
                ids[i, :len(f)] = f
                count[i] = len(f)
        key = np.frombuffer(_key(47, 1), dtype=np.uint8)
        one = np.concatenate([np.broadcast_to(key, (n, widest, len(key))),
                              ids.view(np.uint8).reshape(n, widest, 8)], axis=2).reshape(n, widest * (len(key) + 8))
        body.append((one, count * (len(key) + 8)))
    event_len = sum(np.broadcast_to(length, (n,)) for _, length in body)
    ts_bytes = _varints(ts.astype(np.int64))
    head = _fixed(_key(8, 0), n)
    seq = _fixed(_key(10, 0) + varint(seq_id), n)
    event_key = _fixed(_key(11, 2), n)
    event_size = _varints(event_len)
    packet = [head, ts_bytes, seq, event_key, event_size, *body]
    if first_flags is not None:
        field = np.frombuffer(_key(13, 0) + varint(first_flags), dtype=np.uint8)
        flags = np.zeros((n, len(field)), dtype=np.uint8)
        flags[0] = field
        packet.append((flags, np.where(np.arange(n) == 0, len(field), 0)))
    packet_len = sum(np.broadcast_to(length, (n,)) for _, length in packet)
    out, _ = _assemble([_fixed(_key(1, 2), n), _varints(packet_len), *packet])
    return out.tobytes()


def track_descriptor(uid: int, name: str, parent: int | None = None, counter: bool = False) -> bytes:
    """Trace bytes of one packet describing a track."""
    text = name.encode()
    body = _key(1, 0) + varint(uid) + _key(2, 2) + varint(len(text)) + text
    if parent is not None:
        body += _key(5, 0) + varint(parent)
    if counter:
        body += _key(8, 2) + varint(0)
    packet = _key(60, 2) + varint(len(body)) + body
    return _key(1, 2) + varint(len(packet)) + packet
