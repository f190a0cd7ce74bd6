"""Web servers the project did not write, recorded by `--pid` in the shaped namespace (100 Mbit/s)
while load generators fetch from the other one: Debian's nginx (sendfile, epoll, keep-alive)
under curl and wget, and Python's `http.server` (a ThreadingHTTPServer: one thread per
connection) under ApacheBench's sequential connections and under eight parallel curls. What each
run must show: tests/program_matrix.py."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from hostwire.record.topology import Topology

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the helpers beside this file (importlib mode)
from program_matrix import (SERVED, children, comm, examine, one_process, record_pid, run_in, spawn,
                            topology, wait_listening)
from record_helpers import stop

pytestmark = [pytest.mark.privileged("netns", "tracefs"), pytest.mark.timeout(600), pytest.mark.long]

NGINX_CONF = """daemon off;
master_process on;
worker_processes 1;
user root;
pid {root}/nginx.pid;
error_log {root}/error.log warn;
events {{ worker_connections 64; }}
http {{
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_timeout 30;
    client_body_temp_path {root}/body;
    proxy_temp_path {root}/proxy;
    fastcgi_temp_path {root}/fastcgi;
    uwsgi_temp_path {root}/uwsgi;
    scgi_temp_path {root}/scgi;
    server {{
        listen {addr}:8080;
        root {root}/site;
    }}
}}
"""
FILE_BYTES = 2 * 2**20   # 0.17 s at 100 Mbit/s


@pytest.fixture
def topo() -> Iterator[Topology]:
    with topology("web") as t:
        yield t


def site(root: Path, size: int = FILE_BYTES) -> Path:
    (root / "site").mkdir(parents=True)
    with open(root / "site" / "file", "wb") as f:
        f.write(os.urandom(size))
    return root / "site" / "file"


def test_nginx_sendfile_under_curl_and_wget(topo: Topology, tmp_path: Path) -> None:
    """nginx with sendfile on, recorded by --pid of its master: curl fetches the file twice on one
    connection, wget twice on another (keep-alive); every byte is sent by the worker."""
    site(tmp_path)
    (tmp_path / "nginx.conf").write_text(NGINX_CONF.format(root=tmp_path, addr=SERVED))
    master = spawn(topo.tx_ns, ["nginx", "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf")],
                   tmp_path / "nginx.log")
    try:
        wait_listening(topo.tx_ns, 8080)
        workers = children(master.pid)
        url = f"http://{SERVED}:8080/file"

        def load() -> None:
            got = run_in(topo.rx_ns, ["curl", "-s", "-o", "/dev/null", "-o", "/dev/null", "-w", "%{size_download} ",
                                      url, url])
            assert got.stdout.split() == [str(FILE_BYTES)] * 2, got.stdout
            run_in(topo.rx_ns, ["wget", "-q", "-O", "/dev/null", url, url])

        record_pid(topo.tx_ns, tmp_path / "run", master.pid, load)
    finally:
        stop(master)
    assert len(workers) == 1
    verdict = examine(tmp_path / "run", one_process(workers[0], "nginx"))
    assert verdict.problems == [], str(verdict)


def http_server(topo: Topology, root: Path) -> subprocess.Popen[bytes]:
    server = spawn(topo.tx_ns, [sys.executable, "-m", "http.server", "8000", "--bind", SERVED, "--directory",
                                str(root / "site")], root / "server.log")
    wait_listening(topo.tx_ns, 8000)
    return server


def test_http_server_under_ab_sequential_connections(topo: Topology, tmp_path: Path) -> None:
    """`ab -n 200 -c 1`: 200 connections one after another, each accepted on the same fd number."""
    site(tmp_path, 16 * 1024)
    server = http_server(topo, tmp_path)
    name = comm(server.pid)
    try:
        def load() -> None:
            got = run_in(topo.rx_ns, ["ab", "-q", "-n", "200", "-c", "1", f"http://{SERVED}:8000/file"])
            assert "Complete requests:      200" in got.stdout and "Failed requests:        0" in got.stdout, \
                got.stdout

        record_pid(topo.tx_ns, tmp_path / "run", server.pid, load)
    finally:
        stop(server)
    verdict = examine(tmp_path / "run", one_process(server.pid, name))
    assert verdict.numbers["streams"].startswith("200 "), str(verdict)
    assert verdict.problems == [], str(verdict)


def test_threaded_http_server_under_eight_parallel_curls(topo: Topology, tmp_path: Path) -> None:
    """Eight curls at once, each served by a thread of its own: the streams are the process's."""
    site(tmp_path, 512 * 1024)
    server = http_server(topo, tmp_path)
    name = comm(server.pid)
    try:
        def load() -> None:
            def fetch() -> None:
                got = run_in(topo.rx_ns, ["curl", "-s", "-o", "/dev/null", "-w", "%{size_download}",
                                          f"http://{SERVED}:8000/file"])
                sizes.append(got.stdout)

            sizes: list[str] = []
            threads = [threading.Thread(target=fetch) for _ in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert sizes == [str(512 * 1024)] * 8, sizes

        record_pid(topo.tx_ns, tmp_path / "run", server.pid, load)
    finally:
        stop(server)
    verdict = examine(tmp_path / "run", one_process(server.pid, name))
    assert verdict.numbers["streams"].startswith("8 "), str(verdict)
    assert verdict.problems == [], str(verdict)
