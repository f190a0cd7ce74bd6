"""hostwire timeline RUN -o FILE: the run's scheduler, system calls and wire on one clock, as a
Perfetto trace (open it at ui.perfetto.dev) or, with --text, one line per event."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

EXAMPLES = """examples:
  hostwire timeline runs/quick-1/r003 -o r003.pftrace            the whole logging window
  hostwire timeline RUN -o part.pftrace --from 0.5 --to 0.6      100 ms of it
  hostwire timeline RUN --text --from 1 --to 1.01 -o -           one line per event on stdout
  hostwire timeline RUN --pcapng owned.pcapng                    the capture, each data frame commented

tracks: CPU <n> (what ran), <role> <pid> calls (system calls as slices), stream <name> (data frames
as instants; flows from each write to its frames), counters: CPU <n> run queue, backlog <stream>.
A kernel trace of 256 MiB or more is read in slabs up to --to, in memory that does not grow with it:
its CPU slices are then cut at the window's bounds and its run-queue counters start at --from."""


def register(subparsers: argparse._SubParsersAction) -> None:
    from hostwire.commands.common import add_time_range

    p = subparsers.add_parser(
        "timeline", help="the run's scheduler, system calls and wire as a Perfetto trace (or text)",
        description="Write the run's timeline, all sources on the run's clock, as a Perfetto trace "
        "(--text: one line per event, interleaved in time).",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run", metavar="RUN", help="run directory")
    p.add_argument("-o", "--output", metavar="FILE", help="output file ('-' with --text: stdout)")
    p.add_argument("--pcapng", metavar="FILE",
                   help="also write the capture as pcapng, each data frame commented with its stream, sending "
                   "pid and write(s) (tshark -T fields -e frame.comment shows them)")
    add_time_range(p, "the logging window's start")
    p.add_argument("--text", action="store_true", help="text, one line per event, instead of a Perfetto trace")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hostwire.errors import InputError, UsageError
    from hostwire.run_directory import load_run
    from hostwire.safewrite import write_bytes
    from hostwire.timeline import gap_sources, perfetto_trace

    run_ = load_run(args.run)
    if args.output is None and args.pcapng is None:
        raise UsageError("timeline: say what to write: -o FILE (Perfetto trace, or --text) and/or --pcapng FILE")
    if args.pcapng is not None:
        from hostwire.timeline.pcapng import write_annotated

        gap_sources.long_trace(run_)  # a long trace: its first pass, so that the streams read only its rare events

        count = write_annotated(run_, Path(args.pcapng))
        sys.stderr.write(f"hostwire: {args.pcapng}: {count} data frames commented\n")
        if args.output is None:
            return 0
    origin = run_.window()
    window = origin.narrowed(args.from_s, args.to_s)
    tables = perfetto_trace.tables_of(run_, window, gap_sources.kernel_slabs(run_))
    if args.text:
        lines = perfetto_trace.text_lines(tables)
        inside = (lines["t_ns"] >= window.start_ns) & (lines["t_ns"] <= window.end_ns)
        lines = lines[inside.to_numpy()]  # a slice begun before the window is drawn, not listed
        if len(lines) == 0:
            raise InputError(f"{args.run}: no event begins in {window.describe()} (a slice that began before "
                             "it is not listed); widen --from/--to")
        t = (lines["t_ns"] - origin.start_ns) / 1e9
        text = "".join((t.map("{:.9f}".format) + " " + lines["source"] + " " + lines["text"] + "\n").tolist())
        if args.output == "-":
            sys.stdout.write(text)
            return 0
        data = text.encode()
    else:
        if args.output == "-":
            raise UsageError("-o -: a Perfetto trace is binary; name a file (or use --text)")
        data = perfetto_trace.build_trace(tables)
    write_bytes(Path(args.output), data)
    return 0
