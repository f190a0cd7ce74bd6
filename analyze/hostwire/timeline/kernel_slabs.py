"""A run's kernel trace read in slabs of time, so that the gap analysis of a long run
(hostwire.timeline.gaps.explain with `slabs`) holds one slab of it at a time, not the whole trace
(an hour at 20 senders and 20 sieves writes gigabytes of raw/sched.tsv).

A slab is the trace's events from one stamp up to the next slab's first stamp: the file is read in
pieces of about `slab_bytes` of text, and a piece's last rows that share the next piece's first
stamp go with the next slab. Each slab's task states and CPU intervals are those of
hostwire.timeline.tables for the whole trace, cut to the slab: the tables are built from the slab's
events plus a few events carried from before it and one placed after it, which set every task and
CPU in the state the whole trace has them in at the slab's bounds:

- per CPU, its last switch before the slab (which task runs there);
- per task, its last switch before the slab (running, runnable or asleep, and where), and the last
  wake-up and the last migration after that switch (a wake-up makes a task runnable where it was
  sent; a migration moves it);
- per task woken after its last switch inside the slab, its next switch after the slab, taken from
  the first pass: tables.task_states counts a wake-up only when the task's next switch puts it on a
  CPU.

Two passes read the trace. The first keeps what the whole-trace readers need and is small: the
rare events (forks, execs, socket state changes: the run's roles and streams), the kind of each
task's first switch in each slab, the kernel's transmit threads (ksoftirqd), TCP's probes
(hostwire.timeline.qdisc_waits.probes, for the qdisc and send-path causes), the devices' enqueued
buffers (hostwire.timeline.device_queue.enqueues, for the qdisc cause), the trace's silences
of stolen.MIN_SILENCE_NS or more (hostwire.timeline.stolen) and its first and last stamps. The second
gives the slabs."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from hostwire.errors import InputError
from hostwire.heap import give_back
from hostwire.read.sched import iter_sched_tsv
from hostwire.read.tsv import open_tsv
from hostwire.timeline import device_queue, qdisc_waits, tables
from hostwire.timeline.stolen import OPEN, silences

if TYPE_CHECKING:
    from hostwire.metrics.chunked.progress import Progress

SLAB_BYTES = 8 << 20  # ~90 k events of text a slab; its tables and the first pass's text columns stay near 150 MB
RARE_EVENTS = ("sched_process_fork", "sched_process_exec", "sched_process_exit", "inet_sock_set_state")
SCHED_COLUMNS = ("prev_pid", "prev_comm", "prev_state", "next_pid", "next_comm", "arg_pid", "arg_comm",
                 "target_cpu", "orig_cpu", "dest_cpu")
# the fields the rare events' readers use (tables.role_map, socket_states.socket_owners, the hold of
# hostwire record in hostwire.timeline.build, the processes and connections of hostwire.timeline.fd_lifetimes)
RARE_COLUMNS = ("child_pid", "child_comm", "parent_pid", "parent_comm", "filename", "old_pid", "group_dead", "skaddr", "family",
                "protocol", "sport", "dport", "oldstate", "newstate", "saddr", "daddr", "saddr_v6", "daddr_v6")
# before the trace's first stamp and after its last nothing is known of the CPUs: open bounds
OPEN_LO, OPEN_HI = -(1 << 62), 1 << 62
HEAD_COLUMNS = ["pid", "t_ns", "state", "cpu"]
CPU_HEAD_COLUMNS = ["cpu", "t_ns", "pid", "comm"]


def slab_bytes() -> int:
    """The text per slab: SLAB_BYTES, or HOSTWIRE_SLAB_BYTES (tests make slabs small so that
    gaps and task states cross their bounds)."""
    return max(1, int(os.environ.get("HOSTWIRE_SLAB_BYTES") or SLAB_BYTES))


@dataclass
class Slab:
    """The kernel tables of [lo, hi): task states and CPU intervals (tables.task_states and
    tables.running of the whole trace, cut to the slab)."""

    lo: int
    hi: int
    states: pd.DataFrame
    running: pd.DataFrame


@dataclass
class FirstPass:
    """What the first pass keeps (the module doc)."""

    rare: pd.DataFrame
    first_ns: int
    last_ns: int
    silences: tuple[np.ndarray, np.ndarray]  # as hostwire.timeline.stolen.silences gives them
    transmit_pids: list[int]
    # sorted keys pid * slabs + slab of each task's first switch in a slab, and its kind (1: in, 0: out)
    switch_key: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    switch_kind: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    slabs: int = 0
    piece_bytes: int = SLAB_BYTES  # the text per slab it read: the slabs must be read the same
    # each task's state before its first event (tables.task_states' rule), from the stamp of that event
    heads: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=HEAD_COLUMNS))
    # each CPU's task before its first switch (tables.running's rule), up to the stamp of that switch
    cpu_heads: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=CPU_HEAD_COLUMNS))
    probes: pd.DataFrame = field(default_factory=qdisc_waits.empty_probes)  # qdisc_waits.probes of the trace
    enqueues: pd.DataFrame = field(default_factory=device_queue.empty_enqueues)  # device_queue.enqueues of it


def _pieces(path: Path, columns: list[str] | None, piece_bytes: int,
            progress: Callable[[int, int], None] | None) -> Iterator[tuple[int, int | None, pd.DataFrame]]:
    """(lo, hi, events) of each slab in time order; hi is None for the last."""
    pending: pd.DataFrame | None = None
    last = None
    for piece in iter_sched_tsv(path, columns, piece_bytes=piece_bytes, progress=progress):
        if len(piece) == 0:
            continue
        t = piece["t_ns"].to_numpy()
        if (last is not None and t[0] < last) or (len(t) > 1 and bool((t[1:] < t[:-1]).any())):
            raise InputError(f"{path}: the events are not in time order; read the run in memory (--engine memory)")
        last = int(t[-1])
        if pending is None:
            pending = piece
            continue
        bound = int(t[0])
        held = pending["t_ns"].to_numpy()
        cut = int(np.searchsorted(held, bound, side="left"))
        if cut:
            yield int(held[0]), bound, pending.iloc[:cut]
        pending = pd.concat([pending.iloc[cut:], piece], ignore_index=True) if cut < len(held) else piece
    if pending is not None:
        yield int(pending["t_ns"].iloc[0]), None, pending


def _present(path: Path, wanted: tuple[str, ...]) -> list[str]:
    names = set(open_tsv(path, tail=False).columns)
    return [c for c in wanted if c in names]


def first_pass(path: Path, piece_bytes: int, progress: Callable[[int, int], None] | None = None) -> FirstPass:
    """The first pass over raw/sched.tsv (the module doc)."""
    rare, keys, kinds, heads, cpu_heads = [], [], [], [], []
    silence_start, silence_end = [], []
    transmit: set[int] = set()
    seen_cpus: set[int] = set()
    seen_tasks: set[int] = set()
    first_ns = last_ns = None
    slab = 0
    columns = _present(path, tuple(dict.fromkeys(SCHED_COLUMNS + RARE_COLUMNS + qdisc_waits.TRACE_COLUMNS
                                                      + device_queue.TRACE_COLUMNS)))
    probes, received = qdisc_waits.SpilledProbes(), None
    queued = device_queue.SpilledEnqueues()
    for slab, (lo, _, events) in enumerate(_pieces(path, columns, piece_bytes, progress)):
        t = events["t_ns"].to_numpy().astype(np.int64)
        if first_ns is None:
            first_ns = int(t[0])
        joined = t if last_ns is None else np.concatenate([[last_ns], t])
        starts, ends = silences(joined)  # less the open ones before and after
        silence_start.append(starts[1:-1])
        silence_end.append(ends[1:-1])
        last_ns = int(t[-1])
        # Only what a later phase reads is kept of a slab, and nothing for a slab that adds none: a
        # small table kept from every slab pins a page of the allocator's among each slab's large
        # freed ones, and what is held after this pass grew with the trace (docs/performance.md).
        found, received = qdisc_waits.probes(events, received)
        probes.add(found)
        queued.add(device_queue.enqueues(events))
        del found
        is_rare = tables.is_event(events, *RARE_EVENTS)
        if is_rare.any() or not rare:
            rare.append(events[is_rare])
        sw = tables.switches(events)
        firsts_here = _first_events(sw, tables.wakeups(events), tables.migrations(events))
        unseen = ~np.isin(firsts_here["pid"].to_numpy(), np.fromiter(seen_tasks, np.int64, len(seen_tasks)))
        if unseen.any():  # a task's first slab alone counts (_firsts_of)
            heads.append(firsts_here[unseen])
            seen_tasks.update(int(p) for p in firsts_here["pid"].to_numpy()[unseen])
        if len(sw) == 0:
            continue
        pid, _, kind, _, _ = _task_events(sw)
        head = np.r_[True, pid[1:] != pid[:-1]]
        keys.append(np.stack([pid[head], np.full(int(head.sum()), slab)], axis=1))
        kinds.append(kind[head])
        # the tasks tables.running names: each switch's next task, and the task each CPU ran first
        comms = pd.Series(sw["next_comm"].to_numpy(), index=sw["next_pid"].to_numpy())
        firsts = sw.drop_duplicates("cpu")
        firsts = firsts[~firsts["cpu"].isin(list(seen_cpus)).to_numpy()]
        seen_cpus.update(int(c) for c in firsts["cpu"])
        if len(firsts):
            cpu_heads.append(pd.DataFrame({"cpu": firsts["cpu"].to_numpy(), "t_ns": firsts["t_ns"].to_numpy(),
                                           "pid": firsts["prev_pid"].to_numpy(), "comm": firsts["prev_comm"].to_numpy()}))
        comms = pd.concat([comms, pd.Series(firsts["prev_comm"].to_numpy(), index=firsts["prev_pid"].to_numpy())])
        transmit.update(int(p) for p in comms.index[comms.astype(str).str.startswith("ksoftirqd/").to_numpy()])
        del events, sw, comms, firsts
        give_back()  # as the slabs do: else the allocators keep a growing share of every slab's peak
    if first_ns is None or last_ns is None:
        raise InputError(f"{path}: the kernel trace holds no event")
    slabs = slab + 1
    key = np.concatenate(keys) if keys else np.zeros((0, 2), np.int64)
    flat = key[:, 0] * slabs + key[:, 1]
    order = np.argsort(flat, kind="stable")
    return FirstPass(rare=pd.concat(rare, ignore_index=True), first_ns=first_ns, last_ns=last_ns,
                     silences=(np.r_[-OPEN, np.concatenate(silence_start), last_ns],
                               np.r_[first_ns, np.concatenate(silence_end), OPEN]),
                     transmit_pids=sorted(transmit), switch_key=flat[order],
                     switch_kind=(np.concatenate(kinds) if kinds else np.zeros(0, np.int64))[order], slabs=slabs,
                     piece_bytes=piece_bytes, heads=_firsts_of(heads),
                     cpu_heads=pd.concat([pd.DataFrame(columns=CPU_HEAD_COLUMNS), *cpu_heads], ignore_index=True),
                     probes=probes.table(), enqueues=queued.table())


def _task_events(sw: pd.DataFrame, wk: pd.DataFrame | None = None, mg: pd.DataFrame | None = None
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each task's events (idle, pid 0, left out) in the order tables.task_states sorts them: by
    task, stamp, then kind (0 switch-out, 1 switch-in, 2 wake-up, 3 migration): pid, t, kind, the
    CPU before the event (the switch's, the wake-up's target, the migration's origin) and the row
    of its table."""
    empty = pd.DataFrame(columns=["t_ns", "pid", "target_cpu", "orig_cpu"])
    wk, mg = (empty if wk is None else wk), (empty if mg is None else mg)
    n = len(sw)
    pid = np.concatenate([sw["next_pid"].to_numpy(), sw["prev_pid"].to_numpy(), wk["pid"].to_numpy(),
                          mg["pid"].to_numpy()]).astype(np.int64)
    t = np.concatenate([sw["t_ns"].to_numpy(), sw["t_ns"].to_numpy(), wk["t_ns"].to_numpy(),
                        mg["t_ns"].to_numpy()]).astype(np.int64)
    kind = np.concatenate([np.full(n, 1), np.full(n, 0), np.full(len(wk), 2), np.full(len(mg), 3)]).astype(np.int64)
    cpu = np.concatenate([sw["cpu"].to_numpy(), sw["cpu"].to_numpy(), wk["target_cpu"].to_numpy(),
                          mg["orig_cpu"].to_numpy()]).astype(np.int64)
    row = np.concatenate([np.arange(n), np.arange(n), np.arange(len(wk)), np.arange(len(mg))])
    keep = pid > 0
    order = np.lexsort((kind[keep], t[keep], pid[keep]))
    return tuple(a[keep][order] for a in (pid, t, kind, cpu, row))  # type: ignore[return-value]


