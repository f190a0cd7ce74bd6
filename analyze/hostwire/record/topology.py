"""The default two-host topology: sender and receiver network namespaces
`hw<owner-pid>-<tag>-tx` and `hw<owner-pid>-<tag>-rx` joined by a veth pair
198.18.0.1/30 <-> 198.18.0.2/30 (RFC 2544 benchmarking range), offloads off, MTU 1500, a shaper
on the sender's egress. The names carry the `hw` prefix and the pid of the process that made
them, so that `hostwire doctor --cleanup` removes what a killed run left behind and nothing that
a live one still uses. The veth and the qdiscs live inside the namespaces and go with them."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
from dataclasses import dataclass, field

from hostwire.errors import HostwireError, UsageError
from hostwire.record.link import LinkSpec
from hostwire.units import parse_cpu_list

log = logging.getLogger(__name__)

SENDER_ADDR = "198.18.0.1"
RECEIVER_ADDR = "198.18.0.2"
PREFIX_LEN = 30
NAME_PREFIX = "hw"

def run_cmd(argv: list[str], netns: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a command (inside netns if given); a failure raises with the command and its stderr."""
    full = (["ip", "netns", "exec", netns] if netns else []) + argv
    try:
        proc = subprocess.run(full, capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        raise HostwireError(f"failed to run {argv[0]}: not installed (run 'make setup')") from None
    if check and proc.returncode != 0:
        reason = (proc.stderr or proc.stdout).strip().splitlines()
        raise HostwireError(f"failed to run '{' '.join(full)}': {reason[-1] if reason else proc.returncode}")
    return proc


def list_namespaces() -> list[str]:
    proc = run_cmd(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in proc.stdout.splitlines() if line.strip()]


_tags = iter(range(1, 1 << 30))


def _next_tag() -> str:
    return f"n{next(_tags)}"


@dataclass
class Topology:
    """Two namespaces and a veth. Use as a context manager: teardown always runs. `run_id` is a
    short tag (letters and digits, at most 12) unique among this process's live topologies."""

    run_id: str = field(default_factory=_next_tag)
    link: LinkSpec = field(default_factory=LinkSpec)
    receiver_cpus: str | None = None
    sender_rps_cpus: str | None = None  # RPS of the sender's veth: where its received ACKs are processed
    owner_pid: int = field(default_factory=os.getpid)
    up_done: bool = False

    @property
    def tx_ns(self) -> str:
        return f"{NAME_PREFIX}{self.owner_pid}-{self.run_id}-tx"

    @property
    def rx_ns(self) -> str:
        return f"{NAME_PREFIX}{self.owner_pid}-{self.run_id}-rx"

    @property
    def tx_dev(self) -> str:
        return f"{NAME_PREFIX}{self.run_id}t"

    @property
    def rx_dev(self) -> str:
        return f"{NAME_PREFIX}{self.run_id}r"

    def up(self) -> "Topology":
        if not re.fullmatch(r"[A-Za-z0-9]{1,12}", self.run_id):
            raise UsageError(f"topology tag {self.run_id!r}: expected 1 to 12 letters or digits")
        existing = set(list_namespaces())
        for ns in (self.tx_ns, self.rx_ns):
            if ns in existing:
                raise HostwireError(
                    f"network namespace {ns} exists already (a live or killed run?); "
                    "'hostwire doctor --cleanup' removes stale ones"
                )
        self.up_done = True  # from here on, teardown has something to remove
        run_cmd(["ip", "netns", "add", self.tx_ns])
        run_cmd(["ip", "netns", "add", self.rx_ns])
        run_cmd(["ip", "link", "add", self.tx_dev, "netns", self.tx_ns, "type", "veth",
                 "peer", "name", self.rx_dev, "netns", self.rx_ns])
        for ns, dev, addr in ((self.tx_ns, self.tx_dev, SENDER_ADDR), (self.rx_ns, self.rx_dev, RECEIVER_ADDR)):
            run_cmd(["ip", "link", "set", "lo", "up"], netns=ns)
            run_cmd(["ip", "link", "set", dev, "mtu", "1500"], netns=ns)
            run_cmd(["ip", "addr", "add", f"{addr}/{PREFIX_LEN}", "dev", dev], netns=ns)
            # One packet on the wire per Ethernet-sized frame: no segmentation or coalescing.
            run_cmd(["ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off", "tx", "off", "rx", "off"],
                    netns=ns, check=False)
            run_cmd(["ip", "link", "set", dev, "up"], netns=ns)
        for args in self.link.tc_args(self.tx_dev):
            run_cmd(["tc", *args], netns=self.tx_ns)
        if self.receiver_cpus is not None:
            self._steer_rps(self.rx_ns, self.rx_dev, self.receiver_cpus)
        if self.sender_rps_cpus is not None:
            self._steer_rps(self.tx_ns, self.tx_dev, self.sender_rps_cpus)
        log.debug("topology %s up: %s <-> %s", self.run_id, self.tx_ns, self.rx_ns)
        return self

    @staticmethod
    def _steer_rps(ns: str, dev: str, cpus: str) -> None:
        mask = 0
        for cpu in parse_cpu_list(cpus):
            mask |= 1 << cpu
        path = f"/sys/class/net/{dev}/queues/rx-0/rps_cpus"
        run_cmd(["sh", "-c", f"echo {mask:x} > {path}"], netns=ns, check=False)

    def down(self) -> None:
        if not self.up_done:
            return
        for ns in (self.tx_ns, self.rx_ns):
            run_cmd(["ip", "netns", "del", ns], check=False)
        self.up_done = False

    def qdisc_stats(self) -> dict[str, int] | None:
        """The counters of the sender's root egress qdisc (`tc -s -j`; a root's counters cover
        its children): packets, bytes, drops, overlimits, requeues, backlog, qlen; None when tc
        cannot tell."""
        proc = run_cmd(["tc", "-s", "-j", "qdisc", "show", "dev", self.tx_dev], netns=self.tx_ns, check=False)
        try:
            qdiscs = json.loads(proc.stdout) if proc.returncode == 0 else None
        except ValueError:
            qdiscs = None
        if not isinstance(qdiscs, list):
            return None
        keys = ("packets", "bytes", "drops", "overlimits", "requeues", "backlog", "qlen")
        root = next((q for q in qdiscs if isinstance(q, dict) and q.get("root")), None)
        return None if root is None else {key: int(root.get(key, 0) or 0) for key in keys}

    def qdisc_text(self) -> str:
        return run_cmd(["tc", "qdisc", "show", "dev", self.tx_dev], netns=self.tx_ns, check=False).stdout.strip()

    def __enter__(self) -> "Topology":
        try:
            return self.up()
        except BaseException:
            self.down()
            raise

    def __exit__(self, *exc: object) -> None:
        self.down()


NAMESPACE_PATTERN = re.compile(rf"{NAME_PREFIX}(\d+)-[A-Za-z0-9]+-(tx|rx)")


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def taskset_prefix(cpus: str | None) -> list[str]:
    """The argv prefix that places a command on `cpus` (nothing when None)."""
    return ["taskset", "-c", cpus] if cpus is not None else []


def stale_namespaces() -> list[str]:
    """hostwire namespaces whose owning process is gone."""
    stale = []
    for ns in list_namespaces():
        match = NAMESPACE_PATTERN.fullmatch(ns)
        if match and not pid_alive(int(match.group(1))):
            stale.append(ns)
    return stale


def remove_namespaces(names: list[str]) -> list[str]:
    removed = []
    for ns in names:
        if run_cmd(["ip", "netns", "del", ns], check=False).returncode == 0:
            removed.append(ns)
    return removed
