"""hostwire doctor: what this machine lacks for hostwire, with the fix; --cleanup removes leftovers."""

from __future__ import annotations

import argparse
import sys



def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "doctor",
        help="check root, tracefs, namespaces, ptrace, libraries, CPUs; --cleanup removes leftovers",
        description="Lists each facility hostwire needs that this machine lacks, once, with the fix, "
        "and what killed runs left behind (namespaces, tracefs instances, runs not yet marked). "
        "Exit 0 when nothing is missing or left, 1 otherwise.",
        epilog="examples:\n  hostwire doctor\n  hostwire doctor --cleanup\n"
        "  hostwire doctor --cleanup root@pc2   # a killed [hosts] campaign's scratch folder on pc2",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--cleanup", nargs="*", metavar="HOST",
                        help="remove stale hw* namespaces (with their veths and qdiscs) and hw-* tracefs "
                        "instances left by killed runs, and mark those runs partial ('runner killed'); "
                        "with HOSTs (as in [hosts]): the scratch folders killed campaigns left on them")
    parser.add_argument("--ssh-config", default="", metavar="FILE", help="with --cleanup HOST: ssh -F FILE")
    parser.add_argument("--remote-dir", default="", metavar="DIR",
                        help="with --cleanup HOST: the campaign's remote_dir, searched besides the temporary folder")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hostwire.record import doctor

    out = sys.stdout
    if args.cleanup:
        from hostwire.errors import UsageError
        from hostwire.record.hosts import Host, HostsSpec, parse_destination
        from hostwire.record.remote_scratch import cleanup_host

        try:
            spec = HostsSpec(ssh_config=args.ssh_config, remote_dir=args.remote_dir.rstrip("/"))
            hosts = [Host("host", parse_destination(text), spec) for text in args.cleanup]
        except UsageError as err:
            raise UsageError(f"--cleanup: {err}") from None
        results = [cleanup_host(host) for host in hosts]
        lines = [line for host_lines, _ in results for line in host_lines]
        out.write("".join(f"{line}\n" for line in lines) or "nothing to clean up\n")
        return 0 if all(ok for _, ok in results) else 1
    if args.cleanup is not None:
        removed = doctor.cleanup()
        for item in removed:
            out.write(f"removed {item}\n")
        if not removed:
            out.write("nothing to clean up\n")
        return 0
    findings = doctor.run_checks()
    missing = [f for f in findings if not f.ok]
    for finding in findings:
        mark = "ok  " if finding.ok else "MISSING"
        line = f"{mark:8}{finding.facility}: {finding.detail}"
        if not finding.ok and finding.fix:
            line += f"  -> fix: {finding.fix}"
        out.write(line + "\n")
    leftovers = doctor.leftovers()
    for line in leftovers:
        out.write(f"LEFT    {line} -> fix: hostwire doctor --cleanup\n")
    return 1 if missing or leftovers else 0
