"""Real hosts over real ssh (docs/hosts.md): campaigns whose sender, receiver and capture are sshd
"hosts" in namespaces of their own (tests/hostlab.py), with known clock offsets and one /var/tmp
shared by all (in which another user made /var/tmp/hostwire beforehand); a host that refuses the
key, a host without tracefs, a host cut off in the middle of a run. After each, nothing of
hostwire's on any host: no process, no file (the hosts' folders listed before and after)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import hostwire
from hostwire.timeline.build import Timeline


sys.path.insert(0, str(Path(__file__).resolve().parent))  # the helpers beside this file (importlib mode)
import hostlab  # noqa: E402
from hostlab import lab  # noqa: E402,F401  (the fixture: a lab of ssh hosts, opened and closed)

HOSTWIRE = hostlab.HOSTWIRE
pytestmark = [pytest.mark.privileged("netns", "tracefs"), pytest.mark.long,
              pytest.mark.skipif(not Path(hostlab.SSHD).exists(), reason="needs openssh-server (make setup)")]



def retransmissions(frames: "pd.DataFrame", source: str) -> int:
    """TCP segments from `source` carrying a sequence number the stream sent before (SYN and FIN
    count as one; a retransmission may carry new bytes too: Linux collapses small segments into the
    one it retransmits). No offloads on the lab's links: one segment is one frame."""
    tcp = frames[(frames["src"].astype(str) == source) & (frames["proto"] == 6)]
    flags = tcp["flags"].to_numpy().astype(np.int64)
    length = tcp["payload_len"].to_numpy() + (flags & 0x02 > 0) + (flags & 0x01 > 0)
    tcp = tcp.assign(length=length)[length > 0]
    count = 0
    for _, stream in tcp.groupby(["sport", "dst", "dport"], observed=True):
        seq = stream["seq"].to_numpy().astype(np.int64)
        start = (seq - seq[0]) % 2**32  # from the stream's first sequence number
        reach = np.maximum.accumulate(start + stream["length"].to_numpy())
        count += int((start[1:] < reach[:-1]).sum())
    return count


@pytest.fixture
def shared_lab(tmp_path: Path) -> Iterator["hostlab.Lab"]:
    lab = hostlab.make_lab(tmp_path, shared_tmp=True)
    try:
        yield lab.open()
    finally:
        lab.close()


