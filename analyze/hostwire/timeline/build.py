"""The timeline of one run (hostwire.run_directory.Run), built from it: `Timeline.of(run)` holds the joined
tables (df_switches, df_wakeups, df_running, df_runqueue, df_calls, df_streams, df_segments,
df_backlog, ...), each built once by a builder below, which reads the raw tables through the Run
(which reads every raw file once) and hands them to hostwire.timeline.tables and stream_tables. The Run knows
nothing of the timeline: it only keeps the Timeline for every caller to share."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from hostwire.errors import HostwireError, InputError
from hostwire.timeline import cache, socket_states, stream_tables, tables
from hostwire.timeline.tables import is_event

if TYPE_CHECKING:
    from hostwire.run_directory import Run
    from hostwire.timeline.clocks import ClockFit

TCP_SYN = 0x02


def _sched(run: Run) -> pd.DataFrame:
    return run.df_sched()


def trace_span(run: Run) -> tuple[int, int]:
    """First and last stamp of the kernel trace."""
    t = _sched(run)["t_ns"].to_numpy()
    if len(t) == 0:
        raise InputError(f"{run.path / 'raw' / 'sched.tsv'}: the kernel trace holds no event")
    return int(t.min()), int(t.max())


def roles(run: Run) -> dict[int, str]:
    try:
        summary = run.bench_summary()
    except HostwireError:
        summary = None
    sched = _sched(run) if run.has("raw/sched.tsv") else None
    roles = tables.role_map(summary, sched)
    command = run.manifest.get("command")
    if isinstance(command, dict) and isinstance(command.get("tasks"), dict):  # hostwire record: the program's tasks
        for tid, comm in command["tasks"].items():
            if str(tid).isdigit():
                roles.setdefault(int(tid), str(comm))
    return roles


def switches(run: Run) -> pd.DataFrame:
    return tables.switches(_sched(run))


def wakeups(run: Run) -> pd.DataFrame:
    return tables.wakeups(_sched(run))


def migrations(run: Run) -> pd.DataFrame:
    return tables.migrations(_sched(run))


def running(tl: Timeline) -> pd.DataFrame:
    first, last = trace_span(tl.run)
    return tables.running(tl.df_switches(), first, last, tl.roles())


def task_states(tl: Timeline) -> pd.DataFrame:
    first, last = trace_span(tl.run)
    return tables.task_states(tl.df_switches(), tl.df_wakeups(), tl.df_migrations(), first, last)


def runqueue(tl: Timeline) -> pd.DataFrame:
    return tables.runqueue(tl.df_task_states())


def _hold_end_ns(run: Run) -> tuple[int, int] | None:
    """hostwire record starts its command through a shell that holds it until the collectors
    record, then execs it: (the root pid, the stamp of that exec, the first after the release).
    The hold's own calls (before it) are not the program's."""
    command = run.manifest.get("command")
    if (not isinstance(command, dict) or not isinstance(command.get("root_pid"), int)
            or not isinstance(command.get("started_ns"), int) or not run.has("raw/sched.tsv")):
        return None
    root = int(command["root_pid"])
    sched = _sched(run)
    if "event" not in sched.columns:
        return None
    execs = sched[is_event(sched, "sched_process_exec") & (sched["pid"].to_numpy() == root)
                  & (sched["t_ns"].to_numpy() >= int(command["started_ns"]))]
    return (root, int(execs["t_ns"].iloc[0])) if len(execs) else None


def calls(tl: Timeline) -> pd.DataFrame:
    return _calls_of(tl, tl.run.df_syscalls())


def _calls_of(tl: Timeline, syscalls: pd.DataFrame) -> pd.DataFrame:
    """stream_tables.calls of these rows of raw/syscalls.tsv (each row's columns depend on that row
    alone), without the calls of the program's launcher before it exec'd the program."""
    hold = _hold_end_ns(tl.run)
    if hold is not None:
        root, exec_ns = hold
        syscalls = syscalls[~((syscalls["pid"].to_numpy() == root) & (syscalls["t_enter_ns"].to_numpy() < exec_ns))]
    out = stream_tables.calls(syscalls, tl.roles(), tl.df_streams(), tl.df_fd_epochs(), tl.df_datagram_sends())
    out.attrs["backend"] = syscalls.attrs.get("meta", {}).get("backend", "")
    return out


def datagram_sends(tl: Timeline) -> pd.DataFrame:
    """The sends on a recorded program's unconnected UDP sockets joined to their datagrams' flows
    (hostwire.timeline.datagram_sends), piece by piece."""
    from hostwire.timeline import datagram_sends as ds

    held = ds.unconnected_udp(tl.run.df_sockets() if tl.run.has("raw/sockets.tsv") else None)
    frames = tl.data_frames() if len(held) else None
    if frames is None or not (frames["proto"].to_numpy() == 17).any():
        return pd.DataFrame(columns=ds.MATCH_COLUMNS)
    return ds.datagram_sends(ds.sends_on(send_call_pieces(tl.run), held), held, frames)


def fd_epochs(run: Run) -> pd.DataFrame:
    """hostwire.timeline.fd_lifetimes.fd_epochs of the run: from the calls that make, copy and end
    descriptors (and connect; not the send calls, which a long run reads in pieces and never
    holds: each is joined to its epoch afterwards, its own description first), the socket samples
    of a recorded program, and the kernel trace's processes and connections."""
    from hostwire.timeline import fd_lifetimes

    if not run.has("raw/syscalls.tsv"):
        return pd.DataFrame(columns=fd_lifetimes.EPOCH_COLUMNS)
    calls = run.df_syscalls(fd_lifetimes.LIFETIME_CALLS)
    sched = _sched(run) if run.has("raw/sched.tsv") else None
    samples = run.df_sockets() if run.has("raw/sockets.tsv") else None
    return fd_lifetimes.fd_epochs(calls, samples, fd_lifetimes.process_events(sched), fd_lifetimes.connections(sched),
                                  fd_lifetimes.listens(sched))


