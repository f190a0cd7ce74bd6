"""A host's /proc samples (raw/hosts/<role>/proc.txt, docs/hosts.md) as a table. The sampler
(hostwire.record.procsampler) writes each resource's sample as `@ <uptime> <resource>` followed by
its /proc file as the kernel printed it (`all`: every file, the runner's last sample), and
`% <uptime> dropped <resource>=<count> ...` whenever its differential filter dropped one. A
sample cut short (the sampler ended mid-write) is left out and counted."""

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
# what a whole sample of each resource holds (else it was cut short)
COMPLETE = {"load": ("load1",), "cpu": ("ctxt",), "memory": ("slab_kib",), "tcp": ("tcp_RetransSegs",),
            "net": (), "disk": (), "all": ("load1", "ctxt", "slab_kib", "tcp_RetransSegs")}
LOADAVG = re.compile(r"(\d+\.\d+) \d+\.\d+ \d+\.\d+ \d+/\d+ \d+")


def _parse(lines: list[str]) -> dict[str, Any]:
    row: dict[str, Any] = {}
    tcp_header: list[str] | None = None
    for line in lines:
        parts = line.split()
        if not parts:
            continue
        head = parts[0]
        if LOADAVG.fullmatch(line.strip()):
            row["load1"] = float(parts[0])
        elif head == "cpu":
            row.update({f"cpu_{s}": int(v) for s, v in zip(CPU_STATES, parts[1:9])})
        elif head == "ctxt":
            row["ctxt"] = int(parts[1])
        elif head.endswith(":") and head.rstrip(":") in MEMINFO:
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
    return row


def read_proc_samples(path: str | Path) -> pd.DataFrame:
    """One row per sampling instant: t_s (the host's CLOCK_BOOTTIME, /proc/uptime, 10 ms steps),
    load1, cpu_<state> (ticks), ctxt, mem_available_kib, dirty_kib, slab_kib,
    net.<interface>.<rx|tx>_<bytes|packets|errs|drop>, tcp_<RetransSegs|OutRsts|OutSegs|InSegs>,
    disk_read_sectors, disk_write_sectors (counters as the kernel keeps them); a resource not
    sampled at an instant (its interval, or the filter) is NaN there. attrs: "cut" (samples left
    out), "dropped" ({resource: count} the differential filter dropped)."""
    path = Path(path)
    try:
        text = path.read_text(errors="replace")
    except OSError as err:
        raise InputError(f"{path}: cannot read: {err.strerror}") from None
    rows: list[dict[str, Any]] = []
    cut, dropped = 0, {}
    blocks = re.split(r"^(?=[@%] )", text, flags=re.MULTILINE)
    for block in blocks:
        if block.startswith("% "):
            dropped = {k: int(v) for k, _, v in (item.partition("=") for item in block.split()[3:]) if v.isdigit()}
            continue
        if not block.startswith("@ "):
            continue
        lines = block.split("\n")
        header = lines[0].split()
        try:
            t_s, resource = float(header[1]), header[2]
            sample = _parse(lines[1:])
        except (ValueError, IndexError, KeyError):
            cut += 1
            continue
        if not block.endswith("\n") or not all(k in sample for k in COMPLETE.get(resource, ())) or not sample:
            cut += 1
            continue
        if rows and rows[-1]["t_s"] == t_s:
            rows[-1].update(sample)
        else:
            rows.append({"t_s": t_s, **sample})
    df = pd.DataFrame(rows)
    df.attrs["cut"] = cut
    df.attrs["dropped"] = dropped
    return df


def run_summary(df: pd.DataFrame, interfaces: list[str] | None = None) -> dict[str, Any]:
    """Per run: the counters' totals over the samples' span, and the means and maxima of the
    rates between samples (bytes/s, packets/s, switches/s, CPU busy share) and of the levels."""
    if len(df) < 2:
        return {"samples": int(len(df)), "cut": int(df.attrs.get("cut", 0))}
    out: dict[str, Any] = {"samples": int(len(df)), "cut": int(df.attrs.get("cut", 0)),
                           "dropped": dict(df.attrs.get("dropped", {})),
                           "span_s": float(df["t_s"].iloc[-1] - df["t_s"].iloc[0]), "totals": {},
                           "mean": {}, "max": {}}
    t = df["t_s"].to_numpy()
    counters = [c for c in df.columns if c.startswith(("net.", "tcp_", "disk_")) or c == "ctxt"]
    if interfaces is not None:
        counters = [c for c in counters if not c.startswith("net.") or c.split(".")[1] in interfaces]
    for col in counters:
        # between the instants it was sampled: a dropped sample widens the interval, never adds
        # a zero rate and a jump
        values = df[col].to_numpy(dtype=np.float64)
        kept = ~np.isnan(values)
        if kept.sum() < 2:
            continue
        v, tk = values[kept], t[kept]
        out["totals"][col] = int(v[-1] - v[0])
        dt = np.diff(tk)
        rate = np.diff(v) / np.where(dt > 0, dt, np.nan)
        out["mean"][f"{col}/s"] = float((v[-1] - v[0]) / (tk[-1] - tk[0])) if tk[-1] > tk[0] else float("nan")
        out["max"][f"{col}/s"] = float(np.nanmax(rate))
    cpu = [f"cpu_{s}" for s in CPU_STATES if f"cpu_{s}" in df]
    if cpu:
        sampled = df[cpu].dropna()
        ticks = np.diff(sampled.to_numpy(dtype=np.float64), axis=0)
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
