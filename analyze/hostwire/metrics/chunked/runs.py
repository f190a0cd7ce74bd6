"""A run directory on the chunked path: the run's capture (raw/wire.pcap) read in chunks, its stamps
mapped onto the run's clock with wirecap.json's clock pairs (as hostwire.run_directory.Run.df_frames maps
them), and the run's view (hostwire.metrics.inputs.view: window, logs, damage, warnings) built from
facts of the capture found in passes over its chunks instead of from its frame table. Every kind
the chunked path serves on a capture it serves on a run too: what a run adds (its logs, manifest
and clock exchange) is small and read as in memory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from hostwire.errors import HostwireError
from hostwire.metrics.damage import DamagedSource, from_attrs
from hostwire.metrics.inputs import WireFacts
from hostwire.read.pcapchunks import CaptureChunks
from hostwire.run_directory import Run

def run_capture(value: Any) -> Path | None:
    """raw/wire.pcap of a run directory (None for anything else, or a run without a capture)."""
    if not isinstance(value, (str, Path)) or not Path(value).is_dir():
        return None
    pcap = Path(value) / "raw" / "wire.pcap"
    return pcap if pcap.is_file() and (Path(value) / "manifest.json").is_file() else None


def clock_pairs(run: Run) -> list[Any] | None:
    """wirecap.json's clock pairs, as Run.df_frames takes them (None without wirecap.json). Raises
    HostwireError when wirecap.json cannot be read or differs from its digest: the in-memory path
    lists that as a damaged source, the caller leaves the run to it."""
    if not (run.path / "raw" / "wirecap.json").exists():
        return None
    pairs = run.wirecap().get("clock_pairs")
    return list(pairs) if pairs else None


def wire_facts(capture: CaptureChunks) -> Any:
    """A hostwire.metrics.inputs.WireReader over a capture read in chunks: the damage Run.df_frames
    would attach to the frames, and the stamps view() takes of them."""
    def read(run: Run, damaged: list[DamagedSource]) -> WireFacts:
        pcap = run.path / "raw" / "wire.pcap"
        damage = capture.attrs.get("damage")
        differs = None if damage else digest_problem(run)  # a file damaged already is not digested
        if differs is not None:
            damage = {"file": str(run.path / differs[0]), "message": differs[1]}
        damaged.extend(from_attrs(damage, str(pcap)))
        if capture.rows == 0:
            return WireFacts(None)
        # only an incomplete run's window reads the last payload stamp: a pass saved otherwise
        last_payload = last_payload_ns(capture) if run.window_is_recorded_only() else None
        return WireFacts(None, "", last_payload, capture.span()[1])
    return read


def digest_problem(run: Run) -> tuple[str, str] | None:
    """(file, why) when the capture or wirecap.json differs from its recorded digest, the capture
    first, as Run.df_frames checks them; None when both match."""
    for relative in ("raw/wire.pcap", "raw/wirecap.json"):
        problem = run.raw_damage(relative)
        if problem:
            return relative, problem
    return None


def last_payload_ns(capture: CaptureChunks) -> int | None:
    """The stamp of the last frame carrying payload (hostwire.metrics.inputs._last_payload_ns)."""
    last: int | None = None
    for chunk in capture.chunks(("t_ns", "payload_len")):
        t = chunk["t_ns"][chunk["payload_len"] > 0]
        if len(t):
            value = int(np.max(t))
            last = value if last is None else max(last, value)
    return last


def readable(run: Run) -> tuple[bool, list[Any] | None]:
    """(whether the chunked path can read the run's capture on the run's clock, the clock pairs)."""
    try:
        return True, clock_pairs(run)
    except HostwireError:
        return False, None
