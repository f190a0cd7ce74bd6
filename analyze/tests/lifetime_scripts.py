"""Random scripts of descriptor calls on reused fd numbers (open, socket, connect, accept, dup,
dup2, close, fork, exec with and without close-on-exec, writes in between; with `later=True` also
close-on-exec set or cleared later, by fcntl F_SETFD and ioctl FIOCLEX / FIONCLEX, and descriptors
passed over a unix socket the processes share, SCM_RIGHTS) and the brute-force
reference of which socket each write went to: a plain replay of the processes' descriptor
tables, one dict per process. Shared by the table test (analyze/tests/test_fd_lifetimes.py) and
the recorded one (tests/test_lifetimes_recorded.py), which runs a script for real."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

OPS = ("open", "socket", "accept", "dup", "dup2", "close", "fork", "exec", "write", "write", "write", "write")
# setfd: fcntl F_SETFD; fioclex: ioctl FIOCLEX or FIONCLEX; send: the fd into the shared unix
# socket (sendmsg SCM_RIGHTS); recv: the oldest descriptor in flight, at the lowest free number
LATER_OPS = (*OPS, "setfd", "fioclex", "send", "recv", "recv", "exec", "write", "write")


@dataclass
class Step:
    op: str  # open, socket, accept, dup, dup2, close, fork, exec, write, exit; setfd, fioclex, send, recv
    proc: int  # the script's process number (0 the first; fork makes the next)
    fd: int = -1  # the fd it works on (dup, dup2: the old one; write, close)
    new_fd: int = -1  # the fd it makes (open, socket, accept, dup, dup2, recv)
    cloexec: bool = False  # the flag it gives (setfd, fioclex: the one it sets; recv: MSG_CMSG_CLOEXEC)
    child: int = -1  # fork: the new process's number
    sock: int = -1  # socket, accept: the script's socket number; recv: the one received (-1 a file)
    expect: int = -2  # write: the socket it goes to (-1: a file)
    passed: bool = False  # write: its fd's socket came to this process over the unix socket (a recv, or a copy of one)
    size: int = 0  # write: its bytes, unique in the script


@dataclass
class Script:
    steps: list[Step] = field(default_factory=list)
    sockets: int = 0  # socket numbers 0 .. sockets-1
    processes: int = 1


def lowest_free(table: dict[int, tuple[int, bool, bool]]) -> int:
    fd = 3
    while fd in table:
        fd += 1
    return fd


def make_script(seed: int, steps: int = 40, max_fd: int = 6, depth: int = 2, first_size: int = 100,
                later: bool = False) -> Script:
    """A seeded random script. A forked child runs its own steps to its exit before its parent
    goes on (a real program runs the script in that order without any other descriptor). Each
    write's size is unique (first_size + its number) so that a recorded run's call can be found by it.
    A table entry is (socket number, or -1 for a file; close-on-exec; came through a recv, itself
    or a copy of one: the passed flag a write reports). The descriptors in flight
    (sent, not yet received) stay in the shared socket whichever process sent them, first in,
    first out."""
    rng = random.Random(seed)
    script = Script()
    counter = {"writes": 0}
    ops = LATER_OPS if later else OPS
    in_flight: list[int] = []

    def run(proc: int, table: dict[int, tuple[int, bool, bool]], budget: int, level: int) -> None:
        for _ in range(budget):
            op = rng.choice(ops)
            cloexec = rng.random() < 0.5
            new = lowest_free(table)
            if op in ("open", "socket", "accept") and new <= max_fd:
                sock = -1
                if op != "open":
                    sock, script.sockets = script.sockets, script.sockets + 1
                table[new] = (sock, cloexec, False)
                script.steps.append(Step(op, proc, new_fd=new, cloexec=cloexec, sock=sock))
            elif op == "dup" and table and new <= max_fd:
                old = rng.choice(sorted(table))
                table[new] = (table[old][0], False, table[old][2])
                script.steps.append(Step("dup", proc, fd=old, new_fd=new))
            elif op == "dup2" and table:
                old, target = rng.choice(sorted(table)), rng.randint(3, max_fd)
                if old != target:
                    table[target] = (table[old][0], False, table[old][2])
                    script.steps.append(Step("dup2", proc, fd=old, new_fd=target))
            elif op == "close" and table:
                fd = rng.choice(sorted(table))
                del table[fd]
                script.steps.append(Step("close", proc, fd=fd))
            elif op == "fork" and level < depth:
                child, script.processes = script.processes, script.processes + 1
                script.steps.append(Step("fork", proc, child=child))
                run(child, dict(table), budget // 2, level + 1)
                script.steps.append(Step("exit", child))
            elif op == "exec":
                for fd in [f for f, (_, ce, _) in table.items() if ce]:
                    del table[fd]
                script.steps.append(Step("exec", proc))
            elif op in ("setfd", "fioclex") and table:
                fd = rng.choice(sorted(table))
                table[fd] = (table[fd][0], cloexec, table[fd][2])
                script.steps.append(Step(op, proc, fd=fd, cloexec=cloexec))
            elif op == "send" and table and len(in_flight) < 4:
                fd = rng.choice(sorted(table))
                in_flight.append(table[fd][0])
                script.steps.append(Step("send", proc, fd=fd))
            elif op == "recv" and in_flight and new <= max_fd:
                sock = in_flight.pop(0)
                table[new] = (sock, cloexec, True)
                script.steps.append(Step("recv", proc, new_fd=new, cloexec=cloexec, sock=sock))
            elif op == "write" and table:
                fd = rng.choice(sorted(table))
                size = first_size + counter["writes"]
                script.steps.append(Step("write", proc, fd=fd, expect=table[fd][0], size=size, passed=table[fd][2]))
                counter["writes"] += 1

    run(0, {}, steps, 0)
    script.steps.append(Step("exit", 0))
    return script
