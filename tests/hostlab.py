"""A lab of real ssh "hosts" for the tests of `[hosts]`: each host a network namespace of its own
with OpenSSH's sshd (its own host key, one authorized key made for the lab), a mount namespace
that hides the project's checkout and the campaign folder and gives it a folder for a
configured remote_dir and its own /var/tmp (or one shared by every host), and a time namespace
whose CLOCK_MONOTONIC and CLOCK_BOOTTIME offsets the lab knows. A time namespace offsets only user
space's clocks: tracefs and the capture keep the kernel's own. `tx2` is a second name of `tx`.

    control: this machine 198.18.1.(4i+1) <-> host i 198.18.1.(4i+2), one veth pair per host
    data:    tx 198.18.0.1 -- [cap: bridge of ptx and prx] -- rx 198.18.0.2

The capture host is a bump in the wire: it forwards every frame between the two and captures on
its port toward the sender. Everything is removed by pid and by name on close()."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

SSHD = "/usr/sbin/sshd"
HOSTWIRE = [sys.executable, "-m", "hostwire"]


def client_block(alias: str, address: str, root: Path) -> str:
    """The lab's ssh_config entry of a host: root with the lab's key (root/id), its known hosts."""
    return (f"Host {alias}\n  HostName {address}\n  User root\n  IdentityFile {root / 'id'}\n  IdentitiesOnly yes\n"
            f"  UserKnownHostsFile {root / 'known_hosts'}\n  StrictHostKeyChecking yes\n  LogLevel ERROR\n")


def sshd_config(address: str, key: Path, authorized_keys: Path, *extra: str) -> str:
    """A lab sshd's config: one address, its host key, the lab's one key for root, nothing else."""
    return (f"ListenAddress {address}\nHostKey {key}\nAuthorizedKeysFile {authorized_keys}\n"
            "PermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
            "UsePAM no\nStrictModes no\nPidFile none\n" + "".join(f"{line}\n" for line in extra)
            + "MaxStartups 50\nMaxSessions 50\n")


def sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=30)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {proc.stderr.strip()}")
    return proc


def in_ns(ns: str, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return sh("ip", "netns", "exec", ns, *argv, check=check)


@dataclass
class LabHost:
    alias: str
    ns: str
    control_addr: str
    offset_s: int
    tracefs: bool = True
    pid: int | None = None  # unshare's, whose child is sshd (--kill-child)


@dataclass
class Lab:
    root: Path
    hidden: list[Path]
    remote_dir: Path
    offsets: dict[str, int] = field(default_factory=lambda: {"tx": 0, "rx": 2000, "cap": 700})
    no_tracefs: tuple[str, ...] = ()
    shared_tmp: bool = False  # one /var/tmp for every host (as a network-mounted one), else each its own
    bottleneck: str = "9mbit"  # on the capture host's port toward the receiver ("" for none)
    hosts: dict[str, LabHost] = field(default_factory=dict)
    pid: int = 0  # of the process that made the lab: part of every name it made
    self_pid: int | None = None  # the sshd of `self` (open_self)
    made_run_sshd: bool = False  # /run/sshd made for it (removed on close)

    @property
    def ssh_config(self) -> Path:
        return self.root / "ssh_config"

    @property
    def shared_var_tmp(self) -> Path:
        """The folder every host sees as /var/tmp when shared_tmp (root's, sticky, as /var/tmp is)."""
        return self.root / "var_tmp"

    def open(self) -> "Lab":
        self.root.mkdir(parents=True, exist_ok=True)
        self.remote_dir.mkdir(parents=True, exist_ok=True)
        self.shared_var_tmp.mkdir(exist_ok=True)
        self.shared_var_tmp.chmod(0o1777)
        pid = self.pid = os.getpid()
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.root / "id"))
        (self.root / "authorized_keys").write_text((self.root / "id.pub").read_text())
        known, client = [], []
        for i, alias in enumerate(("tx", "rx", "cap")):
            host = LabHost(alias, f"hwlab{pid}-{alias}", f"198.18.1.{4 * i + 2}", self.offsets[alias],
                           tracefs=alias not in self.no_tracefs)
            self.hosts[alias] = host
            sh("ip", "netns", "add", host.ns)
            outer = f"hl{pid}c{i}"
            sh("ip", "link", "add", outer, "type", "veth", "peer", "name", "ctl", "netns", host.ns)
            sh("ip", "addr", "add", f"198.18.1.{4 * i + 1}/30", "dev", outer)
            sh("ip", "link", "set", outer, "up")
            in_ns(host.ns, "ip", "addr", "add", f"{host.control_addr}/30", "dev", "ctl")
            for dev in ("lo", "ctl"):
                in_ns(host.ns, "ip", "link", "set", dev, "up")
            key = self.root / f"host_{alias}"
            sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key))
            known.append(f"{host.control_addr} {(self.root / f'host_{alias}.pub').read_text().split(' ')[0]} "
                         f"{(self.root / f'host_{alias}.pub').read_text().split(' ')[1]}")
            client.append(client_block(alias, host.control_addr, self.root))
            (self.root / f"sshd_{alias}").write_text(sshd_config(host.control_addr, key, self.root / "authorized_keys"))
        # tx under a second name: one machine playing two roles
        client.append(client[0].replace("Host tx\n", "Host tx2\n"))
        (self.root / "known_hosts").write_text("\n".join(known) + "\n")
        self.ssh_config.write_text("\n".join(client))
        self._data_link()
        for host in self.hosts.values():
            self._start_sshd(host)
        for host in self.hosts.values():
            self._wait_ssh(host)
        return self

    def _data_link(self) -> None:
        tx, rx, cap = (self.hosts[a].ns for a in ("tx", "rx", "cap"))
        sh("ip", "link", "add", "d0", "netns", tx, "type", "veth", "peer", "name", "ptx", "netns", cap)
        sh("ip", "link", "add", "d0", "netns", rx, "type", "veth", "peer", "name", "prx", "netns", cap)
        in_ns(cap, "ip", "link", "add", "br0", "type", "bridge")
        for ns, dev, addr in ((tx, "d0", "198.18.0.1/24"), (rx, "d0", "198.18.0.2/24")):
            in_ns(ns, "ip", "addr", "add", addr, "dev", dev)
        for ns, dev in ((tx, "d0"), (rx, "d0"), (cap, "ptx"), (cap, "prx")):
            # one frame on the wire per segment: no offloads, so a capture sees what the wire carries
            in_ns(ns, "ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off", "tx", "off", "rx", "off",
                  check=False)
            if ns == cap:
                in_ns(ns, "ip", "link", "set", dev, "master", "br0")
            in_ns(ns, "ip", "link", "set", dev, "up")
        in_ns(cap, "ip", "link", "set", "br0", "up")
        if self.bottleneck:  # a slower hop with a three-frame queue after the capture host: frames
            # it saw are dropped, and the sender retransmits them (real retransmissions to count)
            in_ns(cap, "tc", "qdisc", "add", "dev", "prx", "root", "tbf", "rate", self.bottleneck, "burst", "1514",
                  "limit", "4542")

    def _start_sshd(self, host: LabHost) -> None:
        mounts = [f"mount -t tmpfs hw-hidden {p}" for p in self.hidden]
        mounts.append(f"mount -t tmpfs hw-remote {self.remote_dir}")
        mounts.append(f"mount --bind {self.shared_var_tmp} /var/tmp" if self.shared_tmp
                      else "mount -t tmpfs -o mode=1777 hw-var-tmp /var/tmp")
        if host.tracefs:  # ip netns exec mounts a fresh /sys: tracefs again on it
            mounts.append("mount -t tracefs nodev /sys/kernel/tracing")
        else:
            # all of /sys/kernel: libtracefs mounts tracefs itself where it finds the folder
            mounts.append("mount -t tmpfs hw-no-tracefs /sys/kernel")
        script = " && ".join([*mounts, "mkdir -p /run/sshd", f"exec {SSHD} -D -e -f {self.root / f'sshd_{host.alias}'}"])
        log = open(self.root / f"sshd_{host.alias}.log", "wb")
        proc = subprocess.Popen(
            ["ip", "netns", "exec", host.ns, "unshare", "--mount", "--propagation", "private", "--time",
             f"--monotonic={host.offset_s}", f"--boottime={host.offset_s}", "--fork", "--kill-child",
             "sh", "-c", script], stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        log.close()
        host.pid = proc.pid
        self._procs = getattr(self, "_procs", []) + [proc]

    def open_self(self, port: int = 2222) -> str:
        """This machine itself as an ssh host, `self`: an sshd in this machine's own namespaces on
        the control address toward tx (198.18.1.1, on no other link), so that `local` and `self`
        are one machine under two names. Returns the alias."""
        address = "198.18.1.1"
        key = self.root / "host_self"
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key))
        kind, blob = (self.root / "host_self.pub").read_text().split(" ")[:2]
        with open(self.root / "known_hosts", "a") as known:
            known.write(f"[{address}]:{port} {kind} {blob}\n")
        tx = self.ssh_config.read_text().split("Host ")[1]
        block = "Host " + tx.replace("tx\n", "self\n", 1).replace(self.hosts["tx"].control_addr, address)
        self.ssh_config.write_text(self.ssh_config.read_text() + "\n" + block + f"  Port {port}\n")
        (self.root / "sshd_self").write_text(
            (self.root / "sshd_tx").read_text().replace(self.hosts["tx"].control_addr, f"{address}:{port}")
            .replace(str(self.root / "host_tx"), str(key)))
        if not Path("/run/sshd").exists():  # sshd's privilege separation folder
            Path("/run/sshd").mkdir(mode=0o755)
            self.made_run_sshd = True
        log = open(self.root / "sshd_self.log", "wb")
        proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(self.root / "sshd_self")], stdin=subprocess.DEVNULL,
                                stdout=log, stderr=log)
        log.close()
        self._procs = getattr(self, "_procs", []) + [proc]
        self.self_pid = proc.pid
        deadline = time.monotonic() + 20
        while self.ssh("self", "true").returncode != 0:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"sshd of self did not answer: {(self.root / 'sshd_self.log').read_text()}")
            time.sleep(0.2)
        return "self"

    def ssh(self, alias: str, command: str, timeout: float = 20) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["ssh", "-F", str(self.ssh_config), "-o", "BatchMode=yes", alias, "--", command],
                              capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)

    def _wait_ssh(self, host: LabHost) -> None:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.ssh(host.alias, "true").returncode == 0:
                return
            time.sleep(0.2)
        raise RuntimeError(f"sshd of {host.alias} did not answer: {(self.root / f'sshd_{host.alias}.log').read_text()}")

    def listing(self, alias: str) -> list[str]:
        """Every file and folder where hostwire may write on a host (/var/tmp, the lab's remote_dir,
        and hostwire's names in /tmp and /dev/shm, shared with the rest of this machine), with
        owner and mode."""
        command = (f"find /var/tmp {self.remote_dir} -xdev -printf '%p %u %m\\n';"
                   " find /tmp /dev/shm -maxdepth 1 -name '*hostwire*' -printf '%p %u %m\\n'")
        proc = self.ssh(alias, command)
        if proc.returncode != 0:
            raise RuntimeError(f"listing {alias}: {proc.stderr.strip()}")
        return sorted(proc.stdout.splitlines())

    def listings(self) -> dict[str, list[str]]:
        return {alias: self.listing(alias) for alias in self.hosts}

    def pids_in(self, alias: str) -> list[int]:
        """The processes in a host's network namespace (sshd among them)."""
        out = sh("ip", "netns", "pids", self.hosts[alias].ns, check=False).stdout
        return [int(p) for p in out.split()]

    def sshd_pids(self, alias: str) -> set[int]:
        host = self.hosts[alias]
        children = sh("ps", "-o", "pid=", "--ppid", str(host.pid), check=False).stdout.split()
        return {int(p) for p in children}

    def close(self) -> None:
        for proc in getattr(self, "_procs", []):
            if proc.poll() is None:
                proc.kill()  # unshare --fork ignores SIGTERM; --kill-child ends its sshd with it
                proc.wait()
        for host in self.hosts.values():
            for pid in self.pids_in(host.alias):  # a session's leftovers: the test fails on them first
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            sh("ip", "netns", "del", host.ns, check=False)
        for i in range(3):
            sh("ip", "link", "del", f"hl{self.pid}c{i}", check=False)
        if self.made_run_sshd:
            Path("/run/sshd").rmdir()


