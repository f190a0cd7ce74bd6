"""Perfetto TracePackets encoded with numpy, many at a time: the protobuf wire format written out
for the few fields hostwire's trace uses, so that a million events cost a few array passes instead
of a million protobuf objects (hostwire.timeline.perfetto_trace). Each packet is field 1 of the
Trace message; fields go in field-number order, as protobuf serializes them, and the tests
compare every packet with the perfetto package's own messages.

TracePacket: timestamp (8, varint), trusted_packet_sequence_id (10, varint), track_event (11),
sequence_flags (13, varint), track_descriptor (60). TrackEvent: type (9), track_uuid (11), name
(23, string), double_counter_value (44, double), flow_ids (47, fixed64, one tag each).
TrackDescriptor: uuid (1), name (2), parent_uuid (5), counter (8, empty).

How a batch of packets is laid out: every field (or run of constant fields) of every row gets a
fixed column range, as wide as its longest value, in one n x width byte matrix; a row then uses
only some of each range's bytes (a varint's first `length`, a number's last digits), and one
boolean compaction of the matrix gives the rows' bytes one after the other. No byte is placed
by a computed index, and rows of different shapes need no grouping."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

VARINT_MAX = 10
BATCH_ROWS = 1 << 14  # rows laid out at a time: the matrix and its mask (about 1 MiB each) stay in cache


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


class Part(NamedTuple):
    """A field, or a run of fields, of each of n rows: its bytes in an n x width matrix (a single
    row when all rows hold the same), of which each row uses the first `length` (the last ones
    when `right`); an int length is the same on every row."""

    data: np.ndarray
    length: np.ndarray | int
    right: bool = False


class Text(NamedTuple):
    """Text of each row in one or more Parts written one after the other; `valid`: the rows that
    have a value (None: all do)."""

    parts: tuple[Part, ...]
    valid: np.ndarray | None = None


class Flows(NamedTuple):
    """Flow ids of each row: its first `counts` entries of an n x widest matrix."""

    ids: np.ndarray
    counts: np.ndarray


NamePiece = Text | str  # a str: the same text on every row


def constant(data: bytes) -> Part:
    """The same bytes on every row."""
    return Part(np.frombuffer(data, dtype=np.uint8)[None, :], len(data))


def _lengths(values: np.ndarray, limits: Sequence[int]) -> np.ndarray | int:
    """How many of the `limits` (ascending) each non-negative value exceeds, plus one: an int when
    the smallest and the largest value agree, as all stamps of one run do; else counted by one
    comparison per limit between them."""
    if len(values) == 0:
        return 1
    low, high = (sum(int(x) > limit for limit in limits) for x in (values.min(), values.max()))
    if low == high:
        return low + 1
    length = np.full(len(values), low + 1, dtype=np.int64)
    for limit in limits[low:high]:
        length += values > np.uint64(limit)
    return length


_VARINT_LIMITS = [(1 << (7 * i)) - 1 for i in range(1, VARINT_MAX)]  # the largest varint of each length
# the continuation bits (0x80 in each byte but the last) of a varint of 1..8 bytes, as a little-endian
# word; one of 9 or 10 bytes has them in all of its first 8
_CONTINUATION = np.asarray([sum(0x80 << (8 * i) for i in range(min(n, 9) - 1)) for n in range(1, 10)],
                           dtype=np.uint64)


def varints(values: np.ndarray) -> Part:
    """The varints of int64 values (a negative one as its two's complement: ten bytes, as protobuf
    writes an int64). Seven bits at a time are moved into their bytes of one 64-bit word per
    value, so the cost is a few passes over the values, not one per byte."""
    v = np.asarray(values).astype(np.uint64)
    n = len(v)
    length = _lengths(v, _VARINT_LIMITS)
    width = length if isinstance(length, int) else int(length.max())
    low = v & np.uint64(0x7F)
    for i in range(1, min(width, 8)):
        low |= (v & np.uint64(0x7F << (7 * i))) << np.uint64(i)
    low |= _CONTINUATION[min(length, 9) - 1] if isinstance(length, int) else _CONTINUATION[np.minimum(length, 9) - 1]
    words = low.astype("<u8", copy=False).view(np.uint8).reshape(n, 8)
    if width <= 8:
        return Part(words[:, :width], length)
    data = np.empty((n, width), dtype=np.uint8)  # values of 2**56 or more: one or two bytes past the word
    data[:, :8] = words
    top = v >> np.uint64(56)
    data[:, 8] = (top & np.uint64(0x7F)) | np.where(np.asarray(length) > 9, np.uint64(0x80), np.uint64(0))
    if width == 10:
        data[:, 9] = top >> np.uint64(7)
    return Part(data, length)


_POWERS_OF_TEN = [10 ** i - 1 for i in range(1, 20)]  # the largest number of each count of digits


def decimal(values: np.ndarray) -> Text:
    """Integers as str() writes them: a minus sign where negative, then the digits (right-aligned
    in their columns, the most significant first, so that no row's digits need moving)."""
    v = np.asarray(values)
    n = len(v)
    magnitude = v.astype(np.uint64)
    parts: list[Part] = []
    if v.dtype.kind == "i":
        negative = v < 0
        if negative.any():
            magnitude = np.where(negative, -magnitude, magnitude)  # in uint64, also right for int64's minimum
            parts.append(Part(np.frombuffer(b"-", dtype=np.uint8)[None, :], negative.astype(np.int64)))
    digits = _lengths(magnitude, _POWERS_OF_TEN)
    width = digits if isinstance(digits, int) else int(digits.max())
    data = np.empty((n, width), dtype=np.uint8)
    rest = magnitude
    for column in range(width - 1, -1, -1):
        rest, digit = np.divmod(rest, np.uint64(10))
        data[:, column] = digit
    data += ord("0")
    parts.append(Part(data, digits, right=True))
    return Text(tuple(parts))


def strings(texts: object) -> Text:
    """The UTF-8 bytes of strings (an Arrow array, or anything pyarrow.array takes), through
    Arrow's buffers (no Python per string); a missing string is not valid."""
    import pyarrow as pa

    arr = texts if isinstance(texts, (pa.Array, pa.ChunkedArray)) else pa.array(texts, type=pa.large_string())
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    arr = arr.cast(pa.large_string())
    n = len(arr)
    if n == 0:
        return Text((Part(np.zeros((0, 1), dtype=np.uint8), np.zeros(0, dtype=np.int64)),))
    _, offsets_buf, data_buf = arr.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=np.int64)[arr.offset:arr.offset + n + 1]
    length = np.diff(offsets)
    data = np.frombuffer(data_buf, dtype=np.uint8)[offsets[0]:offsets[-1]] if data_buf is not None else np.zeros(0, np.uint8)
    width = max(1, int(length.max()))
    out = np.zeros((n, width), dtype=np.uint8)
    out[np.arange(width)[None, :] < length[:, None]] = data  # row-major order is the strings' order
    valid = None if arr.null_count == 0 else arr.is_valid().to_numpy(zero_copy_only=False)
    return Text((Part(out, length),), valid)


