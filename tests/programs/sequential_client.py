"""Once the server listens (a first connection that sends nothing), connects `count` times one
after another, each time sends one request line and reads the reply to its end."""

import socket
import sys
import time

host, port, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
deadline = time.monotonic() + 20
while True:  # the server may not listen yet
    try:
        socket.create_connection((host, port)).close()
        break
    except OSError:
        if time.monotonic() > deadline:
            raise
        time.sleep(0.1)
for _ in range(count):
    with socket.create_connection((host, port)) as sock:
        sock.sendall(b"GET\n")
        while sock.recv(1 << 16):
            pass
