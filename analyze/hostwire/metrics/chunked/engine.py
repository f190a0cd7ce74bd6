"""`hostwire metrics --engine`: which path computes a metric, and the chunked path's glue (the
same checks, window, stream filter and table as hostwire.metrics.compute, in bounded memory).

The chunked path reads a bare capture (pcap or pcapng) in chunks (hostwire.read.pcapchunks) and
serves idc, hurst, intervals (summary and --hist), bursts, the wire contract curve with an integral
cell time, goodput and fairness (the wire figure: unique payload bytes first seen within the
window, one pass over every data frame up to the window's end, hostwire.metrics.chunked.delivered)
and sanity (the counters of a bare capture: no manifest, receivers' logs or clock exchange;
hostwire.metrics.chunked.sanity; like the in-memory path it reads a damaged capture up to the
damage without --partial, counts the damage and marks the table); its results equal the in-memory
path's (analyze/tests/test_metrics_chunked*.py, which call the chunked path itself: a decline fails them).

On a run directory it reads raw/wire.pcap for every kind above with the in-memory path's run
semantics: stamps on the run's clock (wirecap.json's clock pairs), the run's window, damage,
warnings and mark from hostwire.metrics.inputs.view (fed with the capture's facts found in
chunks), --stream checked against the run's logs, intervals' write-gap rows from the logs, the
contract's link rate from the manifest, goodput's and fairness' streams those the logs name with
the wire figure of hostwire.metrics.chunked.delivered beside the receivers' reads from the logs;
sanity with the run's link rate, manifest loss counters, status, window cut, damage (the logs'
too), the wire goodput of the streams the logs name, the receivers' reads and the wire clock
check against the clock exchange, whose few datagrams a chunk pass collects
(analyze/tests/test_metrics_chunked_run.py).

`auto` takes the chunked path for a capture (a run's raw/wire.pcap) of AUTO_BYTES or more; what it
does not serve (a Parquet table, a Run object, a run without a capture, another kind, --mbs,
--cells-from write, a cell time that is not a whole number of ns, an SCR or PCR above the line
cell rate, a sanity table of a capture with more addresses than the stream labels take, a run
whose wirecap.json or capture cannot be read at all) goes in memory."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hostwire.errors import InputError, UsageError
from hostwire.linkrate import link_rate
from hostwire.metrics import cells, fairness, goodput, hurst
from hostwire.metrics import intervals as mem_intervals
from hostwire.metrics.chunked import bursts, contract, delivered, idc, intervals, runs, sanity
from hostwire.metrics.chunked.labels import EP_SPAN, LABEL_COLUMNS, data_chunks, scan
from hostwire.metrics.chunked.progress import Progress
from hostwire.metrics.damage import from_attrs, partial_hint
from hostwire.metrics.idc import t_grid
from hostwire.metrics.inputs import Source, open_input
from hostwire.metrics.needs import needs_of
from hostwire.metrics.options import MetricsRequest
from hostwire.metrics.run_streams import app_bytes, logs_name_streams, run_streams, run_writes
from hostwire.window import Window
from hostwire.read.pcapchunks import CaptureChunks
from hostwire.run_directory import load_run

log = logging.getLogger(__name__)

KINDS = ("idc", "hurst", "intervals", "bursts", "contract", "goodput", "fairness", "sanity")
ENGINES = ("auto", "memory", "chunked")
DATA_COLUMNS = {"idc": ("payload_len",), "hurst": ("payload_len",), "bursts": ("payload_len",),
                "contract": ("ip_len",), "goodput": delivered.COLUMNS, "fairness": delivered.COLUMNS,
                "sanity": sanity.COLUMNS}
AUTO_BYTES = 256 << 20  # from here on a capture's in-memory tables pass about 1 GB


def metrics_input(run: Any) -> Any:
    """What hostwire analyze and the one-run report give the metrics of a Run: its directory when
    its capture (raw/wire.pcap) is long enough for `auto` to take the chunked engine (AUTO_BYTES
    or more), else the Run itself, decoded once for all its metrics."""
    capture = Path(run.path) / "raw" / "wire.pcap"
    return run.path if capture.is_file() and capture.stat().st_size >= AUTO_BYTES else run


class Declined(Exception):
    """The chunked path cannot serve this call after all (the message says why): the caller
    computes it in memory, or, where the two paths are held against each other, fails."""


def _is_capture(value: Any) -> bool:
    if not isinstance(value, (str, os.PathLike)):
        return False
    path = Path(value)
    return path.is_file() and path.suffix != ".parquet"


def _served(kind: str, request: MetricsRequest) -> str | None:
    """Why the chunked path cannot serve this call (None: it can)."""
    if kind not in KINDS:
        return f"{kind} is computed in memory (the chunked path serves {', '.join(KINDS)})"
    if runs.run_capture(request.input) is None and not _is_capture(request.input):
        return ("the chunked path reads a capture file (pcap or pcapng) or a run directory with raw/wire.pcap, "
                "not a table, a Run object or a run without a capture")
    if kind == "contract" and (request.mbs is not None or request.cells_from != "wire"):
        return "contract --mbs and --cells-from write are computed in memory"
    return None


def _capture_of(value: Any) -> Path:
    """The capture file the chunked path reads: INPUT, or a run directory's raw/wire.pcap."""
    return runs.run_capture(value) or Path(value)


