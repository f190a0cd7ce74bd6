"""Pairs of recordings that differ by one injected cause, for hostwire diff (tests/test_diff.py,
perf/diff_injected.py): a paced TCP sender in one namespace, a sink in the other, behind a
100 Mbit/s shaper; side B changes one thing.

- app: the sender pauses 4 ms after each 16 KiB write instead of 1 ms (app-idle);
- receiver: the sink reads 4 KiB then sleeps 2 ms, with a 16 KiB receive buffer (receiver-window);
- cpu: the sender writes without pausing, and on side B, 0.3 s after it began, forks three busy
  loops of nice -15 on its CPU (weight 29154 each against its 1024: about 1 % of the CPU is left to
  it): preempted, and fewer CPU-seconds granted."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the helpers beside this file (importlib mode)
from record_helpers import SERVER, record, server, stop  # noqa: E402

PORT = 5311
SECONDS = 2.0
CPU = "1"  # the sender's CPU, which the cpu pair's busy loops share

SENDER = r"""
import os, signal, socket, sys, time
addr, port, pause, seconds, busy = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
s = socket.create_connection((addr, port))
chunk = b"x" * 16384
start = time.monotonic()
end, loops = start + seconds, []
while time.monotonic() < end:
    s.sendall(chunk)
    time.sleep(pause)
    if busy and not loops and time.monotonic() > start + BUSY_AFTER_S:
        for _ in range(busy):  # higher-priority busy loops on this CPU (the affinity is inherited)
            pid = os.fork()
            if pid == 0:
                os.nice(BUSY_NICE)
                while True:
                    pass
            loops.append(pid)
for pid in loops:
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
s.close()
""".replace("BUSY_AFTER_S", "0.3").replace("BUSY_NICE", "-15")

SINK = r"""
import socket, sys, time
addr, port, size, nap, rcvbuf = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
tcp = socket.socket()
tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
if rcvbuf:
    tcp.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
tcp.bind((addr, port))
tcp.listen(8)
while True:
    conn, _ = tcp.accept()
    while conn.recv(size):
        if nap:
            time.sleep(nap)
    conn.close()
"""


CAUSES = {"app": "app-idle", "receiver": "receiver-window", "cpu": "preempted"}


def record_side(tx_ns: str, rx_ns: str, out: Path, pair: str, side: str) -> None:
    """One recording of the pair's side ("a" or "b") into out."""
    changed = side == "b"
    pause = {"app": "0.004" if changed else "0.001", "receiver": "0.001", "cpu": "0"}[pair]
    sink_args = ["4096", "0.002", "16384"] if pair == "receiver" and changed else ["65536", "0", "0"]
    sink = server(rx_ns, [sys.executable, "-c", SINK, SERVER, str(PORT), *sink_args])
    busy = "3" if pair == "cpu" and changed else "0"
    try:
        r = record(tx_ns, out, ["taskset", "-c", CPU, sys.executable, "-c", SENDER, SERVER, str(PORT), pause,
                                str(SECONDS), busy], "--syscalls", "tracefs")
        if r.returncode != 0:
            raise RuntimeError(f"record of {pair}/{side} failed ({r.returncode}): {r.stderr[-2000:]}")
    finally:
        stop(sink)
