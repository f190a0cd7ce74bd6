"""Reader of hostwire's raw text logs (docs/formats.md): `#` header lines `# key: value` carrying
metadata, the first of which is `# format: hostwire-tsv N`, then one column-header line, then one
tab-separated record per line."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from hostwire import versioned
from hostwire.errors import InputError

FORMAT_NAME = "hostwire-tsv"
FORMAT_VERSION = 1


@dataclass
class TsvLog:
    path: Path
    meta: dict[str, str] = field(default_factory=dict)
    df: pd.DataFrame = field(default_factory=pd.DataFrame)


def read_header(path: Path) -> tuple[dict[str, str], list[str], int]:
    """Metadata, column names and the number of lines before the first record."""
    meta: dict[str, str] = {}
    try:
        handle = open(path, encoding="utf-8", errors="strict")
    except OSError as err:
        raise InputError(f"{path}: cannot open: {err.strerror}") from None
    with handle:
        for lineno, line in enumerate(handle, start=1):
            line = line.rstrip("\n")
            if line.startswith("#"):
                key, sep, value = line[1:].strip().partition(":")
                if not sep:
                    raise InputError(f"{path}:{lineno}: expected '# key: value', got {line[:60]!r}")
                meta[key.strip()] = value.strip()
                continue
            check_format(path, meta)
            columns = line.split("\t")
            if not line or any(not c for c in columns):
                raise InputError(f"{path}:{lineno}: expected the column header line")
            return meta, columns, lineno
    if not meta:
        raise InputError(f"{path}:1: empty file, expected a '# format: {FORMAT_NAME} N' header")
    check_format(path, meta)
    raise InputError(f"{path}: no column header line after the metadata")


def check_format(path: Path, meta: dict[str, str]) -> None:
    versioned.check_format(path, meta.get("format", ""), FORMAT_NAME, FORMAT_VERSION, where=":1",
                           shown=f"'# format: {FORMAT_NAME} N'")


def read_tsv(path: str | Path, dtypes: dict[str, str] | None = None) -> TsvLog:
    """Read one hostwire TSV log; integer columns named *_ns or bytes stay int64."""
    path = Path(path)
    meta, columns, header_lines = read_header(path)
    try:
        df = pd.read_csv(
            path,
            sep="\t",
            skiprows=header_lines,
            names=columns,
            header=None,
            dtype=dtypes,
            engine="c",
            na_filter=False,
        )
    except (ValueError, pd.errors.ParserError) as err:
        raise InputError(f"{path}: malformed record: {err}") from None
    return TsvLog(path=path, meta=meta, df=df)
