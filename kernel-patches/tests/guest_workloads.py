"""Workloads with a known answer, run inside a guest by the boot tests (test_vm.py): each writes
what it did (pids, byte counts, CLOCK_MONOTONIC stamps) as JSON, so that the host can check the
kernel's records against it.

    python3 guest_workloads.py sieves N SECONDS CPU OUT.json
    python3 guest_workloads.py blocked-sender OUT.json
    python3 guest_workloads.py pending-signal OUT.json
    python3 guest_workloads.py pid-reuse HW_SCHEDTRACE RAW_DIR OUT.json
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

BUFFER_BYTES = 4 << 20
REUSE_PID_MAX = 400  # pids then cycle through 301..399 (the kernel keeps 1..300 for itself)
CHILD_WRITE, UNRELATED_WRITE, LATER_CHILD_WRITE = 3333, 7777, 4444
WRITES_EACH = 5


def write_json(path: str, values: dict) -> None:
    Path(path).write_text(json.dumps(values))


def sieves(count: int, seconds: float, cpu: int, out: str) -> None:
    """`count` CPU-bound sieves pinned to one CPU, `seconds` of steady state: that run queue
    holds exactly `count` runnable tasks while only they run there; their /proc/PID/maps for the
    program counters."""
    bench = os.environ["HW_BENCH"]
    procs = [subprocess.Popen(["taskset", "-c", str(cpu), bench, "sieve", "--log2", "16", "--rounds", "1000000"],
                              stdout=subprocess.DEVNULL) for _ in range(count)]
    # loading the program over 9p can take the guest seconds: the steady state begins once each
    # sieve runs its own code, plus half a second for PELT's load (half-life 32 ms) to settle
    deadline = time.monotonic() + 120
    while not all(_computing(p.pid, bench) for p in procs):
        if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
            raise RuntimeError("the sieves did not start")
        time.sleep(0.05)
    time.sleep(0.5)
    maps = {p.pid: Path(f"/proc/{p.pid}/maps").read_text() for p in procs}
    t_steady = time.monotonic_ns()
    time.sleep(seconds)
    t_end = time.monotonic_ns()
    for p in procs:
        p.kill()
        p.wait()
    write_json(out, {"pids": [p.pid for p in procs], "cpu": cpu, "maps": maps, "t_steady_ns": t_steady,
                     "t_end_ns": t_end})


def _computing(pid: int, program: str) -> bool:
    """The process runs `program` (its exec is done) and has used CPU time in user space."""
    try:
        exe = os.readlink(f"/proc/{pid}/exe")
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return exe == os.path.realpath(program) and int(fields[11]) > 0  # utime, in ticks


def tcp_memory_pages() -> int:
    for line in Path("/proc/net/sockstat").read_text().splitlines():
        if line.startswith("TCP:"):
            fields = line.split()
            return int(fields[fields.index("mem") + 1])
    raise RuntimeError("/proc/net/sockstat has no TCP line")


def blocked_sender(out: str) -> None:
    """A sender whose peer never reads: it fills the socket buffers without blocking (a lower
    bound of the bytes queued, known exactly), then sends on, blocking, until the buffers stay
    full; TCP's memory count is read before, and while it is blocked."""
    for name in ("wmem_max", "rmem_max"):
        Path(f"/proc/sys/net/core/{name}").write_text(str(BUFFER_BYTES))
    pages_before = tcp_memory_pages()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    receiver = socket.socket()
    receiver.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, BUFFER_BYTES)
    receiver.connect(listener.getsockname())
    sender, _ = listener.accept()
    sender.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, BUFFER_BYTES)
    report_r, report_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        queued = 0
        chunk = b"x" * 65536
        sender.setblocking(False)
        while True:
            try:
                queued += sender.send(chunk)
            except BlockingIOError:
                break
        os.write(report_w, f"{queued}\n".encode())
        sender.setblocking(True)
        while True:  # blocks for good once the peer's window closes: the peer never reads
            sender.send(chunk)
    queued = int(os.read(report_r, 64).decode())
    time.sleep(0.5)
    t_blocked = time.monotonic_ns()
    pages_blocked = tcp_memory_pages()
    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    for s in (sender, receiver, listener):
        s.close()
    write_json(out, {"pid": pid, "queued_bytes": queued, "pages_before": pages_before, "pages_blocked": pages_blocked,
                     "t_blocked_ns": t_blocked, "state_blocked": state})


