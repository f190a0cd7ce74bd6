"""Sockets by their lifetimes, as tables (hostwire.timeline.fd_lifetimes): random scripts of open,
socket, connect, accept, dup, dup2, close, fork and exec (with and without close-on-exec) on
reused fd numbers, turned into the records a tracer writes, joined, and checked write by write
against the brute-force replay of the script (analyze/tests/lifetime_scripts.py). The recorded
version runs scripts for real: tests/test_lifetimes_recorded.py."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hostwire.timeline import fd_lifetimes
from hostwire.timeline.stream_tables import calls as join_calls

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the helpers beside this file (importlib mode)
from lifetime_scripts import Script, make_script  # noqa: E402

LISTENER_FD = 50
LISTEN = "127.0.0.1:9000"


def client_name(sock: int) -> str:
    return f"10.0.0.1:{30000 + sock}>10.0.0.2:7000"


def accepted_name(sock: int) -> str:
    return f"{LISTEN}>127.0.0.1:{20000 + sock}"


def tables_of(script: Script, names_from: str, seed: int) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame,
                                                                     pd.DataFrame, list[str]]:
    """The records of a tracer that does not describe fds (tracefs), the kernel trace's processes
    and connections, the socket samples, and the reference stream of each write. names_from:
    "kernel" (the connects' SYNs and the accepts' connections name the sockets) or "samples"
    (each socket is sampled once, in one of its holders, at a random moment it is held)."""
    rng = np.random.default_rng(seed)
    calls, procs, conns, samples, expected = [], [], [], [], []
    holders: dict[int, list[tuple[int, int, int]]] = {}  # socket -> (pid, fd, t) while held
    tables: dict[int, dict[int, tuple[int, bool]]] = {0: {}}
    t = 1_000_000

    def rec(pid: int, call: str, fd: int, result: int, req: int = -1, dur: int = 100) -> None:
        calls.append((t, t + dur, pid, pid, call, fd, req, result))

    def pid_of(proc: int) -> int:
        return 1000 + proc

    rec(pid_of(0), "socket", LISTENER_FD, LISTENER_FD, 0)
    samples.append((t + 200, pid_of(0), LISTENER_FD, 1, "tcp", LISTEN, "0.0.0.0:0"))
    t += 1000
    for step in script.steps:
        pid, table = pid_of(step.proc), tables.setdefault(step.proc, {})
        t += 1000
        if step.op == "open":
            table[step.new_fd] = (-1, step.cloexec)
        elif step.op == "socket":
            rec(pid, "socket", step.new_fd, step.new_fd, int(step.cloexec))
            table[step.new_fd] = (step.sock, step.cloexec)
            t += 1000
            rec(pid, "connect", step.new_fd, 0, dur=500)
            conns.append((client_name(step.sock).split(">")[0], "10.0.0.2:7000", True, pid, t + 100, t + 300))
        elif step.op == "accept":
            conns.append((LISTEN, f"127.0.0.1:{20000 + step.sock}", False, -1, -1, t - 500))
            rec(pid, "accept4", LISTENER_FD, step.new_fd, int(step.cloexec))
            table[step.new_fd] = (step.sock, step.cloexec)
        elif step.op in ("dup", "dup2"):
            rec(pid, "fcntl" if step.op == "dup" else "dup2", step.fd, step.new_fd, 0)
            table[step.new_fd] = (table[step.fd][0], False)
        elif step.op == "close":
            rec(pid, "close", step.fd, 0)
            del table[step.fd]
        elif step.op == "fork":
            procs.append((t, "fork", pid, pid_of(step.child), False))
            tables[step.child] = dict(table)
        elif step.op == "exec":
            procs.append((t, "exec", pid, -1, False))
            for fd in [f for f, (_, ce) in table.items() if ce]:
                del table[fd]
        elif step.op == "exit":
            procs.append((t, "exit", pid, -1, True))
            del tables[step.proc]
        elif step.op == "write":
            rec(pid, "write", step.fd, step.size, step.size)
            sock = table[step.fd][0]
            expected.append("" if sock == -1 else client_name(sock) if _made_by(script, sock) == "socket"
                            else accepted_name(sock))
        for proc, tab in tables.items():
            for fd, (sock, _) in tab.items():
                if sock >= 0:
                    holders.setdefault(sock, []).append((pid_of(proc), fd, t + 600))  # after the step
    if names_from == "samples":
        for sock, held in holders.items():
            pid, fd, when = held[rng.integers(len(held))]
            name = client_name(sock) if _made_by(script, sock) == "socket" else accepted_name(sock)
            local, remote = name.split(">")
            samples.append((when, pid, fd, 100 + sock, "tcp", local, remote))
        conns = []
    cols = ["t_enter_ns", "t_exit_ns", "pid", "tid", "call", "fd", "req_bytes", "result"]
    c = pd.DataFrame(calls, columns=cols).assign(fd_kind="unknown", fd_desc="", unfinished=False)
    c["result"] = c["result"].astype("Int64")
    p = pd.DataFrame(procs, columns=["t_ns", "event", "pid", "child", "group_dead"])
    k = pd.DataFrame(conns, columns=["local", "remote", "active", "syn_tid", "t_syn_ns", "t_established_ns"])
    s = pd.DataFrame(samples, columns=["t_ns", "pid", "fd", "inode", "proto", "local", "remote"])
    return c, p, k, s, expected


def _made_by(script: Script, sock: int) -> str:
    return next(s.op for s in script.steps if s.sock == sock and s.op in ("socket", "accept"))


def joined_writes(calls: pd.DataFrame, procs: pd.DataFrame, conns: pd.DataFrame, samples: pd.DataFrame) -> list[str]:
    epochs = fd_lifetimes.fd_epochs(calls, samples, procs, conns)
    joined = join_calls(calls, {}, None, epochs)
    return list(joined.loc[joined["call"] == "write", "stream"])


def check_seeds(names_from: str, seeds: range) -> int:
    checked = 0
    for seed in seeds:
        script = make_script(seed)
        calls, procs, conns, samples, expected = tables_of(script, names_from, seed)
        got = joined_writes(calls, procs, conns, samples)
        assert got == expected, (seed, [(i, g, e) for i, (g, e) in enumerate(zip(got, expected)) if g != e][:3],
                                 script.steps)
        checked += len(expected)
    return checked


@pytest.mark.parametrize("names_from", ["kernel", "samples"])
def test_each_write_joins_the_socket_its_fd_held_then(names_from: str) -> None:
    assert check_seeds(names_from, range(30)) > 150


@pytest.mark.long
@pytest.mark.parametrize("names_from", ["kernel", "samples"])
def test_each_write_joins_its_socket_in_three_hundred_scripts(names_from: str) -> None:
    assert check_seeds(names_from, range(30, 330)) > 1500


def test_without_the_close_on_exec_flag_an_exec_keeps_the_socket() -> None:
    """A socket whose close-on-exec flag the tracer did not give (-1) outlives an exec, as the
    kernel keeps a descriptor without the flag; one made with the flag ends there."""
    for flag, expected in ((-1, "10.0.0.1:30000>10.0.0.2:7000"), (1, ""), (0, "10.0.0.1:30000>10.0.0.2:7000")):
        calls = pd.DataFrame([(10, 20, 7, 7, "socket", 3, flag, 3), (30, 40, 7, 7, "connect", 3, -1, 0),
                              (100, 110, 7, 7, "write", 3, 5, 5)],
                             columns=["t_enter_ns", "t_exit_ns", "pid", "tid", "call", "fd", "req_bytes", "result"])
        calls = calls.assign(fd_kind="unknown", fd_desc="", unfinished=False)
        procs = pd.DataFrame([(50, "exec", 7, -1, False)], columns=["t_ns", "event", "pid", "child", "group_dead"])
        conns = pd.DataFrame([("10.0.0.1:30000", "10.0.0.2:7000", True, 7, 35, 36)],
                             columns=["local", "remote", "active", "syn_tid", "t_syn_ns", "t_established_ns"])
        assert joined_writes(calls, procs, conns, None) == [expected], flag


def test_a_pid_used_again_is_another_process() -> None:
    """Process 7 exits; a new process 7 is forked later: the new one's fd 3 is not the old one's
    socket (its write, on a file opened without a traced call, joins no stream)."""
    calls = pd.DataFrame([(10, 20, 7, 7, "socket", 3, 0, 3), (30, 40, 7, 7, "connect", 3, -1, 0),
                          (50, 60, 7, 7, "write", 3, 5, 5), (500, 510, 7, 7, "write", 3, 6, 6)],
                         columns=["t_enter_ns", "t_exit_ns", "pid", "tid", "call", "fd", "req_bytes", "result"])
    calls = calls.assign(fd_kind="unknown", fd_desc="", unfinished=False)
    procs = pd.DataFrame([(100, "exit", 7, -1, True), (200, "fork", 1, 7, False)],
                         columns=["t_ns", "event", "pid", "child", "group_dead"])
    conns = pd.DataFrame([("10.0.0.1:30000", "10.0.0.2:7000", True, 7, 35, 36)],
                         columns=["local", "remote", "active", "syn_tid", "t_syn_ns", "t_established_ns"])
    assert joined_writes(calls, procs, conns, None) == ["10.0.0.1:30000>10.0.0.2:7000", ""]
    epochs = fd_lifetimes.fd_epochs(calls, None, procs, conns)
    assert set(epochs.loc[epochs["pid"] == 7, "pid_start_ns"]) == {-1, 200}


def test_samples_and_calls_that_disagree_are_counted() -> None:
    """Two samples give one epoch two inodes: the second is not believed, and counted."""
    calls = pd.DataFrame([(10, 20, 7, 7, "write", 3, 5, 5)],
                         columns=["t_enter_ns", "t_exit_ns", "pid", "tid", "call", "fd", "req_bytes", "result"])
    calls = calls.assign(fd_kind="unknown", fd_desc="", unfinished=False)
    samples = pd.DataFrame([(5, 7, 3, 11, "tcp", "1.1.1.1:1", "2.2.2.2:2"), (30, 7, 3, 12, "tcp", "1.1.1.1:3",
                                                                              "2.2.2.2:2")],
                           columns=["t_ns", "pid", "fd", "inode", "proto", "local", "remote"])
    epochs = fd_lifetimes.fd_epochs(calls, samples, None, None)
    assert epochs.attrs["conflicts"] == 2 and list(epochs["stream"]) == ["1.1.1.1:1>2.2.2.2:2"]


def test_a_sample_read_while_its_number_changed_hands_is_not_believed() -> None:
    """The sampler read fd 5 somewhere between 100 and 300; dup2 gave fd 5 a socket at 200: which
    one it saw is not known, so the file written on fd 5 at 150 is no stream's."""
    calls = pd.DataFrame([(150, 160, 7, 7, "write", 5, 4, 4), (190, 200, 7, 7, "dup2", 3, 0, 5)],
                         columns=["t_enter_ns", "t_exit_ns", "pid", "tid", "call", "fd", "req_bytes", "result"])
    calls = calls.assign(fd_kind="unknown", fd_desc="", unfinished=False)
    samples = pd.DataFrame([(100, 300, 7, 5, 11, "tcp", "1.1.1.1:1", "2.2.2.2:2")],
                           columns=["t_ns", "t_read_ns", "pid", "fd", "inode", "proto", "local", "remote"])
    assert joined_writes(calls, None, None, samples) == [""]
    assert fd_lifetimes.fd_epochs(calls, samples).attrs["ambiguous_samples"] == 1
    assert joined_writes(calls, None, None, samples.assign(t_read_ns=120)) == ["1.1.1.1:1>2.2.2.2:2"]
