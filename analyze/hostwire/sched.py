"""Readers of hw-schedtrace's outputs (docs/formats.md, "hw-schedtrace"): sched.tsv (one kernel
event per line), syscalls.tsv (one I/O system call per line, the schema hw-iotrace writes) and
sched.json (per-CPU loss counters, clock check)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from hostwire.errors import InputError
from hostwire.tsv import read_header

SCHED_JSON_FORMAT = "hostwire-sched"
SCHED_JSON_VERSION = 1
BASE_COLUMNS = ("t_ns", "cpu", "event", "pid", "comm")
SYSCALL_COLUMNS = ("t_enter_ns", "t_exit_ns", "pid", "tid", "call", "fd", "req_bytes", "result",
                   "fd_kind", "fd_desc", "unfinished")
_TEXT_COLUMNS = {"event", "comm", "call", "fd_kind", "fd_desc"}


def _read_text_table(path: Path, required: tuple[str, ...]) -> tuple[dict[str, str], pd.DataFrame]:
    meta, columns, header_lines = read_header(path)
    missing = [c for c in required if c not in columns]
    if missing:
        raise InputError(f"{path}:{header_lines}: column header lacks {', '.join(missing)}")
    try:
        df = pd.read_csv(path, sep="\t", skiprows=header_lines, names=columns, header=None,
                         dtype=str, keep_default_na=False, na_filter=False, engine="c",
                         quoting=3)
    except (ValueError, pd.errors.ParserError) as err:
        raise InputError(f"{path}: malformed record: {err}") from None
    return meta, df


def _numeric(df: pd.DataFrame, path: Path, strict: tuple[str, ...]) -> pd.DataFrame:
    """Columns whose non-empty cells are all integers become nullable Int64 (empty = <NA>);
    the columns named in `strict` must convert, and a bad cell is reported with its line."""
    out = {}
    for name in df.columns:
        col = df[name]
        if name in _TEXT_COLUMNS:
            out[name] = col
            continue
        filled = col != ""
        values = pd.to_numeric(col.where(filled), errors="coerce")
        bad = filled & values.isna()
        too_big = bool(filled.any()) and values[filled].abs().max() >= 2**63
        if bad.any() or too_big:
            if name in strict:
                row = int(bad.to_numpy().nonzero()[0][0]) if bad.any() else 0
                raise InputError(f"{path}: record {row + 1}: column {name} expected an integer, "
                                 f"got {col.iloc[row]!r}")
            out[name] = col
            continue
        out[name] = values.astype("Int64")
    return pd.DataFrame(out)


def read_sched_tsv(path: str | Path) -> tuple[dict[str, str], pd.DataFrame]:
    """sched.tsv as (metadata, DataFrame): t_ns, cpu, pid as int64, event and comm as text, then
    one column per event field (Int64 where every filled cell is an integer, else text; empty
    cells are <NA> or "")."""
    path = Path(path)
    meta, df = _read_text_table(path, BASE_COLUMNS)
    df = _numeric(df, path, strict=("t_ns", "cpu", "pid"))
    for name in ("t_ns", "cpu", "pid"):
        if df[name].isna().any():
            row = int(df[name].isna().to_numpy().nonzero()[0][0])
            raise InputError(f"{path}: record {row + 1}: column {name} is empty")
        df[name] = df[name].astype("int64")
    return meta, df


def read_syscalls_tsv(path: str | Path) -> tuple[dict[str, str], pd.DataFrame]:
    """syscalls.tsv as (metadata, DataFrame) with the hw-iotrace columns; stamps and numbers are
    nullable Int64 (a call entered before the trace has no t_enter_ns, an unfinished one no
    t_exit_ns or result)."""
    path = Path(path)
    meta, df = _read_text_table(path, SYSCALL_COLUMNS)
    df = _numeric(df, path, strict=("t_enter_ns", "t_exit_ns", "pid", "tid", "fd", "req_bytes",
                                    "result", "unfinished"))
    return meta, df


def read_sched_json(path: str | Path) -> dict[str, Any]:
    """sched.json as a dict; rejects other formats and newer versions."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise InputError(f"{path}: cannot open: {err.strerror}") from None
    except json.JSONDecodeError as err:
        raise InputError(f"{path}:{err.lineno}: malformed JSON: {err.msg}") from None
    fmt = str(data.get("format", "")) if isinstance(data, dict) else ""
    name, _, version = fmt.partition(" ")
    if name != SCHED_JSON_FORMAT or not version.isdigit():
        raise InputError(f"{path}: expected format '{SCHED_JSON_FORMAT} N', got {fmt!r}")
    if int(version) > SCHED_JSON_VERSION:
        raise InputError(f"{path}: format version {version} is newer than this hostwire reads "
                         f"({SCHED_JSON_VERSION}); update hostwire")
    return data


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