def _joined(pieces: Sequence[NamePiece], n: int) -> tuple[list[Part], np.ndarray | int]:
    """The parts of texts written one after the other, and each row's total length; a row where
    any piece is missing gets no text at all (pandas' + of strings gives a missing value, which
    was written as an empty name)."""
    texts = [Text((constant(p.encode()),)) if isinstance(p, str) else p for p in pieces]
    missing = [~t.valid for t in texts if t.valid is not None]
    parts = [part for t in texts for part in t.parts]
    if missing:
        empty = np.logical_or.reduce(missing)
        parts = [p._replace(length=np.where(empty, 0, np.broadcast_to(p.length, (n,)))) for p in parts]
    return parts, sum((p.length for p in parts), start=0)


def _flow_part(flows: Flows) -> Part:
    """One fixed64 flow_ids field (its tag, then the id's 8 bytes, little-endian) per flow."""
    n, widest = flows.ids.shape
    tag = np.frombuffer(_key(47, 1), dtype=np.uint8)
    data = np.empty((n, widest, len(tag) + 8), dtype=np.uint8)
    data[:, :, :len(tag)] = tag
    data[:, :, len(tag):] = np.ascontiguousarray(flows.ids, dtype="<u8").view(np.uint8).reshape(n, widest, 8)
    return Part(data.reshape(n, widest * (len(tag) + 8)), flows.counts * (len(tag) + 8))


def event_packets(ts: np.ndarray, track_uuid: np.ndarray, kind: int, seq_id: int, *,
                  name: Sequence[NamePiece] | None = None, values: np.ndarray | None = None,
                  flows: Flows | None = None) -> list[Part]:
    """The Parts of one Trace.packet field per row: a TrackEvent of type `kind` at stamp ts on the
    row's track, with a name (its pieces written one after the other), a double counter value
    and flow ids where given. Lay them out with `concatenated` (or after other rows' Parts, as a
    slice's end follows its begin); the trace's first packet gets its flags from
    with_sequence_flags."""
    n = len(ts)
    body = [constant(_key(9, 0) + varint(kind) + _key(11, 0)), varints(track_uuid)]
    if name is not None:
        text, size = _joined(name, n)
        body += [constant(_key(23, 2)), _length_of(size, n), *text]
    if values is not None:
        body += [constant(_key(44, 1)), Part(np.ascontiguousarray(values, dtype="<f8").view(np.uint8).reshape(n, 8), 8)]
    if flows is not None and flows.ids.shape[1]:
        body.append(_flow_part(flows))
    packet = [constant(_key(8, 0)), varints(np.asarray(ts, dtype=np.int64)),
              constant(_key(10, 0) + varint(seq_id) + _key(11, 2)), _length_of(_total(body), n), *body]
    return [constant(_key(1, 2)), _length_of(_total(packet), n), *packet]


