"""Sockets by their lifetimes (docs/timeline.md, "Descriptors by their lifetimes"): each binding of
a process's descriptor number to an open file is an epoch [t_start_ns, t_end_ns) of (pid, fd),
made, copied and ended by the calls that do so (socket, accept, accept4, dup, dup2, dup3, fcntl
F_DUPFD, a descriptor received over a unix socket, close, close_range), marked close-on-exec later
(fcntl F_SETFD, ioctl FIOCLEX / FIONCLEX) and by the processes' forks, execs and exits (the kernel
trace), and
named by what saw it: the socket samples (raw/sockets.tsv: the inode an fd held), the tracer's
description of the fd (ptrace, preload), the kernel's connection events (the connect that sent the
SYN, the accepts in the order their connections were established). Epochs that share an open file
(a dup, a fork) form one socket; a call is joined to the epoch its (pid, fd) was in when it
entered, never to an earlier or a later one. Threads share their process's table: pid is the
thread group throughout."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from hostwire.timeline.socket_states import connections, listens  # noqa: F401  (build.py takes them from here)
from hostwire.timeline.tables import as_int, is_event

# the calls that make, copy or end a descriptor (docs/formats.md, "System calls")
MAKERS = ("socket", "accept", "accept4", "scm_rights")  # scm_rights: a descriptor recvmsg/recvmmsg received
COPIERS = ("dup", "dup2", "dup3", "fcntl")
ENDERS = ("close", "close_range")
MARKERS = ("fcntl_setfd", "ioctl")  # close-on-exec set (req_bytes 1) or cleared (0) on a descriptor made before
LIFETIME_CALLS = (*MAKERS, *COPIERS, *ENDERS, *MARKERS, "connect")
EPOCH_COLUMNS = ["pid", "fd", "t_start_ns", "t_end_ns", "socket", "stream", "kind", "made_by", "pid_start_ns"]
FOREVER = np.iinfo(np.int64).max
NEVER = np.iinfo(np.int64).min
NOT_INET = ("file", "pipe", "unix", "other")
# an epoch's close-on-exec flag: 1, 0, -1 (a traced call that did not give it: kept at exec, as the
# kernel keeps a descriptor without it) or UNTRACED (made by no traced call, or a fork's copy of
# one: whether it lived through an exec is not known, so it is not taken to)
UNTRACED = -2


class _Sockets:
    """Union-find over epochs: each root holds what is known of the open file they share."""

    def __init__(self) -> None:
        self.parent: list[int] = []
        self.inode: list[int] = []
        self.name: list[str] = []
        self.kind: list[str] = []
        self.local: list[str] = []  # a listener's or an unconnected socket's own endpoint
        self.conflicts = 0
        self.ambiguous = 0  # samples read while their descriptor number changed hands

    def new(self, kind: str = "") -> int:
        self.parent.append(len(self.parent))
        self.inode.append(-1)
        self.name.append("")
        self.kind.append(kind)
        self.local.append("")
        return len(self.parent) - 1

    def root(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def join(self, a: int, b: int) -> None:
        """The same open file, unless what is known of the two disagrees (counted)."""
        a, b = self.root(a), self.root(b)
        if a == b:
            return
        if ((self.inode[a] >= 0 and self.inode[b] >= 0 and self.inode[a] != self.inode[b])
                or (self.name[a] and self.name[b] and self.name[a] != self.name[b])):
            self.conflicts += 1
            return
        self.parent[b] = a
        self.inode[a] = self.inode[a] if self.inode[a] >= 0 else self.inode[b]
        self.name[a] = self.name[a] or self.name[b]
        self.kind[a] = self.kind[a] or self.kind[b]
        self.local[a] = self.local[a] or self.local[b]

    def learn(self, i: int, *, inode: int = -1, name: str = "", kind: str = "", local: str = "") -> None:
        r = self.root(i)
        self.local[r] = local or self.local[r]
        if inode >= 0:
            if self.inode[r] >= 0 and self.inode[r] != inode:
                self.conflicts += 1
            else:
                self.inode[r] = inode
        if name:
            if self.name[r] and self.name[r] != name:
                self.conflicts += 1
            else:
                self.name[r] = name
        if kind and (not self.kind[r] or self.kind[r] == "socket"):
            self.kind[r] = kind


class _Tables:
    """The descriptor tables of the processes while the lifetime events are replayed in order."""

    def __init__(self, sockets: _Sockets) -> None:
        self.sockets = sockets
        self.rows: list[list] = []  # pid, fd, t_start, t_end, socket, made_by, cloexec, pid_start
        self.open: dict[int, dict[int, int]] = {}  # pid -> fd -> row
        self.started: dict[int, int] = {}  # pid -> the stamp of the fork that made it
        self.ended: dict[tuple[int, int], int] = {}  # (pid, fd) -> when its last epoch ended
        self.execs: dict[int, list[int]] = {}  # pid -> its execs' stamps

    def _start(self, pid: int, fd: int, t: int, socket: int, made_by: str, cloexec: int) -> int:
        self.end(pid, fd, t)
        self.rows.append([pid, fd, t, FOREVER, socket, made_by, cloexec, self.started.get(pid, -1)])
        self.open.setdefault(pid, {})[fd] = len(self.rows) - 1
        return len(self.rows) - 1

    def end(self, pid: int, fd: int, t: int) -> None:
        row = self.open.get(pid, {}).pop(fd, None)
        if row is not None:
            self.rows[row][3] = t
            self.ended[(pid, fd)] = t

    def current(self, pid: int, fd: int, t: int) -> int:
        """The row (pid, fd) holds now; one begun at the process's start (or ever before) when
        none is known: a descriptor made by a call not traced."""
        row = self.open.get(pid, {}).get(fd)
        if row is None:
            start = max(self.started.get(pid, NEVER), self._last_end(pid, fd), self.last_exec(pid, t))
            row = self._start(pid, fd, t, self.sockets.new(), "", UNTRACED)
            self.rows[row][2] = start
        return row

    def _last_end(self, pid: int, fd: int) -> int:
        return self.ended.get((pid, fd), NEVER)

    def last_exec(self, pid: int, t: int) -> int:
        """The process's last exec at or before t: a descriptor no traced call made is not known to
        have lived through it (opened with O_CLOEXEC, or made in the image before: not known)."""
        before = [e for e in self.execs.get(pid, ()) if e <= t]
        return before[-1] if before else NEVER

    def make(self, pid: int, fd: int, t: int, kind: str, made_by: str, cloexec: int) -> int:
        return self._start(pid, fd, t, self.sockets.new(kind), made_by, cloexec)

    def copy(self, pid: int, old: int, new: int, t: int, made_by: str, cloexec: int) -> None:
        socket = self.rows[self.current(pid, old, t)][4]
        self._start(pid, new, t, socket, made_by, cloexec)

    def fork(self, parent: int, child: int, t: int) -> None:
        self.exit(child, t)  # a pid used again: the old process's epochs are over
        self.started[child] = t
        for fd, row in list(self.open.get(parent, {}).items()):
            self._start(child, fd, t, self.rows[row][4], "fork", self.rows[row][6])

    def mark(self, pid: int, fd: int, t: int, cloexec: int) -> None:
        """Close-on-exec set or cleared on the descriptor (pid, fd) holds: a flag of the number, not of
        the open file (a dup or a fork's copy keeps its own)."""
        self.rows[self.current(pid, fd, t)][6] = cloexec

    def exec(self, pid: int, t: int) -> None:
        self.execs.setdefault(pid, []).append(t)
        for fd, row in list(self.open.get(pid, {}).items()):
            if self.rows[row][6] in (1, UNTRACED):
                self.end(pid, fd, t)

    def exit(self, pid: int, t: int) -> None:
        for fd in list(self.open.get(pid, {})):
            self.end(pid, fd, t)
        self.open.pop(pid, None)

    def close_range(self, pid: int, first: int, last: int, t: int) -> None:
        for fd in [f for f in self.open.get(pid, {}) if first <= f <= last]:
            self.end(pid, fd, t)


def process_events(sched: pd.DataFrame | None) -> pd.DataFrame:
    """The kernel trace's forks, execs and exits: t_ns, event (fork, exec, exit), pid (the forking
    task, the exec'ing or exiting one), child (the forked task), group_dead (an exit that ends its
    thread group; true where the trace does not say)."""
    cols = {"t_ns": np.int64, "event": object, "pid": np.int64, "child": np.int64, "group_dead": bool}
    if sched is None or "event" not in sched.columns or len(sched) == 0:
        return pd.DataFrame({c: pd.Series(dtype=d) for c, d in cols.items()})
    parts = []
    fork = sched[is_event(sched, "sched_process_fork")]
    if len(fork):
        parent = as_int(fork["parent_pid"]) if "parent_pid" in fork.columns else as_int(fork["pid"])
        parts.append(pd.DataFrame({"t_ns": fork["t_ns"].to_numpy(), "event": "fork", "pid": parent,
                                   "child": as_int(fork["child_pid"]), "group_dead": False}))
    for name, event in (("sched_process_exec", "exec"), ("sched_process_exit", "exit")):
        ev = sched[is_event(sched, name)]
        if len(ev):
            dead = (as_int(ev["group_dead"], 1) != 0) if "group_dead" in ev.columns else np.ones(len(ev), bool)
            parts.append(pd.DataFrame({"t_ns": ev["t_ns"].to_numpy(), "event": event, "pid": as_int(ev["pid"]),
                                       "child": -1, "group_dead": dead}))
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype=d) for c, d in cols.items()})
    return pd.concat(parts, ignore_index=True).sort_values("t_ns", kind="stable").reset_index(drop=True).astype(cols)


