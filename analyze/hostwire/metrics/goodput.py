"""Goodput (DESIGN.md section 8, made exact in docs/metrics.md): the unique payload bytes of each
stream that crossed the wire within the window, over the window length. Each byte of a stream's
sequence space counts once, at the time it first crossed the capture point (the union of the
frames' [seq, seq + payload) ranges), so the figure can neither exceed what the wire carried in
the window nor miss a segment that was lost before the capture point and sent again. On a run the
receivers' reads within the window (the application's figure) stand beside it. At campaign level:
goodput against the mix M / (M + N) with the Pearson correlation and a least-squares line.

The physical maximum of the link is the payload share of the line rate for the frames' sizes: the
shaper (tbf on the veth) counts each frame as the kernel hands it over, the Ethernet header and
the IP packet (the capture's wire length: 14 + IP length), so a saturated 10 Mbit/s link of
full-size frames with TCP timestamps carries 1448 / 1514 x 10 Mbit/s = 9.564 Mbit/s of payload.
A real Ethernet adds preamble and start delimiter (8), FCS (4) and the inter-frame gap (12), 24
bytes per frame: `frame_overhead`."""

from __future__ import annotations

import numpy as np
import pandas as pd

from hostwire.errors import InputError
from hostwire.metrics.window import clip
from hostwire.window import Window

COLUMNS = ["stream", "bytes", "seconds", "bit_s"]
RUN_COLUMNS = COLUMNS + ["basis", "app_bytes", "app_bit_s"]
ETHERNET_HEADER = 14
FULL_FRAME_PAYLOAD = 1460   # MTU 1500 - 20 (IP) - 20 (TCP without options)
FULL_FRAME_WIRE = 1514      # MTU 1500 + 14
REAL_ETHERNET_OVERHEAD = 24  # preamble + SFD 8, FCS 4, inter-frame gap 12


def goodput_bps(nbytes: float, window: Window) -> float:
    if window.length_ns <= 0:
        raise InputError(f"goodput: the window {window.describe()} has no length")
    return nbytes * 8 * 1e9 / window.length_ns


def wire_bytes_per_stream(delivered: pd.DataFrame, window: Window, streams: list[str] | None = None) -> pd.Series:
    """Unique payload bytes per stream first seen within the window: `delivered` is what
    hostwire.metrics.streams.delivered_bytes returned for the whole capture (not only the window:
    a byte seen before the window is not new inside it). Streams named in `streams` and without
    bytes count 0; with `streams`, the others are left out."""
    d = clip(delivered, window)
    per = d.groupby(d["stream"].astype(str), sort=True)["new_bytes"].sum().astype(np.int64)
    if streams is not None:
        per = per.reindex(sorted(set(streams)), fill_value=0)
    return per


def max_payload_bit_s(wire_len: np.ndarray, payload: np.ndarray, link_rate_bit_s: float,
                    frame_overhead: int = 0) -> float:
    """The most payload the link can carry per second with frames of these sizes: the line rate
    times sum(payload) / sum(wire_len + frame_overhead). Without frames, a full-size frame without
    TCP options: 1460 / (1514 + frame_overhead)."""
    wire = np.asarray(wire_len)
    return max_payload_bit_s_of_sums(wire.sum(), np.asarray(payload).sum(), len(wire), link_rate_bit_s, frame_overhead)


def max_payload_bit_s_of_sums(wire_len: float, payload: float, frames: int, link_rate_bit_s: float,
                            frame_overhead: int = 0) -> float:
    """max_payload_bit_s from the sums of the frames' wire lengths and payloads (exact integers: the
    same figure whether the frames are summed at once or chunk by chunk)."""
    wire = float(wire_len) + frames * frame_overhead
    if frames == 0 or wire <= 0:
        return link_rate_bit_s * FULL_FRAME_PAYLOAD / (FULL_FRAME_WIRE + frame_overhead)
    return float(link_rate_bit_s * float(payload) / wire)


def wire_busy_share(wire_len: np.ndarray, window: Window, link_rate_bit_s: float, frame_overhead: int = 0) -> float:
    """The share of the window the link spent sending these frames (the window's frames of the
    shaped direction): sum((wire_len + frame_overhead) x 8 / rate) / window."""
    wire = np.asarray(wire_len)
    return wire_busy_share_of_sum(wire.sum(), len(wire), window, link_rate_bit_s, frame_overhead)


def wire_busy_share_of_sum(wire_len: float, frames: int, window: Window, link_rate_bit_s: float,
                           frame_overhead: int = 0) -> float:
    """wire_busy_share from the sum of the frames' wire lengths."""
    if window.length_ns <= 0 or link_rate_bit_s <= 0:
        return float("nan")
    bits = (float(wire_len) + frames * frame_overhead) * 8
    return float(bits * 1e9 / link_rate_bit_s / window.length_ns)


def df_goodput(per_stream: pd.Series | None, window: Window, app: pd.Series | None = None) -> pd.DataFrame:
    """One row per stream and `all`. Without `app` (a bare capture): stream, bytes, seconds
    (window length), bit_s, the wire figure. With `app` (a run: the receivers' bytes per stream)
    also basis, app_bytes, app_bit_s; basis is `wire` when per_stream (the wire figure) is given,
    else `app` (a run without a capture), and bytes/bit_s are then the receivers' figure."""
    seconds = window.length_ns / 1e9
    if app is None:
        if per_stream is None:
            raise InputError("goodput: neither wire frames nor receivers' logs")
        rows = [(str(n), int(b), seconds, goodput_bps(b, window)) for n, b in per_stream.items()]
        total = int(per_stream.sum())
        rows.append(("all", total, seconds, goodput_bps(total, window)))
        return pd.DataFrame(rows, columns=COLUMNS)
    basis = "wire" if per_stream is not None else "app"
    main = per_stream if per_stream is not None else app
    names = sorted(set(map(str, main.index)) | set(map(str, app.index)))
    main = main.reindex(names, fill_value=0)
    app = app.reindex(names, fill_value=0)
    rows = [(n, int(main[n]), seconds, goodput_bps(main[n], window), basis, int(app[n]), goodput_bps(app[n], window))
            for n in names]
    rows.append(("all", int(main.sum()), seconds, goodput_bps(main.sum(), window), basis, int(app.sum()),
                 goodput_bps(app.sum(), window)))
    return pd.DataFrame(rows, columns=RUN_COLUMNS)


def goodput_against_mix(senders: np.ndarray, background: np.ndarray, goodput: np.ndarray) -> dict[str, float]:
    """Pearson r of goodput against M / (M + N) (M senders, N background processes) and the line
    goodput = slope * mix + intercept. Needs at least 3 points and a mix that varies."""
    m = np.asarray(senders, dtype=np.float64)
    n = np.asarray(background, dtype=np.float64)
    g = np.asarray(goodput, dtype=np.float64)
    if not (len(m) == len(n) == len(g)):
        raise InputError("goodput against mix: senders, background and goodput differ in length")
    if len(g) < 3:
        raise InputError(f"goodput against mix needs at least 3 runs, got {len(g)}")
    if np.any(m + n <= 0):
        raise InputError("goodput against mix: a run has no process")
    mix = m / (m + n)
    if np.ptp(mix) == 0 or np.ptp(g) == 0:
        raise InputError("goodput against mix: the mix or the goodput does not vary, no correlation")
    r = float(np.corrcoef(mix, g)[0, 1])
    slope, intercept = np.polyfit(mix, g, 1)
    return {"runs": int(len(g)), "pearson_r": r, "slope_bit_s": float(slope), "intercept_bit_s": float(intercept)}
