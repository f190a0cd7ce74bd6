"""The options of every metric kind, at the library's level: `hostwire metrics KIND` builds its parser
from OPTIONS, and every caller hands the library a MetricsRequest (`metrics_request` fills in the
kind's defaults), so that a default is written once, no library code imports a command and none
reads the command line's namespace."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hostwire.errors import UsageError
from hostwire.linkrate import LinkRate

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


@dataclass(frozen=True)
class Option:
    """One option of a metric kind, as argparse takes it: `flag` (e.g. --t-min), `dest`, its
    default, and the `kind` of value: int, float, str (with `choices` where given), "duration"
    (hostwire.units.parse_duration_ns), "link_rate" (a hostwire.linkrate.LinkRate, parsed once by
    the command line), "flag" (on or off) or "append" (repeatable)."""

    flag: str
    dest: str
    default: Any = None
    kind: Any = str
    help: str = ""
    metavar: str | None = None
    choices: tuple[str, ...] | None = None


# The options every kind takes besides INPUT (the CLI adds --json and INPUT itself).
COMMON = (
    Option("--from", "from_s", kind=float, metavar="SEC",
           help="start, seconds after the default window's start (run: logging window; pcap: first frame)"),
    Option("--to", "to_s", kind=float, metavar="SEC", help="end, seconds after the same origin"),
    Option("--stream", "stream", kind="append", metavar="NAME|PORT",
           help="only this stream (full name or a port of either end); repeatable"),
    Option("--partial", "partial", False, "flag",
           "compute on the intact part of a damaged capture or log (default: stop, naming the file and where it "
           "is damaged); the result is marked and each damage named on stderr. sanity always reads what it can "
           "and counts the damage"),
    Option("--engine", "engine", "auto", str,
           "memory: read the whole input at once; chunked: passes over chunks of a capture file in bounded "
           "memory (idc, hurst, intervals, bursts, contract, goodput, fairness, sanity; equal results), or of a "
           "run directory's raw/wire.pcap (the same kinds); auto "
           "(default): chunked for a capture of 256 MiB or more", choices=("auto", "memory", "chunked")),
)
_IDC = (
    Option("--points", "points", 30, int, "bin lengths t, log-spaced (default 30)"),
    Option("--t-min", "t_min", 1_000_000, "duration", "smallest t (default 1ms)", "DURATION"),
    Option("--t-max", "t_max", None, "duration", "largest t (default W / 10)", "DURATION"),
    Option("--bytes", "bytes", False, "flag", "count payload bytes instead of frames"),
)
OPTIONS: dict[str, tuple[Option, ...]] = {
    "intervals": (
        Option("--hist", "hist", False, "flag", "log-binned histogram instead of the summary"),
        Option("--per-decade", "per_decade", 10, int, "histogram bins per decade (default 10)"),
    ),
    "bursts": (
        Option("--theta-factor", "theta_factor", 20.0, float,
               "off threshold as a multiple of the stream's median frame gap (default 20)"),
        Option("--theta", "theta", None, "duration",
               "fixed off threshold, e.g. 50ms or 2s (a bare number is seconds; overrides --theta-factor)",
               "DURATION"),
    ),
    "idc": _IDC,
    "hurst": (
        *_IDC,
        Option("--fit-from", "fit_from", None, "duration", "smallest t of the fit", "DURATION"),
        Option("--fit-to", "fit_to", None, "duration", "largest t of the fit", "DURATION"),
    ),
    "contract": (
        Option("--link-rate", "link_rate", None, "link_rate",
               "line rate, e.g. 10mbit (default: the run's link rate, docs/metrics.md \"The link rate\")"),
        Option("--pcr", "pcr", None, float, "peak cell rate (default the line cell rate)", "CELLS_S"),
        Option("--cdvt", "cdvt", 0, "duration",
               "CDVT of the peak-rate bucket; a stream that needs more is named on stderr (default 0)", "DURATION"),
        Option("--encap", "encap", 16, int,
               "bytes added to each IP packet before AAL5 (default 16: LLC/SNAP 8 + trailer 8)"),
        Option("--points", "points", 50, int, "SCR grid points (default 50)"),
        Option("--scr-min", "scr_min", None, float,
               "lowest SCR of the grid (default the smallest mean cell rate of the streams)", "CELLS_S"),
        Option("--mbs", "mbs", None, int, "instead of the curve: the smallest SCR for this MBS"),
        Option("--cells-from", "cells_from", "wire", str,
               "cells from the wire frames (default) or from the senders' writes (run only)",
               choices=("wire", "write")),
        Option("--mss", "mss", 1448, int, "segment payload for --cells-from write (default 1448)"),
        Option("--headers", "headers", 52, int, "IP + TCP header bytes per segment for --cells-from write (default 52)"),
    ),
    "fairness": (),
    "goodput": (),
    "sanity": (
        Option("--link-rate", "link_rate", None, "link_rate",
               "line rate for impossible intervals (default: the run's, docs/metrics.md \"The link rate\")"),
        Option("--tolerance", "tolerance", 0.05, float,
               "a gap counts as impossible below (1 - tolerance) x the serialization time (default 0.05)"),
        Option("--frame-overhead", "frame_overhead", 0, int,
               "bytes the link spends per frame beyond the captured frame, for the goodput maximum (default 0: "
               "the emulated link's shaper counts the Ethernet header and IP packet; a real Ethernet: 24 = "
               "preamble, FCS and inter-frame gap)", "BYTES"),
        Option("--max-retransmit-share", "max_retransmit_share", 0.01, float,
               "retransmitted share of the data frames above which the run is marked (default 0.01)", "FRACTION"),
        Option("--check", "check", False, "flag", "exit 1 when the run is marked, naming what marked it"),
    ),
}


@dataclass(frozen=True)
class MetricsRequest:
    """One metric to compute: its kind, its INPUT (a hostwire.run_directory.Run, a run directory, a
    pcap or a Parquet frame table) and every option, typed (OPTIONS says which a kind takes and
    their defaults; a field another kind alone takes keeps its default here)."""

    kind: str
    input: Any
    from_s: float | None = None
    to_s: float | None = None
    stream: list[str] | None = None
    partial: bool = False
    engine: str = "auto"
    hist: bool = False
    per_decade: int = 10
    theta_factor: float = 20.0
    theta: int | None = None
    points: int = 30
    t_min: int = 1_000_000
    t_max: int | None = None
    bytes: bool = False
    fit_from: int | None = None
    fit_to: int | None = None
    link_rate: LinkRate | None = None
    pcr: float | None = None
    cdvt: int = 0
    encap: int = 16
    scr_min: float | None = None
    mbs: int | None = None
    cells_from: str = "wire"
    mss: int = 1448
    headers: int = 52
    tolerance: float = 0.05
    frame_overhead: int = 0
    max_retransmit_share: float = 0.01
    check: bool = False

    def __post_init__(self) -> None:
        if self.link_rate is not None and not isinstance(self.link_rate, LinkRate):
            raise UsageError(f"metrics {self.kind}: link_rate {self.link_rate!r}: expected a LinkRate "
                             "(hostwire.linkrate.given_rate parses a rate once)")


def metrics_request(kind: str, input: Any, **options: Any) -> MetricsRequest:
    """The request for metric `kind` on `input`: the options given (by their dest: from_s, t_min,
    link_rate as a LinkRate, ...), the others at the kind's defaults. An option the kind does not
    take is a usage error."""
    if kind not in OPTIONS:
        raise UsageError(f"unknown metric kind {kind!r}; expected one of {', '.join(OPTIONS)}")
    values = {o.dest: o.default for o in (*COMMON, *OPTIONS[kind])}
    for key, value in options.items():
        if key not in values:
            raise UsageError(f"metrics {kind}: no option {key!r}")
        values[key] = value
    return MetricsRequest(kind=kind, input=input, **values)
