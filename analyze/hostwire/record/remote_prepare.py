"""Before a campaign's first run on real hosts: reach each host, check what it lacks (the checks of
`hostwire doctor`, as a shell script that needs nothing of hostwire there), put the C tools in a
private scratch folder (hostwire.record.remote_scratch), and record each host's facts. Each problem
is one line naming the host."""

from __future__ import annotations

import hashlib
import io
import logging
import platform
import shlex
import tarfile
from dataclasses import dataclass, field
from typing import Any

from hostwire import paths
from hostwire.errors import HostwireError
from hostwire.record.hosts import TETHER, Host, HostLost
from hostwire.record.remote_scratch import Scratch, UnsafeFolder, become_root, make_scratch, verify

log = logging.getLogger(__name__)

TOOLS = ("hw-bench", "hw-wirecap", "hw-schedtrace", "hw-procsample")
REMOTE_PROGRAMS = ("ip", "tc", "ethtool", "setsid", "tar", "cat", "sleep", "ldd", "awk", "cut", "mktemp", "stat",
                   "sha256sum", "readlink")

# Prints `MISSING <what>: <fix>` per missing thing and `FACT <key>=<value>` per fact; plain sh.
CHECKS = r"""
[ "$(id -u)" = 0 ] || echo "MISSING root: log in as root or allow sudo -n"
tr=""
for d in /sys/kernel/tracing /sys/kernel/debug/tracing; do
    if [ -d "$d/instances" ]; then tr=$d; break; fi
done
if [ -z "$tr" ]; then echo "MISSING tracefs: not mounted (mount -t tracefs nodev /sys/kernel/tracing)"
elif [ ! -w "$tr/instances" ]; then echo "MISSING tracefs: $tr/instances is not writable"; fi
for p in PROGRAMS; do
    command -v "$p" >/dev/null 2>&1 || echo "MISSING program $p: not on PATH (Debian: iproute2, ethtool, util-linux, tar)"
done
echo "FACT machine=$(uname -m)"
echo "FACT kernel_release=$(uname -r)"
echo "FACT cpus=$(getconf _NPROCESSORS_ONLN 2>/dev/null)"
echo "FACT cpu_model=$(sed -n 's/^model name[^:]*: *//p' /proc/cpuinfo | head -n 1)"
echo "FACT clocksource=$(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null)"
echo "FACT tracefs=$tr"
# one machine named twice: the same boot and the same network namespace
echo "FACT network_stack=$(cat /proc/sys/kernel/random/boot_id):$(readlink /proc/self/ns/net)"
# a time namespace's offsets: what its user-space clocks add to the kernel's (0 on a plain host)
awk '{printf "FACT timens_%s_offset_ns=%.0f\n", $1, $2 * 1000000000 + $3}' /proc/self/timens_offsets 2>/dev/null
"""

# The facts of the interface that carries the measured link (toward ADDRESS).
LINK_FACTS = r"""
dev=$(ip -o route get ADDRESS 2>/dev/null | sed -n 's/.* dev \([^ ]*\).*/\1/p')
if [ "$dev" = lo ]; then  # the receiver itself: the interface that holds the address
    dev=$(ip -o addr show to ADDRESS 2>/dev/null | awk '{print $2; exit}')
fi
echo "FACT interface=$dev"
[ -n "$dev" ] || exit 0
echo "FACT qdisc=$(tc qdisc show dev "$dev" | head -n 1)"
echo "FACT interface_speed_mbps=$(cat /sys/class/net/$dev/speed 2>/dev/null)"
echo "FACT interface_driver=$(ethtool -i "$dev" 2>/dev/null | sed -n 's/^driver: //p')"
ethtool -k "$dev" 2>/dev/null | sed -n 's/^\(tcp-segmentation-offload\|generic-segmentation-offload\|generic-receive-offload\|tx-checksumming\|rx-checksumming\): \([a-z]*\).*/FACT offload.\1=\2/p'
"""


