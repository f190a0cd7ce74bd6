"""Facility checks (`hostwire doctor`) and removal of what killed runs left behind."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from hostwire import topology

TRACEFS_CANDIDATES = (Path("/sys/kernel/tracing"), Path("/sys/kernel/debug/tracing"))
LIBRARIES = ("libpcap", "libtracefs", "libtraceevent")
PROGRAMS = ("ip", "tc", "ethtool", "tcpdump", "tshark", "strace")
INSTANCE_PREFIX = "hw-"


@dataclass
class Finding:
    facility: str
    ok: bool
    detail: str
    fix: str = ""


def tracefs_root() -> Path | None:
    for path in TRACEFS_CANDIDATES:
        if (path / "instances").is_dir():
            return path
    return None


def check_root() -> Finding:
    ok = os.geteuid() == 0
    return Finding("root", ok, "running as root" if ok else f"running as uid {os.geteuid()}",
                   "run as root (namespaces, tracefs and capture need it)")


def check_tracefs() -> Finding:
    root = tracefs_root()
    if root is None:
        return Finding("tracefs", False, "tracefs is not mounted",
                       "mount -t tracefs nodev /sys/kernel/tracing")
    ok = os.access(root / "instances", os.W_OK)
    return Finding("tracefs", ok, f"mounted at {root}" + ("" if ok else ", not writable"),
                   "run as root")


def check_netns() -> Finding:
    if shutil.which("ip") is None:
        return Finding("network namespaces", False, "the ip command is missing", "make setup (iproute2)")
    probe = f"{topology.NAME_PREFIX}{os.getpid()}-doctor-tx"
    add = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if add.returncode != 0:
        return Finding("network namespaces", False, add.stderr.strip() or "ip netns add failed",
                       "run as root on a kernel with CONFIG_NET_NS")
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return Finding("network namespaces", True, "can create and remove namespaces")


def check_ptrace() -> Finding:
    scope_file = Path("/proc/sys/kernel/yama/ptrace_scope")
    scope = scope_file.read_text().strip() if scope_file.exists() else "0"
    ok = scope in ("0", "1") or os.geteuid() == 0 and scope == "2"
    return Finding("ptrace", ok, f"yama ptrace_scope = {scope}",
                   "echo 1 > /proc/sys/kernel/yama/ptrace_scope")


def check_libraries() -> list[Finding]:
    findings = []
    for lib in LIBRARIES:
        ok = shutil.which("pkg-config") is not None and subprocess.run(
            ["pkg-config", "--exists", lib], capture_output=True).returncode == 0
        findings.append(Finding(f"library {lib}", ok, "found" if ok else "not found by pkg-config",
                                "make setup"))
    for prog in PROGRAMS:
        ok = shutil.which(prog) is not None
        findings.append(Finding(f"program {prog}", ok, "found" if ok else "not on PATH", "make setup"))
    return findings


def check_cpus() -> Finding:
    count = os.cpu_count() or 1
    return Finding("CPUs", count >= 2, f"{count} CPU(s)",
                   "the two-host topology pins sender and receiver to different CPUs; use 2 or more")


def run_checks() -> list[Finding]:
    return [check_root(), check_tracefs(), check_netns(), check_ptrace(), *check_libraries(), check_cpus()]


def stale_instances() -> list[Path]:
    """tracefs instances named hw-<pid>[...] whose owning process is gone."""
    root = tracefs_root()
    if root is None:
        return []
    stale = []
    for inst in sorted((root / "instances").glob(f"{INSTANCE_PREFIX}*")):
        owner = inst.name[len(INSTANCE_PREFIX):].split("-")[0]
        if owner.isdigit() and topology._pid_alive(int(owner)):
            continue
        stale.append(inst)
    return stale


def cleanup() -> list[str]:
    """Remove stale hw* namespaces (their veths and qdiscs go with them) and tracefs instances."""
    removed = [f"namespace {ns}" for ns in topology.remove_namespaces(topology.stale_namespaces())]
    for inst in stale_instances():
        try:
            inst.rmdir()
            removed.append(f"tracefs instance {inst.name}")
        except OSError as err:
            removed.append(f"tracefs instance {inst.name} (could not remove: {err.strerror})")
    return removed