def lifetime_senders(run: Run, epochs: pd.DataFrame) -> pd.DataFrame:
    """hostwire.timeline.program_streams.lifetime_senders of the run's send calls, each with its comm."""
    from hostwire.timeline.program_streams import lifetime_senders as senders, process_comms

    best = senders(send_call_pieces(run), epochs)
    command = run.manifest.get("command")
    tasks = command.get("tasks") if isinstance(command, dict) else None
    comms = process_comms(set(best["pid"].astype(np.int64)), tasks, _sched(run) if run.has("raw/sched.tsv") else None)
    return best.assign(role=best["pid"].map(comms).fillna("").astype(object))


def streams(run: Run, epochs: pd.DataFrame | None = None) -> pd.DataFrame:
    senders, receivers = [], []
    summary: dict = {}
    try:
        summary = run.bench_summary()
    except HostwireError:
        summary = {}
    for role in run.bench.roles("send"):
        try:
            meta = run.bench.meta(role)
        except HostwireError:
            continue
        senders.append({"role": role, "pid": int(meta.get("pid", -1)), "local": meta.get("local", "?"),
                        "peer": meta.get("peer", "?")})
    for role in run.bench.roles("recv"):
        try:
            meta = run.bench.meta(role)
        except HostwireError:
            continue
        receivers.append({"role": role, "pid": int(meta.get("pid", -1)), "sender_pid": int(meta.get("sender_pid", -1))})
    if not receivers:
        for rec in summary.get("receivers", []):
            receivers.append({"role": rec.get("role", ""), "pid": int(rec.get("pid", -1)), "sender_pid": -1})
    sockets = socket_states.socket_owners(_sched(run)) if run.has("raw/sched.tsv") else pd.DataFrame(
        columns=["skaddr", "local", "remote", "owner_pid", "active"])
    if run.has("raw/sockets.tsv"):  # a program recorded by hostwire record
        from hostwire.timeline.program_streams import owners

        names = captured_streams(run)
        held, receiving = owners(names, run.df_sockets())
        senders += held.assign(source="sockets").to_dict("records")
        receivers += receiving.to_dict("records")
        # the kernel trace saw the whole machine's connections: only the captured ones are streams
        captured = set(names["stream"])
        sockets = sockets[(sockets["local"] + ">" + sockets["remote"]).isin(captured).to_numpy()]
    # each fd's bytes add up piece by piece: a long run's send calls are not held for it
    fds = stream_tables.main_send_fds(send_call_pieces(run)).assign(source="fd_desc") if run.has(
        "raw/syscalls.tsv") else pd.DataFrame(columns=["pid", "fd", "stream", "source"])
    if epochs is not None and len(epochs):
        fds = pd.concat([lifetime_senders(run, epochs), fds], ignore_index=True)
    if run.has("raw/sockets.tsv"):  # sends against a connection's data direction are no stream's
        fds = fds[~fds["stream"].isin(stream_tables.reversed_streams(names["stream"]))]
    senders = [{"fd": -1, "source": "bench", **s} for s in senders]
    return stream_tables.streams_table(pd.DataFrame(senders, columns=["role", "pid", "local", "peer", "fd", "source"]),
                                pd.DataFrame([{"stream": "", **r} for r in receivers],
                                             columns=["role", "pid", "sender_pid", "stream"]), sockets, fds)


