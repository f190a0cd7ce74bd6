"""Integrity of the metrics against ground truth built here: a damaged capture or log never
vanishes; goodput counts the unique bytes that crossed the wire in the window (retransmissions,
holes filled after a loss before the capture point, out-of-order and overlapping segments,
sequence wraparound) and the receivers' figure beside it, held against the link's physical
maximum; an interrupted run uses the window it recorded; heavy loss, zero windows and shaper drops
mark the run; a run without senders still gives every counter."""

from __future__ import annotations

import contextlib
import io
import json
import struct
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hostwire.cli import main
from hostwire.metrics import compute, synth
from hostwire.metrics.damage import from_attrs
from hostwire.metrics.goodput import df_goodput, max_payload_bit_s, wire_bytes_per_stream
from hostwire.metrics.inputs import Source
from hostwire.metrics.sanity import Context, df_sanity, manifest_counters
from hostwire.metrics.streams import delivered_bytes, label_streams
from hostwire.metrics.window import frame_window
from hostwire.window import Window

S = 10**9
MS = 10**6
US = 10**3
BASE = 1_000 * S  # the synthetic runs' window starts here (their CLOCK_MONOTONIC)
A = "198.18.0.1:40000>198.18.0.2:5001"
B = "198.18.0.1:40001>198.18.0.2:5001"
PCAP_HEADER = 24
RECORD_HEADER = 16
ETH_IP_TCP = 14 + 20 + 20


def metrics(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(["metrics", *args])
        except SystemExit as exit_:  # argparse
            code = int(exit_.code or 0)
    return code, out.getvalue(), err.getvalue()


def counters_of(out: str) -> pd.Series:
    return pd.read_csv(io.StringIO(out)).set_index("counter")["value"]


# --- writing captures and runs ---------------------------------------------------------------

def _ip(src: str, dst: str) -> bytes:
    return bytes(int(x) for x in src.split(".")) + bytes(int(x) for x in dst.split("."))


def frame_bytes(row: pd.Series) -> bytes:
    """Ethernet + IPv4 + TCP (no options) or UDP + payload of one synth frame-table row."""
    payload = b"x" * int(row["payload_len"])
    proto = int(row["proto"])
    sport, dport = int(row["sport"]), int(row["dport"])
    if proto == 6:
        l4 = struct.pack("!HHIIBBHHH", sport, dport, int(row["seq"]), int(row["ack"]), 5 << 4, int(row["flags"]),
                         int(row["window"]), 0, 0) + payload
    else:
        l4 = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
    ip = struct.pack("!BBHHHBBH", 0x45, 0, 20 + len(l4), 0, 0, 64, proto, 0) + _ip(str(row["src"]), str(row["dst"]))
    return b"\x04" * 6 + b"\x02" * 6 + b"\x08\x00" + ip + l4


def write_pcap(frames: pd.DataFrame, path: Path) -> list[int]:
    """A nanosecond pcap of the frames in table order; returns each record's byte offset."""
    offsets = []
    with open(path, "wb") as handle:
        handle.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 1))
        for _, row in frames.iterrows():  # a few hundred frames of a test
            offsets.append(handle.tell())
            data = frame_bytes(row)
            sec, nsec = divmod(int(row["t_ns"]), S)
            handle.write(struct.pack("<IIII", sec, nsec, len(data), len(data)) + data)
    return offsets


def tsv(path: Path, kind: str, meta: dict[str, object], columns: list[str], rows: list[tuple[object, ...]]) -> None:
    lines = ["# format: hostwire-tsv 1", f"# kind: {kind}", "# clock: CLOCK_MONOTONIC"]
    lines += [f"# {k}: {v}" for k, v in meta.items()]
    lines.append("\t".join(columns))
    lines += ["\t".join(str(v) for v in row) for row in rows]
    path.write_text("\n".join(lines) + "\n")