def make_lab(base: Path, **options: object) -> Lab:
    from hostwire.paths import REPO_ROOT

    runs = base / "runs"
    runs.mkdir(parents=True)
    return Lab(base / "lab", hidden=[REPO_ROOT, runs], remote_dir=base / "remote", **options)  # type: ignore[arg-type]


def campaign_file(path: Path, lab: Lab, *, receiver: str = "rx", grid: str = "senders = [1, 2]",
                  repetitions: int = 2, kernel_trace: bool = False, duration_s: float = 1.5,
                  **hosts: object) -> Path:
    """A campaign on the lab; `hosts` sets more keys of [hosts] (or replaces these)."""
    table: dict[str, object] = {"sender": "tx", "receiver": receiver, "capture": "cap",
                                "receiver_address": "198.18.0.2", "capture_interface": "ptx",
                                "ssh_config": str(lab.ssh_config), "shape": True, "resources_interval_s": 0.1,
                                **hosts}
    lines = [f"{key} = {str(value).lower() if isinstance(value, bool) else repr(value).replace(chr(39), chr(34))}"
             for key, value in table.items()]
    path.write_text(f"""
[campaign]
name = "lab"
repetitions = {repetitions}
[defaults]
warmup_s = 0.5
duration_s = {duration_s}
quiet_s = 0.3
kernel_trace = {str(kernel_trace).lower()}
[grid]
{grid}
[hosts]
""" + "\n".join(lines) + "\n")
    return path


def run(config: Path, out: Path, *extra: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*HOSTWIRE, "run", str(config), "--out", str(out), *extra], capture_output=True, text=True,
                          timeout=timeout)


def left_running(lab: Lab) -> dict[str, list[int]]:
    """Per host, the processes other than its sshd listener (and the unshare that started it)."""
    return {alias: sorted(set(lab.pids_in(alias)) - lab.sshd_pids(alias) - {host.pid})
            for alias, host in lab.hosts.items()}


def wait_nothing_left(lab: Lab, timeout_s: float = 15.0) -> dict[str, list[int]]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        left = left_running(lab)
        if not any(left.values()):
            return left
        time.sleep(0.2)
    return left_running(lab)


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    lab = make_lab(tmp_path)
    try:
        yield lab.open()
    finally:
        lab.close()
