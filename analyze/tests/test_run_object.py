"""The Run as the one analysis object: reading a run never imports the code that records one; a
Run reads each raw file once (the capture is decoded once for the demo summary, once for the
analysis step), reads every JSON file through the versioned reader, and says before any work
which raw files an analysis needs and which of them the run lacks."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import struct
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import hostwire.read.pcap
from hostwire.read.bench import BenchResult
from hostwire.cli import main
from hostwire.errors import InputError
from hostwire.metrics import synth
from hostwire.metrics.compute import table
from hostwire.metrics.needs import needs_of
from hostwire.read.needs import Need, Needs
from hostwire.run_directory import Run, load_run

S = 10**9
MS = 10**6
US = 10**3
BASE = 1_000 * S                 # the synthetic run's CLOCK_MONOTONIC at the window's start
REALTIME = 1_795_000_000 * S     # CLOCK_REALTIME - CLOCK_MONOTONIC when it was "recorded"
WINDOW = (BASE, BASE + 400 * MS)
KINDS = ("intervals", "bursts", "idc", "hurst", "contract", "fairness", "goodput", "sanity")


# --- a run directory as the runner leaves it -------------------------------------------------

def tsv(path: Path, kind: str, meta: dict[str, object], columns: list[str], rows: list[tuple[object, ...]],
        trailer: str) -> None:
    lines = ["# format: hostwire-tsv 2", f"# kind: {kind}", "# clock: CLOCK_MONOTONIC"]
    lines += [f"# {k}: {v}" for k, v in meta.items()]
    lines.append("\t".join(columns))
    lines += ["\t".join(str(v) for v in row) for row in rows]
    lines.append(f"# end: {trailer}")
    path.write_text("\n".join(lines) + "\n")


def write_pcap(frames: pd.DataFrame, path: Path, offset_ns: int) -> list[int]:
    """A nanosecond Ethernet pcap of synth frames (IPv4, TCP without options), stamped t_ns +
    offset_ns; returns each record's byte offset."""
    offsets = []
    with open(path, "wb") as handle:
        handle.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 1))
        for row in frames.itertuples():  # a few hundred frames
            payload = b"x" * int(row.payload_len)
            tcp = struct.pack("!HHIIBBHHH", int(row.sport), int(row.dport), int(row.seq), int(row.ack), 5 << 4,
                              int(row.flags), int(row.window), 0, 0) + payload
            addresses = bytes(int(x) for x in f"{row.src}.{row.dst}".split("."))
            ip = struct.pack("!BBHHHBBH", 0x45, 0, 20 + len(tcp), 0, 0, 64, 6, 0) + addresses
            data = b"\x04" * 6 + b"\x02" * 6 + b"\x08\x00" + ip + tcp
            sec, nsec = divmod(int(row.t_ns) + offset_ns, S)
            offsets.append(handle.tell())
            handle.write(struct.pack("<IIII", sec, nsec, len(data), len(data)) + data)
    return offsets


