"""hostwire report CAMPAIGN: report.html with the campaign's figures beside the 1997 paper's."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

EPILOG = """examples:
  hostwire report runs/quick
  hostwire analyze runs/paper && hostwire report runs/paper

Needs the campaign analysed first (hostwire analyze: summary.parquet and each run's tables).
Writes CAMPAIGN/report.html and CAMPAIGN/plots/*.png and *.svg: goodput against the process mix
with its fit and Pearson r (paper figure 5), Jain's index beside the paper's table 3, frame and
write interval distributions (figure 3), IDC curves (figure 4), zero-loss contracts, a process
trace around the longest off period (figure 2) and a sanity table where lossy, failed or
emulated runs stand out.

exit status: 0 written, 1 missing or unreadable input, 2 a bad option."""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "report", help="report.html and figures of an analysed campaign",
        description="Draws an analysed campaign's figures (PNG and SVG) and writes report.html.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("campaign", metavar="CAMPAIGN", type=Path, help="campaign directory (analysed)")
    parser.add_argument("--digest", action="store_true",
                        help="also print one line per run and the goodput fit on stdout")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hostwire.campaign.report import build_report, digest_lines

    path = build_report(args.campaign)
    if args.digest:
        sys.stdout.write("\n".join(digest_lines(args.campaign)) + "\n")
    sys.stdout.write(f"{path}\n")
    return 0
