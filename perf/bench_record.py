"""The cost of `hostwire record` on a real program against its peers, through `hostwire overhead
--program`.

Debian's iperf3 between two network namespaces over a bare veth (no shaper: the CPU limits, so a
tracer's cost shows in the throughput), in round-robin rounds of: iperf3 alone, under `hostwire
record` (tracefs system calls with the calls the program blocks in, and without them:
`--no-waits`, what waited_in costs; and ptrace), record's capture and its kernel trace alone, `perf
trace`, `strace -f` and `trace-cmd record -F`; beside it tcp-rr's one-byte TCP round trip under
the same tools. Printed: the command's table, then per tool the throughput kept and the round trip
added, and record's throughput over each peer's in the same rounds (above 1: iperf3 keeps more of
its throughput under record).

Rerun by hand:
    TMPDIR=<a tmpfs> hostwire overhead --no-pingpong --program --program-runs 7 -r 1 -o build/perf/record

Environment: REPS (rounds, default 7), SECONDS_PER_RUN (iperf3 -t, default 3), RR_LOOPS (default
10000), RT_PRIO (SCHED_FIFO priority of the program, its tool and the servers, default 1, as the
ping-pong's in bench_overhead.py; 0: the normal scheduler), RECORD_OUT (where overhead.md/.csv/-program.csv go, default build/perf/record),
HOSTWIRE_BUILD. The tools write their traces under TMPDIR (removed after each run): a capture of
iperf3 is some 150 MB per second, so TMPDIR wants room (a tmpfs measures the tools, not a disk)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    reps = os.environ.get("REPS", "7")
    seconds = os.environ.get("SECONDS_PER_RUN", "3")
    loops = os.environ.get("RR_LOOPS", "10000")
    rt = os.environ.get("RT_PRIO", "1")
    out = Path(os.environ.get("RECORD_OUT", ROOT / "build" / "perf" / "record"))
    env = dict(os.environ, PYTHONPATH=str(ROOT / "analyze"))
    argv = [sys.executable, "-m", "hostwire", "overhead", "--no-pingpong", "--program", "--program-runs", reps,
            "--program-seconds", seconds, "--rr-loops", loops, "--rt-prio", rt, "-o", str(out), "--json"]
    print("command: " + " ".join(["hostwire", *argv[3:]]))
    proc = subprocess.run(argv, stdout=subprocess.PIPE, text=True, env=env)
    if proc.returncode != 0:
        print(f"bench_record: hostwire overhead --program failed (exit {proc.returncode})", file=sys.stderr)
        return 1
    data = json.loads(proc.stdout)
    print((out / "overhead.md").read_text())
    rows = {r["name"]: r for r in data["program"]["rows"]}
    for name in ("alone", "record tracefs", "record tracefs --no-waits", "perf trace", "strace -f"):
        row = rows.get(name)
        if row and row["status"] == "ok":
            rounds = " ".join(f"{x / 1e9:.3f}" for x in row["receiver_bps"] if x is not None)
            print(f"{name}: iperf3 receiver Gbit/s per round: {rounds}")
    missing = [n for n in ("alone", "record tracefs", "perf trace", "strace -f")
               if n not in rows or rows[n]["status"] != "ok"]
    if missing:
        print(f"bench_record: not measured: {', '.join(missing)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
