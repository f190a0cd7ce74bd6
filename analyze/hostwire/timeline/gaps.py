"""Every long gap between consecutive data frames of a stream, split into causes that add up
exactly to the gap (docs/timeline.md, "Gaps", holds each rule in full, its precedence and why).

Each cause is a set of time intervals (its condition holds there); all their boundaries cut each
gap into elementary segments on which every condition is constant, and each segment goes to the
first cause that holds, in the order of PRECEDENCE: on-wire, vcpu-stolen, receiver-window (the
window), retransmit-timeout, wire-busy, preempted, qdisc, blocked-in-call, app-idle,
receiver-window (late acknowledgements), awaiting-ack, send-path, unexplained. The TCP causes
never hold for a UDP flow; the application's causes need an empty backlog (without writes known
that gating is left out and the table says so). With a trace of the receiver's own host,
receiver-window's time is split further (hostwire.timeline.receiver_host); the app-idle time
names the calls the sender sat in (hostwire.timeline.waits). All stamps are int64 ns, so the parts
sum exactly to the gap."""

from __future__ import annotations

import copy
import os
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from hostwire.errors import InputError
from hostwire.timeline.gap_inputs import GapInputs
from hostwire.timeline import receiver_host
from hostwire.timeline.gap_tables import (CAUSE_NAMES, CAUSES, GAP_COLUMNS, RECEIVER_PARTS, TCP_CAUSES, TEXT_COLUMNS,
                                          Sink, Whole, summary)
from hostwire.timeline.gap_tasks import describe, idle_on, preempter_table, preempters
from hostwire.timeline.intervals import (NONE, ByStream, Cpus, Runnable, Spans, ascending, covered, is_ascending,
                                         level_rows, names_in, numeric, restrict, steps, stream_codes, union,
                                         unique_sorted, within)
from hostwire.timeline.waits import Waits, describe_waits
from hostwire.window import Window

if TYPE_CHECKING:
    from hostwire.timeline.kernel_slabs import Slab

# gap_tables' names are read here too (gaps.CAUSES, gaps.summary)
__all__ = ["CAUSES", "CAUSE_NAMES", "GAP_COLUMNS", "TCP_CAUSES", "TEXT_COLUMNS", "GapInputs", "Segments", "classify",
           "explain", "explain_into", "summary", "wire_ns"]

# the one piece of an explanation that is not cut in slabs (hostwire.timeline.kernel_slabs.OPEN_LO/HI)
OPEN_LO, OPEN_HI = -(1 << 62), 1 << 62



def wire_ns(wire_len: np.ndarray, rate_bit_s: float) -> np.ndarray:
    """Time a frame of wire_len bytes holds the link, ns (rounded up)."""
    return np.ceil(np.asarray(wire_len, dtype=np.float64) * 8e9 / float(rate_bit_s)).astype(np.int64)


@dataclass
class Segments:
    """The elementary segments of one stream's gaps (every boundary of every condition cuts them,
    so each condition is constant on each) and what holds on each: `holds[name]` for the
    condition sets of _conditions; `wait_cpu`, the CPU whose run queue held the sender (backlog
    empty) or a task that moves the stream's bytes on (backlog not empty) while another task ran
    there (-1: none); `backlog_known`: whether the backlog gates the causes."""

    start: np.ndarray
    end: np.ndarray
    gap: np.ndarray  # index of the gap each segment lies in
    holds: dict[str, np.ndarray]
    wait_cpu: np.ndarray
    backlog_known: bool = True

    @property
    def backlog_empty(self) -> np.ndarray:
        """The application's causes need an empty backlog (or an unknown one)."""
        return ~self.holds["backlog"] if self.backlog_known else np.ones(len(self.start), dtype=bool)

    @property
    def backlog_queued(self) -> np.ndarray:
        """The link's and the receiver's causes need bytes queued (or an unknown backlog)."""
        return self.holds["backlog"] if self.backlog_known else np.ones(len(self.start), dtype=bool)


# The causes, one condition each on the segments (docs/timeline.md, "Gaps"; the module docstring).