def data_frames(run: Run) -> pd.DataFrame:
    """The capture's data frames, TCP and UDP (hostwire.metrics.streams.label_flows, data
    direction, payload > 0) with seq_start, seq_end relative to each stream's first data byte
    (stream_tables.stream_bytes; the ISN from the data direction's SYN when captured; a UDP flow's
    bytes counted in the order they crossed the wire) and retransmit (never for UDP); proto is 6
    (TCP) or 17 (UDP)."""
    from hostwire.metrics.streams import TCP, label_flows

    labelled = label_flows(run.df_frames())
    tcp = labelled["proto"].to_numpy() == TCP
    syn = ((labelled["flags"].to_numpy().astype(np.int64) & TCP_SYN) != 0) & labelled["data_dir"].to_numpy() & tcp
    isn = labelled[syn].groupby("stream", observed=True)["seq"].last()
    data = labelled[labelled["is_data"].to_numpy()]
    data = data.assign(stream=data["stream"].astype(str))
    is_tcp = data["proto"].to_numpy() == TCP
    tcp_data = data[is_tcp]
    tcp_data.attrs = {"isn": {str(k): int(v) for k, v in isn.items()}}
    parts = [stream_tables.stream_bytes(tcp_data), stream_tables.datagram_bytes(data[~is_tcp])]
    out = pd.concat([p for p in parts if len(p)] or parts[:1], ignore_index=True)
    return out.sort_values(["stream", "t_ns"], kind="stable").reset_index(drop=True)


def captured_streams(run: Run) -> pd.DataFrame:
    """hostwire.timeline.program_streams.stream_names of the run's capture, read in chunks when it
    is long (capture_pass.long_capture)."""
    from hostwire.timeline.capture_pass import long_capture, open_capture
    from hostwire.timeline.program_streams import stream_names, stream_names_in_chunks

    if not long_capture(run):
        return stream_names(run.df_frames())
    with open_capture(run) as capture:
        return stream_names_in_chunks(capture)


