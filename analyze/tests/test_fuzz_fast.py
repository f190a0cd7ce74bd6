"""A fast fuzz of every raw input format, in-process (issue 22): each file of the fixture run is cut
at random offsets or has one random bit flipped, and read back through the Run (which checks the
manifest's digests) and the format's own reader. Each case ends in the intact answer, a marked
result or a HostwireError naming the file (the CLI's one clean line); anything else is counted as
a traceback or a silent wrong answer, and both must stay 0. HOSTWIRE_FUZZ_CASES sets the number of
cases (default 2000); the counts are written to the test log."""

from __future__ import annotations

import os
import random
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from hostwire.errors import HostwireError
from hostwire.paths import REPO_ROOT

FIXTURE = REPO_ROOT / "tests" / "fixtures" / "run-small"
CASES = int(os.environ.get("HOSTWIRE_FUZZ_CASES", "2000"))


def _readers() -> dict[str, tuple[Callable[[Path], Any], Callable[[Path], Any]]]:
    """Per file: its own reader, on the file alone (what a tool that reads it on its own sees), and
    the reader through the Run (which checks the manifest's digests first)."""
    from hostwire.manifest import check_seal
    from hostwire.read.bench import load_bench
    from hostwire.read.pcap import read_pcap
    from hostwire.read.resources import read_resources
    from hostwire.read.sched import read_sched_json, read_sched_tsv
    from hostwire.read.syscalls import read_syscalls
    from hostwire.read.tsv import read_tsv
    from hostwire.run_directory import load_run
    from hostwire.versioned import read_json

    def manifest(run: Path) -> Any:
        data = read_json(run / "manifest.json", "hostwire-run", 1)
        check_seal(run / "manifest.json", data)
        return data

    return {
        "manifest.json": (manifest, lambda run: load_run(run).manifest),
        "raw/wire.pcap": (lambda run: read_pcap(run / "raw/wire.pcap"), lambda run: load_run(run).df_frames()),
        "raw/sched.tsv": (lambda run: read_sched_tsv(run / "raw/sched.tsv")[1], lambda run: load_run(run).df_sched()),
        "raw/sched.json": (lambda run: read_sched_json(run / "raw/sched.json"),
                           lambda run: load_run(run).sched_summary()),
        "raw/syscalls.tsv": (lambda run: read_syscalls(run / "raw/syscalls.tsv"),
                             lambda run: load_run(run).df_syscalls()),
        "raw/resources.tsv": (lambda run: read_resources(run / "raw/resources.tsv"),
                              lambda run: load_run(run).df_resources()),
        "raw/bench/send-0.tsv": (lambda run: read_tsv(run / "raw/bench/send-0.tsv").df,
                                 lambda run: load_run(run).log("send-0").df),
        "raw/bench/recv-0.tsv": (lambda run: read_tsv(run / "raw/bench/recv-0.tsv").df,
                                 lambda run: load_run(run).log("recv-0").df),
        "raw/bench/main.tsv": (lambda run: read_tsv(run / "raw/bench/main.tsv").df,
                               lambda run: load_run(run).log("main").df),
        "raw/bench/bench.json": (lambda run: load_bench(run / "raw/bench").summary,
                                 lambda run: load_run(run).bench_summary()),
    }


def _cache_readers(run: Path) -> dict[str, tuple[Callable[[Path], Any], Callable[[Path], Any]]]:
    """The analysis' caches (metrics.json, tables/*.parquet): read by `hostwire analyze` again,
    whose row must be the intact one (a damaged cache is recomputed) or a clean error."""
    from hostwire.campaign.analyze import analyze_run

    def row(run: Path) -> Any:
        got = dict(analyze_run(run))
        return {k: v for k, v in got.items() if k != "errors" or v}

    analyze_run(run)
    return {name: (row, row) for name in ("metrics.json", "tables/idc.parquet", "tables/contract.parquet",
                                          "tables/intervals_hist.parquet")}


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, pd.DataFrame) and isinstance(b, pd.DataFrame):
        return a.shape == b.shape and a.reset_index(drop=True).equals(b.reset_index(drop=True))
    try:
        return bool(a == b)
    except Exception:  # objects without a total equality: compare what they print
        return repr(a) == repr(b)


def _marked(result: Any) -> bool:
    parts = result if isinstance(result, tuple) else (result,)
    return any(isinstance(p, pd.DataFrame) and (p.attrs.get("damage") or p.attrs.get("marked")
                                                or p.attrs.get("damaged_sources")) for p in parts)


def test_fuzz_every_format_in_process(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    readers = _readers()
    for name in list(readers):
        if not (FIXTURE / name).exists():
            readers.pop(name)
    run = tmp_path / "run"
    shutil.copytree(FIXTURE, run)
    readers.update(_cache_readers(run))
    intact = {name: own(run) for name, (own, _) in readers.items()}
    originals = {name: (run / name).read_bytes() for name in readers}
    rng = random.Random("hostwire-fast-fuzz")
    counts = {"cases": 0, "answers": 0, "marks": 0, "clean errors": 0, "tracebacks": 0, "silent wrong": 0}
    problems: list[str] = []
    names = sorted(readers)
    started = time.monotonic()

    def outcome(read: Callable[[Path], Any], name: str, label: str) -> str:
        try:
            got = read(run)
        except HostwireError as err:
            text = str(err)
            if "\n" in text or (Path(name).name not in text and "manifest.json" not in text):
                problems.append(f"{name} {label}: not one line naming the file: {text!r}")
            return "clean errors"
        except Exception as err:  # a traceback at the CLI
            problems.append(f"{name} {label}: {type(err).__name__}: {err}")
            return "tracebacks"
        if _marked(got):
            return "marks"
        return "answers" if _same(got, intact[name]) else "different"

    # a damaged cache costs a recomputation of the run's metrics: 2 % of the cases, the rest on the
    # raw formats
    raw_names = [n for n in names if n.startswith(("raw/", "manifest"))]
    cache_names = [n for n in names if n not in raw_names]
    for case in range(CASES):
        name = cache_names[case % len(cache_names)] if case % 50 == 0 else raw_names[case % len(raw_names)]
        data = originals[name]
        if rng.random() < 0.5:
            at = rng.randrange(len(data))
            label, mutated = f"cut at {at}", data[:at]
        else:
            at = rng.randrange(len(data))
            flipped = bytearray(data)
            flipped[at] ^= 1 << rng.randrange(8)
            label, mutated = f"bit flipped at byte {at}", bytes(flipped)
        (run / name).write_bytes(mutated)
        counts["cases"] += 1
        own, through_run = readers[name]
        try:
            alone = outcome(own, name, label)
            # A reader on its own may take a flipped digit for another valid value; the run's
            # digests must then catch it: the case ends as the run's reader ends it.
            result = outcome(through_run, name, label) if alone == "different" else alone
            if result == "different":
                result = "silent wrong"
                problems.append(f"{name} {label}: a different answer, not marked")
            counts[result] += 1
        finally:
            (run / name).write_bytes(data)
    elapsed = time.monotonic() - started
    summary = (f"fuzz: {counts['cases']} cases over {len(names)} formats in {elapsed:.1f} s: "
               + ", ".join(f"{k} {v}" for k, v in counts.items() if k != "cases"))
    with capsys.disabled():
        sys.stderr.write("\n" + summary + "\n")
    assert problems == [], summary + "\n" + "\n".join(problems[:20])
    assert counts["tracebacks"] == 0 and counts["cases"] >= CASES
