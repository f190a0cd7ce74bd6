"""hostwire metrics KIND INPUT: the traffic metrics of DESIGN.md section 8 on a pcap, a frame table
(.parquet) or a run directory, as CSV on stdout (or --json)."""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

import numpy as np
import pandas as pd

KINDS: dict[str, tuple[str, str]] = {
    "intervals": (
        "frame gaps per stream (and write gaps per sending process on a run)",
        "columns: stream, kind (frame|write), count, min_ns, p1_ns, p50_ns, p90_ns, p99_ns, max_ns;\n"
        "the stream `all` is the gaps of all data frames merged. With --hist: stream, kind, lo_ns,\n"
        "hi_ns, count (log-spaced bins [lo, hi), --per-decade bins per decade, empty bins left out)."),
    "bursts": (
        "off threshold, bursts, frames and bytes per burst, on and off durations, on/off ratio",
        "columns: stream, theta_ns (off threshold used), frames, bursts, frames_{mean,p50,p99,max},\n"
        "bytes_{mean,p50,p99,max} (payload bytes per burst), on_{mean,p50,p99,max}_ns (burst duration,\n"
        "first to last frame), off_{mean,p50,p99,max}_ns (gaps >= theta; empty without one),\n"
        "on_total_ns, off_total_ns, on_off_ratio (inf without an off period)."),
    "idc": (
        "index of dispersion for counts (frames, or --bytes) over log-spaced bin lengths t",
        "columns: stream, t_ns (bin length), bins (K = floor(W / t) >= 10), mean, var (ddof 1),\n"
        "idc = var / mean of the frames (or payload bytes with --bytes) per bin."),
    "hurst": (
        "Hurst parameter from the variance-time slope, with its fit range",
        "columns: stream, hurst (= slope / 2 of log Var(N_t) on log t), beta (= 2 - slope), fit_from_ns,\n"
        "fit_to_ns, points, r2. Default fit range: the upper half (log scale) of the t grid."),
    "contract": (
        "zero-loss dual-leaky-bucket contract in ATM cells: MBS_min over an SCR grid, or SCR for --mbs",
        "columns: stream, scr_cells_s, t_s_ns (1/SCR), tau_min_ns, mbs_min; `all` averages tau_min_ns\n"
        "and mbs_min over the streams at each SCR. With --mbs M: stream, mbs, scr_cells_s, t_s_ns,\n"
        "tau_min_ns, bt_ns, bounded_by_trace (the smallest SCR whose MBS_min <= M)."),
    "fairness": (
        "Jain's fairness index over the streams and bytes delivered per stream",
        "columns: stream, n, jain, bytes. On a pcap bytes are the unique payload bytes first seen on the\n"
        "wire within the window, as for goodput; a starved connection with 0. On a run they are the\n"
        "receivers' reads within the window (every sender's stream listed, a starved one with 0), basis\n"
        "= app, and with a capture wire_bytes and wire_jain (the wire figure) stand beside them."),
    "goodput": (
        "unique payload bytes on the wire within the window per second, and the receivers' figure",
        "columns: stream, bytes (unique payload bytes per stream: the union of the frames' sequence\n"
        "ranges, each byte counted once at the time it first crossed the wire, if within the window),\n"
        "seconds (window length), bit_s. On a run also basis (wire, or app without a capture: bytes and\n"
        "bit_s are then the receivers'), app_bytes and app_bit_s (the receivers' reads within the window)."),
    "sanity": (
        "impossible intervals, retransmissions, window vs flight, and the run's loss counters",
        "columns: counter, value. Counters: frames, frame_gaps, impossible_intervals (gap shorter than\n"
        "(1 - --tolerance) x the serialization time at --link-rate, in each stream's data direction),\n"
        "impossible_share, tcp_retransmissions, min_advertised_window (bytes, scaled by the window scale\n"
        "of the handshake), window_scale_unknown_streams (handshake not captured), max_bytes_in_flight,\n"
        "wire_clock_residual_ns and wire_clock_bound_ns (a run's capture clock against its clock exchange),\n"
        "capture_drops, trace_overruns, tracer_misses, log_overflows, sieve_failures, unclean_exits,\n"
        "shaper_drops (mark) and shaper_overlimits (never mark), loss.* (each manifest counter),\n"
        "failed_checks and check.* (1 ok, 0 failed); data_frames, retransmitted_share (marks above\n"
        "--max-retransmit-share), zero_window_advertisements (zero window with data outstanding: marks);\n"
        "window_ns, window_planned_ns, incomplete_run, window_cut (mark); goodput_wire_bit_s,\n"
        "goodput_app_bit_s, goodput_max_bit_s (payload share of the line rate for the window's frames),\n"
        "goodput_above_max (marks); damaged_sources and damage.<file>.byte_offset|line|frame (mark: a\n"
        "damaged capture or log is read up to its damage); marked (1 when anything above marks the run)."),
}

