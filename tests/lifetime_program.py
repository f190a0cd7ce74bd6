"""A C program that runs a random descriptor script (analyze/tests/lifetime_scripts.py) for real:
the script's steps in its order, a forked child's steps before its parent goes on, an exec
re-running the program from the next step (the descriptors survive it as the kernel decides).
Sockets connect to a sink (`socket`) or are accepted from connections the program made to its
own listener before the script (`accept`); each socket's local>remote is logged, so the test
knows which stream each write should join. The descriptors passed (`send`, `recv`) go over a unix
datagram socket pair the program makes before the script (SCM_RIGHTS), which survives its execs;
close-on-exec set later is fcntl F_SETFD (`setfd`) or ioctl FIOCLEX / FIONCLEX (`fioclex`)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from lifetime_scripts import Script

LOG_FD, LISTENER_FD, FIRST_CLIENT_FD = 90, 91, 100
SEND_FD, RECV_FD = 92, 93  # the unix socket pair descriptors are passed over

HEAD = r"""#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static char buf[65536];
static struct sockaddr_in sink;

static void die(int step) { dprintf(2, "lifetime program: step %d failed\n", step); _exit(3); }
static void expect(int got, int want, int step) { if (got != want) die(step); }

static void log_socket(int sock, int fd)
{
    struct sockaddr_in l, r;
    socklen_t ll = sizeof(l), rl = sizeof(r);
    getsockname(fd, (struct sockaddr *)&l, &ll);
    getpeername(fd, (struct sockaddr *)&r, &rl);
    char a[32], b[32];
    inet_ntop(AF_INET, &l.sin_addr, a, sizeof(a));
    inet_ntop(AF_INET, &r.sin_addr, b, sizeof(b));
    dprintf(@LOG@, "%d %s:%d>%s:%d\n", sock, a, ntohs(l.sin_port), b, ntohs(r.sin_port));
}

static void send_fd(int fd, int step)
{
    union { char buf[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } u;
    char byte = 'f';
    struct iovec iov = {&byte, 1};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf)};
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof(int));
    expect((int)sendmsg(@SEND@, &m, 0), 1, step);
}

static int recv_fd(int cloexec, int step)
{
    union { char buf[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } u;
    char byte;
    struct iovec iov = {&byte, 1};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf)};
    expect((int)recvmsg(@RECV@, &m, cloexec ? MSG_CMSG_CLOEXEC : 0), 1, step);
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    if (!c || c->cmsg_type != SCM_RIGHTS)
        die(step);
    int fd;
    memcpy(&fd, CMSG_DATA(c), sizeof(int));
    return fd;
}

static void setup(const char *log, int accepts)
{
    expect(dup2(open(log, O_WRONLY | O_CREAT | O_APPEND, 0644), @LOG@), @LOG@, -1);
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_DGRAM, 0, pair))
        die(-1);
    expect(dup2(pair[0], @SEND@), @SEND@, -1);
    expect(dup2(pair[1], @RECV@), @RECV@, -1);
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof(a);
    if (bind(ls, (struct sockaddr *)&a, sizeof(a)) || listen(ls, 64) || getsockname(ls, (struct sockaddr *)&a, &al))
        die(-1);
    expect(dup2(ls, @LISTENER@), @LISTENER@, -1);
    for (int i = 0; i < accepts; i++) {
        int c = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(c, (struct sockaddr *)&a, sizeof(a)))
            die(-1);
        expect(dup2(c, @CLIENT@ + i), @CLIENT@ + i, -1);
        close(c);
    }
    close(ls);
    for (int fd = 3; fd < 16; fd++)  /* the script starts with no descriptor of its own */
        close(fd);
}

