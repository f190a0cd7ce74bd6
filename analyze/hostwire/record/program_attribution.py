"""The manifest's account of a recorded program's capture: every frame attributed to a process of
the program (pid, comm) or counted as foreign, in frames and in the segments that GSO/TSO
super-packets carry (hostwire.read.sockets)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hostwire.errors import HostwireError
from hostwire.read.pcap import read_pcap
from hostwire.read.sockets import attribute_frames, attribution_counts, read_sockets

log = logging.getLogger(__name__)


def segments_carried(frames: pd.DataFrame, mtu: int | None) -> np.ndarray:
    """Per frame, the segments it carries: a frame larger than the interface's MTU was handed to
    the capture before segmentation (GSO/TSO on send, GRO on receive) and counts as its payload
    divided by the payload one MTU-sized frame of the same headers holds, rounded up."""
    ones = np.ones(len(frames), dtype=np.int64)
    if not mtu or len(frames) == 0:
        return ones
    ip_len = frames["ip_len"].to_numpy().astype(np.int64)
    payload = frames["payload_len"].to_numpy().astype(np.int64)
    per_segment = np.maximum(mtu - (ip_len - payload), 1)
    # loopback's MTU is 64 KiB: its frames are frames (the capture of "any" does not say which
    # interface a frame crossed, its addresses do)
    src, dst = frames["src"].astype(str), frames["dst"].astype(str)
    looped = (src.str.startswith("127.") | (src == "::1") | dst.str.startswith("127.") | (dst == "::1")).to_numpy()
    big = (ip_len > mtu) & ~looped
    out = ones.copy()
    out[big] = -(-payload[big] // per_segment[big])
    return np.maximum(out, 1)


def attribute_run(run_dir: Path, manifest: dict[str, Any]) -> dict[str, Any] | None:
    """The attribution entry, or None when the capture or the socket table cannot be read (the
    reason logged: the run keeps its data)."""
    raw = run_dir / "raw"
    try:
        frames = read_pcap(raw / "wire.pcap", keep_damaged=True)
        sockets = read_sockets(raw / "sockets.tsv", keep_damaged=True)
    except HostwireError as err:
        log.warning("attribution skipped: %s", err)
        return None
    wired = [i for i in manifest.get("link", {}).get("interfaces", []) if not i.get("loopback")]
    mtu = min((int(i["mtu"]) for i in wired), default=None)
    owners = attribute_frames(frames, sockets)
    return attribution_counts(frames, owners, segments_carried(frames, mtu))
