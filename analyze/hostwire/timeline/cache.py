"""Parquet copies of a run's timeline tables under the run's tables/ (timeline-<name>.parquet).

A copy records, in its Parquet metadata (`hostwire.sources`), what it was made from and by: the
fingerprint of the run's sources (hostwire.run_directory.Run.sources_fingerprint: the sha256 of
every raw file and of the manifest) and the digest of the code that builds the tables
(hostwire.code_digest of hostwire.timeline.build and every module it imports; `made_by`). It is
used only while both are the same, so a changed table builder rebuilds it, and never when a raw file
differs from the digest its runner recorded; a copy that does not read back whole is rebuilt with
a warning naming it. A run directory that cannot be written to is read all the same: the table
is then built on every load."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from hostwire.code_digest import code_digest
from hostwire.errors import HostwireError
from hostwire.safewrite import write_with

log = logging.getLogger(__name__)

BUILDER = "hostwire.timeline.build"  # the module whose code (with all it imports) makes the copies
CACHED = ("switches", "wakeups", "migrations", "running", "task_states", "runqueue", "data_frames", "segments",
          "backlog")
SOURCES_KEY = b"hostwire.sources"
ATTRS_KEY = b"PANDAS_ATTRS"  # where pandas keeps DataFrame.attrs in Parquet


def path_of(run_path: Path, name: str) -> Path:
    return run_path / "tables" / f"timeline-{name}.parquet"


def made_by(sources: str) -> str:
    """What a copy is keyed on: the run's sources fingerprint and the digest of the builder's code."""
    return f"{sources} code {code_digest(BUILDER)}"


def read_copy(path: Path, key: str) -> pd.DataFrame | None:
    """The table of a copy keyed on `key` (made_by); None when there is none, it was made from
    other sources or by other code, or it does not read back whole (then with a warning)."""
    try:
        table = pq.read_table(path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, pa.ArrowException) as err:
        log.warning("%s: damaged cache (%s); rebuilt", path, str(err).splitlines()[0] if str(err) else type(err).__name__)
        return None
    meta = table.schema.metadata or {}
    if meta.get(SOURCES_KEY) != key.encode():
        return None
    try:
        df = table.to_pandas()
        if ATTRS_KEY in meta:
            df.attrs = json.loads(meta[ATTRS_KEY])
    except (ValueError, TypeError, pa.ArrowException) as err:
        log.warning("%s: damaged cache (%s); rebuilt", path, err)
        return None
    return df


def write_copy(path: Path, df: pd.DataFrame, key: str) -> None:
    """Writes the copy through hostwire.safewrite (a fresh temporary file renamed; the run folder
    and tables/ not followed if symbolic links); a copy that cannot be written (a symlinked
    tables/, a full disk) is only not kept."""
    try:
        table = pa.Table.from_pandas(df, preserve_index=False)
        meta = dict(table.schema.metadata or {})
        meta[SOURCES_KEY] = key.encode()
        if df.attrs:
            meta[ATTRS_KEY] = json.dumps(df.attrs).encode()
        table = table.replace_schema_metadata(meta)
        write_with(path, lambda handle: pq.write_table(table, handle), below=path.parent.parent.parent, create=True)
    except (HostwireError, OSError, ValueError, TypeError, pa.ArrowException):
        pass


def cached(run_path: Path, name: str, sources: str | None, build: Callable[[], pd.DataFrame]) -> pd.DataFrame:
    """The table from its Parquet copy when that was made from `sources` (the run's
    fingerprint) by today's code, else built and written. `sources` None (a source differs from
    its recorded digest): built, neither read from nor written to a copy."""
    path = path_of(run_path, name)
    key = None if sources is None else made_by(sources)
    if key is not None:
        df = read_copy(path, key)
        if df is not None:
            return df
    table = build()
    if key is not None:
        write_copy(path, table, key)
    return table
