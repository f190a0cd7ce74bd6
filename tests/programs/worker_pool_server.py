"""A pre-forked worker pool: the parent listens and accepts; each accepted connection is passed to
a worker over a unix socket pair (SCM_RIGHTS) and closed in the parent; the worker reads the
request line, sends `chunks` chunks of `chunk` bytes with `pause_ms` between them, and closes it.
Workers name themselves `pool-worker` (their comm) and append their pid to `pidfile` before they
serve. The parent serves `connections` connections (the client's first one, which sends nothing,
included), then ends its workers and waits for them.

    worker_pool_server.py HOST PORT CONNECTIONS WORKERS CHUNKS CHUNK PAUSE_MS PIDFILE"""

import ctypes
import os
import socket
import sys
import time

PR_SET_NAME = 15


def worker(channel: socket.socket, chunks: int, chunk: int, pause_s: float, pidfile: str) -> None:
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_NAME, b"pool-worker", 0, 0, 0)
    with open(pidfile, "a") as f:
        f.write(f"{os.getpid()}\n")
    payload = b"w" * chunk
    while True:
        _, fds, _, _ = socket.recv_fds(channel, 16, 1)
        if not fds:
            return
        with socket.socket(fileno=fds[0]) as conn:
            if not conn.recv(64):  # the client's first connection, which only checks that we listen
                continue
            for i in range(chunks):
                conn.sendall(payload)
                if i + 1 < chunks:
                    time.sleep(pause_s)


def main() -> int:
    host, port, connections, workers, chunks, chunk, pause_ms = sys.argv[1:8]
    pidfile = sys.argv[8]
    listener = socket.create_server((host, int(port)))
    channels, children = [], []
    for _ in range(int(workers)):
        parent_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        pid = os.fork()
        if pid == 0:
            listener.close()
            parent_end.close()
            for other in channels:
                other.close()
            worker(child_end, int(chunks), int(chunk), int(pause_ms) / 1000, pidfile)
            os._exit(0)
        child_end.close()
        channels.append(parent_end)
        children.append(pid)
    for n in range(int(connections)):
        conn, _ = listener.accept()
        socket.send_fds(channels[n % len(channels)], [b"c"], [conn.fileno()])
        conn.close()
    for channel in channels:
        channel.send(b"")  # no descriptor: the worker's end
    for pid in children:
        os.waitpid(pid, 0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
