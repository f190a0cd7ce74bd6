"""Each host's private scratch folder (docs/hosts.md): made with `mktemp -d` (mode 0700, owned by
the user ssh logs in as) in that user's temporary folder ($TMPDIR, else /var/tmp) or in the
campaign's `remote_dir`, one per host and campaign, so no other user of the host can put anything
where hostwire writes or runs, and two roles on one filesystem never share a path.

Before anything is copied there, and again before each run, the folder and every folder above it
are checked as OpenSSH's StrictModes checks a home: owned by root or the login user, no symbolic
link on the way, nothing writable by another user except a folder of root's with the sticky bit
(/tmp, /var/tmp: nobody else can rename or remove what is in it). The tools in it are checked
against the digests of what was sent. A marker file names the campaign and the process that
controls it, so that `hostwire doctor --cleanup HOST` can tell a killed campaign's folder from a
live one's."""

from __future__ import annotations

import json
import shlex
import socket
from dataclasses import dataclass

from hostwire.errors import HostwireError
from hostwire.manifest import boot_id, runner_alive, runner_identity
from hostwire.record.hosts import Host, HostLost, last_line

PREFIX = "hostwire-"
MARKER = ".hostwire-scratch"
UNSAFE_EXIT = 3

# hw_secure PATH UID KIND: prints `UNSAFE <why>` and fails at the first folder that another user
# could change. KIND is what PATH itself must be: private (no access for others at all), base (a
# folder to make the scratch folder in) or file (writable by nobody else); every folder above is
# checked as a base. stat without -L: a link is judged as itself, and every component is tested.
SECURE = r"""
hw_secure() {
    p=$1 uid=$2 kind=$3
    while :; do
        if [ -L "$p" ]; then echo "UNSAFE $p is a symbolic link"; return 1; fi
        info=$(stat -c '%u %a %U' -- "$p" 2>/dev/null) || { echo "UNSAFE $p does not exist"; return 1; }
        owner=${info%% *}; rest=${info#* }; mode=${rest%% *}; name=${rest#* }
        if [ "$owner" != 0 ] && [ "$owner" != "$uid" ]; then
            echo "UNSAFE $p is owned by $name (uid $owner), not by root or the login user"; return 1
        fi
        bits=$((0$mode))
        if [ "$kind" = private ]; then
            if [ $((bits & 077)) -ne 0 ]; then echo "UNSAFE $p is open to other users (mode $mode, owner $name)"; return 1; fi
        elif [ $((bits & 022)) -ne 0 ] && { [ "$kind" = file ] || [ "$owner" != 0 ] || [ $((bits & 01000)) -eq 0 ]; }; then
            echo "UNSAFE $p is writable by other users (mode $mode, owner $name)"; return 1
        fi
        [ "$p" = / ] && return 0
        p=$(dirname -- "$p"); kind=base
    done
}
"""

# The base folder: the configured remote_dir, else the login user's $TMPDIR, else /var/tmp; an
# absolute path without `.` or `..` components, its trailing slashes dropped.
BASE = r"""
base=BASE
what="remote_dir"
if [ -z "$base" ]; then base=${TMPDIR:-/var/tmp}; what="the temporary folder"; fi
while [ "${base%/}" != "$base" ] && [ "$base" != / ]; do base=${base%/}; done
case "$base" in
    /*) ;;
    *) echo "UNSAFE $what $base is not an absolute path"; exit 3 ;;
esac
case "$base/" in
    */./*|*/../*) echo "UNSAFE $what $base has . or .. in it"; exit 3 ;;
esac
"""


class UnsafeFolder(HostwireError):
    """A folder another user of the host could change: nothing starts."""


@dataclass
class Scratch:
    """A host's scratch folder and the login user's uid (its owner)."""

    path: str
    login_uid: str

    @property
    def bin(self) -> str:
        return f"{self.path}/bin"

    def run_dir(self, run_id: str) -> str:
        return f"{self.path}/runs/{run_id}"


def make_scratch(host: Host, login_uid: str, campaign: str) -> Scratch:
    """Checks the base folder, makes the scratch folder there as the login user, checks it and
    leaves the marker; raises UnsafeFolder (one line naming the folder and its owner)."""
    marker = json.dumps({"campaign": campaign, "role": host.role, "destination": host.destination.text,
                         "controller": socket.gethostname(), "runner": runner_identity()})
    script = (SECURE + BASE.replace("BASE", shlex.quote(host.spec.remote_dir)) + f"""
uid=$(id -u)
hw_secure "$base" "$uid" base | sed "s|^UNSAFE $base |UNSAFE $what $base |; t; s|^UNSAFE |UNSAFE $what $base: |" \\
    | grep . && exit 3
umask 077
dir=$(mktemp -d "$base/{PREFIX}{campaign}-{host.role}.XXXXXXXXXX") || exit 4
if ! hw_secure "$dir" "$uid" private; then rmdir -- "$dir"; exit 3; fi
printf '%s\\n' {shlex.quote(marker)} > "$dir/{MARKER}" || exit 4
echo "SCRATCH $dir"
""")
    proc = host.run(script, check=False, login=True)
    out = proc.stdout.decode(errors="replace")
    unsafe = [line[len("UNSAFE "):] for line in out.splitlines() if line.startswith("UNSAFE ")]
    if unsafe:
        raise UnsafeFolder(f"{host.name}: {unsafe[0]}; nothing started")
    made = [line[len("SCRATCH "):] for line in out.splitlines() if line.startswith("SCRATCH ")]
    if proc.returncode != 0 or not made:
        raise HostwireError(f"{host.name}: could not make a scratch folder: "
                            f"{last_line(proc.stderr) or f'exit {proc.returncode}'}")
    return Scratch(made[0], login_uid)


