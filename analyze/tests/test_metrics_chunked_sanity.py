"""The chunked engine's sanity counters of a capture against memory and against counters worked
out by hand, at every chunk size: impossible intervals, retransmissions, windows, damage, a
capture without TCP, and the gap carry from one chunk to the next."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hostwire.errors import UsageError
from hostwire.linkrate import given_rate
from hostwire.metrics import synth

sys.path.insert(0, str(Path(__file__).resolve().parent))
from chunked_helpers import BASE, FIXTURE_PCAP, assert_same, both, by_engine, write_pcap  # noqa: E402


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
                by_engine(engine, "sanity", sanity_by_hand, **options)
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
