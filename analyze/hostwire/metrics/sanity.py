"""Sanity counters of a run (DESIGN.md section 8): frame gaps shorter than the serialization time at
the link rate ("impossible intervals"), TCP retransmissions, minimum advertised window against bytes
in flight from the capture; capture drops, trace overruns, tracer misses, log-buffer overflows,
sieve check failures, shaper drops and unclean child exits from the run's manifest; damaged
sources, an incomplete run or a cut window; heavy loss on the wire (retransmitted share, zero
windows while data was outstanding) and goodput figures above the link's physical maximum. Any of
these marks the run; `marked_by` (DataFrame.attrs) names what did."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from hostwire.errors import UsageError
from hostwire.metrics import goodput
from hostwire.metrics.damage import DamagedSource
from hostwire.metrics.fairness import bytes_per_stream
from hostwire.metrics.losses import LOSS_CATEGORIES, loss_category, manifest_counters
from hostwire.metrics.streams import delivered_bytes, seq_offset
from hostwire.metrics.window import clip
from hostwire.window import Window

COLUMNS = ["counter", "value"]
INFORMATIONAL = frozenset({"shaper_overlimits"})  # categories that never mark the run

DEFAULT_TOLERANCE = 0.05
DEFAULT_MAX_RETRANSMIT_SHARE = 0.01  # retransmitted share of the data frames that marks a run
GOODPUT_SLACK_FRAMES = 2  # frames a window may hold beyond the line rate: one at each end


@dataclass
class Context:
    """What sanity knows beyond the frames and the manifest. `status` is the run's (None for a
    bare capture); `window_cut` says why the window is shorter than planned (None: it is not);
    `damaged` lists the damaged sources; `received` holds the receivers' reads (t_ns, stream,
    bytes) and `streams` the run's data streams (None: every stream of the capture);
    `link_rate_known` is false when nothing is known to enforce the rate (a bare capture without
    --link-rate, an unshaped loopback run, a veth without a shaper): no goodput figure is then held
    against it, and no wire busy share given; `link_unbounded` is true where it is known that
    nothing bounds the wire (hostwire.linkrate): no frame interval is then judged impossible."""

    status: str | None = None
    reason: str = ""
    window_cut: str | None = None
    planned_window: Window | None = None
    damaged: Sequence[DamagedSource] = ()
    received: pd.DataFrame | None = None
    streams: list[str] | None = None
    link_rate_known: bool = True
    link_unbounded: bool = False
    frame_overhead: int = 0
    max_retransmit_share: float = DEFAULT_MAX_RETRANSMIT_SHARE
    base: str = ""  # file names are shown relative to this directory


def impossible_intervals(frames: pd.DataFrame, window: Window, link_rate_bit_s: float,
                         tolerance: float = DEFAULT_TOLERANCE) -> tuple[int, int]:
    """(impossible, gaps): consecutive frames of the same direction (source and destination
    address) whose gap is shorter than (1 - tolerance) x the serialization time of the smaller of
    the two frames at the link rate (wire length, or IP length + 14 without it). Only the data
    direction counts (of each stream when the frames are labelled, else the directions carrying
    payload): the emulated link shapes it, not the ACKs coming back. The tolerance absorbs stamp
    jitter of a few microseconds and the shaper's bucket slack (a tbf bucket of 1600 bytes lets a
    1514-byte frame leave 6 % early); a catch-up burst of a late timer is far below it."""
    check_tolerance(tolerance)
    f = clip(frames, window)
    if len(f) < 2:
        return 0, 0
    length = wire_length(f)
    direction, _ = pd.factorize(pd.MultiIndex.from_arrays([f["src"].astype(str), f["dst"].astype(str)]))
    direction = direction.astype(np.int64)
    if "data_dir" in f.columns:  # labelled TCP frames: each stream's data direction
        keep = f["data_dir"].to_numpy()
    else:
        payload = f["payload_len"].to_numpy().astype(np.int64) if "payload_len" in f.columns else length
        keep = (np.bincount(direction, weights=payload) > 0)[direction]
    t = f["t_ns"].to_numpy().astype(np.int64)[keep]
    direction, length = direction[keep], length[keep]
    order = np.lexsort((t, direction))
    d, t, length = direction[order], t[order], length[order]
    same = d[1:] == d[:-1]
    gap = (t[1:] - t[:-1])[same]
    smaller = np.minimum(length[1:], length[:-1])[same]
    serialization_ns = smaller * 8 * 1e9 / link_rate_bit_s
    return int((gap < (1.0 - tolerance) * serialization_ns).sum()), int(len(gap))


TCP_SYN = 0x02


def advertised_window_bytes(labelled: pd.DataFrame) -> tuple[np.ndarray, int]:
    """The window each labelled frame advertises, in bytes: the raw 16-bit field shifted left by
    the scale its sender offered in its SYN, when both ends of the connection offered one (RFC
    7323: else neither side scales); a SYN's own window is never scaled. NaN for the frames of a
    stream whose handshake (both SYNs) is not in the frames, since its scale is unknown, or when
    the frames carry no `wscale` column. Also returns the number of such streams."""
    n_streams = len(labelled["stream"].cat.categories)
    if "wscale" not in labelled.columns or "flags" not in labelled.columns or len(labelled) == 0:
        return np.full(len(labelled), np.nan), n_streams if len(labelled) else 0
    code = labelled["stream"].cat.codes.to_numpy().astype(np.int64)
    key = code * 2 + labelled["data_dir"].to_numpy().astype(np.int64)  # (stream, direction)
    syn = (labelled["flags"].to_numpy().astype(np.int64) & TCP_SYN) != 0
    # per (stream, direction): the shift its last SYN offered, -1 for none; -2: no SYN seen
    offered = np.full(2 * n_streams, -2, dtype=np.int64)
    last = pd.Series(labelled["wscale"].to_numpy()[syn].astype(np.int64)).groupby(key[syn]).last()
    offered[last.index.to_numpy()] = last.to_numpy()
    pair = offered.reshape(n_streams, 2)
    known = (pair != -2).all(axis=1)
    scaling = (pair >= 0).all(axis=1)
    shift = np.where(scaling[:, None], pair, 0).reshape(-1)[key]
    shift[syn] = 0
    value = labelled["window"].to_numpy().astype(np.float64) * np.exp2(shift)
    value[~known[code]] = np.nan
    present = np.bincount(code, minlength=n_streams) > 0
    return value, int((present & ~known).sum())


TCP_RST = 0x04
TCP_ACK = 0x10


def flight_counters(labelled: pd.DataFrame, window: Window, delivered: pd.DataFrame | None = None) -> dict[str, Any]:
    """Data frames in the window and the retransmitted ones among them (a data frame starting below
    the highest byte sent before it in its stream, the frames before the window included) and
    their share; the smallest window the receivers advertised, in bytes (scaled; -1 when no
    receiver frame of a stream with a known scale is in the window), with the number of streams
    left out because their handshake is not in the capture; the most bytes in flight (highest
    byte sent minus highest byte acknowledged, for streams under 2 GiB); and the receiver frames
    in the window that advertise a zero window while data is outstanding. `delivered` is
    delivered_bytes(labelled) when the caller has it."""
    scaled, unknown_scale = advertised_window_bytes(labelled)  # the handshakes precede the window
    data_all = delivered if delivered is not None else delivered_bytes(labelled)
    data_in = clip(data_all, window)
    retransmitted = int(data_in["retransmit"].sum()) if len(data_in) else 0
    out: dict[str, Any] = {
        "data_frames": int(len(data_in)),
        "tcp_retransmissions": retransmitted,
        "retransmitted_share": retransmitted / len(data_in) if len(data_in) else 0.0,
    }
    lab = clip(labelled.assign(_window_bytes=scaled), window)
    data = data_frames_of(lab)
    rev = lab[~lab["data_dir"].to_numpy()]
    rev_bytes = rev["_window_bytes"].dropna()
    out["min_advertised_window"] = int(rev_bytes.min()) if len(rev_bytes) else -1
    out["window_scale_unknown_streams"] = unknown_scale
    out["zero_window_advertisements"] = zero_windows(labelled, window)
    if len(data) == 0 or len(rev) == 0:
        out["max_bytes_in_flight"] = 0
        return out
    codes = lab["stream"].cat.codes.to_numpy()
    first_seq = pd.Series(data["seq"].to_numpy().astype(np.int64),
                          index=data["stream"].cat.codes.to_numpy()).groupby(level=0).first()
    base = first_seq.reindex(np.arange(len(lab["stream"].cat.categories))).to_numpy()
    ok = ~np.isnan(base)
    keep = ok[codes]
    lab = lab[keep]
    codes = codes[keep]
    b = base[codes].astype(np.int64)
    is_data = lab["is_data"].to_numpy()
    sent = np.where(is_data, seq_offset(lab["seq"].to_numpy(), b) + lab["payload_len"].to_numpy().astype(np.int64),
                    NO_OFFSET)
    acked = np.where(~lab["data_dir"].to_numpy(), seq_offset(lab["ack"].to_numpy(), b), NO_OFFSET)
    df = pd.DataFrame({"code": codes, "sent": sent, "acked": acked})
    g = df.groupby("code", sort=False)
    high_sent = g["sent"].cummax().to_numpy()
    high_ack = g["acked"].cummax().to_numpy()
    flight = np.where(is_data & (high_ack > NO_OFFSET), high_sent - high_ack, 0)
    out["max_bytes_in_flight"] = int(max(0, flight.max())) if len(flight) else 0
    return out


NO_OFFSET = -(2**62)  # no byte sent (or acknowledged) yet: below every offset seq_offset gives
# (bytes in flight count from signed offsets: a resend of bytes sent before the window lies below
# the window's first byte, not 2**32 above it)


def data_frames_of(labelled: pd.DataFrame) -> pd.DataFrame:
    return labelled[labelled["is_data"].to_numpy()]


def zero_windows(labelled: pd.DataFrame, window: Window) -> int:
    """Receiver frames within the window that advertise a zero window (the raw field is 0, so no
    scale is needed) and acknowledge less than the highest byte sent before them in their stream
    (the frames before the window count for what was sent): the receiver stopped the sender with
    data outstanding. SYN and RST frames do not count (an RST carries window 0). Sequence
    numbers are taken relative to each stream's first data byte (streams under 4 GiB)."""
    if len(labelled) == 0:
        return 0
    data_dir = labelled["data_dir"].to_numpy()
    is_data = labelled["is_data"].to_numpy()
    codes = labelled["stream"].cat.codes.to_numpy().astype(np.int64)
    n_streams = len(labelled["stream"].cat.categories)
    first_idx = np.full(n_streams, len(codes), dtype=np.int64)
    data_idx = np.flatnonzero(is_data)
    np.minimum.at(first_idx, codes[data_idx], data_idx)
    has_data = first_idx < len(codes)
    seq = labelled["seq"].to_numpy().astype(np.int64)
    base = np.zeros(n_streams, dtype=np.int64)
    base[has_data] = seq[first_idx[has_data]]
    b = base[codes]
    sent = np.where(is_data, (seq - b) % 2**32 + labelled["payload_len"].to_numpy().astype(np.int64), -1)
    high_sent = pd.Series(sent).groupby(codes).cummax().to_numpy()
    flags = labelled["flags"].to_numpy().astype(np.int64) if "flags" in labelled.columns else \
        np.full(len(codes), TCP_ACK, dtype=np.int64)
    acked = (labelled["ack"].to_numpy().astype(np.int64) - b) % 2**32
    t = labelled["t_ns"].to_numpy()
    zero = (~data_dir & has_data[codes] & (labelled["window"].to_numpy().astype(np.int64) == 0)
            & ((flags & TCP_ACK) != 0) & ((flags & (TCP_RST | TCP_SYN)) == 0)
            & (high_sent > acked) & (high_sent >= 0) & (t >= window.start_ns) & (t <= window.end_ns))
    return int(zero.sum())