def pending_signal(out: str) -> None:
    """A process that blocks SIGUSR1 and sleeps in short steps; SIGUSR1 is sent to it at a known
    moment and stays pending until it exits."""
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
        os.write(ready_w, b"r")
        for _ in range(30):
            time.sleep(0.03)
        os._exit(0)
    os.read(ready_r, 1)
    time.sleep(0.4)
    t_before = time.monotonic_ns()
    os.kill(pid, signal.SIGUSR1)
    t_after = time.monotonic_ns()
    os.waitpid(pid, 0)
    write_json(out, {"pid": pid, "signal": int(signal.SIGUSR1), "t_before_ns": t_before, "t_after_ns": t_after})


def _followed_parent(go_r: int, report_w: int) -> None:
    """Forks a child that writes CHILD_WRITE bytes and exits, reports its pid, waits for "go",
    then forks another that writes LATER_CHILD_WRITE bytes."""
    for size, wait in ((CHILD_WRITE, False), (LATER_CHILD_WRITE, True)):
        if wait:
            os.read(go_r, 1)
        child = os.fork()
        if child == 0:
            with open("/dev/null", "wb", buffering=0) as sink:
                for _ in range(WRITES_EACH):
                    sink.write(b"c" * size)
            os._exit(0)
        os.waitpid(child, 0)
        os.write(report_w, f"{child}\n".encode())
    os._exit(0)


def _burn_pid() -> int:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return pid


def pid_reuse(schedtrace: str, raw: str, out: str) -> None:
    """hw-schedtrace follows one process (set_event_pid with event-fork); its child exits and an
    unrelated process gets the child's pid; then the followed process forks again."""
    Path("/proc/sys/kernel/pid_max").write_text(str(REUSE_PID_MAX))
    while _burn_pid() < REUSE_PID_MAX - 98:  # until pids wrap into 301..399, where they cycle
        pass
    go_r, go_w = os.pipe()
    report_r, report_w = os.pipe()
    start_r, start_w = os.pipe()
    parent = os.fork()
    if parent == 0:
        os.read(start_r, 1)
        _followed_parent(go_r, report_w)
    ready_r, ready_w = os.pipe()
    tracer = subprocess.Popen([schedtrace, "-o", raw, "-s", "-p", str(parent), "--ready-fd", str(ready_w)],
                              pass_fds=(ready_w,), stdout=subprocess.DEVNULL, stderr=open(f"{raw}.log", "wb"))
    os.close(ready_w)
    if os.read(ready_r, 16) != b"ready\n":
        raise RuntimeError("hw-schedtrace did not start")
    os.write(start_w, b"s")
    reports = os.fdopen(report_r)
    child = int(reports.readline())
    forks = 0
    while True:  # the pids cycle through a range of 99: the child's comes back soon
        pid = os.fork()
        if pid == 0:
            if os.getpid() == child:
                with open("/dev/null", "wb", buffering=0) as sink:
                    for _ in range(WRITES_EACH):
                        sink.write(b"u" * UNRELATED_WRITE)
            os._exit(0)
        os.waitpid(pid, 0)
        forks += 1
        if pid == child or forks > 10 * REUSE_PID_MAX:
            break
    os.write(go_w, b"g")
    later = int(reports.readline())
    os.waitpid(parent, 0)
    tracer.send_signal(signal.SIGINT)
    write_json(out, {"parent": parent, "child": child, "reused": pid == child, "forks": forks, "later_child": later,
                     "tracer_status": tracer.wait(timeout=600)})


if __name__ == "__main__":
    command, args = sys.argv[1], sys.argv[2:]
    if command == "sieves":
        sieves(int(args[0]), float(args[1]), int(args[2]), args[3])
    elif command == "blocked-sender":
        blocked_sender(args[0])
    elif command == "pending-signal":
        pending_signal(args[0])
    elif command == "pid-reuse":
        pid_reuse(args[0], args[1], args[2])
    else:
        sys.exit(f"guest_workloads: unknown command {command!r}")
