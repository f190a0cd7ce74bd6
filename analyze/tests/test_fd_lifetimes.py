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
UNIX_FD = 60  # the unix socket pair the processes pass descriptors over (60 sends, 61 receives)
LISTEN = "127.0.0.1:9000"


def client_name(sock: int) -> str:
    return f"10.0.0.1:{30000 + sock}>10.0.0.2:7000"


def accepted_name(sock: int) -> str:
    return f"{LISTEN}>127.0.0.1:{20000 + sock}"


def tables_of(script: Script, names_from: str, seed: int, scm: bool = True) -> tuple[
        pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame, list[str]]:
    """The records of a tracer that does not describe fds (tracefs), the kernel trace's processes
    and connections, the socket samples, and the reference stream of each write. names_from:
    "kernel" (the connects' SYNs and the accepts' connections name the sockets) or "samples"
    (each socket is sampled once, in one of its holders, at a random moment it is held before it
    was first passed over the unix socket). scm: the
    descriptors received over the unix socket are records `scm_rights` with their description,
    as ptrace and preload write them; else (tracefs, which cannot read them) no record says so,
    and the socket samples see each received socket once in each process image that holds it
    without a traced call having copied it there (after the recvmsg, a fork, an exec)."""
    rng = np.random.default_rng(seed)
    calls, procs, conns, samples, expected = [], [], [], [], []
    holders: dict[int, list[tuple[int, int, int]]] = {}  # socket -> (pid, fd, t) while held
    tables: dict[int, dict[int, tuple[int, bool]]] = {0: {}}
    received: dict[int, set[int]] = {0: set()}  # per process: the fds holding a descriptor no record made
    first_sent: dict[int, int] = {}  # socket -> when it was first sent: its later holders may have received it
    t = 1_000_000

    def rec(pid: int, call: str, fd: int, result: int, req: int = -1, dur: int = 100, kind: str = "unknown",
            desc: str = "") -> None:
        calls.append((t, t + dur, pid, pid, call, fd, req, result, kind, desc))

    def pid_of(proc: int) -> int:
        return 1000 + proc

    def name_of(sock: int) -> str:
        return client_name(sock) if _made_by(script, sock) == "socket" else accepted_name(sock)

    def sample_received(proc: int) -> None:
        for fd in sorted(received.get(proc, ())):
            sock = tables[proc][fd][0]
            if sock >= 0:
                local, remote = name_of(sock).split(">")
                samples.append((t + 700, pid_of(proc), fd, 100 + sock, "tcp", local, remote))

    rec(pid_of(0), "socket", LISTENER_FD, LISTENER_FD, 0)
    samples.append((t + 200, pid_of(0), LISTENER_FD, 1, "tcp", LISTEN, "0.0.0.0:0"))
    t += 1000
    for step in script.steps:
        pid, table = pid_of(step.proc), tables.setdefault(step.proc, {})
        mine = received.setdefault(step.proc, set())
        t += 1000
        if step.new_fd >= 0:
            mine.discard(step.new_fd)
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
            mine.discard(step.fd)
        elif step.op in ("setfd", "fioclex"):
            rec(pid, "fcntl_setfd" if step.op == "setfd" else "ioctl", step.fd, 0, int(step.cloexec))
            table[step.fd] = (table[step.fd][0], step.cloexec)
        elif step.op == "send":
            rec(pid, "sendmsg", UNIX_FD, 1, 1)
            first_sent.setdefault(table[step.fd][0], t)
        elif step.op == "recv":
            rec(pid, "recvmsg", UNIX_FD + 1, 1, 1)
            table[step.new_fd] = (step.sock, step.cloexec)
            if scm:
                t += 200
                kind, desc = ("file", f"/tmp/f{step.new_fd}") if step.sock < 0 else ("tcp", name_of(step.sock))
                rec(pid, "scm_rights", step.new_fd, step.new_fd, int(step.cloexec), dur=0, kind=kind, desc=desc)
            else:
                mine.add(step.new_fd)
                sample_received(step.proc)
        elif step.op == "fork":
            procs.append((t, "fork", pid, pid_of(step.child), False))
            tables[step.child] = dict(table)
            received[step.child] = set(mine)
            sample_received(step.child)
        elif step.op == "exec":
            procs.append((t, "exec", pid, -1, False))
            for fd in [f for f, (_, ce) in table.items() if ce]:
                del table[fd]
                mine.discard(fd)
            sample_received(step.proc)
        elif step.op == "exit":
            procs.append((t, "exit", pid, -1, True))
            del tables[step.proc]
        elif step.op == "write":
            rec(pid, "write", step.fd, step.size, step.size)
            sock = table[step.fd][0]
            expected.append("" if sock == -1 else name_of(sock))
        for proc, tab in tables.items():
            for fd, (sock, _) in tab.items():
                if sock >= 0:
                    holders.setdefault(sock, []).append((pid_of(proc), fd, t + 600))  # after the step
    if names_from == "samples":
        for sock, held in holders.items():
            # before it was passed, its holders are the processes and numbers its making call and
            # the traced copies gave it; a received copy is sampled where it was received
            held = [h for h in held if h[2] < first_sent.get(sock, np.iinfo(np.int64).max)]
            pid, fd, when = held[rng.integers(len(held))]
            local, remote = name_of(sock).split(">")
            samples.append((when, pid, fd, 100 + sock, "tcp", local, remote))
        conns = []
    cols = ["t_enter_ns", "t_exit_ns", "pid", "tid", "call", "fd", "req_bytes", "result", "fd_kind", "fd_desc"]
    c = pd.DataFrame(calls, columns=cols).assign(unfinished=False)
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


