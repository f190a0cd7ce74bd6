"""Cost of the kernel events hw-schedtrace -s records for the ways of sending (docs/timeline.md,
"Every way a program sends"): io_uring's three events per operation (io_uring_submit_req,
io_uring_file_get, io_uring_complete) and sock:sock_send_length (one per message a socket takes,
read for sendmmsg's bytes), each against the same loop with only the events hw-schedtrace
enabled before.

Workloads, over loopback to a sink this script runs: uring-send --send-only (one 64-byte
IORING_OP_SEND at a time, submitted and waited for) and vector-send tcp (64-byte writev and
pwritev2 calls), each timing its own loop (ns_per_op). Each configuration runs in a private
tracefs instance filtered to the program's pid (as hw-schedtrace's system-call instance is; the
ring overwrites, nothing reads it), REPS rounds of every configuration back to back: printed are
the fastest run of each and the median, over the rounds, of a configuration's time less its
round's run without the new events (the machine is shared: a round's pair is less disturbed
than two minima taken apart).
Environment: SEND_BENCH_OPS (default 100000), SEND_BENCH_REPS (default 5), SEND_BENCH_CPU
(default 0: program and sink on one CPU; "none" leaves placement to the scheduler)."""

from __future__ import annotations

import os
import re
import socket
import statistics
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "analyze"))

from hostwire import paths  # noqa: E402

TRACEFS = Path("/sys/kernel/tracing")
URING = ["io_uring/io_uring_submit_req", "io_uring/io_uring_file_get", "io_uring/io_uring_complete"]
SEND_LENGTH = ["sock/sock_send_length"]
WRITE_CALLS = [f"syscalls/sys_{side}_{call}" for call in ("writev", "pwritev2") for side in ("enter", "exit")]
CPU = os.environ.get("SEND_BENCH_CPU", "0")
PIN = [] if CPU == "none" else ["taskset", "-c", CPU]


def sink() -> tuple[socket.socket, int]:
    """A loopback TCP listener whose connections are read to their end on threads of their own."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)

    def drain(conn: socket.socket) -> None:
        with conn:  # closed at the sender's end: the senders wait for it before they exit
            while conn.recv(1 << 16):
                pass

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=drain, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return listener, listener.getsockname()[1]


def run(argv: list[str], events: list[str]) -> float:
    """ns per operation of argv with the events enabled for its pid alone."""
    inst = TRACEFS / "instances" / f"hw{os.getpid()}-send-bench"
    inst.mkdir()
    proc = None
    try:
        (inst / "buffer_size_kb").write_text("1024")
        (inst / "trace_clock").write_text("mono")
        # the shell waits for a line, then execs the program: the pid filter is in place from its first call
        proc = subprocess.Popen([*PIN, "sh", "-c", 'read x; exec "$@"', "sh", *argv], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)
        (inst / "set_event_pid").write_text(str(proc.pid))
        for ev in events:
            (inst / "events" / ev / "enable").write_text("1")
        out, _ = proc.communicate("go\n", timeout=600)
        m = re.search(r"ns_per_op=([\d.]+)", out)
        if proc.returncode != 0 or not m:
            raise RuntimeError(f"{argv[0]}: exit {proc.returncode}")
        return float(m.group(1))
    finally:
        if proc and proc.poll() is None:
            proc.kill()
            proc.wait()
        for ev in events:
            (inst / "events" / ev / "enable").write_text("0")
        inst.rmdir()


def main() -> int:
    ops = int(os.environ.get("SEND_BENCH_OPS", "100000"))
    reps = int(os.environ.get("SEND_BENCH_REPS", "5"))
    progs = paths.build_dir() / "test-progs"
    listener, port = sink()
    size = 64
    uring = [str(progs / "uring-send"), "--send-only", "127.0.0.1", str(port), str(ops * size), str(size), "0"]
    writes = [str(progs / "vector-send"), "tcp", "127.0.0.1", str(port), str(ops * size), str(size), "0"]
    configs = {
        ("uring-send", "no event"): (uring, []),
        ("uring-send", "io_uring events"): (uring, URING),
        ("writev/pwritev2", "their syscall events"): (writes, WRITE_CALLS),
        ("writev/pwritev2", "+ sock_send_length"): (writes, WRITE_CALLS + SEND_LENGTH),
    }
    runs: dict[tuple[str, str], list[float]] = {key: [] for key in configs}
    try:
        for _ in range(reps):  # a round runs every configuration back to back
            for key, (argv, events) in configs.items():
                runs[key].append(run(argv, events))
    finally:
        listener.close()
    print(f"send-style events: {reps} rounds of {ops} operations of {size} bytes, CPU {CPU}")
    print(f"{'workload':<18}{'events':<24}{'fastest ns/op':>14}{'added (fastest)':>16}{'added (median of rounds)':>26}")
    for workload in dict.fromkeys(w for w, _ in configs):
        rows = [(e, v) for (w, e), v in runs.items() if w == workload]
        base = rows[0][1]
        for events, values in rows:
            paired = statistics.median(v - b for v, b in zip(values, base))
            print(f"{workload:<18}{events:<24}{min(values):>14.1f}{min(values) - min(base):>16.1f}{paired:>26.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
