"""The capture's part of the gap inputs made in passes over chunks (hostwire.timeline.capture_pass)
against the same tables made from the whole capture in memory (gap_sources._capture_tables and
build.data_frames): equal row for row, in chunks of one row up to the whole capture, on the
recorded fixture run and on a synthetic TCP exchange built to hold every case the sequence
rules tell apart (a handshake with window scaling, sequence numbers that wrap, a receiver that
closes its window and acknowledges late, losses a timer repairs, acknowledgements that release
full windows, a stream whose handshake is missing, a UDP flow on a TCP stream's ports, stamps out
of order)."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hostwire.metrics import synth
from hostwire.run_directory import Run, load_run
from hostwire.timeline import gap_sources, stolen
from hostwire.timeline.build import data_frames
from hostwire.timeline.capture_pass import capture_side, open_capture
from hostwire.timeline.program_streams import stream_names, stream_names_in_chunks

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the helpers beside this file (importlib mode)
from test_metrics_chunked_run import FIXTURE_RUN, W0, W1, make_run  # noqa: E402

US, MS = 1_000, 1_000_000
SENDER, RECEIVER = synth.SENDER, synth.RECEIVER


def exchange(rng: np.random.Generator, t0: int, sport: int, segments: int) -> pd.DataFrame:
    """One TCP connection seen at the sender: a handshake offering window scale 7 both ways, ISN
    near 2**32 (the numbers wrap), flights of a window of segments 12 us apart, each acknowledged
    every second segment one round trip (2 ms) later; the next flight leaves 30 us after the
    acknowledgement that opens it. One flight in eight loses a segment: duplicate
    acknowledgements, then a 30 ms silence the retransmission timer ends. One acknowledgement in
    twelve comes 8 round trips late; one in fifteen advertises a window below one segment."""
    rows: list[tuple[int, int, int, int, int, int, int, int, int]] = []  # t, from sender, seq, ack, flags, window, payload, wscale

    def frame(t: int, out: bool, seq: int, ack: int, flags: int, window: int, payload: int, wscale: int = -1) -> None:
        rows.append((t, int(out), seq % 2**32, ack % 2**32, flags, window, payload, wscale))

    mss, rtt = 1448, 2 * MS
    isn, peer = 2**32 - 50_000, 7_000
    frame(t0, True, isn, 0, 0x02, 64_240, 0, 7)
    frame(t0 + rtt, False, peer, isn + 1, 0x12, 65_160, 0, 7)
    t, sent, flight = t0 + rtt + 20 * US, 0, 4
    frame(t, True, isn + 1, peer + 1, 0x10, 502, 0)
    while sent < segments * mss:
        lost = rng.random() < 1 / 8
        lose = int(rng.integers(0, flight)) if lost else -1
        acked = sent
        for k in range(flight):
            start = sent + k * mss
            stamp = t + 30 * US + k * 12 * US
            frame(stamp, True, isn + 1 + start, peer + 1, 0x18, 502, mss)
            if k % 2 == 1 or k == flight - 1:
                late = 8 * rtt if rng.random() < 1 / 12 else 0
                edge = start + mss if lose < 0 or start < lose * mss else lose * mss
                window = 8 if rng.random() < 1 / 15 else 512
                frame(stamp + rtt + late, False, peer + 1, isn + 1 + max(acked, edge), 0x10, window, 0)
                acked = max(acked, edge)
        sent += flight * mss
        t = max(r[0] for r in rows)
        if lost:  # the timer sends the lost segment again after a silence, and its acknowledgement opens the next flight
            t += 30 * MS
            frame(t, True, isn + 1 + lose * mss, peer + 1, 0x18, 502, mss)
            t += rtt
            frame(t, False, peer + 1, isn + 1 + sent, 0x10, 512, 0)
            flight = max(2, flight // 2)
        else:
            flight = min(flight + 1, 24)
    table = pd.DataFrame(rows, columns=["t_ns", "out", "seq", "ack", "flags", "window", "payload_len", "wscale"])
    out = table["out"].to_numpy() == 1
    parts = [synth.frame_table(part["t_ns"].to_numpy(), part["payload_len"].to_numpy(), part["seq"].to_numpy(),
                               part["ack"].to_numpy(), *ends)
             .assign(flags=part["flags"].to_numpy().astype(np.uint8), window=part["window"].to_numpy().astype(np.uint16),
                     wscale=part["wscale"].to_numpy().astype(np.int8))
             for part, ends in ((table[out], (SENDER, RECEIVER, sport, 5001)), (table[~out], (RECEIVER, SENDER, 5001, sport)))]
    return synth.concat(parts)


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    rng = np.random.default_rng(3)
    start = W0 - 20 * MS
    streams = [exchange(rng, start + k * 3 * MS, 41000 + k, 400) for k in range(3)]
    # a stream whose handshake the capture missed (its window unknown), acknowledged without numbers
    bare = synth.frames(start + synth.poisson(rng, 2000.0, W1 - W0), payload=900, sport=43546, dport=46653)
    acks_t = start + synth.poisson(rng, 500.0, W1 - W0)
    zeros = np.zeros(len(acks_t), np.int64)
    acks = synth.frame_table(acks_t, zeros, zeros, zeros, RECEIVER, SENDER, 46653, 43546, flags=0x10)
    # a UDP flow on the same ends and ports as that stream: named apart from it
    udp = synth.frames(start + synth.constant_rate(3 * MS, W1 - W0), payload=40, sport=43546,
                       dport=46653).assign(proto=np.uint8(17))
    frames = synth.concat([*streams, bare, acks, udp])
    t = frames["t_ns"].to_numpy().copy()
    late = rng.choice(len(t), 30, replace=False)
    t[late] -= rng.integers(1, 300 * US, 30)  # recorded late: earlier stamps after later ones
    return frames.assign(t_ns=t)


@pytest.fixture(scope="module")
def synthetic_run(capture: pd.DataFrame, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_run(tmp_path_factory.mktemp("capture-pass"), capture)


def whole_tables(run_dir: Path) -> dict[str, pd.DataFrame | object]:
    run = load_run(run_dir)
    data = data_frames(run)
    sender_side = set(data["src"].astype(str))
    link, window, late, awaiting, timeouts = gap_sources._capture_tables(run, sender_side, False)
    stamps = np.sort(run.df_frames()["t_ns"].to_numpy())
    return {"data": data[["t_ns", "stream", "wire_len", "payload_len", "seq_end"]], "sender_side": sender_side,
            "protos": {str(s): "tcp" if int(p) == 6 else "udp"
                       for s, p in data.groupby("stream", sort=False)["proto"].first().items()},
            "link": link, "window": window, "late_acks": late, "awaiting": awaiting, "timeouts": timeouts,
            "silences": stolen.silences(stamps), "first_ns": int(stamps[0]), "last_ns": int(stamps[-1])}


def by_name(table: pd.DataFrame) -> pd.DataFrame:
    return table.assign(stream=table["stream"].astype(str)).reset_index(drop=True)


def assert_same_side(run_dir: Path, whole: dict[str, pd.DataFrame | object]) -> None:
    with open_capture(load_run(run_dir)) as chunks:
        side = capture_side(chunks)
    pd.testing.assert_frame_equal(by_name(side.data), by_name(whole["data"]), check_dtype=False)  # type: ignore[arg-type]
    assert (side.sender_side, side.protos) == (whole["sender_side"], whole["protos"])
    for name in ("window", "late_acks", "awaiting", "timeouts"):
        pd.testing.assert_frame_equal(by_name(getattr(side, name)), by_name(whole[name]), check_dtype=False)  # type: ignore[arg-type]
    # in time order (the explanation slices the link by time); frames with equal stamps keep the
    # capture's order, not TCP before UDP as label_flows puts them
    assert bool((np.diff(side.link["t_ns"].to_numpy()) >= 0).all())
    link = [by_name(t).sort_values(["t_ns", "stream", "wire_len"], kind="stable").reset_index(drop=True)
            for t in (side.link, whole["link"])]
    pd.testing.assert_frame_equal(*link, check_dtype=False)
    np.testing.assert_array_equal(side.silences[0], whole["silences"][0])  # type: ignore[index]
    np.testing.assert_array_equal(side.silences[1], whole["silences"][1])  # type: ignore[index]
    assert (side.first_ns, side.last_ns) == (whole["first_ns"], whole["last_ns"])


@pytest.fixture(scope="module")
def synthetic_whole(synthetic_run: Path) -> dict[str, pd.DataFrame | object]:
    return whole_tables(synthetic_run)


def test_the_synthetic_exchange_holds_every_case(synthetic_whole: dict[str, pd.DataFrame | object]) -> None:
    """Each table the passes carry state for is non-trivial here, so the comparisons below test it."""
    w = synthetic_whole
    window = w["window"]["window_bytes"].to_numpy()  # type: ignore[index]
    assert np.isnan(window).any() and (window < 1448).any() and (window > 60_000).any()
    assert len(w["late_acks"]) > 10 and len(w["awaiting"]) > 50 and len(w["timeouts"]) >= 5  # type: ignore[arg-type]
    assert w["protos"]["198.18.0.1:43546>198.18.0.2:46653 udp"] == "udp"  # type: ignore[index]
    tcp = w["data"][w["data"]["stream"].astype(str).str.startswith("198.18.0.1:41000")]  # type: ignore[index]
    assert tcp["seq_end"].max() > 50_000 and tcp["seq_end"].min() == 1448  # from the ISN + 1, through the wrap


@pytest.mark.parametrize("rows", ["1", "7", "61", "4096", "1000000"])
def test_synthetic_capture_in_chunks_is_the_whole(synthetic_run: Path, synthetic_whole: dict[str, pd.DataFrame | object],
                                                  rows: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if rows == "1" and len(synthetic_whole["link"]) > 20_000:  # type: ignore[arg-type]
        pytest.fail("the capture grew: one-row chunks would be slow")
    monkeypatch.setenv("HOSTWIRE_CHUNK_ROWS", rows)
    assert_same_side(synthetic_run, synthetic_whole)


@pytest.mark.parametrize("rows", ["1", "13", "1000000"])
def test_recorded_fixture_in_chunks_is_the_whole(rows: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOSTWIRE_CHUNK_ROWS", rows)
    assert_same_side(FIXTURE_RUN, whole_tables(FIXTURE_RUN))


def test_gaps_of_the_chunked_capture_are_the_gaps_in_memory(synthetic_run: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """hostwire gaps --engine slabs (the capture in chunks of 61 rows) prints what --engine memory
    prints, the TCP causes of the synthetic exchange among them; and it never decodes the capture
    whole."""
    run_dir = tmp_path / "run"
    shutil.copytree(synthetic_run, run_dir)
    out = {}
    for engine in ("memory", "slabs"):
        proc = subprocess.run([sys.executable, "-m", "hostwire", "gaps", str(run_dir), "--engine", engine, "--min-gap", "100us"],
                              capture_output=True, text=True, timeout=300, env={**os.environ, "HOSTWIRE_CHUNK_ROWS": "61"})
        assert proc.returncode == 0, proc.stderr
        out[engine] = proc.stdout
    assert out["slabs"] == out["memory"]
    table = pd.read_csv(io.StringIO(out["slabs"]))
    assert len(table) > 100
    # (awaiting-ack needs bytes queued: these streams have no writes, so no backlog)
    for cause in ("receiver_window_ns", "retransmit_timeout_ns"):
        assert table[cause].sum() > 0, cause
    monkeypatch.setenv("HOSTWIRE_CHUNK_ROWS", "61")

    def whole_capture(*args: object, **kwargs: object) -> pd.DataFrame:
        raise AssertionError("the slabbed gap inputs decoded the whole capture")

    monkeypatch.setattr(Run, "df_frames", whole_capture)
    inputs, _ = gap_sources.slabbed_gap_inputs(load_run(run_dir))
    assert len(inputs.data) > 1000 and inputs.window is not None and len(inputs.window) > 1000


@pytest.mark.parametrize("rows", ["7", "1000000"])
def test_a_recorded_programs_streams_named_in_chunks_as_whole(synthetic_run: Path, rows: str,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The streams of a long capture of `hostwire record` (program_streams.stream_names) named in
    chunks: TCP in name order, then each UDP direction that carried payload, in the capture's order."""
    monkeypatch.setenv("HOSTWIRE_CHUNK_ROWS", rows)
    run = load_run(synthetic_run)
    with open_capture(run) as chunks:
        names = stream_names_in_chunks(chunks)
    pd.testing.assert_frame_equal(names, stream_names(run.df_frames()))
    assert list(names["proto"]).count(6) == 4 and list(names["proto"]).count(17) == 1


