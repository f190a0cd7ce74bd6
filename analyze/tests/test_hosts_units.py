"""The pieces of `[hosts]` that need no second machine: the table's checks, the ssh command line,
the tether that ends a remote command with its session, the traffic's clock bound on frames with
a known offset and drift, and the /proc samples' table against hand-computed values."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hostwire.campaign.config import load_config
from hostwire.errors import UsageError
from hostwire.read.procsamples import read_proc_samples, run_summary
from hostwire.record.hosts import TETHER, Host, HostsSpec, parse_destination
from hostwire.timeline.hostclocks import KEY, monotonic_offset, traffic_fit


def write(tmp_path: Path, hosts: str, host: str = "") -> Path:
    path = tmp_path / "c.toml"
    path.write_text(f"[campaign]\nname = \"h\"\n{host}\n[defaults]\nsyscalls = \"none\"\n\n[hosts]\n{hosts}\n")
    return path


def test_hosts_table_is_read_with_every_default(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, 'sender = "root@pc1"\nreceiver = "ssh://bob@pc2:2222"\nshape = true'))
    assert config.hosts.remote
    assert config.hosts.sender.target == "root@pc1" and config.hosts.receiver.port == 2222
    assert config.hosts.capture is None and config.hosts.destinations()["capture"].text == "root@pc1"
    assert config.resolved()["hosts"]["remote_dir"] == ""  # the login user's $TMPDIR, else /var/tmp
    assert not load_config(write(tmp_path, "")).hosts.remote  # no [hosts]: today's namespaces


@pytest.mark.parametrize(("hosts", "host", "message"), [
    ('sender = "pc1"\nrecever = "pc2"', "", "c.toml:9: hosts.recever: unknown key (did you mean 'receiver'?)"),
    ('sender = "-oProxyCommand=x"', "", "c.toml:8: hosts.sender: '-oProxyCommand=x': expected 'local', user@host"),
    ('sender = "ssh://pc1:70000"', "", "c.toml:8: hosts.sender: 'ssh://pc1:70000': port 70000: expected 1 to 65535"),
    ('sender = "pc1"\nresources_interval_s = 0.001', "", "hosts.resources_interval_s: 0.001: at least 0.01 s"),
    ('sender = "pc1"\nssh_options = [1]', "", "hosts.ssh_options: expected a list of strings"),
    ('sender = "pc1"\nreceiver = "pc2"', '[host]\nmode = "vm"', "c.toml:4: host.mode: vm mode records inside a guest on this machine"),
    ('sender = "pc1"\nreceiver = "local"', "", "hosts.receiver_address: a local receiver needs receiver_address"),
    ('sender = "pc1"\nreceiver = "pc2"\n[hosts.resources.dsk]\ninterval_s = 1', "",
     "c.toml:10: hosts.resources.dsk: unknown resource (did you mean 'disk'?)"),
    ('sender = "pc1"\nreceiver = "pc2"\n[hosts.resources.disk]\ninterval_s = 1\nmin_change = 2', "",
     "c.toml:12: hosts.resources.disk.min_change: expected a share from 0 (keep every sample) to below 1, got 2"),
])
def test_a_bad_hosts_table_is_one_line_naming_file_line_and_key(tmp_path: Path, hosts: str, host: str,
                                                                 message: str) -> None:
    with pytest.raises(UsageError) as err:
        load_config(write(tmp_path, hosts, host))
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_point_hosts_mode_cannot_record_is_refused_before_any_run(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[defaults]\nsyscalls = "ptrace"\n[hosts]\nsender = "pc1"\nreceiver = "pc2"\n')
    with pytest.raises(UsageError, match="syscalls = 'ptrace': on real hosts only 'none'"):
        load_config(path)


def test_ssh_runs_in_batch_mode_on_the_port_given_and_sudo_asks_for_no_password() -> None:
    spec = HostsSpec(ssh_config="lab.conf", ssh_options=["-o", "IdentitiesOnly=yes"])
    host = Host("receiver", parse_destination("ssh://bob@pc2:2222"), spec, sudo=True)
    argv = host.argv("id -u")
    assert argv[:2] == ["ssh", "-T"] and "BatchMode=yes" in argv and argv[argv.index("-F") + 1] == "lab.conf"
    assert argv[argv.index("-p") + 1] == "2222" and argv[-3:] == ["bob@pc2", "--", "sudo -n sh -c 'id -u'"]
    assert Host("sender", parse_destination("local"), spec).argv("true") == ["sh", "-c", "true"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def test_the_tether_ends_the_whole_command_when_its_input_ends_and_passes_its_status(tmp_path: Path) -> None:
    tether = tmp_path / "hw-tether"
    tether.write_text(TETHER)
    tether.chmod(0o755)
    pids = tmp_path / "pids"
    proc = subprocess.Popen([str(tether), "sh", "-c", f"sleep 300 & echo $! > {pids}; sleep 301"],
                            stdin=subprocess.PIPE)
    deadline = time.monotonic() + 10
    while not (pids.exists() and pids.read_text().strip()):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    grandchild = int(pids.read_text())
    assert _alive(grandchild)
    assert proc.stdin is not None
    proc.stdin.close()  # the ssh session's end, as the remote command sees it
    assert proc.wait(timeout=10) == 128 + signal.SIGTERM
    time.sleep(0.2)
    assert not _alive(grandchild)
    # a command that ends by itself, its lifeline still held: its own status and output
    done = subprocess.Popen([str(tether), "sh", "-c", "echo out; exit 3"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE)
    assert done.wait(timeout=10) == 3
    assert done.stdout is not None and done.stdout.read() == b"out\n"
    assert done.stdin is not None
    done.stdin.close()
    done.stdout.close()


def _frames(t_ns: np.ndarray, toward: np.ndarray) -> pd.DataFrame:
    n = len(t_ns)
    return pd.DataFrame({"src": np.where(toward, "198.18.0.1", "198.18.0.2"),
                         "dst": np.where(toward, "198.18.0.2", "198.18.0.1"), "sport": 5000, "dport": 6000,
                         "seq": np.arange(n, dtype=np.uint32), "ack": 1, "flags": 16, "payload_len": 1448,
                         "window": 100, "proto": 6, "t_ns": t_ns.astype(np.int64)})


def test_the_traffic_recovers_a_known_offset_and_drift_within_its_bound() -> None:
    rng = np.random.default_rng(7)
    n = 4000
    t_sender = np.sort(rng.uniform(0, 4e9, n)).astype(np.int64) + 1_700_000_000 * 10**9
    toward = rng.random(n) < 0.6
    offset_ns, drift = 5_000_000.0, 20e-6  # the other clock: 5 ms ahead, gaining 20 us/s
    delay = 20_000 + rng.exponential(30_000, n)  # one-way delays, at least 20 us
    # a frame toward the receiver leaves the sender first; one from it reaches the sender last
    t_true_other = t_sender + np.where(toward, delay, -delay)
    t_other = t_true_other + offset_ns + drift * (t_true_other - t_sender[0])
    fit = traffic_fit(_frames(t_sender, toward), _frames(np.rint(t_other), toward), "198.18.0.2")
    assert fit is not None and fit.upper == toward.sum() and fit.lower == (~toward).sum()
    mid = (t_sender[0] + t_sender[-1]) / 2
    error = abs(fit.offset_ns + fit.drift_ppm * 1e-6 * (mid - fit.t_ref_ns) - (offset_ns + drift * (mid - t_sender[0])))
    assert error <= fit.bound_ns < 25_000  # the least delay both ways bounds it: 20 us
    assert fit.drift_ppm == pytest.approx(20.0, abs=2.0)
    # the capture stamps' offset as the user-space clocks': each host's realtime - monotonic
    pairs_s = [{"realtime_ns": 10_000, "monotonic_ns": 1_000}]
    pairs_o = [{"realtime_ns": 10_000, "monotonic_ns": 1_000 + 7_000}]
    assert monotonic_offset(fit, pairs_s, pairs_o) == pytest.approx(fit.offset_ns + 7_000)


def test_frames_that_contradict_each_other_bound_nothing() -> None:
    t = np.arange(0, 200, dtype=np.int64) * 1_000_000
    toward = np.arange(200) % 2 == 0
    # toward: the other stamps 1 ms early, from: 1 ms late (impossible with one offset)
    other = t + np.where(toward, -1_000_000, 1_000_000)
    fit = traffic_fit(_frames(t, toward), _frames(other, toward), "198.18.0.2")
    assert fit is not None and np.isnan(fit.bound_ns) and fit.crossed_ns > 0
    assert set(KEY) <= set(_frames(t, toward).columns)


SAMPLE = """@ {up} all
{load} 0.50 0.40 1/100 999
cpu  {user} 0 {system} {idle} 0 0 0 0 0 0
cpu0 1 0 1 1 0 0 0 0 0 0
ctxt {ctxt}
btime 1
MemTotal:       1000 kB
MemAvailable:   {avail} kB
Dirty:          {dirty} kB
Slab:           7 kB
Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    d0: {rx} 10 0 0 0 0 0 0 {tx} 20 0 1 0 0 0 0
Ip: Forwarding DefaultTTL
Ip: 1 64
Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors
Tcp: 1 200 120000 -1 0 0 0 0 0 5 6 {retrans} 0 {rsts} 0
   8       0 sda 10 0 {rd} 0 20 0 {wr} 0 0 0 0 0 0 0 0 0 0
   8       1 sda1 10 0 999 0 20 0 999 0 0 0 0 0 0 0 0 0 0
