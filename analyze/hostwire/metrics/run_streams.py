"""The streams of a run as its logs name them, and what the run's logs add to its capture's
metrics (the senders' writes, the receivers' reads, sanity's context). Both engines take them from
here (hostwire.metrics.compute in memory, hostwire.metrics.chunked in chunks), so a run's metrics
cover the same streams whichever engine computes them."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from hostwire.errors import InputError
from hostwire.linkrate import LinkRate
from hostwire.metrics import fairness, sanity
from hostwire.metrics.inputs import Source
from hostwire.metrics.options import MetricsRequest
from hostwire.window import Window


def logs_name_streams(source: Source) -> bool:
    """A benchmark run: its senders' and receivers' logs name the streams. A program recorded by
    `hostwire record` has no such logs: its streams are the capture's, as on a bare capture."""
    return source.is_run and (source.manifest or {}).get("point", {}).get("kind") != "program"


def run_streams(source: Source, wanted: Sequence[str] | None) -> list[str]:
    known: set[str] = set()
    for df in (source.writes, source.received):
        if df is not None and "stream" in df.columns:
            known |= set(df["stream"].astype(str))
    if not wanted:
        return sorted(known)
    keep = set()
    for item in wanted:
        matched = [n for n in known if n == item or (item.isdigit() and item in
                                                       {n.split(">")[0].rsplit(":", 1)[-1],
                                                        n.split(">")[-1].rsplit(":", 1)[-1]})]
        if not matched:
            raise InputError(f"--stream {item}: no such stream; streams are: {', '.join(sorted(known)) or 'none'}")
        keep.update(matched)
    return sorted(keep)


def run_writes(source: Source, names: Sequence[str] | None) -> pd.DataFrame | None:
    w = source.writes
    if w is None or len(w) == 0:
        return None
    if names is not None and "stream" in w.columns:
        w = w[w["stream"].astype(str).isin(set(names)).to_numpy()]
    return w


def app_bytes(source: Source, window: Window, names: Sequence[str] | None) -> pd.Series | None:
    """The receivers' reads per stream within the window (None without receivers' logs): the
    streams `names` (a stream without reads at 0), all of the logs' when None."""
    if source.received is None:
        return None
    rec = source.received
    if "stream" in rec.columns and names is not None:
        rec = rec[rec["stream"].astype(str).isin(set(names)).to_numpy()]
    return fairness.bytes_per_stream(rec, window, names)


def sanity_context(source: Source, request: MetricsRequest, link: LinkRate) -> sanity.Context:
    """What sanity knows of INPUT beyond its frames and manifest: on a run its status, window,
    damage, data streams (those its logs name) and their receivers' reads. The chunked engine
    takes a run's from here too, so both engines judge it alike."""
    names = run_streams(source, None) if source.is_run else None
    received = source.received
    if received is not None and "stream" in received.columns and names is not None:
        received = received[received["stream"].astype(str).isin(set(names)).to_numpy()]
    return sanity.Context(
        status=source.status, reason=source.reason, window_cut=source.window_cut,
        planned_window=source.planned_window, damaged=source.damaged, received=received, streams=names,
        link_rate_known=link.enforced, link_unbounded=link.unbounded, frame_overhead=request.frame_overhead,
        max_retransmit_share=request.max_retransmit_share, base=str(source.path) if source.is_run else "")
