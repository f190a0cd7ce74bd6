"""hostwire gaps RUN: every gap between consecutive data frames of a stream longer than a threshold,
split into causes that add up to the gap (docs/timeline.md, "Gaps"), as CSV on stdout (--json)."""

from __future__ import annotations

import argparse
import sys

EXAMPLES = """examples:
  hostwire gaps runs/quick-1/r003                       every long gap, CSV, one row per gap
  hostwire gaps runs/quick-1/r003 --summary             each cause's share of the gap time per stream
  hostwire gaps RUN --stream 50200 --min-gap 5ms --from 0.5 --to 1.5 --json
  hostwire gaps RUN --preempters                        the tasks that ran while a sender waited
  hostwire gaps RUN --waits                             the calls an idle sender waited in

causes, in precedence (the first that holds takes the time): on-wire, vcpu-stolen (the hypervisor
ran none of the host's CPUs), receiver-window, retransmit-timeout, wire-busy, preempted, qdisc (the
device's queueing discipline held a frame TCP had sent), blocked-in-call, app-idle, receiver-window (late
acknowledgements), awaiting-ack, send-path (the stack's own path from a release to the frame),
unexplained; a UDP flow never gets the TCP ones (receiver-window, retransmit-timeout, awaiting-ack, qdisc). Columns: stream, proto (tcp/udp), pid, comm (the sending process;
-1 and empty when unknown), t_start_ns, t_end_ns, gap_ns, threshold_ns, <cause>_ns (they sum to
gap_ns), preempted_by ("pid comm role share%; ..."), waited_in ("call peer share%; ...": the calls the
sending thread was in during the gap's app-idle time, with their share of it)."""


def register(subparsers: argparse._SubParsersAction) -> None:
    from hostwire.commands.common import add_time_range, duration, link_rate

    p = subparsers.add_parser(
        "gaps", help="every long gap of a stream, explained (preempted, blocked-in-call, wire-busy, awaiting-ack, ...)",
        description="Split every gap between consecutive data frames of a TCP stream or UDP flow that is longer than "
        "--min-gap into causes that add up to the gap, from the run's capture, kernel trace and "
        "system calls. CSV on stdout (--json for JSON).",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run", metavar="RUN", help="run directory")
    p.add_argument("--stream", action="append", metavar="NAME|PORT",
                   help="only this stream (full name or a port of either end); repeatable")
    p.add_argument("--min-gap", type=duration, metavar="DURATION",
                   help="gaps longer than this (1ms, 250us, 2s or ns; default: twice the time the gap's "
                   "first frame holds the link at the run's link rate)")
    add_time_range(p, "the logging window's start (both frames of a gap inside)")
    p.add_argument("--link-rate", type=link_rate, metavar="RATE", help="link rate (e.g. 10mbit; default: the run's)")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--summary", action="store_true", help="per stream (and all): gaps, gap_ns, each cause's share")
    what.add_argument("--preempters", action="store_true",
                      help="per gap and task that ran while the sender waited: ns and share")
    what.add_argument("--waits", action="store_true",
                      help="per gap and call the sender's app-idle time was spent in: ns and share")
    p.add_argument("--engine", choices=("auto", "memory", "slabs"), default="auto",
                   help="memory: the whole kernel trace in memory; slabs: the kernel trace read in slabs of time and "
                   "the capture in chunks, the inputs held on disk (same results); auto (default): slabs for a "
                   "raw/sched.tsv of 256 MiB or more (a capture of 256 MiB or more is read in chunks either way)")
    p.add_argument("--json", action="store_true", help="JSON records instead of CSV")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hostwire.commands.common import write_pieces, write_table
    from hostwire.metrics.streams import has_port
    from hostwire.errors import InputError
    from hostwire.run_directory import load_run
    from hostwire.timeline import gap_sources, gap_tables, gaps
    from hostwire.timeline.gap_tasks import PREEMPTER_COLUMNS
    from hostwire.timeline.intervals import names_in
    from hostwire.timeline.waits import WAIT_COLUMNS

    run_ = load_run(args.run)
    window = run_.window().narrowed(args.from_s, args.to_s)
    slabs = None
    if gap_sources.slabbed(run_.path, args.engine):
        inputs, slabs = gap_sources.slabbed_gap_inputs(run_, args.link_rate)
    else:
        inputs = gap_sources.gap_inputs(run_, args.link_rate)
    names = names_in(inputs.data["stream"])  # a long run's data frames: no string per frame
    wanted = None
    if args.stream:
        wanted = []
        for item in args.stream:
            matched = [n for n in names if n == item or (item.isdigit() and has_port(n, int(item)))]
            if not matched:
                raise InputError(f"--stream {item}: no such stream; streams are: {', '.join(names) or 'none'}")
            wanted += matched
    # each gap is written out once it closes (gap_tables): a long run's rows are not held
    sink = gap_tables.Totals() if args.summary else gap_tables.OnDisk()
    try:
        gaps.explain_into(sink, inputs, args.min_gap, window, wanted, slabs,
                          None if slabs is None else lambda: gap_sources.name_senders(inputs, slabs))
        for sentence in sink.cannot_tell:
            sys.stderr.write(f"hostwire: warning: {sentence}\n")
        if isinstance(sink, gap_tables.Totals):
            write_table(sink.summary(), args.json, sys.stdout)
        elif args.preempters:
            write_pieces(sink.pieces("preempters"), PREEMPTER_COLUMNS, args.json, sys.stdout)
        elif args.waits:
            write_pieces(sink.pieces("waits"), WAIT_COLUMNS, args.json, sys.stdout)
        else:
            write_pieces(sink.pieces("gaps"), gap_tables.GAP_COLUMNS, args.json, sys.stdout)
    finally:
        sink.close()
    return 0
