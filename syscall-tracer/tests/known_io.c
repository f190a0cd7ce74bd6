/* A program with a known sequence of I/O calls, for the tracer tests: a short write and an EAGAIN
 * on a pipe, a TCP connection over loopback (connect, accept, write/read, sendto/recvfrom,
 * writev/readv, sendmsg/recvmsg, sendfile, an EAGAIN, a failed accept4), a file (pwrite64,
 * pread64, splice), UDP with sendmmsg, a child process writing to a pipe. The sequence is
 * framed by read(-1, buf, 12345) and read(-1, buf, 54321), which fail with EBADF; after the
 * end marker it prints the ports and the file path so that a test can check the descriptions.
 * usage: iotrace-known-io DIR   (DIR receives the file known_io.dat) */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#define DIE(what) do { perror(what); exit(1); } while (0)

static int port_of(int fd, int peer)
{
    struct sockaddr_in a;
    socklen_t l = sizeof(a);
    if ((peer ? getpeername : getsockname)(fd, (struct sockaddr *)&a, &l) < 0)
        DIE("getsockname");
    return ntohs(a.sin_port);
}

int main(int argc, char **argv)
{
    static char buf[65536];
    char path[4096];
    if (argc != 2) {
        fprintf(stderr, "usage: iotrace-known-io DIR\n");
        return 2;
    }
    snprintf(path, sizeof(path), "%s/known_io.dat", argv[1]);
    memset(buf, 'x', sizeof(buf));
    close_range(3, ~0u, 0);  /* fds inherited from the caller would shift the known numbers */

    if (read(-1, buf, 12345) != -1)  /* start marker */
        return 1;

    /* pipe of one page: a short write, then EAGAIN */
    int p[2];
    if (pipe2(p, O_NONBLOCK) < 0 || fcntl(p[1], F_SETPIPE_SZ, 4096) < 0)
        DIE("pipe");
    if (write(p[1], buf, 5000) != 4096 || write(p[1], buf, 10) != -1 || read(p[0], buf, 8192) != 4096)
        DIE("pipe write");
    close(p[0]);
    close(p[1]);

    /* TCP over loopback: listener 3, client 4, accepted 5 */
    int ls = socket(AF_INET, SOCK_STREAM, 0), cs = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof(a);
    if (ls != 3 || cs != 4 || bind(ls, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(ls, 4) < 0 ||
        getsockname(ls, (struct sockaddr *)&a, &al) < 0)
        DIE("listen");
    if (connect(cs, (struct sockaddr *)&a, sizeof(a)) < 0)
        DIE("connect");
    int as = accept(ls, NULL, NULL);
    if (as != 5)
        DIE("accept");
    int tcp_client = port_of(cs, 0), one = 1;
    setsockopt(cs, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));  /* no Nagle delay */
    setsockopt(as, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (write(cs, "hello", 5) != 5 || recv(as, buf, 5, MSG_WAITALL) != 5)
        DIE("write/read");
    if (sendto(as, "world!", 6, 0, NULL, 0) != 6 || recvfrom(cs, buf, 6, MSG_WAITALL, NULL, NULL) != 6)
        DIE("sendto/recvfrom");
    struct iovec wv[2] = {{"abc", 3}, {"defg", 4}}, rv[2] = {{buf, 2}, {buf + 2, 5}};
    if (writev(cs, wv, 2) != 7 || readv(as, rv, 2) != 7)
        DIE("writev/readv");
    struct iovec mv = {"123456789", 9}, mr = {buf, 9};
    struct msghdr m = {.msg_iov = &mv, .msg_iovlen = 1}, mrh = {.msg_iov = &mr, .msg_iovlen = 1};
    if (sendmsg(cs, &m, 0) != 9 || recvmsg(as, &mrh, MSG_WAITALL) != 9)
        DIE("sendmsg/recvmsg");
    fcntl(cs, F_SETFL, O_NONBLOCK);
    fcntl(ls, F_SETFL, O_NONBLOCK);
    if (read(cs, buf, 10) != -1 || accept4(ls, NULL, NULL, SOCK_CLOEXEC) != -1)
        DIE("EAGAIN");
    /* close-on-exec set and cleared later; a terminal's ioctl (no record) fails on a socket */
    struct winsize ws;
    if (fcntl(cs, F_SETFD, FD_CLOEXEC) != 0 || ioctl(cs, TIOCGWINSZ, &ws) != -1 || ioctl(cs, FIONCLEX) != 0)
        DIE("close-on-exec");

    /* a file: pwrite64, pread64, sendfile to the socket, splice from a pipe */
    int f = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (f != 6 || pwrite(f, buf, 100, 0) != 100 || pread(f, buf, 50, 10) != 50)
        DIE("file");
    off_t off = 0;
    if (sendfile(cs, f, &off, 100) != 100 || recvfrom(as, buf, 100, MSG_WAITALL, NULL, NULL) != 100)
        DIE("sendfile");
    int q[2];
    loff_t soff = 200;
    if (pipe(q) < 0 || q[0] != 7 || write(q[1], buf, 20) != 20 || splice(q[0], NULL, f, &soff, 20, 0) != 20)
        DIE("splice");

    /* UDP: 9 bound, 10 connected to it; sendmmsg of two datagrams */
    int us = socket(AF_INET, SOCK_DGRAM, 0), uc = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in u = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t ul = sizeof(u);
    if (us != 9 || uc != 10 || bind(us, (struct sockaddr *)&u, sizeof(u)) < 0 ||
        getsockname(us, (struct sockaddr *)&u, &ul) < 0 || connect(uc, (struct sockaddr *)&u, sizeof(u)) < 0)
        DIE("udp");
    int udp_client = port_of(uc, 0);
    struct iovec d1 = {"ab1", 3}, d2 = {"cde2", 4};
    struct mmsghdr mm[2] = {{.msg_hdr = {.msg_iov = &d1, .msg_iovlen = 1}},
                            {.msg_hdr = {.msg_iov = &d2, .msg_iovlen = 1}}};
    if (sendmmsg(uc, mm, 2, 0) != 2 || recvfrom(us, buf, 100, 0, NULL, NULL) != 3 ||
        recvfrom(us, buf, 100, 0, NULL, NULL) != 4)
        DIE("sendmmsg");

    /* a child writes to the pipe; the parent reads it */
    pid_t child = fork();
    if (child < 0)
        DIE("fork");
    if (child == 0) {
        if (write(q[1], "child", 5) != 5)
            _exit(1);
        _exit(0);
    }
    int status;
    if (read(q[0], buf, 5) != 5 || waitpid(child, &status, 0) != child || status != 0)
        DIE("child");
    for (int fd = 10; fd >= 3; fd--)
        close(fd);

    if (read(-1, buf, 54321) != -1)  /* end marker */
        return 1;
    printf("tcp_listen=%d tcp_client=%d udp_server=%d udp_client=%d file=%s child=%d\n",
           ntohs(a.sin_port), tcp_client, ntohs(u.sin_port), udp_client, path, (int)child);
    return 0;
}
