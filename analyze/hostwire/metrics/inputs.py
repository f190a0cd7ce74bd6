"""What the metrics read: a run (a hostwire.run_directory.Run, or its directory), a bare pcap (via
hostwire.read.pcap.read_pcap) or a frame table in Parquet (the columns read_pcap returns).

A Source is the view one metric call takes of its input: for a run, the Run's own tables (the Run
reads and decodes each raw file once, however many metrics ask), the window the call uses and the
damage it met; it reads nothing itself. Give the metrics one Run and they share what it read.

A damaged source (a capture or a log cut short) never vanishes: open_input raises InputError
naming the file and where it is damaged, or with keep_damaged=True keeps the intact part and
lists the damage in Source.damaged (hostwire.metrics.damage). The window of a run that is not
complete is the one it recorded (hostwire.run_directory.Run.window_ns); Source.warnings says so. A run that
lacks a file the metric needs (hostwire.metrics.needs) is refused before anything is read."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from hostwire.errors import HostwireError, InputError
from hostwire.metrics.damage import DamagedSource, damage_entries, partial_hint
from hostwire.metrics.window import frame_window
from hostwire.window import Window
from hostwire.read.needs import Needs
from hostwire.run_directory import Run, load_run


@dataclass
class Source:
    """Frames on one clock and their default window; writes, received bytes and the manifest when
    the input is a run (`run`: the Run they come from; None for a bare capture or a view built by
    hand)."""

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
    run: Run | None = None

    @property
    def is_run(self) -> bool:
        return self.run is not None or self.writes is not None or self.received is not None

    def need_frames(self) -> pd.DataFrame:
        """The frames, or an error saying why this input has none."""
        if self.frames is None:
            raise InputError(f"{self.path}: no wire frames ({self.no_frames_reason})")
        return self.frames


@dataclass
class WireFacts:
    """What a run's view takes of its capture: the frames (None when there are none, or when the
    caller reads them in chunks: hostwire.metrics.chunked.engine), why there are none, and the
    stamps of the last frame carrying payload (the end of an incomplete run's window) and of the
    last frame (where a damaged capture's window ends); None without frames."""

    frames: pd.DataFrame | None
    reason: str = ""
    last_payload_ns: int | None = None
    last_ns: int | None = None


# reads a run's capture for view(): appends the damage it meets to the list it is given
WireReader = Callable[[Run, list[DamagedSource]], WireFacts]


def read_frames(path: Path, keep_damaged: bool = False) -> pd.DataFrame:
    if path.suffix == ".parquet":
        try:
            return pd.read_parquet(path)
        except (OSError, ValueError) as err:
            raise InputError(f"{path}: cannot read as a Parquet frame table: {err}") from None
    from hostwire.read.pcap import read_pcap

    return read_pcap(path, keep_damaged=keep_damaged)


def open_input(run_or_path: Run | str | Path, keep_damaged: bool = False, needs: Needs | None = None,
               wire: WireReader | None = None) -> Source:
    """The frames, window and logs of INPUT: a Run, a run directory, a pcap or a Parquet frame
    table. On a run, `needs` (the raw files the caller reads) is checked first: a missing one
    raises InputError naming it before anything is read. A damaged source raises InputError naming
    the file and where it is damaged unless keep_damaged, which keeps what can be read, lists the
    damage in Source.damaged and ends the window at the last intact frame of a damaged capture."""
    if isinstance(run_or_path, Run):
        run = run_or_path
    else:
        path = Path(run_or_path)
        if not path.exists():
            raise InputError(f"{path}: no such file or directory (expected a pcap file or a run directory)")
        if not path.is_dir():
            return _checked(_open_capture(path), keep_damaged)
        run = load_run(path)
    if needs is not None:
        run.require(needs)
    return _checked(view(run, keep_damaged, wire), keep_damaged)


def _checked(source: Source, keep_damaged: bool) -> Source:
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


def view(run: Run, keep_damaged: bool = False, wire: WireReader | None = None) -> Source:
    """The Source of a run: its frames (read up to any damage), writes, reads and clock exchanges
    from the Run, every damage met listed (a damaged log only with keep_damaged: without, it
    raises), the window it recorded and why it is cut. `wire` reads the capture in place of the
    Run's df_frames (the chunked engine gives the same facts of a capture it reads in chunks, so
    both engines take one window, one damage list and the same warnings)."""
    damaged: list[DamagedSource] = []
    facts = (wire or _run_frames)(run, damaged)
    frames, reason = facts.frames, facts.reason
    writes = _log_table(run, "df_writes", keep_damaged, damaged)
    received = _log_table(run, "df_received", keep_damaged, damaged)
    last_frame = facts.last_payload_ns
    try:
        start, end = run.window_ns(last_frame_ns=last_frame)
        planned = Window(*run.planned_window_ns())
    except (KeyError, TypeError, ValueError):
        raise InputError(f"{run.path}: the run has no logging window (manifest window_ns)") from None
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
    if pcap_damage and facts.last_ns is not None:
        last_intact = facts.last_ns
        if last_intact < end:
            end = max(start, last_intact)
            window_cut = (f"the capture is damaged at {pcap_damage[0].where()}: the window ends at its last "
                          f"intact frame, {(end - start) / 1e9:.6g} s of the planned {planned.length_ns / 1e9:.6g} s")
            warnings.append(window_cut)
    manifest = dict(run.manifest or {})
    clock_sync, sync_port = _clock_exchange(run, damaged)
    return Source(path=run.path, frames=frames, window=Window(int(start), int(end)), writes=writes,
                  received=received, manifest=manifest, no_frames_reason=reason, clock_sync=clock_sync,
                  sync_port=sync_port, damaged=damaged, warnings=warnings, status=run.status,
                  reason=str(run.reason or manifest.get("reason", "") or ""),
                  window_cut=window_cut, planned_window=planned, run=run)


def _run_frames(run: Run, damaged: list[DamagedSource]) -> WireFacts:
    """The run's capture on its clock, read up to any damage (listed in `damaged`); no frames and
    why for a run without a capture or one with nothing readable."""
    pcap = run.path / "raw" / "wire.pcap"
    if not pcap.exists():
        return WireFacts(None, f"{pcap}: missing: this run has no wire capture")
    wirecap = pcap.with_name("wirecap.json")
    try:
        frames = run.df_frames(keep_damaged=True)
    except InputError as err:  # nothing of it can be read: still a damaged source, never an absence
        file = str(wirecap) if str(wirecap) in str(err) else str(pcap)
        damaged.append(DamagedSource(file=file, message=str(err), byte_offset=_offset_in(str(err))))
        return WireFacts(None, str(err))
    damaged.extend(damage_entries(frames, str(pcap)))
    last = int(frames["t_ns"].to_numpy().max()) if len(frames) else None
    return WireFacts(frames, "", _last_payload_ns(frames), last)


def _offset_in(message: str) -> int | None:
    found = re.search(r"byte offset (\d+)", message)
    return int(found.group(1)) if found else None


def _log_table(run: Run, method: str, keep_damaged: bool, damaged: list[DamagedSource]) -> pd.DataFrame | None:
    """run.<method>(). A log it cannot read is an error, not an absence; with keep_damaged the Run
    gives the records before the damage, and a log it still cannot read is listed as damaged and
    left out."""
    fn = getattr(run, method)
    if not keep_damaged:
        df = fn()
    else:
        try:
            df = fn(keep_damaged=True)
        except InputError as err:
            file, line = _file_line_in(str(err))
            damaged.append(DamagedSource(file=file or str(run.path / "raw" / "bench"), message=str(err),
                                         line=line))
            return None
    damaged.extend(damage_entries(df, str(run.path / "raw" / "bench")))
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


def _clock_exchange(run: Run, damaged: list[DamagedSource]) -> tuple[pd.DataFrame | None, int | None]:
    """The benchmark's clock exchanges (raw/bench/main.tsv, with damage kept) and the UDP port
    they went to (bench.json); (None, None) for a run whose logs do not have them. Files that are
    there but cannot be read are listed in `damaged`: the check they feed never vanishes
    silently."""
    main, summary = run.path / "raw" / "bench" / "main.tsv", run.path / "raw" / "bench" / "bench.json"
    if not main.exists():
        return None, None
    try:
        table = run.df_clock_sync(keep_damaged=True)
    except HostwireError as err:
        damaged.append(DamagedSource(file=str(main), message=str(err)))
        return None, None
    damaged.extend(damage_entries(table, str(main)))
    if not summary.exists():
        return None, None
    try:
        return table, int(run.bench_summary()["receiver_ports"]["udp"])
    except HostwireError as err:
        damaged.append(DamagedSource(file=str(summary), message=str(err)))
    except (KeyError, TypeError, ValueError) as err:
        damaged.append(DamagedSource(file=str(summary), message=f"no receiver UDP port ({err!r})"))
    return None, None