def stream_writes(tl: Timeline) -> pd.DataFrame:
    """The sends of each stream: stream, pid, t_enter_ns, t_exit_ns, bytes, source (`syscalls`:
    the tracer's send calls on the stream's (pid, fd), from the connection's start; `bench`: the
    benchmark's logged writes, within the logging window)."""
    cols = ["stream", "pid", "t_enter_ns", "t_exit_ns", "bytes", "source"]
    run = tl.run
    if run.has("raw/syscalls.tsv"):
        # only the send calls are joined to their streams: a long run has millions of other calls
        c = _calls_of(tl, run.df_syscalls(stream_tables.SEND_CALLS))
        sends = c[c["is_send"].to_numpy() & (c["stream"].to_numpy() != "")]
        if len(sends):
            return pd.DataFrame({"stream": sends["stream"].to_numpy(), "pid": sends["pid"].to_numpy(),
                                 "t_enter_ns": sends["t_enter_ns"].to_numpy(), "t_exit_ns": sends["t_exit_ns"].to_numpy(),
                                 "bytes": sends["bytes"].to_numpy(), "source": "syscalls"}).reset_index(drop=True)
    try:
        w = run.df_writes(keep_damaged=True)
    except HostwireError:
        return pd.DataFrame(columns=cols)
    return pd.DataFrame({"stream": w["stream"].astype(str).to_numpy(), "pid": w["pid"].to_numpy(),
                         "t_enter_ns": w["t_ns"].to_numpy(), "t_exit_ns": w["t_end_ns"].to_numpy(),
                         "bytes": w["bytes"].to_numpy(), "source": "bench"}).reset_index(drop=True)


def send_call_pieces(run: Run) -> Iterator[pd.DataFrame]:
    """Run.df_syscalls(SEND_CALLS) a piece at a time, for what is made row by row (the sends
    joined to their streams, each fd's bytes): from a file longer than one piece nothing of it is
    held (the rows come in the file's order); else the one table, kept as df_syscalls keeps it."""
    from hostwire.read.syscalls import iter_syscalls_of, read_in_pieces

    path, calls = run.path / "raw" / "syscalls.tsv", stream_tables.SEND_CALLS
    if run.keeps("syscalls") or run.keeps(("syscalls", calls)) or not read_in_pieces(path):
        yield run.df_syscalls(calls)
        return
    if (problem := run.raw_damage("raw/syscalls.tsv")):
        raise InputError(problem)
    yield from iter_syscalls_of(path, calls)


def send_writes_on_disk(tl: Timeline) -> pd.DataFrame | None:
    """stream_writes' stream, pid, t_enter_ns, t_exit_ns and bytes of the traced send calls, made
    piece by piece from raw/syscalls.tsv and held on disk (hostwire.spill), the stream a
    categorical of the names in name order, each stream's rows in the file's order (not by
    entry); None when stream_writes would not take them from the calls (no send call on a
    stream: the benchmark's writes)."""
    from hostwire.spill import Columns

    if not tl.run.has("raw/syscalls.tsv"):
        return None
    columns = Columns({"pid": np.int64, "t_enter_ns": np.int64, "t_exit_ns": np.int64, "bytes": np.int64})
    key_of: dict[str, int] = {}
    for piece in send_call_pieces(tl.run):
        c = _calls_of(tl, piece)
        sends = c[c["is_send"].to_numpy() & (c["stream"].to_numpy() != "")]
        codes, names = pd.factorize(sends["stream"].to_numpy())
        for k, name in enumerate(names):
            rows = sends[codes == k]
            columns.append(key_of.setdefault(str(name), len(key_of)),
                           **{c: rows[c].to_numpy() for c in ("pid", "t_enter_ns", "t_exit_ns", "bytes")})
    if not key_of:
        return None
    names = sorted(key_of)
    return columns.table(pd.Index(names, dtype=object), [key_of[n] for n in names])


def segments(tl: Timeline) -> pd.DataFrame:
    return stream_tables.segments(tl.data_frames(), tl.writes())


def backlog(tl: Timeline) -> pd.DataFrame:
    return stream_tables.backlog(tl.data_frames(), tl.writes())


