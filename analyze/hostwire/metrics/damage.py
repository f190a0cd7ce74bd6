"""Damaged sources: a capture or a log cut short or corrupted. A damaged source never vanishes from
a metric: by default the metric stops with an error naming the file and where it is damaged; where
the user asks for what can be read (`hostwire metrics --partial`), the metric is computed on the
intact part and the result carries the damage (DataFrame.attrs and one warning line per source);
`metrics sanity` always counts the damaged sources and marks the run.

A reader reports damage in its DataFrame's attrs["damage"]: a dict with `message` and where the
intact part ends, `byte_offset` (hostwire.read.pcap.read_pcap: also `frame`) or `line` (the TSV
readers), and `file` when the DataFrame holds one file; or a list of such dicts when a DataFrame
merges several files (the logs of all senders)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import pandas as pd


@dataclass(frozen=True)
class DamagedSource:
    """One damaged file: where its intact part ends (byte offset or line) and the reader's message."""

    file: str
    message: str
    byte_offset: int | None = None
    line: int | None = None
    frame: int | None = None

    def where(self) -> str:
        """"line 12 (byte offset 300)" for a log, "byte offset 400 (frame 7)" for a capture."""
        offset = f"byte offset {self.byte_offset}" if self.byte_offset is not None else ""
        if self.line is not None:
            return f"line {self.line}" + (f" ({offset})" if offset else "")
        if offset:
            return offset + (f" (frame {self.frame})" if self.frame is not None else "")
        return "an unknown place"

    def describe(self) -> str:
        """One line: the file, where it is damaged, and the reader's message."""
        if self.file in self.message:  # the reader's message names the file and the place
            return self.message
        return f"{self.file}: damaged at {self.where()}: {self.message}"

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


def damage_entries(df: pd.DataFrame | None, file: str) -> list[DamagedSource]:
    """The damage a reader left in df.attrs["damage"] (a dict, a list of dicts, or nothing);
    `file` names the source when an entry does not."""
    if df is None:
        return []
    return from_attrs(df.attrs.get("damage"), file)


def from_attrs(value: Any, file: str) -> list[DamagedSource]:
    if not value:
        return []
    items: Iterable[Any] = value if isinstance(value, (list, tuple)) else [value]
    out = []
    for item in items:
        if not isinstance(item, Mapping):
            out.append(DamagedSource(file=file, message=str(item)))
            continue
        out.append(DamagedSource(
            file=str(item.get("file") or item.get("path") or file),
            message=str(item.get("message", "damaged")),
            byte_offset=_int_or_none(item.get("byte_offset")),
            line=_int_or_none(item.get("line")),
            frame=_int_or_none(item.get("frame")),
        ))
    return out


def _int_or_none(value: Any) -> int | None:
    try:
        return None if value is None else int(value)
    except (TypeError, ValueError):
        return None


def partial_hint(sources: list[DamagedSource]) -> str:
    """The error of a metric that met damaged sources without --partial."""
    first = sources[0].describe()
    more = f" (and {len(sources) - 1} more damaged source(s))" if len(sources) > 1 else ""
    return f"{first}{more}; --partial computes on the intact part and marks the result"