def record(directory: Path) -> Path:
    """Two senders (198.18.0.1:4000i -> 198.18.0.2:5001) put a 1000-byte segment on the wire every
    2 ms, sender 1 a millisecond after sender 0, from 10 ms before the 400 ms window to 10 ms after
    it; each write starts 50 us before its frame, each read 100 us after it; one sieve process.
    The capture is stamped on CLOCK_REALTIME, wirecap.json maps it back."""
    bench = directory / "raw" / "bench"
    bench.mkdir(parents=True)
    start, end = WINDOW
    (directory / "manifest.json").write_text(json.dumps({
        "format": "hostwire-run 1", "run_id": directory.name, "status": "complete", "reason": "",
        "point": {"senders": 2, "background": 1, "link_rate": "10mbit", "topology": "netns",
                  "sender_cpus": "0", "receiver_cpus": "1"},
        "losses": {"wire_ps_drop": 0}, "exit": {"hw-bench": 0}, "window_ns": [start, end]}))
    (bench / "bench.json").write_text(json.dumps({
        "format": "hostwire-bench 1", "window_start_ns": start, "window_end_ns": end,
        "receiver_ports": {"tcp": 5001, "udp": 5002}, "processes": [], "receivers": []}))
    head = {"window_start_ns": start, "window_end_ns": end, "log_capacity": 100000, "overflow": 0}
    streams = []
    for i in range(2):
        t = BASE + np.arange(-10 + i, 410 + i, 2) * MS
        streams.append(synth.frames(t, payload=1000, sport=40000 + i, headers=40))
        writes = [r for x in t for r in ((int(x) - 50 * US, "write_start", 1000), (int(x) - 45 * US, "write_end", 1000))]
        tsv(bench / f"send-{i}.tsv", "bench-send", {**head, "role": f"send-{i}", "index": i, "pid": 100 + i,
                                                    "local": f"198.18.0.1:{40000 + i}", "peer": "198.18.0.2:5001"},
            ["t_ns", "event", "bytes"], writes, f"records={len(writes)} bytes={1000 * len(writes)}")
        reads = [(int(x) + 100 * US, int(x) + 100 * US, 1000) for x in t]
        tsv(bench / f"recv-{i}.tsv", "bench-receive", {**head, "role": f"recv-{i}", "index": i, "pid": 200 + i,
                                                       "local": "198.18.0.2:5001", "peer": f"198.18.0.1:{40000 + i}"},
            ["t_ns", "t_raw_ns", "bytes"], reads, f"records={len(reads)} bytes={1000 * len(reads)}")
    rounds = [(start + k * 10 * MS, k, 23000, 262139, 1) for k in range(1, 40)]
    tsv(bench / "bg-0.tsv", "bench-background", {**head, "role": "bg-0", "index": 0, "pid": 300},
        ["t_ns", "round", "primes", "largest", "ok"], rounds, f"records={len(rounds)}")
    write_pcap(synth.concat(streams), directory / "raw" / "wire.pcap", REALTIME)
    (directory / "raw" / "wirecap.json").write_text(json.dumps({
        "format": "hostwire-wirecap 1", "ps_recv": 0, "ps_drop": 0,
        "clock_pairs": [{"realtime_ns": REALTIME + BASE - S, "monotonic_ns": BASE - S},
                        {"realtime_ns": REALTIME + BASE + S, "monotonic_ns": BASE + S}]}))
    return directory


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return record(tmp_path_factory.mktemp("runs") / "run")


@pytest.fixture
def run_dir(recorded: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(recorded, copy)
    return copy


def counting(monkeypatch: pytest.MonkeyPatch, owner: object, name: str) -> list[tuple[Any, ...]]:
    """Wraps owner.name so that every call is listed (its positional arguments); the real
    function still runs."""
    calls: list[tuple[Any, ...]] = []
    real: Callable[..., Any] = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, wrapper)
    return calls


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


# --- 1. reading a run never imports the recording side ---------------------------------------

# Everything under hostwire.record records, and so do the campaign's batch, the CLI and the
# commands that record.
RECORDING = ("hostwire.campaign.batch", "hostwire.cli", "hostwire.commands.demo", "hostwire.commands.record_campaign",
             "hostwire.commands.doctor")


