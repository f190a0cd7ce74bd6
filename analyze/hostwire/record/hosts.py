"""Real hosts over ssh (`[hosts]` of a campaign, docs/hosts.md): who each role is, and the one way
hostwire runs a command there. OpenSSH's client runs as the user would run it (their
~/.ssh/config and ssh-agent, or the campaign's own ssh_config), never prompting (BatchMode); root
comes from logging in as root or from `sudo -n`.

Every long-lived remote command runs under `hw-tether` (TETHER below): it ends the command's
process group when its standard input reaches end of file. Without a terminal a remote command
gets no hang-up signal when its ssh session ends; the end of the session's standard input is
the one sign it gets, so the runner holds that input open for as long as the command may run."""

from __future__ import annotations

import logging
import re
import shlex
import subprocess
from dataclasses import dataclass, field
from typing import Any

from hostwire.errors import HostwireError, UsageError
from hostwire.record.procsampler import ResourceSpec

log = logging.getLogger(__name__)

LOCAL = "local"
ROLES = ("sender", "receiver", "capture")
SSH_EXIT_UNREACHABLE = 255  # ssh's own failure (connection, authentication), not the command's
DEFAULT_REMOTE_DIR = ""  # the login user's temporary files: $TMPDIR, else /var/tmp

# hw-tether CMD...: CMD in a process group of its own, ended (TERM, 10 s later KILL) as soon as
# standard input reaches its end; the loop polls because a shell cannot wait for either of two
# children. The exit status is CMD's. A non-interactive shell gives a background command
# /dev/null as its standard input, so the watcher reads the tether's own through descriptor 3.
TETHER = r"""#!/bin/sh
exec 3<&0
setsid "$@" </dev/null 3<&- &
child=$!
cat <&3 >/dev/null 2>&1 &
watch=$!
exec 3<&-
while kill -0 "$child" 2>/dev/null; do
    if ! kill -0 "$watch" 2>/dev/null; then
        kill -TERM "-$child" 2>/dev/null
        n=0
        while kill -0 "$child" 2>/dev/null && [ "$n" -lt 100 ]; do sleep 0.1; n=$((n + 1)); done
        kill -KILL "-$child" 2>/dev/null
        break
    fi
    sleep 0.1
done
wait "$child"; rc=$?
kill "$watch" 2>/dev/null
exit $rc
"""


@dataclass(frozen=True)
class Destination:
    """An OpenSSH destination: `user@host`, `host` (an alias of ~/.ssh/config too) or
    `ssh://[user@]host[:port]`; `local` is this machine."""

    text: str
    target: str = ""
    port: int | None = None

    @property
    def local(self) -> bool:
        return self.text == LOCAL

    @property
    def hostname(self) -> str:
        return self.target.rpartition("@")[2]


def parse_destination(text: str) -> Destination:
    """Raises UsageError (the caller adds the file and line) for anything else."""
    if text == LOCAL:
        return Destination(text)
    match = re.fullmatch(r"ssh://((?:[A-Za-z0-9_.-]+@)?[A-Za-z0-9_.:\[\]-]+?)(?::(\d{1,5}))?", text)
    if match:
        port = int(match.group(2)) if match.group(2) else None
        if port is not None and not 1 <= port <= 65535:
            raise UsageError(f"{text!r}: port {port}: expected 1 to 65535")
        return Destination(text, match.group(1).strip("[]"), port)
    if re.fullmatch(r"(?:[A-Za-z0-9_.-]+@)?[A-Za-z0-9_.:-]+", text) and not text.startswith("-"):
        return Destination(text, text)
    raise UsageError(f"{text!r}: expected 'local', user@host or ssh://user@host:port")


