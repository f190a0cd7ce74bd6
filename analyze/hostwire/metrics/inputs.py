"""What the metrics read: a bare pcap (via hostwire.pcap.read_pcap), a frame table in Parquet
(the columns read_pcap returns) or a run directory (via hostwire.load_run)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from hostwire.errors import HostwireError, InputError
from hostwire.metrics.window import Window, frame_window


@dataclass
class Source:
    """Frames on one clock and their default window; writes, received bytes and the manifest when
    the input is a run."""

    path: Path
    frames: pd.DataFrame | None
    window: Window
    writes: pd.DataFrame | None = None
    clock_sync: pd.DataFrame | None = None  # a run's clock exchanges (hw-bench main.tsv)
    sync_port: int | None = None            # the receiver's UDP port they went to
    received: pd.DataFrame | None = None
    manifest: dict[str, Any] = field(default_factory=dict)
    no_frames_reason: str = ""

    @property
    def is_run(self) -> bool:
        return self.writes is not None or self.received is not None

    def need_frames(self) -> pd.DataFrame:
        """The frames, or an error saying why this input has none."""
        if self.frames is None:
            raise InputError(f"{self.path}: no wire frames ({self.no_frames_reason})")
        return self.frames


def read_frames(path: Path) -> pd.DataFrame:
    if path.suffix == ".parquet":
        try:
            return pd.read_parquet(path)
        except (OSError, ValueError) as err:
            raise InputError(f"{path}: cannot read as a Parquet frame table: {err}") from None
    try:
        from hostwire.pcap import read_pcap  # type: ignore[import-not-found]
    except ImportError:
        raise HostwireError(f"{path}: reading a pcap needs hostwire.pcap, which this installation lacks") from None
    return read_pcap(path)


def open_input(path: str | Path) -> Source:
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: no such file or directory (expected a pcap file or a run directory)")
    if path.is_dir():
        return _open_run(path)
    frames = read_frames(path)
    return Source(path=path, frames=frames, window=frame_window(frames))


def _open_run(path: Path) -> Source:
    try:
        from hostwire import load_run  # type: ignore[attr-defined]
    except ImportError:
        try:
            from hostwire.run import load_run  # type: ignore[import-not-found,no-redef]
        except ImportError:
            raise HostwireError(f"{path}: reading a run directory needs hostwire.load_run, "
                                "which this installation lacks") from None
    run = load_run(path)
    try:
        start, end = run.window_ns()
    except (KeyError, TypeError, ValueError):
        raise InputError(f"{path}: the run has no logging window (manifest window_ns)") from None
    frames: pd.DataFrame | None = None
    reason = ""
    try:
        frames = run.df_frames()
    except InputError as err:
        reason = str(err)
    except ImportError:
        reason = "reading its capture needs hostwire.pcap, which this installation lacks"
    writes = _optional(run, "df_writes")
    received = _optional(run, "df_received")
    manifest = dict(getattr(run, "manifest", {}) or {})
    clock_sync, sync_port = _clock_exchange(run)
    return Source(path=path, frames=frames, window=Window(int(start), int(end)), writes=writes,
                  received=received, manifest=manifest, no_frames_reason=reason, clock_sync=clock_sync,
                  sync_port=sync_port)


def _clock_exchange(run: Any) -> tuple[pd.DataFrame | None, int | None]:
    """The benchmark's clock exchanges and the UDP port they went to; (None, None) for a run
    whose logs do not have them."""
    try:
        return run.bench.df_clock_sync(), int(run.bench.summary["receiver_ports"]["udp"])
    except (AttributeError, HostwireError, KeyError, TypeError, ValueError):
        return None, None


def _optional(run: Any, method: str) -> pd.DataFrame | None:
    """run.<method>() when the Run has it; a log it cannot read is an error, not an absence."""
    fn = getattr(run, method, None)
    return None if fn is None else fn()