def make_run(directory: Path, *, frames: pd.DataFrame | None, writes: dict[int, list[tuple[int, int]]],
             reads: dict[int, list[tuple[int, int]]], window: tuple[int, int] = (BASE, BASE + 200 * MS),
             manifest_window: bool = True, status: str = "complete", reason: str = "",
             losses: dict[str, object] | None = None, background: int = 0) -> Path:
    """A run directory as the runner writes it: manifest, bench.json, the senders' and receivers'
    logs (sender i: 198.18.0.1:4000i -> 198.18.0.2:5001) and raw/wire.pcap from `frames`."""
    bench = directory / "raw" / "bench"
    bench.mkdir(parents=True)
    start, end = window
    (directory / "manifest.json").write_text(json.dumps({
        "format": "hostwire-run 1", "run_id": directory.name, "status": status, "reason": reason,
        "point": {"senders": len(writes), "background": background, "link_rate": "10mbit", "topology": "netns"},
        "losses": losses if losses is not None else {"wire_ps_drop": 0},
        "exit": {"hw-bench": 0}, "window_ns": [start, end] if manifest_window else None}))
    (bench / "bench.json").write_text(json.dumps({
        "format": "hostwire-bench 1", "window_start_ns": start, "window_end_ns": end,
        "receiver_ports": {"tcp": 5001, "udp": 5002}, "processes": [], "receivers": []}))
    head = {"window_start_ns": start, "window_end_ns": end}
    for i, calls in writes.items():
        rows = [r for t, n in calls for r in ((t, "write_start", n), (t + 5 * US, "write_end", n))]
        tsv(bench / f"send-{i}.tsv", "bench-send", {**head, "role": f"send-{i}", "index": i, "pid": 100 + i,
                                                    "local": f"198.18.0.1:{40000 + i}", "peer": "198.18.0.2:5001"},
            ["t_ns", "event", "bytes"], rows)
    for i, calls in reads.items():
        tsv(bench / f"recv-{i}.tsv", "bench-receive", {**head, "role": f"recv-{i}", "index": i, "pid": 200 + i,
                                                       "local": "198.18.0.2:5001", "peer": f"198.18.0.1:{40000 + i}"},
            ["t_ns", "t_raw_ns", "bytes"], [(t, t, n) for t, n in calls])
    for i in range(background):
        tsv(bench / f"bg-{i}.tsv", "bench-background", {**head, "role": f"bg-{i}", "index": i, "pid": 300 + i},
            ["t_ns", "round", "primes", "largest", "ok"],
            [(start + k * 10 * MS, k, 23000, 262139, 1) for k in range(1, 10)])
    if frames is not None:
        write_pcap(frames, directory / "raw" / "wire.pcap")
    return directory


def steady_run(directory: Path) -> tuple[Path, pd.DataFrame]:
    """Sender 0 sends 1000-byte segments every 2 ms from 10 ms before the window to 10 ms after
    it; the receiver reads each 100 us after it crossed the wire."""
    t = BASE + np.arange(-10, 211, 2) * MS
    frames = synth.frames(t, payload=1000, headers=40)
    run = make_run(directory, frames=frames, writes={0: [(int(x) - 50 * US, 1000) for x in t]},
                   reads={0: [(int(x) + 100 * US, 1000) for x in t]})
    return run, frames


def test_the_run_summary_shows_both_goodput_figures_and_the_link_maximum(tmp_path: Path, build_dir: Path) -> None:
    from hostwire.campaign.summary import format_run_metrics

    run, _ = steady_run(tmp_path / "run")
    text = format_run_metrics(run)
    # 101 frames at 0, 2, ..., 200 ms: 101,000 bytes over 0.2 s; 100 reads at 0.1 .. 198.1 ms;
    # 1000 payload bytes in 1054 on the wire
    assert ("goodput 4.04 Mbit/s on the wire (unique payload bytes in the window), 4.00 Mbit/s read by the "
            "receivers; link maximum 9.49 Mbit/s") in text
    assert "marked" not in text


# --- 1. a damaged source never vanishes ------------------------------------------------------

@pytest.fixture
def cut_run(tmp_path: Path, build_dir: Path) -> tuple[Path, pd.DataFrame, int, int]:
    """The steady run with its capture cut inside the data of frame 61 (1-based; stamped at
    BASE + 110 ms): (run, frames, byte offset of that frame's record, its frame number)."""
    run, frames = steady_run(tmp_path / "run")
    pcap = run / "raw" / "wire.pcap"
    offsets = write_pcap(frames, pcap)
    k = 61
    data = pcap.read_bytes()
    pcap.write_bytes(data[:offsets[k - 1] + RECORD_HEADER + 30])
    return run, frames, offsets[k - 1], k


