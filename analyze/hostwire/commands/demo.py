"""hostwire demo: one short benchmark run on the default two-namespace topology, summarized."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from hostwire.paths import runs_root


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="run the benchmark briefly between two network namespaces and summarize it",
        description="Records one run (2 senders, 2 background processes by default) between the "
        "sender and receiver namespaces joined by a 10 Mbit/s veth link, then prints what was "
        "logged: bytes per stream, writes per sender, sieve rounds, the measured clock offset.",
        epilog="examples:\n  hostwire demo\n  hostwire demo --senders 4 --background 1 --duration 5",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--out", type=Path, default=runs_root() / "demo",
                        help="campaign directory for the run (default: runs/demo)")
    parser.add_argument("--senders", "-M", type=int, default=2, help="sending processes (default 2)")
    parser.add_argument("--background", "-N", type=int, default=2, help="background processes (default 2)")
    parser.add_argument("--duration", type=float, default=4.0, help="logging window in seconds (default 4)")
    parser.add_argument("--warmup", type=float, default=1.0, help="warm-up in seconds (default 1)")
    parser.add_argument("--rate", default="10mbit", help="link rate (default 10mbit)")
    parser.add_argument("--loopback", action="store_true", help="run over loopback instead of two namespaces")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hostwire.campaign.summary import format_bench_summary, format_run_metrics
    from hostwire.record.runner import RunPoint, record_run

    point = RunPoint(senders=args.senders, background=args.background, duration_s=args.duration,
                     warmup_s=args.warmup, link_rate=args.rate,
                     topology="loopback" if args.loopback else "netns")
    point.validate()  # a bad point is refused before anything is said or started
    run_id = time.strftime("%Y%m%d-%H%M%S")
    sys.stderr.write(f"hostwire: recording run {run_id} ({point.warmup_s:g} s warm-up, "
                     f"{point.duration_s:g} s window) ...\n")
    record = record_run(args.out, run_id, point, config={"campaign": "demo"})
    out = sys.stdout
    out.write(f"run {record.run_id}: {record.status}  ({record.directory})\n")
    if record.bench is not None:
        try:
            out.write(format_bench_summary(record.bench) + "\n")
        except Exception as err:  # a run too broken to summarize still reports its status
            out.write(f"(no summary: {err})\n")
    if record.status == "complete":
        out.write(format_run_metrics(record.directory) + "\n")
    if record.status != "complete":
        out.write(f"reason: {record.reason}\n")
        return 1
    return 0
