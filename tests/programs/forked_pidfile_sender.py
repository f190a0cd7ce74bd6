"""A client whose forked child writes its pid to a file (fd 3), closes it, then connects a socket
(fd 3 again) and sends 32 KiB every 20 ms: the file write is not the stream's."""

import os
import socket
import sys
import time

host, port, pidfile, sends = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
child = os.fork()
if child == 0:
    fd = os.open(pidfile, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    assert fd == 3, fd
    os.write(fd, f"{os.getpid()}\n".encode())
    os.close(fd)
    sock = socket.create_connection((host, port))
    assert sock.fileno() == 3, sock.fileno()
    block = b"x" * 32768
    for _ in range(sends):
        sock.sendall(block)
        time.sleep(0.02)
    sock.close()
    os._exit(0)
_, status = os.waitpid(child, 0)
sys.exit(os.waitstatus_to_exitcode(status))
