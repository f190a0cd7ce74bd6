"""Tables a long analysis holds on disk instead of in memory: columns written to scratch files and
mapped read-only, so that their pages are the page cache's (read on demand, dropped by the kernel
when memory is short), not the process's anonymous memory, and the memory of the analysis does
not follow the length of the run.

Each file is unlinked as soon as it is open: what a mapping or an open file holds stays readable,
and nothing is left on disk however the process ends. The scratch directory is HOSTWIRE_SCRATCH's,
else TMPDIR's (tempfile.gettempdir()), as for hostwire.read.pcapchunks: it must be on a disk, not a
tmpfs, whose files are memory."""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import IO

import numpy as np
import pandas as pd

_BLOCK = 16 << 20  # bytes copied at a time when columns are joined


def scratch_file() -> IO[bytes]:
    handle = tempfile.TemporaryFile(prefix="hw-spill-", dir=os.environ.get("HOSTWIRE_SCRATCH") or None)
    return handle  # TemporaryFile is unlinked at once on Linux


def _mapped(handle: IO[bytes], dtype: np.dtype, count: int) -> np.ndarray:
    if count == 0:
        return np.zeros(0, dtype)
    handle.flush()
    return np.asarray(np.memmap(handle, dtype=dtype, mode="r", shape=(count,)))  # a plain array over the mapping


def code_dtype(categories: int) -> np.dtype:
    """The integer type of a categorical's codes for this many categories (as pandas chooses it)."""
    return np.dtype(np.int8 if categories < 2**7 else np.int16 if categories < 2**15 else np.int32)


def spilled_array(values: np.ndarray) -> np.ndarray:
    """values in a scratch file, mapped read-only."""
    values = np.ascontiguousarray(values)
    with scratch_file() as handle:
        handle.write(memoryview(values).cast("B"))
        return _mapped(handle, values.dtype, len(values))


class Columns:
    """Columns appended piece by piece under integer keys (a stream's code) to scratch files, then
    joined in key order into one mapped column each: a table made in time order and read by key,
    without its pieces ever being held in memory."""

    def __init__(self, dtypes: dict[str, np.dtype | type]) -> None:
        self.dtypes = {name: np.dtype(d) for name, d in dtypes.items()}
        self.files: dict[tuple[int, str], IO[bytes]] = {}
        self.rows: dict[int, int] = {}

    def append(self, key: int, **arrays: np.ndarray) -> None:
        count = {len(a) for a in arrays.values()}
        assert len(count) == 1 and set(arrays) == set(self.dtypes), "every column, the same length"
        if not count.pop():
            return
        for name, values in arrays.items():
            handle = self.files.get((key, name))
            if handle is None:
                handle = self.files[key, name] = scratch_file()
            handle.write(memoryview(np.ascontiguousarray(values, dtype=self.dtypes[name])).cast("B"))
        self.rows[key] = self.rows.get(key, 0) + len(next(iter(arrays.values())))

    def keys(self) -> list[int]:
        return sorted(self.rows)

    def joined(self, order: list[int] | None = None) -> dict[str, np.ndarray]:
        """Each column, the keys' pieces one after the other in key order (or in `order`, every
        key), mapped; the pieces' files are closed (their disk space goes)."""
        out = {}
        total = sum(self.rows.values())
        for name, dtype in self.dtypes.items():
            with scratch_file() as joined:
                for key in order if order is not None else self.keys():
                    piece = self.files.pop((key, name), None)
                    if piece is None:  # a key without rows
                        continue
                    piece.seek(0)
                    shutil.copyfileobj(piece, joined, _BLOCK)
                    piece.close()
                out[name] = _mapped(joined, dtype, total)
        return out

    def table(self, names: pd.Index, order: list[int] | None = None) -> pd.DataFrame:
        """The joined columns after a "stream" column: a categorical of names, one a key (in
        `order`, else in key order), its codes mapped too."""
        return pd.DataFrame({"stream": pd.Categorical.from_codes(self.key_codes(order), categories=names),
                             **self.joined(order)}, copy=False)

    def key_codes(self, order: list[int] | None = None) -> np.ndarray:
        """Each row's key as its place among keys() (or in `order`), in joined()'s order, mapped (in
        the smallest integer type pandas keeps a categorical's codes in, so that no copy is made
        of them)."""
        keys = order if order is not None else self.keys()
        dtype = code_dtype(len(keys))
        with scratch_file() as handle:
            for place, key in enumerate(keys):
                left = self.rows.get(key, 0)
                while left:
                    n = min(left, _BLOCK // dtype.itemsize)
                    handle.write(memoryview(np.full(n, place, dtype)).cast("B"))
                    left -= n
            return _mapped(handle, dtype, sum(self.rows.values()))