def on_wire(s: Segments) -> np.ndarray:
    """The stream's own previous frame still holds the link."""
    return s.holds["on_wire"]


def vcpu_stolen(s: Segments) -> np.ndarray:
    """The hypervisor ran none of the host's CPUs: nothing in it could move."""
    return s.holds["vcpu_stolen"]


def receiver_window(s: Segments) -> np.ndarray:
    """The usable window the receiver advertised is below one segment."""
    return s.holds["receiver_window"]


def wire_busy(s: Segments) -> np.ndarray:
    """Bytes are queued and another stream's frame holds the link."""
    return s.holds["busy"] & s.backlog_queued


def preempted(s: Segments) -> np.ndarray:
    """The sender (or a task that moves its bytes on) is runnable while another task runs."""
    return s.wait_cpu >= 0


def blocked_in_call(s: Segments) -> np.ndarray:
    """Nothing is queued and the sender is inside a send call that has not returned."""
    return s.holds["in_call"] & s.backlog_empty


def app_idle(s: Segments) -> np.ndarray:
    """Nothing is queued and the sender is outside any send call."""
    return ~s.holds["in_call"] & s.backlog_empty


def late_acknowledgement(s: Segments) -> np.ndarray:
    """Bytes are queued and the oldest byte in flight waits for its acknowledgement: the
    receiver holds the sender back (a cause of receiver_window's)."""
    return s.holds["late_ack"] & s.backlog_queued


def retransmit_timeout(s: Segments) -> np.ndarray:
    """The gap ends with a retransmission that a timer, not an acknowledgement, sent."""
    return s.holds["retransmit_timeout"]


def awaiting_ack(s: Segments) -> np.ndarray:
    """Bytes are queued, the window was full and an acknowledgement released the next frame."""
    return s.holds["awaiting_ack"] & s.backlog_queued


def qdisc(s: Segments) -> np.ndarray:
    """TCP (or a UDP send) had handed the next frame down and the device's queueing discipline held
    it (qdisc_waits, device_queue)."""
    return s.holds["qdisc"]


def send_path(s: Segments) -> np.ndarray:
    """The stack moved the bytes from the event that released them to the wire (qdisc_waits)."""
    return s.holds["send_path"]


def unexplained(s: Segments) -> np.ndarray:
    return np.ones(len(s.start), dtype=bool)


# Each segment goes to the first cause whose condition holds. A host the hypervisor stopped moves
# nothing, whatever else holds. The receiver holds the sender back
# twice: by its window (second), and by acknowledging late when nothing of the host holds the
# queued bytes. A retransmission timer holds the bytes whatever the host does (its silence comes
# before the host's causes); waiting for the acknowledgements that the congestion window needs
# counts only where nothing else holds the queued bytes. A frame TCP has sent waits in the queueing
# discipline unless the link or a CPU holds it first; the stack's own path from a release to the
# frame takes only what nothing else explains (last before unexplained).
PRECEDENCE: tuple[tuple[str, Callable[[Segments], np.ndarray]], ...] = (
    ("on_wire", on_wire), ("vcpu_stolen", vcpu_stolen), ("receiver_window", receiver_window),
    ("retransmit_timeout", retransmit_timeout),
    ("wire_busy", wire_busy), ("preempted", preempted), ("qdisc", qdisc), ("blocked_in_call", blocked_in_call),
    ("app_idle", app_idle), ("receiver_window", late_acknowledgement), ("awaiting_ack", awaiting_ack),
    ("send_path", send_path), ("unexplained", unexplained))


def classify(s: Segments) -> np.ndarray:
    """Each segment's cause, as its index in CAUSES, by PRECEDENCE."""
    return np.select([condition(s) for _, condition in PRECEDENCE],
                     [CAUSES.index(cause) for cause, _ in PRECEDENCE], default=CAUSES.index("unexplained"))


