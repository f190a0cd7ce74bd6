"""hostwire record [-o DIR] [-i IFACE]... [--duration D] -- CMD [ARGS]: the three timelines of any
program on this host, into a run directory that every analysis reads (docs/record.md)."""

from __future__ import annotations

import argparse
import sys

EXAMPLES = """examples:
  hostwire record -- iperf3 -c 198.18.0.2 -t 5             a program, from its start to its end
  hostwire record -o runs/curl -- curl -o /dev/null http://198.18.0.2:8000/big
  hostwire record -i eth0 --duration 10 -- ./server        only eth0; the command is stopped after 10 s
  hostwire record --pid 4242 --duration 30                 a running process, left running
  hostwire record --syscalls ptrace -- ./client            call arguments and exact fd-to-socket mapping
  hostwire gaps RUN --summary                              then: why the traffic paused
  hostwire report RUN                                      a one-run report (RUN/report.html)

what is recorded: the wire on every interface that is up in the program's network namespace
(loopback included; -i narrows it), the kernel's context switches and wake-ups of every task of
every CPU (so preemption by other programs is visible), the program's I/O system calls (tracefs:
the kernel's syscall events of its process tree; ptrace or preload: hw-iotrace) and which of its
processes holds which socket. The link rate that the gap rules need: --link-rate, else a shaping
qdisc's rate (tbf, htb), else the interface's speed; the manifest says which.

Ctrl-C reaches the command as in a terminal; hostwire waits briefly for it to end (then SIGTERM,
SIGKILL), stops the recording and keeps everything, marked partial.

exit status: the command's own (128+N when signal N ended it), like strace; with --pid 0 when
recorded; 2 a usage error (bad option, no such command, process or interface: nothing started);
1 hostwire failed before the command started."""


def register(subparsers: argparse._SubParsersAction) -> None:
    from hostwire.commands.common import duration, link_rate

    p = subparsers.add_parser(
        "record", help="record any program's calls, scheduling and traffic (-- CMD, or --pid PID)",
        description="Record the three timelines of a program on this host: a command run to its end, or a "
        "running process (--pid). The output is a run directory that 'hostwire gaps', 'timeline', "
        "'metrics' and 'report' read.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-o", "--output", metavar="DIR", help="run directory to write (default runs/record-<time>)")
    p.add_argument("-i", "--interface", dest="interfaces", action="append", default=[], metavar="IFACE",
                   help="capture on this interface only (repeatable; default: every interface that is up)")
    p.add_argument("--duration", type=duration, metavar="D",
                   help="stop after D (500ms, 10s, 1m): the command gets SIGINT; --pid: stop recording")
    p.add_argument("--pid", type=int, metavar="PID", help="record this running process and its descendants")
    p.add_argument("--syscalls", default="tracefs", choices=("tracefs", "ptrace", "preload", "none"),
                   help="how the calls are recorded (default tracefs: the kernel's syscall events, lowest cost)")
    p.add_argument("--no-waits", dest="waits", action="store_false",
                   help="tracefs: not the calls the program blocks in (futex, epoll_wait, clock_nanosleep, ...), "
                        "which name what an idle sender waited for (gaps' waited_in)")
    p.add_argument("--link-rate", type=link_rate, metavar="RATE", help="the link's rate (10mbit, 1gbit) when the host cannot tell it")
    p.add_argument("--no-kernel-trace", dest="kernel_trace", action="store_false",
                   help="no context switches (with --syscalls ptrace or preload only)")
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- CMD [ARGS]", help="the program to run")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from hostwire.errors import UsageError
    from hostwire.record.program import RecordRequest, record, stderr_progress

    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if args.duration is not None and args.duration <= 0:
        raise UsageError("record: --duration: expected a positive duration")
    req = RecordRequest(command=command, pid=args.pid, output=Path(args.output) if args.output else None,
                        interfaces=args.interfaces, duration_ns=args.duration, syscalls=args.syscalls,
                        link_rate_bit_s=None if args.link_rate is None else args.link_rate.bit_s, kernel_trace=args.kernel_trace or args.syscalls == "tracefs",
                        waits=args.waits)
    result = record(req, stderr_progress)
    attribution = result.manifest.get("attribution") or {}
    losses = {k: v for k, v in result.manifest.get("losses", {}).items() if isinstance(v, int) and v > 0
              and not k.endswith("_ok")}
    sys.stderr.write(
        f"hostwire: {result.directory}: {result.status}{' (' + result.reason + ')' if result.reason else ''}; "
        f"{attribution.get('frames', 0)} frames, {attribution.get('frames_attributed', 0)} of the program, "
        f"{attribution.get('frames_foreign', 0)} foreign"
        f"{'; losses: ' + ', '.join(f'{k} {v}' for k, v in losses.items()) if losses else '; no loss'}\n")
    return result.exit_status
