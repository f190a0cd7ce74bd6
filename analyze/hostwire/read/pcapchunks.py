"""A capture read in chunks of rows, in bounded memory, for the out-of-core metrics
(hostwire.metrics.chunked).

hw-pcapcols writes its column files into a scratch directory on disk (not tmpfs: a capture of an
hour holds gigabytes of columns, which in tmpfs would be memory), a pcap file converted by every
CPU at once, a segment at a time each (capture/pcapcols_segments.c: bounded memory); each chunk is read from them with
a positioned read, so the process holds one chunk of each column it asked for, whatever the
capture's size. Stamps are mapped onto CLOCK_MONOTONIC chunk by chunk with the same element-wise
formula as hostwire.read.pcap.map_clock, so both readers give the same stamps.

Order: the metrics want the frames in time order (stable: equal stamps keep file order), as
hostwire.metrics.streams.label_streams sorts them. A capture is almost always in time order
already; when it is not, `time_ordered` merges with a carry: a first pass finds each chunk's
smallest stamp, and a row leaves the carry once no later chunk can hold an earlier stamp. The carry
holds only the rows whose stamps are out of order, so its size follows the disorder, not the
capture's length.

The scratch directory is TMPDIR's (tempfile.gettempdir()) or HOSTWIRE_SCRATCH's; HOSTWIRE_CHUNK_ROWS
sets the rows per chunk (tests make chunks small so that streams and gaps cross their bounds)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Callable

import numpy as np

from hostwire.errors import InputError
from hostwire.lifeline import die_with_parent_env
from hostwire.paths import tool
from hostwire.read.pcap import COLUMNS_FORMAT, COLUMNS_VERSION
from hostwire.versioned import read_json

CHUNK_ROWS = 1 << 20  # 1 M rows: ~30 MB for the columns one metric reads, few Python calls per capture

Chunk = dict[str, np.ndarray]


class CaptureChunks:
    """The columns of one capture (all, or only `columns` and t_ns: fewer bytes written), read
    chunk by chunk. Use as a context manager: the scratch directory goes on close. attrs: as
    hostwire.read.pcap.read_pcap's DataFrame.attrs."""

    def __init__(self, path: str | os.PathLike[str], clock_pairs: Sequence[Mapping[str, int]] | None = None, *,
                 keep_damaged: bool = False, chunk_rows: int | None = None, columns: Sequence[str] | None = None,
                 progress: Callable[[int, int], None] | None = None) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise InputError(f"{self.path}: no such capture file")
        self.chunk_rows = max(1, int(chunk_rows or os.environ.get("HOSTWIRE_CHUNK_ROWS") or CHUNK_ROWS))
        self.progress = progress
        base = os.environ.get("HOSTWIRE_SCRATCH") or tempfile.gettempdir()
        self.outdir = Path(tempfile.mkdtemp(prefix="hw-pcapcols-", dir=base))
        try:
            self._convert(keep_damaged, columns)
            self._clock = _clock_map(clock_pairs) if clock_pairs else None
            self.attrs["clock_map"] = None if self._clock is None else dict(zip(
                ("realtime_ns", "monotonic_ns", "slope"), self._clock))
            self._suffix_min: np.ndarray | None = None
            self._span: tuple[int, int] | None = None
        except BaseException:
            self.close()
            raise

    def _convert(self, keep_damaged: bool, columns: Sequence[str] | None) -> None:
        only = ["--columns", ",".join(dict.fromkeys(("t_ns", *columns)))] if columns else []
        threads = ["--threads", str(len(os.sched_getaffinity(0)))]
        proc = subprocess.run([str(tool("hw-pcapcols")), *only, *threads, str(self.path), "-o", str(self.outdir)],
                              capture_output=True, text=True, env=die_with_parent_env())
        message = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else ""
        message = message.removeprefix("hw-pcapcols: ")
        meta_path = self.outdir / "columns.json"
        if proc.returncode != 0 and not meta_path.exists():
            raise InputError(message or f"{self.path}: hw-pcapcols exited with status {proc.returncode}")
        if proc.returncode == 1 and not keep_damaged:
            raise InputError(message)
        meta = read_json(meta_path, COLUMNS_FORMAT, COLUMNS_VERSION, missing="hw-pcapcols writes it")
        self.rows = int(meta["rows"])
        self.addresses: list[str] = list(meta["dictionaries"]["addresses"])
        self._columns = {c["name"]: (self.outdir / c["file"], np.dtype(c["dtype"])) for c in meta["columns"]}
        for name, (file, dtype) in self._columns.items():
            if file.stat().st_size < self.rows * dtype.itemsize:
                raise InputError(f"{file}: {file.stat().st_size} bytes, expected {self.rows * dtype.itemsize} "
                                 f"for {self.rows} rows of {name}")
        self.attrs: dict[str, Any] = {
            "frames": int(meta["frames"]), "skipped": dict(meta.get("skipped", {})),
            "malformed": list(meta.get("malformed", [])), "link_type": meta.get("link_type"),
            "file_format": meta.get("file_format"), "snaplen": meta.get("snaplen"),
            "tstamp_precision": meta.get("tstamp_precision"), "damage": meta.get("damage"),
        }

    def close(self) -> None:
        shutil.rmtree(self.outdir, ignore_errors=True)

    def __enter__(self) -> CaptureChunks:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def read(self, name: str, start: int, stop: int) -> np.ndarray:
        """Rows [start, stop) of one column (t_ns on the mapped clock when clock pairs were given)."""
        file, dtype = self._columns[name]
        count = max(0, min(stop, self.rows) - start)
        values = np.fromfile(file, dtype=dtype, count=count, offset=start * dtype.itemsize)
        if name == "t_ns" and self._clock is not None:
            r0, m0, slope = self._clock
            values = m0 + np.rint((values - r0).astype(np.float64) * slope).astype(np.int64)
        return values

    def chunks(self, columns: Sequence[str]) -> Iterator[Chunk]:
        """The rows in file order, chunk by chunk: {column: array}."""
        for start in range(0, self.rows, self.chunk_rows):
            stop = min(self.rows, start + self.chunk_rows)
            yield {name: self.read(name, start, stop) for name in columns}
            if self.progress is not None:
                self.progress(stop, self.rows)

    def span(self) -> tuple[int, int]:
        """The first and the last stamp of all rows (the window of a bare capture)."""
        self._scan_stamps()
        assert self._span is not None
        return self._span

    def _scan_stamps(self) -> None:
        if self._suffix_min is not None:
            return
        lows, highs = [], []
        for start in range(0, self.rows, self.chunk_rows):
            t = self.read("t_ns", start, start + self.chunk_rows)
            lows.append(int(t.min()))
            highs.append(int(t.max()))
        if not lows:
            raise InputError(f"{self.path}: the capture has no frames, so it has no window")
        later = np.full(len(lows), np.iinfo(np.int64).max, dtype=np.int64)
        # later[i]: the smallest stamp of every chunk after chunk i
        later[:-1] = np.minimum.accumulate(np.asarray(lows[::-1], dtype=np.int64))[::-1][1:]
        self._suffix_min = later
        self._span = (min(lows), max(highs))

    def time_ordered(self, columns: Sequence[str], keep: Callable[[Chunk], np.ndarray] | None = None
                     ) -> Iterator[Chunk]:
        """The rows for which keep(chunk) is true, in stable time order, chunk by chunk (see the
        module doc). `columns` must include t_ns."""
        self._scan_stamps()
        assert self._suffix_min is not None
        carry: Chunk | None = None
        for index, chunk in enumerate(self.chunks(columns)):
            if keep is not None:
                mask = keep(chunk)
                if not mask.all():
                    chunk = {k: v[mask] for k, v in chunk.items()}
            if carry is not None and len(carry["t_ns"]):
                chunk = {k: np.concatenate([carry[k], chunk[k]]) for k in columns}
            t = chunk["t_ns"]
            if len(t) > 1 and np.any(t[1:] < t[:-1]):
                order = np.argsort(t, kind="stable")
                chunk = {k: v[order] for k, v in chunk.items()}
                t = chunk["t_ns"]
            # rows at or before the earliest stamp still to come are final (stable: file order)
            cut = int(np.searchsorted(t, self._suffix_min[index], side="right"))
            if cut == len(t):
                carry = None
                yield chunk
            else:
                carry = {k: v[cut:].copy() for k, v in chunk.items()}
                yield {k: v[:cut] for k, v in chunk.items()}
        if carry is not None and len(carry["t_ns"]):
            yield carry


def _clock_map(clock_pairs: Sequence[Mapping[str, int]]) -> tuple[int, int, float]:
    """(r0, m0, slope) of hostwire.read.pcap.map_clock for these pairs."""
    try:
        pairs = [(int(p["realtime_ns"]), int(p["monotonic_ns"])) for p in clock_pairs]
    except (KeyError, TypeError, ValueError) as err:
        raise InputError(f"clock_pairs: expected a list of {{realtime_ns, monotonic_ns}}: {err}") from None
    r0, m0 = pairs[0]
    r1, m1 = pairs[-1]
    return r0, m0, (m1 - m0) / (r1 - r0) if r1 != r0 else 1.0
