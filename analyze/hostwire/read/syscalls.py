"""Reader of the application timeline: syscalls.tsv (one record per I/O system call, written by
hw-iotrace's ptrace and preload backends and by hw-schedtrace's tracefs backend) and its
counters, syscalls.json. Schema in docs/formats.md, section "syscalls.tsv"."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hostwire.versioned import read_json
from hostwire.errors import InputError
from hostwire.read.tsv import MalformedRecordError, TsvFile, iter_records, open_tsv, read_records

COLUMNS = [
    "t_enter_ns", "t_exit_ns", "pid", "tid", "call", "fd", "req_bytes", "result",
    "fd_kind", "fd_desc", "unfinished",
]
INT_COLUMNS = ["t_enter_ns", "t_exit_ns", "pid", "tid", "fd", "req_bytes"]
FD_KINDS = ("tcp", "udp", "unix", "file", "pipe", "other", "unknown")
# "proc": recordings of the first kernel series' /proc/schedtrace ring, still read
BACKENDS = ("ptrace", "preload", "tracefs", "proc")
PIECE_BYTES = 8 << 20  # read_syscalls_of's pieces of text: a piece's typed table takes about seven times its text
_DTYPES: dict[str, Any] = {**{c: "int64" for c in INT_COLUMNS}, "call": str, "result": str, "fd_kind": str,
                           "fd_desc": str, "unfinished": str}


def read_in_pieces(path: Path) -> bool:
    """Whether read_syscalls_of reads more than one piece of this file (else the whole table is
    read once and kept for every reader)."""
    return path.is_file() and path.stat().st_size > PIECE_BYTES


def _resolve(path: str | Path) -> Path:
    path = Path(path)
    if path.is_dir():
        for candidate in (path / "syscalls.tsv", path / "raw" / "syscalls.tsv"):
            if candidate.exists():
                return candidate
        raise InputError(f"{path}: no syscalls.tsv in it (nor in raw/)")
    return path


def _bad_row(path: Path, header_lines: int, mask: np.ndarray, column: str, expected: str, values: pd.Series) -> None:
    if mask.any():
        row = int(np.flatnonzero(mask)[0])
        raise InputError(
            f"{path}:{header_lines + row + 1}: column {column}: expected {expected}, got {values.iloc[row]!r}"
        )


def read_syscalls(path: str | Path, *, keep_damaged: bool = False) -> pd.DataFrame:
    """The records of a syscalls.tsv (or of the syscalls.tsv in a directory or its raw/), sorted by
    t_enter_ns. Columns: t_enter_ns, t_exit_ns, pid, tid, fd, req_bytes (int64; req_bytes -1 when
    the call has no byte count), call (str), result (Int64, <NA> when unfinished), fd_kind
    (category), fd_desc (str), unfinished (bool), dur_ns (int64, t_exit_ns - t_enter_ns). The
    file's `#` metadata is in df.attrs["meta"]. A file that is not whole (cut, no trailer, counts
    that disagree: see hostwire.read.tsv) raises InputError naming file and line; keep_damaged=True
    returns its complete records with df.attrs["damage"] set (None for a whole file)."""
    tsv = _open(path)

    def read(dtypes: dict[str, Any] | type) -> pd.DataFrame:
        return read_records(tsv, keep_damaged=keep_damaged, dtype=dtypes, na_filter=False)

    try:  # the fast path: the C parser converts the integer columns
        raw = read(_DTYPES)
    except MalformedRecordError:  # find the bad line and name it
        raw = read(str)
    df = _typed(raw, tsv.path, tsv.header_lines).sort_values("t_enter_ns", kind="stable").reset_index(drop=True)
    df.attrs["meta"] = tsv.meta
    df.attrs["path"] = str(tsv.path)
    df.attrs["damage"] = raw.attrs["damage"]
    return df


def read_syscalls_of(path: str | Path, calls: Collection[str], piece_bytes: int | None = None,
                     progress: Callable[[int, int], None] | None = None) -> pd.DataFrame:
    """The records of read_syscalls whose call is one of `calls`, in its order, read piece by
    piece (about piece_bytes of text each, default PIECE_BYTES): the memory follows the calls
    kept, not the file. A file that is not whole raises InputError naming file and line, as
    read_syscalls does, and every record's values are checked as there."""
    kept = list(iter_syscalls_of(path, calls, piece_bytes, progress))
    df = pd.concat(kept, ignore_index=True)
    df = df.sort_values("t_enter_ns", kind="stable").reset_index(drop=True)
    df.attrs.update(kept[0].attrs)
    return df


