"""Glue between `hostwire metrics KIND INPUT` and the metric functions: check that the input has
what the kind needs, take a view of it, label the streams, apply the window and the stream filter,
compute one table. INPUT may be a hostwire.run_directory.Run: every metric computed on one Run shares what it
read (the capture is decoded once)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hostwire.errors import InputError, UsageError
from hostwire.linkrate import link_rate
from hostwire.metrics import bursts, cells, clockcheck, contract, fairness, goodput, hurst, idc, intervals, sanity
from hostwire.metrics.inputs import Source, open_input
from hostwire.metrics.needs import needs_of
from hostwire.metrics.options import MetricsRequest, metrics_request
from hostwire.metrics.run_streams import app_bytes, logs_name_streams, run_streams, run_writes, sanity_context
from hostwire.metrics.streams import data_frames, delivered_bytes, label_streams, select_streams, stream_names
from hostwire.metrics.window import clip, require_rows
from hostwire.window import Window
from hostwire.run_directory import Run

log = logging.getLogger(__name__)


def compute(request: MetricsRequest) -> tuple[pd.DataFrame, bool]:
    """The table of one metric kind and whether its result is marked: for sanity, the run is
    marked; for the others, the result stands on a damaged source (--partial) or on a window cut
    to what an incomplete run recorded. table.attrs holds `warnings` (one line each: what the
    result is short of), `damaged_sources` (file, message, byte_offset / line / frame) and
    `marked`; sanity's also `marked_by`."""
    from hostwire.metrics.chunked import engine

    kind = request.kind
    if engine.wanted(request):
        try:
            chunked = engine.compute(request)
            return chunked, bool(chunked.attrs["marked"])
        except engine.Declined as why:
            log.info("%s: computed in memory", why)
    needs = needs_of(kind, cells_from=request.cells_from)
    source = open_input(request.input, keep_damaged=request.partial or kind == "sanity", needs=needs)
    window = source.window.narrowed(request.from_s, request.to_s)
    if kind == "sanity":
        table, marked = _sanity(source, window, request)
    else:
        table = _compute(kind, source, window, request)
        marked = bool(source.damaged or source.window_cut)
    table.attrs.update(warnings=list(source.warnings), damaged_sources=[d.as_dict() for d in source.damaged],
                       marked=marked)
    return table, marked


def _compute(kind: str, source: Source, window: Window, request: MetricsRequest) -> pd.DataFrame:
    if kind in ("fairness", "goodput"):
        wire, app = _delivered(source, window, request.stream)
        if kind == "fairness":
            return fairness.df_fairness(wire, app)
        return goodput.df_goodput(wire, window, app)
    if source.is_run and source.frames is None:
        return _from_run_logs(kind, source, window, request)
    labelled = select_streams(label_streams(source.need_frames()), request.stream)
    names = stream_names(labelled)
    # On a run the senders' and receivers' logs name the data streams; a capture also holds the
    # control connection.
    run_names = run_streams(source, request.stream) if source.is_run else names
    writes = run_writes(source, run_names if request.stream else None)
    if kind == "intervals":
        if request.hist:
            return intervals.df_interval_histogram(labelled, window, writes, request.per_decade)
        return intervals.df_intervals(labelled, window, writes)
    if kind == "bursts":
        return bursts.df_bursts(labelled, window, request.theta_factor, request.theta)
    if kind in ("idc", "hurst"):
        table = idc.df_idc(labelled, window, request.bytes, request.points, request.t_min, request.t_max)
        if kind == "idc":
            return table
        return hurst.df_hurst_of_idc(table, request.fit_from, request.fit_to)
    if kind == "contract":
        return _contract(source, labelled, writes, window, request)
    raise UsageError(f"unknown metric kind {kind!r}")


def _from_run_logs(kind: str, source: Source, window: Window, request: MetricsRequest) -> pd.DataFrame:
    """What the benchmark's logs give without the capture: write intervals and the contract of the
    writes."""
    names = run_streams(source, request.stream)
    writes = run_writes(source, names)
    if kind == "intervals" and writes is not None:
        wg = intervals.write_gaps(writes, window)
        if len(wg):
            if request.hist:
                return intervals.log_histogram(wg, "write", request.per_decade)
            return intervals.summarize(wg, "write")
    if kind == "contract" and request.cells_from == "write":
        return _contract(source, None, writes, window, request)
    source.need_frames()
    raise AssertionError("unreachable")


