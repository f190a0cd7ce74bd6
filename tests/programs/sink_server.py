"""A TCP server that reads every connection to its end, one after another, `count` of them (0:
until killed); with `reply` it answers each request line with `reply` bytes."""

import socket
import sys

host, port, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
reply = int(sys.argv[4]) if len(sys.argv) > 4 else 0
listener = socket.create_server((host, port), backlog=64)
served = 0
while count == 0 or served < count:
    conn, _ = listener.accept()
    with conn:
        if reply:
            buf = b""
            while not buf.endswith(b"\n"):
                chunk = conn.recv(4096)
                if not chunk:
                    break
                buf += chunk
            if buf:  # a probe that sends nothing gets nothing
                conn.sendall(b"y" * reply)
        else:
            while conn.recv(1 << 16):
                pass
    served += 1
