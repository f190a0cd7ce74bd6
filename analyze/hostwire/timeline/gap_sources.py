"""What `hostwire gaps` reads from a run (hostwire.timeline.gap_inputs.GapInputs), gathered from its
timeline: the capture (required), the kernel trace, the system calls or the benchmark's writes,
and the /proc/stat samples when present."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from hostwire.errors import InputError
from hostwire.heap import give_back
from hostwire.metrics.streams import FRAME_COLUMNS
from hostwire.timeline import recording_notes, stream_tables
from hostwire.linkrate import LinkRate, link_rate
from hostwire.timeline.build import Timeline, send_writes_on_disk
from hostwire.timeline.receiver_host import RECEIVER_TRACE, receiver_host
from hostwire.timeline.sequence import late_acknowledgements, sequence_steps, usable_window
from hostwire.window import Window

if TYPE_CHECKING:
    from hostwire.run_directory import Run
    from hostwire.timeline.capture_pass import CaptureSide
    from hostwire.timeline.gap_tables import Sink
    from hostwire.timeline.gap_inputs import GapInputs
    from hostwire.timeline.kernel_slabs import FirstPass, KernelSlabs


def gap_inputs(run: Run, given: LinkRate | None = None, kernel: FirstPass | None = None) -> GapInputs:
    """Everything hostwire.timeline.gaps.explain reads, from what this run recorded: the capture
    (required), the kernel trace, the system calls or the benchmark's writes when present.
    kernel: the first pass of a kernel trace read in slabs (slabbed_gap_inputs): the task states
    and CPU intervals are then left empty, for the slabs to give, and the run lets go of each whole
    table once it is turned into the smaller ones the explanation reads (a long run's calls would
    otherwise stay beside the slabs). The capture is read in chunks (chunked_capture_side) then,
    or when it is long (capture_pass.long_capture); else whole, as the timeline's tables read it."""
    from hostwire.metrics.streams import TCP
    from hostwire.timeline.capture_pass import long_capture
    from hostwire.timeline.gap_inputs import GapInputs
    from hostwire.timeline.kernel_slabs import no_kernel_tables

    if not run.has("raw/wire.pcap"):
        raise InputError(f"{run.path}: gaps needs raw/wire.pcap; this run has no wire capture")
    lean = kernel is not None
    tl = Timeline.of(run)
    streams = tl.df_streams()
    senders = {str(s): int(p) for s, p in zip(streams["stream"], streams["sender_pid"]) if int(p) > 0}
    receivers = {str(s): int(p) for s, p in zip(streams["stream"], streams["receiver_pid"]) if int(p) > 0}
    sources = {"frames": "raw/wire.pcap"}
    # a receiver on a host of its own is not a task of this host's trace: its own host's trace says
    # what it did (a pid of that host may name another task here)
    on_own_host = receiver_host(run, tl, receivers)
    if on_own_host is not None:
        receivers, sources["receiver_host"] = {}, RECEIVER_TRACE
    states = running_ = None
    if run.has("raw/sched.tsv"):
        states, running_ = (tl.df_task_states(), tl.df_running()) if not lean else no_kernel_tables()
        sources["states"] = "raw/sched.tsv"
    # Lean, each whole table goes once the smaller ones are made from it, before the next is read:
    # the calls once the writes are; the capture is read in chunks (capture_pass), never whole, and
    # the writes are made from the send calls piece by piece, held on disk.
    chunked = lean or long_capture(run)
    on_disk = send_writes_on_disk(tl) if chunked else None
    writes = on_disk if on_disk is not None else tl.writes()
    notes = recording_notes.io_uring_note(run)
    if on_disk is None and run.has("raw/syscalls.tsv"):  # the calls are held for the writes already
        notes += recording_notes.unmade_sends_note(tl.df_calls(), tl.df_fd_epochs())
    if lean:
        run.forget("syscalls", ("syscalls", stream_tables.SEND_CALLS))
        tl.forget("calls")
        give_back()
    side = chunked_capture_side(run) if chunked else None
    if side is not None:
        data, protos, sender_side = side.data, side.protos, side.sender_side
    else:
        data = tl.data_frames()
        protos = {str(s): "tcp" if int(p) == TCP else "udp" for s, p in
                  data.groupby("stream", sort=False)["proto"].first().items()} if len(data) else {}
        sender_side = set(data["src"].astype(str)) if len(data) else set()
    sends = backlog_ = None
    bases = side.bases if side is not None else sequence_bases(data)
    below: tuple[pd.DataFrame | None, pd.DataFrame | None, bool] = (None, None, False)
    if len(writes):
        sends = compact(writes, ("stream", "t_enter_ns", "t_exit_ns")) if on_disk is None else \
            writes[["stream", "t_enter_ns", "t_exit_ns"]]  # mapped from disk: a selection, not a copy
        backlog_ = (compact(tl.df_backlog(), ("stream", "t_ns", "backlog_bytes")) if side is None
                    else stream_tables.backlog_steps(data, writes))  # on disk
        sources["sends"] = "raw/syscalls.tsv" if "source" not in writes.columns or (writes["source"] == "syscalls").all() \
            else "raw/bench/send-*.tsv"
    if run.has("raw/sched.tsv"):
        below = below_tcp(run, kernel, data, bases, sends, "tcp" in protos.values(), local_addresses(streams), sources)
    # the capture side's tables are on disk already (capture_pass): a selection, not a copy
    data = compact(data, DATA_COLUMNS) if side is None else data[list(DATA_COLUMNS)]
    waits = sender_waits(run, tl, senders, writes, data, lean)
    if waits is not None:
        sources["waits"] = "raw/syscalls.tsv"
    del writes
    if lean:
        tl.forget(*WHOLE_TABLES)
        give_back()
    if side is not None:
        frozen = frozen_host(run, kernel, (side.silences, side.first_ns, side.last_ns))
        link, window, late_acks, awaiting, timeouts = side.link, side.window, side.late_acks, side.awaiting, side.timeouts
        del side
    else:
        frozen = frozen_host(run, kernel)
        link, window, late_acks, awaiting, timeouts = _capture_tables(run, sender_side, lean)
    if lean:
        give_back()
    return GapInputs(data=data, rate_bit_s=link_rate(run.manifest, given).bit_s, senders=senders, receivers=receivers,
                     link=link, states=states, running=running_, sends=sends, backlog=backlog_, window=window,
                     late_acks=late_acks, awaiting_acks=awaiting, retransmit_timeouts=timeouts, protos=protos,
                     qdisc_holds=below[0], send_paths=below[1], no_probes=below[2],
                     comms=process_names(tl, set(senders.values()), not lean), frozen=frozen, waits=waits,
                     cpu_quota=float(run.point_value("sender_cpu_share")) > 0, sources=sources,
                     transmit_pids=None if not lean else kernel.transmit_pids, receiver_host=on_own_host,
                     notes=notes)


