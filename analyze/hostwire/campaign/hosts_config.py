"""The `[hosts]` table of a campaign file (docs/hosts.md): where the sender, the receiver and the
capture run. Each problem is one line naming the file, the line and the key.

    [hosts]
    sender = "root@pc1"                 # "local" (default: today's namespaces), user@host,
    receiver = "ssh://root@pc2:2222"    # a ~/.ssh/config alias, or ssh://user@host:port
    capture = "root@pc3"                # default: the sender
    receiver_address = "198.18.0.2"     # the receiver on the measured link (default: its host name)
    capture_interface = "eth1"          # on the capture host (default: its route to the receiver)
    ssh_config = "lab/ssh_config"       # passed to ssh -F (default: the user's own)
    ssh_options = ["-o", "IdentitiesOnly=yes"]
    remote_dir = "/srv/hostwire"        # each host's private scratch folder is made in it (default:
                                        # the login user's $TMPDIR, else /var/tmp)
    shape = false                       # true: the run point's shaper on the sender's interface
    resources_interval_s = 0.1          # /proc sampling on every host: the sampler's period
    connect_timeout_s = 10

    [hosts.resources.disk]              # per resource (load, cpu, memory, net, tcp, disk):
    interval_s = 1.0                    # its own interval (a multiple of the period)
    min_change = 0.05                   # the differential filter: a sample kept only when a
                                        # number differs by 5 % or more from the last kept
"""

from __future__ import annotations

import math
import re
from typing import Any

from hostwire.errors import UsageError
from hostwire.record.hosts import HostsSpec, parse_destination
from hostwire.record.procsampler import RESOURCES, ResourceSpec

KEYS: dict[str, type] = {"sender": str, "receiver": str, "capture": str, "receiver_address": str,
                         "capture_interface": str, "ssh_config": str, "ssh_options": list, "remote_dir": str,
                         "shape": bool, "resources_interval_s": float, "connect_timeout_s": float,
                         "resources": dict}


def parse_hosts(table: dict[str, Any], error: Any, closest: Any) -> HostsSpec:
    """`error(key, message)` makes the UsageError that names the file and line; `closest(word,
    choices)` the hint for an unknown key."""
    spec = HostsSpec()
    for key, value in table.items():
        if key not in KEYS:
            raise error(key, "unknown key" + closest(key, list(KEYS)))
        kind = KEYS[key]
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if (isinstance(value, bool) and kind is not bool) or not isinstance(value, kind):
            raise error(key, f"expected {_name(kind)}, got {value!r}")
        if key in ("sender", "receiver", "capture"):
            try:
                value = parse_destination(value)
            except UsageError as err:
                raise error(key, str(err)) from None
        elif key == "resources":
            value = _resources(value, error, closest)
        elif key == "ssh_options" and not all(isinstance(v, str) for v in value):
            raise error(key, f"expected a list of strings (ssh's own options), got {value!r}")
        elif kind is float and not (math.isfinite(value) and value > 0):
            raise error(key, f"expected a positive number of seconds, got {value!r}")
        elif key == "resources_interval_s" and value < 0.01:
            raise error(key, f"{value!r}: at least 0.01 s (the samples' clock, /proc/uptime, counts in 10 ms)")
        elif key == "remote_dir" and value:
            if not re.fullmatch(r"/[A-Za-z0-9_./-]*", value) or {".", ".."} & set(value.split("/")):
                raise error(key, f"{value!r}: expected an absolute path of letters, digits, '_', '.', '/' or '-', "
                                 "without . or .. components")
            value = value.rstrip("/") or "/"
        elif key in ("receiver_address", "capture_interface") and value and not re.fullmatch(r"[A-Za-z0-9_.:@-]+", value):
            raise error(key, f"{value!r}: expected an address or an interface name")
        setattr(spec, key, value)
    if spec.remote and spec.receiver.local and not spec.receiver_address:
        raise error("receiver_address", "a local receiver needs receiver_address (its address on the measured link)")
    return spec


def _resources(table: dict[str, Any], error: Any, closest: Any) -> dict[str, ResourceSpec]:
    out = {}
    for name, settings in table.items():
        where = f"resources.{name}"
        if name not in RESOURCES:
            raise error(where, "unknown resource" + closest(name, list(RESOURCES)))
        if not isinstance(settings, dict):
            raise error(where, "expected a table with interval_s and min_change")
        interval, change = settings.get("interval_s"), settings.get("min_change", 0.0)
        for key in settings:
            if key not in ("interval_s", "min_change"):
                raise error(f"{where}.{key}", "unknown key" + closest(key, ["interval_s", "min_change"]))
        if interval is not None and (isinstance(interval, bool) or not isinstance(interval, (int, float))
                                     or not math.isfinite(interval) or interval < 0.01):
            raise error(f"{where}.interval_s", f"expected seconds, at least 0.01, got {interval!r}")
        if isinstance(change, bool) or not isinstance(change, (int, float)) or not 0 <= change < 1:
            raise error(f"{where}.min_change", f"expected a share from 0 (keep every sample) to below 1, got {change!r}")
        out[name] = ResourceSpec(None if interval is None else float(interval), float(change))
    return out


def _name(kind: type) -> str:
    return {bool: "true or false", float: "a number", str: "a string", list: "a list", dict: "a table"}[kind]
