"""What the gap analysis (hostwire.timeline.gaps) reads: GapInputs, gathered from a run by
hostwire.timeline.gap_sources."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from hostwire.timeline.receiver_host import ReceiverHost


@dataclass
class GapInputs:
    """What the gap analysis reads. data: the data frames of every stream (t_ns, stream, wire_len);
    link: the frames sharing the data direction of the link (t_ns, stream, wire_len; default:
    data); senders: stream -> sender pid; states: task states (pid, t_start_ns, t_end_ns, state,
    cpu) or None without a kernel trace; running: per-CPU intervals (cpu, t_start_ns, t_end_ns,
    pid, comm, role) or None; sends: stream, t_enter_ns, t_exit_ns of the senders' send calls, or
    None; backlog: stream, t_ns, backlog_bytes, or None; window: stream, t_ns, window_bytes (the
    usable window from each frame on: sequence.usable_window; NaN when unknown), or None; late_acks:
    stream, t_start_ns, t_end_ns where the oldest byte in flight waits for its acknowledgement
    (sequence.late_acknowledgements), or None; awaiting_acks and retransmit_timeouts: stream,
    t_start_ns, t_end_ns where each holds (tcp_waits.sender_waits), or None. protos: stream ->
    "tcp" or "udp" (default: "tcp"); comms: pid -> the process's name; frozen: t_start_ns, t_end_ns
    where the whole host stood still (stolen.frozen), or None; waits: each stream's sending
    thread's calls with their labels (waits.stream_waits), or None. rate_bit_s: the link rate."""

    data: pd.DataFrame
    rate_bit_s: float
    senders: dict[str, int] = field(default_factory=dict)
    receivers: dict[str, int] = field(default_factory=dict)  # stream -> receiver pid on this host
    link: pd.DataFrame | None = None
    states: pd.DataFrame | None = None
    running: pd.DataFrame | None = None
    sends: pd.DataFrame | None = None
    backlog: pd.DataFrame | None = None
    window: pd.DataFrame | None = None
    late_acks: pd.DataFrame | None = None  # stream, t_start_ns, t_end_ns: sequence.late_acknowledgements
    awaiting_acks: pd.DataFrame | None = None  # stream, t_start_ns, t_end_ns: tcp_waits.sender_waits
    retransmit_timeouts: pd.DataFrame | None = None  # the same
    # stream, t_start_ns, t_end_ns: qdisc_waits.qdisc_holds and qdisc_waits.send_paths (None: no kernel trace)
    qdisc_holds: pd.DataFrame | None = None
    send_paths: pd.DataFrame | None = None
    no_probes: bool = False  # the kernel trace holds no tcp_probe event (a kernel without it)
    protos: dict[str, str] = field(default_factory=dict)
    frozen: pd.DataFrame | None = None  # t_start_ns, t_end_ns: stolen.frozen
    waits: pd.DataFrame | None = None  # stream, t_enter_ns, t_exit_ns, waited_in: waits.stream_waits
    comms: dict[int, str] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)  # what each input was built from
    transmit_pids: list[int] | None = None  # kernel threads sending for any socket (default: ksoftirqd/*)
    # The sender's host ran under a CPU quota (cgroup cpu.max): a runnable task waiting while its CPU
    # idles is throttled (its group's quota is spent), not waking up.
    cpu_quota: bool = False
    # the receivers' states on a host of their own (hostwire.timeline.receiver_host), or None
    receiver_host: ReceiverHost | None = None
    # what the recording could not see, one sentence each (hostwire.timeline.recording_notes)
    notes: list[str] = field(default_factory=list)

    def transmitters(self) -> list[int]:
        if self.transmit_pids is not None:
            return list(self.transmit_pids)
        if self.running is None or len(self.running) == 0:
            return []
        r = self.running
        ks = r[r["comm"].astype(str).str.startswith("ksoftirqd/").to_numpy()]
        return sorted(int(p) for p in ks["pid"].unique())

    def cannot_tell(self) -> list[str]:
        """The causes this input cannot tell apart, one sentence each."""
        out = []
        if self.states is None:
            out.append("without a kernel trace (raw/sched.tsv) preempted cannot be told apart from "
                       "blocked-in-call and app-idle: a runnable sender counts as one of them; qdisc is never told "
                       "(TCP's state from tcp_probe is in the trace) and send-path holds only after a send call")
        if self.no_probes:
            out.append("the kernel trace has no tcp_probe event (a kernel before 4.16, or an event list without it): "
                       "qdisc is never told and send-path holds only after a send call")
        if self.sources.get("qdisc_queue", "").startswith(("not paired", "partly paired")):
            out.append(f"the shaped device's queue is {self.sources['qdisc_queue']}: qdisc holds only where "
                       "tcp_probe shows TCP had sent a frame for the frames without a buffer")
        if self.sends is None:
            out.append("without system calls or the benchmark's writes blocked-in-call cannot be told apart "
                       "from app-idle")
        if self.backlog is None:
            out.append("without the writes the backlog is unknown: wire-busy holds whenever another stream "
                       "holds the link, awaiting-ack whenever an acknowledgement released a full window, and "
                       "the application's causes are not gated on an empty backlog")
        if self.window is None or not np.isfinite(pd.to_numeric(self.window["window_bytes"],
                                                                errors="coerce")).any():
            out.append("the receiver's window is unknown (no handshake captured): receiver-window is never told")
        return out + list(self.notes)