def sequence_bases(data: pd.DataFrame) -> dict[str, int]:
    """TCP stream -> the sequence number of its relative byte 0, from data_frames' seq and seq_start."""
    if not len(data) or "seq_start" not in data.columns:
        return {}
    tcp = data[data["proto"].to_numpy() == 6]
    first = tcp.groupby("stream", sort=False, observed=True)[["seq", "seq_start"]].first()
    return {str(s): int(q - r) % (1 << 32) for s, q, r in zip(first.index, first["seq"], first["seq_start"])}


def below_tcp(run: Run, kernel: FirstPass | None, data: pd.DataFrame, bases: dict[str, int],
              sends: pd.DataFrame | None, has_tcp: bool, local: set[str],
              sources: dict[str, str]) -> tuple[pd.DataFrame, pd.DataFrame, bool]:
    """The qdisc and send_path intervals (hostwire.timeline.qdisc_waits) from the kernel trace's
    tcp_probe events (the first pass's of a trace read in slabs, else the whole trace's), with the
    qdisc intervals of the shaped device's own queue (device_holds; what its pairing found goes
    into sources["qdisc_queue"]), and whether the trace had none though the capture has TCP
    streams (whose acknowledgements fire it)."""
    from hostwire.timeline import qdisc_waits

    probe_rows = kernel.probes if kernel is not None else qdisc_waits.probes(run.df_sched())[0]
    holds = qdisc_waits.qdisc_holds(probe_rows, data, bases)
    queued = device_holds(run, kernel, local)
    if queued is not None:
        holds = pd.concat([holds, queued[0]], ignore_index=True)
        sources["qdisc_queue"] = queued[1]
    return holds, qdisc_waits.send_paths(probe_rows, data, sends), has_tcp and len(probe_rows) == 0