def test_reading_and_analysing_a_run_imports_nothing_of_the_recording_side(run_dir: Path, build_dir: Path) -> None:
    code = f"""
import json, sys
import hostwire.campaign.analyze, hostwire.metrics.compute, hostwire.run_directory, hostwire.campaign.summary
from hostwire.metrics.needs import needs_of

run = hostwire.run_directory.load_run({str(run_dir)!r})
row, tables = hostwire.campaign.analyze.compute_row(run.path)
text = hostwire.campaign.summary.format_run_metrics(run)
idc = hostwire.metrics.compute.table("idc", run)
print(json.dumps({{"modules": sorted(m for m in sys.modules if m.startswith("hostwire")), "row": row,
                  "summary": text, "idc_rows": len(idc), "can": [run.can(needs_of(k)) for k in ("idc", "goodput")]}}))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=run_dir.parent)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    modules = set(out["modules"])
    recording = {m for m in modules if m in RECORDING or m.startswith("hostwire.record")}
    assert not recording, sorted(recording)
    # it did read and analyse the run: the capture, the logs, every metric of the analysis step
    assert {"hostwire.read.pcap", "hostwire.read.bench", "hostwire.metrics.needs"} <= modules
    assert out["row"]["errors"] == "" and out["row"]["goodput_bit_s"] == pytest.approx(8.02e6)
    assert "goodput 8.02 Mbit/s on the wire" in out["summary"] and out["idc_rows"] > 10
    assert out["can"] == [True, True]


def test_run_point_lives_apart_from_the_runner() -> None:
    from hostwire.record import point, runner

    assert runner.RunPoint is point.RunPoint
    with pytest.raises(Exception, match="senders = 0 and background = 0"):
        point.RunPoint(senders=0, background=0).validate()


# --- 2. one Run, one decode ------------------------------------------------------------------

def test_the_demo_summary_decodes_the_capture_once_and_reads_each_log_once(
        run_dir: Path, build_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hostwire.campaign.summary import format_run_metrics

    decodes = counting(monkeypatch, hostwire.read.pcap, "read_pcap")
    logs = counting(monkeypatch, BenchResult, "log")
    text = format_run_metrics(run_dir)
    # 201 + 200 frames in the window, 1000 payload bytes each, over 0.4 s; 200 + 200 reads
    assert ("goodput 8.02 Mbit/s on the wire (unique payload bytes in the window), 8.00 Mbit/s read by the "
            "receivers") in text
    assert "wire: 401 frames captured" in text and "marked" not in text  # the frames in the window
    assert [Path(c[0]) for c in decodes] == [run_dir / "raw" / "wire.pcap"]
    # each log once (main.tsv, the clock exchanges: this run has none, so nothing tries to read it)
    assert Counter(c[1] for c in logs) == {"send-0": 1, "send-1": 1, "recv-0": 1, "recv-1": 1}


def test_the_analysis_step_decodes_the_capture_once(run_dir: Path, build_dir: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from hostwire.campaign.analyze import compute_row

    decodes = counting(monkeypatch, hostwire.read.pcap, "read_pcap")
    row, tables = compute_row(run_dir)
    assert row["errors"] == "" and row["marked"] == 0
    assert row["goodput_bit_s"] == pytest.approx(8.02e6) and row["jain"] == pytest.approx(1.0, abs=1e-4)
    assert row["frame_gap_p50_ns"] == MS  # the two streams' frames merged: one every millisecond
    assert set(tables) == {"intervals_hist", "idc", "contract"} and all(len(t) for t in tables.values())
    assert len(decodes) == 1


def test_metrics_on_a_run_object_print_what_the_command_prints(run_dir: Path, build_dir: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    run = load_run(run_dir)
    decodes = counting(monkeypatch, hostwire.read.pcap, "read_pcap")
    for kind in KINDS:
        code, out, err = cli("metrics", kind, str(run_dir))
        assert code == 0, err
        assert table(kind, run).to_csv(index=False, float_format="%.10g") == out, kind
    assert len(decodes) == len(KINDS) + 1  # one for each command, one for the Run


def test_a_run_keeps_its_tables_and_callers_cannot_change_them(run_dir: Path, build_dir: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    decodes = counting(monkeypatch, hostwire.read.pcap, "read_pcap")
    run = load_run(run_dir)
    frames = run.df_frames()
    assert frames["t_ns"].min() == BASE - 10 * MS and len(frames) == 420  # mapped onto CLOCK_MONOTONIC
    frames["t_ns"] = 0
    del frames["seq"]
    again = run.df_frames()
    assert again["t_ns"].min() == BASE - 10 * MS and "seq" in again.columns
    writes = run.df_writes()
    writes["bytes"] = -1
    assert (run.df_writes()["bytes"] == 1000).all() and len(run.df_writes()) == 420
    assert len(decodes) == 1


def test_a_damaged_capture_is_decoded_once_for_strict_and_partial_callers(
        run_dir: Path, build_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pcap = run_dir / "raw" / "wire.pcap"
    frames = pd.concat([synth.frames(BASE + np.arange(-10, 410, 2) * MS, payload=1000, headers=40)])
    offsets = write_pcap(frames, pcap, REALTIME)
    pcap.write_bytes(pcap.read_bytes()[:offsets[100] + 30])  # inside frame 101
    decodes = counting(monkeypatch, hostwire.read.pcap, "read_pcap")
    run = load_run(run_dir)
    for _ in range(2):
        with pytest.raises(InputError, match=f"{pcap}.*byte offset {offsets[100]}"):
            run.df_frames()
    intact = run.df_frames(keep_damaged=True)
    assert len(intact) == 100 and intact.attrs["damage"]["byte_offset"] == offsets[100]
    with pytest.raises(InputError, match=f"byte offset {offsets[100]}.*--partial"):
        table("goodput", run)
    partial = table("goodput", run, partial=True)
    assert partial.attrs["marked"] is True and partial.attrs["damaged_sources"][0]["frame"] == 101
    assert len(decodes) == 1


# --- 3. every JSON file through the versioned reader -----------------------------------------

JSON_FILES: dict[str, tuple[str, str, Callable[[Run], dict[str, Any]]]] = {
    "raw/bench/bench.json": ("hostwire-bench", "window_start_ns", Run.bench_summary),
    "raw/wirecap.json": ("hostwire-wirecap", "clock_pairs", Run.wirecap),
    "raw/sched.json": ("hostwire-sched", "buffers", Run.sched_summary),
    "raw/syscalls.json": ("hostwire-syscalls", "calls_seen", Run.syscall_counters),
}


@pytest.mark.parametrize("name", list(JSON_FILES))
def test_every_json_file_is_read_once_through_the_versioned_reader(run_dir: Path, name: str) -> None:
    fmt, key, read = JSON_FILES[name]
    path = run_dir / name
    data = json.loads(path.read_text()) if path.exists() else {key: [] if key == "buffers" else 1}
    data["format"] = f"{fmt} 1"
    path.write_text(json.dumps(data))
    run = load_run(run_dir)
    assert read(run)[key] == data[key]
    path.unlink()
    assert read(run)[key] == data[key]  # kept: not read again
    path.write_text(json.dumps({**data, "format": f"{fmt} 2"}))
    with pytest.raises(InputError, match=f"{path}: format version 2 is newer than this hostwire reads"):
        read(load_run(run_dir))
    path.write_text(json.dumps({key: data[key]}))
    with pytest.raises(InputError, match=f"{path}: expected"):
        read(load_run(run_dir))
    path.unlink()
    with pytest.raises(InputError, match=f"{path}: missing"):
        read(load_run(run_dir))


def test_the_window_falls_back_on_a_versioned_bench_json(run_dir: Path) -> None:
    manifest = json.loads((run_dir / "manifest.json").read_text())
    del manifest["window_ns"]
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    assert load_run(run_dir).planned_window_ns() == WINDOW
    bench_json = run_dir / "raw" / "bench" / "bench.json"
    bench_json.write_text(bench_json.read_text().replace("hostwire-bench 1", "hostwire-bench 9"))
    run = load_run(run_dir)
    with pytest.raises(InputError, match="newer than this hostwire reads"):
        run.bench.summary
    assert run.planned_window_ns() == WINDOW  # from the logs' headers


# --- 4. declared needs -----------------------------------------------------------------------

def test_a_run_without_its_capture_names_what_each_kind_lacks_before_any_work(
        run_dir: Path, build_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (run_dir / "raw" / "wire.pcap").unlink()
    run = load_run(run_dir)
    assert [k for k in KINDS if not run.can(needs_of(k))] == ["bursts", "idc", "hurst", "contract"]
    assert run.missing_for(needs_of("idc")) == ["raw/wire.pcap"] and run.missing_for(needs_of("goodput")) == []
    assert run.can(needs_of("contract", cells_from="write"))
    decodes = counting(monkeypatch, hostwire.read.pcap, "read_pcap")
    logs = counting(monkeypatch, BenchResult, "log")
    with pytest.raises(InputError) as info:
        table("idc", run)
    assert str(info.value) == f"{run_dir}: idc needs raw/wire.pcap; this run has no wire frames"
    assert logs == [] and decodes == []  # refused before anything was read
    # what the run can give, it gives: goodput from the receivers' reads
    goodput = table("goodput", run).set_index("stream")
    assert (goodput["basis"] == "app").all() and goodput.loc["all", "bytes"] == 400 * 1000
    assert decodes == []


def test_goodput_of_a_run_with_neither_capture_nor_receivers(run_dir: Path, build_dir: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    (run_dir / "raw" / "wire.pcap").unlink()
    for log in (run_dir / "raw" / "bench").glob("recv-*.tsv"):
        log.unlink()
    message = f"{run_dir}: goodput needs raw/wire.pcap or raw/bench/recv-*.tsv; this run has neither"
    assert load_run(run_dir).missing_for(needs_of("goodput")) == ["raw/wire.pcap or raw/bench/recv-*.tsv"]
    logs = counting(monkeypatch, BenchResult, "log")
    code, out, err = cli("metrics", "goodput", str(run_dir))
    assert (code, out, err) == (1, "", f"hostwire: {message}\n")
    assert logs == []
    code, out, _ = cli("metrics", "sanity", str(run_dir))  # sanity needs nothing: it counts what is there
    assert code == 0 and "frames" not in pd.read_csv(io.StringIO(out))["counter"].tolist()
    from hostwire.campaign.summary import format_run_metrics

    text = format_run_metrics(run_dir)  # the summary leaves out what the run cannot give
    assert "goodput" not in text.splitlines()[-2] and "losses:" in text


def test_a_report_declares_its_own_needs(run_dir: Path) -> None:
    run = load_run(run_dir)
    cpu = Needs("the CPU plot", (Need(("raw/resources.tsv",), "resource samples"),))
    kernel = Needs("the kernel timeline", (Need(("raw/sched.tsv", "raw/trace.dat", "raw/sched.json")),))
    assert not run.can(cpu) and run.missing_for(kernel) == ["raw/sched.tsv or raw/trace.dat or raw/sched.json"]
    with pytest.raises(InputError) as info:
        run.require(cpu)
    assert str(info.value) == f"{run_dir}: the CPU plot needs raw/resources.tsv; this run has no resource samples"
    with pytest.raises(InputError, match="this run has none of them$"):
        run.require(kernel)
    (run_dir / "raw" / "sched.json").write_text("{}")
    assert run.can(kernel) and run.missing_for(kernel) == []
    assert run.can(Needs("the run's manifest"))


# --- a real run ------------------------------------------------------------------------------

@pytest.mark.privileged("netns")
@pytest.mark.slow
def test_a_recorded_run_is_decoded_once_by_the_summary_and_once_by_the_analysis(
        tmp_path: Path, build_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hostwire.campaign.analyze import compute_row
    from hostwire.record.runner import RunPoint, record_run
    from hostwire.campaign.summary import format_run_metrics

    done = record_run(tmp_path, "r1", RunPoint(senders=2, background=1, warmup_s=0.3, duration_s=1.0,
                                                quiet_s=0.2, kernel_trace=False))
    assert done.status == "complete", done.reason
    decodes = counting(monkeypatch, hostwire.read.pcap, "read_pcap")
    text = format_run_metrics(done.directory)
    assert "goodput" in text and "Jain's fairness index" in text and len(decodes) == 1
    row, _ = compute_row(done.directory)
    assert row["errors"] == "" and row["frames"] > 500 and len(decodes) == 2


def test_a_readers_run_point_defaults_are_the_recording_sides() -> None:
    """One rule per fact: a field an old manifest lacks reads as RunPoint's own default."""
    from hostwire.record.point import RunPoint
    from hostwire.run_directory import POINT_DEFAULTS

    assert POINT_DEFAULTS == {name: getattr(RunPoint(), name) for name in POINT_DEFAULTS}
    run = Run(Path("."), {"point": {"sender_cpus": "1"}})
    assert run.point_value("sender_cpus") == "1" and run.point_value("receiver_cpus") == "1"
    assert run.point_value("sender_cpu_share") == 0.0

