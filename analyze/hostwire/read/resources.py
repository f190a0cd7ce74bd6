"""The host's resource use during a run, `raw/resources.tsv` (docs/formats.md): /proc/stat read
at a fixed interval by a thread of the runner, from before the collectors start until after they
stop. Per sample, one row for all CPUs (cpu -1, the kernel's `cpu` line) and one per CPU, with
the cumulative CPU times in ns and the system-wide counters. `df_cpu_use` turns two successive
samples into shares of each interval: busy, and stolen by the hypervisor (time this VM's CPU
wanted to run and could not, which stretches every stamp taken during it)."""

from __future__ import annotations

import logging
import os

import numpy as np
import pandas as pd

from hostwire.errors import InputError
from hostwire.read.tsv import open_tsv_of_kind, read_records

log = logging.getLogger(__name__)

CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
SYSTEM_FIELDS = ("ctxt", "procs_running", "procs_blocked")
COLUMNS = ("t_ns", "cpu", *(f"{name}_ns" for name in CPU_FIELDS), *SYSTEM_FIELDS)
DEFAULT_INTERVAL_S = 0.1
BUSY = ("user", "nice", "system", "irq", "softirq")


def parse_proc_stat(text: str, tick_ns: int) -> tuple[list[tuple[int, list[int]]], dict[str, int]]:
    """The cpu lines of /proc/stat as (cpu, times in ns of CPU_FIELDS; cpu -1 for the total) and
    the system-wide counters of SYSTEM_FIELDS. Fields a kernel lacks count 0."""
    cpus: list[tuple[int, list[int]]] = []
    system = dict.fromkeys(SYSTEM_FIELDS, 0)
    for line in text.splitlines():
        name, _, rest = line.partition(" ")
        if name.startswith("cpu"):
            ticks = [int(v) for v in rest.split()[:len(CPU_FIELDS)]]
            ticks += [0] * (len(CPU_FIELDS) - len(ticks))
            cpus.append((-1 if name == "cpu" else int(name[3:]), [t * tick_ns for t in ticks]))
        elif name in system:
            system[name] = int(rest.split()[0])
    return cpus, system


def read_resources(path: str | os.PathLike[str], *, keep_damaged: bool = False) -> pd.DataFrame:
    """resources.tsv as a DataFrame with COLUMNS (all int64), in file order. A file that is not
    whole (cut, no trailer, counts that disagree: see hostwire.read.tsv) raises InputError naming file
    and line; keep_damaged=True returns its complete records with df.attrs["damage"] set (None for
    a whole file)."""
    tsv = open_tsv_of_kind(path, "resources", COLUMNS)
    raw = read_records(tsv, keep_damaged=keep_damaged, usecols=list(COLUMNS), na_filter=False)
    try:
        df = raw[list(COLUMNS)].astype("int64")
    except (TypeError, ValueError) as err:
        raise InputError(f"{path}: expected integers in every column: {err}") from None
    _check_ranges(path, df)
    df.attrs.update(raw.attrs)
    return df


MAX_CPU = 8191
# The kernel's iowait count is not monotonic: a CPU's idle time is split into idle and iowait as
# tasks wait for I/O, and the split is revised, so iowait can fall between two reads
# (Documentation/filesystems/proc.rst, "iowait ... will decrease in certain conditions").
MAY_DECREASE = ("iowait",)


def _check_ranges(path: str | os.PathLike[str], df: pd.DataFrame) -> None:
    """A flipped bit that still reads as a number: cpu from -1 to MAX_CPU, no negative counter,
    and per CPU the stamps and the cumulative counters never go back. Raises InputError naming the
    file, the data line and what was expected."""
    cpu = df["cpu"].to_numpy()
    bad = np.flatnonzero((cpu < -1) | (cpu > MAX_CPU))
    if len(bad):
        raise InputError(f"{path}: data line {bad[0] + 1}: cpu {cpu[bad[0]]}: expected -1 to {MAX_CPU}")
    cumulative = ["t_ns", *(f"{name}_ns" for name in CPU_FIELDS if name not in MAY_DECREASE), "ctxt"]
    for column in cumulative + [f"{name}_ns" for name in MAY_DECREASE] + ["procs_running", "procs_blocked"]:
        values = df[column].to_numpy()
        bad = np.flatnonzero(values < 0)
        if len(bad):
            raise InputError(f"{path}: data line {bad[0] + 1}: {column} {values[bad[0]]}: expected 0 or more")
    order = np.argsort(cpu, kind="stable")
    same = np.zeros(len(df), dtype=bool)
    same[1:] = cpu[order][1:] == cpu[order][:-1]
    for column in cumulative:
        values = df[column].to_numpy()[order]
        back = np.flatnonzero(same[1:] & (values[1:] < values[:-1]))
        if len(back):
            line = order[back[0] + 1] + 1
            raise InputError(f"{path}: data line {line}: {column} {values[back[0] + 1]} is below the CPU's "
                             f"previous sample {values[back[0]]}: expected a cumulative count")


def df_cpu_use(samples: pd.DataFrame) -> pd.DataFrame:
    """Per CPU (cpu -1: all) and per interval between two successive samples: `t_start_ns`,
    `t_end_ns`, `busy_share` (user, nice, system, irq, softirq over all the CPU's time in the
    interval), `steal_share` (stolen over the same), `ctxt_per_s` (context switches per second,
    the whole host). Shares are of the time the kernel accounted, which is ticks: an interval
    shorter than a few ticks is coarse."""
    s = samples.sort_values(["cpu", "t_ns"], kind="stable")
    cpu = s["cpu"].to_numpy()
    same = np.zeros(len(s), dtype=bool)
    same[1:] = cpu[1:] == cpu[:-1]
    times = {name: s[f"{name}_ns"].to_numpy() for name in CPU_FIELDS}
    delta = {name: np.diff(values, prepend=0)[same] for name, values in times.items()}
    for name in MAY_DECREASE:  # a revised split: the time is idle's, counted there
        delta[name] = np.maximum(delta[name], 0)
    total = sum(delta.values())
    busy = sum(delta[name] for name in BUSY)
    t = s["t_ns"].to_numpy()
    t_start, t_end = np.roll(t, 1)[same], t[same]
    ctxt = np.diff(s["ctxt"].to_numpy(), prepend=0)[same]
    with np.errstate(invalid="ignore", divide="ignore"):
        return pd.DataFrame({
            "cpu": cpu[same],
            "t_start_ns": t_start,
            "t_end_ns": t_end,
            "busy_share": np.where(total > 0, busy / total, np.nan),
            "steal_share": np.where(total > 0, delta["steal"] / total, np.nan),
            "ctxt_per_s": ctxt / ((t_end - t_start) / 1e9),
        }).reset_index(drop=True)