def _ops(calls: pd.DataFrame, processes: pd.DataFrame, threads: set[int]) -> Iterable[tuple]:
    """The lifetime events in time order: (t, order at one stamp, what, pid, fd, arg, kind, cloexec);
    arg: close_range's last fd, a copy's new fd, an accept's listener, a fork's child."""
    ops: list[tuple] = []
    c = calls[calls["call"].isin(LIFETIME_CALLS).to_numpy() & ~calls["unfinished"].to_numpy()]
    result = pd.to_numeric(c["result"], errors="coerce").fillna(-1).astype(np.int64).to_numpy()
    req = c["req_bytes"].to_numpy().astype(np.int64)
    kinds = c["fd_kind"].astype(str).to_numpy()
    for i, (call, pid, fd, t_in, t_out) in enumerate(zip(c["call"].to_numpy(), c["pid"].to_numpy(), c["fd"].to_numpy(),
                                                          c["t_enter_ns"].to_numpy(), c["t_exit_ns"].to_numpy())):
        pid, fd, res = int(pid), int(fd), int(result[i])
        if call == "close":
            ops.append((int(t_in), 1, "close", pid, fd, -1, "", -1))
        elif call == "close_range":
            ops.append((int(t_in), 1, "close_range", pid, fd, int(req[i]), "", -1))
        elif call in COPIERS and res >= 0:
            ops.append((int(t_out), 1, "copy:" + call, pid, fd, res, "", int(req[i])))
        elif call == "socket" and res >= 0:
            kind = kinds[i] if kinds[i] != "unknown" else "socket"
            ops.append((int(t_out), 1, "make:socket", pid, res, -1, kind, int(req[i])))
        elif call in ("accept", "accept4") and res >= 0:
            ops.append((int(t_out), 1, "make:" + call, pid, res, fd, "socket", int(req[i])))
        elif call == "scm_rights" and res >= 0:  # written after recvmsg returned: its description names it
            ops.append((int(t_in), 1, "make:scm_rights", pid, res, -1, kinds[i] if kinds[i] != "unknown" else "",
                        int(req[i])))
        elif call in MARKERS and res >= 0:
            ops.append((int(t_out), 1, "mark", pid, fd, -1, "", int(req[i])))
    for t, event, pid, child, dead in processes[["t_ns", "event", "pid", "child", "group_dead"]].itertuples(
            index=False, name=None):
        if event == "fork" and int(child) not in threads:
            ops.append((int(t), 0, "fork", int(pid), -1, int(child), "", -1))
        elif event == "exec":
            ops.append((int(t), 0, "exec", int(pid), -1, -1, "", -1))
        elif event == "exit" and dead:
            ops.append((int(t), 2, "exit", int(pid), -1, -1, "", -1))
    ops.sort(key=lambda o: (o[0], o[1]))
    return ops


