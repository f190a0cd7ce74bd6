"""The chunked engine (hostwire.metrics.chunked) against the in-memory one and against ground truth:
tables equal value for value on the recorded fixture and on synthetic captures read in chunks of a
few hundred rows, so that streams, gaps, IDC bins and busy periods cross chunk boundaries; stamps
out of order across chunks; exact order statistics; and the memory sampler on known allocations."""

from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hostwire.errors import InputError, UsageError
from hostwire.linkrate import given_rate
from hostwire.metrics import synth, table
from hostwire.metrics.chunked.quantiles import FirstPass, order_statistics
from hostwire.procmem import Sampler, anon_bytes, tree

S = 10**9
MS = 10**6
FIXTURE_PCAP = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "run-small" / "raw" / "wire.pcap"
BASE = 1_700_000_000 * S


def write_pcap(frames: pd.DataFrame, path: Path) -> None:
    """A nanosecond pcap of Ethernet/IPv4 frames in the order of the table's rows, written with
    numpy (no per-frame Python but the write): TCP with a 20-byte header (4 more holding a
    window-scale option where the table has a `wscale` >= 0), the table's flags (else PSH|ACK),
    ack and window (else 0 and 65535), payload of zeros; a row whose `proto` is 17 is UDP."""
    n = len(frames)
    payload = frames["payload_len"].to_numpy().astype(np.int64)
    udp = frames["proto"].to_numpy() == 17 if "proto" in frames.columns else np.zeros(n, bool)
    scale = frames["wscale"].to_numpy().astype(np.int64) if "wscale" in frames.columns else np.full(n, -1)
    options = np.where((scale >= 0) & ~udp, 4, 0)
    l4 = np.where(udp, 8, 20 + options)
    size = 14 + 20 + l4 + payload
    header = np.zeros((n, 58), dtype=np.uint8)
    header[:, 12:14] = [8, 0]
    header[:, 14] = 0x45
    header[:, 16:18] = (20 + l4 + payload).astype(">u2").view(np.uint8).reshape(n, 2)
    header[:, 22] = 64
    header[:, 23] = np.where(udp, 17, 6)
    for col, at in (("src", 26), ("dst", 30)):
        addr = np.array([list(map(int, str(a).split("."))) for a in frames[col].astype(str)], dtype=np.uint8)
        header[:, at:at + 4] = addr
    header[:, 34:36] = frames["sport"].to_numpy().astype(">u2").view(np.uint8).reshape(n, 2)
    header[:, 36:38] = frames["dport"].to_numpy().astype(">u2").view(np.uint8).reshape(n, 2)
    header[:, 38:42] = frames["seq"].to_numpy().astype(">u4").view(np.uint8).reshape(n, 4)
    if "ack" in frames.columns:
        header[:, 42:46] = frames["ack"].to_numpy().astype(">u4").view(np.uint8).reshape(n, 4)
    header[:, 46] = (5 + options // 4) << 4
    header[:, 47] = frames["flags"].to_numpy().astype(np.uint8) if "flags" in frames.columns else 0x18
    window = frames["window"].to_numpy() if "window" in frames.columns else np.full(n, 0xFFFF)
    header[:, 48:50] = window.astype(">u2").view(np.uint8).reshape(n, 2)
    header[:, 54:58] = np.stack([np.ones(n), np.full(n, 3), np.full(n, 3), np.maximum(scale, 0)], axis=1)
    header[udp, 38:40] = (8 + payload[udp]).astype(">u2").view(np.uint8).reshape(-1, 2)
    header[udp, 40:54] = 0
    length = 34 + l4
    t = frames["t_ns"].to_numpy().astype(np.int64)
    with open(path, "wb") as handle:
        handle.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 1))
        for i in range(n):  # a few thousand records of a test capture
            sec, nsec = divmod(int(t[i]), S)
            handle.write(struct.pack("<IIII", sec, nsec, int(size[i]), int(size[i])))
            handle.write(header[i, :length[i]].tobytes())
            handle.write(bytes(int(payload[i])))


def both(kind: str, path: Path, **options: object) -> tuple[pd.DataFrame, pd.DataFrame]:
    return (table(kind, path, engine="memory", **options), table(kind, path, engine="chunked", **options))


