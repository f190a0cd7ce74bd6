"""The fast path of hostwire.read.tsv: Arrow's multi-threaded CSV reader for the one kind of
read it gives the same frame for as pandas' reader (typed columns of nullable integers and text,
ASCII, no carriage return or blank line). Anything else returns None, and pandas' reader then
reads the bytes and names what is wrong."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv

_ARROW_TYPES = {"Int64": pa.int64(), "UInt64": pa.uint64()}
_ARROW_KWARGS = {"usecols", "dtype", "keep_default_na", "na_values", "encoding"}


def parse_arrow(path: str | os.PathLike[str], columns: list[str], start: int, end: int,
                kwargs: dict[str, Any]) -> tuple[pd.DataFrame, int, int] | None:
    """What _parse gives, by Arrow's multi-threaded reader, for the one kind of read it gives
    the same frame for: typed columns of nullable integers (empty cell: <NA>) and text (empty
    cell: ""), ASCII. None for any other read, and for bytes Arrow rejects: pandas then reads
    them and names what is wrong."""
    dtype = kwargs.get("dtype")
    if set(kwargs) - _ARROW_KWARGS or not isinstance(dtype, dict) or kwargs.get("keep_default_na", True):
        return None
    usecols = list(kwargs.get("usecols") or columns)
    kinds = {name: dtype.get(name) for name in usecols}
    if any(kind is not str and str(kind) not in _ARROW_TYPES for kind in kinds.values()):
        return None
    integer = [name for name, kind in kinds.items() if kind is not str]
    if kwargs.get("na_values", {}) != {name: [""] for name in integer}:
        return None
    with open(path, "rb") as handle:
        handle.seek(start)
        data = handle.read(end - start)
    if kwargs.get("encoding") == "ascii" and not data.isascii():
        return None
    # Arrow takes a carriage return for a line end and skips blank lines: such bytes go to pandas,
    # whose counts find them. Without them Arrow's rows are the lines, and it refuses a row that
    # has not exactly the file's fields: the counts hold by construction.
    if b"\r" in data or b"\n\n" in data or data.startswith(b"\n"):
        return None
    try:
        table = pacsv.read_csv(
            pa.py_buffer(data),
            read_options=pacsv.ReadOptions(column_names=columns, block_size=1 << 22),
            parse_options=pacsv.ParseOptions(delimiter="\t", quote_char=False, double_quote=False,
                                             escape_char=False),
            convert_options=pacsv.ConvertOptions(
                include_columns=[c for c in columns if c in kinds],
                # large_string: pandas' text arrays hold it, so no cast copies the text again
                column_types={name: (pa.large_string() if kind is str else _ARROW_TYPES[str(kind)])
                              for name, kind in kinds.items()},
                null_values=[""], strings_can_be_null=False, quoted_strings_can_be_null=False))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    text = pd.Series([""], dtype=str).dtype
    # copy=False: the arrays are this reader's own; pandas' default copy doubled the new memory
    # (0.22 s of a 947,155-row trace, more in a new process, where new memory is slow)
    df = pd.DataFrame({name: (_nullable_integers(table.column(name)) if kinds[name] is not str
                              else pd.array(table.column(name), dtype=text)) for name in table.column_names},
                      copy=False)
    return df, len(df), len(df) * (len(columns) - 1)


def _nullable_integers(column: pa.ChunkedArray) -> pd.api.extensions.ExtensionArray:
    """A nullable integer array (Int64, UInt64) of an Arrow column with one copy of its values:
    pandas' own conversion copies each chunk, then the whole, then builds the mask."""
    dtype = pd.Int64Dtype() if column.type == pa.int64() else pd.UInt64Dtype()
    values = column.fill_null(0).to_numpy() if column.null_count else column.to_numpy()
    mask = column.is_null().to_numpy(zero_copy_only=False) if column.null_count else np.zeros(len(values), bool)
    # a column of one chunk comes as a read-only view of Arrow's buffer: the frame's arrays are
    # written to later, so such a view is copied (once; a column of several chunks is a new array)
    if not values.flags.writeable:
        values = values.copy()
    if not mask.flags.writeable:
        mask = mask.copy()
    return dtype.construct_array_type()(values, mask)
