"""Parquet copies of a run's timeline tables under the run's tables/ (timeline-<name>-v<N>.parquet),
used while no raw file is newer than the copy and rebuilt otherwise. A run directory that cannot
be written to is read all the same: the table is then built on every load."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from hostwire.errors import HostwireError
from hostwire.safewrite import write_with

VERSION = 1  # raised when a cached table's columns or meaning change: older copies are then ignored
CACHED = ("switches", "wakeups", "migrations", "running", "task_states", "runqueue", "data_frames", "segments",
          "backlog")


def newest_raw_ns(run_path: Path) -> int:
    """The latest modification time of any file under the run's raw/ (0 when none)."""
    newest = 0
    for root, _, files in os.walk(run_path / "raw"):
        for name in files:
            try:
                newest = max(newest, os.stat(os.path.join(root, name)).st_mtime_ns)
            except OSError:
                continue
    return newest


def path_of(run_path: Path, name: str) -> Path:
    return run_path / "tables" / f"timeline-{name}-v{VERSION}.parquet"


def cached(run_path: Path, name: str, newest_raw: int, build: Callable[[], pd.DataFrame]) -> pd.DataFrame:
    """The table from its Parquet copy when that is at least as new as every raw file, else built
    and written (atomically: a temporary file renamed)."""
    path = path_of(run_path, name)
    try:
        if path.stat().st_mtime_ns >= newest_raw:
            return pd.read_parquet(path)
    except (OSError, ValueError):
        pass
    table = build()
    try:  # a copy that cannot be written (a symlinked tables/, a full disk) is only not kept
        write_with(path, lambda handle: table.to_parquet(handle, index=False), below=run_path.parent, create=True)
    except (HostwireError, ValueError, TypeError):
        pass
    return table
