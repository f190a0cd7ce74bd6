"""Sockets by their lifetimes on real programs recorded by `hostwire record` between two network
namespaces the test creates: a descriptor number reused for a file and then a socket, a server
whose accepted connections all get one descriptor number, and nginx recorded by --pid. Each send
call is joined to the socket its descriptor held at that moment (docs/timeline.md)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from hostwire.record.link import LinkSpec
from hostwire.record.topology import Topology
from hostwire.run_directory import load_run
from hostwire.timeline import gap_tables
from hostwire.timeline.build import Timeline
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the helpers beside this file (importlib mode)
from record_helpers import SERVER, env, gaps_table, in_netns, manifest, record, server, stop, tshark_flows

pytestmark = [pytest.mark.privileged("netns", "tracefs"), pytest.mark.timeout(300)]

PROGRAMS = Path(__file__).resolve().parent / "programs"
SENDER = "198.18.0.1"
CAUSES = [f"{c}_ns" for c in gap_tables.CAUSES]  # every cause, in the table's own list


@pytest.fixture
def topo() -> Topology:
    with Topology(run_id="life", link=LinkSpec(rate="100mbit")) as t:
        yield t


def long_gaps_unexplained(gaps: pd.DataFrame) -> float:
    """The unexplained share of the long gaps' time (each gap's causes sum to it)."""
    assert (gaps[CAUSES].sum(axis=1) == gaps["gap_ns"]).all()
    return float(gaps["unexplained_ns"].sum() / max(1, gaps["gap_ns"].sum()))


@pytest.mark.parametrize("backend", ["tracefs", "ptrace", "preload"])
def test_a_file_on_the_sockets_fd_number_is_not_the_stream(topo: Topology, tmp_path: Path, backend: str) -> None:
    """(issue 36, first failure) the forked child writes its pid to a file on fd 3, closes it and
    connects a socket that gets fd 3 again: the 3-byte write is not the stream's, the stream's
    backlog empties between sends, and its long gaps are explained."""
    sink = server(topo.rx_ns, ["python3", str(PROGRAMS / "sink_server.py"), SERVER, "7001", "1"])
    pidfile = tmp_path / "child.pid"
    try:
        r = record(topo.tx_ns, tmp_path / "run", ["python3", str(PROGRAMS / "forked_pidfile_sender.py"), SERVER,
                                                  "7001", str(pidfile), "40"], "--syscalls", backend)
    finally:
        stop(sink)
    assert r.returncode == 0, r.stderr
    child = int(pidfile.read_text())
    run = load_run(tmp_path / "run")
    tl = Timeline.of(run)
    streams = tl.df_streams()
    (stream,) = streams.loc[streams["dport"] == 7001, "stream"]
    assert int(streams.loc[streams["stream"] == stream, "sender_pid"].iloc[0]) == child
    calls = tl.df_calls()
    file_write = calls[(calls["pid"] == child) & (calls["call"] == "write") & (calls["bytes"] == len(f"{child}\n"))]
    assert len(file_write) == 1 and file_write["stream"].iloc[0] == "", file_write.to_string()
    writes = tl.writes()
    assert int(writes.loc[writes["stream"] == stream, "bytes"].sum()) == 40 * 32768
    gaps = gaps_table(tmp_path / "run", "--stream", stream)
    slab = str(max(1, (tmp_path / "run" / "raw" / "sched.tsv").stat().st_size // 50))
    pd.testing.assert_frame_equal(gaps_table(tmp_path / "run", "--stream", stream, "--engine", "slabs",
                                             HOSTWIRE_SLAB_BYTES=slab), gaps)  # the rare events' exits too
    assert len(gaps) >= 30 and set(gaps["pid"]) == {child}
    # the bound; ten recordings (tracefs) measured 0.00 to 0.02 % unexplained, app_idle 81 to
    # 99 % (the child sleeps 20 ms between sends); joined to the file write, 99.2 % was unexplained
    assert long_gaps_unexplained(gaps) <= 0.05, gaps.to_string()


@pytest.mark.parametrize("backend", ["tracefs", "ptrace"])
def test_a_server_reusing_one_fd_number_per_connection(topo: Topology, tmp_path: Path, backend: str) -> None:
    """(issue 36, second failure) a server serving 30 connections one after another, each accepted
    socket on the same descriptor number: `hostwire gaps` finishes and every reply stream is the
    server's, with its bytes from the calls equal to its payload on the wire."""
    client = subprocess.Popen(in_netns(topo.rx_ns, ["python3", str(PROGRAMS / "sequential_client.py"), SENDER,
                                                    "7002", "30"]), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        r = record(topo.tx_ns, tmp_path / "run", ["python3", str(PROGRAMS / "sink_server.py"), SENDER, "7002", "31",
                                                  "65536"], "--syscalls", backend)
        client.wait(timeout=60)
    finally:
        stop(client)
    assert r.returncode == 0, r.stderr
    m = manifest(tmp_path / "run")
    pid = m["command"]["pid"]
    tl = Timeline.of(load_run(tmp_path / "run"))
    streams = tl.df_streams()
    replies = streams[streams["sport"] == 7002]
    assert len(replies) == 30 and set(replies["sender_pid"]) == {pid}, replies.to_string()
    check_bytes_on_the_wire(tmp_path / "run", tl, replies["stream"])
    gaps = gaps_table(tmp_path / "run")
    assert set(gaps.loc[gaps["stream"].isin(replies["stream"]), "pid"]) <= {pid}


def check_bytes_on_the_wire(run: Path, tl: Timeline, names: pd.Series) -> None:
    """Each stream's bytes from the send calls equal its payload on the wire (tshark's count,
    retransmissions once: the highest relative sequence number)."""
    writes = tl.writes().groupby("stream")["bytes"].sum()
    frames = tl.data_frames()
    sent = frames.groupby("stream")["seq_end"].max()
    flows = tshark_flows(run / "raw" / "wire.pcap")
    assert len(flows)
    for name in names:
        assert int(writes.get(name, 0)) == int(sent.get(name, -1)), (name, writes.get(name), sent.get(name))


@pytest.mark.skipif(shutil.which("nginx") is None, reason="needs nginx (scripts/apt-packages.txt)")
@pytest.mark.parametrize("backend", ["tracefs", "ptrace"])
def test_nginx_sendfile_keepalive_by_pid(topo: Topology, tmp_path: Path, backend: str) -> None:
    """(issue 36, third failure) nginx serving a static file with sendfile on, recorded by --pid,
    fetched by curl several times on one keep-alive connection and on new ones: no traceback,
    every stream nginx sent is its worker's (forked before the recording: followed all the same),
    and its bytes from the calls are its payload."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "file").write_bytes(b"z" * 300_000)
    conf = tmp_path / "nginx.conf"
    conf.write_text(f"""daemon off;
user root;
worker_processes 1;
pid {tmp_path}/nginx.pid;
error_log {tmp_path}/error.log;
events {{ worker_connections 64; }}
http {{
    access_log off;
    sendfile on;
    keepalive_timeout 30;
    client_body_temp_path {tmp_path}/body;
    proxy_temp_path {tmp_path}/proxy;
    fastcgi_temp_path {tmp_path}/fastcgi;
    uwsgi_temp_path {tmp_path}/uwsgi;
    scgi_temp_path {tmp_path}/scgi;
    server {{ listen {SERVER}:8080; root {site}; }}
}}
""")
    srv = server(topo.rx_ns, ["nginx", "-c", str(conf), "-p", str(tmp_path)])
    out = tmp_path / "run"
    rec = subprocess.Popen(in_netns(topo.rx_ns, [sys.executable, "-m", "hostwire", "record", "-o", str(out),
                                                 "--pid", str(srv.pid), "--syscalls", backend]),
                           stderr=subprocess.PIPE, text=True, env=env())
    try:
        deadline = time.monotonic() + 30
        while not (out.with_name("run.partial") / "raw" / "sockets.tsv").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.0)
        url = f"http://{SERVER}:8080/file"
        for _ in range(3):  # three fetches on one keep-alive connection, three times
            got = subprocess.run(in_netns(topo.tx_ns, ["curl", "-s", "-o", "/dev/null", "-o", "/dev/null", "-o",
                                                       "/dev/null", "-w", "%{size_download} ", url, url, url]),
                                 capture_output=True, text=True, timeout=60)
            assert got.stdout.split() == ["300000"] * 3, got
        time.sleep(0.5)
        rec.send_signal(2)
        _, err = rec.communicate(timeout=120)
    finally:
        if rec.poll() is None:
            rec.kill()
            rec.wait()
        stop(srv)
    assert rec.returncode == 0, err
    tl = Timeline.of(load_run(out))
    streams = tl.df_streams()
    served = streams[streams["sport"] == 8080]
    workers = {p for p in served["sender_pid"]}
    assert len(served) == 3 and len(workers) == 1 and srv.pid not in workers, served.to_string()
    check_bytes_on_the_wire(out, tl, served["stream"])
    proc = subprocess.run([sys.executable, "-m", "hostwire", "gaps", str(out)], capture_output=True, text=True,
                          timeout=300, env=env())
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("backend", ["tracefs", "ptrace", "preload"])
def test_a_worker_pool_fed_descriptors_over_a_unix_socket(topo: Topology, tmp_path: Path, backend: str) -> None:
    """A pre-forked pool: the parent accepts each connection and passes it to a worker over a unix
    socket (SCM_RIGHTS), closing its own copy; the worker sends the reply. Every reply stream is
    named with the worker that sent it (its pid and its comm, not the parent's), and its bytes from
    the calls equal its payload on the wire. ptrace and preload record each received descriptor
    (scm_rights); tracefs cannot read the message, and the socket samples name the workers'
    descriptors (each held 240 ms, the sampler reads every 50 ms: held 100 ms, three of twelve went
    unseen once with the machine loaded by an emulated guest)."""
    requests, chunks, chunk = 12, 6, 16384
    pidfile = tmp_path / "workers.pid"
    client = subprocess.Popen(in_netns(topo.rx_ns, ["python3", str(PROGRAMS / "sequential_client.py"), SENDER,
                                                    "7004", str(requests)]),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        r = record(topo.tx_ns, tmp_path / "run", ["python3", str(PROGRAMS / "worker_pool_server.py"), SENDER, "7004",
                                                  str(requests + 1), "2", str(chunks), str(chunk), "40", str(pidfile)],
                   "--syscalls", backend)
        client.wait(timeout=60)
    finally:
        stop(client)
    assert r.returncode == 0, r.stderr
    workers = {int(line) for line in pidfile.read_text().split()}
    parent = manifest(tmp_path / "run")["command"]["pid"]
    assert len(workers) == 2 and parent not in workers
    tl = Timeline.of(load_run(tmp_path / "run"))
    streams = tl.df_streams()
    replies = streams[streams["sport"] == 7004]
    assert len(replies) == requests, replies.to_string()
    assert set(replies["sender_pid"]) == workers, replies.to_string()  # both workers, never the parent
    assert set(replies["sender_role"]) == {"pool-worker"}, replies.to_string()
    calls = tl.df_calls()
    sent = calls[calls["stream"].isin(replies["stream"]) & calls["is_send"]]
    for name, pid in zip(replies["stream"], replies["sender_pid"]):  # the process whose calls sent it
        assert set(sent.loc[sent["stream"] == name, "pid"]) == {pid}, name
    check_bytes_on_the_wire(tmp_path / "run", tl, replies["stream"])
    assert int(tl.writes().loc[lambda w: w["stream"].isin(replies["stream"]), "bytes"].sum()) == \
        requests * chunks * chunk
    received = calls[calls["call"] == "scm_rights"]
    if backend == "tracefs":  # no record can say it: the samples named them
        assert len(received) == 0
        epochs = tl.df_fd_epochs()
        mine = epochs[epochs["pid"].isin(workers) & epochs["stream"].isin(replies["stream"])]
        assert set(mine["made_by"]) == {""} and len(mine) == requests, mine.to_string()
    else:
        assert len(received) == requests + 1 and set(received["pid"]) <= workers, received.to_string()
    proc = subprocess.run([sys.executable, "-m", "hostwire", "gaps", str(tmp_path / "run")], capture_output=True,
                          text=True, timeout=300, env=env())
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
