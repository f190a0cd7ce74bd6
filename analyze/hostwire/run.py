"""A recorded run directory (DESIGN.md section 7) as DataFrames on the run's reference clock, the
sender host's CLOCK_MONOTONIC."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from hostwire.bench import BenchResult
from hostwire.errors import InputError
from hostwire.runner import MANIFEST_FORMAT
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
        return str(self.manifest.get("status", "unknown"))

    @property
    def losses(self) -> dict[str, Any]:
        return dict(self.manifest.get("losses", {}))

    def window_ns(self) -> tuple[int, int]:
        """The logging window (start, end) in ns."""
        window = self.manifest.get("window_ns")
        if window:
            return int(window[0]), int(window[1])
        return self.bench.window_ns

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
