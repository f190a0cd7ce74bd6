"""Synthetic traffic with known statistics, for the ground-truth tests and the benchmark: event
stamps of Poisson, gamma-renewal, constant-rate and Pareto ON/OFF processes, and frame tables with
the columns of hostwire.read.pcap.read_pcap."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

SENDER = "198.18.0.1"
RECEIVER = "198.18.0.2"


def poisson(rng: np.random.Generator, rate_per_s: float, duration_ns: int) -> np.ndarray:
    n = rng.poisson(rate_per_s * duration_ns / 1e9)
    return np.sort(rng.integers(0, duration_ns, n)).astype(np.int64)


def gamma_renewal(rng: np.random.Generator, shape: float, mean_gap_ns: float, duration_ns: int) -> np.ndarray:
    """Renewal process with gamma(shape) inter-arrival times (c^2 = 1 / shape), random phase."""
    n = int(duration_ns / mean_gap_ns * 1.2) + 100
    gaps = rng.gamma(shape, mean_gap_ns / shape, n)
    t = np.cumsum(gaps) - rng.uniform(0, gaps[0])
    t = t[(t >= 0) & (t < duration_ns)]
    return t.astype(np.int64)


def constant_rate(gap_ns: int, duration_ns: int, phase_ns: int = 0) -> np.ndarray:
    return np.arange(phase_ns, duration_ns, gap_ns, dtype=np.int64)


def pareto_onoff(rng: np.random.Generator, sources: int, duration_ns: int, alpha: float,
                 min_period_ns: float, gap_ns: float) -> np.ndarray:
    """Aggregate of ON/OFF sources whose ON and OFF periods are Pareto(alpha) with the given minimum;
    each source emits one event every gap_ns while ON. Long-range dependent: H = (3 - alpha) / 2."""
    parts = []
    mean_period = min_period_ns * alpha / (alpha - 1)
    for _ in range(sources):
        n = int(duration_ns / mean_period) + 50
        periods = min_period_ns * (1.0 + rng.pareto(alpha, 2 * n))
        edges = np.cumsum(periods) - rng.uniform(0, periods[0] + periods[1])
        on_start, on_end = edges[0:-1:2], edges[1::2]
        m = min(len(on_start), len(on_end))
        on_start, on_end = on_start[:m], on_end[:m]
        keep = (on_end > 0) & (on_start < duration_ns)
        on_start = np.maximum(on_start[keep], 0)
        on_end = np.minimum(on_end[keep], duration_ns)
        count = np.floor((on_end - on_start) / gap_ns).astype(np.int64)
        base = np.repeat(on_start, count)
        k = np.arange(count.sum()) - np.repeat(np.cumsum(count) - count, count)
        parts.append((base + k * gap_ns).astype(np.int64))
    return np.sort(np.concatenate(parts))


def frames(t_ns: np.ndarray, payload: int | np.ndarray = 1448, sport: int = 40000, dport: int = 5001,
           src: str = SENDER, dst: str = RECEIVER, seq0: int = 1000, headers: int = 52,
           start_frame: int = 0) -> pd.DataFrame:
    """Data frames of one TCP stream at stamps t_ns with consecutive sequence numbers."""
    t_ns = np.asarray(t_ns, dtype=np.int64)
    n = len(t_ns)
    pl = np.broadcast_to(np.asarray(payload, dtype=np.int64), (n,)).copy()
    seq = (seq0 + np.concatenate([[0], np.cumsum(pl)[:-1]])) % 2**32 if n else np.zeros(0, np.int64)
    return frame_table(t_ns, pl, seq, np.zeros(n, np.int64), src, dst, sport, dport, headers, start_frame)


def frame_table(t_ns: np.ndarray, payload: np.ndarray, seq: np.ndarray, ack: np.ndarray, src: str, dst: str,
                sport: int, dport: int, headers: int = 52, start_frame: int = 0, flags: int = 0x18,
                window: int = 65535, wscale: int = -1) -> pd.DataFrame:
    n = len(t_ns)
    ip_len = np.asarray(payload, dtype=np.int64) + headers
    return pd.DataFrame({
        "frame": np.arange(start_frame, start_frame + n, dtype=np.int64),
        "t_ns": np.asarray(t_ns, dtype=np.int64),
        "wire_len": ip_len + 14, "cap_len": np.minimum(ip_len + 14, 96), "ip_len": ip_len,
        "proto": np.full(n, 6, np.uint8),
        "src": pd.Categorical([src] * n), "dst": pd.Categorical([dst] * n),
        "sport": np.full(n, sport, np.int64), "dport": np.full(n, dport, np.int64),
        "seq": np.asarray(seq, dtype=np.uint32), "ack": np.asarray(ack, dtype=np.uint32),
        "flags": np.full(n, flags, np.uint8), "window": np.full(n, window, np.uint16),
        "payload_len": np.asarray(payload, dtype=np.int64), "wscale": np.full(n, wscale, np.int8),
    })


def concat(tables: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """Merge frame tables into one time-ordered capture (categoricals unified, frames renumbered)."""
    df = pd.concat([t.assign(src=t["src"].astype(str), dst=t["dst"].astype(str)) for t in tables],
                   ignore_index=True)
    df = df.sort_values("t_ns", kind="stable").reset_index(drop=True)
    df["src"] = df["src"].astype("category")
    df["dst"] = df["dst"].astype("category")
    df["frame"] = np.arange(len(df), dtype=np.int64)
    return df