def wanted(request: MetricsRequest) -> bool:
    """Whether `hostwire metrics KIND` goes through the chunked path (--engine, default auto)."""
    kind, engine = request.kind, request.engine or "auto"
    if engine not in ENGINES:
        raise UsageError(f"--engine {engine}: expected one of {', '.join(ENGINES)}")
    if engine == "memory":
        return False
    why = _served(kind, request)
    if isinstance(request.input, (str, os.PathLike)) and not Path(request.input).exists():
        return False  # the in-memory reader names the missing input
    if engine == "chunked":
        if why is not None:
            raise UsageError(f"--engine chunked: {why}")
        return True
    return why is None and _capture_of(request.input).stat().st_size >= AUTO_BYTES


def compute(request: MetricsRequest) -> pd.DataFrame:
    """The table of hostwire.metrics.compute.compute for the request's kind on a capture, with its
    attrs. Raises Declined when this call needs what only the in-memory path does."""
    kind = request.kind
    if runs.run_capture(request.input) is not None:
        return _compute_run(kind, request)
    partial = request.partial
    progress = Progress(Path(request.input).name)
    columns = (*LABEL_COLUMNS, *DATA_COLUMNS.get(kind, ()))
    with CaptureChunks(request.input, keep_damaged=True, columns=columns, progress=progress.update) as capture:
        damaged = from_attrs(capture.attrs.get("damage"), str(capture.path))
        if damaged and capture.rows == 0:
            raise InputError(f"{damaged[0].describe()}; no frame before the damage")
        if damaged and not partial and kind != "sanity":  # sanity always reads what it can and counts it
            raise InputError(partial_hint(damaged))
        warnings = [f"{d.describe()}: computed on the {capture.rows} frame(s) before it" for d in damaged]
        window = Window(*capture.span()).narrowed(request.from_s, request.to_s)
        try:
            if kind == "sanity":
                table = sanity.df_sanity(capture, window, request, damaged)
            else:
                table = _compute(kind, request, capture, scan(capture, request.stream), window)
        except NotImplementedError as why:
            raise Declined(f"{capture.path}: {why}") from None
        finally:
            progress.close()
    # sanity's mark is its table's: the run is marked (damage is one of the reasons)
    marked = bool(table.attrs["marked_by"]) if kind == "sanity" else bool(damaged)
    table.attrs.update(warnings=warnings, damaged_sources=[d.as_dict() for d in damaged], marked=marked)
    return table


def _compute_run(kind: str, request: MetricsRequest) -> pd.DataFrame:
    """compute on a run directory: the run's capture on the run's clock, the run's window, damage
    and warnings (hostwire.metrics.inputs.view, fed by hostwire.metrics.chunked.runs), the streams
    checked against the run's logs and the writes' rows of intervals, as hostwire.metrics.compute
    does on a run."""

    run = load_run(request.input)
    ok, pairs = runs.readable(run)
    if not ok:
        # wirecap.json unreadable: the in-memory path lists it as damaged, reading no frame
        raise Declined(f"{run.path}: raw/wirecap.json cannot be read")
    needs = needs_of(kind, cells_from=request.cells_from)
    progress = Progress(run.path.name)
    columns = (*LABEL_COLUMNS, *DATA_COLUMNS.get(kind, ()))
    try:
        capture = CaptureChunks(run.path / "raw" / "wire.pcap", pairs, keep_damaged=True, columns=columns,
                                progress=progress.update)
    except InputError:  # nothing of the capture readable: the in-memory path names it, reading no frame
        progress.close()
        raise Declined(f"{run.path}: nothing of raw/wire.pcap can be read") from None
    with capture:
        try:
            if capture.rows == 0:
                raise Declined(f"{run.path}: raw/wire.pcap holds no frame")
            # sanity always reads what it can and counts the damage, as in memory
            keep_damaged = request.partial or kind == "sanity"
            source = open_input(run, keep_damaged=keep_damaged, needs=needs, wire=runs.wire_facts(capture))
            window = source.window.narrowed(request.from_s, request.to_s)
            writes = None
            if kind == "sanity":
                table = sanity.df_sanity(capture, window, request, list(source.damaged), source)
            elif kind in ("goodput", "fairness"):
                table = _delivered_on_run(kind, request, capture, source, window)
            else:
                labels = scan(capture, request.stream)
                # as in memory: --stream must also name a stream of the run's logs
                names = run_streams(source, request.stream)
                writes = run_writes(source, names if request.stream else None)
                table = _compute(kind, request, capture, labels, window, source.manifest)
        except NotImplementedError as why:
            raise Declined(f"{capture.path}: {why}") from None
        finally:
            progress.close()
    if kind == "intervals" and writes is not None:
        table = _with_write_gaps(table, writes, window, request)
    # sanity's mark is its table's, as on a capture
    marked = bool(table.attrs["marked_by"]) if kind == "sanity" else bool(source.damaged or source.window_cut)
    table.attrs.update(warnings=list(source.warnings), damaged_sources=[d.as_dict() for d in source.damaged],
                       marked=marked)
    return table


