"""The sockets of a recorded program, `raw/sockets.tsv` (docs/formats.md), and the frames of the
capture attributed to them: which process sent or received each frame, or none of the program's
(foreign).

A frame belongs to a socket when its source is the socket's local endpoint and its destination the
socket's remote one (sent by it), or the reverse (received by it). A socket that is not connected
(UDP before connect(), a listener) matches on its local endpoint alone, a wildcard local address
(0.0.0.0, ::) on the port alone. When both ends are the program's own (loopback), the frame goes
to its sender. When several processes hold one socket (a descriptor inherited across fork), it is
the youngest holder's: the process that was forked to use it."""

from __future__ import annotations

import os
from collections.abc import Iterable

import numpy as np
import pandas as pd

from hostwire.errors import InputError
from hostwire.read.tsv import open_tsv_of_kind, read_records

FORMAT_LINE = "# format: hostwire-tsv 2\n"
COLUMNS = ("t_ns", "pid", "comm", "fd", "inode", "proto", "local", "remote", "state")
READ_COLUMN = "t_read_ns"  # written since the descriptors' lifetimes are read from the samples; optional
PROTO_NUMBERS = {"tcp": 6, "udp": 17}
OWNER_COLUMNS = ["pid", "comm", "direction"]  # direction: "out" (sent by the owner), "in", "" (foreign)


def read_sockets(path: str | os.PathLike[str], *, keep_damaged: bool = False) -> pd.DataFrame:
    """sockets.tsv as a DataFrame with COLUMNS and t_read_ns (t_ns, pid, fd, inode, t_read_ns
    int64, t_read_ns = t_ns in a file without it; the rest text)."""
    tsv = open_tsv_of_kind(path, "sockets", COLUMNS)
    columns = [*COLUMNS, READ_COLUMN] if READ_COLUMN in tsv.columns else list(COLUMNS)
    raw = read_records(tsv, keep_damaged=keep_damaged, usecols=columns, na_filter=False, dtype=str)
    df = raw[columns].copy()
    if READ_COLUMN not in df.columns:
        df[READ_COLUMN] = df["t_ns"]
    for column in ("t_ns", "pid", "fd", "inode", READ_COLUMN):
        values = pd.to_numeric(df[column], errors="coerce")
        bad = np.flatnonzero(values.isna().to_numpy() | (values.to_numpy() < 0))
        if len(bad):
            raise InputError(f"{path}: data line {bad[0] + 1}: {column} {df[column].iloc[bad[0]]!r}: "
                             "expected a whole number, 0 or more")
        df[column] = values.astype("int64")
    bad = np.flatnonzero(~df["proto"].isin(list(PROTO_NUMBERS)).to_numpy())
    if len(bad):
        raise InputError(f"{path}: data line {bad[0] + 1}: proto {df['proto'].iloc[bad[0]]!r}: expected tcp or udp")
    df.attrs.update(raw.attrs)
    return df


def _host(addr: str) -> str:
    return f"[{addr}]" if ":" in addr else addr


def _port(endpoint: str) -> str:
    return endpoint.rpartition(":")[2]


def _is_wildcard(endpoint: str) -> bool:
    return endpoint.rpartition(":")[0] in ("0.0.0.0", "[::]")


def socket_keys(sockets: pd.DataFrame) -> dict[tuple, tuple[int, str]]:
    """The lookup keys of every socket -> (pid, comm) of its owner: (proto, local, remote) for a
    connected socket, (proto, local) for a bound one, (proto, ":port") for a wildcard one. Among
    holders of one socket, the youngest (first seen last, then the highest pid) owns it."""
    if len(sockets) == 0:
        return {}
    first = sockets.groupby(["inode", "pid"], sort=False).agg(
        t_ns=("t_ns", "min"), comm=("comm", "last")).reset_index()
    owner = first.sort_values(["t_ns", "pid"]).groupby("inode").last()
    keys: dict[tuple, tuple[int, str]] = {}
    for row in sockets.itertuples(index=False):
        pid, comm = int(owner.at[row.inode, "pid"]), str(owner.at[row.inode, "comm"])
        proto = PROTO_NUMBERS[row.proto]
        if not row.remote.endswith(":0"):
            keys[(proto, row.local, row.remote)] = (pid, comm)
        elif _is_wildcard(row.local):
            keys.setdefault((proto, ":" + _port(row.local)), (pid, comm))
        elif _port(row.local) != "0":
            keys.setdefault((proto, row.local), (pid, comm))
    return keys


