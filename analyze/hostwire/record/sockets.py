"""The socket sampler of `hostwire record`: which process holds which TCP or UDP socket, read from
/proc on a thread of the recorder, into raw/sockets.tsv (hostwire.read.sockets reads it).

Each round walks the followed process tree (the roots and their descendants, through
/proc/PID/task/TID/children), lists each process's socket descriptors (/proc/PID/fd) and looks
their inodes up in the tables of the process's network namespace (/proc/PID/net/tcp, tcp6, udp,
udp6). A row is written when a (process, descriptor, socket) is first seen and again whenever the
socket's endpoints change (a connect() after bind(), a UDP socket connected later), so the file
holds each socket's endpoints from the moment they were known; each row says when its process's
descriptors were read (t_ns to t_read_ns: the descriptor held the socket at some moment between).
A socket that lives less than one interval can be missed: the kernel's inet_sock_set_state events and the traced calls cover TCP
connections and sends between rounds (docs/record.md). The same walk notes each process seen
holding an io_uring instance (anon_inode:[io_uring]): its ring's operations are in the program's
memory, which the ptrace and preload tracers do not read (docs/timeline.md, "Every way a program
sends")."""

from __future__ import annotations

import logging
import os
import socket
import struct
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from hostwire.errors import HostwireError
from hostwire.read.sockets import COLUMNS, FORMAT_LINE, READ_COLUMN

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 0.05
TABLES = (("tcp", socket.AF_INET), ("tcp6", socket.AF_INET6), ("udp", socket.AF_INET), ("udp6", socket.AF_INET6))
TCP_STATES = {1: "ESTABLISHED", 2: "SYN_SENT", 3: "SYN_RECV", 4: "FIN_WAIT1", 5: "FIN_WAIT2", 6: "TIME_WAIT",
              7: "CLOSE", 8: "CLOSE_WAIT", 9: "LAST_ACK", 10: "LISTEN", 11: "CLOSING"}


@dataclass(frozen=True)
class SocketEntry:
    proto: str  # "tcp" or "udp"
    local: str  # "198.18.0.1:5201", "[fd00::1]:5201"
    remote: str  # "0.0.0.0:0" when not connected
    state: str


def endpoint(hex_text: str, family: int) -> str:
    """One address:port field of /proc/net/{tcp,udp}[6] as text; an IPv4-mapped IPv6 address
    becomes the IPv4 address that the wire shows."""
    addr_hex, _, port_hex = hex_text.partition(":")
    raw = bytes.fromhex(addr_hex)
    # the kernel prints each 32-bit word of the address in host order
    words = struct.unpack(f"<{len(raw) // 4}I", raw)
    packed = struct.pack(f">{len(words)}I", *words)
    port = int(port_hex, 16)
    if family == socket.AF_INET6 and packed[:12] == b"\0" * 10 + b"\xff\xff":
        packed, family = packed[12:], socket.AF_INET
    text = socket.inet_ntop(family, packed)
    return f"[{text}]:{port}" if family == socket.AF_INET6 else f"{text}:{port}"


def parse_net_table(text: str, proto: str, family: int) -> dict[int, SocketEntry]:
    """inode -> SocketEntry for one /proc/net table."""
    out: dict[int, SocketEntry] = {}
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 10:
            continue
        try:
            inode = int(fields[9])
            state = int(fields[3], 16)
            out[inode] = SocketEntry(proto, endpoint(fields[1], family), endpoint(fields[2], family),
                                     TCP_STATES.get(state, str(state)) if proto == "tcp" else "")
        except (ValueError, struct.error):
            continue
    return out


def process_tree(roots: list[int]) -> list[int]:
    """The roots that still live and all their descendants (threads' children included)."""
    seen: list[int] = []
    todo = list(roots)
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue  # gone
        seen.append(pid)
        for tid in tasks:
            try:
                todo.extend(int(c) for c in Path(f"/proc/{pid}/task/{tid}/children").read_text().split())
            except (OSError, ValueError):
                continue
    return seen