def test_four_runs_on_three_ssh_hosts_complete_with_clocks_recovered_and_proc_agreeing(
        shared_lab: "hostlab.Lab") -> None:
    lab = shared_lab
    out = lab.root.parent / "runs" / "c"
    # another user's world-writable /var/tmp/hostwire, made before the campaign on the /var/tmp
    # every host shares: hostwire must neither write nor run anything under it
    foreign = lab.shared_var_tmp / "hostwire"
    foreign.mkdir()
    os.chown(foreign, 65534, 65534)
    foreign.chmod(0o777)
    foreign_mtime = foreign.stat().st_mtime_ns
    before = lab.listings()
    # the sender host's control link, captured from this side: its ssh sessions' retransmissions
    control_pcap = lab.root / "control.pcap"
    tcpdump = subprocess.Popen(["tcpdump", "-q", "-i", f"hl{lab.pid}c0", "-s", "96", "-U", "-w", str(control_pcap),
                                "tcp"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)
    try:
        proc = hostlab.run(hostlab.campaign_file(lab.root / "c.toml", lab), out)
    finally:
        tcpdump.terminate()
        tcpdump.wait()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    from hostwire.read.pcap import read_pcap
    from hostwire.read.procsamples import read_proc_samples

    control = read_pcap(control_pcap)
    # the sender host's CLOCK_BOOTTIME (its time namespace's offset is 0) onto CLOCK_REALTIME
    boot_to_real = time.clock_gettime_ns(time.CLOCK_REALTIME) - time.clock_gettime_ns(time.CLOCK_BOOTTIME)
    assert hostlab.wait_nothing_left(lab) == {"tx": [], "rx": [], "cap": []}
    assert lab.listings() == before  # every host's scratch folder removed, nothing else left
    assert list(foreign.iterdir()) == [] and foreign.stat().st_mtime_ns == foreign_mtime
    book = json.loads((out / "campaign.json").read_text())
    assert [r["status"] for r in book["runs"]] == ["complete"] * 4
    assert set(book["hosts"]) == {"sender", "receiver", "capture"}
    # one private folder per host, in the shared /var/tmp, recorded in every run's manifest
    scratch = {role: h["scratch_dir"] for role, h in book["hosts"].items()}
    assert len(set(scratch.values())) == 3, scratch
    assert all(d.startswith(f"/var/tmp/hostwire-lab-{role}.") for role, d in scratch.items()), scratch
    assert all(h["facts"]["kernel_release"] and h["facts"]["clocksource"] for h in book["hosts"].values())
    known = lab.offsets
    retransmitted = chose_traffic = 0
    for entry in book["runs"]:
        manifest = json.loads((out / entry["run_id"] / "manifest.json").read_text())
        assert {role: h["scratch_dir"] for role, h in manifest["hosts"].items()} == scratch
        clocks = manifest["clocks"]
        udp, traffic = clocks["receiver"]["udp"], clocks["receiver"]["traffic"]
        # the time namespaces' offsets, recovered by the UDP exchange within its own bound
        truth_us = (known["rx"] - known["tx"]) * 1e6
        assert abs(udp["offset_us"] - truth_us) <= udp["bound_us"], udp
        # one kernel: the capture clocks are equal, within the traffic's own bound
        for role in ("receiver", "capture"):
            hull = clocks[role]["traffic"]
            assert abs(hull["offset_us"]) <= hull["bound_us"] < 1000, hull
            truth = (known["rx" if role == "receiver" else "cap"] - known["tx"]) * 1e6
            assert abs(hull["monotonic_offset_us"] - truth) <= hull["bound_us"] + 50, hull
        assert clocks["receiver"]["chosen"] == min(("udp", "traffic"), key=lambda m: clocks["receiver"][m]["bound_us"])
        # the timeline reads the receiver's logs through the chosen method's line
        fit = Timeline.of(hostwire.load_run(out / entry["run_id"])).clock()
        if clocks["receiver"]["chosen"] == "traffic":
            chose_traffic += 1
            assert fit.method == "hosts-traffic" and fit.bound_ns == pytest.approx(traffic["bound_us"] * 1e3)
            assert abs(fit.offset_ns - truth_us * 1e3) <= fit.bound_ns + 50e3, fit
        else:
            assert fit.method != "hosts-traffic"
        assert traffic["frames_toward"] > 100 and traffic["frames_from"] > 10
        # /proc of every host: bytes per interface against each host's capture
        run_dir = out / entry["run_id"]
        for role, dev, direction in (("sender", "d0", "tx"), ("receiver", "d0", "rx"), ("capture", "ptx", "rx")):
            frames = read_pcap(run_dir / "raw" / "hosts" / role / "wire.pcap")
            toward = frames["dst"].astype(str).to_numpy() == "198.18.0.2"
            counted = manifest["proc"][role]["totals"][f"net.{dev}.{direction}_bytes"]
            captured = int(frames["wire_len"].to_numpy()[toward].sum())
            assert abs(counted - captured) <= 0.01 * captured, (role, counted, captured)
        # RetransSegs against the captures: the sender host's TCP is the benchmark's, on the
        # measured link, and the ssh sessions hostwire holds to it, on its control link
        sent = read_pcap(run_dir / "raw" / "hosts" / "sender" / "wire.pcap")
        retrans = retransmissions(sent, "198.18.0.1")
        samples = read_proc_samples(run_dir / "raw" / "hosts" / "sender" / "proc.txt")
        span = (samples["t_s"].iloc[0] * 1e9 + boot_to_real, samples["t_s"].iloc[-1] * 1e9 + boot_to_real)
        ssh = control[(control["t_ns"] >= span[0] - 10e6) & (control["t_ns"] <= span[1] + 10e6)]
        assert manifest["losses"]["qdisc_drops"] == 0  # none lost before the sender's capture
        assert manifest["proc"]["sender"]["totals"]["tcp_RetransSegs"] == retrans + retransmissions(ssh, lab.hosts["tx"].control_addr)
        retransmitted += retrans
    assert retransmitted > 0  # the lab's bottleneck drops: the count is tested on real retransmissions
    assert chose_traffic > 0  # the traffic's line (4-7 us) beats the exchanges' (58-100 us) on the lab
    for step in (["analyze", str(out)], ["report", str(out)]):
        done = subprocess.run([*HOSTWIRE, *step], capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
    assert (out / "report.html").exists()


def test_a_host_that_refuses_the_key_is_one_line_and_the_campaign_goes_on(lab: "hostlab.Lab") -> None:
    other = lab.root / "other_id"
    hostlab.sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other))
    text = lab.ssh_config.read_text()
    rx_block = text[text.index("Host rx"):text.index("Host cap")]
    lab.ssh_config.write_text(text + "\n" + rx_block.replace("Host rx", "Host rxbadkey")
                              .replace(str(lab.root / "id") + "\n", str(other) + "\n"))
    out = lab.root.parent / "runs" / "k"
    proc = hostlab.run(hostlab.campaign_file(lab.root / "k.toml", lab, receiver="rxbadkey", grid="senders = [1]"), out)
    assert proc.returncode == 1
    book = json.loads((out / "campaign.json").read_text())
    assert [r["status"] for r in book["runs"]] == ["failed", "failed"]
    lines = [line for line in proc.stderr.splitlines() if "Permission denied" in line]
    # once before the first run, then as each run's reason
    problem = "receiver (rxbadkey): root@198.18.1.6: Permission denied (publickey). (cannot reach it)"
    assert lines == [f"hostwire: {problem}", *(f"hostwire: run {r['run_id']} failed: {problem}" for r in book["runs"])]
    assert "Traceback" not in proc.stderr
    assert hostlab.wait_nothing_left(lab) == {"tx": [], "rx": [], "cap": []}


