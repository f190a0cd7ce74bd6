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


def _readers() -> dict[str, Callable[[Path], Any]]:
    from hostwire.read.resources import read_resources
    from hostwire.read.sched import read_sched_json, read_sched_tsv
    from hostwire.read.syscalls import read_syscalls
    from hostwire.run import load_run

    return {
        "manifest.json": lambda run: load_run(run).manifest,
        "raw/wire.pcap": lambda run: load_run(run).df_frames(),
        "raw/sched.tsv": lambda run: (load_run(run).df_sched(), read_sched_tsv(run / "raw/sched.tsv")[1]),
        "raw/sched.json": lambda run: (load_run(run).sched_summary(), read_sched_json(run / "raw/sched.json")),
        "raw/syscalls.tsv": lambda run: (load_run(run).df_syscalls(), read_syscalls(run / "raw/syscalls.tsv")),
        "raw/resources.tsv": lambda run: (load_run(run).df_resources(), read_resources(run / "raw/resources.tsv")),
        "raw/bench/send-0.tsv": lambda run: load_run(run).log("send-0").df,
        "raw/bench/recv-0.tsv": lambda run: load_run(run).log("recv-0").df,
        "raw/bench/main.tsv": lambda run: load_run(run).log("main").df,
        "raw/bench/bench.json": lambda run: load_run(run).bench_summary(),
    }


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
    intact = {name: read(run) for name, read in readers.items()}
    originals = {name: (run / name).read_bytes() for name in readers}
    rng = random.Random("hostwire-fast-fuzz")
    counts = {"cases": 0, "answers": 0, "marks": 0, "clean errors": 0, "tracebacks": 0, "silent wrong": 0}
    problems: list[str] = []
    names = sorted(readers)
    started = time.monotonic()
    for case in range(CASES):
        name = names[case % len(names)]
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
        try:
            got = readers[name](run)
        except HostwireError as err:
            text = str(err)
            if "\n" in text or (Path(name).name not in text and "manifest.json" not in text):
                problems.append(f"{name} {label}: not one line naming the file: {text!r}")
            counts["clean errors"] += 1
        except Exception as err:  # a traceback at the CLI
            counts["tracebacks"] += 1
            problems.append(f"{name} {label}: {type(err).__name__}: {err}")
        else:
            if _marked(got):
                counts["marks"] += 1
            elif _same(got, intact[name]):
                counts["answers"] += 1
            else:
                counts["silent wrong"] += 1
                problems.append(f"{name} {label}: a different answer, not marked")
        finally:
            (run / name).write_bytes(data)
    elapsed = time.monotonic() - started
    summary = (f"fuzz: {counts['cases']} cases over {len(names)} formats in {elapsed:.1f} s: "
               + ", ".join(f"{k} {v}" for k, v in counts.items() if k != "cases"))
    with capsys.disabled():
        sys.stderr.write("\n" + summary + "\n")
    assert problems == [], summary + "\n" + "\n".join(problems[:20])
    assert counts["tracebacks"] == 0 and counts["cases"] >= CASES
