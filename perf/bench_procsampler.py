#!/usr/bin/env python3
"""The /proc sampler's cost (make bench; docs/hosts.md): hw-procsample, as the hosts' runner starts
it (every resource: load, cpu, memory, net, tcp, disk), for a number of rounds at each period, its
CPU time (user + system, from wait4) and the bytes it printed, per polling round; against dproc's
marks: under 0.5 % of the link's bandwidth at a 1 s period, under 2.2 ms per round at 1 s, under
1 ms per round at 2 s with the differential filter.

Options: --rounds-scale X (default 1: 100 rounds at 100 ms, 20 at 1 s, 15 at 2 s, about a minute)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "analyze"))

from hostwire.paths import tool  # noqa: E402
from hostwire.record.procsampler import RESOURCES, ResourceSpec, sampler_argv  # noqa: E402

# (period s, the filter's share on every resource, rounds, the mark per round in ms or None)
CASES = ((0.1, 0.0, 100, None), (1.0, 0.0, 20, 2.2), (2.0, 0.05, 15, 1.0))


def measure(period_s: float, share: float, rounds: int) -> tuple[float, float]:
    """CPU milliseconds and bytes per round of one sampler run of `rounds` rounds."""
    argv = sampler_argv(str(tool("hw-procsample")), period_s, {name: ResourceSpec(None, share) for name in RESOURCES})
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen([*argv, "--rounds", str(rounds)], stdout=out, stdin=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            raise SystemExit(f"hw-procsample exited with {proc.returncode}")
        size = out.tell()
    return (usage.ru_utime + usage.ru_stime) * 1e3 / rounds, size / rounds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds-scale", type=float, default=1.0)
    args = parser.parse_args()
    print(f"{'period':>7} {'filter':>7} {'rounds':>6} {'CPU ms/round':>13} {'KB/round':>9} "
          f"{'of 10 Mbit/s':>13} {'of 1 Gbit/s':>12}  dproc's mark")
    failed = False
    for period_s, share, rounds, mark in CASES:
        rounds = max(3, round(rounds * args.rounds_scale))
        cpu_ms, size = measure(period_s, share, rounds)
        link = {rate: size * 8 / period_s / rate for rate in (10e6, 1e9)}
        verdict = "" if mark is None else f"under {mark:g} ms: {'met' if cpu_ms < mark else 'NOT met'}"
        if period_s == 1.0:
            verdict += f"; under 0.5 % of 10 Mbit/s: {'met' if link[10e6] < 0.005 else 'NOT met'}"
        failed |= "NOT" in verdict
        print(f"{period_s:>6g}s {share * 100:>6g}% {rounds:>6} {cpu_ms:>13.3f} {size / 1e3:>9.1f} "
              f"{link[10e6] * 100:>12.3f}% {link[1e9] * 100:>11.5f}%  {verdict}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
