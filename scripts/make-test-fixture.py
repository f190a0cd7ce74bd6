#!/usr/bin/env python3
"""Records the small run committed under tests/fixtures/run-small (needs root: namespaces, tracefs):
1 sender and 1 background process, 0.4 s window, every collector, the system calls through tracefs.
The kernel and system-call tables are cut down to the events of a slice of the window (a few
hundred each, their trailers counted again), the data file and the binary trace are left out, and
the manifest's digests and seal are computed again, so the fixture is a whole run under 1 MB that
analysis and plotting tests read without root.
Usage: scripts/make-test-fixture.py [OUT]   (default tests/fixtures/run-small)"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

TOP = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TOP / "analyze"))

from hostwire.manifest import raw_digests, seal  # noqa: E402
from hostwire.record.runner import RunPoint, record_run  # noqa: E402

KEEP = ("raw/bench/bench.json", "raw/bench/main.tsv", "raw/bench/send-0.tsv", "raw/bench/recv-0.tsv",
        "raw/bench/bg-0.tsv", "raw/wire.pcap", "raw/wirecap.json", "raw/sched.tsv", "raw/sched.json",
        "raw/syscalls.tsv", "raw/resources.tsv")
SLICE_NS = 30_000_000  # the kernel and system-call events of the window's first 30 ms


def cut_tsv(path: Path, start_ns: int, end_ns: int) -> int:
    """Keeps the header and the records with start_ns <= t_ns (t_enter_ns) < end_ns; writes the trailer's
    record count again. Returns the records kept."""
    lines = path.read_text().splitlines(keepends=True)
    header = [line for line in lines if line.startswith("#") and not line.startswith("# end:")]
    body = [line for line in lines if not line.startswith("#")]
    columns, records = body[0], body[1:]
    names = columns.rstrip("\n").split("\t")
    t_index = names.index("t_ns" if "t_ns" in names else "t_enter_ns")
    kept = [r for r in records if start_ns <= int(r.split("\t")[t_index]) < end_ns]
    path.write_text("".join(header) + columns + "".join(kept) + f"# end: records={len(kept)}\n")
    return len(kept)


def main() -> int:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else TOP / "tests" / "fixtures" / "run-small"
    point = RunPoint(senders=1, background=1, warmup_s=0.3, duration_s=0.4, quiet_s=0.2, syscalls="tracefs",
                     log_capacity=4096)
    with tempfile.TemporaryDirectory() as tmp:
        record = record_run(tmp, "run-small", point)
        if record.status != "complete":
            raise SystemExit(f"the run is {record.status}: {record.reason}")
        if out.exists():
            shutil.rmtree(out)
        for relative in KEEP:
            (out / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(record.directory / relative, out / relative)
        manifest = json.loads((record.directory / "manifest.json").read_text())
    start = int(manifest["window_ns"][0])
    counts = {name: cut_tsv(out / "raw" / name, start, start + SLICE_NS) for name in ("sched.tsv", "syscalls.tsv")}
    manifest["raw_digests"] = raw_digests(out)
    manifest["fixture"] = (f"made by scripts/make-test-fixture.py: sched.tsv and syscalls.tsv hold the events of "
                           f"the window's first {SLICE_NS // 1_000_000} ms; data.txt, trace.dat and the logs "
                           "of the collectors are left out")
    (out / "manifest.json").write_text(json.dumps(seal(manifest), indent=2) + "\n")
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"{out}: {size / 1024:.0f} KiB; sched.tsv {counts['sched.tsv']} events, "
          f"syscalls.tsv {counts['syscalls.tsv']} calls")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