def _delivered(source: Source, window: Window,
               wanted: Sequence[str] | None) -> tuple[pd.Series | None, pd.Series | None]:
    """Bytes delivered per stream within the window: (wire, app). wire: the unique payload bytes
    first seen on the wire within the window (hostwire.metrics.goodput), None without a capture;
    app: the receivers' reads within the window, None on a bare capture. On a run both list every
    stream the senders' and receivers' logs name (after --stream), a starved one with 0; on a
    bare capture every TCP connection (after --stream)."""
    names = run_streams(source, wanted) if logs_name_streams(source) else None
    app = app_bytes(source, window, names)
    if source.frames is None:
        if app is None:
            source.need_frames()
        return None, app
    if names is not None:  # a run: its logs name the streams; a capture without TCP carried none of them
        try:
            labelled = label_streams(source.frames)
        except InputError:
            return pd.Series(0, index=sorted(names), dtype=np.int64), app
        return goodput.wire_bytes_per_stream(delivered_bytes(labelled), window, names), app
    labelled = select_streams(label_streams(source.frames), wanted)
    if len(clip(labelled, window)) == 0:
        raise InputError(f"no TCP frames in the window {window.describe()}")
    per = goodput.wire_bytes_per_stream(delivered_bytes(labelled), window)
    return per.reindex(sorted(set(stream_names(labelled)) | set(per.index)), fill_value=0).astype(np.int64), None


def _contract(source: Source, labelled: pd.DataFrame | None, writes: pd.DataFrame | None, window: Window,
              request: MetricsRequest) -> pd.DataFrame:
    rate = link_rate(source.manifest, request.link_rate).bit_s
    pcr = request.pcr if request.pcr is not None else rate / cells.CELL_BITS
    if request.cells_from == "write":
        if writes is None:
            raise InputError(f"{source.path}: --cells-from write needs the senders' writes (a run directory)")
        w = clip(writes, window)
        require_rows(w, "writes", window)
        label = intervals.process_label(w)
        t = w["t_ns"].to_numpy().astype(np.int64)
        nbytes = w["bytes"].to_numpy().astype(np.int64)
        by = {str(n): (t[label == n], nbytes[label == n]) for n in sorted(pd.unique(label))}
        streams = cells.stream_cells_from_writes(by, rate, request.mss, request.headers, request.encap)
    else:
        if labelled is None:
            source.need_frames()
        assert labelled is not None
        data = clip(data_frames(labelled), window)
        require_rows(data, "data frames", window, at_least=2)
        codes = data["stream"].cat.codes.to_numpy()
        t = data["t_ns"].to_numpy().astype(np.int64)
        ip_len = data["ip_len"].to_numpy().astype(np.int64)
        by = {str(n): (t[codes == i], ip_len[codes == i]) for i, n in enumerate(data["stream"].cat.categories)}
        streams = cells.stream_cells_from_frames(by, rate, request.encap)
    for name, cs in streams.items():
        need = contract.pcr_tau(cs, pcr)
        if need >= request.cdvt + 1:  # below a nanosecond is the float arithmetic of the cell times
            log.warning(
                "%s: the peak-rate bucket needs CDVT %.0f ns, more than --cdvt %d ns", name, need, request.cdvt)
    if request.mbs is not None:
        return contract.df_min_scr(streams, pcr, request.mbs)
    return contract.df_contract(streams, pcr, request.points, request.scr_min)


def _sanity(source: Source, window: Window, request: MetricsRequest) -> tuple[pd.DataFrame, bool]:
    if not 0 <= request.max_retransmit_share <= 1:
        raise UsageError(f"--max-retransmit-share {request.max_retransmit_share}: expected a fraction in [0, 1]")
    if request.frame_overhead < 0:
        raise UsageError(f"--frame-overhead {request.frame_overhead}: expected bytes >= 0")
    link = link_rate(source.manifest, request.link_rate)
    rate = link.bit_s
    frames: pd.DataFrame | None = None
    labelled = None
    if source.frames is not None or not source.is_run:
        frames = source.need_frames()
        try:  # all frames, not only the window's: the handshakes before it give the window scales
            labelled = label_streams(frames)
        except InputError:  # no TCP frame (a run without senders): the TCP counters are zeros
            labelled = None
    wire_clock = None
    if frames is not None and source.clock_sync is not None and source.sync_port is not None:
        wire_clock = clockcheck.df_wire_clock_check(frames, source.clock_sync, source.sync_port, window)
    context = sanity_context(source, request, link)
    table = sanity.df_sanity(frames, labelled, window, rate, source.manifest, request.tolerance, wire_clock, context)
    marked = bool(table.loc[table["counter"] == "marked", "value"].iloc[0])
    return table, marked


def table(kind: str, run_or_path: Run | str | Path, **options: Any) -> pd.DataFrame:
    """The table `hostwire metrics KIND INPUT` prints, for library callers (the analysis step, the
    summary, a report). INPUT: a Run (metrics on one Run share what it read: give the same Run to
    every call), a run directory, a pcap or a Parquet frame table. Options are the command's long
    options with underscores (from_s, to_s, stream, bytes, mbs, cells_from, link_rate as a
    hostwire.linkrate.LinkRate, partial, ...); unnamed ones take their defaults
    (hostwire.metrics.options.metrics_request)."""
    result, _ = compute(metrics_request(kind, run_or_path, **options))
    return result