def df_sanity(frames: pd.DataFrame | None, labelled: pd.DataFrame | None, window: Window, link_rate_bit_s: float,
              manifest: Mapping[str, Any] | None = None, tolerance: float = DEFAULT_TOLERANCE,
              wire_clock: pd.DataFrame | None = None, context: Context | None = None) -> pd.DataFrame:
    """Rows counter, value; the last row `marked` is 1 when anything in docs/metrics.md's list
    marks the run, and table.attrs["marked_by"] names each cause in one phrase. Without frames (a
    run without a capture) the frame counters are left out; frames without TCP (a run without
    senders) give zeros. `wire_clock` is the table of hostwire.metrics.clockcheck (a run's capture
    against its clock exchange): its start phase gives wire_clock_residual_ns and
    wire_clock_bound_ns, and each phase a check (check.wire_clock_<phase>, counted in
    failed_checks). `context` carries the run's status, window, damaged sources and receivers'
    reads (see Context)."""
    ctx = context if context is not None else Context()
    frame_counters: dict[str, Any] | None = None
    delivered = delivered_bytes(labelled) if labelled is not None else None
    if frames is not None:
        frame_counters = {"frames": int(len(clip(frames, window)))}
        if not ctx.link_unbounded:
            impossible, gaps = impossible_intervals(labelled if labelled is not None else frames, window,
                                                    link_rate_bit_s, tolerance)
            frame_counters.update(gap_counters(impossible, gaps))
        if labelled is not None:
            frame_counters.update(flight_counters(labelled, window, delivered))
        else:
            frame_counters.update(NO_TCP_COUNTERS)
    wire = None
    if frames is not None:
        wire = 0.0
        if delivered is not None and len(delivered):
            wire = float(goodput.wire_bytes_per_stream(delivered, window, ctx.streams).sum())
    sums = data_sums(labelled, window) if ctx.link_rate_known else None
    goodput_counters, above = goodput_figures(wire, sums, window, link_rate_bit_s, ctx)
    return assemble(frame_counters, goodput_counters, above, window, manifest, wire_clock, ctx)