def test_a_host_cut_off_mid_run_marks_it_partial_and_resume_redoes_it(lab: "hostlab.Lab") -> None:
    out = lab.root.parent / "runs" / "cut"
    config = hostlab.campaign_file(lab.root / "cut.toml", lab, grid="senders = [1]", repetitions=2, duration_s=4.0)
    before = lab.listings()
    proc = subprocess.Popen([*HOSTWIRE, "run", str(config), "--out", str(out)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    link = f"hl{lab.pid}c1"  # the receiver's control link
    deadline = time.monotonic() + 120
    while not list(out.glob("p000*.partial/raw/hosts/receiver/hw-bench-receive.log")):
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.1)
    time.sleep(1.0)
    hostlab.sh("ip", "link", "set", link, "down")
    time.sleep(9.0)  # longer than ssh's ServerAlive (3 x 2 s)
    hostlab.sh("ip", "link", "set", link, "up")
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 1, stdout + stderr
    book = json.loads((out / "campaign.json").read_text())
    statuses = [r["status"] for r in book["runs"]]
    assert statuses[0] == "partial" and statuses[1] == "complete", book["runs"]
    assert book["runs"][0]["reason"].startswith("receiver (rx): lost"), book["runs"][0]["reason"]
    assert hostlab.wait_nothing_left(lab, 30) == {"tx": [], "rx": [], "cap": []}
    assert lab.listings() == before  # the receiver's folder too, once it answered again
    again = hostlab.run(config, out, "--resume")
    assert again.returncode == 0, again.stdout + again.stderr
    book = json.loads((out / "campaign.json").read_text())
    assert [r["status"] for r in book["runs"]] == ["complete", "complete"]
    assert book["runs"][1].get("resumed") and not book["runs"][0].get("resumed")
    assert hostlab.wait_nothing_left(lab) == {"tx": [], "rx": [], "cap": []}


def test_a_host_without_tracefs_is_named_and_its_runs_marked(tmp_path: Path) -> None:
    lab = hostlab.make_lab(tmp_path, no_tracefs=("tx",))
    try:
        lab.open()
        out = tmp_path / "runs" / "t"
        before = lab.listings()
        proc = hostlab.run(hostlab.campaign_file(lab.root / "t.toml", lab, grid="senders = [1]", repetitions=1, kernel_trace=True), out)
        assert proc.returncode == 1
        assert "hostwire: sender (tx): missing tracefs: not mounted" in proc.stderr, proc.stderr
        book = json.loads((out / "campaign.json").read_text())
        run_entry = book["runs"][0]
        assert run_entry["status"] == "failed" and "hw-schedtrace" in run_entry["reason"], run_entry
        assert hostlab.wait_nothing_left(lab) == {"tx": [], "rx": [], "cap": []}
        assert lab.listings() == before  # a failed run's files and the tools removed too
    finally:
        lab.close()