def receiver_reads(run: Run, received: pd.DataFrame | None = None) -> pd.DataFrame:
    """The receivers' logged reads with upto_bytes, the stream's bytes read through each (the bytes
    read before the first logged one from the tracer's reads of the receiver when it traced them,
    else the most the capture allows); `received` replaces run.df_received() (a test rewrites its
    stamps)."""
    from hostwire.timeline import clocks

    tl = Timeline.of(run)
    rec = run.df_received() if received is None else received
    frames = tl.data_frames()
    streams = tl.df_streams()
    receiver_of = {str(s): int(p) for s, p in zip(streams["stream"], streams["receiver_pid"]) if int(p) > 0}
    calls = tl.df_calls() if run.has("raw/syscalls.tsv") else None
    sync = run.df_clock_sync()
    start = sync[sync["phase"] == "start"]
    o_s = float(start.loc[start["rtt_ns"].idxmin(), "offset_ns"]) if len(start) else 0.0
    margin = float(start["rtt_ns"].min()) if len(start) else 0.0
    out = []
    for name, r in rec.groupby("stream", sort=True):
        r = r.sort_values("t_raw_ns", kind="stable")
        logged = r["bytes"].to_numpy().astype(np.int64)
        before = None
        pid = receiver_of.get(str(name), -1)
        if calls is not None and pid > 0:
            reads = calls[(calls["pid"].to_numpy() == pid) & calls["call"].isin(clocks.READ_CALLS).to_numpy()
                          & (calls["bytes"].to_numpy() > 0)]
            if len(reads):
                fd = reads.groupby("fd")["bytes"].sum().idxmax()
                traced = reads[reads["fd"] == fd].sort_values("t_exit_ns", kind="stable")
                before = clocks.bytes_before(logged, r["t_raw_ns"].to_numpy(), traced["bytes"].to_numpy().astype(np.int64),
                                             traced["t_exit_ns"].to_numpy())
        f = frames[frames["stream"].astype(str).to_numpy() == str(name)]
        if before is None:
            before = clocks.bytes_before_from_traffic(f, r, o_s, margin) if len(f) else 0
        out.append(pd.DataFrame({"stream": str(name), "t_raw_ns": r["t_raw_ns"].to_numpy(), "bytes": logged,
                                 "upto_bytes": before + np.cumsum(logged)}))
    if not out:
        return pd.DataFrame(columns=["stream", "t_raw_ns", "bytes", "upto_bytes"])
    return pd.concat(out, ignore_index=True)


def clock_fit(run: Run, received: pd.DataFrame | None = None, sync: pd.DataFrame | None = None) -> ClockFit:
    """hostwire.timeline.clocks.ClockFit of the run's receiver clock (received and sync replace the
    run's receiver logs and clock exchanges)."""
    from hostwire.timeline import clocks
    from hostwire.timeline.hostclocks import chosen_receiver_fit

    if received is None and sync is None and (chosen := chosen_receiver_fit(run.manifest)) is not None:
        return chosen  # real hosts: the traffic's line where it is the tighter (docs/hosts.md)
    sync = run.df_clock_sync() if sync is None else sync
    reads = receiver_reads(run, received)
    bounds = clocks.read_bounds(Timeline.of(run).data_frames(), reads) if run.has("raw/wire.pcap") else pd.DataFrame(
        columns=["stream", "t_send_ns", "t_raw_ns", "upper_ns"])
    return clocks.fit(sync, bounds)


def received_aligned(tl: Timeline) -> pd.DataFrame:
    """df_received() with t_ns recomputed from t_raw_ns through clock_fit (the benchmark's own
    t_ns, corrected by the start offset alone, kept as t_bench_ns)."""
    fit = tl.clock()
    rec = tl.run.df_received()
    out = rec.assign(t_bench_ns=rec["t_ns"], t_ns=fit.to_sender(rec["t_raw_ns"].to_numpy()))
    out.attrs = {**rec.attrs, "clock": fit.as_dict()}
    return out


