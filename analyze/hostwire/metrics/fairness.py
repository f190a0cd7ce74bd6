"""Jain's fairness index over the n sending processes (DESIGN.md section 8):
(sum x_i)^2 / (n * sum x_i^2), x_i the bytes of stream i delivered within the window; a starved
stream counts as 0."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from hostwire.errors import InputError
from hostwire.metrics.window import Window, clip

COLUMNS = ["stream", "n", "jain", "bytes"]


def jain_index(x: Sequence[float] | np.ndarray) -> float:
    """Jain's index of the allocations x; 1 when all are equal, 1/n when one stream has everything.
    Raises when n is 0 or every x_i is 0 (the index is undefined)."""
    x = np.asarray(x, dtype=np.float64)
    if len(x) == 0:
        raise InputError("fairness needs at least one stream")
    if np.any(x < 0):
        raise InputError("fairness: negative byte count")
    sq = float((x * x).sum())
    if sq == 0:
        raise InputError(f"fairness is undefined: none of the {len(x)} stream(s) delivered a byte in the window")
    return float(x.sum()) ** 2 / (len(x) * sq)


def bytes_per_stream(received: pd.DataFrame, window: Window, streams: Sequence[str] | None = None) -> pd.Series:
    """Bytes delivered per stream within the window (received has columns t_ns, stream, bytes);
    streams named in `streams` and absent from `received` count 0."""
    for column in ("t_ns", "stream", "bytes"):
        if column not in received.columns:
            raise InputError(f"received bytes: missing column {column}")
    r = clip(received, window)
    per = r.groupby(r["stream"].astype(str), sort=True)["bytes"].sum().astype(np.int64)
    if streams is not None:
        per = per.reindex(sorted(set(per.index) | set(map(str, streams))), fill_value=0)
    return per


def df_fairness(per_stream: pd.Series) -> pd.DataFrame:
    """Rows: one per stream (its bytes, n and jain of the whole set repeated) and `all`."""
    n = len(per_stream)
    j = jain_index(per_stream.to_numpy())
    rows = [(str(name), n, j, int(b)) for name, b in per_stream.items()]
    rows.append(("all", n, j, int(per_stream.sum())))
    return pd.DataFrame(rows, columns=COLUMNS)