def local_addresses(streams: pd.DataFrame) -> set[str]:
    """This host's addresses: the sources of the streams a recorded process sent, the
    destinations of those one received (a process named by its role: the kernel trace of the
    whole machine also names the peer's processes in another namespace, without a role)."""
    sent = (streams["sender_pid"].to_numpy() > 0) & (streams["sender_role"].astype(str).to_numpy() != "")
    got = (streams["receiver_pid"].to_numpy() > 0) & (streams["receiver_role"].astype(str).to_numpy() != "")
    return set(streams["src"].astype(str)[sent]) | set(streams["dst"].astype(str)[got])


FRAME_FIELDS = ("t_ns", "proto", "src", "dst", "sport", "dport", "payload_len", "ip_len")


def device_holds(run: Run, kernel: FirstPass | None, local: set[str]) -> tuple[pd.DataFrame, str] | None:
    """The qdisc intervals of the shaped device's own queue (hostwire.timeline.device_queue) and
    one line of what its pairing found (or why there is none); None when the run has no FIFO
    shaped device. The frames it transmitted: those from this host's addresses to another's."""
    from hostwire.timeline import device_queue, qdisc_waits

    devices = device_queue.fifo_devices(run.manifest.get("link") or {})
    if not devices:
        return None
    wired = [str(i.get("name")) for i in (run.manifest.get("link") or {}).get("interfaces", [])
             if not i.get("loopback")]
    empty = qdisc_waits.empty_intervals()
    if len(devices) != 1 or wired != devices:
        return empty, (f"not paired: the capture holds {len(wired)} devices besides loopback "
                       f"({', '.join(wired)}), whose frames it does not tell apart")
    if not local:
        return empty, "not paired: no stream has a process of this host, so its addresses are unknown"
    if kernel is not None:
        queued, span = kernel.enqueues, (kernel.first_ns, kernel.last_ns)
    else:
        sched = run.df_sched()
        queued, span = device_queue.enqueues(sched), (int(sched["t_ns"].min()), int(sched["t_ns"].max()))
    frames = leaving_frames(run, local, chunked=kernel is not None)
    holds, found = device_queue.queue_holds(queued, devices[0], frames)
    c = found.summary()
    # a frame the capture saw before the kernel trace began or after it ended has no enqueue to pair with
    outside = device_queue.outside(found, frames["t_ns"].to_numpy(), span)
    lacking = c["unpaired_frames"] - outside
    partly = "partly paired: " if lacking else ""  # what then holds is tcp_probe's alone
    swapped = f", {c['swapped_buffers']} two by two in the other order" if c["swapped_buffers"] else ""
    return holds, (f"{partly}{devices[0]}: {c['buffers']} buffers enqueued (net_dev_queue), {c['frames']} frames sent; "
                   f"{c['paired_buffers']} buffers paired ({c['segmented_buffers']} segmented{swapped}); "
                   f"{c['unsent_buffers']} buffers never sent, {lacking} frames without a buffer, "
                   f"{outside} outside the kernel trace")


def leaving_frames(run: Run, local: set[str], chunked: bool) -> pd.DataFrame:
    """The frames from a local address to another, in stable time order (FRAME_FIELDS): the same
    rows whether read whole or in chunks."""
    from hostwire.timeline.capture_pass import open_capture

    if not chunked:
        f = run.df_frames()
        src, dst = f["src"].astype(str), f["dst"].astype(str)
        out = f.loc[(src.isin(local) & ~dst.isin(local)).to_numpy(), list(FRAME_FIELDS)]
        return out.sort_values("t_ns", kind="stable").reset_index(drop=True)
    parts = []
    with open_capture(run, columns=FRAME_FIELDS) as capture:
        names = np.asarray(capture.addresses, dtype=object)
        mine = np.asarray([a in local for a in capture.addresses], dtype=bool)
        keep = (lambda c: mine[c["src"]] & ~mine[c["dst"]]) if len(names) else None
        for chunk in capture.time_ordered(FRAME_FIELDS, keep):
            parts.append(pd.DataFrame({k: names[v] if k in ("src", "dst") else v for k, v in chunk.items()}))
    if not parts:
        return pd.DataFrame({k: pd.Series(dtype=object if k in ("src", "dst") else np.int64) for k in FRAME_FIELDS})
    return pd.concat(parts, ignore_index=True)


