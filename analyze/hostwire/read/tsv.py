"""Reader of hostwire's raw text logs (docs/formats.md): `#` header lines `# key: value` carrying
metadata, the first of which is `# format: hostwire-tsv N`, then one column-header line, then one
tab-separated record per line and, from version 2 on, a closing trailer `# end: records=N ...`
that the writer adds only once the file is complete.

Every reader of a raw log goes through `open_tsv` + `read_records` (or `read_tsv`), which check
that the file is whole: it ends with a newline, every record has every field, no line is blank,
and the trailer's counts agree with the records (version 2 requires the trailer; version 1 files,
written before it existed, get the other checks). A file that fails raises InputError naming the
file and line, unless `keep_damaged=True`, which returns the complete records before the damage
with df.attrs["damage"] = {"file", "line", "byte_offset", "message"} (None for a whole file), as
hostwire.read.pcap.read_pcap does for a cut capture."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import dataclasses
import io
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import pandas as pd

from hostwire import versioned
from hostwire.errors import InputError
from hostwire.read.tsv_arrow import parse_arrow

FORMAT_NAME = "hostwire-tsv"
FORMAT_VERSION = 2
TRAILER_VERSION = 2      # the first version whose writers close every file with a trailer
TRAILER = b"# end:"      # a complete file's last line: "# end: records=N[ key=N ...]"
DAMAGED = b"# damaged:"  # the last line of a file whose writer failed: "# damaged: <reason>"
_TAIL_BLOCK = 1 << 16
_MIN_PIECE_BYTES = 4 << 20  # a big file is parsed in pieces of at least this, one thread each
_MAX_WORKERS = 4

_PARSE_ERRORS = (ValueError, TypeError, OverflowError, UnicodeDecodeError, pd.errors.ParserError)


class MalformedRecordError(InputError):
    """A record whose values the parser cannot convert to the column's type (the file is whole
    as far as its lines go)."""


@dataclass
class TsvLog:
    path: Path
    meta: dict[str, str] = field(default_factory=dict)
    df: pd.DataFrame = field(default_factory=pd.DataFrame)
    damage: dict[str, Any] | None = None


@dataclass
class TsvFile:
    """What the header and the end of a log say, before its records are read."""

    path: Path
    meta: dict[str, str]
    meta_lines: dict[str, int]  # header key -> its line number
    columns: list[str]
    header_lines: int           # lines before the first record (the column line included)
    version: int
    data_start: int             # byte offset of the first record
    data_end: int               # byte offset just past the last line that can hold a record
    size: int
    trailer: dict[str, int] | None = None
    tail: str = ""              # "" whole | "cut" | "damaged" | "no-trailer" | "bad-trailer"
    tail_text: str = ""         # the writer's reason (damaged) or the trailer as found (bad-trailer)

    def line_after(self, records: int) -> int:
        """The line number that follows `records` records."""
        return self.header_lines + records + 1


def damage_entry(tsv: TsvFile, line: int, byte_offset: int | None, what: str) -> dict[str, Any]:
    """The df.attrs["damage"] entry of a damaged file; its message names file and line.
    byte_offset: where the intact records end (None when the damage has no one place, as when
    the records disagree with a count kept elsewhere)."""
    return {"file": str(tsv.path), "line": line, "byte_offset": byte_offset,
            "message": f"{tsv.path}:{line}: {what}"}


def settle(df: pd.DataFrame, damage: dict[str, Any] | None, keep_damaged: bool) -> pd.DataFrame:
    """Raises InputError for a damaged file unless keep_damaged; marks df.attrs["damage"]."""
    if damage is not None and not keep_damaged:
        raise InputError(damage["message"])
    df.attrs["damage"] = damage
    return df


def read_header(path: Path) -> tuple[dict[str, str], list[str], int]:
    """Metadata, column names and the number of lines before the first record."""
    tsv = open_tsv(path, tail=False)
    return tsv.meta, tsv.columns, tsv.header_lines


def check_format(path: Path, meta: dict[str, str]) -> None:
    versioned.check_format(path, meta.get("format", ""), FORMAT_NAME, FORMAT_VERSION, where=":1",
                           shown=f"'# format: {FORMAT_NAME} N'")


def open_tsv(path: str | os.PathLike[str], *, tail: bool = True) -> TsvFile:
    """Reads the header of a log and (tail=True) inspects its last bytes: the final newline and
    the trailer. Raises InputError for a file whose header cannot be read."""
    path = Path(path)
    try:
        handle = open(path, "rb")
    except OSError as err:
        raise InputError(f"{path}: cannot open: {err.strerror}") from None
    with handle:
        meta, meta_lines, columns, header_lines, data_start = _header(path, handle)
        version = int(meta["format"].partition(" ")[2])
        size = os.fstat(handle.fileno()).st_size
        tsv = TsvFile(path=path, meta=meta, meta_lines=meta_lines, columns=columns, header_lines=header_lines,
                      version=version, data_start=data_start, data_end=size, size=size)
        if tail:
            _inspect_tail(tsv, handle)
    return tsv


def open_tsv_of_kind(path: str | os.PathLike[str], kind: str, columns: Sequence[str]) -> TsvFile:
    """open_tsv for a log of one `# kind:` with the columns it must have (InputError naming the
    file and what was expected otherwise)."""
    tsv = open_tsv(path)
    if tsv.meta.get("kind") != kind:
        raise InputError(f"{path}: '# kind: {tsv.meta.get('kind', '')}', expected '{kind}'")
    missing = [c for c in columns if c not in tsv.columns]
    if missing:
        raise InputError(f"{path}: missing column(s) {', '.join(missing)}")
    return tsv


def _header(path: Path, handle: BinaryIO) -> tuple[dict[str, str], dict[str, int], list[str], int, int]:
    meta: dict[str, str] = {}
    meta_lines: dict[str, int] = {}
    offset = 0
    lineno = 0
    for raw in handle:
        lineno += 1
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise InputError(f"{path}:{lineno}: expected UTF-8 text in the header") from None
        complete = line.endswith("\n")
        line = line.rstrip("\n")
        if line.startswith("#"):
            key, sep, value = line[1:].strip().partition(":")
            if not sep:
                raise InputError(f"{path}:{lineno}: expected '# key: value', got {line[:60]!r}")
            if not complete:
                raise InputError(f"{path}:{lineno}: header cut (no final newline)")
            meta[key.strip()] = value.strip()
            meta_lines[key.strip()] = lineno
            offset += len(raw)
            continue
        check_format(path, meta)
        columns = line.split("\t")
        if not line or any(not c for c in columns):
            raise InputError(f"{path}:{lineno}: expected the column header line")
        if not complete:
            raise InputError(f"{path}:{lineno}: column header line cut (no final newline)")
        return meta, meta_lines, columns, lineno, offset + len(raw)
    if not meta:
        raise InputError(f"{path}:1: empty file, expected a '# format: {FORMAT_NAME} N' header")
    check_format(path, meta)
    raise InputError(f"{path}: no column header line after the metadata")


def _last_newline(handle: BinaryIO, end: int, floor: int) -> int:
    """Offset of the last b"\\n" before `end` at or after `floor`; floor - 1 when there is none."""
    pos = end
    while pos > floor:
        start = max(floor, pos - _TAIL_BLOCK)
        handle.seek(start)
        block = handle.read(pos - start)
        found = block.rfind(b"\n")
        if found >= 0:
            return start + found
        pos = start
    return floor - 1


def _inspect_tail(tsv: TsvFile, handle: BinaryIO) -> None:
    """Sets data_end, trailer and tail from the file's last line."""
    if tsv.size == tsv.data_start:
        tsv.tail = "no-trailer" if tsv.version >= TRAILER_VERSION else ""
        return
    handle.seek(tsv.size - 1)
    if handle.read(1) != b"\n":
        cut_at = _last_newline(handle, tsv.size, tsv.data_start) + 1
        handle.seek(cut_at)
        tsv.tail_text = handle.read(min(80, tsv.size - cut_at)).decode("utf-8", "replace")
        tsv.data_end, tsv.tail = cut_at, "cut"
        return
    start = _last_newline(handle, tsv.size - 1, tsv.data_start) + 1
    handle.seek(start)
    last = handle.read(min(tsv.size - start, 4096))
    if last.startswith(DAMAGED):
        tsv.data_end, tsv.tail = start, "damaged"
        tsv.tail_text = last[len(DAMAGED):].decode("utf-8", "replace").strip()
    elif last.startswith(TRAILER):
        tsv.data_end = start
        text = last[len(TRAILER):].decode("utf-8", "replace").strip()
        trailer = _parse_trailer(text)
        if trailer is None:
            tsv.tail, tsv.tail_text = "bad-trailer", text
        else:
            tsv.trailer = trailer
    elif tsv.version >= TRAILER_VERSION:
        tsv.tail = "no-trailer"