int main(int argc, char **argv)
{
    if (argc < 5)
        return 2;
    int from = atoi(argv[4]);
    char next[16];
    char *again[] = {argv[0], argv[1], argv[2], argv[3], next, NULL};
    sink.sin_family = AF_INET;
    sink.sin_port = htons((unsigned short)atoi(argv[2]));
    inet_pton(AF_INET, argv[1], &sink.sin_addr);
    int fd;
    pid_t child;
    if (from == 0)
        setup(argv[3], @ACCEPTS@);
    (void)fd;
    (void)child;
    (void)again;
    (void)send_fd;
    (void)recv_fd;
    switch (from) {
    case 0:
"""


def c_source(script: Script, files: Path) -> str:
    """The program of one script; its files (the `open` steps) are created in `files`."""
    accepts = sum(1 for s in script.steps if s.op == "accept")
    head = HEAD
    for key, value in (("LOG", LOG_FD), ("LISTENER", LISTENER_FD), ("CLIENT", FIRST_CLIENT_FD), ("ACCEPTS", accepts),
                       ("SEND", SEND_FD), ("RECV", RECV_FD)):
        head = head.replace(f"@{key}@", str(value))
    out = [head]
    for i, s in enumerate(script.steps):
        out.append(f"    case {i + 1}:;\n" if i else "")
        o_cloexec, sock_cloexec = (" | O_CLOEXEC", " | SOCK_CLOEXEC") if s.cloexec else ("", "")
        if s.op == "open":
            out.append(f'        expect(open("{files}/f{i}", O_WRONLY | O_CREAT | O_APPEND{o_cloexec}, 0644), '
                       f"{s.new_fd}, {i});\n")
        elif s.op == "socket":
            out.append(f"        expect(fd = socket(AF_INET, SOCK_STREAM{sock_cloexec}, 0), {s.new_fd}, {i});\n"
                       f"        expect(connect(fd, (struct sockaddr *)&sink, sizeof(sink)), 0, {i});\n"
                       f"        log_socket({s.sock}, fd);\n")
        elif s.op == "accept":
            flags = "SOCK_CLOEXEC" if s.cloexec else "0"
            out.append(f"        expect(fd = accept4({LISTENER_FD}, NULL, NULL, {flags}), {s.new_fd}, {i});\n"
                       f"        log_socket({s.sock}, fd);\n")
        elif s.op == "dup":
            out.append(f"        expect(fcntl({s.fd}, F_DUPFD, 0), {s.new_fd}, {i});\n")
        elif s.op == "dup2":
            out.append(f"        expect(dup2({s.fd}, {s.new_fd}), {s.new_fd}, {i});\n")
        elif s.op == "close":
            out.append(f"        expect(close({s.fd}), 0, {i});\n")
        elif s.op == "fork":
            out.append(f"        if ((child = fork()) > 0) {{\n"
                       f"            int status;\n"
                       f"            if (waitpid(child, &status, 0) != child || status != 0)\n"
                       f"                die({i});\n"
                       f"            goto after_{s.child};\n"
                       f"        }}\n")
        elif s.op == "exec":
            out.append(f'        snprintf(next, sizeof(next), "%d", {i + 2});\n'
                       f"        execv(\"/proc/self/exe\", again);\n"
                       f"        die({i});\n")
        elif s.op == "write":
            out.append(f"        expect((int)write({s.fd}, buf, {s.size}), {s.size}, {i});\n")
        elif s.op == "setfd":
            out.append(f"        expect(fcntl({s.fd}, F_SETFD, {'FD_CLOEXEC' if s.cloexec else '0'}), 0, {i});\n")
        elif s.op == "fioclex":
            out.append(f"        expect(ioctl({s.fd}, {'FIOCLEX' if s.cloexec else 'FIONCLEX'}), 0, {i});\n")
        elif s.op == "send":
            out.append(f"        send_fd({s.fd}, {i});\n")
        elif s.op == "recv":
            out.append(f"        expect(recv_fd({int(s.cloexec)}, {i}), {s.new_fd}, {i});\n")
        elif s.op == "exit":
            out.append("        return 0;\n" if s.proc == 0 else f"        _exit(0);\n    after_{s.proc}:;\n")
    out.append("    }\n    return 0;\n}\n")
    return "".join(out)


def build(script: Script, workdir: Path, name: str) -> Path:
    """Compiles the program of `script` into workdir/name."""
    files = workdir / f"{name}-files"
    files.mkdir(exist_ok=True)
    src = workdir / f"{name}.c"
    src.write_text(c_source(script, files))
    exe = workdir / name
    proc = subprocess.run(["cc", "-O1", "-Wall", "-Werror", "-o", str(exe), str(src)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return exe
