"""Goodput against ground truth built here: the unique bytes that crossed the wire in the window
(retransmissions, holes filled after a loss before the capture point, out-of-order and overlapping
segments, sequence wraparound) by hand and by brute force, the receivers' figure beside it, held
against the link's physical maximum."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hostwire.metrics import compute, synth
from hostwire.metrics.goodput import df_goodput, max_payload_bit_s, wire_bytes_per_stream
from hostwire.metrics.inputs import Source
from hostwire.metrics.streams import delivered_bytes, label_streams
from hostwire.window import Window

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the helpers beside this file (importlib mode)
from integrity_helpers import A, B, MS, S, US  # noqa: E402


# --- 2, 3. goodput: unique bytes on the wire, at the time they first crossed it --------------

SEQ0 = 2**32 - 2500  # the stream's sequence numbers wrap between its 3rd and 4th byte ranges
# (time ms, first byte, last byte + 1) relative to SEQ0; [2000, 3000) was lost before the capture
HAND = [(1, 0, 1000), (2, 1000, 2000), (3, 3000, 4000), (4, 4000, 5000),
        (5, 2000, 3000),   # the lost segment sent again: fills the hole
        (6, 1000, 2000),   # a spurious retransmission
        (7, 4500, 6000),   # repacketized, overlapping: [5000, 6000) is new
        (8, 5500, 5800),   # wholly seen
        (9, 7000, 7500),   # beyond a hole [6000, 7000)
        (10, 5800, 7200),  # fills the hole: [6000, 7000) new
        (11, 6500, 8000)]  # [7500, 8000) new
HAND_NEW = [1000, 1000, 1000, 1000, 1000, 0, 1000, 0, 500, 1000, 500]


def hand_capture() -> pd.DataFrame:
    t = np.array([h[0] for h in HAND]) * MS
    first = np.array([h[1] for h in HAND])
    size = np.array([h[2] - h[1] for h in HAND])
    a = synth.frame_table(t, size, (SEQ0 + first) % 2**32, np.zeros(len(t)), synth.SENDER, synth.RECEIVER,
                          40000, 5001, headers=40)
    b = synth.frames(np.arange(1, 9) * MS + 500 * US, payload=1000, sport=40001, headers=40)  # 8000 in order
    return synth.concat([a, b])


def test_unique_bytes_by_sequence_ranges_by_hand() -> None:
    data = delivered_bytes(label_streams(hand_capture()))
    a = data[data["stream"] == A]
    assert list(a["new_bytes"]) == HAND_NEW and sum(HAND_NEW) == 8000
    assert list(a["retransmit"]) == [False, False, False, False, True, True, True, True, False, True, True]
    per = wire_bytes_per_stream(data, Window(0, 20 * MS))
    assert per.to_dict() == {A: 8000, B: 8000}
    # bytes first seen before the window do not count inside it, even when sent again inside:
    # frames at 4.5 .. 10.5 ms bring 1000 + 0 + 1000 + 0 + 500 + 1000
    assert wire_bytes_per_stream(data, Window(4 * MS + 500 * US, 10 * MS + 500 * US))[A] == 3500


def test_goodput_and_fairness_of_a_capture(tmp_path: Path) -> None:
    path = tmp_path / "frames.parquet"
    hand_capture().to_parquet(path)
    gp = compute.table("goodput", path).set_index("stream")
    assert list(gp.columns) == ["bytes", "seconds", "bit_s"]
    assert gp.loc[A, "bytes"] == 8000 and gp.loc["all", "bytes"] == 16000
    assert gp.loc["all", "seconds"] == pytest.approx(0.010)  # first frame at 1 ms, last at 11 ms
    fair = compute.table("fairness", path).set_index("stream")
    assert fair.loc["all", "jain"] == pytest.approx(1.0)  # 8000 and 8000
    narrowed = compute.table("goodput", path, from_s=0.0035, to_s=0.0095, stream=["40000"]).set_index("stream")
    assert narrowed.loc[A, "bytes"] == 3500 and narrowed.loc["all", "seconds"] == pytest.approx(0.006)


def brute_force_first_seen(t: np.ndarray, first: np.ndarray, end: np.ndarray, length: int) -> np.ndarray:
    """The time each byte of [0, length) first crossed the wire (int64 max: never)."""
    seen = np.full(length, np.iinfo(np.int64).max, dtype=np.int64)
    for ti, a, b in zip(t, first, end):  # a few thousand frames of a test
        np.minimum(seen[a:b], ti, out=seen[a:b])
    return seen


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_unique_bytes_of_a_lossy_poisson_stream_against_brute_force(seed: int) -> None:
    """Segments of random sizes leave at Poisson times; 15 % are lost before the capture point
    and sent again 20-200 ms later, repacketized with their successor half the time; 5 % are
    duplicated. Every byte crosses eventually, so the stream's unique bytes are its length, and
    each window holds exactly the bytes first seen in it."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 1449, 3000)
    first = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    end = first + sizes
    length = int(end[-1])
    t = synth.poisson(rng, 800.0, 4 * S)[: len(sizes)]
    t = np.sort(np.concatenate([t, rng.integers(0, 4 * S, len(sizes) - len(t))]))
    lost = rng.random(len(sizes)) < 0.15
    again_end = np.where(rng.random(len(sizes)) < 0.5, np.concatenate([end[1:], end[-1:]]), end)
    again_t = t + rng.integers(20 * MS, 200 * MS, len(sizes))
    dup = rng.random(len(sizes)) < 0.05
    rows_t = np.concatenate([t[~lost], again_t[lost], t[dup] + 3 * MS])
    rows_a = np.concatenate([first[~lost], first[lost], first[dup]])
    rows_b = np.concatenate([end[~lost], again_end[lost], end[dup]])
    seq0 = 2**32 - length // 2  # wraps in the middle of the stream
    frames = synth.frame_table(rows_t, rows_b - rows_a, (seq0 + rows_a) % 2**32, np.zeros(len(rows_t)),
                               synth.SENDER, synth.RECEIVER, 40000, 5001)
    frames = frames.sort_values("t_ns", kind="stable").reset_index(drop=True)
    data = delivered_bytes(label_streams(frames))
    assert int(data["new_bytes"].sum()) == length
    seen = brute_force_first_seen(rows_t, rows_a, rows_b, length)
    for lo, hi in [(0, S), (S // 3, 2 * S), (int(1.5 * S), 5 * S)]:
        expect = int(((seen >= lo) & (seen <= hi)).sum())
        assert wire_bytes_per_stream(data, Window(lo, hi))[A] == expect


def test_max_payload_rate_of_the_link_by_hand() -> None:
    # full frames with TCP timestamps: 1448 payload bytes in 1514 counted by the shaper
    assert max_payload_bit_s(np.full(3, 1514), np.full(3, 1448), 10**7) == pytest.approx(9_564_068.692)
    # a real Ethernet: + preamble/SFD 8, FCS 4, inter-frame gap 12
    assert max_payload_bit_s(np.full(3, 1514), np.full(3, 1448), 10**7, 24) == pytest.approx(1e7 * 1448 / 1538)
    # a mix: (1448 + 616) / (1514 + 682)
    assert max_payload_bit_s(np.array([1514, 682]), np.array([1448, 616]), 10**7) == pytest.approx(9_398_907.104)
    # no frame: a full frame without TCP options, 1460 / 1514
    assert max_payload_bit_s(np.zeros(0), np.zeros(0), 10**7) == pytest.approx(9_643_328.930)


FRAME_NS = 1_211_200  # 1514 bytes at 10 Mbit/s


def stall_then_burst() -> tuple[pd.DataFrame, pd.DataFrame]:
    """A stream at the line rate, full frames, one per slot of 1211.2 us. Segment 250 is lost
    before the capture and sent again in slot 428 (216 ms later); the segments after it slide one
    slot. The receiver reads each in-order segment 30 us after it arrives; behind the hole it
    reads nothing for 216 ms, then the 178 segments it held (250..427, 257,744 bytes) within
    17.8 us."""
    segments = np.arange(826)
    slot = np.where(segments < 428, segments, segments + 1)
    keep = segments != 250
    t = np.concatenate([slot[keep] * FRAME_NS, [428 * FRAME_NS]])
    seg = np.concatenate([segments[keep], [250]])
    frames = synth.frame_table(t, np.full(len(t), 1448), (7 + seg * 1448) % 2**32, np.zeros(len(t)),
                               synth.SENDER, synth.RECEIVER, 40000, 5001).sort_values("t_ns").reset_index(drop=True)
    arrive = np.where(segments == 250, 428, slot) * FRAME_NS
    read = np.where(segments < 250, arrive + 30 * US,
                    np.where(segments < 428, 428 * FRAME_NS + 30 * US + (segments - 250) * 100, arrive + 30 * US))
    received = pd.DataFrame({"t_ns": read, "bytes": 1448, "stream": A})
    return frames, received


def test_goodput_after_a_stall_stays_within_the_wire_and_the_app_figure_is_flagged(
        monkeypatch: pytest.MonkeyPatch) -> None:
    frames, received = stall_then_burst()
    window = Window(500 * MS, 600 * MS)
    # slots 413..495 lie in the window: 83 frames, all bytes first seen there (slot 428 the
    # retransmission); the receivers read 178 held segments plus segments 428..494 (slots 429..495)
    wire_bytes, app_bytes = 83 * 1448, (178 + 67) * 1448
    writes = pd.DataFrame({"t_ns": [0], "pid": [1], "role": ["send-0"], "stream": [A], "bytes": [1448]})
    manifest = {"point": {"link_rate": "10mbit", "topology": "netns"}, "losses": {}, "exit": {}}
    source = Source(path=Path("run"), frames=frames, window=window, writes=writes, received=received,
                    manifest=manifest, status="complete")
    monkeypatch.setattr(compute, "open_input", lambda path, **options: source)
    gp = compute.table("goodput", "run").set_index("stream")
    assert list(gp.columns) == ["bytes", "seconds", "bit_s", "basis", "app_bytes", "app_bit_s"]
    assert gp.loc[A, "bytes"] == wire_bytes and gp.loc[A, "app_bytes"] == app_bytes
    assert (gp["basis"] == "wire").all()
    assert gp.loc["all", "bit_s"] == pytest.approx(wire_bytes * 8 / 0.1)  # 9.615 Mbit/s
    assert gp.loc["all", "app_bit_s"] == pytest.approx(app_bytes * 8 / 0.1)  # 28.4 Mbit/s
    fair = compute.table("fairness", "run").set_index("stream")  # the receivers' bytes, the wire's beside
    assert fair.loc[A, "bytes"] == app_bytes and fair.loc[A, "wire_bytes"] == wire_bytes
    assert (fair["basis"] == "app").all() and fair.loc["all", "jain"] == 1.0 and fair.loc["all", "wire_jain"] == 1.0
    c = compute.table("sanity", "run").set_index("counter")["value"]
    maximum = 1e7 * 1448 / 1514
    assert c["goodput_max_bit_s"] == pytest.approx(maximum)
    # the window's ends hold up to two frames beyond the line rate: 9.615 <= 9.564 + 0.232
    assert maximum < c["goodput_wire_bit_s"] < maximum + 2 * 1448 * 8 / 0.1
    assert c["goodput_app_bit_s"] == pytest.approx(app_bytes * 8 / 0.1)
    assert c["goodput_above_max"] == 1 and c["marked"] == 1


def test_goodput_of_a_run_without_capture_is_the_receivers() -> None:
    app = pd.Series({A: 3000, B: 0})
    table = df_goodput(None, Window(0, S), app).set_index("stream")
    assert (table["basis"] == "app").all() and table.loc["all", "bytes"] == 3000
    assert table.loc["all", "app_bit_s"] == pytest.approx(24000)
