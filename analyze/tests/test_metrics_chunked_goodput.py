"""The chunked engine's goodput and fairness against memory and against goodput worked out by hand:
a hole that a later chunk fills, segments sent again across chunk bounds, lossy streams, and the
carry of ranges it holds from one chunk to the next."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hostwire.errors import InputError
from hostwire.metrics import synth

sys.path.insert(0, str(Path(__file__).resolve().parent))
from chunked_helpers import BASE, MS, S, assert_same, both, by_engine, chunked_table, write_pcap  # noqa: E402


def goodput_rows() -> pd.DataFrame:
    """Two streams whose goodput is worked out by hand (`new`: the bytes each data frame adds), in
    chunks of 3 rows: A opens with a SYN carrying 10 bytes, leaves a hole (a segment lost before
    the capture point) that a later chunk fills, and sends a segment again in the chunk after; B's
    sequence numbers wrap around 2**32 between two chunks, its second frame sending again the part
    of the first that lies past the wrap. Rows: (ms, stream, seq, payload, flags, new)."""
    rows = [
        (0, "A", 1000, 10, 0x02, 10),           # SYN: payload [1001, 1011)
        (10, "A", 1006, 105, 0x18, 100),        # [1006, 1111): the SYN's seq + 1 covers 1006..1010
        (20, "A", 1211, 100, 0x18, 100),        # [1211, 1311): [1111, 1211) is a hole
        (30, "A", 1011, 100, 0x18, 0),          # next chunk: [1011, 1111) again
        (40, "A", 1311, 100, 0x18, 100),
        (50, "B", 2**32 - 100, 200, 0x18, 200),  # [2**32 - 100, 2**32 + 100): across the wrap
        (60, "B", 0, 100, 0x18, 0),             # next chunk: [2**32, 2**32 + 100) again
        (70, "B", 100, 100, 0x18, 100),
        (80, "A", 1111, 100, 0x18, 100),        # the hole, two chunks later
        (90, "A", 1361, 100, 0x18, 50),         # [1361, 1461): its first half seen at 40 ms
        (100, "ack", 0, 0, 0x10, 0),
        (110, "B", 200, 50, 0x18, 50),
    ]
    t, who, seq, payload, flags, new = (np.array(c) for c in zip(*rows))
    ports = {"A": (40000, 5001), "B": (40001, 5001), "ack": (5001, 40000)}
    parts = []
    for name, (sport, dport) in ports.items():
        m = who == name
        src, dst = (synth.RECEIVER, synth.SENDER) if name == "ack" else (synth.SENDER, synth.RECEIVER)
        part = synth.frame_table(BASE + t[m] * MS, payload[m], seq[m], np.zeros(int(m.sum()), np.int64), src, dst,
                                 sport, dport)
        parts.append(part.assign(flags=flags[m].astype(np.uint8), new=new[m], who=name))
    return synth.concat(parts)


A_NAME = f"{synth.SENDER}:40000>{synth.RECEIVER}:5001"
B_NAME = f"{synth.SENDER}:40001>{synth.RECEIVER}:5001"


@pytest.fixture(scope="module")
def lossy_by_hand(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("goodput") / "by-hand.pcap"
    write_pcap(goodput_rows(), path)
    return path


def test_goodput_by_hand_across_chunk_bounds(lossy_by_hand: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The hand-worked bytes, from both engines: over the whole capture A 460, B 350; from 25 ms
    to 95 ms A 250 (its retransmission at 30 ms of bytes first seen at 10 ms counts 0), B 300."""
    monkeypatch.setenv("HOSTWIRE_CHUNK_ROWS", "3")
    rows = goodput_rows()
    for options, window_ns, expect in (({}, 110 * MS, {A_NAME: 460, B_NAME: 350}),
                                       ({"from_s": 0.025, "to_s": 0.095}, 70 * MS, {A_NAME: 250, B_NAME: 300})):
        lo, hi = options.get("from_s", 0) * S, options.get("to_s", 1) * S
        t = rows["t_ns"].to_numpy() - BASE
        inside = (t >= lo) & (t <= hi)
        # the table's own per-frame figures add up to the same
        assert rows[inside & (rows["who"] == "A").to_numpy()]["new"].sum() == expect[A_NAME]
        assert rows[inside & (rows["who"] == "B").to_numpy()]["new"].sum() == expect[B_NAME]
        memory, chunked = both("goodput", lossy_by_hand, **options)
        assert_same(memory, chunked)
        assert list(chunked["stream"]) == [A_NAME, B_NAME, "all"]
        assert list(chunked["bytes"]) == [expect[A_NAME], expect[B_NAME], sum(expect.values())]
        assert (chunked["seconds"] == window_ns / 1e9).all()
        assert chunked["bit_s"].iloc[0] == expect[A_NAME] * 8 * 1e9 / window_ns
        memory, chunked = both("fairness", lossy_by_hand, **options)
        assert_same(memory, chunked)
        x = np.array([expect[A_NAME], expect[B_NAME]], dtype=np.float64)
        assert chunked["jain"].iloc[0] == pytest.approx(x.sum() ** 2 / (2 * (x * x).sum()), rel=1e-15)
        assert list(chunked["bytes"]) == [expect[A_NAME], expect[B_NAME], sum(expect.values())]
    out = chunked_table("goodput", lossy_by_hand, stream=["40001"], from_s=0.065)
    assert list(out["stream"]) == [B_NAME, "all"] and list(out["bytes"]) == [150, 150]
    # no frame in the window; only an ACK in it (goodput 0 everywhere, fairness undefined): the
    # in-memory errors, word for word
    for kind, options, message in (("goodput", {"from_s": 0.101, "to_s": 0.109}, "no TCP frames in the window"),
                                   ("fairness", {"from_s": 0.095, "to_s": 0.105}, "fairness is undefined")):
        errors = []
        for engine in ("memory", "chunked"):
            with pytest.raises(InputError, match=message) as err:
                by_engine(engine, kind, lossy_by_hand, **options)
            errors.append(str(err.value))
        assert errors[0] == errors[1]
    assert list(chunked_table("goodput", lossy_by_hand, from_s=0.095, to_s=0.105)["bytes"]) == [0, 0, 0]