"""


def test_proc_samples_give_totals_rates_and_busy_share_as_computed_by_hand(tmp_path: Path) -> None:
    a = SAMPLE.format(up="10.00", load="0.50", user=100, system=50, idle=850, ctxt=1000, avail=500, dirty=4,
                      rx=1000, tx=5000, retrans=3, rsts=1, rd=100, wr=200)
    b = SAMPLE.format(up="10.10", load="0.70", user=130, system=60, idle=910, ctxt=1300, avail=300, dirty=8,
                      rx=3000, tx=105000, retrans=5, rsts=1, rd=100, wr=260)
    path = tmp_path / "proc.txt"
    path.write_text(a + b + "@ 10.20 all\n0.70 0.50 0.40 1/100 999\ncpu  1 2")  # the last sample cut short
    df = read_proc_samples(path)
    assert len(df) == 2 and df.attrs["cut"] == 1
    summary = run_summary(df)
    assert summary["totals"]["net.d0.tx_bytes"] == 100000 and summary["totals"]["net.d0.rx_bytes"] == 2000
    assert summary["totals"]["tcp_RetransSegs"] == 2 and summary["totals"]["tcp_OutRsts"] == 0
    assert summary["totals"]["disk_write_sectors"] == 60  # sda only: sda1's sectors are sda's
    assert summary["mean"]["net.d0.tx_bytes/s"] == pytest.approx(1e6)
    assert summary["mean"]["ctxt/s"] == pytest.approx(3000)
    assert summary["mean"]["cpu_busy"] == pytest.approx(40 / 100)  # 30 user + 10 system of 100 ticks
    assert summary["max"]["mem_available_kib"] == 500 and summary["mean"]["dirty_kib"] == 6


def test_the_samplers_differential_filter_keeps_a_sample_only_when_a_number_moved_by_the_share(tmp_path: Path) -> None:
    from hostwire.paths import tool

    source = tmp_path / "loadavg"
    source.write_text("100.00 0.40 0.30 1/100 999\n")
    out = tmp_path / "proc.txt"
    with open(out, "wb") as sink:
        proc = subprocess.Popen([str(tool("hw-procsample")), "--period", "50ms", "--resource", f"load:{source}:1:0.1"],
                                stdout=sink)
        try:
            # 105 is 5 % from the kept 100: dropped; 111 is 11 %: kept; 112 is 0.9 % from 111: dropped
            for value in (105, 111, 112):  # each left for many 50 ms rounds, a busy host's too
                time.sleep(0.6)
                tmp = tmp_path / "next"
                tmp.write_text(f"{value}.00 0.40 0.30 1/100 999\n")
                tmp.rename(source)
            time.sleep(0.6)
        finally:
            proc.terminate()
            proc.wait()
    df = read_proc_samples(out)
    assert df["load1"].tolist() == [100.0, 111.0]
    ticks = len([line for line in out.read_text().splitlines() if line.startswith("@ ")]) + df.attrs["dropped"]["load"]
    assert df.attrs["dropped"]["load"] >= 3 and ticks >= 15  # every round either kept or counted


def test_each_resource_is_read_at_its_own_interval() -> None:
    from hostwire.record.procsampler import ResourceSpec, sampler_argv

    argv = sampler_argv("hw-procsample", 0.1, {"disk": ResourceSpec(1.0, 0.05), "net": ResourceSpec(0.25)})
    assert argv[:3] == ["hw-procsample", "--period", "100000000ns"]
    spec = dict(argv[i + 1].split(":", 1) for i, arg in enumerate(argv) if arg == "--resource")
    assert spec["disk"] == "/proc/diskstats:10:0.05" and spec["net"] == "/proc/net/dev:2:0"
    assert spec["cpu"] == "/proc/stat:1:0"


def test_the_timeline_takes_the_receivers_clock_from_the_traffic_line_when_the_manifest_chose_it() -> None:
    from hostwire.timeline.hostclocks import chosen_receiver_fit

    line = {"offset_us": 0.3, "drift_ppm": 2.0, "bound_us": 5.0, "crossed_us": 0.0,
            "monotonic_offset_us": 2e9, "t_ref_monotonic_ns": 1_000_000_000}
    udp = {"offset_us": 2e9 + 9, "drift_ppm": 1.0, "bound_us": 80.0, "start_rtt_us": 100.0, "end_rtt_us": None}
    manifest = {"hosts": {"sender": {"roles": ["sender", "capture"]}, "receiver": {"roles": ["receiver"]}},
                "clocks": {"receiver": {"udp": udp, "traffic": line, "chosen": "traffic"}}}
    fit = chosen_receiver_fit(manifest)
    assert fit is not None and fit.method == "hosts-traffic" and fit.bound_ns == 5000.0
    t = 2_000_000_000  # a second after the line's reference: 2000 s plus 2 ppm of a second
    assert fit.to_sender(np.array([t + 2_000_000_000_000 + 2000]))[0] == t
    assert chosen_receiver_fit({**manifest, "clocks": {"receiver": {"udp": udp, "traffic": line, "chosen": "udp"}}}) is None
    one_machine = {**manifest, "hosts": {"sender": {"roles": ["sender", "receiver", "capture"]}}}
    assert chosen_receiver_fit(one_machine) is None
    assert chosen_receiver_fit({}) is None  # a run of namespaces
