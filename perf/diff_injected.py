"""How often hostwire diff ranks an injected cause first, and how exactly its terms add up:
REPETITIONS recordings of each side of each pair of tests/diff_pairs.py (between two network
namespaces behind a 100 Mbit/s shaper), each pair's A against its B. Prints one line per pair
and repetition, and per pair how often the injected cause came first.

  sudo .venv/bin/python perf/diff_injected.py OUT_DIR [REPETITIONS]"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from diff_pairs import CAUSES, record_side  # noqa: E402

from hostwire.diff.compare import compare  # noqa: E402
from hostwire.record.link import LinkSpec  # noqa: E402
from hostwire.record.topology import Topology  # noqa: E402


def main() -> int:
    out, reps = Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 10
    out.mkdir(parents=True, exist_ok=True)
    first = {p: 0 for p in CAUSES}
    worst = 0.0
    with Topology(run_id="dif", link=LinkSpec(rate="100mbit")) as t:
        for rep in range(reps):
            for pair, cause in CAUSES.items():
                sides = []
                for side in "ab":
                    d = out / f"{pair}-{rep}-{side}"
                    record_side(t.tx_ns, t.rx_ns, d, pair, side)
                    sides.append(d)
                c = compare(*sides)[0]
                time_terms = sorted((x for x in c.terms if x.group == "time"), key=lambda x: -abs(x.delta_bit_s))
                change = c.goodput_b_bit_s - c.goodput_a_bit_s
                error = abs(sum(x.delta_bit_s for x in time_terms) - change) / abs(change)
                worst = max(worst, error)
                first[pair] += time_terms[0].term == cause
                print(f"{pair} rep {rep}: A {c.goodput_a_bit_s / 1e6:.2f} B {c.goodput_b_bit_s / 1e6:.2f} Mbit/s; "
                      f"first {time_terms[0].term} ({time_terms[0].share:.1%}), second {time_terms[1].term} "
                      f"({time_terms[1].share:.1%}); sum error {error:.2e}", flush=True)
    for pair, n in first.items():
        print(f"{pair}: {CAUSES[pair]} first in {n} of {reps}")
    print(f"largest relative error of the sum: {worst:.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