class Timeline:
    """The joined timeline of one run (docs/timeline.md), built from its Run: each table made
    once by a builder of this module and kept with the Run; the costly ones (cache.CACHED) also
    stored as Parquet under the run's tables/ and read back while the run's sources are
    those they were made from (their digests).
    `Timeline.of(run)` is the one Timeline of a Run, so every caller shares what was built."""

    def __init__(self, run: Run) -> None:
        self.run = run

    @classmethod
    def of(cls, run: Run) -> Timeline:
        return run.keep("timeline", lambda: cls(run))

    def _table(self, name: str, build: Callable[[], pd.DataFrame]) -> pd.DataFrame:
        def make() -> pd.DataFrame:
            if name not in cache.CACHED:
                return build()
            # A copy is used only while the run's sources are those it was made from; a run
            # whose files differ from their recorded digests is built from what is there.
            sources = None if self.run.source_problems() else self.run.sources_fingerprint()
            return cache.cached(self.run.path, name, sources, build)

        return self.run.keep(("timeline", name), make).copy(deep=False)

    def forget(self, *names: str) -> None:
        """Lets go of these tables (a later call builds or reads them again)."""
        self.run.forget(*[("timeline", name) for name in names])

    def roles(self) -> dict[int, str]:
        """pid -> role (send-<i>, bg-<i>, recv-<i>, main) of the benchmark's processes."""
        return dict(self.run.keep(("timeline", "roles"), lambda: roles(self.run)))

    def df_switches(self) -> pd.DataFrame:
        """sched_switch events of raw/sched.tsv (hostwire.timeline.tables.switches)."""
        return self._table("switches", lambda: switches(self.run))

    def df_wakeups(self) -> pd.DataFrame:
        """sched_wakeup and sched_wakeup_new events (hostwire.timeline.tables.wakeups)."""
        return self._table("wakeups", lambda: wakeups(self.run))

    def df_migrations(self) -> pd.DataFrame:
        """sched_migrate_task events (hostwire.timeline.tables.migrations)."""
        return self._table("migrations", lambda: migrations(self.run))

    def df_running(self) -> pd.DataFrame:
        """Per CPU, the intervals of which task ran, with its role (hostwire.timeline.tables.running)."""
        return self._table("running", lambda: running(self))

    def df_task_states(self) -> pd.DataFrame:
        """Each task's running / runnable / sleeping intervals (hostwire.timeline.tables.task_states)."""
        return self._table("task_states", lambda: task_states(self))

    def df_runqueue(self) -> pd.DataFrame:
        """Runnable tasks per CPU over time (hostwire.timeline.tables.runqueue)."""
        return self._table("runqueue", lambda: runqueue(self))

    def df_calls(self) -> pd.DataFrame:
        """The run's system calls with role, is_send, bytes and stream (hostwire.timeline.stream_tables.calls)."""
        return self._table("calls", lambda: calls(self))

    def df_streams(self) -> pd.DataFrame:
        """Stream <-> pid <-> fd <-> 4-tuple <-> role (hostwire.timeline.stream_tables.streams_table)."""
        return self._table("streams", lambda: streams(self.run, self.df_fd_epochs()))

    def df_datagram_sends(self) -> pd.DataFrame:
        """The sends of unconnected UDP sockets joined to their datagrams' flows (datagram_sends above)."""
        return self._table("datagram_sends", lambda: datagram_sends(self))

    def df_fd_epochs(self) -> pd.DataFrame:
        """Each descriptor's epochs and the sockets they held (hostwire.timeline.fd_lifetimes.fd_epochs)."""
        return self._table("fd_epochs", lambda: fd_epochs(self.run))

    def data_frames(self) -> pd.DataFrame:
        """The capture's data frames with relative sequence numbers (data_frames above)."""
        return self._table("data_frames", lambda: data_frames(self.run))

    def writes(self) -> pd.DataFrame:
        """Each stream's sends (stream_writes above)."""
        return self._table("stream_writes", lambda: stream_writes(self))

    def df_segments(self) -> pd.DataFrame:
        """Each data frame joined to the write(s) whose bytes it carries (hostwire.timeline.stream_tables.segments)."""
        return self._table("segments", lambda: segments(self))

    def df_backlog(self) -> pd.DataFrame:
        """Per stream, bytes written but not yet on the wire (hostwire.timeline.stream_tables.backlog)."""
        return self._table("backlog", lambda: backlog(self))

    def clock(self) -> ClockFit:
        """The receiver clock's offset, drift and bound (hostwire.timeline.clocks.ClockFit)."""
        return self.run.keep(("timeline", "clock"), lambda: clock_fit(self.run))

    def df_received_aligned(self) -> pd.DataFrame:
        """The receivers' reads with t_ns mapped through clock() (received_aligned above)."""
        return self._table("received_aligned", lambda: received_aligned(self))