def sender_waits(run: Run, tl: Timeline, senders: dict[str, int], writes: pd.DataFrame, data: pd.DataFrame,
                 lean: bool) -> pd.DataFrame | None:
    """Each stream's sending thread's calls, labelled (hostwire.timeline.waits.stream_waits): the
    senders' calls of raw/syscalls.tsv (lean: read piece by piece, only the senders' kept), their
    descriptors named from raw/sockets.tsv where the backend did not describe them."""
    from hostwire.read.syscalls import iter_syscalls_of
    from hostwire.read.tsv import read_header
    from hostwire.timeline.intervals import stream_codes
    from hostwire.timeline.waits import describe_fds, sending_threads, stream_waits

    if not run.has("raw/syscalls.tsv") or not senders or len(data) == 0:
        return None
    pids = sorted(set(senders.values()))
    columns = ["t_enter_ns", "t_exit_ns", "pid", "tid", "call", "fd", "fd_kind", "fd_desc"]
    if lean:  # every call the file's header says was traced, as the whole table holds them
        path = run.path / "raw" / "syscalls.tsv"
        traced = [c for c in str(read_header(path)[0].get("calls", "")).split(",") if c]
        pieces = [p.loc[p["pid"].isin(pids).to_numpy(), columns]
                  for p in iter_syscalls_of(path, sorted({*traced, *ALL_CALLS}))]
        calls = pd.concat(pieces, ignore_index=True)
    else:
        every = tl.df_calls()
        calls = every.loc[every["pid"].isin(pids).to_numpy(), columns].reset_index(drop=True)
    if len(calls) == 0:
        return None
    calls = describe_fds(calls, run.df_sockets() if run.has("raw/sockets.tsv") else None)
    codes, names = stream_codes(data["stream"])  # a long run's frames: no string per frame
    by = pd.Series(data["t_ns"].to_numpy(np.int64)).groupby(codes)
    lo, hi = by.min(), by.max()
    spans = {str(names[c]): (int(lo[c]), int(hi[c])) for c in lo.index if c >= 0}
    sends = writes[["stream", "pid", "t_enter_ns"]] if "pid" in writes.columns and len(writes) else None
    return stream_waits(calls, sending_threads(calls, sends, senders), spans)


# the calls hostwire's tracers write (docs/formats.md), for a file whose header does not list its own
ALL_CALLS = ("read", "write", "readv", "writev", "pread64", "pwrite64", "sendto", "sendmsg", "sendmmsg", "recvfrom",
             "recvmsg", "sendfile", "splice", "connect", "accept", "accept4", "close", "socket", "dup", "dup2", "dup3",
             "fcntl", "close_range", "pwritev", "pwritev2", "vmsplice", "tee", "fcntl_setfd", "ioctl", "scm_rights",
             "epoll_wait", "epoll_pwait",
             "epoll_pwait2", "poll", "ppoll", "select", "pselect6", "nanosleep", "clock_nanosleep", "futex",
             "futex_waitv", "wait4", "waitid", "pause", "rt_sigsuspend", "rt_sigtimedwait", "recvmmsg", "io_getevents",
             "io_pgetevents", "io_uring_enter", "msgrcv", "semop", "semtimedop", "mq_timedreceive", "flock", "fsync",
             "fdatasync")
DATA_COLUMNS = ("t_ns", "stream", "wire_len", "payload_len")  # what the gaps read of a data frame
# what label_flows needs and the capture's gap inputs use of a frame
LABEL_COLUMNS = [*FRAME_COLUMNS, "wire_len", "flags", "wscale"]
# what sequence_steps and its readers use of a TCP frame
SEQUENCE_COLUMNS = ["t_ns", "stream", "data_dir", "flags", "seq", "ack", "payload_len", "window", "wscale"]


def _capture_tables(run: Run, sender_side: set[str], lean: bool) -> tuple[pd.DataFrame, ...]:
    """The gap inputs read from the capture alone: the frames on the data direction of the link
    (t_ns, stream, wire_len), the usable window, the late acknowledgements, the waits for an
    acknowledgement and the retransmission timeouts. lean: the run lets go of its frames."""
    from hostwire.metrics.streams import TCP, label_flows
    from hostwire.timeline.tcp_waits import sender_waits

    frames = run.df_frames()
    if lean:
        run.forget("frames")
    labelled = label_flows(frames[[c for c in LABEL_COLUMNS if c in frames.columns]])
    del frames
    # only what the link's busy intervals need: a long run has millions of frames
    on_link = labelled["src"].astype(str).isin(sender_side).to_numpy()
    link = pd.DataFrame({c: labelled[c].to_numpy()[on_link] if c != "stream" else labelled[c][on_link].array
                         for c in ("t_ns", "stream", "wire_len")})
    tcp = labelled.loc[labelled["proto"].to_numpy() == TCP, [c for c in SEQUENCE_COLUMNS if c in labelled.columns]]
    del labelled
    tcp = tcp.assign(stream=tcp["stream"].cat.remove_unused_categories())
    steps = sequence_steps(tcp)
    del tcp
    if lean:
        give_back()
    awaiting, timeouts = sender_waits(steps)
    return link, usable_window(steps), late_acknowledgements(steps), awaiting, timeouts


