/* Senders of the vector calls:
 *   vector-send tcp ADDR PORT BYTES CHUNK PAUSE_US   TCP, alternately writev (3 iovecs) and
 *                                                    pwritev2 at offset -1 (the socket's own
 *                                                    position: a socket has no offset)
 *   vector-send udp ADDR PORT BYTES CHUNK PAUSE_US   UDP, datagrams of CHUNK bytes sent by
 *                                                    sendmmsg, 8 per call
 * Prints "sent=N calls=K ns_per_op=T" (the loop's time per call) on stdout.
 * Exit 0, 1 on a failure, 2 usage. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "net_common.h"

#define BATCH 8

static int send_tcp(int sock, const struct sender_args *a, char *buf, size_t *calls)
{
    size_t sent = 0;
    while (sent < a->total) {
        size_t n = a->total - sent < a->chunk ? a->total - sent : a->chunk;
        struct iovec iov[3] = {{buf, n / 3}, {buf + n / 3, n / 3}, {buf + 2 * (n / 3), n - 2 * (n / 3)}};
        ssize_t r = *calls % 2 ? pwritev2(sock, iov, 3, -1, 0) : writev(sock, iov, 3);
        if (r < 0)
            return -1;
        sent += (size_t)r;  /* a short write: the rest goes in the next call */
        ++*calls;
        sender_pause(a);
    }
    return (int)(sent == a->total ? 0 : -1);
}

static int send_udp(int sock, const struct sender_args *a, char *buf, size_t *calls)
{
    size_t sent = 0;
    while (sent < a->total) {
        struct mmsghdr v[BATCH];
        struct iovec iov[BATCH];
        unsigned k = 0;
        for (size_t planned = sent; k < BATCH && planned < a->total; k++) {
            size_t n = a->total - planned < a->chunk ? a->total - planned : a->chunk;
            iov[k] = (struct iovec){buf, n};
            v[k] = (struct mmsghdr){.msg_hdr = {.msg_iov = &iov[k], .msg_iovlen = 1}};
            planned += n;
        }
        int r = sendmmsg(sock, v, k, 0);
        if (r <= 0)
            return -1;
        for (int i = 0; i < r; i++)
            sent += v[i].msg_len;
        ++*calls;
        sender_pause(a);
    }
    return 0;
}

int main(int argc, char **argv)
{
    int udp = argc > 1 && strcmp(argv[1], "udp") == 0;
    struct sender_args a;
    if (argc < 2 || (!udp && strcmp(argv[1], "tcp") != 0) ||
        sender_args_parse(argc, argv, 2, "vector-send tcp|udp", &a) < 0)
        return 2;
    int sock = sender_connect(&a, udp ? SOCK_DGRAM : SOCK_STREAM);
    char *buf = sender_buffer(a.chunk);
    size_t calls = 0;
    if (sock < 0 || !buf)
        return 1;
    long long t0 = sender_now_ns();
    if ((udp ? send_udp : send_tcp)(sock, &a, buf, &calls) < 0) {
        fprintf(stderr, "vector-send: %s\n", strerror(errno));
        return 1;
    }
    long long t1 = sender_now_ns();
    if (!udp) {
        shutdown(sock, SHUT_WR);
        char drain[256];
        while (read(sock, drain, sizeof(drain)) > 0) {
        }
    }
    close(sock);
    free(buf);
    printf("sent=%zu calls=%zu ns_per_op=%.1f\n", a.total, calls, calls ? (double)(t1 - t0) / (double)calls : 0.0);
    return 0;
}
