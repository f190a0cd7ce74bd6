"""The chunked engine on a run directory (hostwire.metrics.chunked.runs) against the in-memory one:
the recorded fixture run, and a run built from it with a synthetic capture whose stamps are on
CLOCK_REALTIME (wirecap.json's clock pairs map them onto the run's clock, with a slope), frames
before and after the run's logging window, a UDP flow and a TCP flow that are not the run's, all
read in chunks of a few hundred rows; the run's stream made lossy (retransmissions across chunk
bounds and the window's start) for goodput and fairness; an incomplete run whose window ends at
its last payload frame; a capture cut short or changed after the run."""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hostwire.errors import InputError, UsageError
from hostwire.manifest import seal
from hostwire.metrics import synth, table
from hostwire.metrics.chunked import engine
from hostwire.metrics.options import default_options

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the helpers beside this file (importlib mode)
from test_metrics_chunked import FIXTURE_PCAP, MS, assert_same, write_pcap  # noqa: E402

FIXTURE_RUN = FIXTURE_PCAP.parents[1]
W0, W1 = 3860757907822, 3861157907822  # the fixture's logging window (manifest window_ns)
R0, M0 = 1795436237297024633, 3860118602301  # its first clock pair
SPAN = 2_107_264_826
SLOPE = (SPAN - 21) / SPAN  # the run's clock runs a little slower than the capture's
RUN_STREAM = "198.18.0.1:43546>198.18.0.2:46653"  # the stream the fixture's logs name


def monotonic_frames(rng: np.random.Generator) -> pd.DataFrame:
    """On the run's clock, from 150 ms before the window to 150 ms after it: the run's stream
    (Poisson, ACKs back), another TCP flow with a 120 ms silence, back-to-back bursts, and a UDP
    flow of clock exchanges; a few stamps recorded late."""
    t0, length = W0 - 150 * MS, (W1 - W0) + 300 * MS
    run = synth.frames(t0 + synth.poisson(rng, 3000.0, length), payload=1448, sport=43546, dport=46653)
    ack_t = t0 + synth.poisson(rng, 800.0, length)
    zeros = np.zeros(len(ack_t), np.int64)
    acks = synth.frame_table(ack_t, zeros, zeros, zeros, synth.RECEIVER, synth.SENDER, 46653, 43546, flags=0x10)
    steady = synth.constant_rate(2 * MS, length)
    steady = np.concatenate([steady[steady < 300 * MS], steady[steady >= 420 * MS]])
    other = synth.frames(t0 + steady, payload=500, sport=40001, dport=5001)
    starts = np.sort(rng.integers(0, length, 60))
    bursts = synth.frames(t0 + np.sort((starts[:, None] + np.arange(5) * 1_211_200).ravel()), sport=40002)
    udp_t = t0 + synth.constant_rate(5 * MS, length)
    udp = synth.frames(udp_t, payload=32, sport=45000, dport=46654).assign(proto=np.uint8(17))
    frames = synth.concat([run, acks, other, bursts, udp])
    t = frames["t_ns"].to_numpy().copy()
    late = rng.choice(np.flatnonzero(frames["sport"].to_numpy() == 40002), 20, replace=False)
    t[late] -= rng.integers(1, 2 * MS, 20)
    return frames.assign(t_ns=t)


def to_realtime(t_mono: np.ndarray) -> np.ndarray:
    return R0 + np.rint((t_mono - M0) / SLOPE).astype(np.int64)


def mapped(t_real: np.ndarray) -> np.ndarray:
    """hostwire.read.pcap.map_clock with the pairs make_run writes."""
    return M0 + np.rint((t_real - R0).astype(np.float64) * SLOPE).astype(np.int64)


def record(run: Path, relative: str, manifest: dict) -> None:
    data = (run / relative).read_bytes()
    manifest["raw_digests"][relative] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}


