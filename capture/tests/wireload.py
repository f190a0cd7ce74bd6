"""A bulk TCP transfer between the two namespaces of a Topology, captured by hw-wirecap in the
receiver namespace; shared by the capture tests and perf/bench_capture.py (loaded by path)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from hostwire.paths import tool
from hostwire.record.topology import RECEIVER_ADDR, SENDER_ADDR

PORT = 5001

RECEIVER = f"""
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("{RECEIVER_ADDR}", {PORT}))
s.listen(1)
print("ready", flush=True)
c, _ = s.accept()
n = 0
while True:
    b = c.recv(1 << 16)
    if not b:
        break
    n += len(b)
print(n, flush=True)
"""

SENDER = f"""
import socket, sys, time
s = socket.create_connection(("{RECEIVER_ADDR}", {PORT}))
buf = b"x" * 65536
end = time.monotonic() + float(sys.argv[1])
n = 0
while time.monotonic() < end:
    n += s.send(buf)
s.close()
print(n, flush=True)
"""


def start_wirecap(topo, pcap: Path, *extra: str) -> subprocess.Popen[str]:
    """hw-wirecap on the receiver's veth; returns once it is capturing."""
    proc = subprocess.Popen([str(tool("hw-wirecap")), "-n", topo.rx_ns, "-i", topo.rx_dev, "-o", str(pcap), *extra],
                            stderr=subprocess.PIPE, text=True)
    line = proc.stderr.readline()
    if "capturing on" not in line:
        proc.kill()
        proc.wait()
        raise RuntimeError(f"hw-wirecap did not start: {line.strip()}")
    return proc


def stop_wirecap(proc: subprocess.Popen[str], timeout: float = 20) -> str:
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"hw-wirecap failed ({proc.returncode}): {err.strip()}")
    return err


def bulk_transfer(topo, seconds: float, timeout: float = 60) -> int:
    """One TCP connection sender -> receiver for `seconds`; returns the bytes received."""
    rx = subprocess.Popen(["ip", "netns", "exec", topo.rx_ns, sys.executable, "-c", RECEIVER],
                          stdout=subprocess.PIPE, text=True)
    try:
        if rx.stdout.readline().strip() != "ready":
            raise RuntimeError("receiver did not start")
        tx = subprocess.run(["ip", "netns", "exec", topo.tx_ns, sys.executable, "-c", SENDER, str(seconds)],
                            capture_output=True, text=True, timeout=timeout)
        if tx.returncode != 0:
            raise RuntimeError(f"sender failed: {tx.stderr.strip()}")
        out, _ = rx.communicate(timeout=timeout)
        return int(out.strip().splitlines()[-1])
    finally:
        if rx.poll() is None:
            rx.kill()
            rx.wait()


def capture_transfer(topo, outdir: Path, seconds: float) -> tuple[Path, dict, str]:
    """Capture one bulk transfer; returns the pcap path, wirecap.json and hw-wirecap's counters line."""
    pcap = outdir / "wire.pcap"
    cap = start_wirecap(topo, pcap)
    try:
        bulk_transfer(topo, seconds)
    finally:
        err = stop_wirecap(cap)
    meta = json.loads((outdir / "wirecap.json").read_text())
    return pcap, meta, err


def wire_gaps(df: pd.DataFrame, rate_bit: int, src: str = SENDER_ADDR) -> pd.DataFrame:
    """Gaps between consecutive frames of one direction, with the serialization time of the later
    frame at the link rate (its Ethernet length, as the shaper counts it). Frames are taken in stable
    stamp order, as the analysis takes them (file order is not stamp order: docs/formats.md)."""
    d = df[df["src"] == src].sort_values("t_ns", kind="stable")
    t = d["t_ns"].to_numpy()
    gap = np.diff(t)
    ser = d["wire_len"].to_numpy()[1:] * 8e9 / rate_bit
    return pd.DataFrame({"gap_ns": gap, "ser_ns": ser, "wire_len": d["wire_len"].to_numpy()[1:]})


def gap_summary(gaps: pd.DataFrame) -> dict:
    full = gaps[gaps["wire_len"] >= 1500]["gap_ns"] / 1000
    return {
        "frames": len(gaps) + 1,
        "impossible_share": float((gaps["gap_ns"] < gaps["ser_ns"]).mean()) if len(gaps) else 0.0,
        "below_99pct_share": float((gaps["gap_ns"] < 0.99 * gaps["ser_ns"]).mean()) if len(gaps) else 0.0,
        "below_half_share": float((gaps["gap_ns"] < 0.5 * gaps["ser_ns"]).mean()) if len(gaps) else 0.0,
        "full_median_us": float(full.median()),
        "full_p1_us": float(full.quantile(0.01)),
        "full_min_us": float(full.min()),
        "full_p99_us": float(full.quantile(0.99)),
    }


def retransmitted_segments(netns: str) -> int:
    """The namespace's TCP RetransSegs counter (/proc/net/snmp is per network namespace): the
    sender's own count of the segments it sent again, the ground truth for repeats on the wire."""
    snmp = subprocess.run(["ip", "netns", "exec", netns, "cat", "/proc/net/snmp"], capture_output=True,
                          text=True, check=True, timeout=10).stdout
    header, values = [line.split()[1:] for line in snmp.splitlines() if line.startswith("Tcp:")]
    return int(dict(zip(header, values))["RetransSegs"])


def covered_bytes(seq: np.ndarray, payload_len: np.ndarray) -> tuple[int, int]:
    """The bytes of the stream's sequence space that the data segments cover (a retransmission
    covers its bytes again, and need not start where the first copy did), and the holes' bytes
    between the lowest and the highest covered byte; sequence numbers wrap at 2^32."""
    start = (seq.astype(np.int64) - int(seq[0])) % 2**32
    start = np.where(start >= 2**31, start - 2**32, start)  # a retransmission just below the first
    order = np.argsort(start, kind="stable")
    start, end = start[order], start[order] + payload_len[order].astype(np.int64)
    reached = np.maximum.accumulate(end)
    before = np.concatenate(([start[0]], reached[:-1]))
    covered = int(np.clip(end - np.maximum(start, before), 0, None).sum())
    holes = int(np.clip(start - before, 0, None).sum())
    return covered, holes
