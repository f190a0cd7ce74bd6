"""What the metrics read: a bare pcap (via hostwire.pcap.read_pcap), a frame table in Parquet
(the columns read_pcap returns) or a run directory (via hostwire.load_run).

A damaged source (a capture or a log cut short) never vanishes: open_input raises InputError
naming the file and where it is damaged, or with keep_damaged=True keeps the intact part and
lists the damage in Source.damaged (hostwire.metrics.damage). The window of a run that is not
complete is the one it recorded (hostwire.run.Run.window_ns); Source.warnings says so."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import inspect
import re

import numpy as np
import pandas as pd

from hostwire.errors import HostwireError, InputError
from hostwire.metrics.damage import DamagedSource, damage_entries, partial_hint
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
    damaged: list[DamagedSource] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # what makes the result less than whole
    status: str | None = None          # a run's status (None for a bare capture)
    reason: str = ""                   # why the run is not complete
    window_cut: str | None = None      # why the window is shorter than planned (None: it is not)
    planned_window: Window | None = None

    @property
    def is_run(self) -> bool:
        return self.writes is not None or self.received is not None

    def need_frames(self) -> pd.DataFrame:
        """The frames, or an error saying why this input has none."""
        if self.frames is None:
            raise InputError(f"{self.path}: no wire frames ({self.no_frames_reason})")
        return self.frames


def read_frames(path: Path, keep_damaged: bool = False) -> pd.DataFrame:
    if path.suffix == ".parquet":
        try:
            return pd.read_parquet(path)
        except (OSError, ValueError) as err:
            raise InputError(f"{path}: cannot read as a Parquet frame table: {err}") from None
    try:
        from hostwire.pcap import read_pcap  # type: ignore[import-not-found]
    except ImportError:
        raise HostwireError(f"{path}: reading a pcap needs hostwire.pcap, which this installation lacks") from None
    return read_pcap(path, keep_damaged=keep_damaged)


def open_input(path: str | Path, keep_damaged: bool = False) -> Source:
    """The frames, window and logs of INPUT. A damaged source raises InputError naming the file and
    where it is damaged unless keep_damaged, which keeps what can be read, lists the damage in
    Source.damaged and ends the window at the last intact frame of a damaged capture."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: no such file or directory (expected a pcap file or a run directory)")
    source = _open_run(path, keep_damaged) if path.is_dir() else _open_capture(path)
    if source.damaged and not keep_damaged:
        raise InputError(partial_hint(source.damaged))
    return source


def _open_capture(path: Path) -> Source:
    frames = read_frames(path, keep_damaged=True)
    damaged = damage_entries(frames, str(path))
    if damaged and len(frames) == 0:
        raise InputError(f"{damaged[0].describe()}; no frame before the damage")
    source = Source(path=path, frames=frames, window=frame_window(frames), damaged=damaged)
    for d in damaged:
        source.warnings.append(f"{d.describe()}: computed on the {len(frames)} frame(s) before it")
    return source


def _open_run(path: Path, keep_damaged: bool) -> Source:
    try:
        from hostwire import load_run  # type: ignore[attr-defined]
    except ImportError:
        try:
            from hostwire.run import load_run  # type: ignore[import-not-found,no-redef]
        except ImportError:
            raise HostwireError(f"{path}: reading a run directory needs hostwire.load_run, "
                                "which this installation lacks") from None
    run = load_run(path)
    damaged: list[DamagedSource] = []
    frames, reason = _run_frames(run, damaged)
    writes = _log_table(run, "df_writes", keep_damaged, damaged)
    received = _log_table(run, "df_received", keep_damaged, damaged)
    last_frame = _last_payload_ns(frames)
    try:
        start, end = run.window_ns(last_frame_ns=last_frame)
        planned = Window(*run.planned_window_ns())
    except (KeyError, TypeError, ValueError):
        raise InputError(f"{path}: the run has no logging window (manifest window_ns)") from None
    warnings: list[str] = []
    window_cut = None
    if run.window_is_recorded_only():
        note = str(run.window_warning(last_frame_ns=last_frame))
        warnings.append(note)
        if end < planned.end_ns:
            window_cut = note
    for d in damaged:
        warnings.append(f"{d.describe()}: computed on its intact part")
    pcap_damage = [d for d in damaged if d.file.endswith(".pcap")]
    if pcap_damage and frames is not None and len(frames):
        last_intact = int(frames["t_ns"].to_numpy().max())
        if last_intact < end:
            end = max(start, last_intact)
            window_cut = (f"the capture is damaged at {pcap_damage[0].where()}: the window ends at its last "
                          f"intact frame, {(end - start) / 1e9:.6g} s of the planned {planned.length_ns / 1e9:.6g} s")
            warnings.append(window_cut)
    manifest = dict(getattr(run, "manifest", {}) or {})
    clock_sync, sync_port = _clock_exchange(run)
    return Source(path=path, frames=frames, window=Window(int(start), int(end)), writes=writes,
                  received=received, manifest=manifest, no_frames_reason=reason, clock_sync=clock_sync,
                  sync_port=sync_port, damaged=damaged, warnings=warnings, status=run.status,
                  reason=str(getattr(run, "reason", "") or manifest.get("reason", "") or ""),
                  window_cut=window_cut, planned_window=planned)