def fd_epochs(calls: pd.DataFrame, samples: pd.DataFrame | None = None, processes: pd.DataFrame | None = None,
              connections: pd.DataFrame | None = None, listens: pd.DataFrame | None = None) -> pd.DataFrame:
    """Every epoch of every (pid, fd) the lifetime events or the calls touch: EPOCH_COLUMNS. calls:
    the system calls (hostwire.read.syscalls columns); samples: raw/sockets.tsv's rows; processes:
    process_events(); connections, listens: connections() and listens() of the kernel trace.
    socket: the open file's number (epochs sharing one share it); stream: its local>remote when
    known ("" else); kind: tcp, udp, socket (a socket of unknown
    kind), file, pipe, unix, other or "" (unknown); made_by: the call that began the epoch, fork,
    or "" (made before the recording or by a call not traced: it begins when the (pid, fd) was
    last freed or its process began). attrs["conflicts"]: evidence that disagreed;
    attrs["ambiguous_samples"]: samples whose descriptor changed hands while it was read (between
    their t_ns and t_read_ns), not believed."""
    processes = processes if processes is not None else process_events(None)
    tids = calls[["pid", "tid"]].drop_duplicates()
    threads = set(tids.loc[tids["pid"] != tids["tid"], "tid"].astype(int))
    sockets = _Sockets()
    tables = _Tables(sockets)
    accepted: list[tuple[int, int, int]] = []  # (epoch row, listener's epoch row, t)
    for t, _, what, pid, fd, arg, kind, cloexec in _ops(calls, processes, threads):
        if what == "close":
            tables.current(pid, fd, t)
            tables.end(pid, fd, t)
        elif what == "close_range":
            tables.close_range(pid, fd, arg if arg >= 0 else FOREVER, t)
        elif what.startswith("copy:"):
            tables.copy(pid, fd, arg, t, what[5:], cloexec)
        elif what == "mark":
            tables.mark(pid, fd, t, cloexec)
        elif what.startswith("make:"):
            listener = tables.current(pid, arg, t) if arg >= 0 else -1
            row = tables.make(pid, fd, t, kind, what[5:], cloexec)
            if listener >= 0:
                accepted.append((row, listener, t))
        elif what == "fork":
            tables.fork(pid, arg, t)
        elif what == "exec":
            tables.exec(pid, t)
        elif what == "exit":
            tables.exit(pid, t)
    _cover_the_rest(tables, calls, samples)
    rows = pd.DataFrame(tables.rows, columns=["pid", "fd", "t_start_ns", "t_end_ns", "socket", "made_by", "cloexec",
                                              "pid_start_ns"])
    if listens is not None and len(listens):
        _learn_listeners(sockets, rows, calls, listens)
    _learn(sockets, rows, calls, samples, connections, accepted)
    roots = np.array([sockets.root(s) for s in rows["socket"]], dtype=np.int64)
    out = rows.assign(socket=roots, stream=[sockets.name[r] for r in roots], kind=[sockets.kind[r] for r in roots])
    out = out.sort_values(["pid", "fd", "t_start_ns"], kind="stable").reset_index(drop=True)[EPOCH_COLUMNS]
    out.attrs["conflicts"] = sockets.conflicts
    out.attrs["ambiguous_samples"] = sockets.ambiguous
    return out


