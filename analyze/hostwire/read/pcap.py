"""The wire timeline: a pcap/pcapng file as a DataFrame.

The conversion (capture/pcapcols.c) runs in this process (hostwire.read.pcaplib): it fills one
anonymous mapping per column, a pcap file split over the CPUs, and the DataFrame's numeric columns
are those mappings, without a copy. Where the library cannot be loaded here (a sanitizer build),
hw-pcapcols of the same build makes the same conversion into column files and `columns.json`,
which are memory-mapped here (the files are unlinked once mapped; the mappings keep them alive).

Columns (one row per TCP or UDP frame over IPv4/IPv6, in file order):
  frame (int64, 1-based frame number in the file), t_ns (int64 ns), wire_len, cap_len, ip_len,
  payload_len (int64 bytes), proto (uint8: 6 TCP, 17 UDP), src, dst (Categorical of address
  strings), sport, dport (uint16), seq, ack (uint32), flags (uint8 TCP flags), window (uint16,
  the raw TCP window field; 0 for UDP), wscale (int8: the window-scale shift a SYN offers, -1 when
  none); with clock_pairs also t_pcap_ns (the stamp as recorded).
df.attrs: "skipped" (kind -> count), "malformed" (frame numbers), "frames" (all frames read),
"link_type", "file_format", "snaplen", "tstamp_precision", "damage" (None or a dict with
message, byte_offset, frame) and "clock_map" (None or the slope/offset used).
"""

from __future__ import annotations

import mmap
import os
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hostwire.versioned import read_json
from hostwire.errors import HostwireError, InputError
from hostwire.lifeline import die_with_parent_env
from hostwire.paths import tool
from hostwire.read import pcaplib

COLUMNS_FORMAT = "hostwire-columns"
COLUMNS_VERSION = 1
COLUMNS = ("frame", "t_ns", "wire_len", "cap_len", "ip_len", "proto", "src", "dst", "sport", "dport",
           "seq", "ack", "flags", "window", "payload_len", "wscale")


def read_pcap(path: str | os.PathLike[str], clock_pairs: Sequence[Mapping[str, int]] | None = None, *,
              keep_damaged: bool = False) -> pd.DataFrame:
    """Read a capture file into the wire-timeline DataFrame (see the module doc for columns).

    clock_pairs: the (realtime_ns, monotonic_ns) readings of wirecap.json; t_ns is then mapped onto
    CLOCK_MONOTONIC and the raw stamp kept as t_pcap_ns. A file cut short raises InputError naming
    the byte offset and frame, unless keep_damaged, which returns the frames before the damage
    with df.attrs["damage"] set."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such capture file")
    if pcaplib.available():
        done = pcaplib.convert(path)
        if done.status == 1 and not keep_damaged:
            raise InputError(done.message)
        df = columns_frame(done.meta, done.columns)
    else:
        df = _read_through_tool(path, keep_damaged)
    if clock_pairs:
        map_clock(df, clock_pairs)
    return df


def _read_through_tool(path: Path, keep_damaged: bool) -> pd.DataFrame:
    with tempfile.TemporaryDirectory(prefix="hw-pcapcols-", dir=_scratch_dir()) as outdir:
        proc = subprocess.run([str(tool("hw-pcapcols")), str(path), "-o", outdir, "--threads", str(pcaplib.threads())],
                              capture_output=True, text=True, env=die_with_parent_env())
        message = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else ""
        message = message.removeprefix("hw-pcapcols: ")
        meta_path = Path(outdir, "columns.json")
        if proc.returncode != 0 and not meta_path.exists():
            raise InputError(message or f"{path}: hw-pcapcols exited with status {proc.returncode}")
        if proc.returncode == 1 and not keep_damaged:
            raise InputError(message)
        return read_columns(outdir)


def _scratch_dir() -> str | None:
    """Columns go to tmpfs when there is one (they are read once, right away)."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


