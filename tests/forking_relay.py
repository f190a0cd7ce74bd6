"""A forking relay for the qdisc tests: accepts COUNT connections on ADDR:PORT, forks a child for
each that sends FILE and then waits for the peer to close (as a keep-alive server does; with
--close it shuts its end down at once, as a one-shot relay does), and exits once every child has."""

from __future__ import annotations

import argparse
import os
import socket


def serve(path: str, addr: str, port: int, count: int, close_first: bool) -> None:
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((addr, port))
    listener.listen(count)
    children = []
    for _ in range(count):
        conn, _ = listener.accept()
        pid = os.fork()
        if pid == 0:
            listener.close()
            with open(path, "rb") as source:
                while chunk := source.read(1 << 16):
                    conn.sendall(chunk)
            if close_first:
                conn.shutdown(socket.SHUT_WR)
            conn.recv(1)  # the peer's close
            conn.close()
            os._exit(0)
        conn.close()
        children.append(pid)
    for pid in children:
        os.waitpid(pid, 0)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("file")
    parser.add_argument("addr")
    parser.add_argument("port", type=int)
    parser.add_argument("count", type=int)
    parser.add_argument("--close", action="store_true")
    a = parser.parse_args()
    serve(a.file, a.addr, a.port, a.count, a.close)