def check_seeds(names_from: str, seeds: range, later: bool = False, scm: bool = True) -> int:
    checked = 0
    for seed in seeds:
        script = make_script(seed, later=later)
        calls, procs, conns, samples, expected = tables_of(script, names_from, seed, scm)
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


# The received descriptors: described records (ptrace, preload, with the kernel trace naming the
# sockets the script made), or no record (tracefs: the samples name them, the script's own sockets
# named by the kernel trace or by one sample each). A described record beside undescribed writes
# and one sample per socket is no backend's: ptrace and preload describe the writes too.
PASSING = [("kernel", True), ("kernel", False), ("samples", False)]
PASSING_IDS = ["kernel-scm-records", "kernel-samples-only", "samples-samples-only"]


@pytest.mark.parametrize(("names_from", "scm"), PASSING, ids=PASSING_IDS)
def test_close_on_exec_set_later_and_descriptors_passed(names_from: str, scm: bool) -> None:
    """The scripts with fcntl F_SETFD, ioctl FIOCLEX / FIONCLEX and descriptors passed over a unix
    socket: with the received descriptors' records (ptrace, preload) and without (tracefs: the
    samples name them)."""
    assert check_seeds(names_from, range(15), later=True, scm=scm) == 362  # 33 receptions among them


@pytest.mark.long
@pytest.mark.parametrize(("names_from", "scm"), PASSING, ids=PASSING_IDS)
def test_close_on_exec_later_and_passing_in_three_hundred_scripts(names_from: str, scm: bool) -> None:
    assert check_seeds(names_from, range(20, 320), later=True, scm=scm) == 7500


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


def _frame(rows: list[tuple], kinds: list[tuple[str, str]] | None = None) -> pd.DataFrame:
    calls = pd.DataFrame(rows, columns=["t_enter_ns", "t_exit_ns", "pid", "tid", "call", "fd", "req_bytes", "result"])
    kind, desc = zip(*kinds) if kinds else (["unknown"] * len(rows), [""] * len(rows))
    return calls.assign(fd_kind=list(kind), fd_desc=list(desc), unfinished=False)