def _cover_the_rest(tables: _Tables, calls: pd.DataFrame, samples: pd.DataFrame | None) -> None:
    """An epoch for each stretch of a (pid, fd) that a call or a sample falls in and no lifetime
    event covers: the descriptor was made by a call not traced, or before the recording."""
    points = [calls[["pid", "fd", "t_enter_ns"]].set_axis(["pid", "fd", "t"], axis=1)]
    if samples is not None and len(samples):
        points.append(samples[["pid", "fd", "t_ns"]].set_axis(["pid", "fd", "t"], axis=1))
    pts = pd.concat(points, ignore_index=True).astype(np.int64)
    pts = pts[pts["fd"].to_numpy() >= 0]
    if len(pts) == 0:
        return
    known = pd.DataFrame([r[:4] for r in tables.rows], columns=["pid", "fd", "t_start", "t_end"]).astype(np.int64)
    loose = pts[epoch_index(pts["pid"].to_numpy(), pts["fd"].to_numpy(), pts["t"].to_numpy(), known) < 0]
    if len(loose) == 0:
        return
    started = pd.Series(tables.started, dtype=np.int64)
    floor = started.reindex(loose["pid"].to_numpy()).fillna(NEVER).to_numpy().astype(np.int64)
    # each exec of the process bounds a stretch too: a descriptor no traced call made may have been
    # close-on-exec (open with O_CLOEXEC, pipe2, socketpair are not traced), its number free after it
    keys = loose[["pid", "fd"]].drop_duplicates()
    execs = pd.DataFrame([(p, e) for p, ts in tables.execs.items() for e in ts], columns=["pid", "b"], dtype=np.int64)
    bounds = pd.concat([known[["pid", "fd", "t_start"]].set_axis(["pid", "fd", "b"], axis=1),
                        known[["pid", "fd", "t_end"]].set_axis(["pid", "fd", "b"], axis=1),
                        keys.merge(execs, on="pid")[["pid", "fd", "b"]]], ignore_index=True).astype(np.int64)
    bounds = bounds.sort_values("b", kind="stable").assign(value=lambda d: d["b"].astype("Int64"))
    probe = loose.assign(floor=floor).sort_values("t", kind="stable")
    lo = pd.merge_asof(probe, bounds, left_on="t", right_on="b", by=["pid", "fd"], direction="backward")
    hi = pd.merge_asof(probe, bounds, left_on="t", right_on="b", by=["pid", "fd"], direction="forward",
                       allow_exact_matches=False)
    gaps = pd.DataFrame({"pid": probe["pid"].to_numpy(), "fd": probe["fd"].to_numpy(),
                         "lo": np.maximum(lo["value"].fillna(NEVER).to_numpy(np.int64), probe["floor"].to_numpy()),
                         "hi": hi["value"].fillna(FOREVER).to_numpy(np.int64)}).drop_duplicates()
    for pid, fd, a, b in gaps.itertuples(index=False, name=None):
        start = tables.started.get(int(pid), -1)
        tables.rows.append([int(pid), int(fd), int(a), int(b), tables.sockets.new(), "", UNTRACED, start])