def _lookup(keys: dict[tuple, tuple[int, str]], proto: int, local: str, remote: str) -> tuple[int, str] | None:
    for key in ((proto, local, remote), (proto, local), (proto, ":" + _port(local))):
        if key in keys:
            return keys[key]
    return None


def attribute_frames(frames: pd.DataFrame, sockets: pd.DataFrame) -> pd.DataFrame:
    """One row per frame (frames' index): pid and comm of the program's process that sent
    (direction "out") or received ("in") it; pid -1, comm "" and direction "" for a foreign frame."""
    out = pd.DataFrame({"pid": np.full(len(frames), -1, dtype=np.int64), "comm": "", "direction": ""},
                       index=frames.index)
    if len(frames) == 0 or len(sockets) == 0:
        return out
    keys = socket_keys(sockets)
    flows = pd.DataFrame({"proto": frames["proto"].astype("int64").to_numpy(),
                          "src": frames["src"].astype(str).to_numpy(), "sport": frames["sport"].to_numpy(),
                          "dst": frames["dst"].astype(str).to_numpy(), "dport": frames["dport"].to_numpy()})
    codes, uniques = pd.factorize(pd.MultiIndex.from_frame(flows))
    pid = np.full(len(uniques), -1, dtype=np.int64)
    comm = np.full(len(uniques), "", dtype=object)
    direction = np.full(len(uniques), "", dtype=object)
    for i, (proto, src, sport, dst, dport) in enumerate(uniques):
        local, remote = f"{_host(src)}:{sport}", f"{_host(dst)}:{dport}"
        hit = _lookup(keys, proto, local, remote)
        if hit is not None:
            pid[i], comm[i], direction[i] = hit[0], hit[1], "out"
            continue
        hit = _lookup(keys, proto, remote, local)
        if hit is not None:
            pid[i], comm[i], direction[i] = hit[0], hit[1], "in"
    out["pid"] = pid[codes]
    out["comm"] = comm[codes]
    out["direction"] = direction[codes]
    return out


def attribution_counts(frames: pd.DataFrame, owners: pd.DataFrame, segments: Iterable[int] | None = None) -> dict:
    """The manifest's attribution entry: frames in all, attributed, foreign, and per process (pid,
    comm, frames sent, frames received); `segments` (one per frame: the segments a GSO/TSO
    super-packet carries, 1 otherwise) adds the same counts in segments."""
    seg = np.ones(len(frames), dtype=np.int64) if segments is None else np.asarray(list(segments), dtype=np.int64)
    mine = owners["pid"].to_numpy() >= 0
    per = pd.DataFrame({"pid": owners["pid"].to_numpy(), "comm": owners["comm"].to_numpy(),
                        "out": (owners["direction"] == "out").to_numpy(), "segments": seg})[mine]
    processes = []
    for (p, c), group in per.groupby(["pid", "comm"], sort=True):
        processes.append({"pid": int(p), "comm": str(c), "frames_sent": int(group["out"].sum()),
                          "frames_received": int((~group["out"]).sum()),
                          "segments_sent": int(group.loc[group["out"], "segments"].sum())})
    return {"frames": int(len(frames)), "frames_attributed": int(mine.sum()), "frames_foreign": int((~mine).sum()),
            "segments": int(seg.sum()), "segments_attributed": int(seg[mine].sum()), "processes": processes}