# no TCP frame: nothing was retransmitted, advertised or in flight
NO_TCP_COUNTERS: dict[str, Any] = dict(
    data_frames=0, tcp_retransmissions=0, retransmitted_share=0.0, min_advertised_window=-1,
    window_scale_unknown_streams=0, zero_window_advertisements=0, max_bytes_in_flight=0)


def gap_counters(impossible: int, gaps: int) -> dict[str, Any]:
    return {"frame_gaps": gaps, "impossible_intervals": impossible,
            "impossible_share": impossible / gaps if gaps else 0.0}


def check_options(max_retransmit_share: float, frame_overhead: int) -> None:
    """The usage errors of sanity's own options (--tolerance is checked where the gaps are)."""
    if not 0 <= max_retransmit_share <= 1:
        raise UsageError(f"--max-retransmit-share {max_retransmit_share}: expected a fraction in [0, 1]")
    if frame_overhead < 0:
        raise UsageError(f"--frame-overhead {frame_overhead}: expected bytes >= 0")


def check_tolerance(tolerance: float) -> None:
    if not 0 <= tolerance < 1:
        raise UsageError(f"--tolerance {tolerance}: expected a fraction in [0, 1)")


def assemble(frame_counters: Mapping[str, Any] | None, goodput_counters: Mapping[str, Any], goodput_above: str,
             window: Window, manifest: Mapping[str, Any] | None, wire_clock: pd.DataFrame | None,
             ctx: Context) -> pd.DataFrame:
    """The table of df_sanity from the counters of the frames (None without a capture) and of
    goodput (goodput_figures): the run's counters and the marking added, in the table's order.
    The chunked engine (hostwire.metrics.chunked.sanity) builds its table here too."""
    counters: dict[str, Any] = dict(frame_counters or {})
    counters["window_ns"] = window.length_ns
    if ctx.planned_window is not None:
        counters["window_planned_ns"] = ctx.planned_window.length_ns
    if ctx.status is not None:
        counters["incomplete_run"] = int(ctx.status != "complete")
    counters["window_cut"] = int(ctx.window_cut is not None)
    counters.update(goodput_counters)
    counters["damaged_sources"] = len(ctx.damaged)
    for d in ctx.damaged:
        name = _relative(d.file, ctx.base)
        for what in ("byte_offset", "line", "frame"):
            if getattr(d, what) is not None:
                counters[f"damage.{name}.{what}"] = getattr(d, what)
    losses = manifest_counters(manifest)
    if wire_clock is not None:
        for row in wire_clock.itertuples():
            if row.phase == "start":
                counters.update(wire_clock_residual_ns=row.residual_ns, wire_clock_bound_ns=row.bound_ns)
            losses[f"check.wire_clock_{row.phase}"] = int(row.ok)
            losses["failed_checks"] += int(not row.ok)
    categories = losses.pop("_categories", {})
    counters.update(losses)
    reasons = marking_reasons(counters, ctx, goodput_above, categories)
    counters["marked"] = int(bool(reasons))
    table = pd.DataFrame(list(counters.items()), columns=COLUMNS)
    table.attrs["marked_by"] = reasons
    table.attrs["damaged_sources"] = [d.as_dict() for d in ctx.damaged]
    return table