def verify(host: Host, scratch: Scratch, digests: dict[str, str], then: str = "") -> None:
    """Before each run: the folder still private, each tool still what was sent; then `then`, in
    the same session (one ssh round per host and run). Raises UnsafeFolder or HostwireError with
    one line; HostLost when the host does not answer."""
    tools = " ".join(shlex.quote(name) for name in digests)
    sums = " ".join(f"{digest} {shlex.quote(name)}" for name, digest in digests.items())
    script = (SECURE + f"""
hw_secure {shlex.quote(scratch.path)} {scratch.login_uid} private || exit 3
for t in {tools}; do hw_secure {shlex.quote(scratch.bin)}/"$t" {scratch.login_uid} file || exit 3; done
cd {shlex.quote(scratch.bin)} || exit 4
if ! printf '%s  %s\\n' {sums} | sha256sum --check --status --strict 2>/dev/null; then
    sha256sum -- {tools}; exit 5
fi
{then or ":"}
""")
    proc = host.run(script, check=False)
    if proc.returncode == 0:
        return
    out = proc.stdout.decode(errors="replace")
    for line in out.splitlines():
        if line.startswith("UNSAFE "):
            raise UnsafeFolder(f"{host.name}: {line[len('UNSAFE '):]}; the run did not start")
    found = dict(reversed(line.split(None, 1)) for line in out.splitlines() if len(line.split()) == 2)
    for name, digest in digests.items():
        if proc.returncode == 5 and found.get(name) != digest:
            now = found.get(name, "unreadable")[:12]
            raise HostwireError(f"{host.name}: {scratch.bin}/{name} is not the file sent (sha256 {now}..., "
                                f"sent {digest[:12]}...); the run did not start")
    raise HostwireError(f"{host.name}: checking {scratch.path} failed (exit {proc.returncode}): "
                        f"{last_line(proc.stderr) or 'no message'}")


def remove_scratch(host: Host, scratch: Scratch) -> None:
    """The whole folder, after checking it is still the private one made (raises one line)."""
    script = SECURE + f"hw_secure {shlex.quote(scratch.path)} {scratch.login_uid} private && rm -rf -- {shlex.quote(scratch.path)}"
    proc = host.run(script, check=False)
    if proc.returncode != 0:
        why = last_line(proc.stdout).removeprefix("UNSAFE ") or last_line(proc.stderr) or f"exit {proc.returncode}"
        raise HostwireError(f"{host.name}: could not remove {scratch.path}: {why}")


def become_root(host: Host) -> str:
    """The login user's uid; sets host.sudo when that user is not root. Raises HostLost when
    ssh fails, HostwireError when neither login nor sudo -n gives root."""
    who = host.run("id -u", timeout_s=host.spec.connect_timeout_s + 20, check=False, login=True)
    uid = who.stdout.decode(errors="replace").strip()
    if who.returncode != 0 or not uid.isdigit():
        raise HostwireError(f"{host.name}: 'id -u' failed: {last_line(who.stderr) or f'exit {who.returncode}'}")
    if uid != "0" and not host.destination.local:
        host.sudo = True
        probe = host.run("id -u", check=False)
        if probe.returncode != 0 or probe.stdout.strip() != b"0":
            raise HostwireError(f"{host.name}: not root, and 'sudo -n' does not make it root: "
                                "log in as root or allow passwordless sudo")
    return uid


def cleanup_host(host: Host) -> tuple[list[str], bool]:
    """`hostwire doctor --cleanup HOST`: removes the scratch folders of this machine's campaigns
    whose controlling process is gone (in the temporary folder and in remote_dir); one line each,
    also for a folder left in place (its campaign still runs, or another machine controls it).
    The flag: whether every folder found could be removed or was left on purpose."""
    try:
        uid = become_root(host)
    except HostLost as err:
        return [f"{err} (cannot reach it)"], False
    except HostwireError as err:
        return [str(err)], False
    bases = ['"${TMPDIR:-/var/tmp}"', *([shlex.quote(host.spec.remote_dir)] if host.spec.remote_dir else [])]
    listing = host.run(f"""for base in {' '.join(bases)}; do
    for d in "${{base%/}}"/{PREFIX}*.??????????; do
        [ -d "$d" ] && [ ! -L "$d" ] || continue
        printf 'FOUND %s\\t' "$d"; head -c 4096 "$d/{MARKER}" 2>/dev/null | tr -d '\\n'; echo
    done
done""", check=False, login=True).stdout.decode(errors="replace")
    lines, ok = [], True
    for line in listing.splitlines():
        if not line.startswith("FOUND "):
            continue
        path, _, text = line[len("FOUND "):].partition("\t")
        try:
            marker = json.loads(text)
            runner = marker["runner"]
        except (ValueError, TypeError, KeyError):
            lines.append(f"{host.destination.text}:{path}: left in place (no readable {MARKER} in it)")
            continue
        if isinstance(runner, dict) and runner.get("boot_id") not in (None, boot_id()):
            lines.append(f"{host.destination.text}:{path}: left in place (its campaign is controlled from "
                         f"{marker.get('controller', 'another machine')}; run the cleanup there)")
        elif runner_alive(runner):
            lines.append(f"{host.destination.text}:{path}: left in place (campaign {marker.get('campaign')} "
                         f"still runs, pid {runner.get('pid')})")
        else:
            try:
                remove_scratch(host, Scratch(path, uid))
                lines.append(f"removed {host.destination.text}:{path} (campaign {marker.get('campaign')})")
            except HostwireError as err:
                lines.append(str(err))
                ok = False
    return lines, ok
