"""The disk a run will take, estimated before it starts (`hostwire run --dry-run`): per collector,
a rate in bytes per second of recording (warm-up, window and quiet period) times those seconds,
plus what every run writes once.

The rates come from a calibration run of configs/soak.toml's point (20 senders, 20 background
processes, every collector, the default 10 Mbit/s shaped link, both CPUs busy) and scale as
their cause does: the capture and the I/O logs with the link rate (what crosses it: every data
frame and its ACK, every write and read); the kernel trace with the CPUs it watches, whose
switch rate the scheduler holds near a ceiling once they are busy. A CPU-capped or an idle run
traces less (the paper-regime grid measured from a fifth to the full rate), so the estimate is
an upper figure for the trace. docs/performance.md gives the calibration and a soak's check of
it."""

from __future__ import annotations

import os

from hostwire.record.point import RunPoint
from hostwire.units import parse_rate

WIRE_BYTES_PER_DATA_FRAME = 245   # a data frame's record (16 + 128 bytes kept) and its ACK's (16 + 66) + margin
FULL_FRAME_BITS = 1514 * 8
SYSCALL_BYTES_PER_LINK_BYTE = 0.155  # raw/syscalls.dat and .tsv: a record per write and per read
BENCH_LOG_BYTES_PER_LINK_BYTE = 0.05  # raw/bench/send-*, recv-*
TRACE_BYTES_PER_CPU_S = 1.1e6     # raw/trace.dat (about 30 %) and raw/sched.tsv, per traced CPU, quiet host (docs/performance.md)
RESOURCES_BYTES_PER_S = 5.0e3     # raw/resources.tsv
ONCE_BYTES = 9 << 20              # the senders' data file (8 MiB), logs, manifest, digests


def estimate(point: RunPoint) -> dict[str, int]:
    """Bytes per part of the run directory: capture, kernel_trace, syscalls, logs, once."""
    seconds = point.warmup_s + point.duration_s + point.quiet_s
    link_bytes_s = parse_rate(point.link_rate) / 8
    cpus = len(os.sched_getaffinity(0))
    parts = {
        "capture": WIRE_BYTES_PER_DATA_FRAME * link_bytes_s * 8 / FULL_FRAME_BITS * seconds if point.capture else 0.0,
        "kernel_trace": TRACE_BYTES_PER_CPU_S * cpus * seconds if point.kernel_trace else 0.0,
        "syscalls": SYSCALL_BYTES_PER_LINK_BYTE * link_bytes_s * seconds if point.syscalls != "none" else 0.0,
        "logs": (BENCH_LOG_BYTES_PER_LINK_BYTE * link_bytes_s + RESOURCES_BYTES_PER_S) * seconds,
        "once": float(ONCE_BYTES),
    }
    return {name: int(value) for name, value in parts.items()}


def describe(total: int) -> str:
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if total >= size:
            return f"{total / size:.1f} {unit}"
    return f"{total / 1e3:.0f} kB"