def _relative(file: str, base: str) -> str:
    if base and file.startswith(base.rstrip("/") + "/"):
        return file[len(base.rstrip("/")) + 1:]
    return file


@dataclass(frozen=True)
class DataSums:
    """What the link's maximum needs of the window's frames: its data frames (count, sums of wire
    length and payload, largest payload) and the wire lengths of its data-direction frames (the
    shaped direction; None without TCP frames). Exact integer sums: equal whether they are
    taken at once or chunk by chunk."""

    data_frames: int = 0
    wire_len: int = 0
    payload: int = 0
    largest_payload: int = 0
    shaped_frames: int = 0
    shaped_wire_len: int | None = None


def wire_length(frames: pd.DataFrame) -> np.ndarray:
    """The frames' wire length, or IP length + 14 without it."""
    return (frames["wire_len"] if "wire_len" in frames.columns else frames["ip_len"] + 14).to_numpy().astype(np.int64)


def data_sums(labelled: pd.DataFrame | None, window: Window) -> DataSums:
    if labelled is None:
        return DataSums()
    data = clip(data_frames_of(labelled), window)
    payload = data["payload_len"].to_numpy().astype(np.int64)
    shaped = None
    if "data_dir" in labelled.columns:
        shaped = wire_length(clip(labelled[labelled["data_dir"].to_numpy(bool)], window))
    return DataSums(data_frames=len(data), wire_len=int(wire_length(data).sum()), payload=int(payload.sum()),
                    largest_payload=int(payload.max()) if len(payload) else 0,
                    shaped_frames=0 if shaped is None else len(shaped),
                    shaped_wire_len=None if shaped is None else int(shaped.sum()))