def assert_same(memory: pd.DataFrame, chunked: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(memory.reset_index(drop=True), chunked.reset_index(drop=True),
                                  check_exact=True, check_dtype=False)
    if "marked_by" in memory.attrs:  # sanity: what marks the run, and how the table is marked
        assert memory.attrs == chunked.attrs


CASES = [("idc", {}), ("idc", {"bytes": True}), ("hurst", {}), ("intervals", {}), ("intervals", {"hist": True}),
         ("contract", {"link_rate": given_rate("10mbit")}), ("contract", {"link_rate": given_rate("10mbit"), "points": 7}),
         ("idc", {"stream": ["40001"], "from_s": 0.2, "to_s": 1.5}), ("bursts", {}), ("bursts", {"theta": 5 * MS}),
         ("bursts", {"theta_factor": 3.0, "stream": ["40002"]}), ("goodput", {}), ("fairness", {}),
         ("goodput", {"stream": ["40001"], "from_s": 0.2, "to_s": 1.5}), ("fairness", {"from_s": 0.7}),
         ("sanity", {}), ("sanity", {"link_rate": given_rate("10mbit")}),
         ("sanity", {"link_rate": given_rate("10mbit"), "from_s": 0.7, "to_s": 1.6, "frame_overhead": 24, "tolerance": 0.2}),
         ("sanity", {"stream": ["40001"], "max_retransmit_share": 0.5})]


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three streams: Poisson, a constant rate with one long silence, back-to-back bursts at the
    line rate (busy periods of several frames), plus ACKs the other way; a few stamps out of order
    by up to 3 ms, as a busy receive path gives."""
    rng = np.random.default_rng(7)
    a = synth.frames(BASE + synth.poisson(rng, 700.0, 2 * S), payload=1448)
    steady = synth.constant_rate(2 * MS, 2 * S)
    steady = np.concatenate([steady[steady < 600 * MS], steady[steady >= 900 * MS]])  # a 300 ms gap
    b = synth.frames(BASE + steady, payload=500, sport=40001)
    starts = np.sort(rng.integers(0, 2 * S, 200))
    burst = (starts[:, None] + np.arange(6)[None, :] * 1_211_200).ravel()  # 6 frames back to back at 10 Mbit/s
    c = synth.frames(BASE + np.sort(burst), payload=1448, sport=40002)
    ack_t = BASE + synth.poisson(rng, 300.0, 2 * S)
    zeros = np.zeros(len(ack_t), np.int64)
    acks = synth.frame_table(ack_t, zeros, zeros, zeros, synth.RECEIVER, synth.SENDER, 5001, 40000, flags=0x10)
    frames = synth.concat([a, b, c, acks]).sort_values("t_ns", kind="stable").reset_index(drop=True)
    t = frames["t_ns"].to_numpy().copy()
    late = rng.choice(np.flatnonzero(frames["sport"].to_numpy() != 40001), 40, replace=False)  # b stays exact
    t[late] -= rng.integers(1, 3 * MS, 40)  # recorded late: earlier stamps after later ones
    frames["t_ns"] = t
    path = tmp_path_factory.mktemp("chunked") / "mixed.pcap"
    write_pcap(frames, path)
    return path


@pytest.mark.parametrize("kind, options", CASES)
def test_chunked_equals_memory_across_chunk_bounds(mixed: Path, kind: str, options: dict,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOSTWIRE_CHUNK_ROWS", "257")
    memory, chunked = both(kind, mixed, **options)
    assert len(memory) > 0
    assert_same(memory, chunked)


@pytest.mark.parametrize("kind, options", [("idc", {}), ("idc", {"bytes": True}), ("intervals", {}),
                                           ("intervals", {"hist": True}), ("bursts", {}),
                                           ("contract", {"link_rate": given_rate("10mbit")}), ("goodput", {}),
                                           ("goodput", {"from_s": 0.5, "to_s": 1.2}), ("fairness", {"from_s": 0.3}),
                                           ("sanity", {}), ("sanity", {"link_rate": given_rate("10mbit"), "from_s": 0.4})])
def test_chunked_equals_memory_on_the_recorded_fixture(kind: str, options: dict,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOSTWIRE_CHUNK_ROWS", "1000")
    memory, chunked = both(kind, FIXTURE_PCAP, **options)
    assert_same(memory, chunked)


def test_a_gap_across_chunks_is_counted_once_whole(mixed: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The constant stream's 300 ms silence spans many 257-row chunks: its largest gap is it."""
    monkeypatch.setenv("HOSTWIRE_CHUNK_ROWS", "257")
    out = table("intervals", mixed, engine="chunked", stream=["40001"])
    row = out[out["stream"].str.contains(":40001>")].iloc[0]
    assert row["max_ns"] == 302 * MS and row["min_ns"] == 2 * MS
    assert row["count"] == 1000 - 150 - 1  # 1000 frames at 2 ms, 150 silenced
    assert row["p50_ns"] == 2 * MS


def test_idc_of_a_constant_rate_is_zero_across_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A constant rate whose period divides every bin: each bin holds the same count, IDC 0."""
    monkeypatch.setenv("HOSTWIRE_CHUNK_ROWS", "100")
    path = tmp_path / "cbr.pcap"
    write_pcap(synth.frames(BASE + synth.constant_rate(MS, S), payload=100), path)
    for t in (7 * MS, 25 * MS):
        out = table("idc", path, engine="chunked", points=1, t_min=t)
        assert (out["var"] == 0).all() and (out["idc"] == 0).all()
        assert list(out["mean"]) == [t / MS] * 2 and list(out["bins"]) == [(S - MS) // t] * 2


def test_exact_order_statistics_over_chunks() -> None:
    """Every asked rank equals np.sort's, over zeros, duplicates and values beyond 2**30 ns."""
    rng = np.random.default_rng(3)
    parts = [rng.integers(0, 2**34, 5000), np.zeros(300, np.int64), np.full(2000, 1_211_400),
             rng.integers(0, 50, 700), rng.integers(2**40, 2**41, 100)]
    values = rng.permutation(np.concatenate(parts)).astype(np.int64)
    group = (np.arange(len(values)) % 3).astype(np.int64)
    chunks = [(group[i:i + 999], values[i:i + 999]) for i in range(0, len(values), 999)]
    first = FirstPass(3)
    for g, v in chunks:
        first.feed(g, v)
    ranks = {g: [0, 1, 57, int(first.count[g]) // 2, int(first.count[g]) - 2, int(first.count[g]) - 1] for g in range(3)}
    got = order_statistics(first, ranks, lambda: iter(chunks))
    for g in range(3):
        ordered = np.sort(values[group == g])
        for r in ranks[g]:
            assert got[(g, r)] == ordered[r]


def test_engine_chunked_refuses_what_it_does_not_serve(mixed: Path) -> None:
    with pytest.raises(UsageError, match="--engine chunked: the chunked path reads a capture file"):
        table("idc", FIXTURE_PCAP.parents[2], engine="chunked")
    with pytest.raises(UsageError, match="--mbs"):
        table("contract", mixed, engine="chunked", link_rate=given_rate("10mbit"), mbs=4)


def test_chunked_errors_as_in_memory(tmp_path: Path) -> None:
    """One data frame: the same one-line error from both engines; a capture cut short: the same."""
    one = tmp_path / "one.pcap"
    write_pcap(synth.frames(np.array([BASE, BASE + 5 * MS]), payload=10).iloc[:1], one)
    errors = []
    for engine in ("memory", "chunked"):
        with pytest.raises(InputError) as err:
            table("intervals", one, engine=engine)
        errors.append(str(err.value))
    assert errors[0] == errors[1]
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(FIXTURE_PCAP.read_bytes()[:-30])
    errors = []
    for engine in ("memory", "chunked"):
        with pytest.raises(InputError) as err:
            table("idc", cut, engine=engine)
        errors.append(str(err.value))
    assert errors[0] == errors[1] and "byte offset" in errors[0]
    memory, chunked = both("idc", cut, partial=True)
    assert_same(memory, chunked)
    assert chunked.attrs["marked"] and chunked.attrs["warnings"] == memory.attrs["warnings"]


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
    out = table("goodput", lossy_by_hand, engine="chunked", stream=["40001"], from_s=0.065)
    assert list(out["stream"]) == [B_NAME, "all"] and list(out["bytes"]) == [150, 150]
    # no frame in the window; only an ACK in it (goodput 0 everywhere, fairness undefined): the
    # in-memory errors, word for word
    for kind, options, message in (("goodput", {"from_s": 0.101, "to_s": 0.109}, "no TCP frames in the window"),
                                   ("fairness", {"from_s": 0.095, "to_s": 0.105}, "fairness is undefined")):
        errors = []
        for engine in ("memory", "chunked"):
            with pytest.raises(InputError, match=message) as err:
                table(kind, lossy_by_hand, engine=engine, **options)
            errors.append(str(err.value))
        assert errors[0] == errors[1]
    assert list(table("goodput", lossy_by_hand, engine="chunked", from_s=0.095, to_s=0.105)["bytes"]) == [0, 0, 0]


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


US = 1000
H3 = "198.18.0.3"
H4 = "198.18.0.4"
WRAP = 2**32


def sanity_rows() -> pd.DataFrame:
    """Three streams whose sanity counters are worked out by hand (stamps in µs; 154-byte data
    frames take 123.2 µs at 10 Mbit/s). A (SENDER:40000) opens with a handshake in which both ends
    offer a window scale (7 and 5: the receiver's windows count x 32), sends again at 4000 µs the
    segment it first sent at 2000 µs, and its receiver advertises 100 and 300 (3200 and 9600 bytes).
    B (198.18.0.3:40001) has no handshake (its scale is unknown: its windows are left out), its
    sequence numbers wrap around 2**32 between its frames at 3200 and 3300 µs, only 100 µs apart
    (an impossible interval; rows 11 and 12, on either side of a chunk boundary at 2, 3, 4 and 6
    rows a chunk), and its receiver advertises a zero window with data outstanding at 2100 and
    4400 µs, one with nothing outstanding at 4200 µs and an RST with window 0 at 5200 µs. C
    (SENDER:40002) offers a scale its receiver does not (neither side scales: its 5000 is 5000
    bytes). D (198.18.0.4:40003, no handshake) sends 1000 bytes before its first ACK, which
    acknowledges none of them, then the first 500 again: 1000 bytes in flight then, the top sent
    chunks before. Rows: (µs, stream, data direction, seq, ack, payload, flags, window, wscale)."""
    rows = [
        (0, "A", True, 1000, 0, 0, 0x02, 65535, 7),           # SYN
        (100, "A", False, 5000, 1001, 0, 0x12, 65535, 5),     # SYN-ACK
        (200, "A", True, 1001, 5001, 0, 0x10, 65535, -1),
        (1000, "A", True, 1001, 5001, 100, 0x18, 65535, -1),
        (1200, "C", True, 7000, 0, 0, 0x02, 65535, 7),        # SYN
        (1500, "B", True, WRAP - 150, 0, 100, 0x18, 65535, -1),
        (1700, "C", False, 9000, 7001, 0, 0x12, 65535, -1),   # SYN-ACK without the option
        (2000, "A", True, 1101, 5001, 100, 0x18, 65535, -1),
        (2100, "B", False, 0, WRAP - 100, 0, 0x10, 0, -1),    # zero window, 50 of 100 bytes outstanding
        (2300, "C", True, 7001, 9001, 0, 0x10, 65535, -1),
        (3000, "A", True, 1201, 5001, 100, 0x18, 65535, -1),
        (3200, "B", True, WRAP - 50, 0, 100, 0x18, 65535, -1),  # [2**32 - 50, 2**32 + 50)
        (3300, "B", True, 50, 0, 100, 0x18, 65535, -1),         # 100 µs later: impossible
        (3350, "D", True, 20000, 0, 500, 0x18, 65535, -1),
        (3500, "A", False, 5001, 1201, 0, 0x10, 100, -1),
        (3600, "C", True, 7001, 9001, 100, 0x18, 65535, -1),
        (3800, "C", False, 9001, 7101, 0, 0x10, 5000, -1),
        (4000, "A", True, 1101, 5001, 100, 0x18, 65535, -1),  # sent again
        (4200, "B", False, 0, 150, 0, 0x10, 0, -1),           # zero window, nothing outstanding
        (4300, "B", True, 150, 0, 100, 0x18, 65535, -1),
        (4400, "B", False, 0, 200, 0, 0x10, 0, -1),           # zero window, 50 bytes outstanding
        (4450, "D", True, 20500, 0, 500, 0x18, 65535, -1),
        (4460, "D", False, 0, 20000, 0, 0x10, 1000, -1),
        (5000, "A", True, 1301, 5001, 100, 0x18, 65535, -1),
        (5100, "A", False, 5001, 1401, 0, 0x10, 300, -1),
        (5150, "D", True, 20000, 0, 500, 0x18, 65535, -1),    # sent again
        (5200, "B", False, 0, 200, 0, 0x14, 0, -1),           # RST: never a zero window
    ]
    ends = {"A": (synth.SENDER, 40000), "B": (H3, 40001), "C": (synth.SENDER, 40002), "D": (H4, 40003)}
    parts = []
    for t, who, forward, seq, ack, payload, flags, window, wscale in rows:
        (host, port), server = ends[who], (synth.RECEIVER, 5001)
        (src, sport), (dst, dport) = ((host, port), server) if forward else (server, (host, port))
        parts.append(synth.frame_table(np.array([BASE + t * US]), np.array([payload]), np.array([seq]),
                                       np.array([ack]), src, dst, sport, dport, flags=flags, window=window,
                                       wscale=wscale))
    return synth.concat(parts)


@pytest.fixture(scope="module")
def sanity_by_hand(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sanity") / "by-hand.pcap"
    write_pcap(sanity_rows(), path)
    return path


def counters(out: pd.DataFrame) -> dict[str, float]:
    return dict(zip(out["counter"], out["value"]))


# (options, the hand-worked counters): the whole capture, and a window from 2200 µs on. Gaps:
# SENDER>RECEIVER (A and C), B's and D's directions; D's 554-byte frames take 443.2 µs.
BY_HAND = [
    ({"link_rate": given_rate("10mbit")},
     {"frames": 27, "frame_gaps": 9 + 3 + 2, "impossible_intervals": 1, "data_frames": 13,
      "tcp_retransmissions": 2, "min_advertised_window": 3200, "window_scale_unknown_streams": 2,
      "zero_window_advertisements": 2, "max_bytes_in_flight": 1000, "window_ns": 5200 * US,
      "goodput_wire_bit_s": 1900 * 8 * 1e9 / (5200 * US)}),
    # the resend at 4000 µs starts below the first data byte of A in the window (1201): 100 bytes
    # below it, not 2**32 - 100 above (A's flight tops at 200); D's 1000 bytes stay the largest
    ({"link_rate": given_rate("10mbit"), "from_s": 0.0022},
     {"frames": 18, "frame_gaps": 4 + 2 + 2, "impossible_intervals": 1, "data_frames": 10,
      "tcp_retransmissions": 2, "min_advertised_window": 3200, "window_scale_unknown_streams": 2,
      "zero_window_advertisements": 1, "max_bytes_in_flight": 1000, "window_ns": 3000 * US,
      "goodput_wire_bit_s": 1600 * 8 * 1e9 / (3000 * US), "goodput_max_bit_s": 1e7 * 2200 / 2740,
      "wire_busy_share": (54 + 7 * 154 + 3 * 554) * 8 * 1e9 / 1e7 / (3000 * US), "goodput_above_max": 0}),
]


@pytest.mark.parametrize("options, expect", BY_HAND)
def test_sanity_by_hand_across_chunk_bounds(sanity_by_hand: Path, options: dict, expect: dict,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The hand-worked counters from both engines, 3 rows a chunk: the impossible pair and B's wrap
    straddle a boundary (rows 11 | 12), the resends are chunks after their first sending (D's top
    sent in the chunk before its resend), the SYNs' scales are chunks before the receivers'
    windows."""
    monkeypatch.setenv("HOSTWIRE_CHUNK_ROWS", "3")
    t = (sanity_rows()["t_ns"].to_numpy() - BASE) // US
    assert list(np.flatnonzero((t == 3200) | (t == 3300)) // 3) == [3, 4]
    memory, chunked = both("sanity", sanity_by_hand, **options)
    assert_same(memory, chunked)
    got = counters(chunked)
    assert {k: got[k] for k in expect} == expect
    assert got["retransmitted_share"] == 2 / expect["data_frames"] and got["marked"] == 1
    assert chunked.attrs["marked"] is True
    assert [r.split()[0] for r in chunked.attrs["marked_by"]] == ["retransmitted_share", "zero_window_advertisements"]


@pytest.mark.parametrize("rows", ["1", "2", "4", "5", "7", "1000"])
@pytest.mark.parametrize("options", [{}, {"link_rate": given_rate("10mbit"), "from_s": 0.0022},
                                     {"link_rate": given_rate("10mbit"), "from_s": 0.0011, "to_s": 0.0043},
                                     {"link_rate": given_rate("1gbit"), "tolerance": 0.0, "frame_overhead": 24,
                                      "max_retransmit_share": 0.5, "stream": ["40001"]}])
def test_sanity_by_hand_at_every_chunk_size(sanity_by_hand: Path, rows: str, options: dict,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOSTWIRE_CHUNK_ROWS", rows)
    assert_same(*both("sanity", sanity_by_hand, **options))


def test_sanity_options_as_in_memory(sanity_by_hand: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--tolerance 0.2 lets the 100 µs gap pass (98.56 µs is the bound); --stream is no filter of
    sanity's; --max-retransmit-share above the share leaves only the zero windows marking; the
    link rate unknown (no --link-rate): no maximum; bad options: the same errors."""
    monkeypatch.setenv("HOSTWIRE_CHUNK_ROWS", "4")
    memory, chunked = both("sanity", sanity_by_hand, link_rate=given_rate("10mbit"), tolerance=0.2, stream=["40001"],
                           max_retransmit_share=0.2)
    assert_same(memory, chunked)
    got = counters(chunked)
    assert got["impossible_intervals"] == 0 and got["frame_gaps"] == 14 and got["data_frames"] == 13
    assert [r.split()[0] for r in chunked.attrs["marked_by"]] == ["zero_window_advertisements"]
    # from 2200 µs: 4.267 Mbit/s of goodput; the maximum 2200 / 2740 of the rate, the slack two
    # 500-byte payloads over 3 ms (2.667 Mbit/s): above it at 1 Mbit/s, within it at 3 Mbit/s
    for rate, above in (("1mbit", 1), ("3mbit", 0)):
        memory, chunked = both("sanity", sanity_by_hand, link_rate=given_rate(rate), from_s=0.0022)
        assert_same(memory, chunked)
        assert counters(chunked)["goodput_above_max"] == above
    memory, chunked = both("sanity", sanity_by_hand)
    assert_same(memory, chunked)
    assert "goodput_max_bit_s" not in set(chunked["counter"]) and "wire_busy_share" not in set(chunked["counter"])
    for options, message in (({"tolerance": 1.0}, "--tolerance"), ({"max_retransmit_share": 2.0}, "--max-retransmit"),
                             ({"frame_overhead": -1}, "--frame-overhead"), ({"from_s": 9.0}, "empty window")):
        errors = []
        for engine in ("memory", "chunked"):
            with pytest.raises(UsageError, match=message) as err:
                table("sanity", sanity_by_hand, engine=engine, **options)
            errors.append(str(err.value))
        assert errors[0] == errors[1]


def test_sanity_of_a_damaged_capture_counts_the_damage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A capture cut short: sanity reads what it can without --partial, counts the damage and is
    marked, in both engines alike."""
    monkeypatch.setenv("HOSTWIRE_CHUNK_ROWS", "1000")
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(FIXTURE_PCAP.read_bytes()[:-30])
    memory, chunked = both("sanity", cut, link_rate=given_rate("10mbit"))
    assert_same(memory, chunked)
    got = counters(chunked)
    assert got["damaged_sources"] == 1 and got["marked"] == 1 and f"damage.{cut}.byte_offset" in got
    assert chunked.attrs["warnings"] == memory.attrs["warnings"] and len(chunked.attrs["warnings"]) == 1


def test_sanity_of_a_capture_without_tcp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """UDP only: gaps in the directions that carry payload (one flow at twice the line rate: every
    gap impossible; its empty replies the other way not judged), TCP counters zero."""
    monkeypatch.setenv("HOSTWIRE_CHUNK_ROWS", "7")
    t = BASE + np.arange(40, dtype=np.int64) * 60 * US
    flow = synth.frame_table(t, np.full(40, 100), np.zeros(40, np.int64), np.zeros(40, np.int64), synth.SENDER,
                             synth.RECEIVER, 4000, 4001).assign(proto=np.uint8(17))
    back = synth.frame_table(t + 5 * US, np.zeros(40, np.int64), np.zeros(40, np.int64), np.zeros(40, np.int64),
                             synth.RECEIVER, synth.SENDER, 4001, 4000).assign(proto=np.uint8(17))
    path = tmp_path / "udp.pcap"
    write_pcap(synth.concat([flow, back]), path)
    for options in ({"link_rate": given_rate("10mbit")}, {"link_rate": given_rate("10mbit"), "from_s": 0.0007}):
        memory, chunked = both("sanity", path, **options)
        assert_same(memory, chunked)
        got = counters(chunked)
        assert got["data_frames"] == 0 and got["min_advertised_window"] == -1
        assert got["impossible_intervals"] == got["frame_gaps"] > 0  # 60 µs apart; 142-byte frames take 113.6


def test_the_gap_carry_holds_one_row_per_direction() -> None:
    """Two directions over 50 chunks: the carry stays two rows, and the counts are those of the
    frames taken at once."""
    from hostwire.metrics.chunked.sanity import Gaps

    rng = np.random.default_rng(5)
    key = rng.integers(0, 2, 5000)
    t = np.cumsum(rng.integers(1, 3000, 5000))
    length = rng.integers(54, 1515, 5000)
    gaps = Gaps(10**7, 0.05)
    for i in range(0, 5000, 100):
        gaps.feed(key[i:i + 100], t[i:i + 100], length[i:i + 100], np.ones(100))
        assert len(gaps.keys) == 2 == len(gaps.last_t)
    expect = 0
    for k in (0, 1):
        tk, lk = t[key == k], length[key == k]
        expect += int((np.diff(tk) < 0.95 * (np.minimum(lk[1:], lk[:-1]) * 8 * 1e9 / 10**7)).sum())
    assert gaps.totals(payload_only=False) == (expect, 4998)


CHILD = """
import sys, time, mmap, os
block = bytearray(int(sys.argv[1]))
for i in range(0, len(block), 4096):
    block[i] = 1
shm = open(sys.argv[2], "w+b")
shm.truncate(int(sys.argv[1]))
view = mmap.mmap(shm.fileno(), int(sys.argv[1]))
for i in range(0, len(view), 4096):
    view[i] = 1
print("ready", flush=True)
time.sleep(30)
"""


def test_the_sampler_counts_heap_and_shared_memory_of_the_tree(tmp_path: Path) -> None:
    """A grandchild that touches 64 MB of heap and 64 MB of a tmpfs mapping: the tree's sample
    holds both (and a process gone counts 0)."""
    shm_dir = Path("/dev/shm")
    if not (shm_dir.is_dir() and os.access(shm_dir, os.W_OK)):
        pytest.skip("needs a writable tmpfs at /dev/shm")
    size = 64 << 20
    shm = shm_dir / f"hostwire-test-{os.getpid()}"
    parent = subprocess.Popen([sys.executable, "-c",
                               "import subprocess, sys; p = subprocess.Popen(sys.argv[1:]); p.wait()",
                               sys.executable, "-c", CHILD, str(size), str(shm)])
    try:
        with Sampler([parent.pid], interval_s=0.05) as sampler:
            for _ in range(200):
                if sampler.sample() >= 2 * size:
                    break
                time.sleep(0.05)
        assert 2 * size <= sampler.peak < 2 * size + (64 << 20)
        assert len(tree(parent.pid)) == 2
    finally:
        for pid in reversed(tree(parent.pid)):  # the grandchild first, then the child we started
            os.kill(pid, signal.SIGKILL)
        parent.wait()
        shm.unlink(missing_ok=True)
    assert anon_bytes(parent.pid) == 0


def test_pcapcols_writes_only_the_columns_asked_for(tmp_path: Path) -> None:
    """--columns: those files and only those in columns.json, the same values as a full run; an
    unknown name is a usage error (exit 2) naming it."""
    from hostwire.paths import tool
    from hostwire.read.pcap import read_columns

    subprocess.run([str(tool("hw-pcapcols")), str(FIXTURE_PCAP), "-o", str(tmp_path / "all")], check=True)
    subprocess.run([str(tool("hw-pcapcols")), "--columns", "t_ns,src,payload_len", str(FIXTURE_PCAP),
                    "-o", str(tmp_path / "some")], check=True)
    assert sorted(p.name for p in (tmp_path / "some").iterdir()) == ["columns.json", "payload_len.bin", "src.bin",
                                                                      "t_ns.bin"]
    meta = json.loads((tmp_path / "some" / "columns.json").read_text())
    assert [c["name"] for c in meta["columns"]] == ["t_ns", "src", "payload_len"]
    full = read_columns(tmp_path / "all")
    for name in ("t_ns", "payload_len"):
        data = np.fromfile(tmp_path / "some" / f"{name}.bin", dtype="<i8")
        assert np.array_equal(data, full[name].to_numpy())
    bad = subprocess.run([str(tool("hw-pcapcols")), "--columns", "t_ns,nope", str(FIXTURE_PCAP), "-o",
                          str(tmp_path / "bad")], capture_output=True, text=True)
    assert bad.returncode == 2 and "no column 'nope'" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
