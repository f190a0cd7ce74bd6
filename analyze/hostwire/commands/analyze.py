"""hostwire analyze CAMPAIGN: every run's metrics and tables, and the campaign's summary table."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

EPILOG = """examples:
  hostwire analyze runs/quick
  hostwire analyze runs/paper --workers 2
  hostwire analyze runs/paper --dask tcp://127.0.0.1:8786

Each run's metrics are cached in its directory (metrics.json, tables/*.parquet) and computed
again only when a raw file is newer (or with --force). The summary has one row per run: every
grid parameter, status, marked, goodput, Jain's index, interval percentiles, IDC at 100 ms,
bursts, CPU shares and switch rate. Query it with pandas, polars or DuckDB.

exit status: 0 done (runs that could not be analysed say why in their row's `errors`),
1 no campaign or no run directory, 2 a bad option."""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "analyze", help="metrics of every run of a campaign, and summary.parquet/csv",
        description="Computes each run's metrics and tables in parallel (a local process pool, or a "
        "Dask distributed cluster with --dask) and writes the campaign's summary.parquet and summary.csv.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("campaign", metavar="CAMPAIGN", type=Path, help="campaign directory (hostwire run's output)")
    parser.add_argument("--workers", type=int, help="local worker processes (default: one per CPU)")
    parser.add_argument("--dask", metavar="ADDRESS", help="run on the Dask distributed scheduler at ADDRESS")
    parser.add_argument("--force", action="store_true", help="recompute every run, ignoring the caches")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hostwire.campaign.analyze import analyze_campaign
    from hostwire.errors import UsageError

    if args.workers is not None and args.workers < 1:
        raise UsageError(f"--workers {args.workers}: expected 1 or more")
    log = logging.getLogger("hostwire")

    def progress(done: int, total: int) -> None:
        log.info("analyzed %d of %d runs", done, total)

    summary = analyze_campaign(args.campaign, workers=args.workers, dask_address=args.dask, force=args.force,
                               progress=progress)
    marked = int(summary["marked"].fillna(1).astype(int).sum()) if "marked" in summary else 0
    sys.stdout.write(f"{len(summary)} runs analysed, {marked} marked: {args.campaign / 'summary.parquet'}\n")
    return 0
