"""What tracing the calls a program blocks in costs (`hw-schedtrace --waits`, which `hostwire
record` turns on for waited_in, docs/timeline.md), per call, beside the I/O calls record traces
anyway; and what the same call would cost under the ptrace backend, which therefore does not stop
on them (docs/record.md, "The cost of the wait calls").

A loop of CALLS calls that return at once, timed inside the program (so the tools' start and stop
are not in it), in round-robin rounds: `select` with a zero timeout alone, under `hw-schedtrace
-s` (select is not traced: the cost of the syscall tracepoints being on) and under `hw-schedtrace
-s -w` (select traced: an enter and an exit event); and a one-byte `read` of /dev/zero under
`hw-iotrace` with read left out of its seccomp filter and with it in (a ptrace stop at entry and
exit: what each wait call would cost). Printed: ns per call per configuration (median over rounds)
and the added ns per traced call (median of the per-round differences).

Environment: ROUNDS (default 7), CALLS (default 200000), HOSTWIRE_BUILD."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOOP = """
import os, select, sys, time
n, kind = int(sys.argv[1]), sys.argv[2]
fd = os.open("/dev/zero", os.O_RDONLY)
t = time.perf_counter_ns()
if kind == "select":
    for _ in range(n):
        select.select([], [], [], 0)
else:
    for _ in range(n):
        os.read(fd, 1)
print((time.perf_counter_ns() - t) / n)
"""


def main() -> int:
    rounds, calls = int(os.environ.get("ROUNDS", "7")), os.environ.get("CALLS", "200000")
    build = Path(os.environ.get("HOSTWIRE_BUILD", ROOT / "build")) / "bin"
    with tempfile.TemporaryDirectory(prefix="hw-bench-waits-") as tmp:
        work = Path(tmp)
        loop = work / "loop.py"
        loop.write_text(LOOP)
        trace = [str(build / "hw-schedtrace"), "--name", f"bw{os.getpid()}", "-o", str(work / "st")]
        iotrace = [str(build / "hw-iotrace"), "-o", str(work / "io.tsv")]
        configs = {
            "select alone": [],
            "select, hw-schedtrace -s (not traced)": [*trace, "-s", "--"],
            "select, hw-schedtrace -s -w (traced)": [*trace, "-s", "-w", "--"],
            "read, hw-iotrace --calls write (not traced)": [*iotrace, "--calls", "write", "--"],
            "read, hw-iotrace --calls read (traced)": [*iotrace, "--calls", "read", "--"],
        }
        ns: dict[str, list[float]] = {name: [] for name in configs}
        names = list(configs)
        for r in range(rounds):
            for name in names[r % len(names):] + names[:r % len(names)]:  # the order rotates by one each round
                kind = "select" if name.startswith("select") else "read"
                proc = subprocess.run([*configs[name], sys.executable, str(loop), calls, kind],
                                      capture_output=True, text=True, timeout=600)
                if proc.returncode != 0:
                    print(f"bench_waits: {name} failed (exit {proc.returncode}): {proc.stderr.strip()[-300:]}",
                          file=sys.stderr)
                    return 1
                ns[name].append(float(proc.stdout.split()[-1]))
    print(f"calls that return at once, {calls} per run, {rounds} rounds round-robin; ns per call (median)")
    print("| configuration | ns/call | p25-p75 |\n|---|---:|---|")
    for name, values in ns.items():
        q = statistics.quantiles(values, n=4)
        print(f"| {name} | {statistics.median(values):.0f} | {q[0]:.0f}-{q[2]:.0f} |")

    def added(traced: str, untraced: str) -> str:
        diffs = [a - b for a, b in zip(ns[traced], ns[untraced])]
        q = statistics.quantiles(diffs, n=4)
        return f"{statistics.median(diffs):.0f} ns (p25-p75 {q[0]:.0f}-{q[2]:.0f})"

    print("added per traced wait call, tracefs (--waits): " + added(names[2], names[1]))
    print("added per traced call, ptrace (a stop at entry and exit): " + added(names[4], names[3]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