def make_run(base: Path, frames: pd.DataFrame, status: str = "complete", logs: bool = True) -> Path:
    """The fixture run with `frames` (run clock) as its capture, stamped on CLOCK_REALTIME, its
    digests recorded, a link of 100 Mbit/s and the manifest sealed again."""
    run = base / "run"
    shutil.copytree(FIXTURE_RUN, run)
    write_pcap(frames.assign(t_ns=to_realtime(frames["t_ns"].to_numpy())), run / "raw" / "wire.pcap")
    wirecap = json.loads((run / "raw" / "wirecap.json").read_text())
    wirecap["clock_pairs"] = [{"realtime_ns": R0, "monotonic_ns": M0},
                              {"realtime_ns": R0 + SPAN, "monotonic_ns": M0 + SPAN - 21}]
    (run / "raw" / "wirecap.json").write_text(json.dumps(wirecap))
    manifest = json.loads((run / "manifest.json").read_text())
    for relative in ("raw/wire.pcap", "raw/wirecap.json"):
        record(run, relative, manifest)
    manifest["point"]["link_rate"] = "100mbit"  # not the guess without a manifest: contract takes the run's
    if status != "complete":
        manifest["status"], manifest["reason"] = status, "interrupted"
    if not logs:  # the benchmark's process logs lost: the capture alone says where the run ended
        for name in ("send-0.tsv", "recv-0.tsv", "bg-0.tsv"):
            (run / "raw" / "bench" / name).unlink()
            del manifest["raw_digests"][f"raw/bench/{name}"]
    (run / "manifest.json").write_text(json.dumps(seal(manifest)))
    return run


@pytest.fixture(scope="module")
def frames() -> pd.DataFrame:
    return monotonic_frames(np.random.default_rng(11))