def compact(table: pd.DataFrame, columns: tuple[str, ...]) -> pd.DataFrame:
    """The columns of table that the explanation reads, the stream's name as a categorical (a byte
    or two a row, not a string each: a long run has millions of rows). The others are copied: a
    column of a table is a view into the block of all its columns of that type, which would
    otherwise outlive the table."""
    return pd.DataFrame({c: _names(table[c]) if c == "stream" else table[c].to_numpy(copy=True)
                         for c in columns if c in table.columns}, copy=False)


def _names(stream: pd.Series) -> pd.Categorical:
    """A stream column as a categorical of the names it holds, in name order."""
    if isinstance(stream.dtype, pd.CategoricalDtype) and stream.cat.categories.is_monotonic_increasing:
        return stream.cat.remove_unused_categories().array
    return pd.Categorical(stream.astype(str))


# What gap_inputs has turned into its smaller tables: a long run's analysis lets go of them.
WHOLE_TABLES = ("data_frames", "calls", "stream_writes", "backlog")


SLABS_FROM_BYTES = 256 << 20  # a kernel trace from which the gap analysis reads in slabs by default


def slabbed(run_dir: Path, engine: str = "auto") -> bool:
    """Whether the gap analysis reads the run's kernel trace in slabs: `slabs`, `memory`, or
    `auto` (a raw/sched.tsv of SLABS_FROM_BYTES or more); never for a run without a trace (there
    is nothing to read in slabs: the analysis says what it cannot tell without one)."""
    trace = run_dir / "raw" / "sched.tsv"
    if not trace.is_file() or engine == "memory":
        return False
    return engine == "slabs" or trace.stat().st_size >= SLABS_FROM_BYTES


def kernel_first_pass(run: Run) -> FirstPass:
    """The first pass over the run's kernel trace (hostwire.timeline.kernel_slabs.first_pass),
    made once per Run (its error too); from then on the run serves only the trace's rare events as
    its kernel table (Run.use_sched_events), so that what reads the run's roles, streams or calls
    does not read the whole trace."""
    def make() -> FirstPass:
        from hostwire.metrics.chunked.progress import Progress
        from hostwire.timeline.kernel_slabs import first_pass, slab_bytes

        path = run.path / "raw" / "sched.tsv"
        if not path.is_file():
            raise InputError(f"{path}: missing: the slabbed reading needs a kernel trace")
        progress = Progress(f"{run.path.name} kernel trace", unit="MB")
        try:
            first = first_pass(path, slab_bytes(), progress.update)
        finally:
            progress.close()
        run.use_sched_events(first.rare)
        give_back()
        return first

    return run.keep("kernel first pass", make)


def long_trace(run: Run, engine: str = "auto") -> FirstPass | None:
    """The first pass of a kernel trace that is read in slabs (slabbed), else None."""
    return kernel_first_pass(run) if slabbed(run.path, engine) else None


def kernel_slabs(run: Run) -> KernelSlabs | None:
    """A long kernel trace's slabs (slabbed, `auto`), else None."""
    from hostwire.timeline.kernel_slabs import KernelSlabs

    first = long_trace(run)
    return None if first is None else KernelSlabs(run.path / "raw" / "sched.tsv", first, Timeline.of(run).roles())


def slabbed_gap_inputs(run: Run, given: LinkRate | None = None) -> tuple[GapInputs, KernelSlabs]:
    """gap_inputs with the kernel trace read in slabs (hostwire.timeline.kernel_slabs): the inputs,
    and the slabs to give hostwire.timeline.gaps.explain."""
    from hostwire.metrics.chunked.progress import Progress
    from hostwire.timeline.kernel_slabs import KernelSlabs

    first = kernel_first_pass(run)
    progress = Progress(f"{run.path.name} kernel trace", unit="MB", first_pass=2)
    return gap_inputs(run, given, first), KernelSlabs(run.path / "raw" / "sched.tsv", first, Timeline.of(run).roles(), progress)


