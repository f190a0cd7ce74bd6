"""What the metrics' integrity tests share: captures and run directories written here from a table
of frames and the benchmark's logs (their ground truth), and `hostwire metrics` run in-process."""

from __future__ import annotations

import contextlib
import io
import json
import struct
from pathlib import Path

import numpy as np
import pandas as pd

from hostwire.cli import main
from hostwire.metrics import synth


S = 10**9
MS = 10**6
US = 10**3
BASE = 1_000 * S  # the synthetic runs' window starts here (their CLOCK_MONOTONIC)
A = "198.18.0.1:40000>198.18.0.2:5001"
B = "198.18.0.1:40001>198.18.0.2:5001"
PCAP_HEADER = 24
RECORD_HEADER = 16
ETH_IP_TCP = 14 + 20 + 20


def metrics(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(["metrics", *args])
        except SystemExit as exit_:  # argparse
            code = int(exit_.code or 0)
    return code, out.getvalue(), err.getvalue()


def counters_of(out: str) -> pd.Series:
    return pd.read_csv(io.StringIO(out)).set_index("counter")["value"]


# --- writing captures and runs ---------------------------------------------------------------

def _ip(src: str, dst: str) -> bytes:
    return bytes(int(x) for x in src.split(".")) + bytes(int(x) for x in dst.split("."))


def frame_bytes(row: pd.Series) -> bytes:
    """Ethernet + IPv4 + TCP (no options) or UDP + payload of one synth frame-table row."""
    payload = b"x" * int(row["payload_len"])
    proto = int(row["proto"])
    sport, dport = int(row["sport"]), int(row["dport"])
    if proto == 6:
        l4 = struct.pack("!HHIIBBHHH", sport, dport, int(row["seq"]), int(row["ack"]), 5 << 4, int(row["flags"]),
                         int(row["window"]), 0, 0) + payload
    else:
        l4 = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
    ip = struct.pack("!BBHHHBBH", 0x45, 0, 20 + len(l4), 0, 0, 64, proto, 0) + _ip(str(row["src"]), str(row["dst"]))
    return b"\x04" * 6 + b"\x02" * 6 + b"\x08\x00" + ip + l4


def write_pcap(frames: pd.DataFrame, path: Path) -> list[int]:
    """A nanosecond pcap of the frames in table order; returns each record's byte offset."""
    offsets = []
    with open(path, "wb") as handle:
        handle.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 1))
        for _, row in frames.iterrows():  # a few hundred frames of a test
            offsets.append(handle.tell())
            data = frame_bytes(row)
            sec, nsec = divmod(int(row["t_ns"]), S)
            handle.write(struct.pack("<IIII", sec, nsec, len(data), len(data)) + data)
    return offsets


def tsv(path: Path, kind: str, meta: dict[str, object], columns: list[str], rows: list[tuple[object, ...]]) -> None:
    lines = ["# format: hostwire-tsv 1", f"# kind: {kind}", "# clock: CLOCK_MONOTONIC"]
    lines += [f"# {k}: {v}" for k, v in meta.items()]
    lines.append("\t".join(columns))
    lines += ["\t".join(str(v) for v in row) for row in rows]
    path.write_text("\n".join(lines) + "\n")


def make_run(directory: Path, *, frames: pd.DataFrame | None, writes: dict[int, list[tuple[int, int]]],
             reads: dict[int, list[tuple[int, int]]], window: tuple[int, int] = (BASE, BASE + 200 * MS),
             manifest_window: bool = True, status: str = "complete", reason: str = "",
             losses: dict[str, object] | None = None, background: int = 0) -> Path:
    """A run directory as the runner writes it: manifest, bench.json, the senders' and receivers'
    logs (sender i: 198.18.0.1:4000i -> 198.18.0.2:5001) and raw/wire.pcap from `frames`."""
    bench = directory / "raw" / "bench"
    bench.mkdir(parents=True)
    start, end = window
    (directory / "manifest.json").write_text(json.dumps({
        "format": "hostwire-run 1", "run_id": directory.name, "status": status, "reason": reason,
        "point": {"senders": len(writes), "background": background, "link_rate": "10mbit", "topology": "netns"},
        "losses": losses if losses is not None else {"wire_ps_drop": 0},
        "exit": {"hw-bench": 0}, "window_ns": [start, end] if manifest_window else None}))
    (bench / "bench.json").write_text(json.dumps({
        "format": "hostwire-bench 1", "window_start_ns": start, "window_end_ns": end,
        "receiver_ports": {"tcp": 5001, "udp": 5002}, "processes": [], "receivers": []}))
    head = {"window_start_ns": start, "window_end_ns": end}
    for i, calls in writes.items():
        rows = [r for t, n in calls for r in ((t, "write_start", n), (t + 5 * US, "write_end", n))]
        tsv(bench / f"send-{i}.tsv", "bench-send", {**head, "role": f"send-{i}", "index": i, "pid": 100 + i,
                                                    "local": f"198.18.0.1:{40000 + i}", "peer": "198.18.0.2:5001"},
            ["t_ns", "event", "bytes"], rows)
    for i, calls in reads.items():
        tsv(bench / f"recv-{i}.tsv", "bench-receive", {**head, "role": f"recv-{i}", "index": i, "pid": 200 + i,
                                                       "local": "198.18.0.2:5001", "peer": f"198.18.0.1:{40000 + i}"},
            ["t_ns", "t_raw_ns", "bytes"], [(t, t, n) for t, n in calls])
    for i in range(background):
        tsv(bench / f"bg-{i}.tsv", "bench-background", {**head, "role": f"bg-{i}", "index": i, "pid": 300 + i},
            ["t_ns", "round", "primes", "largest", "ok"],
            [(start + k * 10 * MS, k, 23000, 262139, 1) for k in range(1, 10)])
    if frames is not None:
        write_pcap(frames, directory / "raw" / "wire.pcap")
    return directory


def steady_run(directory: Path) -> tuple[Path, pd.DataFrame]:
    """Sender 0 sends 1000-byte segments every 2 ms from 10 ms before the window to 10 ms after
    it; the receiver reads each 100 us after it crossed the wire."""
    t = BASE + np.arange(-10, 211, 2) * MS
    frames = synth.frames(t, payload=1000, headers=40)
    run = make_run(directory, frames=frames, writes={0: [(int(x) - 50 * US, 1000) for x in t]},
                   reads={0: [(int(x) + 100 * US, 1000) for x in t]})
    return run, frames
