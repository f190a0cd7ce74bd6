"""The per-switch cost of recording the scheduler, three ways, in one run: the stock kernel's
tracefs sched_switch, the patched kernel's custom:sched_switch_ext_tp (the series in
kernel-patches/) and v1's /proc/schedtrace ring (the series' first version, rebuilt from the
project's history by scripts/kernel.sh build v1); each kernel booted fresh in QEMU, measured by
hw-bench pingpong (two processes on one CPU passing a byte: one round trip is two switches), as
the paper's table 2 did.

Rows per kernel: the bare ping-pong, then the same under each instrument the kernel has:
tracefs sched_switch on all three (hw-schedtrace -e sched:sched_switch), the event on the
patched one (hw-schedtrace -e custom:sched_switch_ext_tp), the ring on v1. Every recorder is
read after the ping-pong, as v1's ring was: tracefs buffers sized to hold every event, without
hw-schedtrace's drain (on an emulated host a drain on the guest's other vCPU would be what is
measured); the ring sized likewise; the losses are printed (0 expected). Each figure is the median of --rounds ping-pongs of --loops
round trips, bare and instrumented alternating. The cost an instrument adds per switch is half
the round trip's growth over the same kernel's bare figure; the ratios compare those costs with
stock sched_switch's, and with the same kernel's sched_switch (free of differences between boots). Without KVM the guest is emulated: the absolute figures are then emulated
time, and only the ratios within one table mean much.

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
# the instruments measured on each kernel, in this order in every round
INSTRUMENTS = {"stock": ("sched_switch",), "patched": ("sched_switch", "switch_ext"),
               "v1": ("sched_switch", "v1_ring")}
EVENTS = {"sched_switch": "sched:sched_switch", "switch_ext": "custom:sched_switch_ext_tp"}


def buffer_kib(loops: int) -> int:
    """Per-CPU tracefs buffer that holds every event of a ping-pong: two switches a round trip,
    at most 160 bytes each with the ring buffer's headers, three times over."""
    return max(4096, 3 * loops * 2 * 160 // 1024)


def lost_events(log: str) -> int:
    """The events hw-schedtrace's buffers lost, from its `... lost: overrun N, dropped N, ...` lines."""
    return sum(int(n) for line in log.splitlines() if "lost:" in line
               for n in re.findall(r"(?:overrun|dropped) (\d+)", line))


def guest_script(flavour: str, loops: int, rounds: int) -> str:
    bench, schedtrace = paths.tool("hw-bench"), paths.tool("hw-schedtrace")
    pingpong = f"{bench} pingpong --loops {loops} --cpu 0"
    lines = ["set -e", ": > results.tsv"]
    for i in range(rounds):
        lines.append(f"printf 'bare\\t%s\\n' \"$({pingpong})\" >> results.tsv")
        for name in INSTRUMENTS[flavour]:
            if name in EVENTS:
                # like v1's ring, read after the ping-pong: no collector runs beside it (on an
                # emulated host its other vCPU would be the cost measured), the buffer holds all
                lines.append(f"{schedtrace} -o tf{i} -e {EVENTS[name]} -b {buffer_kib(loops)} --no-drain -- sh -c "
                             f"'printf \"{name}\\t%s\\n\" \"$({pingpong})\" >> results.tsv' > /dev/null "
                             f"2>> collector.log")
                lines.append(f"rm -rf tf{i}")
            else:
                lines += ["echo disable > /proc/schedtrace_control",
                          f"echo 'size {RING_RECORDS}' > /proc/schedtrace_control",
                          "echo clear > /proc/schedtrace_control", "echo enable > /proc/schedtrace_control",
                          f"printf '{name}\\t%s\\n' \"$({pingpong})\" >> results.tsv",
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


def measure(flavour: str, loops: int, rounds: int, share: Path) -> tuple[vm.Boot, dict[str, float]]:
    """One fresh guest of `flavour`: the median µs per round trip of each row, and v1's ring counts."""
    boot = vm.boot(flavour, guest_script(flavour, loops, rounds), share)
    if boot.failure():
        raise HostwireError(str(boot.failure()))
    rows: dict[str, list[float]] = {}
    for line in (share / "results.tsv").read_text().splitlines():
        name, text = line.split("\t", 1)
        rows.setdefault(name, []).append(microseconds(text))
    medians = {name: statistics.median(values) for name, values in rows.items()}
    collector = share / "collector.log"
    if collector.exists():
        medians["tracefs_lost"] = lost_events(collector.read_text())
    ring = share / "ring.tsv"
    if ring.exists():
        counts: dict[str, int] = {}
        for line in ring.read_text().splitlines():
            key, value = line.split("\t")
            counts[key] = counts.get(key, 0) + int(value)
        medians["ring_written"] = counts.get("written", 0)
        medians["ring_lost"] = counts.get("lost", 0)
    return boot, medians


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--loops", type=int, help="round trips per ping-pong (100000; 20000 when emulated)")
    parser.add_argument("--rounds", type=int, help="ping-pongs per row (5; 3 when emulated)")
    parser.add_argument("--out", type=Path, help="keep the guests' files here")
    args = parser.parse_args()
    try:
        for flavour in INSTRUMENTS:
            vm.kernel_image(flavour)
    except HostwireError as err:
        print(f"bench_kernel: skipped: {err} (scripts/kernel.sh build all)")
        return 0
    kvm = vm.kvm_usable()
    args.loops = args.loops or (100_000 if kvm else 20_000)
    args.rounds = args.rounds or (5 if kvm else 3)
    out = args.out or Path(tempfile.mkdtemp(prefix="hostwire-kernel-bench-"))
    table: dict[str, dict[str, float]] = {}
    boots = {}
    for flavour in INSTRUMENTS:
        try:
            boots[flavour], table[flavour] = measure(flavour, args.loops, args.rounds, out / flavour)
        except HostwireError as err:
            print(f"bench_kernel: {err}", file=sys.stderr)
            return 1
    emulated = any(b.emulated for b in boots.values())
    # µs each instrument adds per switch, over the same kernel's bare ping-pong
    added = {(flavour, name): (table[flavour][name] - table[flavour]["bare"]) / 2
             for flavour in INSTRUMENTS for name in INSTRUMENTS[flavour]}
    reference = added[("stock", "sched_switch")]
    print(f"per-switch cost: hw-bench pingpong, {args.loops} round trips, median of {args.rounds}"
          + (" (EMULATED guests: no KVM here; times are emulated)" if emulated else " (KVM)"))
    print(f"{'kernel':<8} {'instrument':<13} {'us/round trip':>14} {'us/switch':>10} {'added us/switch':>16} "
          f"{'vs stock sched_switch':>22} {'vs own sched_switch':>20}")
    for flavour, rows in table.items():
        print(f"{flavour:<8} {'bare':<13} {rows['bare']:>14.2f} {rows['bare'] / 2:>10.2f}")
        own = added[(flavour, "sched_switch")]  # the same kernel's: free of the boots' differences
        for name in INSTRUMENTS[flavour]:
            cost = added[(flavour, name)]
            ratio = cost / reference if reference > 0 else float("nan")
            ratio_own = cost / own if own > 0 else float("nan")
            print(f"{flavour:<8} {name:<13} {rows[name]:>14.2f} {rows[name] / 2:>10.2f} {cost:>16.2f} {ratio:>22.3f} "
                  f"{ratio_own:>20.3f}")
    for flavour in ("patched", "v1"):
        print(f"{flavour}/stock, bare: {table[flavour]['bare'] / table['stock']['bare']:.3f}")
    print(f"v1 ring: {table['v1'].get('ring_written', 0):.0f} records written, "
          f"{table['v1'].get('ring_lost', 0):.0f} lost; tracefs events lost: "
          + ", ".join(f"{f} {rows.get('tracefs_lost', 0):.0f}" for f, rows in table.items()))
    (out / "switch_cost.json").write_text(json.dumps({
        "loops": args.loops, "rounds": args.rounds, "emulated": emulated, "table": table,
        "added_us_per_switch": {f"{f}/{n}": v for (f, n), v in added.items()},
        "boots": {f: b.manifest() for f, b in boots.items()}}, indent=2))
    print(f"files: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
