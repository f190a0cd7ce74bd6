"""A fresh guest for every run: the paper rebooted both machines before each measurement; hostwire
boots a QEMU VM of the stock or the patched kernel (scripts/kernel.sh builds both; and v1, the
first version of the series, for benchmarks),
runs one command in it and powers it off.

The guest mounts the host's root read-only over 9p, so it runs the host's programs and the
project as built, and a shared directory read-write, where the command's results land
(kernel-patches/vm-init.sh). KVM where the CPU offers it, else software emulation: then every
timing measured in the guest is emulated, and the boot says so."""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import signal
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from hostwire import paths
from hostwire.lifeline import die_with_parent
from hostwire.errors import HostwireError, UsageError

log = logging.getLogger(__name__)

FLAVOURS = ("stock", "patched")  # what a campaign may boot
BENCH_FLAVOURS = (*FLAVOURS, "v1")  # and the series' first version, for the per-switch cost bench
INIT = paths.REPO_ROOT / "kernel-patches" / "vm-init.sh"
DEFAULT_TIMEOUT_S = 900.0


def kernel_dir() -> Path:
    return Path(os.environ.get("HOSTWIRE_KERNEL_BUILD", paths.build_dir() / "kernel"))


def kernel_image(flavour: str) -> Path:
    """The bzImage of a flavour; raises with the command that builds it when it is missing."""
    if flavour not in BENCH_FLAVOURS:
        raise UsageError(f"kernel must be one of {', '.join(BENCH_FLAVOURS)}, not {flavour!r}")
    image = kernel_dir() / flavour / "bzImage"
    if not image.is_file():
        raise HostwireError(f"the {flavour} guest kernel is not built: {image} is missing (run 'make kernel')")
    return image


def kvm_usable() -> bool:
    """KVM needs /dev/kvm and a CPU that offers vmx or svm."""
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return False
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return " vmx" in flags or " svm" in flags


@dataclass
class Boot:
    """What one guest did: its kernel, boot id, how long it took to reach the command, the
    command's exit status (None: it never ran to the end), whether the guest was killed after
    the timeout, and whether its timings are emulated (no KVM)."""

    flavour: str
    kernel_release: str
    boot_id: str
    boot_s: float
    wall_s: float
    exit_status: int | None
    timed_out: bool
    emulated: bool
    accel: str
    console_log: str
    guest_log: str

    def manifest(self) -> dict[str, object]:
        return asdict(self)

    def failure(self) -> str | None:
        """One line when the guest did not run its command to a clean end."""
        if self.timed_out:
            return f"the {self.flavour} guest was killed after its timeout (console: {self.console_log})"
        if not self.boot_id:
            return f"the {self.flavour} guest never reached its command (console: {self.console_log})"
        if self.exit_status is None:
            return f"the {self.flavour} guest's command did not finish (log: {self.guest_log})"
        if self.exit_status != 0:
            return f"the {self.flavour} guest's command exited {self.exit_status} (log: {self.guest_log})"
        return None


def qemu_argv(image: Path, share: Path, cpus: int, memory_mb: int, kvm: bool, init: Path = INIT,
              writable: tuple[Path, ...] = (), append: str = "", nics: tuple[str, ...] = ()) -> list[str]:
    """QEMU's command line. `nics` are tap devices of this host, made beforehand (`ip tuntap add`):
    the guest sees one virtio NIC per tap, eth0, eth1, ... in that order; without them it has no
    network at all."""
    accel = ["-accel", "kvm", "-cpu", "host"] if kvm else ["-accel", "tcg", "-cpu", "max"]
    cmdline = ("console=ttyS0 root=hostroot rootfstype=9p rootflags=trans=virtio,version=9p2000.L,msize=262144 "
              f"ro init={init} panic=-1 hostwire.share={share}")
    if writable:
        cmdline += " hostwire.rw=" + ",".join(str(p) for p in writable)
    if append:
        cmdline += " " + append
    network = ["-nic", "none"] if not nics else []
    for i, tap in enumerate(nics):
        # a fixed, locally administered MAC per position: the guest's eth<i> is the i-th tap
        network += ["-netdev", f"tap,id=hwnet{i},ifname={tap},script=no,downscript=no",
                    "-device", f"virtio-net-pci,netdev=hwnet{i},mac=52:54:00:48:57:{i:02x}"]
    extra = []
    for i, path in enumerate(writable):
        extra += ["-virtfs", f"local,path={path},mount_tag=hwrw{i},security_model=none,multidevs=remap"]
    return ["qemu-system-x86_64", *accel, "-m", str(memory_mb), "-smp", str(cpus), "-kernel", str(image),
            "-append", cmdline, "-display", "none", "-monitor", "none", "-no-reboot",
            "-serial", f"file:{share / 'console.log'}", *network,
            "-virtfs", "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap",
            "-virtfs", f"local,path={share},mount_tag=hwshare,security_model=none,multidevs=remap", *extra]


