"""What an idle program waited for (`waited_in`), on three programs with a known wait, recorded for
real with `hostwire record` between two namespaces the test creates: a sender that sleeps between
its sends (clock_nanosleep), a sender blocked on a lock another thread holds (futex), and a
request-and-response server whose client pauses between requests (the server waits in recvfrom
on the client's connection, the client's address and port named; on an event loop, in epoll_wait
woken by that recvfrom). The known call is named first
and holds at least 80 % of the stream's app-idle time; explained in slabs the gaps are the same."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from hostwire.read.tsv import read_header
from hostwire.record.link import LinkSpec
from hostwire.record.topology import Topology
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the helpers beside this file (importlib mode)
from record_helpers import SERVER, gaps_table, in_netns, manifest, record, server, stop

pytestmark = [pytest.mark.privileged("netns", "tracefs"), pytest.mark.timeout(300)]

SENDER = "198.18.0.1"
PORT = 5301
ROUNDS = 25
PAUSE_S = 0.04

SINK = f"""
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("{SERVER}", {PORT})); s.listen(1)
c, _ = s.accept()
while c.recv(1 << 16):
    pass
"""

SLEEPER = f"""
import socket, time
s = socket.create_connection(("{SERVER}", {PORT}))
for _ in range({ROUNDS}):
    s.sendall(b"x" * 16384)
    time.sleep({PAUSE_S})
"""

# the main thread sends; another thread holds the lock between two sends (sleeping with it held),
# and takes it again only once the main thread has sent
LOCKED = f"""
import socket, threading, time
lock = threading.Lock()
sent = threading.Semaphore(0)
def holder():
    while True:
        with lock:
            time.sleep({PAUSE_S})
        sent.acquire()
threading.Thread(target=holder, daemon=True).start()
time.sleep(0.01)
s = socket.create_connection(("{SERVER}", {PORT}))
for _ in range({ROUNDS}):
    with lock:
        s.sendall(b"x" * 16384)
    sent.release()
    time.sleep(0.002)
"""

# one client, requests of 100 bytes, responses of 32 KiB
SERVER_PROGRAM = f"""
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("{SENDER}", {PORT})); s.listen(1)
c, _ = s.accept()
while True:
    request = c.recv(100)
    if not request:
        break
    c.sendall(b"r" * 32768)
"""

# the same server on an event loop: it waits in epoll_wait, then reads the request that woke it
EPOLL_SERVER = f"""
import selectors, socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("{SENDER}", {PORT})); s.listen(1)
c, _ = s.accept()
loop = selectors.EpollSelector()
loop.register(c, selectors.EVENT_READ)
while True:
    loop.select()
    request = c.recv(100)
    if not request:
        break
    c.sendall(b"r" * 32768)
"""

CLIENT = f"""
import socket, time
for _ in range(200):
    try:
        s = socket.create_connection(("{SENDER}", {PORT}))
        break
    except OSError:
        time.sleep(0.05)
for _ in range({ROUNDS}):
    s.sendall(b"q" * 100)
    got = 0
    while got < 32768:
        got += len(s.recv(1 << 16))
    time.sleep({PAUSE_S})
