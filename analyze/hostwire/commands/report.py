"""hostwire report CAMPAIGN | RUN: report.html with a campaign's figures beside the 1997 paper's, or
the one-run report of a run directory (a program recorded by hostwire record, or one run of a
campaign)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

EPILOG = """examples:
  hostwire report runs/quick
  hostwire analyze runs/paper && hostwire report runs/paper
  hostwire report runs/record-20261125-131500          one run: RUN/report.html
  hostwire report runs/quick/p003-M2-N2-r1-...         one run of a campaign

A campaign (a directory with campaign.json) needs analysing first (hostwire analyze:
summary.parquet and each run's tables). Writes CAMPAIGN/report.html and CAMPAIGN/plots/*.png and
*.svg: goodput against the process mix with its fit and Pearson r (paper figure 5), Jain's index
beside the paper's table 3, frame and write interval distributions (figure 3), IDC curves
(figure 4), zero-loss contracts, a process trace around the longest off period (figure 2) and a
sanity table where lossy, failed or emulated runs stand out.

--against A writes CAMPAIGN|RUN/diff.html instead: why it differs from A (hostwire diff), a
waterfall from A's goodput to its own per group of terms, and their tables.

A run directory (manifest.json, no campaign.json) needs nothing first. Writes RUN/report.html and
RUN/plots/: what was recorded (command, pid, exit status, duration, link rate and its source,
losses, frames of the program and foreign), the streams with their processes and goodput, the
gap causes per stream (as hostwire gaps --summary), the longest gaps and the top preempters, the
process trace around the longest off period, the frame intervals, IDC and the zero-loss
contracts, per stream. A section whose input the run lacks says so in its place.

exit status: 0 written, 1 missing or unreadable input, 2 a bad option."""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "report", help="report.html and figures of an analysed campaign, or of one run",
        description="Draws an analysed campaign's figures, or one run's (PNG and SVG), and writes report.html.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("campaign", metavar="CAMPAIGN|RUN", type=Path,
                        help="campaign directory (analysed), or one run directory")
    parser.add_argument("--against", metavar="A", type=Path,
                        help="a run or campaign to compare with (hostwire diff A CAMPAIGN|RUN): writes diff.html "
                        "with a waterfall from A's goodput to this one's")
    parser.add_argument("--digest", action="store_true",
                        help="also print one line per run and the goodput fit on stdout (a campaign)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hostwire.report.campaign_report import build_report, digest_lines
    from hostwire.report.run_report import build_run_report, is_run_directory
    from hostwire.errors import InputError, UsageError

    if not args.campaign.is_dir():
        raise InputError(f"{args.campaign}: no such directory (a campaign or a run directory)")
    if args.against is not None:
        from hostwire.report.diff_report import build_diff_report

        if not args.against.is_dir():
            raise UsageError(f"--against {args.against}: no such run or campaign directory")
        sys.stdout.write(f"{build_diff_report(args.campaign, args.against)}\n")
        return 0
    if is_run_directory(args.campaign):
        if args.digest:
            raise UsageError("report: --digest is for a campaign; RUN/report.html has its own summary")
        sys.stdout.write(f"{build_run_report(args.campaign)}\n")
        return 0
    path = build_report(args.campaign)
    if args.digest:
        sys.stdout.write("\n".join(digest_lines(args.campaign)) + "\n")
    sys.stdout.write(f"{path}\n")
    return 0
