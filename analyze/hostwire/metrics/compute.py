"""Glue between `hostwire metrics KIND INPUT` and the metric functions: open the input, label the
streams, apply the window and the stream filter, compute one table."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from hostwire.errors import InputError, UsageError
from hostwire.metrics import bursts, cells, contract, fairness, goodput, hurst, idc, intervals, sanity
from hostwire.metrics.inputs import Source, open_input
from hostwire.metrics.streams import data_frames, delivered_bytes, label_streams, select_streams, stream_names
from hostwire.metrics.window import Window, clip, narrow, require_rows

DEFAULT_LINK_RATE = "10mbit"


def link_rate_bps(text: str | None, source: Source) -> int:
    from hostwire.topology import parse_rate

    if text is None:
        link = source.manifest.get("config", {}).get("link", {}) if source.manifest else {}
        text = link.get("rate", DEFAULT_LINK_RATE) if isinstance(link, dict) else DEFAULT_LINK_RATE
    return parse_rate(str(text))


def compute(kind: str, args: Any) -> tuple[pd.DataFrame, bool]:
    """The table of one metric kind and whether the run is marked (sanity only)."""
    source = open_input(args.input)
    window = narrow(source.window, args.from_s, args.to_s)
    if kind == "sanity":
        return _sanity(source, window, args)
    labelled = select_streams(label_streams(source.frames), args.stream)
    names = stream_names(labelled)
    writes = _writes(source, names if args.stream else None)
    if kind == "intervals":
        if args.hist:
            return intervals.df_interval_histogram(labelled, window, writes, args.per_decade), False
        return intervals.df_intervals(labelled, window, writes), False
    if kind == "bursts":
        return bursts.df_bursts(labelled, window, args.theta_factor, args.theta), False
    if kind in ("idc", "hurst"):
        table = idc.df_idc(labelled, window, args.bytes, args.points, args.t_min, args.t_max)
        if kind == "idc":
            return table, False
        fit_from = args.fit_from
        if fit_from is None and args.fit_to is None:
            ts = table["t_ns"].to_numpy().astype(np.float64)
            fit_from = int(np.sqrt(ts.min() * ts.max()))
        return hurst.df_hurst(table, fit_from, args.fit_to), False
    if kind == "contract":
        return _contract(source, labelled, writes, window, args), False
    if kind in ("fairness", "goodput"):
        per = _delivered(source, labelled, window, names, bool(args.stream))
        if kind == "fairness":
            return fairness.df_fairness(per), False
        return goodput.df_goodput(per, window), False
    raise UsageError(f"unknown metric kind {kind!r}")


def _writes(source: Source, names: Sequence[str] | None) -> pd.DataFrame | None:
    w = source.writes
    if w is None or len(w) == 0:
        return None
    if names is not None and "stream" in w.columns:
        w = w[w["stream"].astype(str).isin(set(names)).to_numpy()]
    return w


def _delivered(source: Source, labelled: pd.DataFrame, window: Window, names: list[str],
               filtered: bool) -> pd.Series:
    """Bytes delivered per stream within the window: from the receivers' logs on a run, else the new
    payload bytes on the wire; every stream of the capture is listed, a starved one with 0."""
    if source.received is not None and len(source.received):
        rec = source.received
        expected = set(names)
        if filtered and "stream" in rec.columns:
            rec = rec[rec["stream"].astype(str).isin(expected).to_numpy()]
        elif source.writes is not None and "stream" in source.writes.columns:
            expected |= set(source.writes["stream"].astype(str))  # a sender that got nothing through
        return fairness.bytes_per_stream(rec, window, sorted(expected))
    lab = clip(labelled, window)
    if len(lab) == 0:
        raise InputError(f"no TCP frames in the window {window.describe()}")
    data = delivered_bytes(lab)
    per = data.groupby(data["stream"].astype(str), sort=True)["new_bytes"].sum()
    return per.reindex(sorted(set(names) | set(per.index)), fill_value=0).astype(np.int64)


def _contract(source: Source, labelled: pd.DataFrame, writes: pd.DataFrame | None, window: Window,
              args: Any) -> pd.DataFrame:
    rate = link_rate_bps(args.link_rate, source)
    pcr = args.pcr if args.pcr is not None else rate / cells.CELL_BITS
    if args.cells_from == "write":
        if writes is None:
            raise InputError(f"{source.path}: --cells-from write needs the senders' writes (a run directory)")
        w = clip(writes, window)
        require_rows(w, "writes", window)
        label = intervals._process_label(w)
        t = w["t_ns"].to_numpy().astype(np.int64)
        nbytes = w["bytes"].to_numpy().astype(np.int64)
        by = {str(n): (t[label == n], nbytes[label == n]) for n in pd.unique(label)}
        streams = cells.stream_cells_from_writes(by, rate, args.mss, args.headers, args.encap)
    else:
        data = clip(data_frames(labelled), window)
        require_rows(data, "data frames", window, at_least=2)
        codes = data["stream"].cat.codes.to_numpy()
        t = data["t_ns"].to_numpy().astype(np.int64)
        ip_len = data["ip_len"].to_numpy().astype(np.int64)
        by = {str(n): (t[codes == i], ip_len[codes == i]) for i, n in enumerate(data["stream"].cat.categories)}
        streams = cells.stream_cells_from_frames(by, rate, args.encap)
    for name, cs in streams.items():
        need = contract.pcr_tau(cs, pcr)
        if need > args.cdvt:
            import logging

            logging.getLogger(__name__).warning(
                "%s: the peak-rate bucket needs CDVT %.0f ns, more than --cdvt %d ns", name, need, args.cdvt)
    if args.mbs is not None:
        return contract.df_min_scr(streams, pcr, args.mbs)
    return contract.df_contract(streams, pcr, args.points, args.scr_min)


def _sanity(source: Source, window: Window, args: Any) -> tuple[pd.DataFrame, bool]:
    rate = link_rate_bps(args.link_rate, source)
    frames = clip(source.frames, window)
    require_rows(frames, "frames", window)
    try:
        labelled = label_streams(frames)
    except InputError:
        labelled = None
    table = sanity.df_sanity(frames, labelled, window, rate, source.manifest)
    marked = bool(table.loc[table["counter"] == "marked", "value"].iloc[0])
    return table, marked
