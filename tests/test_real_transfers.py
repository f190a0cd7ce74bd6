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
from program_matrix import (PEER, SERVED, check_device_queue, examine, finish, one_process,
                            record_command, run_in, spawn, topology, wait_listening, wait_recording)
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
    # its few long gaps lie in the 100 Mbit/s tbf-peak's pacing; unexplained share of their time
    # (MOST_UNEXPLAINED 5 %), ten recordings on a machine loaded by other work (a kernel build,
    # other test suites): 0.00 % in all ten (6-49 long gaps, 8.6-144 ms; qdisc 3-29 %); with the
    # tcp_probe rule alone 7 of 8 runs passed, once 5.8 %
    check_device_queue(verdict, tmp_path / "run")
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
    # five children's replies leave the 100 Mbit/s tbf-peak one stream at a time while the others'
    # wait in its queue, seen by the device's own queue; unexplained share of the long gaps' time
    # (MOST_UNEXPLAINED 5 %), ten recordings on a machine loaded by other work (a kernel build,
    # other test suites): 0.00 % in nine, 0.04 % in one (13-40 long gaps, 44-211 ms; qdisc 2-65 %,
    # wire_busy 24-59 %); with the tcp_probe rule alone 4 of 8 runs passed, otherwise 5.9-11.1 %.
    # Twenty more (ten on a quiet host, ten beside a CPU-bound process): 0.00 % in thirteen,
    # 0.03-0.92 % in five, 3.4 % and 4.1 % in two
    check_device_queue(verdict, tmp_path / "run")
    assert verdict.problems == [], str(verdict)
