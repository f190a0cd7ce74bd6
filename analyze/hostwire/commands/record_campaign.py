"""hostwire run CONFIG.toml: record every run of a campaign's grid."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hostwire.campaign.precision import DEFAULT_MAX_REPETITIONS, Precision, parse_target
from hostwire.errors import UsageError
from hostwire.paths import runs_root

EPILOG = """examples:
  hostwire run configs/quick.toml
  hostwire run configs/quick.toml --dry-run
  hostwire run configs/quick.toml --set duration_s=2 --set warmup_s=0.5
  hostwire run configs/paper.toml --out /var/tmp/paper --resume
  hostwire run configs/diff-noise.toml --until-ci 5% --max-repetitions 12   # repeat the points until mean ± 5 %
  hostwire run configs/vm-quick.toml     # [host] mode = "vm": a fresh guest per run (make kernel first)
  hostwire run lab.toml --out runs/lab   # [hosts] sender = "root@pc1" ...: real hosts over ssh (docs/hosts.md)

exit status: 0 every run complete, 1 a run failed or was partial (the campaign goes on and
records the others), 2 a bad config or option (nothing started), 130/143 interrupted (the
running run is torn down and kept, marked partial; --resume continues)."""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "run", help="record a campaign: every run of a config's grid (configs/*.toml)",
        description="Records each point of CONFIG's grid (cross product of its [grid] lists, "
        "[defaults] for the rest, [campaign] repetitions and order) into the campaign directory, "
        "one run directory each, with campaign.json beside them. [host] mode = \"vm\" records each "
        "run in a freshly booted QEMU guest of the stock or the patched kernel (kernel-patches/); [hosts] runs "
        "the sender, the receiver and the capture on real machines over ssh. The config "
        "is checked in full before anything starts.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config", metavar="CONFIG", type=Path, help="campaign file (TOML)")
    parser.add_argument("-o", "--output", "--out", dest="out", type=Path, metavar="DIR",
                        help="campaign directory (default: runs/<campaign name>)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a run parameter for every run (e.g. --set duration_s=2); repeatable")
    parser.add_argument("--resume", action="store_true",
                        help="continue a campaign: skip its complete runs whose key matches, redo the rest")
    parser.add_argument("--dry-run", action="store_true", help="list the runs in order and the estimated time")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar (one log line per run)")
    parser.add_argument("--until-ci", metavar="WIDTH", type=_target,
                        help="after the config's repetitions, add one more to each point whose 95 %% confidence "
                        "interval of goodput is wider than mean ± WIDTH (e.g. 5%% or 0.05), round after round, "
                        "until every point is within it or has --max-repetitions runs")
    parser.add_argument("--max-repetitions", metavar="K", type=int,
                        help="with --until-ci: at most K runs of a point (default %d)" % DEFAULT_MAX_REPETITIONS)
    parser.add_argument("--keep-remote", action="store_true",
                        help="[hosts]: leave each host's scratch folder (tools, unfetched files) in place")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hostwire.campaign.batch import dry_run_lines, run_campaign
    from hostwire.campaign.config import load_config, parse_overrides

    config = load_config(args.config, parse_overrides(args.set))
    until = _precision(args, config.repetitions)
    if args.dry_run:
        sys.stdout.write("\n".join(dry_run_lines(config)) + "\n")
        if until is not None:
            sys.stdout.write(f"then, --until-ci {100 * until.target:g} %: up to {until.max_repetitions} runs a point "
                             f"({until.max_repetitions - config.repetitions} more each, at most)\n")
        return 0
    directory = args.out if args.out is not None else runs_root() / config.name
    bar = _ProgressBar(disabled=args.no_progress or not sys.stderr.isatty())
    try:
        result = run_campaign(config, directory, resume=args.resume, progress=bar.update,
                              keep_remote=args.keep_remote, until=until)
    finally:
        bar.close()
    failed = result.failed
    sys.stdout.write(f"campaign {config.name}: {len(result.runs) - len(failed)} of {len(result.runs)} runs "
                     f"complete in {directory}\n")
    for entry in failed:
        sys.stdout.write(f"  {entry['run_id']}: {entry['status']}: {entry['reason']}\n")
    if until is not None:
        sys.stdout.write(until.describe() + "\n")
    return 1 if failed else 0


def _target(text: str) -> float:
    try:
        return parse_target(text)
    except UsageError as err:
        raise argparse.ArgumentTypeError(str(err).removeprefix("--until-ci: ")) from None


def _precision(args: argparse.Namespace, repetitions: int) -> Precision | None:
    from hostwire.campaign.config import MAX_REPETITIONS

    if args.until_ci is None:
        if args.max_repetitions is not None:
            raise UsageError("--max-repetitions bounds --until-ci: give --until-ci too")
        return None
    bound = DEFAULT_MAX_REPETITIONS if args.max_repetitions is None else args.max_repetitions
    if not max(2, repetitions) <= bound <= MAX_REPETITIONS:
        raise UsageError(f"--max-repetitions: expected {max(2, repetitions)} (the config's repetitions, "
                         f"two at least) to {MAX_REPETITIONS}, got {bound}")
    return Precision(target=args.until_ci, max_repetitions=bound)


class _ProgressBar:
    """Run i of n, the point and the ETA (tqdm); without a terminal, one log line per run."""

    def __init__(self, disabled: bool) -> None:
        self.disabled = disabled
        self.bar = None

    def update(self, item: object, done: int, total: int) -> None:
        import logging

        if self.disabled:
            logging.getLogger("hostwire").info("run %d of %d: %s", done + 1, total, item.describe())  # type: ignore[attr-defined]
            return
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit="run", file=sys.stderr, dynamic_ncols=True)
        self.bar.n = done
        self.bar.set_description(f"run {done + 1}/{total} {item.describe()}")  # type: ignore[attr-defined]
        self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