def explain_run(run: Run, window: Window, sink: Sink) -> None:
    """hostwire.timeline.gaps.explain_into sink of every stream of the run in the window at the
    default threshold, a long kernel trace (long_trace) read in slabs."""
    from hostwire.timeline import gaps

    if long_trace(run) is None:
        gaps.explain_into(sink, gap_inputs(run), None, window)
        return
    inputs, slabs = slabbed_gap_inputs(run)
    gaps.explain_into(sink, inputs, None, window, slabs=slabs, on_comms=lambda: name_senders(inputs, slabs))


def name_senders(inputs: GapInputs, slabs: KernelSlabs) -> None:
    """Once the slabs are read: each sender's name as the kernel trace last saw it run (as
    process_names gives it from the whole trace)."""
    inputs.comms.update({pid: slabs.last_comm[pid] for pid in set(inputs.senders.values()) if pid in slabs.last_comm})


def frozen_host(run: Run, kernel: FirstPass | None = None,
                capture: tuple[tuple[np.ndarray, np.ndarray], int | None, int | None] | None = None) -> pd.DataFrame | None:
    """When the hypervisor ran none of the host's CPUs (hostwire.timeline.stolen.frozen): needs
    the kernel trace and the /proc/stat samples. kernel: the trace's first pass, whose silences
    stand for its stamps; capture: the silences of the capture's stamps and its first and last
    stamp (capture_pass), which stand for the frames."""
    from hostwire.timeline.stolen import common_silences, confirmed_by_steal, frozen, silences

    if not (run.has("raw/sched.tsv") and run.has("raw/resources.tsv")):
        return None
    samples = run.df_resources()
    tick_ns = int(samples.attrs.get("meta", {}).get("tick_ns", 10_000_000))
    if kernel is None and capture is None:
        return frozen(np.concatenate([run.df_sched()["t_ns"].to_numpy(), run.df_frames()["t_ns"].to_numpy()]),
                      samples, tick_ns)
    if capture is None:
        frames = np.sort(run.df_frames()["t_ns"].to_numpy())
        capture = (silences(frames), int(frames[0]) if len(frames) else None, int(frames[-1]) if len(frames) else None)
    if kernel is None:  # the trace read whole, the capture in chunks: the trace's silences from its stamps
        stamps = np.sort(run.df_sched()["t_ns"].to_numpy())
        trace = (silences(stamps), int(stamps[0]) if len(stamps) else None, int(stamps[-1]) if len(stamps) else None)
    else:
        trace = (kernel.silences, kernel.first_ns, kernel.last_ns)
    firsts = [t for t in (trace[1], capture[1]) if t is not None]
    lasts = [t for t in (trace[2], capture[2]) if t is not None]
    if not firsts:  # no stamp at all: no silence between two
        return frozen(np.zeros(0, np.int64), samples, tick_ns)
    return confirmed_by_steal(*common_silences(trace[0], capture[0], min(firsts), max(lasts)), samples, tick_ns)


def chunked_capture_side(run: Run) -> CaptureSide | None:
    """The capture's part of the gap inputs made in passes over its chunks (capture_pass); None
    for a capture with more addresses than the chunked labels take (it is read whole)."""
    from hostwire.metrics.chunked.progress import Progress
    from hostwire.timeline.capture_pass import capture_side, open_capture, readable_in_chunks

    progress = Progress(f"{run.path.name} capture")
    try:
        with open_capture(run, progress.update) as capture:
            return capture_side(capture) if readable_in_chunks(capture) else None
    finally:
        progress.close()


def process_names(tl: Timeline, pids: set[int], from_trace: bool = True) -> dict[int, str]:
    """pid -> the process's name: the comm the kernel trace last saw it run under, else its
    benchmark role, else none (from_trace=False: the role alone; a slabbed reading adds the
    comms as it reads the slabs)."""
    names = {pid: role for pid, role in tl.roles().items() if pid in pids}
    if from_trace and tl.run.has("raw/sched.tsv") and pids:
        running_ = tl.df_running()
        mine = running_[running_["pid"].isin(list(pids)).to_numpy()].sort_values("t_start_ns", kind="stable")
        names.update({int(p): str(c) for p, c in mine.groupby("pid", sort=False)["comm"].last().items()})
    return names
