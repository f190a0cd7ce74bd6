"""hostwire overhead: what each collector adds to the ping-pong (per context switch or per traced
call, with a 95 % interval), the peers beside it, the probes' costs, and the switch rates of the
user's own campaigns at which each cost would reach 1 % of a CPU."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from hostwire.errors import UsageError

log = logging.getLogger(__name__)

EXAMPLES = """examples:
  hostwire overhead
  hostwire overhead --loops 100000 --runs 5 --cpu 0 -o out/overhead
  hostwire overhead --json > overhead.json
  hostwire overhead --no-pingpong --program --program-runs 7 -r 1    iperf3 under hostwire record and the peers"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "overhead", help="the probe effect of each collector, against its peers",
        description=(
            "Runs `hw-bench pingpong` pinned to one CPU, in rounds (round-robin) of: bare; hw-schedtrace;\n"
            "hw-schedtrace -s; hw-iotrace ptrace; the ptrace floor; hw-iotrace --preload; hw-wirecap on\n"
            "loopback; all of hostwire's collectors together; and the peers trace-cmd record, perf sched\n"
            "record and strace -f where installed. Prints per configuration the median and spread of the\n"
            "round trip, the added cost per switch (2 per round trip) or per traced call (4 per round\n"
            "trip) with a 95 % bootstrap interval over paired rounds, the switches (calls) per second\n"
            "that cost 1 % of a CPU, the switch rates of the campaigns under runs/, the peer ratios and\n"
            "the probes' costs (hw-bench probes).\n\n"
            "With --program, also a real program: iperf3 (throughput) and tcp-rr (one-byte TCP round\n"
            "trips) between two network namespaces joined by a bare veth, alone and under hostwire\n"
            "record (tracefs, ptrace), record's capture and its kernel trace alone, perf trace, strace -f\n"
            "and trace-cmd record -F, in rounds; each figure as a ratio to the program alone in the same\n"
            "round (docs/overhead.md)."),
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--loops", type=int, default=50000, help="round trips per run (default 50000)")
    parser.add_argument("--runs", type=int, default=15, help="rounds (default 15)")
    parser.add_argument("--cpu", type=int, default=0, help="the ping-pong's CPU (default 0)")
    parser.add_argument("-r", "--rt-prio", type=int, default=0, metavar="PRIO",
                        help="run the ping-pong (with --program: the program, its tool and the servers) at "
                             "SCHED_FIFO PRIO (1-99), so that other load on a shared machine cannot preempt it "
                             "(default: the normal scheduler)")
    parser.add_argument("--probe-calls", type=int, default=1000000, help="calls per probe (default 1000000)")
    parser.add_argument("--runs-dir", type=Path, default=None, help="where campaigns live (default runs/)")
    parser.add_argument("--accuracy", type=int, default=0, metavar="R",
                        help="also record the default grid point R times with no collector and R times with "
                             "each of --sets, and say per set whether it changes the answer (MSHN method)")
    parser.add_argument("--sets", default="kernel,kernel+ptrace,wire+kernel+tracefs",
                        help="collector sets for --accuracy (point.COLLECTOR_SETS), comma-separated")
    parser.add_argument("--accuracy-dir", type=Path, default=None, metavar="DIR",
                        help="where --accuracy records its runs (default: a temporary directory, removed)")
    parser.add_argument("--no-pingpong", action="store_true", help="skip the ping-pong and the probes")
    parser.add_argument("--program", action="store_true",
                        help="also measure iperf3 and tcp-rr between two namespaces under hostwire record and the "
                             "peers (needs root, iperf3; the tools write under TMPDIR)")
    parser.add_argument("--program-runs", type=int, default=5, metavar="R", help="rounds of --program (default 5)")
    parser.add_argument("--program-seconds", type=int, default=3, metavar="S",
                        help="iperf3 -t S in --program (default 3)")
    parser.add_argument("--rr-loops", type=int, default=10000, metavar="N",
                        help="tcp-rr round trips per run in --program (default 10000)")
    parser.add_argument("-o", "--output", type=Path, metavar="DIR",
                        help="write overhead.md, overhead.csv, overhead.png (and overhead.json; with --program "
                             "overhead-program.csv) there")
    parser.add_argument("--json", action="store_true", help="print the result as JSON instead of the tables")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hostwire.overhead import accuracy, measure, output

    if args.loops < 1:
        raise UsageError("--loops must be at least 1")
    if args.runs < 2:
        raise UsageError("--runs must be at least 2 (an interval needs two paired rounds)")
    if not 0 <= args.rt_prio <= 99:
        raise UsageError("--rt-prio must be from 1 to 99 (0: the normal scheduler)")
    if args.probe_calls < 1:
        raise UsageError("--probe-calls must be at least 1")
    from hostwire.record.point import COLLECTOR_SETS

    sets = [s for s in args.sets.split(",") if s]
    for s in sets:
        if s not in COLLECTOR_SETS or s == "none":
            raise UsageError(f"--sets: unknown collector set {s!r} (expected some of "
                             f"{', '.join(k for k in COLLECTOR_SETS if k != 'none')})")
    if args.program and args.program_runs < 2:
        raise UsageError("--program-runs must be at least 2 (an interval needs two paired rounds)")
    if args.program_seconds < 1:
        raise UsageError("--program-seconds must be at least 1")
    if args.rr_loops < 1:
        raise UsageError("--rr-loops must be at least 1")
    if args.accuracy == 1 or args.accuracy < 0:
        raise UsageError("--accuracy needs at least 2 repetitions (an interval needs two pairs)")
    if args.no_pingpong:
        result = measure.Result(args.loops, 0, args.cpu, measure.other_cpu(args.cpu), [], [], [], [])
    else:
        result = measure.run_overhead(args.loops, args.runs, args.cpu, runs_dir=args.runs_dir,
                                       probe_calls=args.probe_calls, rt_prio=args.rt_prio, progress=log.info)
    if args.program:
        from hostwire.overhead.program import measure_program

        result.program_rows = measure_program(args.program_runs, args.program_seconds, args.rr_loops,
                                              rt_prio=args.rt_prio, progress=log.info)
        result.program_settings = {"runs": args.program_runs, "seconds": args.program_seconds,
                                   "rr_loops": args.rr_loops, "rt_prio": args.rt_prio}
        result.notes += [r.message for r in result.program_rows if r.message]
    accuracy_text = ""
    if args.accuracy:
        import shutil
        import tempfile

        root = args.accuracy_dir or Path(tempfile.mkdtemp(prefix="hw-accuracy-"))
        try:
            rows, table = accuracy.run_accuracy(root, args.accuracy, sets, progress=log.info)
        finally:
            if args.accuracy_dir is None:
                shutil.rmtree(root, ignore_errors=True)
        result.accuracy = table
        accuracy_text = output.accuracy_markdown(table, args.accuracy)
    for note in result.notes:
        sys.stderr.write(f"hostwire: overhead: {note}\n")
    if args.output:
        for path in output.write_outputs(result, args.output):
            log.info("wrote %s", path)
    if args.json:
        data = result.to_json()
        data["ratios"] = output.ratio_lines(result)
        data["program_ratios"] = output.program_ratio_lines(result) if args.program else []
        json.dump(data, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        if not args.no_pingpong:
            sys.stdout.write(output.markdown(result))
            sys.stdout.write("\n" + "\n".join(output.ratio_lines(result)) + "\n")
        if args.program:
            sys.stdout.write("\n" + output.program_markdown(result) + "\n" +
                             "\n".join(output.program_ratio_lines(result)) + "\n")
        if accuracy_text:
            sys.stdout.write("\n" + accuracy_text)
    return 0