@pytest.mark.parametrize("rows", ["1", "2", "4", "5", "1000"])
def test_goodput_by_hand_at_every_chunk_size(lossy_by_hand: Path, rows: str,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOSTWIRE_CHUNK_ROWS", rows)
    for options in ({}, {"from_s": 0.025, "to_s": 0.095}, {"from_s": 0.055}):
        memory, chunked = both("goodput", lossy_by_hand, **options)
        assert_same(memory, chunked)
        assert_same(*both("fairness", lossy_by_hand, **options))


def lossy_stream(rng: np.random.Generator, segments: int, seq0: int, sport: int, t0_ns: int) -> pd.DataFrame:
    """One stream's data frames with what a lossy path and a capture point before the loss give:
    a SYN carrying data (sent again without SYN), segments lost before the capture point (holes) sent again up to 300
    frames later, segments sent twice, resends that span two segments (partly new), and stamps a
    little out of order; its sequence numbers from seq0, wrapping around 2**32."""
    size = rng.integers(1, 1449, segments)
    start = np.concatenate([[0], np.cumsum(size)[:-1]])
    at = np.arange(segments, dtype=np.float64)
    lost = rng.random(segments) < 0.04
    lost[0] = False  # the SYN gets through
    again = np.concatenate([[0], rng.choice(np.arange(1, segments - 1), segments // 25, replace=False)])
    span = rng.choice(np.arange(1, segments - 1), segments // 50, replace=False)
    keys = np.concatenate([at[~lost], at[lost] + rng.integers(5, 300, lost.sum()),
                           again + rng.integers(1, 300, len(again)), span + rng.integers(2, 300, len(span))])
    starts = np.concatenate([start[~lost], start[lost], start[again], start[span]])
    sizes = np.concatenate([size[~lost], size[lost], size[again], size[span] + size[span + 1]])
    order = np.argsort(keys, kind="stable")
    starts, sizes = starts[order], sizes[order]
    flags = np.full(len(starts), 0x18, np.uint8)
    flags[0] = 0x02
    seq = (seq0 + starts - (flags == 0x02)) % 2**32  # the SYN's payload starts at seq + 1
    t = t0_ns + np.arange(len(starts), dtype=np.int64) * 200_000 + rng.integers(0, 150_000, len(starts))
    late = rng.choice(len(t), len(t) // 40, replace=False)
    t[late] -= rng.integers(1, 600_000, len(late))  # recorded late
    part = synth.frame_table(t, sizes, seq, np.zeros(len(t), np.int64), synth.SENDER, synth.RECEIVER, sport, 5001)
    part = part.assign(flags=flags)
    part.attrs["bytes"] = int(size.sum())  # the stream's sequence space, each byte sent at least once
    return part


@pytest.fixture(scope="module")
def lossy(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, int]]:
    """Three lossy streams (one wraps around 2**32 early, one late, one starts late and ends
    before 250 ms), ACKs the other way; and each stream's bytes (every segment gets through in the
    end, so over the whole capture that is its goodput)."""
    rng = np.random.default_rng(11)
    parts = [lossy_stream(rng, 1500, 2**32 - 20_000, 40000, BASE),
             lossy_stream(rng, 1200, 2**32 - 800_000, 40001, BASE + 10 * MS),
             lossy_stream(rng, 400, 12345, 40002, BASE + 150 * MS)]
    sent = {f"{synth.SENDER}:{p['sport'].iloc[0]}>{synth.RECEIVER}:5001": int(p.attrs["bytes"]) for p in parts}
    ack_t = BASE + np.sort(rng.integers(0, 300 * MS, 500))
    zeros = np.zeros(len(ack_t), np.int64)
    parts.append(synth.frame_table(ack_t, zeros, zeros, zeros, synth.RECEIVER, synth.SENDER, 5001, 40000, flags=0x10))
    path = tmp_path_factory.mktemp("goodput") / "lossy.pcap"
    write_pcap(synth.concat(parts), path)
    return path, sent


@pytest.mark.parametrize("options", [{}, {"from_s": 0.1, "to_s": 0.2}, {"from_s": 0.25},
                                     {"stream": ["40001"], "from_s": 0.05, "to_s": 0.17}])
def test_goodput_and_fairness_equal_memory_on_lossy_streams(lossy: tuple[Path, dict[str, int]], options: dict,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOSTWIRE_CHUNK_ROWS", "97")
    path, sent = lossy
    memory, chunked = both("goodput", path, **options)
    assert_same(memory, chunked)
    assert_same(*both("fairness", path, **options))
    got = dict(zip(chunked["stream"], chunked["bytes"]))
    if not options:  # every byte once, retransmissions and resends of lost segments 0
        assert got == {**sent, "all": sum(sent.values())}
    if options.get("from_s") == 0.25:  # the late stream ended before the window: a row of 0
        assert got[f"{synth.SENDER}:40002>{synth.RECEIVER}:5001"] == 0 and got["all"] > 0


def test_the_carry_holds_one_range_per_stream_and_one_per_open_hole() -> None:
    """In-order segments over many chunks leave one range per stream; a hole keeps two apart until
    a later chunk fills it; the bytes are counted once."""
    from hostwire.metrics.chunked.delivered import Coverage

    cover = Coverage(2)
    total = 0
    flags = np.full(100, 0x18, np.uint8)
    for k in range(50):
        stream = np.arange(100) % 2  # two streams, each 50 segments of 1000 bytes back to back per chunk
        seq = 1000 + k * 50_000 + np.arange(100) // 2 * 1000
        payload = np.full(100, 1000)
        if k == 10:
            payload[50] = 0  # stands for the frame lost before the capture point: the rest is new
            keep = payload > 0
            total += int(cover.feed(stream[keep], seq[keep], flags[keep], payload[keep]).sum())
            assert cover.intervals == 3
            continue
        total += int(cover.feed(stream, seq, flags, payload).sum())
        assert cover.intervals == (3 if 10 <= k < 20 else 2)
        if k == 19:
            hole = 1000 + 10 * 50_000 + 25 * 1000
            assert list(cover.feed(np.array([0]), np.array([hole]), flags[:1], np.array([1500]))) == [1000]
            total += 1000
    assert total == 50 * 100 * 1000
    # a stream of [1000, 2000) and [3000, 4000) then a frame over both and the gap: only the gap is new
    cover = Coverage(1)
    one = np.zeros(1, np.int64)
    cover.feed(np.zeros(2, np.int64), np.array([1000, 3000]), flags[:2], np.array([1000, 1000]))
    assert list(cover.feed(one, np.array([500]), flags[:1], np.array([4000]))) == [500 + 1000 + 500]
    assert cover.intervals == 1


