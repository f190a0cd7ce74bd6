"""A recorded run directory (DESIGN.md section 7) as DataFrames on the run's reference clock, the
sender host's CLOCK_MONOTONIC."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from hostwire.bench import BenchResult
from hostwire.errors import HostwireError, InputError
from hostwire.manifest import MANIFEST_FORMAT, effective_status
from hostwire.versioned import read_json

SUPPORTED_MANIFEST_VERSION = int(MANIFEST_FORMAT.split()[1])


def _stream_name(src: str, dst: str) -> str:
    return f"{src}>{dst}"


class Run:
    """One run. `df_*` methods return DataFrames with documented columns; stamps are int64 ns."""

    def __init__(self, path: Path, manifest: dict[str, Any]) -> None:
        self.path = path
        self.manifest = manifest
        self.bench = BenchResult(directory=path / "raw" / "bench")

    @property
    def status(self) -> str:
        """complete, partial or failed; a run whose runner was killed before it could mark it is
        partial (see hostwire.manifest.effective_status)."""
        return effective_status(self.manifest)[0]

    @property
    def reason(self) -> str:
        return effective_status(self.manifest)[1]

    @property
    def losses(self) -> dict[str, Any]:
        return dict(self.manifest.get("losses", {}))

    def window_ns(self, last_frame_ns: int | None = None) -> tuple[int, int]:
        """The logging window (start, end) in ns. For a complete run whose manifest holds it: the
        logging window. Otherwise (a run interrupted, partial or failed, or a manifest without
        window_ns) the window that was recorded: from the planned start up to the last recorded
        event, never beyond the planned end. The last recorded event is the latest record of the
        benchmark's process logs (send-*, recv-*, bg-*) or `last_frame_ns` (a caller that read the
        capture gives its last frame carrying payload); with none, the window is empty.
        window_warning() says when and why the window was cut."""
        start, end = self.planned_window_ns()
        if not self.window_is_recorded_only():
            return start, end
        candidates = [t for t in (self.last_record_ns(), last_frame_ns) if t is not None]
        if not candidates:
            return start, start
        return start, max(start, min(end, max(candidates)))

    def planned_window_ns(self) -> tuple[int, int]:
        """The logging window as planned: the manifest's window_ns, else bench.json's, else the
        `# window_start_ns` / `# window_end_ns` headers of the benchmark's logs."""
        window = self.manifest.get("window_ns")
        if window:
            return int(window[0]), int(window[1])
        try:
            return self.bench.window_ns
        except (HostwireError, KeyError, TypeError, ValueError):
            pass
        from hostwire.tsv import read_header

        for path in self._process_logs():
            try:
                meta = read_header(path)[0]
                return int(meta["window_start_ns"]), int(meta["window_end_ns"])
            except (HostwireError, KeyError, ValueError):
                continue
        raise InputError(f"{self.path}: the run has no logging window (no window_ns in manifest.json, "
                         "no readable raw/bench/bench.json, no window in the logs' headers)")

    def window_is_recorded_only(self) -> bool:
        """True when the planned window cannot be trusted to have been recorded: the run is not
        complete or its manifest has no window_ns."""
        return self.status != "complete" or not self.manifest.get("window_ns")

    def window_warning(self, last_frame_ns: int | None = None) -> str | None:
        """Why the window is cut to what was recorded (None for a complete run's full window)."""
        if not self.window_is_recorded_only():
            return None
        start, end = self.planned_window_ns()
        got = self.window_ns(last_frame_ns)
        why = (f"the run is {self.status}" + (f" ({self.reason})" if self.reason else "")
               if self.status != "complete" else "the manifest has no window_ns")
        if got[1] >= end:
            return f"{why}: its events reach the planned end of the window ({(end - start) / 1e9:.6g} s)"
        return (f"{why}: the window is what was recorded, {(got[1] - got[0]) / 1e9:.6g} s of the planned "
                f"{(end - start) / 1e9:.6g} s")

    def last_record_ns(self) -> int | None:
        """The latest stamp in the benchmark's process logs (records of a damaged log up to its
        damage); None without any record."""
        cached: int | None | bool = getattr(self, "_last_record", False)
        if cached is False:
            from hostwire.tsv import read_tsv

            last: int | None = None
            for path in self._process_logs():
                try:
                    df = read_tsv(path, {"t_ns": "int64"}, keep_damaged=True).df
                except HostwireError:
                    continue
                if "t_ns" in df.columns and len(df):
                    value = int(pd.to_numeric(df["t_ns"], errors="coerce").max())
                    last = value if last is None else max(last, value)
            self._last_record = cached = last
        return cached  # type: ignore[return-value]

    def _process_logs(self) -> list[Path]:
        directory = self.path / "raw" / "bench"
        return sorted(p for p in directory.glob("*-*.tsv") if p.stem.split("-")[0] in ("send", "recv", "bg"))

    def df_writes(self) -> pd.DataFrame:
        """The senders' write() calls: `t_ns` (start of the call), `t_end_ns`, `pid`, `role`,
        `stream` (src:port>dst:port), `bytes` (bytes written), `bytes_requested`."""
        frames = []
        for role in self.bench.roles("send"):
            entry = self.bench.log(role)
            df = entry.df
            starts = df.index[df["event"] == "write_start"]
            # A write_end follows its write_start directly in the log.
            ends = starts + 1
            ok = ends < len(df)
            starts, ends = starts[ok], ends[ok]
            ends_df = df.loc[ends]
            complete = (ends_df["event"] == "write_end").to_numpy()
            starts, ends = starts[complete], ends[complete]
            frames.append(pd.DataFrame({
                "t_ns": df.loc[starts, "t_ns"].to_numpy(),
                "t_end_ns": df.loc[ends, "t_ns"].to_numpy(),
                "pid": int(entry.meta["pid"]),
                "role": role,
                "stream": _stream_name(entry.meta.get("local", "?"), entry.meta.get("peer", "?")),
                "bytes": df.loc[ends, "bytes"].to_numpy(),
                "bytes_requested": df.loc[starts, "bytes"].to_numpy(),
            }))
        columns = ["t_ns", "t_end_ns", "pid", "role", "stream", "bytes", "bytes_requested"]
        if not frames:
            return pd.DataFrame(columns=columns)
        return pd.concat(frames, ignore_index=True).sort_values("t_ns", kind="stable").reset_index(drop=True)

    def df_received(self) -> pd.DataFrame:
        """The receivers' reads: `t_ns` (sender clock), `t_raw_ns`, `bytes`, `role`, `stream`."""
        frames = []
        for role in self.bench.roles("recv"):
            entry = self.bench.log(role)
            frames.append(entry.df.assign(
                role=role, stream=_stream_name(entry.meta.get("peer", "?"), entry.meta.get("local", "?"))))
        if not frames:
            return pd.DataFrame(columns=["t_ns", "t_raw_ns", "bytes", "role", "stream"])
        return pd.concat(frames, ignore_index=True).sort_values("t_ns", kind="stable").reset_index(drop=True)

    def df_resources(self) -> pd.DataFrame:
        """The host's /proc/stat samples during the run (see hostwire.resources); pass them to
        hostwire.resources.df_cpu_use for busy and stolen shares per interval."""
        path = self.path / "raw" / "resources.tsv"
        if not path.exists():
            raise InputError(f"{path}: missing: this run has no resource samples")
        from hostwire.resources import read_resources

        return read_resources(path)

    def df_frames(self) -> pd.DataFrame:
        """The wire capture's frames with `t_ns` on the run's clock (see hostwire.pcap.read_pcap)."""
        pcap = self.path / "raw" / "wire.pcap"
        if not pcap.exists():
            raise InputError(f"{pcap}: missing: this run has no wire capture")
        from hostwire.pcap import read_pcap

        from hostwire.pcap import read_wirecap_json

        wirecap = self.path / "raw" / "wirecap.json"
        pairs = read_wirecap_json(wirecap).get("clock_pairs") if wirecap.exists() else None
        return read_pcap(pcap, clock_pairs=pairs)


def load_run(path: str | Path) -> Run:
    """Opens a run directory written by the runner (complete or partial)."""
    path = Path(path)
    manifest_path = path / "manifest.json"
    if not manifest_path.exists():
        raise InputError(f"{path}: not a run directory (no manifest.json)")
    manifest = read_json(manifest_path, "hostwire-run", SUPPORTED_MANIFEST_VERSION)
    return Run(path, manifest)