class _Explainer:
    """The inputs of explain() prepared once for every stream: split by stream, CPU and task."""

    def __init__(self, inputs: GapInputs, min_gap_ns: int | None = None, window: Window | None = None) -> None:
        data = inputs.data
        self.inputs = inputs
        self.min_gap_ns, self.window = min_gap_ns, window
        link = inputs.link if inputs.link is not None else data
        # in time order, for busy() to slice a piece's frames by time (a capture's frames are already)
        # the link's columns as they are (a long run's are in time order, its streams a categorical's
        # small codes): views, not copies; busy() makes each piece's times on the link
        self.link_t = np.asarray(link["t_ns"].to_numpy(), dtype=np.int64)
        self.link_len = link["wire_len"].to_numpy()
        if isinstance(link["stream"].dtype, pd.CategoricalDtype):
            self.link_code, link_names = link["stream"].cat.codes.to_numpy(), link["stream"].cat.categories.astype(str)
        else:
            self.link_code, link_names = stream_codes(link["stream"])
        if not is_ascending(self.link_t):
            in_order = np.argsort(self.link_t, kind="stable")
            self.link_t, self.link_len, self.link_code = self.link_t[in_order], self.link_len[in_order], self.link_code[in_order]
        self.longest_busy_ns = int(wire_ns(np.r_[self.link_len.max()], inputs.rate_bit_s)[0]) if len(self.link_len) else 0
        self.link_code_of = {str(n): k for k, n in enumerate(link_names)}
        self.runnable = Runnable(inputs.states)
        self.waits = Waits(inputs.waits)  # the sending threads' calls: what app-idle time waited in
        self.cpus = Cpus(inputs.running)
        self.has_running = inputs.running is not None
        self.transmitters = inputs.transmitters()
        # each stream's frames as views of the table (by stream, then time); a frame's time on the
        # link is made where a gap needs it
        self.frames = ByStream(data if "payload_len" in data.columns else data.assign(payload_len=1),
                               ("t_ns", "wire_len", "payload_len"), order_by="t_ns")
        fz = inputs.frozen
        self.frozen = union(fz["t_start_ns"].to_numpy(np.int64), fz["t_end_ns"].to_numpy(np.int64)) \
            if fz is not None and len(fz) else NONE
        # the per-row inputs of the conditions, split by stream once; each piece reads its rows
        i = inputs
        self.levels = {"receiver_window": ByStream(numeric(i.window, "window_bytes"), ("t_ns", "value"), "t_ns"),
                       "backlog": ByStream(numeric(i.backlog, "backlog_bytes"), ("t_ns", "value"), "t_ns")}
        self.spans = {key: Spans(rows, start, end) for key, rows, start, end in (
            ("late_ack", i.late_acks, "t_start_ns", "t_end_ns"), ("in_call", i.sends, "t_enter_ns", "t_exit_ns"),
            ("awaiting_ack", i.awaiting_acks, "t_start_ns", "t_end_ns"),
            ("retransmit_timeout", i.retransmit_timeouts, "t_start_ns", "t_end_ns"),
            ("qdisc", i.qdisc_holds, "t_start_ns", "t_end_ns"), ("send_path", i.send_paths, "t_start_ns", "t_end_ns"))}
        # a stream's largest segment, and its last frame (a level holds until then: no gap ends later)
        self.mss = {n: int(f["payload_len"].max()) for n, f in self.frames.rows.items()}
        self.last = {n: int(f["t_ns"][-1]) for n, f in self.frames.rows.items()}

    def with_kernel(self, states: pd.DataFrame, running: pd.DataFrame) -> _Explainer:
        """The same explainer on other kernel tables (one slab's: hostwire.timeline.kernel_slabs)."""
        other = copy.copy(self)
        other.runnable, other.cpus, other.has_running = Runnable(states), Cpus(running), True
        return other

    def gaps_in(self, name: str, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        """The stream's gaps to explain that reach into [lo, hi): first frame's stamp, next
        frame's stamp, the first frame's time on the link, the threshold; None when there is none."""
        f = self.frames.get(name)
        if f is None or len(f["t_ns"]) < 2:
            return None
        t = f["t_ns"]
        # gap k lies between frames k and k + 1: it reaches into [lo, hi) when t[k + 1] > lo and t[k] < hi
        k0 = max(int(np.searchsorted(t, lo, side="right")) - 1, 0)
        k1 = min(int(np.searchsorted(t, hi, side="left")), len(t) - 1)
        if k1 <= k0:
            return None
        first, nxt, on_link = t[k0:k1], t[k0 + 1:k1 + 1], wire_ns(f["wire_len"][k0:k1], self.inputs.rate_bit_s)
        threshold = np.full(len(first), int(self.min_gap_ns)) if self.min_gap_ns is not None else 2 * on_link
        chosen = nxt - first > threshold
        if self.window is not None:
            chosen &= (first >= self.window.start_ns) & (nxt <= self.window.end_ns)
        if not chosen.any():
            return None
        return first[chosen], nxt[chosen], on_link[chosen], threshold[chosen]

    def conditions_in(self, name: str, lo: int, hi: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """The conditions the per-row inputs give, on [lo, hi), from the rows that reach into it: a
        level's rows from the last one at or before lo to the first at or after hi (each holds
        until the next), an interval's rows that start no earlier than the stream's longest
        interval before lo. Within [lo, hi) their bounds are those of the whole run's intervals,
        so each piece's segments are the whole explanation's."""
        tcp = self.inputs.protos.get(name, "tcp") == "tcp"  # a UDP flow has no window, acknowledgements or retransmissions
        # but its datagrams wait in a shaper's queue as TCP's frames do (qdisc from device_queue's pairing)
        both = ("in_call", "send_path", "qdisc")
        out = {"receiver_window": steps(level_rows(self.levels["receiver_window"].get(name), lo, hi),
                                        lambda v: v < self.mss[name], self.last[name]) if tcp else NONE,
               "backlog": steps(level_rows(self.levels["backlog"].get(name), lo, hi), lambda v: v > 0, self.last[name])}
        for key, spans in self.spans.items():
            out[key] = spans.between(name, lo, hi) if tcp or key in both else NONE
        return out

    def busy(self, name: str, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """When another stream's frame holds the link, on [lo, hi): made per piece from the frames
        that reach into it (a frame reaches at most longest_busy_ns past its stamp), so no stream
        keeps the whole link's intervals. On [lo, hi) it is the union of all the others' frames."""
        first = int(np.searchsorted(self.link_t, lo - self.longest_busy_ns))
        last = int(np.searchsorted(self.link_t, hi))
        t, code = self.link_t[first:last], self.link_code[first:last]
        other = code != self.link_code_of.get(name, -2)
        return union(t[other], t[other] + wire_ns(self.link_len[first:last][other], self.inputs.rate_bit_s))

    def kernel_conditions(self, name: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """The conditions the kernel tables give: the sender waits, a helper waits."""
        sets = {"waiting": self.runnable.of(self.inputs.senders.get(name, -1))[:2]}
        for k, (starts, ends, _) in enumerate(self.helpers(name)):
            sets[f"helper{k}"] = (starts, ends)
        if self.inputs.receiver_host is not None:  # what the receiver did on its own host
            sets.update(self.inputs.receiver_host.conditions(name))
        return sets

    def helpers(self, name: str) -> list[tuple[np.ndarray, ...]]:
        """The runnable intervals of the tasks that move the stream's queued bytes on: the
        kernel's transmit threads, and the stream's receiver when it runs on this host."""
        if self.inputs.states is None:
            return []
        receiver = self.inputs.receivers.get(name, -1)
        return [self.runnable.of(pid) for pid in [*self.transmitters, *([receiver] if receiver > 0 else [])]]

    def segments(self, name: str, first: np.ndarray, nxt: np.ndarray,
                 sets: dict[str, tuple[np.ndarray, np.ndarray]]) -> Segments:
        """The elementary segments: every boundary inside a gap, the CPUs' task changes included
        (the gaps are disjoint and sorted by their start; so are each set's starts, and its ends)."""
        cuts = [first, nxt, within(self.cpus.starts, first, nxt)]
        for starts, ends in sets.values():
            cuts += [within(starts, first, nxt), within(ascending(ends), first, nxt)]
        x = unique_sorted(np.concatenate(cuts))
        start, end = x[:-1], x[1:]
        gap = np.searchsorted(first, start, side="right") - 1
        inside = gap >= 0
        inside[inside] = start[inside] < nxt[gap[inside]]
        start, end, gap = start[inside], end[inside], gap[inside]
        holds = {k: covered(start, *v)[0] for k, v in sets.items()}
        seg = Segments(start, end, gap, holds, np.full(len(start), -1, np.int64), self.inputs.backlog is not None)
        seg.wait_cpu = self.wait_cpu(name, seg)
        return seg

    def wait_cpu(self, name: str, seg: Segments) -> np.ndarray:
        """The CPU whose queue held the sender (backlog empty) or a helper (backlog queued) while
        another task ran there; -1 elsewhere. Waiting while the CPU idles is the wake-up's
        latency, not another task's turn; under a CPU quota it is the quota holding the task
        back (the preempter is then the idle task)."""
        starts, ends, cpus_of = self.runnable.of(self.inputs.senders.get(name, -1))
        waiting, which = covered(seg.start, starts, ends)
        wait_cpu = np.where(waiting & seg.backlog_empty, cpus_of[np.maximum(which, 0)] if len(cpus_of) else -1, -1)
        if seg.backlog_known:
            for h_starts, h_ends, h_cpus in self.helpers(name):
                on, which = covered(seg.start, h_starts, h_ends)
                take = on & seg.holds["backlog"] & (wait_cpu < 0)
                wait_cpu = np.where(take, h_cpus[np.maximum(which, 0)] if len(h_cpus) else -1, wait_cpu)
        if not self.inputs.cpu_quota:
            wait_cpu = np.where(idle_on(self.cpus, wait_cpu, seg.start), -1, wait_cpu)
        return wait_cpu

    def piece(self, name: str, found: tuple[np.ndarray, ...], lo: int,
              hi: int) -> tuple[np.ndarray, pd.DataFrame, pd.DataFrame]:
        """The ns of each cause in the parts of the stream's gaps (found) that lie in [lo, hi), per
        gap and cause, the tasks that ran while the sender waited there (gap_tasks.preempters' rows),
        and the calls its app-idle time was spent in (waits.Waits.ns_in's rows)."""
        first, nxt, on_link = found[0], found[1], found[2]
        # the stream's own previous frame holds the link; the hypervisor ran none of the host's CPUs
        sets = {"on_wire": union(first, first + np.minimum(on_link, nxt - first)), "vcpu_stolen": self.frozen}
        parts = np.zeros((len(first), len(CAUSES) + len(RECEIVER_PARTS)), dtype=np.int64)
        start, end = np.maximum(first, lo), np.minimum(nxt, hi)  # (gaps_in's gaps all reach into [lo, hi))
        here = {k: restrict(v, lo, hi) for k, v in {**sets, **self.kernel_conditions(name),
                                                    **self.conditions_in(name, lo, hi)}.items()}
        here["busy"] = self.busy(name, lo, hi)
        seg = self.segments(name, start, end, here)
        cause = classify(seg)
        np.add.at(parts, (seg.gap, cause), seg.end - seg.start)
        if self.inputs.receiver_host is not None:  # receiver_window's time by the receiver host's states
            rw = cause == CAUSES.index("receiver_window")
            np.add.at(parts, (seg.gap[rw], len(CAUSES) + receiver_host.split({k: v[rw] for k, v in seg.holds.items()})),
                      (seg.end - seg.start)[rw])
        p, idle = cause == CAUSES.index("preempted"), cause == CAUSES.index("app_idle")
        return parts, preempters(seg.start[p], seg.end[p], seg.gap[p], seg.wait_cpu[p],
                                  self.cpus if self.has_running else None), \
            self.waits.ns_in(name, seg.start[idle], seg.end[idle], seg.gap[idle])

    def slab(self, name: str, lo: int, hi: int, carried: _Open | None) -> tuple[_Closed | None, _Open | None]:
        """The stream's gaps that close in [lo, hi), with what the earlier pieces gave the one
        carried into it; and the gap still open at hi, if any (a stream's gaps are disjoint: at
        most one crosses a bound)."""
        found = self.gaps_in(name, lo, hi)
        if found is None:
            return None, None
        parts, pre, waited = self.piece(name, found, lo, hi)
        rows, waits = [pre] if len(pre) else [], [waited] if len(waited) else []
        if carried is not None:  # the earlier pieces' share of the first gap, which began before lo
            assert int(found[0][0]) == carried.first, "a carried gap is the next piece's first"
            parts[0] += carried.parts
            rows, waits = carried.preempters + rows, carried.waits + waits
        closing = int(np.searchsorted(found[1], hi, side="right"))  # the gaps that end by hi
        carry = None
        if closing < len(found[0]):  # (an empty row set is not carried: a gap can span many slabs)
            carry = _Open(int(found[0][closing]), parts[closing].copy(),
                          *([r.assign(gap=0) for r in _rows_of(t, lambda gap: gap == closing)] for t in (rows, waits)))
        if closing == 0:
            return None, carry
        return _Closed([a[:closing] for a in found], parts[:closing],
                       *(_rows_of(t, lambda gap: gap < closing) for t in (rows, waits))), carry

    def table(self, name: str, found: list[np.ndarray], parts: np.ndarray, pre_rows: list[pd.DataFrame],
              wait_rows: list[pd.DataFrame]) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
        """Closed gaps' table and preempters from the sums of their pieces (the sender's name is
        the sink's to give: gap_tables.Sink.finish)."""
        first, nxt, _, threshold = found
        pid = int(self.inputs.senders.get(name, -1))
        table = pd.DataFrame({"stream": name, "proto": self.inputs.protos.get(name, "tcp"), "pid": pid, "comm": "",
                              "t_start_ns": first, "t_end_ns": nxt, "gap_ns": nxt - first,
                              "threshold_ns": threshold})
        for k, c in enumerate(CAUSES):
            table[f"{c}_ns"] = parts[:, k]
        pre = preempter_table(name, pre_rows, first)
        if self.inputs.cpu_quota and len(pre):
            pre.loc[pre["pid"].to_numpy() == 0, "role"] = "throttled"
        table["preempted_by"] = describe(pre, first)
        for k, c in enumerate(RECEIVER_PARTS):
            table[f"{c}_ns"] = parts[:, len(CAUSES) + k]
        rx = self.inputs.receiver_host
        table["receiver_preempted_by"] = rx.preempted_by(name, first, nxt) if rx is not None else ""
        waits = self.waits.table(name, wait_rows, first, parts[:, CAUSES.index("app_idle")])
        table["waited_in"] = describe_waits(waits, first)
        return table, pre, waits


def _rows_of(rows: list[pd.DataFrame], which: Callable[[np.ndarray], np.ndarray]) -> list[pd.DataFrame]:
    """The preempters' rows of the gaps chosen by their index, as one table (none when empty)."""
    chosen = [r[which(r["gap"].to_numpy())] for r in rows]
    chosen = [r for r in chosen if len(r)]
    return [pd.concat(chosen, ignore_index=True)] if len(chosen) > 1 else chosen


@dataclass
class _Closed:
    """Closed gaps not yet handed to the sink: their found arrays, parts and preempters' rows
    (gap: the index among them); pieces are joined so that tables are made a batch at a time."""

    found: list[np.ndarray]
    parts: np.ndarray
    preempters: list[pd.DataFrame]
    waits: list[pd.DataFrame]

    def join(self, more: _Closed) -> None:
        offset = len(self.parts)
        self.found = [np.concatenate([a, b]) for a, b in zip(self.found, more.found)]
        self.parts = np.concatenate([self.parts, more.parts])
        self.preempters += [r.assign(gap=r["gap"].to_numpy() + offset) for r in more.preempters]
        self.waits += [r.assign(gap=r["gap"].to_numpy() + offset) for r in more.waits]


EMIT_GAPS = 5_000  # closed gaps a stream gathers before they go to the sink as tables (pandas' cost is per table)


@dataclass
class _Open:
    """A gap still open at a piece's end: its first frame's stamp, each cause's ns so far, and the
    preempters' rows so far (their gap 0: it is the next piece's first)."""

    first: int
    parts: np.ndarray
    preempters: list[pd.DataFrame]
    waits: list[pd.DataFrame]


def explain(inputs: GapInputs, min_gap_ns: int | None = None, window: Window | None = None,
            streams: list[str] | None = None, slabs: Iterable[Slab] | None = None,
            on_comms: Callable[[], None] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The gaps longer than min_gap_ns (default: twice the time the gap's first frame holds the
    link) between consecutive data frames of each stream whose both frames lie in the window, with
    the ns of each cause (GAP_COLUMNS), and the tasks that ran while the sender waited
    (PREEMPTER_COLUMNS: per gap and task, ns and share of the gap's preempted time); the
    arguments are explain_into's."""
    whole = Whole()
    explain_into(whole, inputs, min_gap_ns, window, streams, slabs, on_comms)
    return whole.tables()


def explain_into(sink: Sink, inputs: GapInputs, min_gap_ns: int | None = None,
                 window: Window | None = None, streams: list[str] | None = None,
                 slabs: Iterable[Slab] | None = None, on_comms: Callable[[], None] | None = None) -> None:
    """explain()'s gaps, given to sink as they close (gap_tables.Sink), stream after stream within
    each piece. slabs: the kernel tables slab by slab (hostwire.timeline.kernel_slabs) instead of
    inputs' states and running: each cause holds on each instant by what holds then, so the parts
    of a gap in each slab add up to what the whole tables give, and what is held from one slab to
    the next is each stream's one open gap. on_comms: called once the slabs are read, before the
    sink names the senders (it may fill inputs.comms)."""
    data = inputs.data
    for col in ("t_ns", "stream", "wire_len"):
        if col not in data.columns:
            raise InputError(f"data frames: missing column {col}")
    if inputs.rate_bit_s <= 0:
        raise InputError(f"link rate {inputs.rate_bit_s}: expected > 0 bit/s")
    names = names_in(data["stream"])
    if streams:
        names = [n for n in names if n in streams]
    explainer = _Explainer(inputs, min_gap_ns, window)
    sink.begin(names, inputs.cannot_tell(), inputs.sources)
    carried: dict[str, _Open | None] = {n: None for n in names}
    gathered: dict[str, _Closed] = {}
    pieces = [(OPEN_LO, OPEN_HI, explainer)] if slabs is None else (
        (s.lo, s.hi, explainer.with_kernel(s.states, s.running)) for s in slabs)
    # the streams are independent; numpy's sorts and searches release the GIL
    with ThreadPoolExecutor(max(1, min(len(names), len(os.sched_getaffinity(0)), 4)),
                            thread_name_prefix="hostwire-gaps") as pool:
        for lo, hi, ex in pieces:
            before = dict(carried)
            for name, (closed, carry) in zip(names, pool.map(lambda n: ex.slab(n, lo, hi, before[n]), names)):
                carried[name] = carry
                if closed is not None and (held := gathered.get(name)) is not None:
                    held.join(closed)
                elif closed is not None:
                    gathered[name] = closed
                if name in gathered and (len(gathered[name].parts) >= EMIT_GAPS or hi == OPEN_HI):
                    done = gathered.pop(name)
                    sink.add(name, *explainer.table(name, done.found, done.parts, done.preempters, done.waits))
    assert not any(carried.values()) and not gathered, "the last piece reaches OPEN_HI: every gap has closed"
    if on_comms is not None:
        on_comms()
    pids = {n: int(inputs.senders.get(n, -1)) for n in names}
    sink.finish({n: inputs.comms.get(pid, "") if pid > 0 else "" for n, pid in pids.items()})