EXAMPLES = """examples:
  hostwire metrics intervals raw/wire.pcap --hist
  hostwire metrics idc runs/quick/r1 --bytes --json
  hostwire metrics contract wire.pcap --link-rate 10mbit --points 50
  hostwire metrics contract runs/quick/r1 --mbs 32 --cells-from write
  hostwire metrics fairness runs/quick/r1 --from 0.5 --to 10
  hostwire metrics goodput runs/quick/r1 --partial
  hostwire metrics sanity runs/quick/r1 --check"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "metrics", help="traffic metrics of a capture or a run (intervals, bursts, idc, hurst, contract, ...)",
        description="Compute one traffic metric on INPUT (a pcap file, a .parquet frame table or a run "
        "directory) and write it as CSV on stdout (--json for JSON). One row per stream (named "
        "src:port>dst:port in the direction carrying payload) plus `all` where it makes sense.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    kinds = parser.add_subparsers(dest="kind", metavar="KIND", parser_class=type(parser))
    for kind, (summary, columns) in KINDS.items():
        sub = kinds.add_parser(kind, help=summary, description=f"{summary}.\n\n{columns}",
                               epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
        _common(sub)
        globals()[f"_options_{kind}"](sub)
        sub.set_defaults(func=run)
    parser.set_defaults(func=lambda args: _no_kind(parser))


def default_options(kind: str) -> argparse.Namespace:
    """The options of `hostwire metrics KIND` at their defaults, for library callers
    (hostwire.metrics.compute.table): built from this command's parser alone, so that a library
    caller imports no other command."""
    from hostwire.errors import UsageError

    if kind not in KINDS:
        raise UsageError(f"unknown metric kind {kind!r}; expected one of {', '.join(KINDS)}")
    parser = argparse.ArgumentParser(prog=f"hostwire metrics {kind}")
    _common(parser)
    globals()[f"_options_{kind}"](parser)
    args = parser.parse_args(["INPUT"])
    args.kind = kind
    return args


def _no_kind(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def add_time_range(p: argparse.ArgumentParser, origin: str) -> None:
    """--from/--to SEC (from_s, to_s): a part of the window, in seconds after `origin`."""
    p.add_argument("--from", dest="from_s", type=float, metavar="SEC", help=f"start, seconds after {origin}")
    p.add_argument("--to", dest="to_s", type=float, metavar="SEC", help="end, seconds after the same origin")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("input", metavar="INPUT", help="pcap file, .parquet frame table or run directory")
    add_time_range(p, "the default window's start (run: logging window; pcap: first frame)")
    p.add_argument("--stream", action="append", metavar="NAME|PORT",
                   help="only this stream (full name or a port of either end); repeatable")
    p.add_argument("--json", action="store_true", help="JSON records instead of CSV")
    p.add_argument("--partial", action="store_true",
                   help="compute on the intact part of a damaged capture or log (default: stop, naming the file "
                   "and where it is damaged); the result is marked and each damage named on stderr. sanity "
                   "always reads what it can and counts the damage")


def _options_intervals(p: argparse.ArgumentParser) -> None:
    p.add_argument("--hist", action="store_true", help="log-binned histogram instead of the summary")
    p.add_argument("--per-decade", type=int, default=10, help="histogram bins per decade (default 10)")


def _options_bursts(p: argparse.ArgumentParser) -> None:
    p.add_argument("--theta-factor", type=float, default=20.0,
                   help="off threshold as a multiple of the stream's median frame gap (default 20)")
    p.add_argument("--theta", type=_duration_ns, metavar="DURATION",
                   help="fixed off threshold, e.g. 50ms or 2s (a bare number is seconds; overrides --theta-factor)")


def _idc_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--points", type=int, default=30, help="bin lengths t, log-spaced (default 30)")
    p.add_argument("--t-min", type=_duration_ns, default=1_000_000, metavar="DURATION",
                   help="smallest t (default 1ms)")
    p.add_argument("--t-max", type=_duration_ns, metavar="DURATION", help="largest t (default W / 10)")
    p.add_argument("--bytes", action="store_true", help="count payload bytes instead of frames")


def _options_idc(p: argparse.ArgumentParser) -> None:
    _idc_options(p)


def _options_hurst(p: argparse.ArgumentParser) -> None:
    _idc_options(p)
    p.add_argument("--fit-from", type=_duration_ns, metavar="DURATION", help="smallest t of the fit")
    p.add_argument("--fit-to", type=_duration_ns, metavar="DURATION", help="largest t of the fit")


def _options_contract(p: argparse.ArgumentParser) -> None:
    p.add_argument("--link-rate", help="line rate, e.g. 10mbit (default: the run's link rate, else 10mbit)")
    p.add_argument("--pcr", type=float, metavar="CELLS_S", help="peak cell rate (default the line cell rate)")
    p.add_argument("--cdvt", type=_duration_ns, default=0, metavar="DURATION",
                   help="CDVT of the peak-rate bucket; a stream that needs more is named on stderr (default 0)")
    p.add_argument("--encap", type=int, default=16,
                   help="bytes added to each IP packet before AAL5 (default 16: LLC/SNAP 8 + trailer 8)")
    p.add_argument("--points", type=int, default=50, help="SCR grid points (default 50)")
    p.add_argument("--scr-min", type=float, metavar="CELLS_S",
                   help="lowest SCR of the grid (default the smallest mean cell rate of the streams)")
    p.add_argument("--mbs", type=int, help="instead of the curve: the smallest SCR for this MBS")
    p.add_argument("--cells-from", choices=("wire", "write"), default="wire",
                   help="cells from the wire frames (default) or from the senders' writes (run only)")
    p.add_argument("--mss", type=int, default=1448, help="segment payload for --cells-from write (default 1448)")
    p.add_argument("--headers", type=int, default=52,
                   help="IP + TCP header bytes per segment for --cells-from write (default 52)")


def _options_fairness(p: argparse.ArgumentParser) -> None:
    pass


def _options_goodput(p: argparse.ArgumentParser) -> None:
    pass


def _options_sanity(p: argparse.ArgumentParser) -> None:
    p.add_argument("--link-rate", help="line rate for impossible intervals (default: the run's, else 10mbit)")
    p.add_argument("--tolerance", type=float, default=0.05,
                   help="a gap counts as impossible below (1 - tolerance) x the serialization time (default 0.05)")
    p.add_argument("--frame-overhead", type=int, default=0, metavar="BYTES",
                   help="bytes the link spends per frame beyond the captured frame, for the goodput maximum "
                   "(default 0: the emulated link's shaper counts the Ethernet header and IP packet; a real "
                   "Ethernet: 24 = preamble, FCS and inter-frame gap)")
    p.add_argument("--max-retransmit-share", type=float, default=0.01, metavar="FRACTION",
                   help="retransmitted share of the data frames above which the run is marked (default 0.01)")
    p.add_argument("--check", action="store_true",
                   help="exit 1 when the run is marked, naming what marked it")


_UNITS = {"ns": 1, "us": 10**3, "ms": 10**6, "s": 10**9}


def _duration_ns(text: str) -> int:
    """'1ms', '2.5s', '300us', '800ns' -> int ns; a bare number is seconds, as in every hostwire
    tool (docs/cli.md)."""
    t = text.strip().lower()
    for unit in ("ns", "us", "ms", "s"):
        if t.endswith(unit):
            number = t[: -len(unit)]
            break
    else:
        unit, number = "s", t
    try:
        value = float(number) * _UNITS[unit]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a duration like 1ms, 2.5s or 800ns "
                                         "(a bare number is seconds)") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a duration >= 0")
    return int(round(value))


def run(args: argparse.Namespace) -> int:
    from hostwire.metrics import compute

    table, marked = compute.compute(args.kind, args)
    _write(table, args.json, sys.stdout)
    if args.kind != "sanity":  # sanity carries these in its counters
        for warning in table.attrs.get("warnings", []):
            sys.stderr.write(f"hostwire: warning: {warning}\n")
    if getattr(args, "check", False) and marked:
        causes = "; ".join(table.attrs.get("marked_by", [])) or "see the counters"
        sys.stderr.write(f"hostwire: the run is marked: {causes}\n")
        return 1
    return 0


def _write(table: pd.DataFrame, as_json: bool, out: Any) -> None:
    if as_json:
        records = [{k: _json_value(v) for k, v in row.items()} for row in table.to_dict(orient="records")]
        json.dump(records, out, indent=1)
        out.write("\n")
    else:
        table.to_csv(out, index=False, float_format="%.10g")


def _json_value(v: Any) -> Any:
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating, float)):
        f = float(v)
        return f if math.isfinite(f) else None
    if isinstance(v, np.bool_):
        return bool(v)
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    return v