def _delivered_on_run(kind: str, request: MetricsRequest, capture: CaptureChunks, source: Source, window: Window) -> pd.DataFrame:
    """goodput or fairness of a run as hostwire.metrics.compute's _delivered gives them: the wire
    figure from the capture in one pass (every TCP stream's coverage, since a byte's first
    crossing may lie before the window), the receivers' reads from their logs, which are small."""

    names = run_streams(source, request.stream) if logs_name_streams(source) else None
    app = app_bytes(source, window, names)
    if names is None:  # a program recorded by `hostwire record`: its streams are the capture's
        wire = delivered.wire_bytes(capture, scan(capture, request.stream), window)
    else:
        wire = _run_wire_bytes(capture, window, names)
    if kind == "fairness":
        return fairness.df_fairness(wire, app)
    return goodput.df_goodput(wire, window, app)


def _run_wire_bytes(capture: CaptureChunks, window: Window, names: list[str]) -> pd.Series:
    """The wire figure of the streams the run's logs name: 0 for one the capture lacks or that
    put no new byte on the wire within the window, and for all of them without a TCP frame."""
    if len(capture.addresses) > EP_SPAN >> 16:
        # scan's InputError would read as "no TCP frame" here: the in-memory path labels them
        raise NotImplementedError(f"more than {EP_SPAN >> 16} addresses")
    try:
        labels = scan(capture)
    except InputError:  # no TCP frame at all
        return pd.Series(0, index=sorted(names), dtype=np.int64)
    per = delivered.wire_bytes(capture, labels, window, need_frames=False)
    return per.reindex(sorted(set(names)), fill_value=0).astype(np.int64)


def _with_write_gaps(table: pd.DataFrame, writes: pd.DataFrame, window: Window, request: MetricsRequest) -> pd.DataFrame:
    """The frame rows and, after them, the in-memory rows of the gaps between each sending
    process's writes (hostwire.metrics.intervals.df_intervals): the logs are small."""
    gaps = mem_intervals.write_gaps(writes, window)
    if not len(gaps):
        return table
    if request.hist:
        rows = mem_intervals.log_histogram(gaps, "write", request.per_decade)
    else:
        rows = mem_intervals.summarize(gaps, "write")
    return pd.concat([table, rows], ignore_index=True)


def _compute(kind: str, request: MetricsRequest, capture: CaptureChunks, labels: Any, window: Window,
             manifest: dict[str, Any] | None = None) -> pd.DataFrame:
    names = labels.names
    columns = DATA_COLUMNS.get(kind, ())
    if kind in ("goodput", "fairness"):
        # all data frames up to the window's end, not data_chunks' window: a byte seen before the
        # window is not new inside it
        per_stream = delivered.wire_bytes(capture, labels, window)
        if kind == "fairness":
            return fairness.df_fairness(per_stream)
        return goodput.df_goodput(per_stream, window)

    def passes() -> Any:
        return data_chunks(capture, labels, window, columns)

    if kind == "bursts":
        return bursts.df_bursts(passes, names, window, request.theta_factor, request.theta)
    if kind == "intervals":
        if request.hist:
            return intervals.df_interval_histogram(passes, names, window, request.per_decade)
        return intervals.df_intervals(passes, names, window)
    if kind in ("idc", "hurst"):
        ts = t_grid(window.length_ns, request.points, request.t_min, request.t_max)
        table = idc.df_idc(passes(), names, window, ts, request.bytes)
        if kind == "idc":
            return table
        return hurst.df_hurst_of_idc(table, request.fit_from, request.fit_to)
    return _contract(request, passes, names, window, manifest or {})


def _contract(request: MetricsRequest, passes: Any, names: list[str], window: Window, manifest: dict[str, Any]) -> pd.DataFrame:
    rate = link_rate(manifest, request.link_rate).bit_s  # a run's manifest names its link rate
    pcr = request.pcr if request.pcr is not None else rate / cells.CELL_BITS
    d = cells.cell_time_ns(rate)
    if not isinstance(d, int):
        raise NotImplementedError("a cell time that is not a whole number of ns")
    if pcr <= 0:
        raise UsageError(f"--pcr {pcr}: expected cells/s > 0")
    table, at_pcr = contract.df_contract(passes, names, window, d, request.encap, pcr, request.points, request.scr_min)
    for name, need in at_pcr.items():
        if need >= request.cdvt + 1:  # below a nanosecond is the float arithmetic of the cell times
            log.warning("%s: the peak-rate bucket needs CDVT %.0f ns, more than --cdvt %d ns", name, need, request.cdvt)
    return table