def epoch_index(pid: np.ndarray, fd: np.ndarray, t: np.ndarray, epochs: pd.DataFrame) -> np.ndarray:
    """Per point (pid, fd, t), the row of `epochs` (its first four columns: pid, fd, start, end;
    one key's epochs disjoint) whose [start, end) holds it, -1 where none does."""
    out = np.full(len(t), -1, dtype=np.int64)
    if len(t) == 0 or len(epochs) == 0:
        return out
    e = pd.DataFrame({"pid": epochs.iloc[:, 0].to_numpy().astype(np.int64),
                      "fd": epochs.iloc[:, 1].to_numpy().astype(np.int64),
                      "start": epochs.iloc[:, 2].to_numpy().astype(np.int64),
                      "end": pd.array(epochs.iloc[:, 3].to_numpy().astype(np.int64), dtype="Int64"),
                      "row": pd.array(np.arange(len(epochs)), dtype="Int64")})
    probe = pd.DataFrame({"pid": np.asarray(pid, np.int64), "fd": np.asarray(fd, np.int64),
                          "t": np.asarray(t, np.int64), "point": np.arange(len(t))}).sort_values("t", kind="stable")
    hit = pd.merge_asof(probe, e.sort_values("start", kind="stable"), left_on="t", right_on="start",
                        by=["pid", "fd"], direction="backward")
    ok = hit["row"].notna().to_numpy() & (hit["t"].to_numpy() < hit["end"].fillna(NEVER).to_numpy(np.int64))
    out[hit["point"].to_numpy()[ok]] = hit["row"].fillna(-1).to_numpy(np.int64)[ok]
    return out


