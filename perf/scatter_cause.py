"""Why do two runs of one grid point differ? For each point of a campaign recorded several times,
hostwire diff of its slowest run (A) against its fastest (B): each side's goodput, the time
group's largest term, and every CPU term (the CPU granted to the senders, their user time, calls
and softirq per byte) with its share of the change; the softirq time no quota charged to the
senders and the hypervisor's steal on each side. Then, over the points, how often each term
came first and its median share.

  .venv/bin/python perf/scatter_cause.py CAMPAIGN_DIR"""

from __future__ import annotations

import json
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path

from hostwire.campaign.precision import run_goodput
from hostwire.diff.compare import compare
from hostwire.diff.terms import uncharged_per_byte


def main() -> int:
    campaign = Path(sys.argv[1])
    book = json.loads((campaign / "campaign.json").read_text())
    points: dict[str, list[tuple[float, Path]]] = defaultdict(list)
    for entry in book["runs"]:
        if entry["status"] == "complete":
            path = campaign / entry["run_id"]
            points[json.dumps(entry["point"], sort_keys=True)].append((run_goodput(path), path))
    first: Counter[str] = Counter()
    shares: dict[str, list[float]] = defaultdict(list)
    scatter = []
    for key, runs in points.items():
        runs.sort()
        if len(runs) < 2:
            continue
        values = [g for g, _ in runs]
        mean = statistics.fmean(values)
        scatter.append((statistics.stdev(values) / mean) ** 2)
        (slow_g, slow), (fast_g, fast) = runs[0], runs[-1]
        c = compare(slow, fast)[0]
        point = json.loads(key)
        time_terms = sorted((t for t in c.terms if t.group == "time"), key=lambda t: -abs(t.delta_bit_s))
        cpu_terms = sorted((t for t in c.terms if t.group == "cpu"), key=lambda t: -abs(t.delta_bit_s))
        steal = [sum(v.get("steal_ns", 0.0) for v in side.per_cpu.values()) / 1e6 for side in (c.a[0], c.b[0])]
        line = (f"M={point['senders']:>2} N={point['background']:>2} n={len(runs)}: "
                f"{slow_g / 1e6:6.2f} -> {fast_g / 1e6:6.2f} Mbit/s ({100 * (fast_g / slow_g - 1):+5.1f} %); "
                f"time: {time_terms[0].term} {time_terms[0].share:+.0%}")
        if cpu_terms:
            line += "; cpu: " + ", ".join(f"{t.term} {t.a:.3g}->{t.b:.3g} {t.share:+.0%}" for t in cpu_terms)
            first[cpu_terms[0].term] += 1
            for t in cpu_terms:
                shares[t.term].append(t.share)
        else:
            line += f"; cpu: {c.a[0].cpu_missing or c.b[0].cpu_missing}"
        line += (f"; uncharged softirq {uncharged_per_byte(c.a):.3g}->{uncharged_per_byte(c.b):.3g} ns/B"
                 f"; steal {steal[0]:.1f}->{steal[1]:.1f} ms")
        print(line, flush=True)
    print("CPU term first, over the points: " + ", ".join(f"{t} {n}" for t, n in first.most_common()))
    print("median share of the change: " + ", ".join(f"{t} {statistics.median(v):+.0%}" for t, v in shares.items()))
    if scatter:
        # the points' coefficients of variation pooled: one run's standard deviation about its point's mean
        print(f"one run about its point's mean: {100 * statistics.fmean(scatter) ** 0.5:.1f} % (one standard "
              f"deviation, pooled over {len(scatter)} points; per point {100 * min(scatter) ** 0.5:.1f}"
              f"-{100 * max(scatter) ** 0.5:.1f} %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
