"""Damage to any raw file of a real run never gives a wrong number that looks right: every raw file
is cut at 50 random offsets and has random bytes flipped, and after each mutation every metric
either fails with an error that names the damaged file, or marks its result, or gives exactly what
the intact run gave; and no reader or metric raises anything but a hostwire error (the CLI's one
line, never a traceback)."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from hostwire.errors import HostwireError

CUTS_PER_FILE = 50
FLIPS_PER_FILE = 10
METRIC_KINDS = ("intervals", "bursts", "idc", "hurst", "contract", "fairness", "goodput", "sanity")
# Files the metrics read, and files read by their own readers (checked the same way).
METRIC_FILES = ("manifest.json", "raw/wire.pcap", "raw/wirecap.json", "raw/bench/bench.json",
                "raw/bench/main.tsv", "raw/bench/send-0.tsv", "raw/bench/recv-0.tsv", "raw/bench/send-1.tsv",
                "raw/bench/recv-1.tsv")
READER_FILES = ("raw/sched.tsv", "raw/sched.json", "raw/resources.tsv", "raw/bench/bg-0.tsv")


def _metric_results(run_dir: Path) -> dict[str, object]:
    """Each metric's table, or its error; anything but a HostwireError propagates."""
    from hostwire.metrics.compute import table

    out: dict[str, object] = {}
    for kind in METRIC_KINDS:
        try:
            out[kind] = table(kind, run_dir)
        except HostwireError as err:
            out[kind] = err
    return out


def _reader_results(run_dir: Path) -> dict[str, object]:
    """What a Run gives for the files no metric reads (the kernel timeline, its counters, the
    host's samples, a background process's log), or the error it raised."""
    from hostwire.run_directory import load_run

    readers: dict[str, Callable[[object], object]] = {
        "raw/sched.tsv": lambda run: run.df_sched(),  # type: ignore[attr-defined]
        "raw/sched.json": lambda run: run.sched_summary(),  # type: ignore[attr-defined]
        "raw/resources.tsv": lambda run: run.df_resources(),  # type: ignore[attr-defined]
        "raw/bench/bg-0.tsv": lambda run: run.log("bg-0").df,  # type: ignore[attr-defined]
    }
    out: dict[str, object] = {}
    for name, read in readers.items():
        try:
            out[name] = read(load_run(run_dir))
        except HostwireError as err:
            out[name] = err
    return out


def _same(a: object, b: object) -> bool:
    if isinstance(a, pd.DataFrame) and isinstance(b, pd.DataFrame):
        try:
            pd.testing.assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True), check_dtype=False)
            return True
        except AssertionError:
            return False
    return a == b


def _marked(result: object) -> bool:
    if not isinstance(result, pd.DataFrame):
        return False
    if result.attrs.get("marked") or result.attrs.get("damage") or result.attrs.get("damaged_sources"):
        return True
    if list(result.columns[:2]) == ["counter", "value"]:
        values = dict(zip(result["counter"], result["value"]))
        return bool(values.get("marked"))
    return False


def _judge(name: str, mutated: str, got: object, baseline: object) -> str | None:
    """None when the result is acceptable, else why not."""
    if isinstance(got, HostwireError):
        if Path(mutated).name in str(got) or "manifest.json" in str(got):
            return None
        return f"{name}: error does not name {mutated}: {got}"
    if _marked(got) or _same(got, baseline):
        return None
    return f"{name}: a different, unmarked result after damage to {mutated}"


def _mutations(data: bytes, rng: random.Random) -> list[tuple[str, bytes]]:
    cuts = sorted(rng.sample(range(len(data)), min(CUTS_PER_FILE, len(data))))
    out = [(f"cut at {c}", data[:c]) for c in cuts]
    for _ in range(FLIPS_PER_FILE):
        pos = rng.randrange(len(data))
        flipped = bytearray(data)
        flipped[pos] ^= 1 << rng.randrange(8)
        out.append((f"bit flipped at {pos}", bytes(flipped)))
    return out


