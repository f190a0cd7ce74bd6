"""A QEMU guest as a real ssh host of the lab (tests/hostlab.py): its own kernel (`make kernel`'s
stock guest image) and so its own clocks, reached over ssh like any other machine.

    control: this machine 198.18.3.1 <-> tx 198.18.3.2 (veth); 198.18.3.5 <-> guest 198.18.3.6 (tap)
    data:    tx 198.18.0.1 (d0, a tap) <-> guest 198.18.0.2 (eth1)

The guest runs this host's root read-only over 9p (docs/kernel.md), with its own /var/tmp, and
its sshd configured from the lab's folder (shared with the guest). Before sshd starts, the guest
slews its clock by a known frequency (adjtimex ADJ_FREQUENCY), so its clocks drift against the
sender's at least by that much; emulated (TCG), its clock also runs at its own calibration's rate.
Everything the lab made is removed by pid and by name on close()."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from hostwire.record import vm

from hostlab import Lab, LabHost, client_block, in_ns, sh, sshd_config

GUEST_CONTROL = "198.18.3.6"
# the frequency the guest's NTP state is given: its CLOCK_MONOTONIC and CLOCK_REALTIME run this
# much fast on top of whatever its emulated clock does
ADJTIMEX = """
import ctypes, sys
long = ctypes.c_long
class Timex(ctypes.Structure):
    _fields_ = [("modes", ctypes.c_uint), ("offset", long), ("freq", long), ("maxerror", long),
                ("esterror", long), ("status", ctypes.c_int), ("constant", long), ("precision", long),
                ("tolerance", long), ("sec", long), ("usec", long), ("tick", long), ("ppsfreq", long),
                ("jitter", long), ("shift", ctypes.c_int), ("stabil", long), ("jitcnt", long),
                ("calcnt", long), ("errcnt", long), ("stbcnt", long), ("tai", ctypes.c_int),
                ("pad", ctypes.c_int * 11)]
tx = Timex(modes=0x0002, freq=int(float(sys.argv[1]) * 65536))  # ADJ_FREQUENCY, ppm in 16.16
if ctypes.CDLL(None, use_errno=True).adjtimex(ctypes.byref(tx)) < 0:
    sys.exit(f"adjtimex: errno {ctypes.get_errno()}")