def _parse_trailer(text: str) -> dict[str, int] | None:
    values: dict[str, int] = {}
    for token in text.split():
        key, sep, value = token.partition("=")
        if not sep or not key or not value.lstrip("-").isdigit():
            return None
        values[key] = int(value)
    return values if "records" in values else None


class _Region(io.RawIOBase):
    """The bytes [start, end) of an open file, counting newlines and tabs as the parser reads them
    (so checking every record's field count costs no second pass over the file)."""

    def __init__(self, handle: BinaryIO, start: int, end: int) -> None:
        super().__init__()
        handle.seek(start)
        self._handle = handle
        self._left = end - start
        self.newlines = 0
        self.tabs = 0

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0 or size > self._left:
            size = self._left
        data = self._handle.read(size)
        self._left -= len(data)
        self.newlines += data.count(b"\n")
        self.tabs += data.count(b"\t")
        return data

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        memoryview(buffer)[:len(data)] = data
        return len(data)


def _parse_range(tsv: TsvFile, start: int, end: int, kwargs: dict[str, Any]) -> tuple[pd.DataFrame, int, int]:
    with open(tsv.path, "rb") as handle:
        region = _Region(handle, start, end)
        df = pd.read_csv(region, sep="\t", names=tsv.columns, header=None, engine="c", quoting=3,
                         index_col=False, **kwargs)
        return df, region.newlines, region.tabs


