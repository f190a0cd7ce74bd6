"""What `hostwire gaps` reads from a run (hostwire.timeline.gaps.GapInputs), gathered from its
timeline: the capture (required), the kernel trace, the system calls or the benchmark's writes,
and the /proc/stat samples when present."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from hostwire.errors import InputError
from hostwire.timeline.build import Timeline, link_rate_bps
from hostwire.timeline.sequence import late_acknowledgements, sequence_steps, usable_window

if TYPE_CHECKING:
    from hostwire.run import Run
    from hostwire.timeline.gaps import GapInputs


def gap_inputs(run: Run, rate_text: str | None = None) -> GapInputs:
    """Everything hostwire.timeline.gaps.explain reads, from what this run recorded: the capture
    (required), the kernel trace, the system calls or the benchmark's writes when present."""
    from hostwire.metrics.streams import TCP, label_flows
    from hostwire.timeline.gaps import GapInputs
    from hostwire.timeline.tcp_waits import sender_waits

    if not run.has("raw/wire.pcap"):
        raise InputError(f"{run.path}: gaps needs raw/wire.pcap; this run has no wire capture")
    tl = Timeline.of(run)
    data = tl.data_frames()
    labelled = label_flows(run.df_frames())
    sender_side = set(data["src"].astype(str)) if len(data) else set()
    link = labelled[labelled["src"].astype(str).isin(sender_side).to_numpy()]
    link = link.assign(stream=link["stream"].astype(str))
    tcp = labelled[labelled["proto"].to_numpy() == TCP]
    tcp = tcp.assign(stream=tcp["stream"].cat.remove_unused_categories())
    steps = sequence_steps(tcp)
    window = usable_window(tcp, steps)
    late_acks = late_acknowledgements(tcp, steps)
    awaiting, timeouts = sender_waits(steps)
    protos = {str(s): "tcp" if int(p) == TCP else "udp" for s, p in
              data.groupby("stream", sort=False)["proto"].first().items()} if len(data) else {}
    streams = tl.df_streams()
    senders = {str(s): int(p) for s, p in zip(streams["stream"], streams["sender_pid"]) if int(p) > 0}
    receivers = {str(s): int(p) for s, p in zip(streams["stream"], streams["receiver_pid"]) if int(p) > 0}
    sources = {"frames": "raw/wire.pcap"}
    states = running_ = None
    if run.has("raw/sched.tsv"):
        states, running_ = tl.df_task_states(), tl.df_running()
        sources["states"] = "raw/sched.tsv"
    writes = tl.writes()
    sends = backlog_ = None
    if len(writes):
        sends = writes[["stream", "t_enter_ns", "t_exit_ns"]]
        backlog_ = tl.df_backlog()
        sources["sends"] = "raw/syscalls.tsv" if (writes["source"] == "syscalls").all() else "raw/bench/send-*.tsv"
    return GapInputs(data=data, rate_bps=link_rate_bps(run, rate_text), senders=senders, receivers=receivers, link=link,
                     states=states, running=running_, sends=sends, backlog=backlog_, window=window,
                     late_acks=late_acks, awaiting_acks=awaiting, retransmit_timeouts=timeouts, protos=protos,
                     comms=process_names(tl, set(senders.values())), frozen=frozen_host(run),
                     cpu_quota=float(run.point_value("sender_cpu_share")) > 0, sources=sources)


def frozen_host(run: Run) -> pd.DataFrame | None:
    """When the hypervisor ran none of the host's CPUs (hostwire.timeline.stolen.frozen): needs
    the kernel trace and the /proc/stat samples."""
    from hostwire.timeline.stolen import frozen

    if not (run.has("raw/sched.tsv") and run.has("raw/resources.tsv")):
        return None
    samples = run.df_resources()
    events = np.concatenate([run.df_sched()["t_ns"].to_numpy(), run.df_frames()["t_ns"].to_numpy()])
    return frozen(events, samples, int(samples.attrs.get("meta", {}).get("tick_ns", 10_000_000)))


def process_names(tl: Timeline, pids: set[int]) -> dict[int, str]:
    """pid -> the process's name: the comm the kernel trace last saw it run under, else its
    benchmark role, else none."""
    names = {pid: role for pid, role in tl.roles().items() if pid in pids}
    if tl.run.has("raw/sched.tsv") and pids:
        running_ = tl.df_running()
        mine = running_[running_["pid"].isin(list(pids)).to_numpy()].sort_values("t_start_ns", kind="stable")
        names.update({int(p): str(c) for p, c in mine.groupby("pid", sort=False)["comm"].last().items()})
    return names