def test_a_received_descriptor_is_not_joined_to_the_socket_its_number_held_before() -> None:
    """Process 7's fd 4 held socket A (accepted, named), then an exec closed it (close-on-exec set
    later by fcntl F_SETFD); fd 4 is received over a unix socket afterwards. With the received
    descriptor's record its writes join the received socket B; without it (tracefs) the sample
    taken while it was held names B; with neither, they join no stream, and are counted."""
    a, b = "10.0.0.1:5000>10.0.0.2:40000", "10.0.0.1:5000>10.0.0.2:40001"
    base = [(10, 20, 7, 7, "accept4", 3, 0, 4), (30, 40, 7, 7, "write", 4, 5, 5),
            (50, 60, 7, 7, "fcntl_setfd", 4, 1, 0)]
    later = [(300, 310, 7, 7, "recvmsg", 9, 1, 1), (400, 410, 7, 7, "write", 4, 6, 6)]
    described = [("unknown", "")] * 3 + [("unix", "socket:[1]")]
    procs = pd.DataFrame([(100, "exec", 7, -1, False)], columns=["t_ns", "event", "pid", "child", "group_dead"])
    first = pd.DataFrame([(35, 7, 4, 11, "tcp", *a.split(">"))],
                         columns=["t_ns", "pid", "fd", "inode", "proto", "local", "remote"])
    with_record = _frame([*base, *later[:1], (305, 305, 7, 7, "scm_rights", 4, 0, 4), *later[1:]],
                         [*described, ("tcp", b), ("unknown", "")])
    assert joined_writes(with_record, procs, None, first) == [a, b]
    second = pd.concat([first, pd.DataFrame([(350, 7, 4, 12, "tcp", *b.split(">"))], columns=first.columns)])
    tracefs = _frame([*base, *later], [*described, ("unknown", "")])
    assert joined_writes(tracefs, procs, None, second) == [a, b]
    assert fd_lifetimes.fd_epochs(tracefs, second, procs).attrs["conflicts"] == 0
    # without the exec (a lost event: the number cannot be received while it holds A), it held A
    # throughout as far as anything says: the second sample's inode and name are not believed, and
    # counted (two conflicts)
    assert fd_lifetimes.fd_epochs(tracefs, second, procs.iloc[:0]).attrs["conflicts"] == 2
    assert joined_writes(tracefs, procs, None, first) == [a, ""]  # nothing named it: no stream, not A's


def test_sends_on_descriptors_nothing_named_are_said_in_one_line() -> None:
    """The gaps' sentence for sends no stream took because no traced call made their descriptor
    and nothing named it (hostwire.timeline.recording_notes)."""
    from hostwire.timeline.recording_notes import unmade_counts, unmade_sends_note

    calls = _frame([(10, 20, 7, 7, "write", 4, 700, 700), (30, 40, 7, 7, "write", 4, 300, 300),
                    (50, 60, 7, 7, "write", 5, 9, 9)])
    samples = pd.DataFrame([(55, 7, 5, 12, "tcp", "10.0.0.1:1", "10.0.0.2:2")],
                           columns=["t_ns", "pid", "fd", "inode", "proto", "local", "remote"])
    epochs = fd_lifetimes.fd_epochs(calls, samples)
    joined = join_calls(calls, {}, None, epochs).assign(is_send=True, bytes=lambda d: d["result"].astype(int))
    assert unmade_counts(epochs) == (2, 1)
    (line,) = unmade_sends_note(joined, epochs)
    assert line.startswith("2 send calls (1000 bytes) on 1 descriptors no traced call made"), line
    assert "the samples named 1 of the 2" in line
    assert unmade_sends_note(joined[joined["fd"] == 5], epochs) == []


def test_a_descriptor_no_traced_call_made_does_not_outlive_an_exec() -> None:
    """fd 4 was opened (open is not traced: its O_CLOEXEC is not known) and written to; the process
    exec'd; fd 4 was then received over a unix socket (tracefs: no record) and written to, and a
    sample saw it holding socket B. The file write before the exec is no stream's, the write after
    it is B's: the sample does not reach back across the exec."""
    b = "10.0.0.1:5000>10.0.0.2:40001"
    calls = _frame([(30, 40, 7, 7, "write", 4, 5, 5), (300, 310, 7, 7, "recvmsg", 9, 1, 1),
                    (400, 410, 7, 7, "write", 4, 6, 6)])
    procs = pd.DataFrame([(100, "exec", 7, -1, False)], columns=["t_ns", "event", "pid", "child", "group_dead"])
    sample = pd.DataFrame([(350, 7, 4, 12, "tcp", *b.split(">"))],
                          columns=["t_ns", "pid", "fd", "inode", "proto", "local", "remote"])
    assert joined_writes(calls, procs, None, sample) == ["", b]
    assert joined_writes(calls, procs.iloc[:0], None, sample) == [b, b]  # no exec: one epoch, as far as anything says
    epochs = fd_lifetimes.fd_epochs(calls, sample, procs)
    fd4 = epochs[epochs["fd"] == 4]
    assert list(fd4[["t_start_ns", "t_end_ns", "made_by"]].itertuples(index=False, name=None)) == [
        (fd_lifetimes.NEVER, 100, ""), (100, fd_lifetimes.FOREVER, "")]