@dataclass
class Guest:
    """A guest started and not yet waited for: `finish` waits for it to power off (killing it
    at the timeout) and says what it did."""

    flavour: str
    share: Path
    proc: subprocess.Popen[bytes]
    kvm: bool
    started: float

    def running(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            # the guest is ours alone: its whole session goes
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def finish(self, timeout_s: float = DEFAULT_TIMEOUT_S) -> Boot:
        timed_out = False
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            self.kill()
        wall = time.monotonic() - self.started
        share = self.share

        def read(name: str) -> str:
            try:
                return (share / name).read_text().strip()
            except OSError:
                return ""

        rc = read("guest.rc")
        uptime = read("boot_uptime_s")
        return Boot(flavour=self.flavour, kernel_release=read("kernel_release"), boot_id=read("boot_id"),
                    boot_s=float(uptime) if uptime else float("nan"), wall_s=wall,
                    exit_status=int(rc) if rc.lstrip("-").isdigit() else None, timed_out=timed_out,
                    emulated=not self.kvm, accel="kvm" if self.kvm else "tcg",
                    console_log=str(share / "console.log"), guest_log=str(share / "guest.log"))


def start(flavour: str, command: list[str] | str, share: Path, *, cpus: int = 2, memory_mb: int = 2048,
          init: Path = INIT, writable: tuple[Path, ...] = (), append: str = "", nics: tuple[str, ...] = ()) -> Guest:
    """Starts a fresh guest of `flavour` that runs `command` (argv or shell text) with `share` as
    working directory and then powers off; returns at once. The guest writes console.log,
    guest.log (the command's output), guest.rc, boot_id into `share`. `writable` are host
    directories the guest mounts read-write at the same paths (where a run's directory lands);
    `nics` are tap devices it is wired to (qemu_argv). `init` replaces the guest's first program
    and `append` is added to the kernel command line (tests: lockdown=...)."""
    image = kernel_image(flavour)
    qemu = shutil.which("qemu-system-x86_64")
    if qemu is None:
        raise HostwireError("qemu-system-x86_64 is missing (run 'make setup')")
    share = share.resolve()
    share.mkdir(parents=True, exist_ok=True)
    for stale in ("boot_id", "boot_uptime_s", "guest.rc", "kernel_release", "console.log", "guest.log"):
        (share / stale).unlink(missing_ok=True)
    text = command if isinstance(command, str) else shlex.join(command)
    (share / "guest-command").write_text(text + "\n")
    kvm = kvm_usable()
    writable = tuple(p.resolve() for p in writable)
    for path in (share, *writable):
        if not path.is_dir() or any(c in str(path) for c in " ,\t\n"):
            raise UsageError(f"{path}: a guest can mount only an existing directory without spaces or commas")
    argv = qemu_argv(image, share, cpus, memory_mb, kvm, init, writable, append, nics)
    log.info("booting the %s kernel (%s): %s", flavour, "kvm" if kvm else "emulated", text)
    started = time.monotonic()
    with open(share / "qemu.log", "wb") as qemu_log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=qemu_log,
                                start_new_session=True, preexec_fn=die_with_parent)
    return Guest(flavour, share, proc, kvm, started)


def boot(flavour: str, command: list[str] | str, share: Path, *, timeout_s: float = DEFAULT_TIMEOUT_S,
         cpus: int = 2, memory_mb: int = 2048, init: Path = INIT, writable: tuple[Path, ...] = (),
         append: str = "", nics: tuple[str, ...] = ()) -> Boot:
    """Boots a fresh guest (start), waits for it to power off, killing it at `timeout_s`, and
    says what it did."""
    guest = start(flavour, command, share, cpus=cpus, memory_mb=memory_mb, init=init, writable=writable,
                  append=append, nics=nics)
    return guest.finish(timeout_s)
