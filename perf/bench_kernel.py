"""The paper's table 2 redone: the cost of a process switch on the stock and on the schedtrace-
patched guest kernel, each booted fresh in QEMU, measured by hw-bench pingpong (two processes on
one CPU passing a byte: one round trip is two switches).

Rows per kernel: the bare ping-pong; on the patched kernel also with /proc/schedtrace recording
(the ring sized to hold every record, so that none is dropped); on both, with tracefs
sched_switch recording through hw-schedtrace (the stock kernel's own instrument). Each figure is
the median of --rounds ping-pongs of --loops round trips. Without KVM the guest is emulated: the
absolute figures are then emulated time, and only the ratios within one table mean much.

    .venv/bin/python perf/bench_kernel.py [--loops N] [--rounds R] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
from pathlib import Path

from hostwire import paths

from hostwire.record import vm
from hostwire.errors import HostwireError

RING_RECORDS = 4 * 1024 * 1024


def guest_script(flavour: str, loops: int, rounds: int) -> str:
    bench, schedtrace = paths.tool("hw-bench"), paths.tool("hw-schedtrace")
    pingpong = f"{bench} pingpong --loops {loops} --cpu 0"
    lines = ["set -e", ": > results.tsv"]
    for i in range(rounds):
        lines.append(f"printf 'bare\\t%s\\n' \"$({pingpong})\" >> results.tsv")
        lines.append(f"{schedtrace} -o tf{i} -e sched:sched_switch -- sh -c "
                     f"'printf \"tracefs\\t%s\\n\" \"$({pingpong})\" >> results.tsv' > /dev/null")
        lines.append(f"rm -rf tf{i}")
        if flavour == "patched":
            lines += ["echo disable > /proc/schedtrace_control", f"echo 'size {RING_RECORDS}' > /proc/schedtrace_control",
                      "echo clear > /proc/schedtrace_control", "echo enable > /proc/schedtrace_control",
                      f"printf 'schedtrace\\t%s\\n' \"$({pingpong})\" >> results.tsv",
                      "echo disable > /proc/schedtrace_control",
                      "grep -E '^(written|lost) ' /proc/schedtrace_control | tr ' ' '\\t' >> ring.tsv",
                      "echo clear > /proc/schedtrace_control"]
    return "\n".join(lines) + "\n"


def microseconds(text: str) -> float:
    """hw-bench pingpong's line: `pingpong: loops=N round_trip_us=X`."""
    found = re.search(r"round_trip_us=([0-9.]+)", text)
    if found is None:
        raise HostwireError(f"hw-bench pingpong printed no round_trip_us: {text!r}")
    return float(found.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--loops", type=int, help="round trips per ping-pong (100000; 20000 when emulated)")
    parser.add_argument("--rounds", type=int, help="ping-pongs per row (5; 3 when emulated)")
    parser.add_argument("--out", type=Path, help="keep the guests' files here")
    args = parser.parse_args()
    try:
        for flavour in vm.FLAVOURS:
            vm.kernel_image(flavour)
    except HostwireError as err:
        print(f"bench_kernel: skipped: {err}")
        return 0
    kvm = vm.kvm_usable()
    args.loops = args.loops or (100_000 if kvm else 20_000)
    args.rounds = args.rounds or (5 if kvm else 3)
    out = args.out or Path(tempfile.mkdtemp(prefix="hostwire-kernel-bench-"))
    table: dict[str, dict[str, float]] = {}
    boots = {}
    for flavour in vm.FLAVOURS:
        share = out / flavour
        boot = vm.boot(flavour, guest_script(flavour, args.loops, args.rounds), share)
        if boot.failure():
            print(f"bench_kernel: {boot.failure()}", file=sys.stderr)
            return 1
        boots[flavour] = boot
        rows: dict[str, list[float]] = {}
        for line in (share / "results.tsv").read_text().splitlines():
            name, text = line.split("\t", 1)
            rows.setdefault(name, []).append(microseconds(text))
        table[flavour] = {name: statistics.median(values) for name, values in rows.items()}
        ring = share / "ring.tsv"
        if ring.exists():
            counts: dict[str, int] = {}
            for line in ring.read_text().splitlines():
                key, value = line.split("\t")
                counts[key] = counts.get(key, 0) + int(value)
            table[flavour]["ring_written"] = counts.get("written", 0)
            table[flavour]["ring_lost"] = counts.get("lost", 0)
    emulated = any(b.emulated for b in boots.values())
    print(f"table 2 redone: hw-bench pingpong, {args.loops} round trips, median of {args.rounds}"
          + (" (EMULATED guests: no KVM here; times are emulated)" if emulated else " (KVM)"))
    print(f"{'kernel':<9} {'instrument':<12} {'us/round trip':>14} {'us/switch':>10} {'vs bare':>8}")
    for flavour, rows in table.items():
        bare = rows["bare"]
        for name in ("bare", "schedtrace", "tracefs"):
            if name in rows:
                print(f"{flavour:<9} {name:<12} {rows[name]:>14.2f} {rows[name] / 2:>10.2f} {rows[name] / bare:>8.3f}")
    print(f"patched/stock, bare: {table['patched']['bare'] / table['stock']['bare']:.3f}")
    if "ring_written" in table["patched"]:
        print(f"ring: {table['patched']['ring_written']} records written, {table['patched']['ring_lost']} lost")
    (out / "table2.json").write_text(json.dumps({"loops": args.loops, "rounds": args.rounds, "emulated": emulated,
                                                 "table": table,
                                                 "boots": {f: b.manifest() for f, b in boots.items()}}, indent=2))
    print(f"files: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
