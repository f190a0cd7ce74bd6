"""The capture conversion inside this process: libhwpcapcols.so (capture/pcapcols.c, loaded with
ctypes) converts a pcap/pcapng file into one anonymous mapping per column, on every CPU this
process may run on for a pcap file, and numpy wraps the mappings without a copy; each is unmapped
when the last array viewing it goes. No file is written and no process started.

A sanitizer build of the library (HOSTWIRE_BUILD=build/asan) cannot be loaded into an interpreter
that was not started with the sanitizer's runtime; `available()` says so, and hostwire.read.pcap
then runs hw-pcapcols of the same build, which makes the same conversion in its own process."""

from __future__ import annotations

import ctypes
import json
import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from hostwire.errors import HostwireError, InputError
from hostwire.paths import library
from hostwire.versioned import check_format

LIBRARY = "libhwpcapcols.so"
NCOLS = 16
NKINDS = 9  # enum cap_fp_status
SANITIZER_RUNTIMES = (b"libasan.so", b"libtsan.so")


class _Table(ctypes.Structure):
    _fields_ = [("columns", ctypes.c_void_p * NCOLS), ("mapped", ctypes.c_size_t * NCOLS),
                ("rows", ctypes.c_int64), ("meta", ctypes.c_void_p)]


class _Result(ctypes.Structure):
    _fields_ = [("frames", ctypes.c_int64), ("rows", ctypes.c_int64), ("kinds", ctypes.c_int64 * NKINDS),
                ("malformed_records", ctypes.c_int64), ("damaged", ctypes.c_int), ("parts", ctypes.c_int)]


class _Error(ctypes.Structure):
    _fields_ = [("msg", ctypes.c_char * 8192), ("usage", ctypes.c_int)]


@dataclass
class Converted:
    """One conversion: its return (0 whole, 1 damaged: the frames before the damage), columns.json's
    content, the columns by name, the parts the file was walked in and the error's last line."""

    status: int
    meta: dict[str, Any]
    columns: dict[str, np.ndarray]
    parts: int
    message: str


class _Mapping:
    """Owns one column's mapping; the arrays over it hold it through their buffer."""

    def __init__(self, lib: ctypes.CDLL, address: int, size: int) -> None:
        self.lib, self.address, self.size = lib, address, size

    def __del__(self) -> None:
        self.lib.cap_pcapcols_unmap(ctypes.c_void_p(self.address), ctypes.c_size_t(self.size))


def _sanitized_elsewhere(path: Path) -> bool:
    """Whether the library needs a sanitizer runtime this interpreter has not loaded."""
    data = path.read_bytes()
    needed = [name for name in SANITIZER_RUNTIMES if name in data]
    if not needed:
        return False
    maps = Path("/proc/self/maps").read_bytes()
    return not all(name in maps for name in needed)


@cache
def _load(path: Path) -> ctypes.CDLL | None:
    if _sanitized_elsewhere(path):
        return None
    lib = ctypes.CDLL(str(path))
    lib.cap_pcapcols_to_memory.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(_Table),
                                           ctypes.POINTER(_Result), ctypes.POINTER(_Error)]
    lib.cap_pcapcols_to_memory.restype = ctypes.c_int
    lib.cap_pcapcols_unmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    lib.cap_pcapcols_unmap.restype = None
    lib.cap_pcapcols_struct_sizes.argtypes = [ctypes.POINTER(ctypes.c_size_t * 3)]
    lib.cap_pcapcols_struct_sizes.restype = None
    lib.free.argtypes = [ctypes.c_void_p]
    sizes = (ctypes.c_size_t * 3)()
    lib.cap_pcapcols_struct_sizes(ctypes.byref(sizes))
    mine = (ctypes.sizeof(_Table), ctypes.sizeof(_Result), ctypes.sizeof(_Error))
    if tuple(sizes) != mine:
        raise HostwireError(f"{path}: built for other structures ({tuple(sizes)} bytes, this package expects "
                            f"{mine}); run 'make build'")
    return lib


def available() -> bool:
    """Whether the conversion can run in this process (else: hw-pcapcols of the same build)."""
    return _load(library(LIBRARY)) is not None


def threads() -> int:
    """The CPUs this process may run on: the parts a pcap file is walked in at once."""
    return len(os.sched_getaffinity(0))


def convert(path: Path, n_threads: int | None = None) -> Converted:
    """Convert one capture file. Raises InputError with the converter's one-line message when the
    file cannot be read at all; a damaged file returns status 1."""
    lib = _load(library(LIBRARY))
    if lib is None:
        raise HostwireError(f"{LIBRARY} is a sanitizer build; this interpreter cannot load it")
    table, result, error = _Table(), _Result(), _Error()
    status = lib.cap_pcapcols_to_memory(os.fsencode(path), n_threads or threads(), ctypes.byref(table),
                                        ctypes.byref(result), ctypes.byref(error))
    lines = error.msg.decode("utf-8", "replace").strip().splitlines()
    message = lines[-1] if lines else ""
    if status not in (0, 1):
        raise InputError(message or f"{path}: the conversion failed ({status})")
    owners = [_Mapping(lib, table.columns[i], table.mapped[i]) for i in range(NCOLS)]
    try:
        text = ctypes.string_at(table.meta).decode("utf-8")
    finally:
        lib.free(table.meta)
    meta = json.loads(text)
    check_format(path, meta.get("format", ""), "hostwire-columns", 1)
    rows = int(table.rows)
    columns: dict[str, np.ndarray] = {}
    for col, owner in zip(meta["columns"], owners):
        dtype = np.dtype(col["dtype"])
        if rows == 0:
            columns[col["name"]] = np.empty(0, dtype=dtype)
            continue
        buf = (ctypes.c_char * owner.size).from_address(owner.address)
        buf._owner = owner  # type: ignore[attr-defined]
        columns[col["name"]] = np.frombuffer(buf, dtype=dtype, count=rows)
    return Converted(status, meta, columns, int(result.parts), message)
