"""The second, independent check of the capture's clock (DESIGN.md section 4). The capture's stamps
are mapped onto the sender's CLOCK_MONOTONIC through hw-wirecap's clock pairs; the benchmark's
UDP clock exchange crosses the wire and is captured too, so each exchange gives the capture
point as a third clock read between the sender's send (t1) and receive (t4) stamps:

    offset = ((t_request - t1) + (t_reply - t4)) / 2
    rtt    = (t4 - t1) - (t_reply - t_request)

With a correct mapping the captured request comes after t1 and the captured reply before t4, so
|offset| <= rtt / 2; the exchange with the smallest rtt bounds the mapping's error best. The
residual is that exchange's offset; the check fails when it lies outside +-rtt/2 (plus the
capture stamp's own resolution)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from hostwire.window import Window

UDP = 17
REQUEST_BYTES, REPLY_BYTES = 16, 32  # hw-bench's clock datagrams (docs/formats.md)
SLACK_NS = 2_000  # capture stamps and clock pairs are good to about a microsecond
COLUMNS = ["phase", "samples", "matched", "residual_ns", "bound_ns", "ok"]


def _phase_rows(frames: pd.DataFrame, sync: pd.DataFrame, port: int) -> tuple[int, float, float]:
    """(matched exchanges, residual, bound) of one phase's exchanges and the frames around them."""
    udp = frames[frames["proto"].to_numpy() == UDP]
    requests = np.sort(udp["t_ns"][(udp["dport"].to_numpy() == port)
                                   & (udp["payload_len"].to_numpy() == REQUEST_BYTES)].to_numpy())
    replies = np.sort(udp["t_ns"][(udp["sport"].to_numpy() == port)
                                  & (udp["payload_len"].to_numpy() == REPLY_BYTES)].to_numpy())
    s = sync.sort_values("t1_ns")
    # Every stored exchange had its reply received, so replies pair with samples in order; a
    # request whose reply was lost has no sample, so each reply takes the last request before it.
    if len(replies) != len(s) or len(s) == 0 or len(requests) == 0:
        return 0, float("nan"), float("nan")
    before = np.searchsorted(requests, replies, side="right") - 1
    if (before < 0).any():
        return 0, float("nan"), float("nan")
    t_req, t_rep = requests[before].astype(np.int64), replies.astype(np.int64)
    t1, t4 = s["t1_ns"].to_numpy().astype(np.int64), s["t4_ns"].to_numpy().astype(np.int64)
    rtt = (t4 - t1) - (t_rep - t_req)
    offset = ((t_req - t1) + (t_rep - t4)) / 2
    best = int(np.argmin(rtt))
    return len(s), float(offset[best]), float(rtt[best]) / 2


def df_wire_clock_check(frames: pd.DataFrame, sync: pd.DataFrame, sync_port: int, window: Window) -> pd.DataFrame:
    """Rows phase (`start`: exchanges before the window, `end`: after it), samples (exchanges the
    benchmark stored), matched (those paired with captured datagrams; 0 when the capture does
    not hold them all), residual_ns, bound_ns (rtt / 2 of the best exchange) and ok (|residual| <=
    bound + 2 us; false when nothing matched). `sync` is hw-bench's main.tsv (phase, t1_ns, t4_ns)."""
    rows = []
    t = frames["t_ns"].to_numpy()
    for phase in ("start", "end"):
        mine = sync[sync["phase"] == phase]
        if len(mine) == 0:
            continue
        around = frames[t < window.start_ns] if phase == "start" else frames[t > window.end_ns]
        matched, residual, bound = _phase_rows(around, mine, sync_port)
        ok = bool(matched) and abs(residual) <= bound + SLACK_NS
        rows.append((phase, len(mine), matched, residual, bound, ok))
    return pd.DataFrame(rows, columns=COLUMNS)