@pytest.fixture(scope="module")
def recorded_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from hostwire.record.runner import RunPoint, record_run

    root = tmp_path_factory.mktemp("fuzz")
    point = RunPoint(senders=2, background=1, warmup_s=0.3, duration_s=1.0, quiet_s=0.3)
    record = record_run(root, "intact", point)
    assert record.status == "complete", record.reason
    return record.directory


def _copy_with(run_dir: Path, scratch: Path, relative: str, content: bytes) -> Path:
    """The run hard-linked into scratch, with one file replaced by content."""
    if scratch.exists():
        shutil.rmtree(scratch)
    shutil.copytree(run_dir, scratch, copy_function=os.link)
    target = scratch / relative
    target.unlink()
    target.write_bytes(content)
    return scratch


@pytest.mark.privileged("netns", "tracefs")
@pytest.mark.slow
@pytest.mark.long  # every metric after each of 60 mutations of 13 files: minutes of CPU (the fast
# in-process fuzz, analyze/tests/test_fuzz_fast.py, covers every format in make test)
@pytest.mark.parametrize("relative", METRIC_FILES + READER_FILES)
def test_damage_to_a_raw_file_is_named_or_marked(recorded_run: Path, tmp_path: Path, relative: str) -> None:
    rng = random.Random(f"hostwire-fuzz-{relative}")
    metric_file = relative in METRIC_FILES
    compute = _metric_results if metric_file else _reader_results
    baseline = compute(recorded_run)
    assert not [k for k, v in baseline.items() if isinstance(v, HostwireError)], baseline
    problems: list[str] = []
    outcomes = {"error": 0, "marked": 0, "same": 0}
    for label, content in _mutations((recorded_run / relative).read_bytes(), rng):
        scratch = _copy_with(recorded_run, tmp_path / "run", relative, content)
        results = compute(scratch)
        for name, got in results.items():
            if not metric_file and name != relative:
                continue
            problem = _judge(name, relative, got, baseline[name])
            if problem:
                problems.append(f"{label}: {problem}")
            outcomes["error" if isinstance(got, HostwireError) else "marked" if _marked(got) else "same"] += 1
    assert problems == [], "\n".join(problems[:20]) + f"\n({len(problems)} in all; outcomes {outcomes})"


@pytest.mark.privileged("netns", "tracefs")
@pytest.mark.slow
def test_damaged_trace_is_named_by_convert(recorded_run: Path, tmp_path: Path, build_dir: Path) -> None:
    """hw-schedtrace convert on a trace.dat cut at 50 random offsets: exit 1 with one line and no
    sched.tsv that reads as whole, unless the conversion equals the intact one. (Flipped bits in
    an event's payload cannot be told: the trace format has no checksum.)"""
    from hostwire.read.sched import read_sched_tsv

    data = (recorded_run / "raw" / "trace.dat").read_bytes()
    intact = read_sched_tsv(recorded_run / "raw" / "sched.tsv")[1]
    rng = random.Random("hostwire-fuzz-trace")
    for label, content in _mutations(data, rng)[:CUTS_PER_FILE]:
        trace = tmp_path / "trace.dat"
        trace.write_bytes(content)
        out = tmp_path / "out"
        shutil.rmtree(out, ignore_errors=True)
        proc = subprocess.run([str(build_dir / "bin" / "hw-schedtrace"), "convert", "-o", str(out), str(trace)],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode in (0, 1), f"{label}: exit {proc.returncode}: {proc.stderr}"
        assert "Traceback" not in proc.stderr and "AddressSanitizer" not in proc.stderr, proc.stderr
        if proc.returncode == 1:
            assert len([line for line in proc.stderr.splitlines() if line.startswith("hw-schedtrace: ")]) >= 1
        if not (out / "sched.tsv").exists():
            continue
        try:
            got = read_sched_tsv(out / "sched.tsv")[1]
        except HostwireError as err:
            assert "sched.tsv" in str(err)
            continue
        assert proc.returncode == 0, f"{label}: convert failed but left a sched.tsv that reads as whole"
        assert _same(got, intact), f"{label}: convert exited 0 with a conversion that differs from the intact one"