@pytest.mark.parametrize("kind", ["goodput", "fairness", "intervals", "bursts"])
def test_a_cut_capture_in_a_run_stops_the_metric_naming_file_and_offset(
        kind: str, cut_run: tuple[Path, pd.DataFrame, int, int]) -> None:
    run, _, offset, k = cut_run
    code, out, err = metrics(kind, str(run))
    assert code == 1 and out == "", (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hostwire: ")
    assert str(run / "raw" / "wire.pcap") in lines[0] and f"byte offset {offset}" in lines[0]
    assert "--partial" in lines[0]


def test_partial_computes_on_the_intact_part_and_marks_the_result(
        cut_run: tuple[Path, pd.DataFrame, int, int]) -> None:
    run, frames, offset, k = cut_run
    code, out, err = metrics("goodput", str(run), "--partial")
    assert code == 0, err
    table = pd.read_csv(io.StringIO(out)).set_index("stream")
    # frames 1..60 are intact; the last one is stamped BASE + 108 ms: the window ends there.
    last = int(frames["t_ns"].iloc[k - 2])
    assert last == BASE + 108 * MS
    inside = ((frames["t_ns"] >= BASE) & (frames["t_ns"] <= last)).sum()  # 0, 2, ..., 108 ms: 55 frames
    assert inside == 55
    assert table.loc["all", "seconds"] == pytest.approx(0.108)
    assert table.loc[A, "bytes"] == 55 * 1000
    # the receiver reads 100 us after each frame: 0.1 .. 106.1 ms are in, 108.1 ms is not
    assert table.loc[A, "app_bytes"] == 54 * 1000
    assert table.loc["all", "bit_s"] == pytest.approx(55 * 1000 * 8 / 0.108)
    warnings = err.strip().splitlines()
    assert warnings and all(w.startswith("hostwire: warning: ") for w in warnings)
    assert any(f"byte offset {offset}" in w for w in warnings)
    result = compute.table("goodput", run, partial=True)
    assert result.attrs["marked"] is True
    assert result.attrs["damaged_sources"][0]["byte_offset"] == offset
    assert result.attrs["damaged_sources"][0]["frame"] == k


def test_sanity_always_counts_the_damage_and_marks_the_run(cut_run: tuple[Path, pd.DataFrame, int, int]) -> None:
    run, _, offset, k = cut_run
    code, out, err = metrics("sanity", str(run))
    assert code == 0 and err == "", err
    c = counters_of(out)
    assert c["damaged_sources"] == 1
    assert c["damage.raw/wire.pcap.byte_offset"] == offset and c["damage.raw/wire.pcap.frame"] == k
    assert c["frames"] == 55 and c["window_cut"] == 1 and c["marked"] == 1
    code, _, err = metrics("sanity", str(run), "--check")
    assert code == 1 and "damaged_sources 1" in err and f"byte offset {offset}" in err


def test_a_cut_bare_capture(tmp_path: Path, build_dir: Path) -> None:
    frames = synth.frames(np.arange(1, 41) * MS, payload=1000, headers=40)
    pcap = tmp_path / "wire.pcap"
    offsets = write_pcap(frames, pcap)
    pcap.write_bytes(pcap.read_bytes()[:offsets[30] + 8])  # inside the record header of frame 31
    code, out, err = metrics("goodput", str(pcap))
    assert code == 1 and out == "" and f"byte offset {offsets[30]}" in err and len(err.strip().splitlines()) == 1
    code, out, err = metrics("goodput", str(pcap), "--partial")
    assert code == 0 and pd.read_csv(io.StringIO(out)).set_index("stream").loc["all", "bytes"] == 30 * 1000
    assert f"byte offset {offsets[30]}" in err
    code, out, err = metrics("sanity", str(pcap))
    assert code == 0 and err == ""
    c = counters_of(out)
    assert c["damaged_sources"] == 1 and c[f"damage.{pcap}.byte_offset"] == offsets[30] and c["frames"] == 30
    assert c["marked"] == 1


def test_a_damaged_receiver_log_is_counted_by_sanity(tmp_path: Path) -> None:
    run, _ = steady_run(tmp_path / "run")
    log = run / "raw" / "bench" / "recv-0.tsv"
    text = log.read_text()
    cut = text[: len(text) - 9]  # the last record loses its end and the final newline
    log.write_text(cut)
    line = cut.count("\n") + 1
    code, out, err = metrics("goodput", str(run))
    assert code == 1 and out == "" and "recv-0.tsv" in err and len(err.strip().splitlines()) == 1
    code, out, err = metrics("sanity", str(run))
    assert code == 0, err
    c = counters_of(out)
    assert c["damaged_sources"] == 1 and c["damage.raw/bench/recv-0.tsv.line"] == line and c["marked"] == 1


def test_damage_entries_from_readers() -> None:
    """The attrs["damage"] of read_pcap (a dict) and of merged TSV logs (a list of dicts)."""
    pcap = from_attrs({"message": "cut", "byte_offset": 400, "frame": 7}, "w.pcap")
    assert [(d.file, d.byte_offset, d.frame, d.line) for d in pcap] == [("w.pcap", 400, 7, None)]
    logs = from_attrs([{"file": "r/recv-0.tsv", "line": 12, "byte_offset": 300, "message": "r/recv-0.tsv:12: cut"},
                       {"file": "r/send-1.tsv", "line": 40, "message": "r/send-1.tsv:40: no trailer"}], "r")
    assert [(d.file, d.line) for d in logs] == [("r/recv-0.tsv", 12), ("r/send-1.tsv", 40)]
    assert logs[0].describe() == "r/recv-0.tsv:12: cut" and "line 40" in logs[1].where()
    assert from_attrs(None, "x") == []


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


# --- 4. an interrupted run uses the window it recorded; --check names the causes -------------

def interrupted_run(directory: Path) -> Path:
    """Planned window 20 s; the run was interrupted: the logs stop at 3.0 s (writes) and 3.1 s
    (reads), the capture's last payload frame is at 3.2 s, a FIN at 3.5 s."""
    t = BASE + np.arange(0, 3201, 100) * MS
    data = synth.frames(t, payload=1000, headers=40)
    fin = synth.frame_table(np.array([BASE + 3500 * MS]), np.array([0]), np.array([(1000 + 33 * 1000) % 2**32]),
                            np.array([0]), synth.SENDER, synth.RECEIVER, 40000, 5001, flags=0x11, headers=40)
    return make_run(directory, frames=synth.concat([data, fin]),
                    writes={0: [(BASE + k * 100 * MS, 1000) for k in range(31)]},
                    reads={0: [(BASE + k * 100 * MS + MS, 1000) for k in range(31)] + [(BASE + 3100 * MS, 1000)]},
                    window=(BASE, BASE + 20 * S), manifest_window=False, status="partial", reason="interrupted")


def test_the_window_of_an_interrupted_run_is_what_it_recorded(tmp_path: Path) -> None:
    from hostwire.run_directory import load_run

    run = load_run(interrupted_run(tmp_path / "run"))
    assert run.planned_window_ns() == (BASE, BASE + 20 * S)
    assert run.window_ns() == (BASE, BASE + 3100 * MS)  # the last log record
    assert run.window_ns(last_frame_ns=BASE + 3200 * MS) == (BASE, BASE + 3200 * MS)
    assert run.window_ns(last_frame_ns=BASE + 25 * S) == (BASE, BASE + 20 * S)  # never beyond the plan
    assert "partial (interrupted)" in str(run.window_warning()) and "of the planned 20 s" in str(run.window_warning())


def test_metrics_of_an_interrupted_run(tmp_path: Path, build_dir: Path) -> None:
    run = interrupted_run(tmp_path / "run")
    code, out, err = metrics("goodput", str(run))
    assert code == 0
    table = pd.read_csv(io.StringIO(out)).set_index("stream")
    assert table.loc["all", "seconds"] == pytest.approx(3.2)  # the last payload frame
    assert table.loc["all", "bytes"] == 33 * 1000 and table.loc["all", "app_bytes"] == 32 * 1000
    assert err.startswith("hostwire: warning: the run is partial (interrupted)")
    assert "3.2 s of the planned 20 s" in err
    code, out, err = metrics("sanity", str(run), "--check")
    c = counters_of(out)
    assert c["incomplete_run"] == 1 and c["window_cut"] == 1 and c["window_ns"] == 3200 * MS
    assert c["window_planned_ns"] == 20 * S and c["marked"] == 1
    assert code == 1 and "incomplete_run (status partial: interrupted)" in err and "window_cut" in err


def test_check_names_the_failed_check_not_a_loss_counter(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run", frames=None, writes={0: [(BASE + MS, 1000)]}, reads={0: [(BASE + 2 * MS, 1000)]},
                   losses={"wire_ps_drop": 0, "sched_clock_check_ok": False})
    code, out, err = metrics("sanity", str(run), "--check")
    assert code == 1 and counters_of(out)["marked"] == 1
    assert err.strip() == "hostwire: the run is marked: failed_checks 1 (check.sched_clock_check_ok)"


# --- 5. heavy loss marks the run -------------------------------------------------------------

CLEAN = {"losses": {"wire_ps_drop": 0}, "exit": {"hw-bench": 0}}


def with_retransmissions(k: int, n: int = 200) -> pd.DataFrame:
    """n new 1000-byte segments 2 ms apart and k retransmissions (of segments 10, 20, ...) 1 ms
    after a segment."""
    data = synth.frames(np.arange(n) * 2 * MS, payload=1000, headers=40)
    again = synth.frame_table(np.array([(10 * j + 10) * 2 * MS + MS for j in range(k)]), np.full(k, 1000),
                              np.array([1000 + 10 * j * 1000 for j in range(k)]), np.zeros(k), synth.SENDER,
                              synth.RECEIVER, 40000, 5001, headers=40)
    return synth.concat([data, again])


def test_a_retransmitted_share_above_the_threshold_marks_the_run() -> None:
    f = with_retransmissions(3)  # 3 of 203 data frames: 1.48 %
    c = df_sanity(f, label_streams(f), frame_window(f), 10**7, CLEAN)
    v = c.set_index("counter")["value"]
    assert v["data_frames"] == 203 and v["tcp_retransmissions"] == 3
    assert v["retransmitted_share"] == pytest.approx(3 / 203) and v["marked"] == 1
    assert c.attrs["marked_by"] == ["retransmitted_share 1.48 % above 1 % (3 of 203 data frames)"]
    f = with_retransmissions(2)  # 2 of 202: 0.99 %
    assert df_sanity(f, label_streams(f), frame_window(f), 10**7, CLEAN).set_index("counter")["value"]["marked"] == 0
    f = with_retransmissions(3)
    looser = Context(max_retransmit_share=0.02)
    assert df_sanity(f, label_streams(f), frame_window(f), 10**7, CLEAN,
                     context=looser).set_index("counter")["value"]["marked"] == 0


def acks(rows: list[tuple[int, int, int, int]]) -> pd.DataFrame:
    """Receiver frames (t_ns, ack, window, flags)."""
    parts = [synth.frame_table(np.array([t]), np.array([0]), np.array([9]), np.array([ack]), synth.RECEIVER,
                               synth.SENDER, 5001, 40000, flags=flags, window=window, headers=40)
             for t, ack, window, flags in rows]
    return synth.concat(parts)


def test_a_zero_window_with_data_outstanding_marks_the_run() -> None:
    data = synth.frames(np.arange(1, 5) * MS, payload=1000, seq0=1000, headers=40)  # bytes 1000..5000
    stalled = synth.concat([data, acks([(2_500_000, 3000, 100, 0x10), (4_500_000, 4000, 0, 0x10)])])
    c = df_sanity(stalled, label_streams(stalled), frame_window(stalled), 10**7, CLEAN)
    v = c.set_index("counter")["value"]
    assert v["zero_window_advertisements"] == 1 and v["marked"] == 1
    assert c.attrs["marked_by"][0].startswith("zero_window_advertisements 1")
    # everything acknowledged: a zero window stops nothing; an RST's window 0 is no advertisement
    idle = synth.concat([data, acks([(4_500_000, 5000, 0, 0x10), (4_600_000, 4000, 0, 0x14)])])
    v = df_sanity(idle, label_streams(idle), frame_window(idle), 10**7, CLEAN).set_index("counter")["value"]
    assert v["zero_window_advertisements"] == 0 and v["marked"] == 0


def test_shaper_drops_mark_the_run_and_overlimits_do_not() -> None:
    f = synth.frames(np.arange(0, 50) * 2 * MS, payload=1000, headers=40)
    lab = label_streams(f)
    counters = manifest_counters({"losses": {"qdisc_drops": 5, "qdisc_overlimits": 300, "wire_ps_drop": 0}})
    assert counters["shaper_drops"] == 5 and counters["shaper_overlimits"] == 300 and counters["capture_drops"] == 0
    table = df_sanity(f, lab, frame_window(f), 10**7, {"losses": {"qdisc_drops": 5, "qdisc_overlimits": 300}})
    assert table.set_index("counter")["value"]["marked"] == 1
    assert table.attrs["marked_by"] == ["shaper_drops 5 (qdisc_drops)"]
    table = df_sanity(f, lab, frame_window(f), 10**7, {"losses": {"qdisc_drops": 0, "qdisc_overlimits": 300}})
    assert table.set_index("counter")["value"]["marked"] == 0
    beside = {"losses": {"qdisc_drops": 0}, "link": {"qdisc_overlimits": 40}}  # where the runner keeps them
    v = df_sanity(f, lab, frame_window(f), 10**7, beside).set_index("counter")["value"]
    assert v["shaper_overlimits"] == 40 and v["marked"] == 0


# --- 6. a run without senders ----------------------------------------------------------------

def test_sanity_of_a_run_without_senders_gives_every_counter(tmp_path: Path, build_dir: Path) -> None:
    sync = synth.concat([
        synth.frame_table(np.array([BASE - 50 * MS]), np.array([16]), np.zeros(1), np.zeros(1), synth.SENDER,
                          synth.RECEIVER, 40999, 5002, headers=28).assign(proto=np.uint8(17)),
        synth.frame_table(np.array([BASE + 1050 * MS]), np.array([32]), np.zeros(1), np.zeros(1), synth.RECEIVER,
                          synth.SENDER, 5002, 40999, headers=28).assign(proto=np.uint8(17)),
    ])
    run = make_run(tmp_path / "run", frames=sync, writes={}, reads={}, window=(BASE, BASE + S), background=1)
    code, out, err = metrics("sanity", str(run), "--check")
    assert code == 0, err
    c = counters_of(out)
    for name in ("frames", "frame_gaps", "impossible_intervals", "data_frames", "tcp_retransmissions",
                 "zero_window_advertisements", "max_bytes_in_flight", "goodput_wire_bit_s"):
        assert c[name] == 0, name
    assert c["min_advertised_window"] == -1 and c["marked"] == 0 and c["window_ns"] == S


# --- a real run ------------------------------------------------------------------------------

@pytest.mark.privileged("netns")
@pytest.mark.slow
def test_a_real_run_goodput_within_the_link_and_its_cut_capture(tmp_path: Path, build_dir: Path) -> None:
    from hostwire.record.runner import RunPoint, record_run

    point = RunPoint(senders=4, background=1, warmup_s=0.5, duration_s=2.0, quiet_s=0.3, kernel_trace=False)
    record = record_run(tmp_path, "r1", point)
    assert record.status == "complete", record.reason
    run = record.directory
    c = counters_of(metrics("sanity", str(run))[1])
    wire, app, most = c["goodput_wire_bit_s"], c["goodput_app_bit_s"], c["goodput_max_bit_s"]
    assert 1e7 * 1400 / 1514 < most <= 1e7 * 1448 / 1514 + 1
    assert wire <= most + 2 * 1448 * 8 / 2.0
    assert wire > 0.8 * most and abs(app - wire) < 0.1 * wire  # four senders fill the link
    pcap = run / "raw" / "wire.pcap"
    data = pcap.read_bytes()
    # 7 bytes into the header of the record that starts nearest half the file: a cut that lands
    # exactly between two records leaves a well-formed capture that only the run's digest can tell
    cut = _record_start_near(data, len(data) // 2) + 7
    pcap.write_bytes(data[:cut])
    code, out, err = metrics("goodput", str(run))
    assert code == 1 and out == "" and "wire.pcap" in err and "byte offset" in err
    c = counters_of(metrics("sanity", str(run))[1])
    assert c["damaged_sources"] == 1 and c["marked"] == 1
    assert c["damage.raw/wire.pcap.byte_offset"] == cut - 7  # where the cut record starts


def _record_start_near(pcap: bytes, offset: int) -> int:
    """The byte offset of the first record at or after offset in a classic little-endian pcap."""
    import struct

    at = 24
    while at < offset:
        (captured,) = struct.unpack_from("<I", pcap, at + 8)
        at += 16 + captured
    return at


def test_loss_counters_take_the_category_their_collector_declared() -> None:
    """A counter's category comes from the manifest's loss_categories (written by the runner from
    each collector's losses()), not from its name: a name the metric has never seen is counted
    where its collector put it, and marks the run under that category."""
    from hostwire.metrics.sanity import manifest_counters, marking_reasons

    manifest = {"losses": {"ring_slots_lost": 7, "wire_ps_drop": 0},
                "loss_categories": {"ring_slots_lost": "trace_overruns", "wire_ps_drop": "capture_drops"}}
    counters = manifest_counters(manifest)
    categories = counters.pop("_categories")
    assert counters["trace_overruns"] == 7 and counters["capture_drops"] == 0
    assert marking_reasons(counters, categories=categories) == ["trace_overruns 7 (ring_slots_lost)"]
    # Without the declaration (an older manifest) the name decides: this one matches no category.
    old = manifest_counters({"losses": {"ring_slots_lost": 7}})
    assert old["trace_overruns"] == 0 and old["loss.ring_slots_lost"] == 7