def goodput_figures(wire_bytes: float | None, sums: DataSums | None, window: Window, link_rate_bit_s: float,
                    ctx: Context) -> tuple[dict[str, Any], str]:
    """goodput_wire_bit_s (`wire_bytes`: unique payload bytes first seen in the window, of the run's
    streams or of every stream; None without a capture), goodput_app_bit_s (the receivers' reads),
    goodput_max_bit_s (the payload share of the line rate for the sizes of the window's data
    frames, see hostwire.metrics.goodput) and goodput_above_max: how many of these figures exceed
    the maximum by more than the slack of GOODPUT_SLACK_FRAMES frames over the window. The maximum
    only where the link rate is known (`sums`: data_sums of the window). Also returns a phrase
    naming the figures above the maximum ("" when none is)."""
    out: dict[str, Any] = {}
    if window.length_ns <= 0:
        return out, ""
    figures: dict[str, float] = {}
    if wire_bytes is not None:
        figures["wire"] = goodput.goodput_bps(wire_bytes, window)
        out["goodput_wire_bit_s"] = figures["wire"]
    if ctx.received is not None:
        app = float(bytes_per_stream(ctx.received, window, ctx.streams).sum())
        figures["app"] = goodput.goodput_bps(app, window)
        out["goodput_app_bit_s"] = figures["app"]
    if not ctx.link_rate_known:
        return out, ""
    sums = sums if sums is not None else DataSums()
    most = goodput.max_payload_bit_s_of_sums(sums.wire_len, sums.payload, sums.data_frames, link_rate_bit_s,
                                           ctx.frame_overhead)
    if sums.shaped_wire_len is not None:
        out["wire_busy_share"] = goodput.wire_busy_share_of_sum(sums.shaped_wire_len, sums.shaped_frames, window,
                                                                link_rate_bit_s, ctx.frame_overhead)
    largest = sums.largest_payload if sums.data_frames else goodput.FULL_FRAME_PAYLOAD
    slack = GOODPUT_SLACK_FRAMES * largest * 8 * 1e9 / window.length_ns
    out["goodput_max_bit_s"] = most
    out["goodput_above_max"] = sum(1 for v in figures.values() if v > most + slack)
    above = [f"{k} {v / 1e6:.3f} Mbit/s" for k, v in figures.items() if v > most + slack]
    return out, (f"{', '.join(above)} above the link's maximum {most / 1e6:.3f} Mbit/s" if above else "")


