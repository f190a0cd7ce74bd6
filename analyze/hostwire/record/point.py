"""A run point: one grid point's parameters (the benchmark, the link, the collectors) and their
checks. A value that a recorded run's manifest holds (`point`), so it lives apart from the code
that records: reading or analysing a run never imports hostwire.record.runner."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from hostwire.errors import UsageError
from hostwire.record.link import LinkSpec
from hostwire.units import parse_cpu_list, parse_rate

SYSCALL_BACKENDS = ("none", "tracefs", "ptrace", "preload")
KERNEL_SOURCES = ("tracefs", "event")


# Limits of hw-bench main's options (benchmark/main.c): checked here too, so that a bad point is
# refused before any namespace, collector or process starts.
MAX_PROCESSES_EACH = 1000
MAX_PROCESSES = 1024
SIEVE_LOG2_RANGE = (1, 30)
MAX_IO_SIZE = 64 << 20
LOG_CAPACITY_RANGE = (1, 1 << 28)
# hw-bench main's longest duration (common/hwargs.c, hw_parse_duration_ns): one day, for each of
# warmup_s, duration_s, quiet_s, think_s and the receiver's pause; duration_s at least 1 ms.
MAX_SECONDS = 86400.0
MIN_DURATION_S = 0.001
CAPTURE_SIDES = ("tx", "rx")
# The collector sets a campaign can take as one factor (`collectors`): each sets capture,
# kernel_trace and syscalls together (hostwire overhead measures what each costs).
COLLECTOR_SETS: dict[str, tuple[bool, bool, str]] = {
    "none": (False, False, "none"),
    "wire": (True, False, "none"),
    "kernel": (False, True, "none"),
    "kernel+tracefs": (False, True, "tracefs"),
    "kernel+ptrace": (False, True, "ptrace"),
    "kernel+preload": (False, True, "preload"),
    "wire+kernel": (True, True, "none"),
    "wire+kernel+tracefs": (True, True, "tracefs"),
    "wire+kernel+ptrace": (True, True, "ptrace"),
    "wire+kernel+preload": (True, True, "preload"),
    "ptrace": (False, False, "ptrace"),
    "preload": (False, False, "preload"),
}


class PointError(UsageError):
    """A parameter that cannot run: `keys` are the parameters at fault, the first the one to fix
    (a combination such as senders + background names them all)."""

    def __init__(self, keys: tuple[str, ...], message: str) -> None:
        super().__init__(message)
        self.keys = keys


@dataclass
class RunPoint:
    """One grid point: the benchmark's parameters and the link."""

    senders: int = 2
    background: int = 2
    sieve_log2: int = 20  # hw-bench main's own default: one round over 1 MiB
    read_size: int = 8192
    write_size: int | None = None
    warmup_s: float = 1.0
    duration_s: float = 3.0
    quiet_s: float = 0.5
    link_rate: str = "10mbit"
    link_qdisc: str = LinkSpec.qdisc  # the most wire-like shaper measured here (capture/README.md)
    # The shaper's queue in full frames (0: what 50 ms at the rate holds, tbf's usual setting).
    # 1000 is what Linux gives an Ethernet interface (txqueuelen): a host's own frames wait for
    # the wire instead of being dropped (capture/README.md, "The shaper's queue").
    link_queue: int = 1000
    topology: str = "netns"  # "netns" (two namespaces) or "loopback"
    sender_cpus: str = "0"
    receiver_cpus: str = "1"
    log_capacity: int = 262144
    capture: bool = True  # hw-wirecap on the link
    # Where the capture taps the link: "tx", the sender's end (stamps taken as the shaper hands
    # each frame to the veth, the closest to a wire; capture/README.md), or "rx", the receiver's.
    capture_side: str = "tx"
    # The sender host's CPU time, in CPUs' worth per period (0.25: a quarter of one CPU), capped by
    # a cgroup (hostwire.record.cpulimit); 0: no cap. Recreates the 1997 regime, where the sender's CPU
    # and not the wire was the bottleneck.
    sender_cpu_share: float = 0.0
    # The sender host's receive work (the ACKs, and the segments TCP sends from them) steered by
    # RPS to sender_cpus, where the scheduler and the quota charge it: the sender host does all its
    # own network work, as a 1997 host did. False: it runs on the CPU that hands the ACK to the
    # veth, the receiver's, and no quota of the sender's sees it (docs/paper-comparison.md).
    sender_rps: bool = False
    # The collectors' kernel buffers in KiB (0: each tool's default), and whether hw-schedtrace
    # drains its buffers while recording: small buffers or no draining make a run lossy on purpose
    # (to test that every loss is counted and named).
    capture_buffer_kib: int = 0
    # Workloads whose gaps have a known cause: each sender sleeps think_s after each write (an
    # application with think time), and each receiving process stops reading for
    # receiver_pause_s at receiver_pause_at_s after the window's start (a receiver that falls
    # behind; 0: never).
    think_s: float = 0.0
    receiver_pause_at_s: float = 0.0
    receiver_pause_s: float = 0.0
    receiver_rcvbuf: int = 0  # the receiver's SO_RCVBUF in bytes (0: the kernel's autotuning)
    # Background processes (hw-bench sieve) on the receiver's host, pinned to receiver_cpus: a
    # receiver that waits for its CPU ([hosts] runs only; docs/hosts.md).
    receiver_background: int = 0
    trace_buffer_kib: int = 0
    trace_drain: bool = True
    kernel_trace: bool = True  # hw-schedtrace: scheduler and network events
    # What the kernel timeline holds: "tracefs", the stock events (any kernel), or "event", those
    # and the scheduler's state at every switch, custom:sched_switch_ext_tp of the patched kernel
    # (hw-schedtrace --switch-ext; kernel-patches/, vm mode with kernel = "patched")
    kernel_source: str = "tracefs"
    syscalls: str = "none"  # I/O system calls of the benchmark: none, tracefs, ptrace or preload
    # A collector set (COLLECTOR_SETS: "none", "kernel", "kernel+ptrace", ...) that sets capture,
    # kernel_trace and syscalls at once, over what they say; "" (the default): those three as given.
    collectors: str = ""

    def __post_init__(self) -> None:
        if self.collectors in COLLECTOR_SETS:
            self.capture, self.kernel_trace, self.syscalls = COLLECTOR_SETS[self.collectors]

    def link(self) -> LinkSpec:
        return LinkSpec(self.link_rate, self.link_qdisc, queue_frames=self.link_queue or None)

    def validate(self) -> None:
        """Raises UsageError naming the first parameter that hw-bench, the topology or the
        collectors would refuse, so that nothing starts for a point that cannot run."""
        _whole(self, "senders", 0, MAX_PROCESSES_EACH)
        _whole(self, "background", 0, MAX_PROCESSES_EACH)
        _whole(self, "receiver_background", 0, MAX_PROCESSES_EACH)
        if self.senders + self.background == 0:
            raise PointError(("senders", "background"), "senders = 0 and background = 0: a run needs at least one process")
        if self.senders + self.background > MAX_PROCESSES:
            raise PointError(("senders", "background"), f"senders + background = {self.senders + self.background}: "
                             f"at most {MAX_PROCESSES} processes in all")
        _whole(self, "sieve_log2", *SIEVE_LOG2_RANGE)
        _whole(self, "read_size", 1, MAX_IO_SIZE)
        if self.write_size is not None:
            _whole(self, "write_size", 1, MAX_IO_SIZE)
        _whole(self, "log_capacity", *LOG_CAPACITY_RANGE)
        _whole(self, "link_queue", 0, 1_000_000)
        _whole(self, "capture_buffer_kib", 0, 1 << 22)
        if self.receiver_rcvbuf:
            _whole(self, "receiver_rcvbuf", 1024, 1 << 30)
        for name in ("think_s", "receiver_pause_at_s", "receiver_pause_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise PointError((name,), f"{name} = {value!r}: expected a number of seconds, 0 or more")
            if value > MAX_SECONDS:
                raise PointError((name,), f"{name} = {value!r}: at most {MAX_SECONDS:g} s (one day, hw-bench's limit), got {value!r}")
        _whole(self, "trace_buffer_kib", 0, 1 << 22)
        if not isinstance(self.sender_rps, bool):
            raise PointError(("sender_rps",), f"sender_rps = {self.sender_rps!r}: expected true or false")
        if not isinstance(self.trace_drain, bool):
            raise PointError(("trace_drain",), f"trace_drain = {self.trace_drain!r}: expected true or false")
        cpus = os.cpu_count() or 1
        for name in ("sender_cpus", "receiver_cpus"):
            try:
                listed = parse_cpu_list(getattr(self, name))
            except UsageError as err:
                raise PointError((name,), f"{name} = {getattr(self, name)!r}: {str(err).split(': ', 1)[-1]}") from None
            if not listed:
                raise PointError((name,), f"{name} = {getattr(self, name)!r}: expected at least one CPU")
            for cpu in listed:
                if cpu >= cpus:
                    raise PointError((name,), f"{name} = {getattr(self, name)!r}: this machine has CPUs 0..{cpus - 1}")
        share = self.sender_cpu_share
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not math.isfinite(share) \
                or not 0 <= share <= len(parse_cpu_list(self.sender_cpus) or [0]):
            raise PointError(("sender_cpu_share", "sender_cpus"), f"sender_cpu_share = {share!r}: expected 0 (no cap) or a share of the sender's "
                             f"{len(parse_cpu_list(self.sender_cpus) or [0])} CPU(s), e.g. 0.25")
        if 0 < share < 0.01:
            raise PointError(("sender_cpu_share",), f"sender_cpu_share = {share!r}: at least 0.01 (1 ms of CPU per 100 ms)")
        for name, least in (("warmup_s", 0.0), ("duration_s", None), ("quiet_s", 0.0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise PointError((name,), f"{name} = {value!r}: expected a number of seconds")
            if (least is None and value <= 0) or (least is not None and value < least):
                raise PointError((name,), f"{name} = {value!r}: expected " + ("more than 0 s" if least is None else "0 s or more"))
            if least is None and value < MIN_DURATION_S:
                raise PointError((name,), f"{name} = {value!r}: at least {MIN_DURATION_S:g} s")
            if value > MAX_SECONDS:
                raise PointError((name,), f"{name} = {value!r}: at most {MAX_SECONDS:g} s (one day, hw-bench's limit), got {value!r}")
        if self.collectors and self.collectors not in COLLECTOR_SETS:
            raise PointError(("collectors",), f"collectors = {self.collectors!r}: expected one of {', '.join(COLLECTOR_SETS)} "
                             "(or leave it out and set capture, kernel_trace and syscalls)")
        for name, allowed in (("syscalls", SYSCALL_BACKENDS), ("topology", ("netns", "loopback")),
                              ("capture_side", CAPTURE_SIDES), ("kernel_source", KERNEL_SOURCES)):
            if getattr(self, name) not in allowed:
                raise PointError((name,), f"{name} = {getattr(self, name)!r}: expected one of {', '.join(allowed)}")
        for name in ("capture", "kernel_trace"):
            if not isinstance(getattr(self, name), bool):
                raise PointError((name,), f"{name} = {getattr(self, name)!r}: expected true or false")
        try:
            parse_rate(self.link_rate)
        except UsageError as err:
            raise PointError(("link_rate",), f"link_rate = {self.link_rate!r}: {str(err).split(': ', 1)[-1]}") from None
        try:
            self.link().tc_args("x")
        except UsageError as err:
            raise PointError(("link_qdisc",), f"link_qdisc = {self.link_qdisc!r}: {str(err).split(': ', 1)[-1]}") from None


def _whole(point: RunPoint, name: str, least: int, most: int) -> None:
    value = getattr(point, name)
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= most:
        raise PointError((name,), f"{name} = {value!r}: expected a whole number from {least} to {most}")
