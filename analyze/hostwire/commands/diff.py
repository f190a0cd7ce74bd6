"""hostwire diff A B: why two runs (or two campaigns) differ in goodput, as terms that add up to
the change exactly (docs/timeline.md, "Why two runs differ")."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

EPILOG = """examples:
  hostwire diff runs/record-1 runs/record-2              two runs: the terms, largest change first
  hostwire diff runs/monday runs/tuesday                 two campaigns: one table per grid point both have
  hostwire diff A B --json                               goodput_a_bit_s, goodput_b_bit_s, terms

Time terms: each stream spends the window before its first or after its last data frame
(outside), in short intervals between frames (sending), or in a long gap of one cause (hostwire
gaps); as stream-time per byte they add up to streams / goodput, so the change in goodput splits
into one term per component, and the streams' count, exactly. CPU terms (runs recorded with the
network's softirq events): the CPU time the senders' tasks were granted, and their CPU per byte
as user time, time in the traced calls and the network's softirqs run in their tasks (cpu-task,
user and calls together, where no call was traced); the softirq time run in other tasks (no quota
charges it to the senders) stands beside them. With two or more repetitions on both sides, a term
whose factor does not differ by Welch's t-test (Holm's correction over the terms, family-wise 1 %)
is noise, marked "~", and the change of goodput is tested on its own the same way.

exit status: 0 done, 1 unreadable or unsplittable input, 2 a bad option."""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "diff", help="why two runs or campaigns differ: goodput's change split into terms that add up to it",
        description="Each side's goodput and the change split into exact terms: the gap causes' time per byte, "
        "the streams, and where the kernel trace has them the senders' CPU and its cost per byte.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("a", metavar="A", type=Path, help="run or campaign directory (the baseline)")
    parser.add_argument("b", metavar="B", type=Path, help="run or campaign directory (the one compared)")
    parser.add_argument("--json", action="store_true", help="JSON: goodput_a_bit_s, goodput_b_bit_s and terms")
    parser.add_argument("--all", action="store_true", help="also the terms that did not change")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hostwire.diff.compare import compare
    from hostwire.diff.render import as_json, as_text
    from hostwire.errors import UsageError

    for side in (args.a, args.b):
        if not side.is_dir():
            raise UsageError(f"{side}: no such run or campaign directory")
    comparisons = compare(args.a, args.b, progress=lambda run: sys.stderr.write(f"hostwire: reading {run}\n")
                          if args.verbose else None)
    if args.json:
        json.dump(as_json(comparisons, args.a, args.b), sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(as_text(comparisons, args.a, args.b, args.all))
    return 0