def marking_reasons(counters: Mapping[str, Any], ctx: Context | None = None, goodput_above: str = "",
                    categories: Mapping[str, str | None] | None = None) -> list[str]:
    """What marks the run, one phrase each naming the counter (empty: the run is not marked);
    `goodput_above` says which goodput figures exceed the link's maximum; `categories` gives each
    manifest loss counter's category (as manifest_counters found it)."""
    ctx = ctx if ctx is not None else Context()
    categories = categories or {}

    def category(key: str) -> str | None:
        return categories[key] if key in categories else loss_category(key)

    reasons = []
    for name, _ in LOSS_CATEGORIES:
        if name not in INFORMATIONAL and counters.get(name):
            keys = [k[5:] for k, v in counters.items()
                    if k.startswith("loss.") and v and category(k[5:]) == name]
            reasons.append(f"{name} {counters[name]}" + (f" ({', '.join(keys)})" if keys else ""))
    for key, value in counters.items():
        if key.startswith("loss.") and value and category(key[5:]) is None:
            reasons.append(f"{key} {value}")
    if counters.get("unclean_exits"):
        reasons.append(f"unclean_exits {counters['unclean_exits']}")
    if counters.get("failed_checks"):
        failed = [k for k, v in counters.items() if k.startswith("check.") and v == 0]
        reasons.append(f"failed_checks {counters['failed_checks']} ({', '.join(failed)})")
    if ctx.damaged:
        reasons.append(f"damaged_sources {len(ctx.damaged)} ("
                       + "; ".join(f"{_relative(d.file, ctx.base)} at {d.where()}" for d in ctx.damaged) + ")")
    if counters.get("incomplete_run"):
        reasons.append(f"incomplete_run (status {ctx.status}" + (f": {ctx.reason}" if ctx.reason else "") + ")")
    if counters.get("window_cut"):
        reasons.append(f"window_cut ({ctx.window_cut})")
    share = counters.get("retransmitted_share", 0.0)
    if share > ctx.max_retransmit_share:
        reasons.append(f"retransmitted_share {100 * share:.2f} % above {100 * ctx.max_retransmit_share:g} % "
                       f"({counters.get('tcp_retransmissions')} of {counters.get('data_frames')} data frames)")
    if counters.get("zero_window_advertisements"):
        reasons.append(f"zero_window_advertisements {counters['zero_window_advertisements']} "
                       "(a receiver advertised a zero window with data outstanding)")
    if counters.get("goodput_above_max"):
        reasons.append(f"goodput_above_max {counters['goodput_above_max']}"
                       + (f" ({goodput_above})" if goodput_above else ""))
    return reasons