def _split(tsv: TsvFile, end: int) -> list[int]:
    """Offsets of line starts that cut [data_start, end) into about equal pieces, one per CPU
    this process may use, for a big file (pandas parses a file object on one thread)."""
    size = end - tsv.data_start
    workers = min(len(os.sched_getaffinity(0)), _MAX_WORKERS, size // _MIN_PIECE_BYTES)
    bounds = [tsv.data_start]
    if workers > 1:
        with open(tsv.path, "rb") as handle:
            for k in range(1, workers):
                handle.seek(tsv.data_start + size * k // workers)
                handle.readline()
                if bounds[-1] < handle.tell() < end:
                    bounds.append(handle.tell())
    bounds.append(end)
    return bounds


def _parse_arrow(tsv: TsvFile, start: int, end: int, kwargs: dict[str, Any]) -> tuple[pd.DataFrame, int, int] | None:
    return parse_arrow(tsv.path, list(tsv.columns), start, end, kwargs)


def _parse(tsv: TsvFile, bounds: list[int], kwargs: dict[str, Any]) -> tuple[pd.DataFrame, int, int]:
    """The records of the pieces between bounds, and the newlines and tabs they hold."""
    if bounds[-1] - bounds[0] >= _MIN_PIECE_BYTES:
        fast = _parse_arrow(tsv, bounds[0], bounds[-1], kwargs)
        if fast is not None:
            return fast
    if len(bounds) == 2:
        return _parse_range(tsv, bounds[0], bounds[1], kwargs)
    with ThreadPoolExecutor(len(bounds) - 1, thread_name_prefix="hostwire-tsv") as pool:
        parts = list(pool.map(lambda i: _parse_range(tsv, bounds[i], bounds[i + 1], kwargs), range(len(bounds) - 1)))
    df = pd.concat([part[0] for part in parts], ignore_index=True)
    return df, sum(part[1] for part in parts), sum(part[2] for part in parts)


def _pieces_start_whole(tsv: TsvFile, bounds: list[int]) -> bool:
    """Whether the first line of every piece has exactly the file's fields: pandas takes extra
    fields of a first line for an index (or drops them) rather than failing, while a later line
    with more fields than the first fails and one with fewer shows in the tab count."""
    want = len(tsv.columns) - 1
    with open(tsv.path, "rb") as handle:
        for start, end in zip(bounds, bounds[1:]):
            if start >= end:
                continue
            handle.seek(start)
            line = handle.readline(end - start)
            if line.count(b"\t") != want or not line.rstrip(b"\n") or b"\r" in line:
                return False
    return True


def _first_bad_line(tsv: TsvFile, end: int) -> tuple[int, int, str] | None:
    """The first line in [data_start, end) that is blank or lacks or exceeds the column count:
    (line number, byte offset, what is wrong). Only on the error path: a Python loop."""
    want = len(tsv.columns) - 1
    offset = tsv.data_start
    lineno = tsv.header_lines
    with open(tsv.path, "rb") as handle:
        handle.seek(offset)
        while offset < end:
            line = handle.readline(end - offset)
            if not line:
                break
            lineno += 1
            tabs = line.count(b"\t")
            if line.rstrip(b"\n") == b"":
                return lineno, offset, "blank line, expected a record"
            if b"\r" in line:
                return lineno, offset, "carriage return in a record (text fields escape it as \\r)"
            if tabs != want:
                return lineno, offset, (f"record has {tabs + 1} fields, expected {want + 1} "
                                        f"({' '.join(tsv.columns)})")
            offset += len(line)
    return None


_INTEGER = r"-?[0-9]+"


def _malformed(tsv: TsvFile, bounds: list[int], kwargs: dict[str, Any], err: Exception) -> str:
    """The message for a value the parser could not convert, naming its line and column when it
    is an integer column's (error path only: the records are read again as text)."""
    dtype = kwargs.get("dtype")
    kinds = dtype if isinstance(dtype, dict) else {}
    wanted = {name: str(kind) for name, kind in kinds.items() if str(kind).lower() in ("int64", "uint64")}
    usecols = kwargs.get("usecols")
    columns = [c for c in (usecols or tsv.columns) if c in wanted]
    if columns:
        text_kwargs = {**kwargs, "dtype": str, "na_filter": False}
        text_kwargs.pop("na_values", None)
        text_kwargs.pop("keep_default_na", None)
        try:
            raw = _parse(tsv, bounds, text_kwargs)[0]
        except _PARSE_ERRORS:
            raw = None
        if raw is not None:
            first: tuple[int, str, str] | None = None
            for name in columns:
                values = raw[name]
                ok = values.str.fullmatch(_INTEGER)
                if wanted[name][0] in "IU":  # nullable: an empty cell is <NA>
                    ok |= values == ""
                bad_rows = (~ok.fillna(False)).to_numpy().nonzero()[0]
                if len(bad_rows) and (first is None or bad_rows[0] < first[0]):
                    first = (int(bad_rows[0]), name, str(values.iloc[bad_rows[0]]))
            if first is not None:
                row, name, value = first
                return (f"{tsv.path}:{tsv.line_after(row)}: malformed record: column {name}: expected an "
                        f"integer, got {value[:40]!r}")
    return f"{tsv.path}: malformed record: {err}"


def read_records(tsv: TsvFile, *, keep_damaged: bool = False, **kwargs: Any) -> pd.DataFrame:
    """The records of an opened log as a DataFrame (pandas' C parser; kwargs go to read_csv:
    dtype, usecols, na_filter, ...). Checks completeness as the module doc says: a damaged file
    raises InputError naming file and line, or with keep_damaged gives the records before the
    damage. df.attrs gets "meta", "path" and "damage" (None for a whole file)."""
    end = tsv.data_end
    bounds = _split(tsv, end)
    bad = None
    if not _pieces_start_whole(tsv, bounds):
        bad = _first_bad_line(tsv, end)
        assert bad is not None
        if not keep_damaged:
            raise InputError(f"{tsv.path}:{bad[0]}: {bad[2]}")
        end = bad[1]
        bounds = _split(tsv, end)
    try:
        df, newlines, tabs = _parse(tsv, bounds, kwargs)
    except _PARSE_ERRORS as err:
        found = None if bad is not None else _first_bad_line(tsv, end)
        if found is None:  # every line has its fields: a value is wrong
            raise MalformedRecordError(_malformed(tsv, bounds, kwargs, err)) from None
        if not keep_damaged:
            raise InputError(f"{tsv.path}:{found[0]}: {found[2]}") from None
        bad, end = found, found[1]
        try:
            df, newlines, tabs = _parse(tsv, _split(tsv, end), kwargs)
        except _PARSE_ERRORS as err2:
            raise MalformedRecordError(f"{tsv.path}: malformed record: {err2}") from None
    if bad is None and (newlines != len(df) or tabs != len(df) * (len(tsv.columns) - 1)):
        bad = _first_bad_line(tsv, end)
        if bad is None:  # cannot happen: every way lines and records differ is a bad line
            raise InputError(f"{tsv.path}: {newlines} lines of records, but {len(df)} records parsed")
        df = df.iloc[:bad[0] - tsv.header_lines - 1]
    damage = damage_entry(tsv, *bad) if bad is not None else _tail_damage(tsv, df)
    df.attrs["meta"] = tsv.meta
    df.attrs["path"] = str(tsv.path)
    return settle(df, damage, keep_damaged)


def _tail_damage(tsv: TsvFile, df: pd.DataFrame) -> dict[str, Any] | None:
    """Damage seen at the end of the file: a cut last line, the writer's damage mark, a missing
    trailer, or a trailer whose counts disagree with the records."""
    total = int(pd.to_numeric(df["bytes"], errors="coerce").fillna(0).sum()) if "bytes" in df.columns else None
    return _tail_damage_of(tsv, len(df), total)


def _tail_damage_of(tsv: TsvFile, records: int, total_bytes: int | None) -> dict[str, Any] | None:
    """_tail_damage from the count of records and the sum of their bytes column (None: not read)."""
    line = tsv.line_after(records)
    if tsv.tail == "cut":
        what = "trailer" if tsv.tail_text.startswith("#") else "last record"
        return damage_entry(tsv, line, tsv.data_end, f"{what} cut (no final newline)")
    if tsv.tail == "damaged":
        return damage_entry(tsv, line, tsv.data_end, f"the writer marked the file damaged: {tsv.tail_text}")
    if tsv.tail == "no-trailer":
        return damage_entry(tsv, line, tsv.data_end,
                            "no '# end: records=N' trailer: the file is incomplete (its writer did not finish)")
    if tsv.tail == "bad-trailer":
        return damage_entry(tsv, line, tsv.data_end,
                            f"expected '# end: records=N ...' (key=integer pairs), got {tsv.tail_text[:60]!r}")
    if tsv.trailer is None:
        return None
    if tsv.trailer["records"] != records:
        return damage_entry(tsv, line, tsv.data_end,
                            f"the trailer counts {tsv.trailer['records']} records, the file holds {records}")
    if "bytes" in tsv.trailer and total_bytes is not None and total_bytes != tsv.trailer["bytes"]:
        return damage_entry(tsv, line, tsv.data_end,
                            f"the trailer counts {tsv.trailer['bytes']} bytes, the records sum to {total_bytes}")
    return None


def iter_records(tsv: TsvFile, piece_bytes: int, progress: Callable[[int, int], None] | None = None,
                 **kwargs: Any) -> Iterator[pd.DataFrame]:
    """The records of an opened log piece by piece, each about piece_bytes of text cut at a line
    start, for a reader whose memory must not grow with the file (kwargs as for read_records). The
    checks are read_records': a damaged file raises InputError naming file and line once the
    reading reaches the damage (the pieces before it have been given by then). progress(done,
    total): the bytes of records read, after each piece."""
    start, records, total_bytes = tsv.data_start, 0, 0
    with open(tsv.path, "rb") as handle:
        while start < tsv.data_end:
            handle.seek(min(start + max(1, piece_bytes), tsv.data_end))
            if handle.tell() < tsv.data_end:
                handle.readline()
            end = min(max(handle.tell(), start + 1), tsv.data_end)
            piece = dataclasses.replace(tsv, data_start=start, data_end=end, header_lines=tsv.header_lines + records,
                                        tail="", trailer=None)
            df = read_records(piece, **kwargs)
            records += len(df)
            if "bytes" in df.columns:
                total_bytes += int(pd.to_numeric(df["bytes"], errors="coerce").fillna(0).sum())
            df.attrs["path"] = str(tsv.path)
            if progress is not None:
                progress(end - tsv.data_start, tsv.data_end - tsv.data_start)
            yield df
            start = end
    damage = _tail_damage_of(tsv, records, total_bytes if "bytes" in (kwargs.get("usecols") or tsv.columns) else None)
    if damage is not None:
        raise InputError(damage["message"])


def read_tsv(path: str | Path, dtypes: dict[str, str] | None = None, *, keep_damaged: bool = False) -> TsvLog:
    """Read one hostwire TSV log; integer columns named *_ns or bytes stay int64. A file that is
    not whole raises InputError (file and line), or with keep_damaged=True gives its complete
    records and the damage (TsvLog.damage, df.attrs["damage"])."""
    tsv = open_tsv(path)
    df = read_records(tsv, keep_damaged=keep_damaged, dtype=dtypes, na_filter=False)
    return TsvLog(path=tsv.path, meta=tsv.meta, df=df, damage=df.attrs["damage"])