def test_a_long_capture_beside_a_trace_read_whole_is_read_in_chunks(synthetic_run: Path, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A capture long enough for the chunked reading (capture_pass.long_capture) beside a kernel
    trace read whole: the capture is never decoded whole, and the gaps are those of the whole
    capture, the host's freezes (the trace's and the capture's silences together) among them."""
    from hostwire.timeline import capture_pass, gaps

    run_dir = tmp_path / "run"
    shutil.copytree(synthetic_run, run_dir)
    whole = gaps.explain(gap_sources.gap_inputs(load_run(run_dir)), min_gap_ns=100 * US)
    monkeypatch.setattr(capture_pass, "long_capture", lambda run: True)

    def whole_capture(*args: object, **kwargs: object) -> pd.DataFrame:
        raise AssertionError("the gap inputs decoded the whole capture")

    monkeypatch.setattr(Run, "df_frames", whole_capture)
    run = load_run(run_dir)
    inputs = gap_sources.gap_inputs(run)
    assert inputs.states is not None and len(inputs.states) > 0  # the trace read whole
    chunked = gaps.explain(inputs, min_gap_ns=100 * US)
    assert len(whole[0]) > 100
    pd.testing.assert_frame_equal(chunked[0], whole[0])
    pd.testing.assert_frame_equal(chunked[1], whole[1])