@dataclass
class HostsSpec:
    """The `[hosts]` table, checked (hostwire.campaign.config reads it)."""

    sender: Destination = field(default_factory=lambda: Destination(LOCAL))
    receiver: Destination = field(default_factory=lambda: Destination(LOCAL))
    capture: Destination | None = None  # None: the sender
    receiver_address: str = ""  # on the measured link; default: the receiver's host name
    capture_interface: str = ""  # default: the capture host's route to the receiver
    ssh_config: str = ""
    ssh_options: list[str] = field(default_factory=list)
    remote_dir: str = DEFAULT_REMOTE_DIR  # where each host's private scratch folder is made
    shape: bool = False  # install the run point's shaper on the sender's interface
    resources_interval_s: float = 0.1  # the /proc sampler's period
    resources: dict[str, ResourceSpec] = field(default_factory=dict)  # per resource: interval, filter
    connect_timeout_s: float = 10.0

    @property
    def remote(self) -> bool:
        """Whether any role is on another machine (else: today's namespaces on this one)."""
        return not all(d.local for d in self.destinations().values())

    def destinations(self) -> dict[str, Destination]:
        return {"sender": self.sender, "receiver": self.receiver, "capture": self.capture or self.sender}

    def as_dict(self) -> dict[str, Any]:
        return {"sender": self.sender.text, "receiver": self.receiver.text,
                "capture": (self.capture or self.sender).text, "receiver_address": self.receiver_address,
                "capture_interface": self.capture_interface, "ssh_config": self.ssh_config,
                "ssh_options": list(self.ssh_options), "remote_dir": self.remote_dir, "shape": self.shape,
                "resources_interval_s": self.resources_interval_s,
                "resources": {name: {"interval_s": r.interval_s, "min_change": r.min_change}
                              for name, r in self.resources.items()},
                "connect_timeout_s": self.connect_timeout_s}


class HostLost(HostwireError):
    """A host stopped answering (ssh's own exit status 255): the run is partial."""


@dataclass
class Host:
    """One machine of the campaign, reached as `role` (a machine with several roles is one Host
    per role: each role's files come back into a folder of its own)."""

    role: str
    destination: Destination
    spec: HostsSpec
    sudo: bool = False  # prefix commands with `sudo -n` (logged in as another user than root)

    @property
    def name(self) -> str:
        return f"{self.role} ({self.destination.text})"

    def ssh_argv(self) -> list[str]:
        argv = ["ssh", "-T", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={self.spec.connect_timeout_s:g}",
                "-o", "ServerAliveInterval=2", "-o", "ServerAliveCountMax=3"]
        if self.spec.ssh_config:
            argv += ["-F", self.spec.ssh_config]
        argv += list(self.spec.ssh_options)
        if self.destination.port is not None:
            argv += ["-p", str(self.destination.port)]
        return [*argv, self.destination.target]

    def argv(self, script: str, *, login: bool = False) -> list[str]:
        """The local argv that runs the shell command `script` on this host, as root (login: as
        the user ssh logs in as, without sudo)."""
        if self.destination.local:
            return ["sh", "-c", script]
        command = f"sudo -n sh -c {shlex.quote(script)}" if self.sudo and not login else script
        return [*self.ssh_argv(), "--", command]

    def run(self, script: str, *, input: bytes | None = None, timeout_s: float = 60.0,
            check: bool = True, login: bool = False) -> subprocess.CompletedProcess[bytes]:
        """Runs `script` there and returns its result; ssh's own failure raises HostLost, and with
        check a failing command raises HostwireError with its last line of stderr."""
        try:
            proc = subprocess.run(self.argv(script, login=login), input=input, capture_output=True, timeout=timeout_s,
                                  stdin=None if input is not None else subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise HostLost(f"{self.name}: no answer within {timeout_s:g} s") from None
        except FileNotFoundError:
            raise HostwireError("ssh is not installed (Debian: openssh-client)") from None
        if proc.returncode == SSH_EXIT_UNREACHABLE and not self.destination.local:
            raise HostLost(f"{self.name}: {last_line(proc.stderr) or 'ssh failed'}")
        if check and proc.returncode != 0:
            raise HostwireError(f"{self.name}: '{script[:60]}' failed (exit {proc.returncode}): "
                                f"{last_line(proc.stderr) or 'no message'}")
        return proc

    def popen(self, script: str, stdout: Any, stderr: Any) -> subprocess.Popen[bytes]:
        """Starts `script` there with a pipe as its standard input: the tether's lifeline (close it
        and a tethered command ends)."""
        return subprocess.Popen(self.argv(script), stdin=subprocess.PIPE, stdout=stdout, stderr=stderr,
                                start_new_session=True)


def last_line(data: bytes | str | None) -> str:
    text = data.decode(errors="replace") if isinstance(data, bytes) else (data or "")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def hosts_of(spec: HostsSpec) -> dict[str, Host]:
    return {role: Host(role, dest, spec) for role, dest in spec.destinations().items()}
