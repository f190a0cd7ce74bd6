"""hostwire pcapcols: a capture file as the wire-timeline table (summary, or a Parquet/CSV file)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hostwire.errors import UsageError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "pcapcols",
        help="read a pcap/pcapng into the wire-timeline table (TCP/UDP frames), summarize or export it",
        description="Reads FILE through hw-pcapcols. Without -o, prints the frame counts by kind, the "
        "malformed frames and the time span; with -o, writes the table (.parquet or .csv).",
        epilog="examples:\n"
        "  hostwire pcapcols raw/wire.pcap\n"
        "  hostwire pcapcols raw/wire.pcap --wirecap raw/wirecap.json -o wire.parquet",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("file", type=Path, help="pcap or pcapng file")
    parser.add_argument("--wirecap", type=Path, metavar="JSON",
                        help="wirecap.json: map the stamps onto CLOCK_MONOTONIC with its clock pairs")
    parser.add_argument("-o", "--output", type=Path, help="write the table: .parquet or .csv")
    parser.add_argument("--keep-damaged", action="store_true",
                        help="a file cut short: keep the frames before the damage (exit 1 still)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hostwire.read.pcap import read_pcap, read_wirecap_json
    from hostwire.safewrite import write_with

    if args.output and args.output.suffix not in (".parquet", ".csv"):
        raise UsageError(f"output {args.output}: expected a .parquet or .csv file name")
    pairs = read_wirecap_json(args.wirecap)["clock_pairs"] if args.wirecap else None
    df = read_pcap(args.file, clock_pairs=pairs, keep_damaged=args.keep_damaged)
    out = sys.stdout
    if args.output:
        table = df.copy()
        for col in ("src", "dst"):
            table[col] = table[col].astype(str)
        if args.output.suffix == ".parquet":
            write_with(args.output, lambda handle: table.to_parquet(handle, index=False))
        else:
            write_with(args.output, lambda handle: table.to_csv(handle, index=False))
    attrs = df.attrs
    out.write(f"{args.file}: {attrs['file_format']}, link type {attrs['link_type']}, snap length "
              f"{attrs['snaplen']}, stamps {attrs['tstamp_precision']}\n")
    out.write(f"frames {attrs['frames']}, TCP/UDP rows {len(df)}")
    for kind, count in sorted(attrs["skipped"].items()):
        out.write(f", {kind} {count}")
    out.write("\n")
    if attrs["malformed"]:
        shown = ", ".join(str(f) for f in attrs["malformed"][:20])
        more = f" (+{len(attrs['malformed']) - 20} more)" if len(attrs["malformed"]) > 20 else ""
        out.write(f"malformed frames {len(attrs['malformed'])}: {shown}{more}\n")
    if len(df):
        span = (int(df["t_ns"].iloc[-1]) - int(df["t_ns"].iloc[0])) / 1e9
        clock = "CLOCK_MONOTONIC" if attrs["clock_map"] else "pcap clock"
        out.write(f"first {int(df['t_ns'].iloc[0])} ns, last {int(df['t_ns'].iloc[-1])} ns ({clock}), "
                  f"span {span:.6f} s\n")
    if attrs["damage"]:
        sys.stderr.write(f"hostwire: {attrs['damage']['message']}\n")
        return 1
    return 0
