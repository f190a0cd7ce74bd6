/* A TCP sender using MSG_ZEROCOPY (SO_ZEROCOPY): every send() passes MSG_ZEROCOPY, and the
 * completion notifications are read from the socket's error queue (recvmsg with MSG_ERRQUEUE)
 * after each send, and all of them before the end. A notification says the kernel released the
 * pages of a range of sends; it carries no payload.
 *   zerocopy-send ADDR PORT BYTES CHUNK PAUSE_US
 * Prints "sent=N sends=K notified=M copied=C" (sends whose notification said the kernel copied
 * the pages after all, as it does on veth). Exit 0, 1 on a failure, 2 usage. */
#include <errno.h>
#include <time.h>
#include <linux/errqueue.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net_common.h"

#ifndef SO_EE_ORIGIN_ZEROCOPY
#define SO_EE_ORIGIN_ZEROCOPY 5
#endif

/* Reads every notification waiting (or, with wait_ms, waits for one); counts the sends they
 * cover. Returns -1 on an error other than an empty queue. */
static int read_notifications(int sock, int wait_ms, size_t *notified, size_t *copied)
{
    for (;;) {
        if (wait_ms) {
            struct pollfd p = {.fd = sock, .events = 0};
            if (poll(&p, 1, wait_ms) <= 0)
                return 0;
        }
        char control[128];
        struct msghdr msg = {.msg_control = control, .msg_controllen = sizeof(control)};
        if (recvmsg(sock, &msg, MSG_ERRQUEUE | MSG_DONTWAIT) < 0)
            return errno == EAGAIN ? 0 : -1;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
            struct sock_extended_err *e = (struct sock_extended_err *)CMSG_DATA(c);
            if (e->ee_errno != 0 || e->ee_origin != SO_EE_ORIGIN_ZEROCOPY)
                continue;
            size_t n = (size_t)(e->ee_data - e->ee_info) + 1;  /* sends [ee_info, ee_data] */
            *notified += n;
            if (e->ee_code & SO_EE_CODE_ZEROCOPY_COPIED)
                *copied += n;
        }
        wait_ms = 0;
    }
}

int main(int argc, char **argv)
{
    struct sender_args a;
    if (sender_args_parse(argc, argv, 1, "zerocopy-send", &a) < 0)
        return 2;
    int sock = sender_connect(&a, SOCK_STREAM), one = 1;
    char *buf = sender_buffer(a.chunk);
    if (sock < 0 || !buf)
        return 1;
    if (setsockopt(sock, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof(one)) < 0) {
        fprintf(stderr, "zerocopy-send: SO_ZEROCOPY: %s\n", strerror(errno));
        return 1;
    }
    size_t sent = 0, sends = 0, notified = 0, copied = 0;
    while (sent < a.total) {
        size_t n = a.total - sent < a.chunk ? a.total - sent : a.chunk;
        ssize_t r = send(sock, buf, n, MSG_ZEROCOPY);
        if (r < 0 && errno == ENOBUFS) {  /* too many pages pinned: wait for the kernel to release some */
            if (read_notifications(sock, 100, &notified, &copied) < 0)
                break;
            continue;
        }
        if (r < 0 || read_notifications(sock, 0, &notified, &copied) < 0) {
            fprintf(stderr, "zerocopy-send: send: %s\n", strerror(errno));
            return 1;
        }
        sent += (size_t)r;
        sends++;
        sender_pause(&a);
    }
    while (notified < sends && read_notifications(sock, 1000, &notified, &copied) == 0) {
        static int rounds;
        if (++rounds > 10)
            break;
    }
    shutdown(sock, SHUT_WR);
    char drain[256];
    while (read(sock, drain, sizeof(drain)) > 0) {
    }
    close(sock);
    free(buf);
    printf("sent=%zu sends=%zu notified=%zu copied=%zu\n", sent, sends, notified, copied);
    return 0;
}