def _learn_listeners(sockets: _Sockets, rows: pd.DataFrame, calls: pd.DataFrame, listens: pd.DataFrame) -> None:
    """A listen() gives its endpoint to the socket its process made last before it and still held:
    programs make, bind and listen on a socket in that order."""
    pid_of = dict(zip(calls["tid"].to_numpy().tolist(), calls["pid"].to_numpy().tolist()))
    made = rows[rows["made_by"].to_numpy() == "socket"]
    for t, tid, local in listens.itertuples(index=False, name=None):
        pid = pid_of.get(int(tid), int(tid))
        mine = made[(made["pid"].to_numpy() == pid) & (made["t_start_ns"].to_numpy() <= t)
                    & (made["t_end_ns"].to_numpy() > t)]
        if len(mine):
            sockets.learn(int(mine["socket"].to_numpy()[np.argmax(mine["t_start_ns"].to_numpy())]), kind="tcp",
                          local=str(local))


def _learn(sockets: _Sockets, rows: pd.DataFrame, calls: pd.DataFrame, samples: pd.DataFrame | None,
           connections: pd.DataFrame | None, accepted: list[tuple[int, int, int]]) -> None:
    """What the samples, the tracer's descriptions and the kernel's connection events tell of each
    epoch's open file."""
    epochs = rows[["pid", "fd", "t_start_ns", "t_end_ns"]]
    if samples is not None and len(samples):
        at = epoch_index(samples["pid"].to_numpy(), samples["fd"].to_numpy(), samples["t_ns"].to_numpy(), epochs)
        if "t_read_ns" in samples.columns:  # read while the number changed hands: which one it saw is not known
            done = epoch_index(samples["pid"].to_numpy(), samples["fd"].to_numpy(), samples["t_read_ns"].to_numpy(),
                               epochs)
            sockets.ambiguous += int(((at >= 0) & (done != at)).sum())
            at = np.where(done == at, at, -1)
        by_inode: dict[int, int] = {}
        for e, inode, proto, local, remote in zip(at, samples["inode"].to_numpy(), samples["proto"].to_numpy(),
                                                  samples["local"].to_numpy(), samples["remote"].to_numpy()):
            if e < 0:
                continue
            socket = int(rows.at[int(e), "socket"])
            connected = not str(remote).endswith(":0")
            sockets.learn(socket, inode=int(inode), kind=str(proto), local=str(local),
                          name=f"{local}>{remote}" if connected else "")
            if int(inode) in by_inode:  # one socket held under several (pid, fd): a dup, a fork
                sockets.join(by_inode[int(inode)], socket)
            by_inode.setdefault(int(inode), socket)
    described = calls[~calls["fd_kind"].astype(str).isin(["unknown"]).to_numpy() & (calls["fd"].to_numpy() >= 0)]
    if len(described):
        at = epoch_index(described["pid"].to_numpy(), described["fd"].to_numpy(), described["t_enter_ns"].to_numpy(),
                         epochs)
        seen = pd.DataFrame({"e": at, "kind": described["fd_kind"].astype(str).to_numpy(),
                             "desc": described["fd_desc"].astype(str).to_numpy()})
        for e, kind, desc in seen[seen["e"] >= 0].drop_duplicates().itertuples(index=False, name=None):
            local, _, remote = desc.partition(">")
            named = kind in ("tcp", "udp") and remote not in ("", "*")
            sockets.learn(int(rows.at[int(e), "socket"]), kind=kind, name=desc if named else "",
                          local=local if kind in ("tcp", "udp") else "")
    if connections is not None and len(connections):
        _learn_connects(sockets, rows, calls, connections)
        _learn_accepts(sockets, rows, connections, accepted)


def _learn_connects(sockets: _Sockets, rows: pd.DataFrame, calls: pd.DataFrame, connections: pd.DataFrame) -> None:
    """A connect() names its socket by the connection whose SYN its thread sent while in it."""
    conn = calls[(calls["call"] == "connect").to_numpy() & ~calls["unfinished"].to_numpy()]
    syn = connections[connections["syn_tid"].to_numpy() > 0]
    if len(conn) == 0 or len(syn) == 0:
        return
    probe = pd.DataFrame({"tid": conn["tid"].to_numpy().astype(np.int64), "t": conn["t_enter_ns"].to_numpy(),
                          "t_exit": conn["t_exit_ns"].to_numpy(), "pid": conn["pid"].to_numpy(),
                          "fd": conn["fd"].to_numpy()}).sort_values("t", kind="stable")
    hit = pd.merge_asof(probe, syn.rename(columns={"syn_tid": "tid"}).sort_values("t_syn_ns", kind="stable"),
                        left_on="t", right_on="t_syn_ns", by="tid", direction="forward")
    hit = hit[hit["t_syn_ns"].notna().to_numpy() & (hit["t_syn_ns"].to_numpy() <= hit["t_exit"].to_numpy())]
    at = epoch_index(hit["pid"].to_numpy(), hit["fd"].to_numpy(), hit["t"].to_numpy(),
                     rows[["pid", "fd", "t_start_ns", "t_end_ns"]])
    for e, local, remote in zip(at, hit["local"].to_numpy(), hit["remote"].to_numpy()):
        if e >= 0:
            sockets.learn(int(rows.at[int(e), "socket"]), kind="tcp", name=f"{local}>{remote}", local=str(local))


