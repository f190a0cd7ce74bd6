"""Integrity of the metrics against ground truth built here: a damaged capture or log never
vanishes, it stops the metric naming file and offset or, with --partial, marks the result; an
interrupted run uses the window it recorded; the loss counters take their collectors' categories
(goodput: test_metrics_goodput_truth.py; what marks a run: test_metrics_sanity_marks.py)."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hostwire.metrics import compute, synth
from hostwire.metrics.damage import from_attrs

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the helpers beside this file (importlib mode)
from integrity_helpers import (A, BASE, MS, RECORD_HEADER, S, counters_of, make_run, metrics, steady_run,  # noqa: E402
                               write_pcap)


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