s.close()
"""


@pytest.fixture
def topo() -> Topology:
    with Topology(run_id="wait", link=LinkSpec(rate="100mbit")) as t:
        yield t


def script(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(text))
    return str(path)


def data_stream(run: Path, sport: int | None = None) -> tuple[pd.Series, pd.DataFrame]:
    """The summary row and the gap rows of the stream that carried the payload (from SENDER);
    the gaps explained whole and in slabs (a hundredth of the kernel trace each) are the same."""
    rows = gaps_table(run)
    slab = str(max(1, (run / "raw" / "sched.tsv").stat().st_size // 100))
    pd.testing.assert_frame_equal(gaps_table(run, "--engine", "slabs", HOSTWIRE_SLAB_BYTES=slab), rows)
    summary = gaps_table(run, "--summary")
    mine = summary[summary["stream"].str.startswith(f"{SENDER}:" if sport is None else f"{SENDER}:{sport}>")]
    best = mine.sort_values("gap_ns", ascending=False).iloc[0]
    return best, rows[rows["stream"] == best["stream"]]


def first_wait(waited_in: str) -> tuple[str, float]:
    """The first call of a waited_in text ('futex 97%; (no call) 3%') and its share."""
    head = str(waited_in).split("; ")[0]
    label, _, share = head.rpartition(" ")
    return label, float(share.rstrip("%")) / 100


def check_known_wait(best: pd.Series, gaps: pd.DataFrame, expected: str) -> None:
    """The expected call comes first over the stream's app-idle time with at least 80 % of it (the
    issue's floor), in the summary and recomputed from the gap rows (each gap's share times its
    app-idle ns). Measured over ten recordings of each program on the shared 2-CPU machine (the
    event-loop server: ten, two of them alone): app-idle 0.957-0.997 of the gap time (the lock),
    0.966-0.998 (the sleeper), 0.986-0.997 (the blocking server), 0.977-0.997 (the event loop); the
    known call first every time, with 97.9-98.3 % (futex; clock_nanosleep, the sender's own 2 ms pause
    after each send, 1.7-2.0 %), 99.9 % (clock_nanosleep, recvfrom), 99.8-99.9 % (epoll_wait >
    recvfrom). The app-idle floor, 0.3, only says the programs' wait is the gaps' main cause."""
    assert best["app_idle_share"] > 0.3, best.to_dict()
    label, share = first_wait(best["waited_in"])
    assert label.startswith(expected) and share >= 0.8, best.to_dict()
    idle = gaps["app_idle_ns"].to_numpy()
    parts = [dict((p.rpartition(" ")[0], float(p.rpartition(" ")[2].rstrip("%")) / 100)
                  for p in str(w).split("; ") if p) for w in gaps["waited_in"].fillna("")]
    known = sum(i * d.get(label, 0.0) for i, d in zip(idle, parts))
    assert known >= 0.78 * idle.sum(), gaps[["gap_ns", "app_idle_ns", "waited_in"]].to_string()


def recorded(topo: Topology, tmp_path: Path, program: str) -> Path:
    sink = server(topo.rx_ns, ["python3", script(tmp_path, "sink", SINK)])
    out = tmp_path / "run"
    try:
        rec = record(topo.tx_ns, out, ["python3", program])
    finally:
        stop(sink)
    assert rec.returncode == 0, rec.stderr
    assert manifest(out)["status"] == "complete"
    return out


def test_sleeping_sender_waits_in_clock_nanosleep(topo: Topology, tmp_path: Path) -> None:
    out = recorded(topo, tmp_path, script(tmp_path, "sleeper", SLEEPER))
    traced = read_header(out / "raw" / "syscalls.tsv")[0]["calls"].split(",")
    assert {"clock_nanosleep", "futex", "epoll_wait"} <= set(traced)  # record --waits by default
    best, gaps = data_stream(out)
    check_known_wait(best, gaps, "clock_nanosleep")


def test_sender_blocked_on_a_lock_waits_in_futex(topo: Topology, tmp_path: Path) -> None:
    out = recorded(topo, tmp_path, script(tmp_path, "locked", LOCKED))
    best, gaps = data_stream(out)
    check_known_wait(best, gaps, "futex")


@pytest.mark.parametrize("program, expected", [(SERVER_PROGRAM, "recvfrom"), (EPOLL_SERVER, "epoll_wait > recvfrom")],
                         ids=["blocking", "epoll"])
def test_server_waits_for_its_client(topo: Topology, tmp_path: Path, program: str, expected: str) -> None:
    out = tmp_path / "run"
    client = subprocess.Popen(in_netns(topo.rx_ns, ["python3", script(tmp_path, "client", CLIENT)]),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        rec = record(topo.tx_ns, out, ["python3", script(tmp_path, "server", program)])
        client.wait(timeout=60)
    finally:
        stop(client)
    assert rec.returncode == 0, rec.stderr
    best, gaps = data_stream(out, PORT)
    peer = best["stream"].split(">")[1]  # the client's address and port
    check_known_wait(best, gaps, f"{expected} {peer}")