def read_columns(outdir: str | os.PathLike[str]) -> pd.DataFrame:
    """The DataFrame of a hw-pcapcols output directory (columns.json + <column>.bin)."""
    outdir = Path(outdir)
    meta_path = outdir / "columns.json"
    meta = read_json(meta_path, COLUMNS_FORMAT, COLUMNS_VERSION, missing="hw-pcapcols writes it")
    rows = int(meta["rows"])
    return columns_frame(meta, {col["name"]: _map_array(outdir / col["file"], np.dtype(col["dtype"]), rows)
                                for col in meta["columns"]})


def columns_frame(meta: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> pd.DataFrame:
    """The DataFrame of a conversion: columns.json's content and the column arrays by name."""
    addresses = meta["dictionaries"]["addresses"]
    data: dict[str, object] = {}
    for col in meta["columns"]:
        arr = arrays[col["name"]]
        if col.get("dictionary"):
            categories = pd.Index(addresses, dtype=object) if addresses else pd.Index([], dtype=object)
            data[col["name"]] = pd.Categorical.from_codes(arr, categories=categories, validate=False)
        else:
            data[col["name"]] = arr
    df = pd.DataFrame(data, copy=False)
    df = df[list(COLUMNS)]
    df.attrs.update({
        "frames": int(meta["frames"]),
        "skipped": dict(meta.get("skipped", {})),
        "malformed": list(meta.get("malformed", [])),
        "link_type": meta.get("link_type"),
        "file_format": meta.get("file_format"),
        "snaplen": meta.get("snaplen"),
        "tstamp_precision": meta.get("tstamp_precision"),
        "damage": meta.get("damage"),
        "clock_map": None,
    })
    return df


def _map_array(path: Path, dtype: np.dtype, rows: int) -> np.ndarray:
    """Map a column file read-only; the file may be unlinked afterwards."""
    size = rows * dtype.itemsize
    if size == 0:
        return np.empty(0, dtype=dtype)
    with open(path, "rb") as fh:
        actual = os.fstat(fh.fileno()).st_size
        if actual < size:
            raise InputError(f"{path}: {actual} bytes, expected {size} for {rows} rows")
        # MAP_POPULATE: the pages are mapped in one go rather than one fault at a time
        flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
        buf = mmap.mmap(fh.fileno(), size, flags=flags, prot=mmap.PROT_READ)
    return np.frombuffer(buf, dtype=dtype, count=rows)


def map_clock(df: pd.DataFrame, clock_pairs: Sequence[Mapping[str, int]]) -> pd.DataFrame:
    """Map pcap stamps (CLOCK_REALTIME) onto CLOCK_MONOTONIC in place, linearly through the
    (realtime_ns, monotonic_ns) pairs (one pair: offset only; two or more: first and last, so the
    slope absorbs a clock-rate difference between the two clocks). Keeps the raw stamp as
    t_pcap_ns."""
    try:
        pairs = [(int(p["realtime_ns"]), int(p["monotonic_ns"])) for p in clock_pairs]
    except (KeyError, TypeError, ValueError) as err:
        raise InputError(f"clock_pairs: expected a list of {{realtime_ns, monotonic_ns}}: {err}") from None
    if not pairs:
        raise InputError("clock_pairs: empty; expected the pairs of wirecap.json")
    r0, m0 = pairs[0]
    r1, m1 = pairs[-1]
    slope = (m1 - m0) / (r1 - r0) if r1 != r0 else 1.0
    raw = df["t_ns"].to_numpy()
    # Deltas from the first pair are small, so float64 keeps them to well under a nanosecond.
    delta = (raw - r0).astype(np.float64)
    df["t_pcap_ns"] = raw
    df["t_ns"] = m0 + np.rint(delta * slope).astype(np.int64)
    df.attrs["clock_map"] = {"realtime_ns": r0, "monotonic_ns": m0, "slope": slope}
    return df


def read_wirecap_json(path: str | os.PathLike[str]) -> dict:
    """wirecap.json as a dict (its clock_pairs go to read_pcap)."""
    path = Path(path)
    return read_json(path, "hostwire-wirecap", 1, missing="hw-wirecap writes it beside the pcap")


__all__ = ["read_pcap", "read_columns", "map_clock", "read_wirecap_json", "HostwireError"]
