"""Jain's fairness index over the n sending processes (DESIGN.md section 8):
(sum x_i)^2 / (n * sum x_i^2), x_i the bytes of stream i delivered within the window; a starved
stream counts as 0. On a run x_i are the bytes the receivers read within the window, and the wire
figure of goodput (hostwire.metrics.goodput: the unique payload bytes first seen on the wire within
the window) stands beside them when the run has a capture; on a bare capture x_i is that wire
figure."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from hostwire.errors import InputError
from hostwire.metrics.window import clip
from hostwire.window import Window

COLUMNS = ["stream", "n", "jain", "bytes"]
RUN_COLUMNS = COLUMNS + ["basis"]
WIRE_COLUMNS = ["wire_bytes", "wire_jain"]


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


def df_fairness(per_stream: pd.Series | None, app: pd.Series | None = None) -> pd.DataFrame:
    """Rows: one per stream (its bytes, n and jain of the whole set repeated) and `all`.
    Without `app` (a bare capture): stream, n, jain, bytes of `per_stream`, the wire figure.
    With `app` (a run: the receivers' bytes per stream): n, jain and bytes are the receivers',
    basis is `app`, and with `per_stream` (the run's capture) wire_bytes and wire_jain stand
    beside them (wire_jain empty when no stream put a byte on the wire)."""
    if app is None:
        if per_stream is None:
            raise InputError("fairness: neither wire frames nor receivers' logs")
        n = len(per_stream)
        j = jain_index(per_stream.to_numpy())
        rows = [(str(name), n, j, int(b)) for name, b in per_stream.items()]
        rows.append(("all", n, j, int(per_stream.sum())))
        return pd.DataFrame(rows, columns=COLUMNS)
    wire = per_stream
    names = sorted(set(map(str, app.index)) | (set(map(str, wire.index)) if wire is not None else set()))
    app = app.reindex(names, fill_value=0)
    n = len(names)
    j = jain_index(app.to_numpy())
    table = pd.DataFrame([(name, n, j, int(app[name]), "app") for name in names]
                         + [("all", n, j, int(app.sum()), "app")], columns=RUN_COLUMNS)
    if wire is not None:
        wire = wire.reindex(names, fill_value=0)
        x = wire.to_numpy().astype(np.float64)
        wire_j = jain_index(x) if (x > 0).any() else float("nan")
        table["wire_bytes"] = [*(int(wire[name]) for name in names), int(wire.sum())]
        table["wire_jain"] = wire_j
    return table
