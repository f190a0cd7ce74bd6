"""The chunked engine (hostwire.metrics.chunked) against the in-memory one and against ground truth:
tables equal value for value on the recorded fixture and on synthetic captures read in chunks of a
few hundred rows, so that streams, gaps, IDC bins and busy periods cross chunk boundaries; stamps
out of order across chunks; exact order statistics; and the memory sampler on known allocations
(goodput and fairness: test_metrics_chunked_goodput.py; sanity: test_metrics_chunked_sanity.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from hostwire.errors import InputError, UsageError
from hostwire.linkrate import given_rate
from hostwire.metrics import synth, table
from hostwire.metrics.chunked.quantiles import FirstPass, order_statistics
from hostwire.procmem import Sampler, anon_bytes, tree

sys.path.insert(0, str(Path(__file__).resolve().parent))
from chunked_helpers import (BASE, FIXTURE_PCAP, MS, S, assert_same, both, by_engine, chunked_table,  # noqa: E402
                             write_pcap)


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
    out = chunked_table("intervals", mixed, stream=["40001"])
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
        out = chunked_table("idc", path, points=1, t_min=t)
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
            by_engine(engine, "intervals", one)
        errors.append(str(err.value))
    assert errors[0] == errors[1]
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(FIXTURE_PCAP.read_bytes()[:-30])
    errors = []
    for engine in ("memory", "chunked"):
        with pytest.raises(InputError) as err:
            by_engine(engine, "idc", cut)
        errors.append(str(err.value))
    assert errors[0] == errors[1] and "byte offset" in errors[0]
    memory, chunked = both("idc", cut, partial=True)
    assert_same(memory, chunked)
    assert chunked.attrs["marked"] and chunked.attrs["warnings"] == memory.attrs["warnings"]


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