@dataclass
class Prepared:
    """What preparing a host found: problems (one line each), facts, its scratch folder and the
    digests of the tools sent there."""

    host: Host
    problems: list[str] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)
    scratch: Scratch | None = None
    digests: dict[str, str] = field(default_factory=dict)
    reachable: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"destination": self.host.destination.text, "reachable": self.reachable,
                "problems": list(self.problems), "facts": dict(self.facts),
                "scratch_dir": self.scratch.path if self.scratch else "", "tools_sha256": dict(self.digests),
                "sudo": self.host.sudo}


def parse_facts(text: str, prepared: Prepared) -> None:
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "MISSING":
            prepared.problems.append(f"{prepared.host.name}: missing {rest}")
        elif kind == "FACT":
            key, _, value = rest.partition("=")
            if key.startswith("offload."):
                prepared.facts.setdefault("offloads", {})[key[len("offload."):]] = value
            else:
                numeric = key in ("cpus", "interface_speed_mbps") or key.startswith("timens_")
                prepared.facts[key] = int(value) if numeric and value.lstrip("-").isdigit() else value


def prepare(host: Host, campaign: str, link_address: str) -> Prepared:
    """Reaches the host (root directly or through sudo -n), runs the checks, makes its scratch
    folder and copies the tools there when the host's architecture and libraries match. Never
    raises for the host's own failings (they are the result's problems) except UnsafeFolder: a
    folder another user could change, where nothing may start."""
    prepared = Prepared(host)
    try:
        login_uid = become_root(host)
        prepared.reachable = True
        checks = CHECKS.replace("PROGRAMS", " ".join(REMOTE_PROGRAMS))
        parse_facts(host.run(checks, check=False).stdout.decode(errors="replace"), prepared)
        link = LINK_FACTS.replace("ADDRESS", shlex.quote(link_address))
        parse_facts(host.run(link, check=False).stdout.decode(errors="replace"), prepared)
        speed = prepared.facts.get("interface_speed_mbps")
        if isinstance(speed, int) and speed > 0:
            prepared.facts["interface_speed_bps"] = speed * 1_000_000
        machine = prepared.facts.get("machine")
        if machine and machine != platform.machine():
            prepared.problems.append(f"{host.name}: its architecture is {machine}, this machine's "
                                     f"{platform.machine()}: hostwire sends its tools only to hosts like this one")
            return prepared
        prepared.scratch = make_scratch(host, login_uid, campaign)
        _copy_tools(host, prepared)
    except HostLost as err:
        prepared.problems.append(f"{err} (cannot reach it)")
    except UnsafeFolder:
        raise
    except HostwireError as err:
        prepared.problems.append(str(err))
    return prepared


def _tool_files() -> dict[str, bytes]:
    files = {name: paths.tool(name).read_bytes() for name in TOOLS}
    files["hw-tether"] = TETHER.encode()
    return files


def _tools_tar(files: dict[str, bytes]) -> bytes:
    """Owned by root, writable by no one else (the extracting tar keeps neither our uid nor umask)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.uid, info.gid = len(data), 0o755, 0, 0
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _copy_tools(host: Host, prepared: Prepared) -> None:
    """The built tools into the scratch folder's bin, checked there by digest; a library they need
    and the host lacks is one line."""
    assert prepared.scratch is not None
    bindir = prepared.scratch.bin
    files = _tool_files()
    host.run(f"mkdir -m 0700 {shlex.quote(bindir)} {shlex.quote(prepared.scratch.path)}/runs && "
             f"tar --no-same-owner --no-same-permissions -x -C {shlex.quote(bindir)}", input=_tools_tar(files))
    prepared.digests = {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}
    verify(host, prepared.scratch, prepared.digests)
    missing = host.run(f"cd {shlex.quote(bindir)} && for t in {' '.join(TOOLS)}; do "
                       "ldd ./$t 2>&1 | sed -n \"s|^[[:space:]]*\\([^ ]*\\) => not found.*|$t \\1|p\"; done",
                       check=False).stdout.decode(errors="replace")
    for line in missing.splitlines():
        tool, _, lib = line.partition(" ")
        prepared.problems.append(f"{host.name}: {tool} needs {lib}, missing there: install it (make setup) "
                                 "or run the campaign from a machine built like that host")
