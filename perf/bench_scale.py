#!/usr/bin/env python3
"""Scale: `hostwire metrics idc`, `contract` and `intervals` on synthetic captures of 3e7 and 3e6
frames (20 TCP streams, written here, deleted at the end), each command's peak anonymous memory
(RssAnon + RssShmem of its whole process tree, hostwire.procmem, sampled every 50 ms) and its
frames per second end to end, beside tcpdump reading the same file. At 3e6 frames the in-memory
engine runs too and the two tables must be equal byte for byte.
Targets: at most 1 GB and at least 3 M frames/s at 3e7 frames; the same memory at 3e6.
Usage: perf/bench_scale.py [--frames N ...] [--dir DIR] [--keep]"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "analyze"))
sys.path.insert(0, str(REPO / "perf"))

from hostwire.procmem import Sampler  # noqa: E402
from pcapsynth import write_synthetic_pcap  # noqa: E402

KINDS = {"idc": [], "contract": ["--link-rate", "10mbit"], "intervals": []}
GB = 10**9


def measured(cmd: list[str], out: Path | None, env: dict[str, str]) -> tuple[float, float, int, int]:
    """(seconds, CPU seconds of the tree, peak anonymous bytes of the tree, exit status) of one
    command. On a shared machine the wall time waits for the CPU; the CPU time does not."""
    sink = open(out, "wb") if out else subprocess.DEVNULL
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.PIPE, env=env, cwd=REPO)
        with Sampler([proc.pid]) as sampler:
            _, err = proc.communicate()
        seconds = time.perf_counter() - t0
    finally:
        if out:
            sink.close()  # type: ignore[union-attr]
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        sys.stderr.write(err.decode(errors="replace"))
    return seconds, cpu, sampler.peak, proc.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, nargs="+", default=[30_000_000, 3_000_000])
    parser.add_argument("--dir", type=Path, default=Path(os.environ.get("HOSTWIRE_BENCH_DIR", "/var/tmp")),
                        help="where the captures and the column scratch go (on disk: not tmpfs; default /var/tmp)")
    parser.add_argument("--keep", action="store_true", help="keep the captures")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="hostwire-bench-scale-", dir=args.dir))
    env = dict(os.environ, PYTHONPATH=str(REPO / "analyze"), HOSTWIRE_SCRATCH=str(work))
    hostwire = [str(REPO / ".venv" / "bin" / "python"), "-m", "hostwire", "metrics"]
    status = 0
    print(f"{'frames':>10} {'command':<22} {'engine':<8} {'s':>7} {'cpu s':>7} {'M fr/s':>7} {'M fr/cpu s':>10} "
          f"{'peak MB':>8}  verdict", flush=True)
    try:
        for n in args.frames:
            pcap = work / f"synthetic-{n}.pcap"
            write_synthetic_pcap(str(pcap), n, flows=20)
            print(f"-- {n} frames, capture {pcap.stat().st_size / GB:.2f} GB; load average {os.getloadavg()[0]:.1f}",
                  flush=True)
            row(n, "tcpdump -r -tt -nn", "", *measured(["tcpdump", "-r", str(pcap), "-tt", "-nn"], None, env))
            for kind, extra in KINDS.items():
                outputs = {}
                for engine in (["chunked", "memory"] if n <= 3_000_000 else ["chunked"]):
                    out = work / f"{kind}-{engine}.csv"
                    result = measured([*hostwire, kind, str(pcap), *extra, "--engine", engine], out, env)
                    row(n, f"metrics {kind}", engine, *result)
                    outputs[engine] = out.read_bytes() if result[-1] == 0 else None
                    status |= result[-1] != 0
                if len(outputs) == 2:
                    same = outputs["chunked"] == outputs["memory"] and outputs["chunked"] is not None
                    print(f"{n:>10} {'metrics ' + kind:<22} chunked and memory tables {'equal' if same else 'DIFFER'}",
                          flush=True)
                    status |= not same
            pcap.unlink()
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print("targets: chunked at most 1 GB peak anonymous memory and at least 3 M frames/s end to end at 3e7 frames")
    return status


def row(n: int, what: str, engine: str, seconds: float, cpu: float, peak: int, code: int) -> None:
    verdict = ""
    if engine == "chunked":
        verdict = "memory " + ("met" if peak <= GB else "NOT met")
        if n >= 30_000_000:
            verdict += ", rate " + ("met" if n / seconds >= 3e6 else "NOT met")
    if code:
        verdict = f"exit {code}"
    print(f"{n:>10} {what:<22} {engine:<8} {seconds:>7.2f} {cpu:>7.2f} {n / seconds / 1e6:>7.2f} "
          f"{n / max(cpu, 1e-9) / 1e6:>10.2f} {peak / 1e6:>8.0f}  {verdict}", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
