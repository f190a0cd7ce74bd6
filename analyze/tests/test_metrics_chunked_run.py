"""The chunked engine on a run directory (hostwire.metrics.chunked.runs) against the in-memory one:
the recorded fixture run, and a run built from it with a synthetic capture whose stamps are on
CLOCK_REALTIME (wirecap.json's clock pairs map them onto the run's clock, with a slope), frames
before and after the run's logging window, a UDP flow and a TCP flow that are not the run's, all
read in chunks of a few hundred rows; the run's stream made lossy (retransmissions across chunk
bounds and the window's start) for goodput and fairness; an incomplete run whose window ends at
its last payload frame; a capture cut short or changed after the run; sanity with the run's clock
exchange on the wire and loss counters in its manifest."""

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
from hostwire.linkrate import given_rate
from hostwire.metrics.options import metrics_request
from hostwire.run_directory import load_run

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the helpers beside this file (importlib mode)
from chunked_helpers import FIXTURE_PCAP, MS, assert_same, by_engine, chunked_table, write_pcap  # noqa: E402

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


def make_run(base: Path, frames: pd.DataFrame, status: str = "complete", logs: bool = True,
             losses: dict | None = None) -> Path:
    """The fixture run with `frames` (run clock) as its capture, stamped on CLOCK_REALTIME, its
    digests recorded, a link of 100 Mbit/s, `losses` over the manifest's and the manifest sealed
    again."""
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
    manifest["losses"].update(losses or {})
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
    """Both engines' tables, the chunked one from the chunked path itself (never its fallback)."""
    return table(kind, path, engine="memory", **options), chunked_table(kind, path, **options)


def assert_same_run(memory: pd.DataFrame, chunked: pd.DataFrame) -> None:
    assert_same(memory, chunked)
    assert memory.attrs == chunked.attrs  # warnings, damaged sources, marked


