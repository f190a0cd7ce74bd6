"""A host's /proc samples (raw/hosts/<role>/proc.txt, docs/hosts.md) as a table: each sample is
`@ ` followed by /proc/uptime, /proc/loadavg, /proc/stat, /proc/meminfo, /proc/net/dev,
/proc/net/snmp and /proc/diskstats as the kernel printed them. A sample cut short (the sampler
ended mid-write) is left out and counted."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hostwire.errors import InputError

CPU_STATES = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
MEMINFO = {"MemAvailable": "mem_available_kib", "Dirty": "dirty_kib", "Slab": "slab_kib"}
NET_FIELDS = ("rx_bytes", "rx_packets", "rx_errs", "rx_drop", "tx_bytes", "tx_packets", "tx_errs", "tx_drop")
NET_POSITIONS = (0, 1, 2, 3, 8, 9, 10, 11)  # of /proc/net/dev's 16 counters
WHOLE_DISK = re.compile(r"(?:[shv]d[a-z]+|xvd[a-z]+|nvme\d+n\d+|mmcblk\d+)")
TCP_FIELDS = ("RetransSegs", "OutRsts", "OutSegs", "InSegs")


def _sample(block: str) -> dict[str, Any] | None:
    lines = block.splitlines()
    if len(lines) < 3:
        return None
    row: dict[str, Any] = {"t_s": float(lines[0].split()[0]), "load1": float(lines[1].split()[0])}
    tcp_header: list[str] | None = None
    for line in lines[2:]:
        parts = line.split()
        if not parts:
            continue
        head = parts[0]
        if head == "cpu":
            row.update({f"cpu_{s}": int(v) for s, v in zip(CPU_STATES, parts[1:9])})
        elif head == "ctxt":
            row["ctxt"] = int(parts[1])
        elif head.rstrip(":") in MEMINFO and head.endswith(":"):
            row[MEMINFO[head.rstrip(":")]] = int(parts[1])
        elif head.endswith(":") and len(parts) == 17 and head not in ("Tcp:", "Udp:", "Ip:"):
            name = head.rstrip(":")
            row.update({f"net.{name}.{f}": int(parts[1 + p]) for f, p in zip(NET_FIELDS, NET_POSITIONS)})
        elif head == "Tcp:":
            if tcp_header is None:
                tcp_header = parts[1:]
            else:
                values = dict(zip(tcp_header, parts[1:]))
                row.update({f"tcp_{k}": int(values[k]) for k in TCP_FIELDS if k in values})
        elif len(parts) >= 14 and parts[0].isdigit() and parts[1].isdigit():
            # diskstats: major minor name reads _ sectors_read _ writes _ sectors_written ...;
            # whole disks only (a partition's sectors are its disk's too)
            if WHOLE_DISK.fullmatch(parts[2]):
                row["disk_read_sectors"] = row.get("disk_read_sectors", 0) + int(parts[5])
                row["disk_write_sectors"] = row.get("disk_write_sectors", 0) + int(parts[9])
    complete = block.endswith("\n") and "tcp_RetransSegs" in row and "ctxt" in row
    return row if complete else None


def read_proc_samples(path: str | Path) -> pd.DataFrame:
    """One row per complete sample: t_s (the host's CLOCK_BOOTTIME, /proc/uptime, 10 ms steps),
    load1, cpu_<state> (ticks), ctxt, mem_available_kib, dirty_kib, slab_kib,
    net.<interface>.<rx|tx>_<bytes|packets|errs|drop>, tcp_<RetransSegs|OutRsts|OutSegs|InSegs>,
    disk_read_sectors, disk_write_sectors (counters as the kernel keeps them). attrs["cut"]:
    samples left out."""
    path = Path(path)
    try:
        text = path.read_text(errors="replace")
    except OSError as err:
        raise InputError(f"{path}: cannot read: {err.strerror}") from None
    rows, cut = [], 0
    for block in text.split("@ ")[1:]:
        try:
            row = _sample(block)
        except (ValueError, IndexError, KeyError):
            row = None
        if row is None:
            cut += 1
        else:
            rows.append(row)
    df = pd.DataFrame(rows)
    df.attrs["cut"] = cut
    return df


def run_summary(df: pd.DataFrame, interfaces: list[str] | None = None) -> dict[str, Any]:
    """Per run: the counters' totals over the samples' span, and the means and maxima of the
    rates between samples (bytes/s, packets/s, switches/s, CPU busy share) and of the levels."""
    if len(df) < 2:
        return {"samples": int(len(df)), "cut": int(df.attrs.get("cut", 0))}
    dt = np.diff(df["t_s"].to_numpy())
    dt = np.where(dt > 0, dt, np.nan)
    out: dict[str, Any] = {"samples": int(len(df)), "cut": int(df.attrs.get("cut", 0)),
                           "span_s": float(df["t_s"].iloc[-1] - df["t_s"].iloc[0]), "totals": {},
                           "mean": {}, "max": {}}
    counters = [c for c in df.columns if c.startswith(("net.", "tcp_", "disk_")) or c == "ctxt"]
    if interfaces is not None:
        counters = [c for c in counters if not c.startswith("net.") or c.split(".")[1] in interfaces]
    for col in counters:
        values = df[col].to_numpy(dtype=np.float64)
        out["totals"][col] = int(values[-1] - values[0])
        rate = np.diff(values) / dt
        out["mean"][f"{col}/s"] = float(np.nanmean(rate))
        out["max"][f"{col}/s"] = float(np.nanmax(rate))
    cpu = [f"cpu_{s}" for s in CPU_STATES if f"cpu_{s}" in df]
    if cpu:
        ticks = np.diff(df[cpu].to_numpy(dtype=np.float64), axis=0)
        total = ticks.sum(axis=1)
        busy = np.where(total > 0, 1 - (ticks[:, cpu.index("cpu_idle")] + ticks[:, cpu.index("cpu_iowait")]) / total,
                        np.nan)
        out["mean"]["cpu_busy"] = float(np.nanmean(busy))
        out["max"]["cpu_busy"] = float(np.nanmax(busy))
    for col in ("load1", "mem_available_kib", "dirty_kib", "slab_kib"):
        if col in df:
            out["mean"][col] = float(df[col].mean())
            out["max"][col] = float(df[col].max())
    return out
