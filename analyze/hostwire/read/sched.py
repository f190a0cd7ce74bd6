"""Readers of hw-schedtrace's outputs (docs/formats.md, "hw-schedtrace"): sched.tsv (one kernel
event per line) and sched.json (per-CPU loss counters, clock check). Its syscalls.tsv has
hw-iotrace's schema and is read by hostwire.read.syscalls; hostwire.record.collectors runs the collector
beside a benchmark."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd

from hostwire.versioned import read_json
from hostwire.errors import InputError
from hostwire.read.tsv import TsvFile, iter_records, open_tsv, read_records

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
    tsv, types, wanted = _open_sched(path, columns)
    df = _read_table(tsv, BASE_COLUMNS, types, wanted, keep_damaged)
    return tsv.meta, _base_types(tsv, df, 0)


def iter_sched_tsv(path: str | Path, columns: list[str] | None = None, *, piece_bytes: int,
                   progress: Callable[[int, int], None] | None = None) -> Iterator[pd.DataFrame]:
    """read_sched_tsv's DataFrame piece by piece, each about piece_bytes of the file's text (a
    reader whose memory must not grow with the trace); a file that is not whole raises InputError
    once the reading reaches the damage. progress: as for hostwire.read.tsv.iter_records."""
    tsv, types, wanted = _open_sched(path, columns)
    usecols = wanted if wanted is not None else tsv.columns
    dtype = {name: _DTYPES[types.get(name, "str")] for name in usecols}
    records = 0
    for df in iter_records(tsv, piece_bytes, progress, usecols=usecols, dtype=dtype, keep_default_na=False,
                           na_values={n: [""] for n in usecols if dtype[n] is not str}, encoding="ascii"):
        out = _base_types(tsv, df[usecols], records)
        records += len(df)
        yield out


def _open_sched(path: str | Path, columns: list[str] | None) -> tuple[TsvFile, dict[str, str], list[str] | None]:
    tsv = open_tsv(path)
    path, names = tsv.path, tsv.columns
    kinds = tsv.meta.get("column_types", "").split()
    if len(kinds) != len(names):
        line = tsv.meta_lines.get("column_types", tsv.header_lines)
        raise InputError(f"{path}:{line}: '# column_types' names {len(kinds)} kinds for {len(names)} columns")
    missing = [c for c in BASE_COLUMNS if c not in names]
    if missing:
        raise InputError(f"{path}:{tsv.header_lines}: column header lacks {', '.join(missing)}")
    wanted = None if columns is None else list(dict.fromkeys([*BASE_COLUMNS, *columns]))
    if wanted is not None:
        unknown = [c for c in wanted if c not in names]
        if unknown:
            raise InputError(f"{path}: no column {', '.join(unknown)}; it has {', '.join(names)}")
    return tsv, dict(zip(names, kinds)), wanted


def _base_types(tsv: TsvFile, df: pd.DataFrame, records_before: int) -> pd.DataFrame:
    """t_ns, cpu and pid as int64; an empty one is named by its line."""
    for name in ("t_ns", "cpu", "pid"):
        if df[name].isna().any():
            row = int(df[name].isna().to_numpy().nonzero()[0][0])
            raise InputError(f"{tsv.path}:{tsv.line_after(records_before + row)}: column {name} is empty "
                             f"(record {records_before + row + 1})")
        df[name] = df[name].astype("int64")
    return df


def read_sched_json(path: str | Path) -> dict[str, Any]:
    """sched.json as a dict; rejects other formats and newer versions, and a field that is not
    what hw-schedtrace writes (a counter that is not a whole number >= 0, a CPU out of range, a
    stop before the start): one line naming the file and the field."""
    path = Path(path)
    data = read_json(path, SCHED_JSON_FORMAT, SCHED_JSON_VERSION)
    _check_sched_json(path, data)
    return data


_COUNTERS = ("entries", "overrun", "commit_overrun", "bytes", "dropped_events", "read_events")
MAX_CPUS = 8192


def _check_sched_json(path: Path, data: dict[str, Any]) -> None:
    def bad(field: str, expected: str) -> InputError:
        return InputError(f"{path}: {field}: expected {expected}")

    def count(value: Any, field: str, none_ok: bool = False) -> None:
        if value is None and none_ok:
            return
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise bad(field, "a whole number >= 0" + (" or null" if none_ok else "") + f", got {value!r}")

    for key in ("start_mono_ns", "stop_mono_ns"):
        count(data.get(key), key, none_ok=True)  # null: not known (a recording that never started)
    if None not in (data.get("start_mono_ns"), data.get("stop_mono_ns")) and \
            data["stop_mono_ns"] < data["start_mono_ns"]:
        raise bad("stop_mono_ns", f"a stop after the start ({data['start_mono_ns']}), got {data['stop_mono_ns']}")
    buffers = data.get("buffers", [])
    if not isinstance(buffers, list):
        raise bad("buffers", "a list")
    for b, buf in enumerate(buffers):
        where = f"buffers[{b}]"
        if not isinstance(buf, dict) or not isinstance(buf.get("name"), str):
            raise bad(where, "an object with a name")
        count(buf.get("records", 0), f"{where}.records")
        count(buf.get("lost_events"), f"{where}.lost_events", none_ok=True)
        cpus = buf.get("cpus", [])
        if not isinstance(cpus, list):
            raise bad(f"{where}.cpus", "a list")
        for c, cpu in enumerate(cpus):
            at = f"{where}.cpus[{c}]"
            if not isinstance(cpu, dict):
                raise bad(at, "an object")
            number = cpu.get("cpu")
            if isinstance(number, bool) or not isinstance(number, int) or not 0 <= number < MAX_CPUS:
                raise bad(f"{at}.cpu", f"a CPU number from 0 to {MAX_CPUS - 1}, got {number!r}")
            for key in ("records", "missed_in_stream"):
                count(cpu.get(key), f"{at}.{key}")
            for phase in ("start", "end"):
                counters = cpu.get(phase)
                if not isinstance(counters, dict):
                    raise bad(f"{at}.{phase}", "an object of counters")
                for key in _COUNTERS:
                    count(counters.get(key), f"{at}.{phase}.{key}", none_ok=True)


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

