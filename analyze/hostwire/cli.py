"""The `hostwire` command. Each subcommand lives in hostwire/commands/<name>.py and provides
`register(subparsers)`, which adds its parser and sets `func(args) -> int` as the default;
COMMANDS lists them (the commands' modules import their heavy parts only when they run)."""

from __future__ import annotations

import argparse
import errno
import logging
import resource
import signal
import sys

import hostwire
from hostwire.commands import (analyze, demo, diff, doctor, gaps, metrics, model, overhead, pcapcols, record, record_campaign,
                               report, timeline)
from hostwire.errors import HostwireError, Terminated

COMMANDS = (analyze, demo, diff, doctor, gaps, metrics, model, overhead, pcapcols, record, report, record_campaign, timeline)


class _VersionAction(argparse.Action):
    """--version: the version and the source revision it was built from (git is asked only here,
    not every time a parser is built)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="show the version and the source revision, and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        sys.stdout.write(version_line() + "\n")
        parser.exit(0)


def version_line() -> str:
    """`hostwire 0.1.0 (revision 1a2b3c..., installed in /usr/local)`."""
    from hostwire import paths

    layout = paths.installed()
    where = f"installed in {layout.prefix}" if layout else f"checkout {paths.REPO_ROOT}"
    return f"hostwire {hostwire.__version__} (revision {paths.source_revision() or 'unknown'}, {where})"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line and exit 2, as every hostwire tool
        self.exit(2, f"hostwire: {message} (see 'hostwire --help')\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="hostwire",
        description="Record and analyze how a host's scheduler and system calls shape its traffic.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=_VersionAction)
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for command in COMMANDS:
        command.register(subparsers)
    return parser


def raise_open_files_limit() -> int:
    """Raises the soft limit of open files to the hard one and returns it. A long run's analysis
    keeps a scratch file per stream and column (hostwire.spill): with many streams that passes the
    1024 a login or a fresh machine's first process starts with, though the hard limit allows more."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):  # an infinite hard limit the kernel caps (nr_open)
            return soft
        return hard
    return soft


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="hostwire: %(message)s",
        stream=sys.stderr,
    )
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    # A script's background job inherits SIGINT ignored, and Python then never raises
    # KeyboardInterrupt: a `kill -INT` would leave the run going. Every command stops, removes what
    # it set up and keeps what it recorded on SIGINT, whatever disposition it was started with.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    raise_open_files_limit()
    try:
        return int(args.func(args) or 0)
    except HostwireError as err:
        sys.stderr.write(f"hostwire: {err}\n")
        return err.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("hostwire: interrupted; everything set up was removed, recorded data kept\n")
        return 130
    except Terminated:
        sys.stderr.write("hostwire: terminated; everything set up was removed, recorded data kept\n")
        return 143
    except BrokenPipeError:
        return 0
    except OSError as err:
        if err.errno != errno.EMFILE:
            raise
        limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        sys.stderr.write(f"hostwire: too many open files ({limit} allowed; raise the hard limit, ulimit -Hn): "
                         f"{err.filename or err}\n")
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
