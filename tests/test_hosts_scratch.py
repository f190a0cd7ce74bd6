"""Each host's private scratch folder (docs/hosts.md) over real ssh (tests/hostlab.py): one machine
playing sender and receiver under two names, or as `local` and an ssh name of itself; a remote_dir another user can change refused in one
line before anything starts; a tool changed on a host between two runs refusing the second; and
nothing of hostwire's left on any host after Ctrl-C or SIGTERM, or, after the runner is killed, once
`hostwire doctor --cleanup HOST` has run (every host's folders listed before and after)."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the helpers beside this file (importlib mode)
import hostlab  # noqa: E402
from hostlab import lab  # noqa: E402,F401  (the fixture: a lab of ssh hosts, opened and closed)

pytestmark = [pytest.mark.privileged("netns", "tracefs"), pytest.mark.long,
              pytest.mark.skipif(not Path(hostlab.SSHD).exists(), reason="needs openssh-server (make setup)")]
NOTHING = {"tx": [], "rx": [], "cap": []}
NOBODY = 65534


def start(config: Path, out: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([*hostlab.HOSTWIRE, "run", str(config), "--out", str(out)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def wait_for(out: Path, pattern: str, proc: subprocess.Popen[str], timeout_s: float = 120) -> Path:
    deadline = time.monotonic() + timeout_s
    while not (found := sorted(out.glob(pattern))):
        assert time.monotonic() < deadline and proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        time.sleep(0.1)
    return found[0]


def scratch_dirs(out: Path) -> dict[str, str]:
    return {role: h["scratch_dir"] for role, h in json.loads((out / "campaign.json").read_text())["hosts"].items()}


def test_one_machine_under_two_names_is_sender_and_receiver(lab: "hostlab.Lab") -> None:
    before = lab.listing("tx")
    out = lab.root.parent / "runs" / "same"
    config = hostlab.campaign_file(lab.root / "same.toml", lab, receiver="tx2", grid="senders = [1]", capture="tx",
                                   receiver_address="198.18.0.1", capture_interface="", shape=False)
    proc = hostlab.run(config, out, "--keep-remote")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    book = json.loads((out / "campaign.json").read_text())
    assert [r["status"] for r in book["runs"]] == ["complete", "complete"], book["runs"]
    scratch = scratch_dirs(out)
    assert set(scratch) == {"sender", "receiver"} and scratch["sender"] != scratch["receiver"], scratch
    assert [line for line in proc.stderr.splitlines() if "--keep-remote" in line] == [
        f"hostwire: sender (tx): kept {scratch['sender']} (--keep-remote)",
        f"hostwire: receiver (tx2): kept {scratch['receiver']} (--keep-remote)"]
    kept = lab.listing("tx")
    assert f"{scratch['sender']}/bin/hw-bench root 755" in kept and f"{scratch['receiver']} root 700" in kept, kept
    # the campaign ended: doctor --cleanup removes what it kept, under either name
    doctor = [*hostlab.HOSTWIRE, "doctor", "--ssh-config", str(lab.ssh_config), "--cleanup", "tx2"]
    done = subprocess.run(doctor, capture_output=True, text=True, timeout=60)
    assert sorted(done.stdout.splitlines()) == sorted(f"removed tx2:{path} (campaign lab)" for path in scratch.values())
    for entry in book["runs"]:
        raw = out / entry["run_id"] / "raw"
        received = sorted(p.name for p in (raw / "hosts" / "receiver" / "bench").iterdir())
        assert received and all(name.startswith("recv") for name in received), received
        assert (raw / "hosts" / "sender" / "bench" / "main.tsv").stat().st_size > 0
        # both capture the loopback interface their traffic takes, and see the same frames
        from hostwire.read.pcap import read_pcap

        frames = {role: read_pcap(raw / "hosts" / role / "wire.pcap") for role in ("sender", "receiver")}
        assert len(frames["sender"]) > 100 and len(frames["sender"]) == len(frames["receiver"])
    assert hostlab.wait_nothing_left(lab) == NOTHING
    assert lab.listing("tx") == before


def test_local_and_an_ssh_name_of_this_machine_are_sender_and_receiver(lab: "hostlab.Lab") -> None:
    alias = lab.open_self()

    def ours() -> list[str]:  # this machine's /var/tmp is shared with other work: hostwire's names
        return sorted(p.name for p in Path("/var/tmp").iterdir() if p.name.startswith("hostwire-lab-"))

    before = ours()
    out = lab.root.parent / "runs" / "self"
    config = hostlab.campaign_file(lab.root / "self.toml", lab, sender="local", receiver=alias, grid="senders = [1]",
                                   repetitions=1, capture="local", receiver_address="198.18.1.1",
                                   capture_interface="", shape=False)
    proc = hostlab.run(config, out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    book = json.loads((out / "campaign.json").read_text())
    assert [r["status"] for r in book["runs"]] == ["complete"], book["runs"]
    scratch = scratch_dirs(out)
    assert scratch["sender"].startswith("/var/tmp/hostwire-lab-sender.")
    assert scratch["receiver"].startswith("/var/tmp/hostwire-lab-receiver."), scratch
    assert ours() == before
    children = hostlab.sh("ps", "-o", "pid=", "--ppid", str(lab.self_pid), check=False).stdout.split()
    assert children == []  # no session of hostwire's left on `self`


def test_a_remote_dir_another_user_can_change_is_one_line_and_nothing_starts(lab: "hostlab.Lab") -> None:
    owned = lab.root.parent / "owned"  # another user's, however private
    owned.mkdir(mode=0o700)
    os.chown(owned, NOBODY, NOBODY)
    opened = lab.root.parent / "opened"  # root's, but anybody may rename what is in it
    (opened / "hw").mkdir(parents=True)
    opened.chmod(0o777)
    before = lab.listings()
    for remote_dir, why in ((owned, f"remote_dir {owned} is owned by nobody (uid {NOBODY}), not by root or the "
                                    "login user"),
                            (opened / "hw", f"remote_dir {opened / 'hw'}: {opened} is writable by other users "
                                            "(mode 777, owner root)")):
        out = lab.root.parent / "runs" / remote_dir.name
        proc = hostlab.run(hostlab.campaign_file(lab.root / "unsafe.toml", lab, remote_dir=str(remote_dir)), out)
        assert proc.returncode == 1
        assert proc.stderr == f"hostwire: sender (tx): {why}; nothing started\n"
        assert not (out / "campaign.json").exists() and not [p for p in out.iterdir() if not p.name.startswith(".")]
        assert list(owned.iterdir()) == [] and list((opened / "hw").iterdir()) == []
        assert hostlab.wait_nothing_left(lab) == NOTHING
        assert lab.listings() == before


def test_a_tool_changed_on_a_host_between_two_runs_refuses_the_next_run(lab: "hostlab.Lab") -> None:
    before = lab.listings()
    out = lab.root.parent / "runs" / "swap"
    proc = start(hostlab.campaign_file(lab.root / "swap.toml", lab, grid="senders = [1]"), out)
    wait_for(out, "p000*.partial/raw/hosts/receiver/hw-bench-receive.log", proc)
    tool = f"{scratch_dirs(out)['sender']}/bin/hw-bench"
    # as a local user who could write there would: a new file renamed over the one sent
    swap = lab.ssh("tx", f"cp {tool} {tool}.new && printf x >> {tool}.new && mv {tool}.new {tool}")
    assert swap.returncode == 0, swap.stderr
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 1, stdout + stderr
    runs = json.loads((out / "campaign.json").read_text())["runs"]
    assert runs[0]["status"] == "complete", runs
    assert runs[1]["status"] == "failed"
    reason = runs[1]["reason"]
    assert reason.startswith(f"sender (tx): {tool} is not the file sent (sha256 ") and reason.endswith(
        "...); the run did not start") and "\n" not in reason, reason
    assert [line for line in stderr.splitlines() if "not the file sent" in line] == [
        f"hostwire: run {runs[1]['run_id']} failed: {reason}"]
    assert not list(out.glob(f"{runs[1]['run_id']}*/raw/hosts/*/hw-bench*.log"))  # nothing ran
    assert hostlab.wait_nothing_left(lab) == NOTHING
    assert lab.listings() == before


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_ctrl_c_or_sigterm_mid_run_leaves_nothing_on_any_host(lab: "hostlab.Lab", signum: int, status: int) -> None:
    before = lab.listings()
    out = lab.root.parent / "runs" / "int"
    proc = start(hostlab.campaign_file(lab.root / "int.toml", lab, grid="senders = [1]", duration_s=4.0), out)
    wait_for(out, "p000*.partial/raw/hosts/receiver/hw-bench-receive.log", proc)
    time.sleep(1.0)
    during = lab.listings()
    assert all(any("/hostwire-lab-" in line for line in during[alias]) for alias in during), during
    proc.send_signal(signum)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == status, stdout + stderr
    assert json.loads((out / "campaign.json").read_text())["state"] == "interrupted"
    assert hostlab.wait_nothing_left(lab) == NOTHING
    assert lab.listings() == before


def test_a_killed_campaigns_folders_are_removed_by_doctor_cleanup_host(lab: "hostlab.Lab") -> None:
    before = lab.listings()
    out = lab.root.parent / "runs" / "kill"
    proc = start(hostlab.campaign_file(lab.root / "kill.toml", lab, grid="senders = [1]", duration_s=4.0), out)
    wait_for(out, "p000*.partial/raw/hosts/receiver/hw-bench-receive.log", proc)
    doctor = [*hostlab.HOSTWIRE, "doctor", "--ssh-config", str(lab.ssh_config), "--cleanup"]
    live = subprocess.run([*doctor, "tx"], capture_output=True, text=True, timeout=60)
    scratch = scratch_dirs(out)
    assert live.stdout == f"tx:{scratch['sender']}: left in place (campaign lab still runs, pid {proc.pid})\n"
    proc.kill()
    proc.communicate(timeout=60)
    assert hostlab.wait_nothing_left(lab, 30) == NOTHING  # each tether ended with its session
    left = lab.listings()
    for alias, role in (("tx", "sender"), ("rx", "receiver"), ("cap", "capture")):
        assert f"{scratch[role]} root 700" in left[alias], left[alias]
    done = subprocess.run([*doctor, "tx", "rx", "cap"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == [f"removed {alias}:{scratch[role]} (campaign lab)" for alias, role in
                                        (("tx", "sender"), ("rx", "receiver"), ("cap", "capture"))]
    assert lab.listings() == before
    again = subprocess.run([*doctor, "tx"], capture_output=True, text=True, timeout=60)
    assert again.stdout == "nothing to clean up\n"