class SocketSampler:
    """Samples the sockets of `roots` and their descendants into `path` every `interval_s`, on
    a thread, until stop(); a round is taken at start and at stop too."""

    def __init__(self, path: Path, roots: list[int], interval_s: float = DEFAULT_INTERVAL_S) -> None:
        self.path = path
        self.roots = list(roots)
        self.interval_s = interval_s
        self.rounds = 0
        self.rows = 0
        self.errors = 0
        self.processes: dict[int, str] = {}  # every process and thread seen: pid or tid -> comm
        self.rings: dict[int, str] = {}  # the processes seen holding an io_uring instance: pid -> comm
        self._known: dict[tuple[int, int], tuple[int, SocketEntry | None]] = {}  # (pid, fd) -> (inode, entry)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._out: TextIO | None = None
        self._lock = threading.Lock()

    def follow(self, pid: int) -> None:
        """Adds a root (the command's pid, known once it is started)."""
        with self._lock:
            if pid not in self.roots:
                self.roots.append(pid)

    def start(self) -> None:
        try:
            self._out = open(self.path, "w", encoding="utf-8")
        except OSError as err:
            raise HostwireError(f"{self.path}: failed to create: {err.strerror}") from None
        self._out.write(FORMAT_LINE + "# kind: sockets\n# source: /proc/PID/fd, /proc/PID/net\n"
                        "# clock: CLOCK_MONOTONIC\n" + "\t".join((*COLUMNS, READ_COLUMN)) + "\n")
        self.sample()
        self._thread = threading.Thread(target=self._loop, name="hostwire-sockets", daemon=True)
        self._thread.start()

    def stop(self) -> dict[str, int | float]:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
            self.sample()
        if self._out is not None:
            try:
                self._out.write(f"# end: records={self.rows} rounds={self.rounds}\n")
                self._out.close()
            except OSError as err:
                self.errors += 1
                log.warning("sockets: failed to write %s: %s", self.path, err.strerror)
            self._out = None
        return {"rounds": self.rounds, "rows": self.rows, "errors": self.errors,
                "interval_ns": round(self.interval_s * 1e9), "processes": len(self.processes),
                "io_uring_processes": len(self.rings)}

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def sample(self) -> None:
        """One round over the tree."""
        with self._lock:
            roots = list(self.roots)
        tables: dict[str, dict[int, SocketEntry]] = {}  # per network namespace
        lines: list[str] = []
        for pid in process_tree(roots):
            comm = self._comm(pid)
            if comm is None:
                continue
            self.processes[pid] = comm  # the latest: a process that exec'd is named by what it runs now
            self._threads(pid)
            t_read = time.monotonic_ns()  # the descriptors are read in [t_read, done]: what they held then
            held = self._socket_fds(pid, comm)
            done = time.monotonic_ns()
            for fd, inode in held:
                known = self._known.get((pid, fd))
                if known is not None and known[0] == inode and known[1] is not None and _settled(known[1]):
                    continue
                entry = self._lookup(pid, inode, tables)
                if known is not None and known == (inode, entry):
                    continue
                self._known[(pid, fd)] = (inode, entry)
                if entry is not None:
                    lines.append(f"{t_read}\t{pid}\t{comm}\t{fd}\t{inode}\t{entry.proto}\t{entry.local}\t"
                                 f"{entry.remote}\t{entry.state}\t{done}\n")
        self.rounds += 1
        if lines and self._out is not None:
            try:
                self._out.write("".join(lines))
                self._out.flush()
                self.rows += len(lines)
            except OSError as err:
                self.errors += 1
                log.warning("sockets: failed to write %s: %s", self.path, err.strerror)

    def _threads(self, pid: int) -> None:
        """The process's threads too: the kernel trace and the calls name tasks by thread id."""
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            return
        for tid in tids:
            if int(tid) not in self.processes:
                comm = self._comm(int(tid), f"/proc/{pid}/task/{tid}/comm")
                if comm is not None:
                    self.processes[int(tid)] = comm

    @staticmethod
    def _comm(pid: int, path: str | None = None) -> str | None:
        try:
            return Path(path or f"/proc/{pid}/comm").read_text().strip().replace("\t", " ") or "?"
        except OSError:
            return None

    def _socket_fds(self, pid: int, comm: str) -> list[tuple[int, int]]:
        out = []
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            return out
        for name in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{name}")
            except OSError:
                continue
            if target.startswith("socket:["):
                out.append((int(name), int(target[8:-1])))
            elif target == "anon_inode:[io_uring]":
                self.rings[pid] = comm
        return out

    def _lookup(self, pid: int, inode: int, tables: dict[str, dict[int, SocketEntry]]) -> SocketEntry | None:
        try:
            netns = os.readlink(f"/proc/{pid}/ns/net")
        except OSError:
            return None
        table = tables.get(netns)
        if table is None:
            table = {}
            for name, family in TABLES:
                try:
                    table.update(parse_net_table(Path(f"/proc/{pid}/net/{name}").read_text(), name[:3], family))
                except OSError:
                    continue
            tables[netns] = table
        return table.get(inode)


def _settled(entry: SocketEntry) -> bool:
    """A socket whose endpoints can no longer change: a TCP connection past its handshake."""
    return entry.proto == "tcp" and not entry.remote.endswith(":0") and entry.state != "SYN_SENT"
