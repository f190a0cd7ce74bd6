"""Bulk transfers between two namespaces the test creates, the sender in the shaped one
(100 Mbit/s): Debian's iperf3 with four parallel streams (-P 4, the client recorded) and in
reverse (-R: the server sends, recorded from its command), and a pre-forking server (accept, then
fork a child per connection that sends the reply and exits) fetched by five curls at once. What
each run must show: tests/program_matrix.py."""

from __future__ import annotations

import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from hostwire.record.topology import Topology

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the helpers beside this file (importlib mode)
from program_matrix import (PEER, SERVED, examine, finish, needs_qdisc, one_process, record_command,
                            run_in, spawn, topology, wait_listening, wait_recording)
from record_helpers import manifest, stop

pytestmark = [pytest.mark.privileged("netns", "tracefs"), pytest.mark.timeout(600), pytest.mark.long]


@pytest.fixture
def topo() -> Iterator[Topology]:
    with topology("xfer") as t:
        yield t


def test_iperf3_four_parallel_streams(topo: Topology, tmp_path: Path) -> None:
    server = spawn(topo.rx_ns, ["iperf3", "-s", "-1", "-B", PEER], tmp_path / "server.log")
    try:
        wait_listening(topo.rx_ns, 5201)
        finish(record_command(topo.tx_ns, tmp_path / "run", ["iperf3", "-c", PEER, "-t", "2", "-P", "4"]))
    finally:
        stop(server)
    pid = manifest(tmp_path / "run")["command"]["pid"]
    verdict = examine(tmp_path / "run", one_process(pid, "iperf3"))
    assert verdict.numbers["streams"].startswith("5 "), str(verdict)  # the control connection and four
    assert verdict.problems == [], str(verdict)


@pytest.mark.xfail(strict=False, reason=needs_qdisc(
    "the server's frames in the 100 Mbit/s tbf-peak: its 0-17 long gaps add up to at most 16 ms, so one slice of the "
    "shaper's pacing moves the share; passed 7 of 8 runs with the qdisc cause, once 5.8 % unexplained (15 gaps, "
    "8.0 ms: qdisc 49 %, on-wire 23 %, receiver-window 17 %)"))
def test_iperf3_reverse_server_sends(topo: Topology, tmp_path: Path) -> None:
    """-R: the client asks, the server sends; the server is the recorded command."""
    rec = record_command(topo.tx_ns, tmp_path / "run", ["iperf3", "-s", "-1", "-B", SERVED])
    try:
        wait_recording(tmp_path / "run", rec)
        wait_listening(topo.tx_ns, 5201)
        run_in(topo.rx_ns, ["iperf3", "-c", SERVED, "-t", "2", "-R"])
    finally:
        err = finish(rec)
    pid = manifest(tmp_path / "run")["command"]["pid"]
    verdict = examine(tmp_path / "run", one_process(pid, "iperf3"))
    assert verdict.numbers["streams"].startswith("1 "), (err, str(verdict))  # the data; the client's control
    assert verdict.problems == [], str(verdict)


PREFORK = textwrap.dedent('''\
    """Accept, then fork: each child reads the request, sends the reply and exits; the parent notes
    (child pid, client port) and, once it has served COUNT connections, writes them to LOG."""
    import os, socket, sys

    addr, count, size, log = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    body = os.urandom(size)
    listener = socket.create_server((addr, 8080), backlog=16)
    served = []
    for _ in range(count):
        conn, peer = listener.accept()
        child = os.fork()
        if child == 0:
            listener.close()
            request = b""
            while b"\\r\\n\\r\\n" not in request:
                request += conn.recv(4096)
            conn.sendall(b"HTTP/1.0 200 OK\\r\\nContent-Length: %d\\r\\n\\r\\n" % size + body)
            conn.close()
            os._exit(0)
        conn.close()
        served.append(f"{child} {peer[1]}")
    for _ in served:
        os.wait()
    comm = open("/proc/self/comm").read().strip()
    with open(log, "w") as out:
        out.write(comm + "\\n" + "\\n".join(served) + "\\n")
''')


@pytest.mark.xfail(strict=False, reason=needs_qdisc(
    "five children's 256 KiB leave the 100 Mbit/s tbf-peak one stream at a time, whose one-frame bucket loses its "
    "timer's lateness (frames about 150 us apart for 121 us on the wire), while the other streams' bytes wait in "
    "its queue with no tcp_probe of their sockets to show TCP had sent them: passed 4 of 8 runs, otherwise "
    "5.9-11.1 % of the long gaps' time unexplained (the senders and bytes right in all 8)"))
def test_preforking_server_a_child_per_connection(topo: Topology, tmp_path: Path) -> None:
    """Five curls at once, each connection served by a child of its own, forked after accept: each
    stream is its child's, with the parent's name."""
    size = 256 * 1024
    (tmp_path / "prefork.py").write_text(PREFORK)
    rec = record_command(topo.tx_ns, tmp_path / "run", [sys.executable, str(tmp_path / "prefork.py"), SERVED, "5",
                                                        str(size), str(tmp_path / "served")])
    try:
        wait_recording(tmp_path / "run", rec)
        wait_listening(topo.tx_ns, 8080)
        sizes: list[str] = []

        def fetch() -> None:
            got = run_in(topo.rx_ns, ["curl", "-s", "-o", "/dev/null", "-w", "%{size_download}",
                                      f"http://{SERVED}:8080/"])
            sizes.append(got.stdout)

        threads = [threading.Thread(target=fetch) for _ in range(5)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sizes == [str(size)] * 5, sizes
    finally:
        finish(rec)
    name, *lines = (tmp_path / "served").read_text().split("\n")
    child_of_port = {int(port): int(pid) for pid, port in (line.split() for line in lines if line)}

    def owner(row: pd.Series) -> tuple[set[int], str]:
        client = row["dport"] if row["src"] == SERVED else row["sport"]
        return {child_of_port.get(int(client), -2)}, name

    verdict = examine(tmp_path / "run", owner)
    assert verdict.numbers["streams"].startswith("5 "), str(verdict)
    assert verdict.problems == [], str(verdict)