def _first_events(sw: pd.DataFrame, wk: pd.DataFrame, mg: pd.DataFrame) -> pd.DataFrame:
    """Per task, its first event among these and the state and CPU that tables.task_states gives it
    before that event: running there when the event switches it out, runnable when it switches it
    in, sleeping otherwise."""
    pid, t, kind, cpu, _ = _task_events(sw, wk, mg)
    first = np.r_[True, pid[1:] != pid[:-1]] if len(pid) else np.zeros(0, bool)
    state = np.where(kind[first] == 0, 0, np.where(kind[first] == 1, 1, 2))
    return pd.DataFrame({"pid": pid[first], "t_ns": t[first],
                         "state": np.asarray(tables.TASK_STATES, dtype=object)[state], "cpu": cpu[first]})


def _firsts_of(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """The first slab's row of each task (the slabs come in time order)."""
    if not parts:
        return pd.DataFrame(columns=HEAD_COLUMNS)
    every = pd.concat(parts, ignore_index=True)
    return every[~every["pid"].duplicated(keep="first").to_numpy()].sort_values("t_ns", kind="stable")


def no_kernel_tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Task states and CPU intervals of no event (where nothing of the trace is known)."""
    return (pd.DataFrame({c: pd.Series(dtype="object" if c == "state" else "int64") for c in tables.STATE_COLUMNS}),
            pd.DataFrame({c: pd.Series(dtype="object" if c in ("comm", "role") else "int64")
                          for c in tables.RUNNING_COLUMNS}))


def _clip(df: pd.DataFrame, lo: int, hi: int) -> pd.DataFrame:
    """The intervals that reach into [lo, hi), cut to it; `continued`: the interval began before lo."""
    s, e = df["t_start_ns"].to_numpy(), df["t_end_ns"].to_numpy()
    keep = (e > lo) & (s < hi)
    out = df[keep]
    return out.assign(t_start_ns=np.maximum(s[keep], lo), t_end_ns=np.minimum(e[keep], hi), continued=s[keep] < lo)


def _joined(rows: pd.DataFrame, key: str) -> pd.DataFrame:
    """Intervals that slab bounds cut (`continued` from the slab before), joined again into the
    whole trace's intervals: per CPU (key "cpu": the running table) or per task ("pid": states)."""
    r = rows.sort_values([key, "t_start_ns"], kind="stable").reset_index(drop=True)
    owner, start, end = r[key].to_numpy(), r["t_start_ns"].to_numpy(), r["t_end_ns"].to_numpy()
    cont = np.zeros(len(r), dtype=bool)
    cont[1:] = r["continued"].to_numpy(dtype=bool)[1:] & (owner[1:] == owner[:-1]) & (start[1:] == end[:-1])
    head = np.flatnonzero(~cont)
    last = np.append(head[1:], len(r)) - 1
    out = r.iloc[head].reset_index(drop=True).drop(columns="continued")
    out["t_end_ns"] = end[last]
    out["dur_ns"] = out["t_end_ns"] - out["t_start_ns"]
    return out


def _last_switch(sw: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per task of the switch table: its last switch's pid, row and stamp (_task_events' order)."""
    pid, t, _, _, row = _task_events(sw)
    last = np.r_[pid[1:] != pid[:-1], True] if len(pid) else np.zeros(0, bool)
    return pid[last], row[last], t[last]


def _after_switch(events: pd.DataFrame, pids: np.ndarray, switched_ns: np.ndarray) -> pd.DataFrame:
    """Per task, its last event of `events` (wake-ups or migrations, time-ordered) at or after its
    last switch (pids, switched_ns; a task without one: any)."""
    if len(events) == 0:
        return events
    since = pd.Series(switched_ns, index=pids)
    pid = events["pid"].to_numpy()
    floor = since.reindex(pid).to_numpy()
    keep = np.isnan(floor) | (events["t_ns"].to_numpy() >= np.nan_to_num(floor, nan=0))
    kept = events[keep]
    return kept[~kept["pid"].duplicated(keep="last").to_numpy()]


class KernelSlabs:
    """The slabs of one kernel trace, in time order, with an open slab before and after it (no
    task or CPU known there, as the whole-trace tables have none)."""

    def __init__(self, path: Path, first: FirstPass, roles: dict[int, str], progress: Progress | None = None) -> None:
        self.path, self.first, self.roles = path, first, roles
        # the first pass's pieces: its tables are indexed by slab
        self.piece_bytes, self.progress = first.piece_bytes, progress
        self.columns = _present(path, SCHED_COLUMNS)
        self.last_comm: dict[int, str] = {}  # pid -> the comm it last ran under

    def __iter__(self) -> Iterator[Slab]:
        empty_states, empty_running = no_kernel_tables()
        yield Slab(OPEN_LO, self.first.first_ns, empty_states, empty_running)
        try:
            yield from self._slabs(empty_states, empty_running)
        finally:
            if self.progress is not None:
                self.progress.close()

    def between(self, lo: int, hi: int) -> tuple[pd.DataFrame, pd.DataFrame]:
        """The CPU intervals and the task states (tables.running's and tables.task_states' rows)
        that reach into [lo, hi), cut to it: the slabs are read up to hi."""
        running, states = [], []
        for slab in self:
            if slab.lo >= hi:
                break
            for kept, table in ((running, slab.running), (states, slab.states)):
                rows = table[(table["t_end_ns"].to_numpy() > lo) & (table["t_start_ns"].to_numpy() < hi)]
                kept.append(rows if "continued" in rows.columns else rows.assign(continued=False))

        def cut(parts: list[pd.DataFrame], key: str) -> pd.DataFrame:
            every = pd.concat(parts, ignore_index=True)
            every = every.assign(t_start_ns=np.maximum(every["t_start_ns"].to_numpy(), lo),
                                 t_end_ns=np.minimum(every["t_end_ns"].to_numpy(), hi))
            return _joined(every, key)

        return cut(running, "cpu"), cut(states, "pid").drop(columns="dur_ns")

    def running_between(self, lo: int, hi: int) -> pd.DataFrame:
        """between's CPU intervals."""
        return self.between(lo, hi)[0]

    def _slabs(self, empty_states: pd.DataFrame, empty_running: pd.DataFrame) -> Iterator[Slab]:
        cpu_prefix = task_prefix = wake_prefix = move_prefix = None
        update = self.progress.update if self.progress is not None else None
        for index, (lo, hi, events) in enumerate(_pieces(self.path, self.columns, self.piece_bytes, update)):
            last = hi is None
            end = self.first.last_ns if last else hi
            sw_new = tables.switches(events)
            sw_cpu = pd.concat([cpu_prefix, sw_new], ignore_index=True) if cpu_prefix is not None else sw_new
            sw_task = pd.concat([task_prefix, sw_new], ignore_index=True) if task_prefix is not None else sw_new
            wk = tables.wakeups(events)
            wk = pd.concat([wake_prefix, wk], ignore_index=True) if wake_prefix is not None else wk
            mg = tables.migrations(events)
            mg = pd.concat([move_prefix, mg], ignore_index=True) if move_prefix is not None else mg
            pids, rows, switched = _last_switch(sw_task)
            suffix = self._suffix(wk, pids, switched, index, end)
            states = tables.task_states(pd.concat([sw_task, suffix], ignore_index=True) if len(suffix) else sw_task,
                                        wk, mg, self.first.first_ns, end)
            running = tables.running(sw_cpu, self.first.first_ns, end, self.roles)
            bound = end + 1 if last else end
            states = pd.concat([states, self._unseen_tasks(bound)], ignore_index=True)
            running = pd.concat([running, self._unseen_cpus(bound)], ignore_index=True)
            running = _clip(running, lo, bound)
            self._note_comms(running)
            yield Slab(lo, bound, _clip(states, lo, bound), running)
            cpu_prefix = sw_cpu[~sw_cpu["cpu"].duplicated(keep="last").to_numpy()]
            task_prefix = sw_task.iloc[np.unique(rows)]
            wake_prefix = _after_switch(wk, pids, switched)
            move_prefix = _after_switch(mg, pids, switched)
            del events, sw_new, sw_cpu, sw_task, wk, mg, states, running
            give_back()  # one slab's tables at a time, not the heap of every slab's peak
            if last:
                yield Slab(bound, OPEN_HI, empty_states, empty_running)

    def _suffix(self, wk: pd.DataFrame, pids: np.ndarray, switched: np.ndarray, index: int, end: int) -> pd.DataFrame:
        """A switch at `end` for each task woken after its last switch: its next switch after the
        slab (from the first pass), in or out, so that tables.task_states counts the wake-up as the
        whole trace does."""
        woken = _after_switch(wk, pids, switched)["pid"].to_numpy().astype(np.int64)
        fp = self.first
        if len(woken) == 0 or len(fp.switch_key) == 0:
            return pd.DataFrame(columns=tables.SWITCH_COLUMNS)
        at = np.searchsorted(fp.switch_key, woken * fp.slabs + index + 1, side="left")
        found = at < len(fp.switch_key)
        found[found] = fp.switch_key[at[found]] // fp.slabs == woken[found]
        pid, kind = woken[found], fp.switch_kind[at[found]]
        zero = np.zeros(len(pid), np.int64)
        return pd.DataFrame({"t_ns": np.full(len(pid), end, np.int64), "cpu": zero - 1,
                             "prev_pid": np.where(kind == 0, pid, 0), "prev_comm": "",
                             "prev_state": zero, "prev_runnable": True,
                             "next_pid": np.where(kind == 1, pid, 0), "next_comm": ""})

    def _unseen_tasks(self, bound: int) -> pd.DataFrame:
        """The tasks whose first event comes after the slab, in the state they have before it."""
        heads = self.first.heads
        later = heads[heads["t_ns"].to_numpy() >= bound]
        return pd.DataFrame({"pid": later["pid"].to_numpy(), "t_start_ns": self.first.first_ns, "t_end_ns": bound,
                             "state": later["state"].to_numpy(), "cpu": later["cpu"].to_numpy()},
                            columns=tables.STATE_COLUMNS)

    def _unseen_cpus(self, bound: int) -> pd.DataFrame:
        """The CPUs whose first switch comes after the slab: the task they run before it."""
        heads = self.first.cpu_heads
        later = heads[heads["t_ns"].to_numpy() >= bound]
        # from the trace's start, as the whole table's first interval of the CPU (then cut to the slab)
        out = pd.DataFrame({"cpu": later["cpu"].to_numpy(), "t_start_ns": self.first.first_ns, "t_end_ns": bound,
                            "dur_ns": bound - self.first.first_ns, "pid": later["pid"].to_numpy(),
                            "comm": later["comm"].to_numpy()})
        out["role"] = tables.roles_of(out["pid"].to_numpy(), out["comm"].to_numpy(), self.roles)
        return out[tables.RUNNING_COLUMNS]

    def _note_comms(self, running: pd.DataFrame) -> None:
        if len(running) == 0:
            return
        ordered = running.sort_values("t_start_ns", kind="stable")
        last = ordered[~ordered["pid"].duplicated(keep="last").to_numpy()]
        self.last_comm.update({int(p): str(c) for p, c in zip(last["pid"], last["comm"])})