def iter_syscalls_of(path: str | Path, calls: Collection[str], piece_bytes: int | None = None,
                     progress: Callable[[int, int], None] | None = None) -> Iterator[pd.DataFrame]:
    """read_syscalls_of's records a piece at a time, in the file's order (not sorted by entry),
    at least one piece (empty for a file without such calls), each with the file's attrs; the
    file's damage is raised once reached, after the pieces before it."""
    tsv = _open(path)
    records, given = 0, 0
    attrs = {"meta": tsv.meta, "path": str(tsv.path), "damage": None}
    try:
        for raw in iter_records(tsv, piece_bytes or PIECE_BYTES, progress, dtype=_DTYPES, na_filter=False):
            typed = _typed(raw, tsv.path, tsv.header_lines + records)  # every record checked, as whole
            records += len(raw)
            piece = typed[typed["call"].isin(calls).to_numpy()].reset_index(drop=True)
            if len(piece) or not given:
                piece.attrs.update(attrs)
                given += 1
                yield piece
    except MalformedRecordError:  # the whole file's reading names the bad record
        read_syscalls(path)
        raise
    if not given:
        empty = _typed(pd.DataFrame({c: pd.Series(dtype=str) for c in COLUMNS}), tsv.path, tsv.header_lines)
        empty.attrs.update(attrs)
        yield empty


def _open(path: str | Path) -> TsvFile:
    tsv = open_tsv(_resolve(path))
    path, meta, columns, header_lines = tsv.path, tsv.meta, tsv.columns, tsv.header_lines
    if meta.get("kind") != "syscalls":
        raise InputError(f"{path}:{tsv.meta_lines.get('kind', 2)}: expected '# kind: syscalls', got {meta.get('kind')!r}")
    if meta.get("backend") not in BACKENDS:
        raise InputError(f"{path}:{tsv.meta_lines.get('backend', 3)}: '# backend:' must be one of "
                         f"{', '.join(BACKENDS)}, got {meta.get('backend')!r}")
    if columns != COLUMNS:
        raise InputError(f"{path}:{header_lines}: expected the columns {' '.join(COLUMNS)}, got {' '.join(columns)}")
    return tsv


def _typed(raw: pd.DataFrame, path: Path, header_lines: int) -> pd.DataFrame:
    """The records' typed columns (read_syscalls'), each value checked; an error names the line
    (header_lines: the lines before raw's first record)."""
    df = pd.DataFrame(index=raw.index)
    for col in INT_COLUMNS:
        if raw[col].dtype == "int64":
            df[col] = raw[col]
            continue
        values = pd.to_numeric(raw[col], errors="coerce")
        _bad_row(path, header_lines, values.isna().to_numpy(), col, "an integer", raw[col])
        df[col] = values.astype("int64")
    unfinished = raw["unfinished"]
    _bad_row(path, header_lines, ~unfinished.isin(["0", "1"]).to_numpy(), "unfinished", "0 or 1", unfinished)
    df["unfinished"] = unfinished == "1"
    result = pd.to_numeric(raw["result"].where(raw["result"] != ""), errors="coerce")
    bad = (result.isna() & (raw["result"] != "")) | (result.isna() & ~df["unfinished"])
    _bad_row(path, header_lines, bad.to_numpy(), "result", "an integer (empty only when unfinished)", raw["result"])
    df["result"] = result.astype("Int64")
    kinds = raw["fd_kind"]
    _bad_row(path, header_lines, ~kinds.isin(FD_KINDS).to_numpy(), "fd_kind", "|".join(FD_KINDS), kinds)
    df["call"] = raw["call"]
    df["fd_kind"] = pd.Categorical(kinds, categories=FD_KINDS)
    df["fd_desc"] = _unescape(raw["fd_desc"])
    df["dur_ns"] = df["t_exit_ns"] - df["t_enter_ns"]
    return df[[*COLUMNS, "dur_ns"]]


def _unescape(values: pd.Series) -> pd.Series:
    if not values.str.contains("\\", regex=False).any():
        return values
    table = {"t": "\t", "n": "\n", "r": "\r", "\\": "\\"}
    return values.str.replace(r"\\([tnr\\])", lambda m: table[m.group(1)], regex=True)


def read_counters(path: str | Path) -> dict:
    """syscalls.json: calls_seen, records_written, unfinished, lost, ... (docs/formats.md)."""
    path = Path(path)
    if path.is_dir():
        path = path / "syscalls.json"
    elif path.suffix == ".tsv":
        path = path.with_suffix(".json")
    data = read_json(path, "hostwire-syscalls", 1, missing="the counters hw-iotrace writes beside syscalls.tsv")
    return data


def send_calls(df: pd.DataFrame, kinds: tuple[str, ...] = ("tcp",)) -> pd.DataFrame:
    """The tracer's finished records that send data (hostwire.read.send_styles.SEND_CALLS) on fds
    of the given kinds, with bytes (send_styles.sent_bytes): the system-call records, in
    syscalls.tsv's columns (Run.df_writes is the benchmark's own log of its writes, in other
    columns)."""
    from hostwire.read.send_styles import SEND_CALLS, sent_bytes

    sel = df["call"].isin(SEND_CALLS) & df["fd_kind"].isin(kinds) & ~df["unfinished"]
    out = df.loc[sel].copy()
    out["bytes"] = sent_bytes(out)
    return out
