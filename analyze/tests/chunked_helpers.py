"""What the tests of the chunked engine share: synthetic captures written as pcap, and both
engines' tables of one call, the chunked one from the chunked path itself: a call that it declines
(hostwire.metrics.chunked.engine.Declined) fails the test instead of comparing memory with memory."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pandas as pd

from hostwire.metrics import table
from hostwire.metrics.chunked import engine
from hostwire.metrics.options import metrics_request

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


def chunked_table(kind: str, path: Path, **options: object) -> pd.DataFrame:
    """The chunked engine's table, never the in-memory fallback: raises when the engine declines."""
    return engine.compute(metrics_request(kind, path, engine="chunked", **options))


def both(kind: str, path: Path, **options: object) -> tuple[pd.DataFrame, pd.DataFrame]:
    return table(kind, path, engine="memory", **options), chunked_table(kind, path, **options)


def assert_same(memory: pd.DataFrame, chunked: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(memory.reset_index(drop=True), chunked.reset_index(drop=True),
                                  check_exact=True, check_dtype=False)
    if "marked_by" in memory.attrs:  # sanity: what marks the run, and how the table is marked
        assert memory.attrs == chunked.attrs


def by_engine(name: str, kind: str, path: Path, **options: object) -> pd.DataFrame:
    """table() in memory, or the chunked engine's own table (chunked_table) for "chunked"."""
    return chunked_table(kind, path, **options) if name == "chunked" else table(kind, path, engine="memory", **options)
