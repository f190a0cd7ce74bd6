"""Sanity counters of a run (DESIGN.md section 8): frame gaps shorter than the serialization time at
the link rate ("impossible intervals"), TCP retransmissions, minimum advertised window against bytes
in flight from the capture; capture drops, trace overruns, tracer misses, log-buffer overflows,
sieve check failures and unclean child exits from the run's manifest. A non-zero loss marks the run."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from hostwire.errors import UsageError
from hostwire.metrics.streams import delivered_bytes
from hostwire.metrics.window import Window, clip

COLUMNS = ["counter", "value"]
# The DESIGN.md category of a manifest loss counter, from its name as the runner writes it
# (wire_ps_drop, <buffer>_lost_events, <buffer>_missed_in_stream, syscalls_lost,
# syscalls_unfinished, bench_log_overflow, sieve_check_failures); first match wins, and a counter
# of another name is kept under loss.<name> and still marks the run when non-zero.
LOSS_CATEGORIES: tuple[tuple[str, Callable[[str], bool]], ...] = (
    ("capture_drops", lambda k: k.startswith("wire_") or "drop" in k),
    ("trace_overruns", lambda k: k.endswith(("_lost_events", "_missed_in_stream")) or "overrun" in k),
    ("tracer_misses", lambda k: k.startswith("syscalls_") or "miss" in k),
    ("log_overflows", lambda k: "overflow" in k),
    ("sieve_failures", lambda k: "sieve" in k),
)


DEFAULT_TOLERANCE = 0.05


def impossible_intervals(frames: pd.DataFrame, window: Window, link_rate_bps: float,
                         tolerance: float = DEFAULT_TOLERANCE) -> tuple[int, int]:
    """(impossible, gaps): consecutive frames of the same direction (source and destination
    address) whose gap is shorter than (1 - tolerance) x the serialization time of the smaller of
    the two frames at the link rate (wire length, or IP length + 14 without it). Only the data
    direction counts (of each stream when the frames are labelled, else the directions carrying
    payload): the emulated link shapes it, not the ACKs coming back. The tolerance absorbs stamp
    jitter of a few microseconds and the shaper's bucket slack (a tbf bucket of 1600 bytes lets a
    1514-byte frame leave 6 % early); a catch-up burst of a late timer is far below it."""
    if not 0 <= tolerance < 1:
        raise UsageError(f"--tolerance {tolerance}: expected a fraction in [0, 1)")
    f = clip(frames, window)
    if len(f) < 2:
        return 0, 0
    length = (f["wire_len"] if "wire_len" in f.columns else f["ip_len"] + 14).to_numpy().astype(np.int64)
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
    serialization_ns = smaller * 8 * 1e9 / link_rate_bps
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


def flight_counters(labelled: pd.DataFrame, window: Window) -> dict[str, int]:
    """Retransmitted data frames; the smallest window the receivers advertised, in bytes (scaled;
    -1 when no receiver frame of a stream with a known scale is in the window), with the number of
    streams left out because their handshake is not in the capture; and the most bytes in flight
    (highest byte sent minus highest byte acknowledged, for streams under 2 GiB)."""
    scaled, unknown_scale = advertised_window_bytes(labelled)  # the handshakes precede the window
    lab = clip(labelled.assign(_window_bytes=scaled), window)
    data = delivered_bytes(lab)
    out = {"tcp_retransmissions": int(data["retransmit"].sum()) if len(data) else 0}
    rev = lab[~lab["data_dir"].to_numpy()]
    rev_bytes = rev["_window_bytes"].dropna()
    out["min_advertised_window"] = int(rev_bytes.min()) if len(rev_bytes) else -1
    out["window_scale_unknown_streams"] = unknown_scale
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
    sent = np.where(is_data, (lab["seq"].to_numpy().astype(np.int64) - b) % 2**32
                    + lab["payload_len"].to_numpy().astype(np.int64), -1)
    acked = np.where(~lab["data_dir"].to_numpy(), (lab["ack"].to_numpy().astype(np.int64) - b) % 2**32, -1)
    df = pd.DataFrame({"code": codes, "sent": sent, "acked": acked})
    g = df.groupby("code", sort=False)
    high_sent = g["sent"].cummax().to_numpy()
    high_ack = g["acked"].cummax().to_numpy()
    flight = np.where(is_data & (high_ack >= 0), high_sent - high_ack, 0)
    out["max_bytes_in_flight"] = int(max(0, flight.max())) if len(flight) else 0
    return out


def manifest_counters(manifest: Mapping[str, Any] | None) -> dict[str, int]:
    """The loss counters of a run's manifest: each numeric counter of `losses` as `loss.<name>`,
    their sums per DESIGN.md category, `unknown_losses` (counters the run could not read: null),
    `failed_checks` (boolean checks such as sched_clock_check_ok that are false; each also as
    `check.<name>`, 1 ok, 0 failed) and `unclean_exits`, the exit statuses under `exit` (hw-bench
    and each process by role) that are neither 0 nor "ok"."""
    out = {name: 0 for name, _ in LOSS_CATEGORIES}
    out.update(unclean_exits=0, failed_checks=0, unknown_losses=0)
    if not manifest:
        return out
    leaves: dict[str, int] = {}
    checks: dict[str, int] = {}
    unknown: list[str] = []
    _flatten(manifest.get("losses", {}), "", leaves, checks, unknown)
    for key, value in leaves.items():
        for name, matches in LOSS_CATEGORIES:
            if matches(key.lower()):
                out[name] += value
                break
    out["unclean_exits"] = _unclean(manifest.get("exit", {}))
    out["failed_checks"] = sum(1 for ok in checks.values() if not ok)
    out["unknown_losses"] = len(unknown)
    out.update({f"loss.{k}": v for k, v in leaves.items()})
    out.update({f"check.{k}": v for k, v in checks.items()})
    return out


def _unclean(node: Any) -> int:
    """Exit statuses that are neither 0 nor "ok" (a signal, a code, "killed", ...)."""
    if isinstance(node, Mapping):
        return sum(_unclean(v) for v in node.values())
    if node is None:
        return 0
    if isinstance(node, (int, float)) and not isinstance(node, bool):
        return int(node != 0)
    return int(str(node).strip().lower() not in ("ok", "0"))


def _flatten(node: Any, prefix: str, counters: dict[str, int], checks: dict[str, int], unknown: list[str]) -> None:
    if isinstance(node, Mapping):
        for key, value in node.items():
            _flatten(value, f"{prefix}.{key}" if prefix else str(key), counters, checks, unknown)
    elif node is None:
        unknown.append(prefix)
    elif isinstance(node, bool):
        checks[prefix] = int(node)
    elif isinstance(node, (int, float)):
        counters[prefix] = int(node)


def df_sanity(frames: pd.DataFrame | None, labelled: pd.DataFrame | None, window: Window, link_rate_bps: float,
              manifest: Mapping[str, Any] | None = None, tolerance: float = DEFAULT_TOLERANCE,
              wire_clock: pd.DataFrame | None = None) -> pd.DataFrame:
    """Rows counter, value; the last row `marked` is 1 when a loss counter is non-zero or a check
    failed. Without frames (a run without a capture) the frame counters are left out.
    `wire_clock` is the table of hostwire.metrics.clockcheck (a run's capture against its clock
    exchange): its start phase gives wire_clock_residual_ns and wire_clock_bound_ns, and each
    phase a check (check.wire_clock_<phase>, counted in failed_checks)."""
    counters: dict[str, float] = {}
    if frames is not None:
        impossible, gaps = impossible_intervals(labelled if labelled is not None else frames, window,
                                                link_rate_bps, tolerance)
        counters.update({
            "frames": int(len(clip(frames, window))),
            "frame_gaps": gaps,
            "impossible_intervals": impossible,
            "impossible_share": impossible / gaps if gaps else 0.0,
        })
    if labelled is not None:
        counters.update(flight_counters(labelled, window))
    losses = manifest_counters(manifest)
    if wire_clock is not None:
        for row in wire_clock.itertuples():
            if row.phase == "start":
                counters.update(wire_clock_residual_ns=row.residual_ns, wire_clock_bound_ns=row.bound_ns)
            losses[f"check.wire_clock_{row.phase}"] = int(row.ok)
            losses["failed_checks"] += int(not row.ok)
    counters.update(losses)
    loss_keys = [name for name, _ in LOSS_CATEGORIES] + ["unclean_exits", "failed_checks"]
    marked = any(losses[k] for k in loss_keys) or any(v for k, v in losses.items() if k.startswith("loss."))
    counters["marked"] = int(bool(marked))
    return pd.DataFrame(list(counters.items()), columns=COLUMNS)