def _run_frames(run: Any, damaged: list[DamagedSource]) -> tuple[pd.DataFrame | None, str]:
    """The run's capture on its clock, read up to any damage (listed in `damaged`); (None, why)
    for a run without a capture or one with nothing readable."""
    pcap = Path(run.path) / "raw" / "wire.pcap"
    if not pcap.exists():
        return None, f"{pcap}: missing: this run has no wire capture"
    try:
        from hostwire.pcap import read_pcap, read_wirecap_json
    except ImportError:
        return None, "reading its capture needs hostwire.pcap, which this installation lacks"
    wirecap = pcap.with_name("wirecap.json")
    try:
        pairs = read_wirecap_json(wirecap).get("clock_pairs") if wirecap.exists() else None
        frames = read_pcap(pcap, clock_pairs=pairs, keep_damaged=True)
    except InputError as err:  # nothing of it can be read: still a damaged source, never an absence
        file = str(wirecap) if str(wirecap) in str(err) else str(pcap)
        damaged.append(DamagedSource(file=file, message=str(err), byte_offset=_offset_in(str(err))))
        return None, str(err)
    damaged.extend(damage_entries(frames, str(pcap)))
    return frames, ""


def _offset_in(message: str) -> int | None:
    found = re.search(r"byte offset (\d+)", message)
    return int(found.group(1)) if found else None


def _log_table(run: Any, method: str, keep_damaged: bool, damaged: list[DamagedSource]) -> pd.DataFrame | None:
    """run.<method>() when the Run has it. A log it cannot read is an error, not an absence; with
    keep_damaged the Run is asked for the records before the damage (when its method takes
    keep_damaged), and a log it still cannot read is listed as damaged and left out."""
    fn = getattr(run, method, None)
    if fn is None:
        return None
    if not keep_damaged:
        df = fn()
    else:
        try:
            df = fn(keep_damaged=True) if "keep_damaged" in inspect.signature(fn).parameters else fn()
        except InputError as err:
            file, line = _file_line_in(str(err))
            damaged.append(DamagedSource(file=file or str(Path(run.path) / "raw" / "bench"), message=str(err),
                                         line=line))
            return None
    damaged.extend(damage_entries(df, str(Path(run.path) / "raw" / "bench")))
    return df


def _file_line_in(message: str) -> tuple[str | None, int | None]:
    """The `path:line:` a TSV reader's message starts with."""
    found = re.match(r"(?:failed to read )?(\S+?\.tsv)(?::(\d+))?:", message)
    if not found:
        return None, None
    return found.group(1), int(found.group(2)) if found.group(2) else None


def _last_payload_ns(frames: pd.DataFrame | None) -> int | None:
    """The stamp of the last captured frame carrying payload (None without one)."""
    if frames is None or len(frames) == 0 or "payload_len" not in frames.columns:
        return None
    t = frames["t_ns"].to_numpy()[frames["payload_len"].to_numpy() > 0]
    return int(np.max(t)) if len(t) else None


def _clock_exchange(run: Any) -> tuple[pd.DataFrame | None, int | None]:
    """The benchmark's clock exchanges and the UDP port they went to; (None, None) for a run
    whose logs do not have them."""
    try:
        return run.bench.df_clock_sync(), int(run.bench.summary["receiver_ports"]["udp"])
    except (AttributeError, HostwireError, KeyError, TypeError, ValueError):
        return None, None