RUN_CASES = [("idc", {}), ("idc", {"bytes": True}), ("hurst", {}), ("intervals", {}), ("intervals", {"hist": True}),
             ("intervals", {"stream": ["43546"], "per_decade": 4, "hist": True}), ("bursts", {}),
             ("bursts", {"theta": 3 * MS}), ("contract", {}), ("contract", {"link_rate": given_rate("1gbit"), "points": 7}),
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
    out = chunked_table("intervals", run)
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
                by_engine(engine_name, kind, run, stream=["40001"])
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
                by_engine(engine_name, "idc", damaged)
            errors.append(str(err.value))
        assert errors[0] == errors[1] and "--partial" in errors[0]
        for kind in ("idc", "intervals", "goodput", "fairness"):
            memory, chunked = both(kind, damaged, partial=True)
            assert_same_run(memory, chunked)
            assert chunked.attrs["marked"] and chunked.attrs["damaged_sources"]


def test_engine_on_a_run(run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """auto measures the run's capture, sanity too; what a run does not serve stays in memory
    (auto) or is refused in one line (--engine chunked)."""
    request = metrics_request("idc", run)
    assert not engine.wanted(request)
    monkeypatch.setattr(engine, "AUTO_BYTES", (run / "raw" / "wire.pcap").stat().st_size)
    assert engine.wanted(request)
    for kind in ("goodput", "fairness", "sanity"):
        assert engine.wanted(metrics_request(kind, run, engine="auto"))
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
    receivers' reads stand beside it, as in memory; sanity's table equal too."""
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
    memory, chunked = sanity_both(run)  # sanity too: no TCP counters, or none in the window
    assert_same_run(memory, chunked)
    assert counters(chunked)["goodput_wire_bit_s"] == 0


SYNC_PORT = 41396  # the receiver's UDP port of the fixture's clock exchange (bench.json)


def with_clock_exchange(frames: pd.DataFrame) -> pd.DataFrame:
    """`frames` with the datagrams of the fixture's clock exchanges (raw/bench/main.tsv, before and
    after the window, outside the other frames' span): each request 20 us after its t1, each
    reply 30 us before its t4, so the wire clock check matches every exchange."""
    sync = load_run(FIXTURE_RUN).df_clock_sync()
    t1, t4 = sync["t1_ns"].to_numpy().astype(np.int64), sync["t4_ns"].to_numpy().astype(np.int64)
    zeros = np.zeros(len(t1), np.int64)
    requests = synth.frame_table(t1 + 20_000, zeros + 16, zeros, zeros, synth.SENDER, synth.RECEIVER, 50000,
                                 SYNC_PORT, headers=28)
    replies = synth.frame_table(t4 - 30_000, zeros + 32, zeros, zeros, synth.RECEIVER, synth.SENDER, SYNC_PORT,
                                50000, headers=28)
    udp = pd.concat([requests, replies], ignore_index=True).assign(proto=np.uint8(17))
    return synth.concat([frames, udp])


@pytest.fixture(scope="module")
def clock_run(frames: pd.DataFrame, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_run(tmp_path_factory.mktemp("chunked-clock-run"), with_clock_exchange(frames))


def sanity_both(path: Path, **options: object) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Both engines' sanity tables, the chunked one from the chunked path itself (never its
    fallback to memory)."""
    return table("sanity", path, engine="memory", **options), chunked_table("sanity", path, **options)


def counters(sanity_table: pd.DataFrame) -> dict[str, float]:
    return dict(zip(sanity_table["counter"], sanity_table["value"]))


SANITY_CASES = [{}, {"link_rate": given_rate("1gbit")}, {"link_rate": given_rate("10mbit")}, {"tolerance": 0.5},
                {"max_retransmit_share": 0.0}, {"max_retransmit_share": 0.5, "frame_overhead": 24},
                {"from_s": 0.05, "to_s": 0.3}, {"from_s": 0.1, "link_rate": given_rate("40mbit"), "tolerance": 0.0},
                {"stream": ["43546"]}]


@pytest.mark.parametrize("options", SANITY_CASES)
def test_sanity_of_a_run_equals_memory(clock_run: Path, lossy_run: tuple[Path, pd.DataFrame], options: dict,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The synthetic runs (a clock exchange on the wire; a lossy run stream) in chunks of 257
    rows: the same table, marking and attrs; the wire clock rows are there and hold."""
    monkeypatch.setenv("HOSTWIRE_CHUNK_ROWS", "257")
    for path in (clock_run, lossy_run[0]):
        memory, chunked = sanity_both(path, **options)
        assert_same_run(memory, chunked)
    got = counters(sanity_both(clock_run, **options)[1])
    assert got["check.wire_clock_start"] == 1 and got["check.wire_clock_end"] == 1
    assert got["wire_clock_bound_ns"] == 25_000


def test_sanity_of_a_run_counts_its_streams(clock_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The wire goodput of the run's stream only (the capture's other TCP flows are not the
    run's): goodput's wire figure over the window; the receivers' reads beside it."""
    monkeypatch.setenv("HOSTWIRE_CHUNK_ROWS", "101")
    got = counters(sanity_both(clock_run)[1])
    good = table("goodput", clock_run, engine="memory").set_index("stream")
    assert good.loc["all", "basis"] == "wire" and good.loc["all", "bytes"] > 0
    assert got["goodput_wire_bit_s"] == good.loc["all", "bit_s"]
    assert got["goodput_app_bit_s"] == good.loc["all", "app_bit_s"] > 0
    assert got["frames"] > got["data_frames"]  # the other flows' and the UDP frames count as frames


@pytest.mark.parametrize("options", [{}, {"link_rate": given_rate("10mbit"), "from_s": 0.1}])
def test_sanity_of_the_recorded_fixture_run(options: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    """The recorded run with its clock exchange: the wire clock check's rows in both tables."""
    monkeypatch.setenv("HOSTWIRE_CHUNK_ROWS", "300")
    memory, chunked = sanity_both(FIXTURE_RUN, **options)
    assert_same_run(memory, chunked)
    got = counters(chunked)
    assert {"wire_clock_residual_ns", "wire_clock_bound_ns", "check.wire_clock_start",
            "check.wire_clock_end"} <= set(got)
    assert got["check.wire_clock_start"] == 1 and got["check.wire_clock_end"] == 1


def test_sanity_of_an_incomplete_run(frames: pd.DataFrame, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run interrupted inside its window, its logs lost: the window ends at the last payload
    frame, the run is marked incomplete and cut, as in memory; the clock exchange at its start
    only."""
    monkeypatch.setenv("HOSTWIRE_CHUNK_ROWS", "257")
    both_phases = with_clock_exchange(frames)
    cut = both_phases[both_phases["t_ns"].to_numpy() < W0 + 250 * MS]
    run = make_run(tmp_path, cut, status="partial", logs=False)
    for options in ({}, {"link_rate": given_rate("1gbit"), "to_s": 0.1}):
        memory, chunked = sanity_both(run, **options)
        assert_same_run(memory, chunked)
    got = counters(chunked)
    assert got["incomplete_run"] == 1 and got["window_cut"] == 1 and got["check.wire_clock_start"] == 1
    assert chunked.attrs["marked"] and any("incomplete_run" in r for r in chunked.attrs["marked_by"])


def test_sanity_of_a_damaged_run_capture(clock_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A capture cut inside the window and one with a byte changed: sanity reads what it can with
    or without --partial, counts the damage and marks the run, as in memory."""
    monkeypatch.setenv("HOSTWIRE_CHUNK_ROWS", "257")
    data = (clock_run / "raw" / "wire.pcap").read_bytes()
    changed = bytearray(data)
    changed[-1] ^= 1
    for damage in (data[:len(data) // 2 + 7], bytes(changed)):
        damaged = tmp_path / f"run-{len(damage)}"
        shutil.copytree(clock_run, damaged)
        (damaged / "raw" / "wire.pcap").write_bytes(damage)
        for partial in (False, True):
            memory, chunked = sanity_both(damaged, partial=partial)
            assert_same_run(memory, chunked)
            assert chunked.attrs["marked"] and chunked.attrs["damaged_sources"]
            assert counters(chunked)["damaged_sources"] == 1


def test_sanity_of_a_run_with_losses(frames: pd.DataFrame, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nonzero loss counters, an unknown one, a failed check and an uncategorised counter in the
    manifest: the same counters and marked_by."""
    monkeypatch.setenv("HOSTWIRE_CHUNK_ROWS", "257")
    losses = {"wire_ps_drop": 3, "qdisc_drops": 2, "bench_log_overflow": 1, "sched_clock_check_ok": False,
              "syscalls_lost_events": None, "mystery": 4}
    run = make_run(tmp_path, with_clock_exchange(frames), losses=losses)
    memory, chunked = sanity_both(run)
    assert_same_run(memory, chunked)
    marked_by = " | ".join(chunked.attrs["marked_by"])
    for reason in ("capture_drops 3", "shaper_drops 2", "log_overflows 1", "loss.mystery 4",
                   "failed_checks 1 (check.sched_clock_check_ok)"):
        assert reason in marked_by
    assert counters(chunked)["unknown_losses"] == 1
