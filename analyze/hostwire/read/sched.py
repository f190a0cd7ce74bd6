"""Readers of hw-schedtrace's outputs (docs/formats.md, "hw-schedtrace"): sched.tsv (one kernel
event per line) and sched.json (per-CPU loss counters, clock check). Its syscalls.tsv has
hw-iotrace's schema and is read by hostwire.read.syscalls; hostwire.record.collectors runs the collector
beside a benchmark."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from hostwire.versioned import read_json
from hostwire.errors import InputError
from hostwire.read.tsv import TsvFile, open_tsv, read_records

SCHED_JSON_FORMAT = "hostwire-sched"
SCHED_JSON_VERSION = 1
BASE_COLUMNS = ("t_ns", "cpu", "event", "pid", "comm")


_DTYPES = {"int": "Int64", "uint": "UInt64", "str": str}


def _read_table(tsv: TsvFile, required: tuple[str, ...], types: dict[str, str],
                columns: list[str] | None = None, keep_damaged: bool = False) -> pd.DataFrame:
    """Reads a TSV whose column kinds are known: empty integer cells become <NA>, empty text ""."""
    path, names = tsv.path, tsv.columns
    missing = [c for c in required if c not in names]
    if missing:
        raise InputError(f"{path}:{tsv.header_lines}: column header lacks {', '.join(missing)}")
    if columns is not None:
        unknown = [c for c in columns if c not in names]
        if unknown:
            raise InputError(f"{path}: no column {', '.join(unknown)}; it has {', '.join(names)}")
    usecols = columns if columns is not None else names
    dtype = {name: _DTYPES[types.get(name, "str")] for name in usecols}
    df = read_records(tsv, keep_damaged=keep_damaged, usecols=usecols, dtype=dtype, keep_default_na=False,
                      na_values={n: [""] for n in usecols if dtype[n] is not str}, encoding="ascii")
    out = df[usecols]
    out.attrs.update(df.attrs)
    return out


def read_sched_tsv(path: str | Path, columns: list[str] | None = None, *, keep_damaged: bool = False
                   ) -> tuple[dict[str, str], pd.DataFrame]:
    """sched.tsv as (metadata, DataFrame): t_ns, cpu, pid as int64, event and comm as text, then
    one column per event field, typed by the `# column_types` header: Int64, UInt64 (unsigned
    64-bit fields) or text (strings, byte arrays in hex, pointers as 0x...); a cell of an event
    without that field is <NA> or "". `columns` limits what is read (t_ns etc. are always read).
    A file that is not whole (cut, no trailer, counts that disagree: see hostwire.read.tsv) raises
    InputError naming file and line; keep_damaged=True returns its complete records with
    df.attrs["damage"] set (None for a whole file)."""
    tsv = open_tsv(path)
    path, names = tsv.path, tsv.columns
    kinds = tsv.meta.get("column_types", "").split()
    if len(kinds) != len(names):
        line = tsv.meta_lines.get("column_types", tsv.header_lines)
        raise InputError(f"{path}:{line}: '# column_types' names {len(kinds)} kinds for {len(names)} columns")
    types = dict(zip(names, kinds))
    wanted = None if columns is None else list(dict.fromkeys([*BASE_COLUMNS, *columns]))
    df = _read_table(tsv, BASE_COLUMNS, types, wanted, keep_damaged)
    for name in ("t_ns", "cpu", "pid"):
        if df[name].isna().any():
            row = int(df[name].isna().to_numpy().nonzero()[0][0])
            raise InputError(f"{path}:{tsv.line_after(row)}: column {name} is empty (record {row + 1})")
        df[name] = df[name].astype("int64")
    return tsv.meta, df


def read_sched_json(path: str | Path) -> dict[str, Any]:
    """sched.json as a dict; rejects other formats and newer versions."""
    path = Path(path)
    return read_json(path, SCHED_JSON_FORMAT, SCHED_JSON_VERSION)


def loss_table(summary: dict[str, Any]) -> pd.DataFrame:
    """One row per buffer and CPU: the counters' change over the recording (end - start; <NA>
    where the kernel did not give one) and the losses seen inside the stream."""
    rows = []
    for buf in summary.get("buffers", []):
        for cpu in buf.get("cpus", []):
            row: dict[str, Any] = {"buffer": buf["name"], "cpu": cpu["cpu"], "records": cpu["records"],
                                   "missed_in_stream": cpu["missed_in_stream"]}
            for key in ("entries", "overrun", "commit_overrun", "dropped_events", "read_events"):
                start, end = cpu["start"].get(key), cpu["end"].get(key)
                row[key] = pd.NA if start is None or end is None else end - start
            rows.append(row)
    df = pd.DataFrame(rows)
    for key in ("entries", "overrun", "commit_overrun", "dropped_events", "read_events"):
        if key in df:
            df[key] = df[key].astype("Int64")
    return df