"""


@dataclass
class GuestLab(Lab):
    """tx (a namespace with sshd, as in Lab) and `guest` (a QEMU guest with sshd), with the
    guest's clock slewed by `drift_ppm`."""

    drift_ppm: float = 200.0
    guest: vm.Guest | None = None

    @property
    def share(self) -> Path:
        return self.root / "guest"

    def open(self) -> "GuestLab":
        self.root.mkdir(parents=True, exist_ok=True)
        self.remote_dir.mkdir(parents=True, exist_ok=True)
        self.share.mkdir()
        pid = self.pid = os.getpid()
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.root / "id"))
        (self.share / "authorized_keys").write_text((self.root / "id.pub").read_text())
        (self.root / "authorized_keys").write_text((self.root / "id.pub").read_text())
        tx = LabHost("tx", f"hwgl{pid}-tx", "198.18.3.2", 0)
        self.hosts["tx"] = tx
        sh("ip", "netns", "add", tx.ns)
        outer = f"hg{pid}c0"
        sh("ip", "link", "add", outer, "type", "veth", "peer", "name", "ctl", "netns", tx.ns)
        sh("ip", "addr", "add", "198.18.3.1/30", "dev", outer)
        sh("ip", "link", "set", outer, "up")
        in_ns(tx.ns, "ip", "addr", "add", f"{tx.control_addr}/30", "dev", "ctl")
        for dev in ("lo", "ctl"):
            in_ns(tx.ns, "ip", "link", "set", dev, "up")
        known, client = [], []
        for alias, address, keydir in (("tx", tx.control_addr, self.root), ("guest", GUEST_CONTROL, self.share)):
            key = keydir / f"host_{alias}"
            sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key))
            kind, blob = (keydir / f"host_{alias}.pub").read_text().split(" ")[:2]
            known.append(f"{address} {kind} {blob}")
            client.append(client_block(alias, address, self.root))
            (keydir / f"sshd_{alias}").write_text(sshd_config(address, key, keydir / "authorized_keys", "PrintLastLog no"))
        (self.root / "known_hosts").write_text("\n".join(known) + "\n")
        self.ssh_config.write_text("\n".join(client))
        # taps for the guest's two NICs: control in this namespace, data moved into tx's (QEMU
        # opens each by name here first, then the data one moves; the guest keeps it)
        control, data = f"hg{pid}c1", f"hg{pid}d1"
        for tap in (control, data):
            sh("ip", "tuntap", "add", "dev", tap, "mode", "tap")
        sh("ip", "addr", "add", "198.18.3.5/30", "dev", control)
        for tap in (control, data):
            sh("ip", "link", "set", tap, "up")
        self.guest = vm.start("stock", self._guest_script(), self.share, nics=(control, data))
        self._wait_attached(data)
        sh("ip", "link", "set", data, "netns", tx.ns)
        in_ns(tx.ns, "ip", "link", "set", data, "name", "d0")
        in_ns(tx.ns, "ip", "addr", "add", "198.18.0.1/24", "dev", "d0")
        in_ns(tx.ns, "ethtool", "-K", "d0", "tso", "off", "gso", "off", "gro", "off", "tx", "off", check=False)
        in_ns(tx.ns, "ip", "link", "set", "d0", "up")
        self._start_sshd(tx)
        self._wait_ssh(tx)
        self._wait_guest()
        return self

    def _wait_attached(self, tap: str) -> None:
        """Until QEMU holds the tap open: an up tap has no carrier until a queue is attached."""
        deadline = time.monotonic() + 60
        while "NO-CARRIER" in sh("ip", "link", "show", tap).stdout:
            if self.guest is not None and not self.guest.running():
                raise RuntimeError(f"QEMU ended: {(self.share / 'qemu.log').read_text()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"QEMU never opened {tap}: {(self.share / 'qemu.log').read_text()}")
            time.sleep(0.2)

    def _guest_script(self) -> str:
        # what lies under /tmp or /run is the guest's own tmpfs already
        hidden = [p for p in self.hidden if not str(p).startswith(("/tmp/", "/run/"))]
        return "\n".join([
            "set -e",
            *[f"mount -t tmpfs hw-hidden {p}" for p in hidden],
            "mount -t tmpfs -o mode=1777 hw-var-tmp /var/tmp",
            # a root without this machine's dotfiles: a login runs no shell set-up of the host's
            # (pyenv's alone takes tens of seconds emulated)
            "mount -t tmpfs -o mode=0700 hw-root-home /root",
            f"mkdir -p {self.remote_dir} && mount -t tmpfs hw-remote {self.remote_dir}",
            "ip link set eth0 up && ip addr add 198.18.3.6/30 dev eth0",
            "ip link set eth1 up && ip addr add 198.18.0.2/24 dev eth1",
            "ethtool -K eth1 tso off gso off gro off tx off rx off || true",
            f"python3 -c '{ADJTIMEX}' {self.drift_ppm}",
            "cat /sys/devices/system/clocksource/clocksource0/current_clocksource > clocksource",
            "mkdir -p /run/sshd",
            f"exec /usr/sbin/sshd -D -e -f {self.share / 'sshd_guest'}",
        ]) + "\n"

    def _wait_guest(self, timeout_s: float = 600) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.guest is None or not self.guest.running():
                raise RuntimeError("the guest ended before its sshd answered: "
                                   + (self.share / "console.log").read_text()[-2000:])
            try:
                if self.ssh("guest", "true", timeout=60).returncode == 0:
                    return
            except subprocess.TimeoutExpired:
                pass
            time.sleep(1)
        raise RuntimeError("the guest's sshd did not answer: " + (self.share / "guest.log").read_text()[-2000:])

    def guest_tools_running(self) -> list[str]:
        """hostwire's processes in the guest (its tools are all hw-*), with their pids."""
        proc = self.ssh("guest", "ps -e -o pid=,comm=", timeout=60)
        if proc.returncode != 0:
            raise RuntimeError(f"ps in the guest: {proc.stderr.strip()}")
        return [line.strip() for line in proc.stdout.splitlines() if line.split()[1:2] and
                line.split()[1].startswith("hw-")]

    def close(self) -> None:
        if self.guest is not None:
            self.guest.kill()
        for proc in getattr(self, "_procs", []):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        tx = self.hosts.get("tx")
        if tx is not None:
            for pid in self.pids_in("tx"):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            sh("ip", "netns", "del", tx.ns, check=False)
        for dev in (f"hg{self.pid}c0", f"hg{self.pid}c1", f"hg{self.pid}d1"):
            sh("ip", "link", "del", dev, check=False)


def make_guest_lab(base: Path, **options: object) -> GuestLab:
    from hostwire.paths import REPO_ROOT

    runs = base / "runs"
    runs.mkdir(parents=True)
    return GuestLab(base / "lab", hidden=[REPO_ROOT, runs], remote_dir=base / "remote", **options)  # type: ignore[arg-type]


__all__ = ["GuestLab", "make_guest_lab"]
