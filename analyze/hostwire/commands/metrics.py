"""hostwire metrics KIND INPUT: the traffic metrics of DESIGN.md section 8 on a pcap, a frame table
(.parquet) or a run directory, as CSV on stdout (or --json)."""

from __future__ import annotations

import argparse
import sys

from hostwire.commands.common import add_options, write_table
from hostwire.metrics.options import COMMON, KINDS, OPTIONS

EXAMPLES = """examples:
  hostwire metrics intervals raw/wire.pcap --hist
  hostwire metrics idc runs/quick/r1 --bytes --json
  hostwire metrics contract wire.pcap --link-rate 10mbit --points 50
  hostwire metrics contract runs/quick/r1 --mbs 32 --cells-from write
  hostwire metrics fairness runs/quick/r1 --from 0.5 --to 10
  hostwire metrics goodput runs/quick/r1 --partial
  hostwire metrics sanity runs/quick/r1 --check"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "metrics", help="traffic metrics of a capture or a run (intervals, bursts, idc, hurst, contract, ...)",
        description="Compute one traffic metric on INPUT (a pcap file, a .parquet frame table or a run "
        "directory) and write it as CSV on stdout (--json for JSON). One row per stream (named "
        "src:port>dst:port in the direction carrying payload) plus `all` where it makes sense.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    kinds = parser.add_subparsers(dest="kind", metavar="KIND", parser_class=type(parser))
    for kind, (summary, columns) in KINDS.items():
        sub = kinds.add_parser(kind, help=summary, description=f"{summary}.\n\n{columns}",
                               epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
        sub.add_argument("input", metavar="INPUT", help="pcap file, .parquet frame table or run directory")
        add_options(sub, COMMON)
        sub.add_argument("--json", action="store_true", help="JSON records instead of CSV")
        add_options(sub, OPTIONS[kind])
        sub.set_defaults(func=run)
    parser.set_defaults(func=lambda args: _no_kind(parser))


def _no_kind(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    from hostwire.metrics import compute
    from hostwire.metrics.options import metrics_request

    options = {o.dest: getattr(args, o.dest) for o in (*COMMON, *OPTIONS[args.kind])}
    table, marked = compute.compute(metrics_request(args.kind, args.input, **options))
    write_table(table, args.json, sys.stdout)
    if args.kind != "sanity":  # sanity carries these in its counters
        for warning in table.attrs.get("warnings", []):
            sys.stderr.write(f"hostwire: warning: {warning}\n")
    if args.kind == "sanity" and args.check and marked:
        causes = "; ".join(table.attrs.get("marked_by", [])) or "see the counters"
        sys.stderr.write(f"hostwire: the run is marked: {causes}\n")
        return 1
    return 0