@pytest.fixture(scope="module")
def run(frames: pd.DataFrame, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_run(tmp_path_factory.mktemp("chunked-run"), frames)


def both(kind: str, path: Path, **options: object) -> tuple[pd.DataFrame, pd.DataFrame]:
    return table(kind, path, engine="memory", **options), table(kind, path, engine="chunked", **options)


def assert_same_run(memory: pd.DataFrame, chunked: pd.DataFrame) -> None:
    assert_same(memory, chunked)
    assert memory.attrs == chunked.attrs  # warnings, damaged sources, marked


RUN_CASES = [("idc", {}), ("idc", {"bytes": True}), ("hurst", {}), ("intervals", {}), ("intervals", {"hist": True}),
             ("intervals", {"stream": ["43546"], "per_decade": 4, "hist": True}), ("bursts", {}),
             ("bursts", {"theta": 3 * MS}), ("contract", {}), ("contract", {"link_rate": "1gbit", "points": 7}),
             ("idc", {"stream": ["43546"], "from_s": 0.05, "to_s": 0.3}), ("intervals", {"from_s": 0.1}),
             ("goodput", {}), ("fairness", {}), ("goodput", {"stream": ["43546"], "from_s": 0.05, "to_s": 0.3}),
             ("fairness", {"from_s": 0.1}), ("goodput", {"to_s": 0.2})]


@pytest.mark.parametrize("kind, options", RUN_CASES)
def test_run_equals_memory_across_chunk_bounds(run: Path, kind: str, options: dict,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOSTWIRE_CHUNK_ROWS", "257")
    memory, chunked = both(kind, run, **options)
    assert len(memory) > 0
    assert_same_run(memory, chunked)


@pytest.mark.parametrize("kind, options", [("idc", {}), ("hurst", {}), ("intervals", {}), ("intervals", {"hist": True}),
                                           ("bursts", {}), ("contract", {}), ("idc", {"from_s": 0.1, "to_s": 0.3}),
                                           ("goodput", {}), ("fairness", {}),
                                           ("goodput", {"from_s": 0.1, "to_s": 0.3})])
def test_recorded_fixture_run_equals_memory(kind: str, options: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOSTWIRE_CHUNK_ROWS", "300")
    assert_same_run(*both(kind, FIXTURE_RUN, **options))


def test_the_run_window_and_clock(run: Path, frames: pd.DataFrame, monkeypatch: pytest.MonkeyPatch) -> None:
    """Frame counts by hand: the data frames of each TCP stream whose mapped stamp lies in the
    logging window, no UDP flow; the writes' rows after the frames' as in memory."""
    monkeypatch.setenv("HOSTWIRE_CHUNK_ROWS", "101")
    out = table("intervals", run, engine="chunked")
    t = mapped(to_realtime(frames["t_ns"].to_numpy()))
    inside = (t >= W0) & (t <= W1) & (frames["payload_len"].to_numpy() > 0) & (frames["proto"].to_numpy() == 6)
    sport = frames["sport"].to_numpy()
    rows = out[out["kind"] == "frame"].set_index("stream")["count"]
    expect = {f"198.18.0.1:{p}>198.18.0.2:{d}": int((inside & (sport == p)).sum()) - 1
              for p, d in ((43546, 46653), (40001, 5001), (40002, 5001))}
    expect["all"] = int(inside.sum()) - 1
    assert rows.to_dict() == expect
    assert list(out[out["kind"] == "write"]["stream"]) == [RUN_STREAM]
    assert not out.attrs["marked"] and out.attrs["warnings"] == []


def test_stream_must_be_the_runs_as_in_memory(run: Path) -> None:
    """--stream 40001 names a stream of the capture but not of the run's logs: the same error."""
    for kind in ("idc", "goodput", "fairness"):
        errors = []
        for engine_name in ("memory", "chunked"):
            with pytest.raises(InputError) as err:
                table(kind, run, engine=engine_name, stream=["40001"])
            errors.append(str(err.value))
        assert errors[0] == errors[1] and "--stream 40001" in errors[0]


def test_incomplete_run_window_ends_at_its_last_payload_frame(frames: pd.DataFrame, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOSTWIRE_CHUNK_ROWS", "257")
    cut = frames[frames["t_ns"].to_numpy() < W0 + 250 * MS]
    run = make_run(tmp_path, cut, status="partial", logs=False)
    for kind, options in (("idc", {}), ("intervals", {}), ("bursts", {}), ("contract", {}), ("goodput", {})):
        memory, chunked = both(kind, run, **options)
        assert_same_run(memory, chunked)
        assert chunked.attrs["marked"] and "the window is what was recorded" in chunked.attrs["warnings"][0]


def test_damaged_run_capture_as_in_memory(run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A capture cut inside the window (its window ends at the last intact frame) and one with a
    byte changed (only its digest tells): the same error without --partial, the same marked
    table with it."""
    monkeypatch.setenv("HOSTWIRE_CHUNK_ROWS", "257")
    pcap = run / "raw" / "wire.pcap"
    data = pcap.read_bytes()
    changed = bytearray(data)
    changed[-1] ^= 1  # the last frame's payload: still a valid capture
    for damage in (data[:len(data) // 2 + 7], bytes(changed)):
        damaged = tmp_path / f"run-{len(damage)}"
        shutil.copytree(run, damaged)
        (damaged / "raw" / "wire.pcap").write_bytes(damage)
        errors = []
        for engine_name in ("memory", "chunked"):
            with pytest.raises(InputError) as err:
                table("idc", damaged, engine=engine_name)
            errors.append(str(err.value))
        assert errors[0] == errors[1] and "--partial" in errors[0]
        for kind in ("idc", "intervals", "goodput", "fairness"):
            memory, chunked = both(kind, damaged, partial=True)
            assert_same_run(memory, chunked)
            assert chunked.attrs["marked"] and chunked.attrs["damaged_sources"]


def test_engine_on_a_run(run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """auto measures the run's capture; what a run does not serve stays in memory (auto) or is
    refused in one line (--engine chunked)."""
    args = default_options("idc")
    args.input = run
    assert not engine.wanted("idc", args)
    monkeypatch.setattr(engine, "AUTO_BYTES", (run / "raw" / "wire.pcap").stat().st_size)
    assert engine.wanted("idc", args)
    for kind in ("goodput", "fairness"):
        other = default_options(kind)
        other.input, other.engine = run, "auto"
        assert engine.wanted(kind, other)
    other = default_options("sanity")
    other.input, other.engine = run, "auto"
    assert not engine.wanted("sanity", other)
    with pytest.raises(UsageError, match="--engine chunked: sanity on a run directory is computed in memory"):
        table("sanity", run, engine="chunked")
    with pytest.raises(UsageError, match="--mbs"):
        table("contract", run, engine="chunked", mbs=4)


def retransmitted(frames: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    """`frames` with the run's stream made lossy: 40 of its segments sent again 0.2 to 3 ms later
    (a few hundred rows apart, so across chunk bounds; some just before the window's start and
    again inside it), and 15 lost before the capture point, seen only when sent again."""
    sport = frames["sport"].to_numpy()
    t = frames["t_ns"].to_numpy()
    ours = np.flatnonzero((sport == 43546) & (frames["payload_len"].to_numpy() > 0))
    edge = ours[np.abs(t[ours] - W0) < 2 * MS][:6]  # sent before the window, again inside it
    picked = rng.choice(ours, 55, replace=False)
    again = np.concatenate([edge, picked[:34]])
    lost = picked[34:]
    resent = frames.iloc[np.concatenate([again, lost])]
    later = len(again) - len(edge) + len(lost)
    delay = np.concatenate([np.full(len(edge), 2 * MS), rng.integers(200_000, 3 * MS, later)])
    resent = resent.assign(t_ns=resent["t_ns"].to_numpy() + delay)
    kept = np.ones(len(frames), dtype=bool)
    kept[lost] = False
    out = pd.concat([frames[kept], resent], ignore_index=True)
    return out.sort_values("t_ns", kind="stable").reset_index(drop=True)


@pytest.fixture(scope="module")
def lossy_run(frames: pd.DataFrame, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pd.DataFrame]:
    lossy = retransmitted(frames, np.random.default_rng(5))
    return make_run(tmp_path_factory.mktemp("chunked-lossy-run"), lossy), lossy


@pytest.mark.parametrize("rows", ["53", "257", "4096"])
def test_goodput_of_a_lossy_run_by_hand(lossy_run: tuple[Path, pd.DataFrame], rows: str,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The run stream's wire figure by hand: 1448 bytes for each segment whose first crossing
    (mapped onto the run's clock) lies in the logging window; a retransmission counts 0, a lost
    segment counts when sent again; the other TCP flows are not the run's. Both engines equal,
    goodput and fairness, --from/--to too."""
    monkeypatch.setenv("HOSTWIRE_CHUNK_ROWS", rows)
    run, lossy = lossy_run
    ours = lossy[(lossy["sport"].to_numpy() == 43546) & (lossy["payload_len"].to_numpy() > 0)]
    first = pd.Series(mapped(to_realtime(ours["t_ns"].to_numpy()))).groupby(ours["seq"].to_numpy()).min()
    expect = 1448 * int(((first >= W0) & (first <= W1)).sum())
    assert len(ours) > first.size  # there are retransmissions
    memory, chunked = both("goodput", run)
    assert_same_run(memory, chunked)
    assert list(chunked["stream"]) == [RUN_STREAM, "all"]
    assert list(chunked["bytes"]) == [expect, expect] and list(chunked["basis"]) == ["wire", "wire"]
    assert chunked["app_bytes"].iloc[0] > 0
    for options in ({"from_s": 0.05, "to_s": 0.25}, {"stream": ["46653"], "from_s": 0.3}):
        assert_same_run(*both("goodput", run, **options))
        assert_same_run(*both("fairness", run, **options))
    assert_same_run(*both("fairness", run))


@pytest.mark.parametrize("case", ["udp only", "tcp before the window"])
def test_goodput_of_a_run_without_tcp_in_its_window(frames: pd.DataFrame, case: str, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A capture of the clock exchanges only, or one whose TCP frames all precede the window:
    the run's stream is on the wire at 0 bytes (no error: the logs name the streams), its
    receivers' reads stand beside it, as in memory."""
    monkeypatch.setenv("HOSTWIRE_CHUNK_ROWS", "101")
    keep = frames["proto"].to_numpy() == 17
    if case == "tcp before the window":
        keep |= frames["t_ns"].to_numpy() < W0 - 10 * MS
    run = make_run(tmp_path, frames[keep])
    for kind in ("goodput", "fairness"):
        memory, chunked = both(kind, run)
        assert_same_run(memory, chunked)
    wire = chunked.set_index("stream")["wire_bytes"]
    assert list(wire.index) == [RUN_STREAM, "all"] and wire.sum() == 0 and chunked["bytes"].iloc[0] > 0
