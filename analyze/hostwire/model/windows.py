"""Why Jain's index falls behind a deep shaper queue (docs/paper-comparison.md, "Fairness"): each
stream's bytes in flight over the window, from the capture, beside the bytes it delivered. If the
streams share one FIFO with the same path, each moves about its window per round trip, so its
goodput follows its bytes in flight: unequal windows make unequal goodput without a drop."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from hostwire.window import Window


def jain(values: np.ndarray) -> float:
    values = np.asarray(values, dtype=float)
    total = float((values ** 2).sum())
    return float(values.sum() ** 2 / (len(values) * total)) if len(values) and total > 0 else float("nan")


def held_mean(t_ns: np.ndarray, values: np.ndarray, start: int, end: int) -> float:
    """The mean over [start, end] of a quantity sampled at t_ns (sorted) and held until the next
    sample; the value before the first sample inside is the last one before start. nan when no
    sample covers any of the window."""
    held = np.clip(np.append(t_ns[1:], end), start, end) - np.clip(t_ns, start, end)
    return float((values * held).sum() / held.sum()) if held.sum() > 0 else float("nan")


def df_stream_windows(run_dir: Path) -> pd.DataFrame:
    """Per stream of a run, from the kernel's tcp_probe events on the sender's sockets (one per
    acknowledgement; the capture sits after the shaper and cannot see what waits in its queue):
    the time-weighted mean congestion window (frames) and bytes in flight (snd_nxt - snd_una)
    over the window, the smoothed round trip, and the stream's goodput bytes in the window."""
    from hostwire.metrics import table
    from hostwire.read.sched import read_sched_tsv
    from hostwire.run_directory import load_run

    run = load_run(run_dir)
    start, end = run.window_ns()
    _, events = read_sched_tsv(run.path / "raw" / "sched.tsv",
                               ["sport", "dport", "snd_nxt", "snd_una", "snd_cwnd", "srtt"])
    probes = events[events["event"].eq("tcp_probe")].dropna(subset=["sport", "snd_cwnd"])
    goodput = table("goodput", run)
    goodput = goodput[goodput["stream"] != "all"][["stream", "bytes"]].copy()
    goodput["port"] = goodput["stream"].str.extract(r":(\d+)>", expand=False).astype("int64")
    rows = []
    for port in goodput["port"]:
        mine = probes[probes["sport"].astype("int64").eq(port)].sort_values("t_ns")
        if mine.empty:
            continue
        t = mine["t_ns"].to_numpy()
        flight = (mine["snd_nxt"].to_numpy("int64") - mine["snd_una"].to_numpy("int64")) % 2**32
        cwnd = held_mean(t, mine["snd_cwnd"].to_numpy(float), start, end)
        if not np.isfinite(cwnd):
            continue
        rows.append({"port": int(port), "mean_cwnd_frames": cwnd,
                     "mean_inflight_bytes": held_mean(t, flight.astype(float), start, end),
                     # tcp_probe gives srtt_us >> 3: microseconds
                     "mean_srtt_us": held_mean(t, mine["srtt"].to_numpy(float), start, end)})
    return goodput.merge(pd.DataFrame(rows, columns=["port", "mean_cwnd_frames", "mean_inflight_bytes",
                                                     "mean_srtt_us"]), on="port", how="inner")


def window_summary(run_dir: Path, window: Window | None = None) -> dict[str, float]:
    """Jain's index of the streams' goodput and of their mean bytes in flight, and the correlation
    between the two over the streams."""
    streams = df_stream_windows(run_dir)
    if len(streams) < 2:
        return {"streams": float(len(streams)), "jain_bytes": float("nan"), "jain_inflight": float("nan"), "jain_cwnd": float("nan"),
                "r_inflight_bytes": float("nan"), "inflight_spread": float("nan")}
    inflight, moved = streams["mean_inflight_bytes"].to_numpy(float), streams["bytes"].to_numpy(float)
    cwnd = streams["mean_cwnd_frames"].to_numpy(float)
    r = float(np.corrcoef(inflight, moved)[0, 1]) if inflight.std() > 0 and moved.std() > 0 else float("nan")
    return {"streams": float(len(streams)), "jain_bytes": jain(moved), "jain_inflight": jain(inflight),
            "jain_cwnd": jain(cwnd),
            "r_inflight_bytes": r, "inflight_spread": float(inflight.max() / max(inflight.min(), 1.0))}