def _learn_accepts(sockets: _Sockets, rows: pd.DataFrame, connections: pd.DataFrame,
                   accepted: list[tuple[int, int, int]]) -> None:
    """A listener's accepts take its connections in the order they were established (the accept
    queue is first in, first out): the k-th accept of a listener after the first names its socket
    by the k-th connection established on the listener's endpoint since it was made that no
    accept took yet."""
    passive = connections[~connections["active"].astype(bool).to_numpy()
                          & (connections["t_established_ns"].to_numpy() >= 0)].sort_values("t_established_ns")
    if len(passive) == 0 or not accepted:
        return
    by_listener: dict[int, list[tuple[int, int]]] = {}
    since: dict[int, int] = {}
    for row, listener, t in accepted:
        root = sockets.root(int(rows.at[listener, "socket"]))
        by_listener.setdefault(root, []).append((t, row))
        since[root] = min(since.get(root, FOREVER), int(rows.at[listener, "t_start_ns"]))
    port = passive["local"].astype(str).str.rpartition(":")[2].to_numpy()
    for root, takes in by_listener.items():
        local = sockets.local[root]
        if not local:
            continue
        host, _, lport = local.rpartition(":")
        wildcard = host in ("0.0.0.0", "[::]")
        mine = passive[(port == lport) & (wildcard | (passive["local"].to_numpy() == local))]
        mine = mine[mine["t_established_ns"].to_numpy() >= since[root]]
        queue = list(zip(mine["t_established_ns"].to_numpy(), mine["local"].to_numpy(), mine["remote"].to_numpy()))
        takes.sort()
        k = 0
        for t, row in takes:
            if k < len(queue) and queue[k][0] <= t:
                sockets.learn(int(rows.at[row, "socket"]), kind="tcp", name=f"{queue[k][1]}>{queue[k][2]}",
                              local=str(queue[k][1]))
                k += 1


def call_streams(calls: pd.DataFrame, epochs: pd.DataFrame | None) -> tuple[np.ndarray, np.ndarray]:
    """Per call: the stream it is joined to by what is known at the call itself or of the socket
    its (pid, fd) held when it entered ("" none), and whether it is known to be on no inet socket
    (a file, a pipe, a unix socket). The call's own description comes first (the tracer saw the
    fd at that moment), then the epoch's socket."""
    desc = calls["fd_desc"].astype(str)
    own = desc.str.contains(">", regex=False).to_numpy() & ~desc.str.endswith("*").to_numpy()
    stream = np.where(own, desc.to_numpy(), "").astype(object)
    kinds = calls["fd_kind"].astype(str) if "fd_kind" in calls.columns else pd.Series("", index=calls.index)
    not_inet = kinds.isin(NOT_INET).to_numpy()
    if epochs is None or len(epochs) == 0 or len(calls) == 0:
        return stream, not_inet
    at = epoch_index(calls["pid"].to_numpy(), calls["fd"].to_numpy(), calls["t_enter_ns"].to_numpy(), epochs)
    hit = at >= 0
    named = np.full(len(calls), "", dtype=object)
    named[hit] = epochs["stream"].to_numpy()[at[hit]]
    epoch_not_inet = np.zeros(len(calls), dtype=bool)
    epoch_not_inet[hit] = np.isin(epochs["kind"].to_numpy()[at[hit]], NOT_INET)
    stream = np.where(own, stream, named).astype(object)
    return stream, not_inet | (epoch_not_inet & ~own)
