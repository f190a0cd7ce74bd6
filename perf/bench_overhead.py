"""Probe effect of every hostwire collector against its peers, through `hostwire overhead`.

It replaces bench-schedtrace.sh (hw-schedtrace against trace-cmd record on the ping-pong; paper
table 2): the ping-pong (`hw-bench pingpong`, two processes on one CPU, two switches and four
I/O system calls per round trip) runs in round-robin rounds of bare, hw-schedtrace, hw-schedtrace
-s, hw-iotrace ptrace, the ptrace floor, hw-iotrace --preload, hw-wirecap, all of them together,
and the peers trace-cmd record (in a private mount namespace, see hostwire/overhead.py), perf sched
record and strace -f. Printed: the command's tables, then the ratio lines the earlier scripts
printed, computed from its table: hw-schedtrace / trace-cmd added cost per switch (from the minima
and from the paired medians; target <= 1.10), and the system-call tracers against strace. The
write-loop measurements of hw-iotrace per traced call stay in bench_iotrace.py.

Environment: LOOPS (default 50000), REPS (rounds, default 15), CPU (the ping-pong's CPU, default
0), RT_PRIO (SCHED_FIFO priority of the ping-pong, default 1; 0: the normal scheduler),
OVERHEAD_OUT (where overhead.md/.csv/.png go, default build/perf/overhead), HOSTWIRE_BUILD."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    loops = os.environ.get("LOOPS", "50000")
    reps = os.environ.get("REPS", "15")
    cpu = os.environ.get("CPU", "0")
    rt = os.environ.get("RT_PRIO", "1")
    out = Path(os.environ.get("OVERHEAD_OUT", ROOT / "build" / "perf" / "overhead"))
    env = dict(os.environ, PYTHONPATH=str(ROOT / "analyze"))
    proc = subprocess.run([sys.executable, "-m", "hostwire", "overhead", "--loops", loops, "--runs", reps, "--cpu", cpu,
                           "--rt-prio", rt, "-o", str(out), "--json"], stdout=subprocess.PIPE, text=True, env=env)
    if proc.returncode != 0:
        print(f"bench_overhead: hostwire overhead failed (exit {proc.returncode})", file=sys.stderr)
        return 1
    data = json.loads(proc.stdout)
    sys.path.insert(0, str(ROOT / "analyze"))
    from hostwire.overhead.tools import sched_events

    print(f"scheduler events (hw-schedtrace, trace-cmd record): {' '.join(sched_events())}")
    print((out / "overhead.md").read_text())
    rows = {r["name"]: r for r in data["rows"]}
    tc = rows.get("trace-cmd record")
    if tc and tc["status"] == "ok":
        rounds = " ".join(f"{x:.3f}" for x in tc["round_trips_us"] if x is not None)
        print(f"trace-cmd record round trips (us): {rounds}")
    for line in data["ratios"]:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