def with_sequence_flags(rows: np.ndarray, flags: int) -> tuple[bytes, int]:
    """The first packet of laid-out rows given sequence_flags (its last field, after
    track_event), and where the rest of the rows begin: one packet patched, where a field of its
    own on every row would leave a gap in all of them (hostwire.timeline.perfetto_trace gives it
    the trace's first event)."""
    head = bytes(rows[:1 + VARINT_MAX])  # the packet's tag, then its length, a varint
    size, at = 0, 1
    while True:
        size |= (head[at] & 0x7F) << (7 * (at - 1))
        at += 1
        if not head[at - 1] & 0x80:
            break
    field = _key(13, 0) + varint(flags)
    return _key(1, 2) + varint(size + len(field)) + bytes(rows[at:at + size]) + field, at + size


def _length_of(length: np.ndarray | int, n: int) -> Part:
    """The varint of a length-delimited field's size: a constant when all n rows have the same
    (an end's or a counter's packet), so that it is written once, not per row."""
    return constant(varint(length)) if isinstance(length, int) else varints(np.broadcast_to(length, (n,)))


def _total(parts: Sequence[Part]) -> np.ndarray | int:
    return sum((p.length for p in parts), start=0)


class Rows(NamedTuple):
    """Rows of bytes one after the other, held in consecutive chunks (one per batch laid out,
    not copied into one array: the trace's final join copies them once), and each row's length."""

    chunks: list[np.ndarray]
    length: np.ndarray

    def pieces(self, bounds: Sequence[int]) -> list[list[np.ndarray]]:
        """The bytes between consecutive byte offsets `bounds` (views of the chunks)."""
        chunk_start = np.concatenate([[0], np.cumsum([len(c) for c in self.chunks])]).tolist()
        out: list[list[np.ndarray]] = []
        i = 0
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            piece = []
            while lo < hi:
                while chunk_start[i + 1] <= lo:
                    i += 1
                upto = min(hi, chunk_start[i + 1])
                piece.append(self.chunks[i][lo - chunk_start[i]:upto - chunk_start[i]])
                lo = upto
            out.append(piece)
        return out


def concatenated(parts: Sequence[Part], n: int) -> Rows:
    """Each of n rows' parts one after the other, the rows one after the other. Every part has its
    own columns in a matrix of BATCH_ROWS rows (the constant ones written once, the others per
    batch); a mask marks the bytes each row uses, and indexing with it reads them out in
    row-major order."""
    widths = [p.data.shape[1] for p in parts]
    starts = np.concatenate([[0], np.cumsum(widths)]).astype(int).tolist()
    columns = np.arange(max(widths, default=0))
    block = np.empty((min(n, BATCH_ROWS), starts[-1]), dtype=np.uint8)
    used = np.ones(block.shape, dtype=bool)
    rows_vary: list[tuple[np.ndarray, int, int]] = []  # data, first column, width
    lengths_vary: list[tuple[np.ndarray, bool, int, int]] = []  # lengths, right-aligned, first column, width
    for part, start, width in zip(parts, starts, widths):
        if not width:
            continue
        if len(part.data) == 1:
            block[:, start:start + width] = part.data
        else:
            rows_vary.append((part.data, start, width))
        if isinstance(part.length, int):
            used[:, start + part.length:start + width] = False
        else:
            lengths_vary.append((part.length, part.right, start, width))
    whole_rows = not lengths_vary and bool(used.all())  # every row the same length (counters): no mask
    chunks = []
    for first in range(0, n, BATCH_ROWS):
        rows = slice(first, min(n, first + BATCH_ROWS))
        count = rows.stop - rows.start
        for data, start, width in rows_vary:
            block[:count, start:start + width] = data[rows]
        for lengths, right, start, width in lengths_vary:
            length = lengths[rows, None]
            if right:
                np.greater_equal(columns[:width], width - length, out=used[:count, start:start + width])
            else:
                np.less(columns[:width], length, out=used[:count, start:start + width])
        if whole_rows:
            chunks.append(block[:count].reshape(-1).copy())
        else:
            chunks.append(block[:count][used[:count]])
    return Rows(chunks, np.broadcast_to(_total(parts), (n,)).astype(np.int64))


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
