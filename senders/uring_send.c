/* A TCP sender that sends through io_uring only (no write or send system call on its socket):
 * its operations go round IORING_OP_SEND, IORING_OP_WRITEV (two iovecs) and IORING_OP_SEND_ZC,
 * one at a time, each waited for, with a pause between them. With --fixed the socket is a
 * registered file (IOSQE_FIXED_FILE): the kernel then never names its fd. --send-only: every
 * operation is an IORING_OP_SEND (perf/bench_send_events.py: no wait for a zero-copy notification).
 * --depth=N keeps up to N operations in flight (each with MSG_WAITALL but WRITEV), completions
 * taken as they come.
 *   uring-send [--fixed] [--send-only] [--depth=N] ADDR PORT BYTES CHUNK PAUSE_US
 * Prints "sent=N ops=K ns_per_op=T" (the loop's time per operation) on stdout at the end.
 * Exit 0, 1 on a failure, 2 usage. */
#include <errno.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "net_common.h"

enum { OP_SEND, OP_WRITEV, OP_SEND_ZC, N_OPS };

/* Queues one operation of kind op for the n bytes at buf. */
static void prep(struct io_uring_sqe *sqe, int op, int fd, char *buf, size_t n, struct iovec iov[2], int fixed)
{
    switch (op) {
    case OP_SEND:
        io_uring_prep_send(sqe, fd, buf, n, 0);
        break;
    case OP_WRITEV:
        iov[0] = (struct iovec){buf, n / 2};
        iov[1] = (struct iovec){buf + n / 2, n - n / 2};
        io_uring_prep_writev(sqe, fd, iov, 2, 0);
        break;
    default:
        io_uring_prep_send_zc(sqe, fd, buf, n, 0, 0);
        break;
    }
    if (fixed)
        sqe->flags |= IOSQE_FIXED_FILE;
}

/* Waits for the operation's result; a SEND_ZC also has its notification (IORING_CQE_F_NOTIF)
 * waited for, which says the kernel no longer uses the buffer and carries no bytes. */
static int complete(struct io_uring *ring, int op)
{
    int result = 0, more = op == OP_SEND_ZC;
    int seen = 0;
    while (!seen || more) {
        struct io_uring_cqe *cqe;
        int rc = io_uring_wait_cqe(ring, &cqe);
        if (rc < 0)
            return rc;
        if (cqe->flags & IORING_CQE_F_NOTIF) {
            more = 0;
        } else {
            result = cqe->res;
            seen = 1;
            if (!(cqe->flags & IORING_CQE_F_MORE))
                more = 0;
        }
        io_uring_cqe_seen(ring, cqe);
    }
    return result;
}

#define MAX_DEPTH 8

/* --depth N: up to N operations in flight at once (MSG_WAITALL: each takes its whole length, in
 * the order the socket's poll wakes them), their results counted as their completions come;
 * returns the bytes sent, or -1. */
static long long send_in_flight(struct io_uring *ring, const struct sender_args *a, int sock, int fixed, int depth,
                                char *buf, size_t *ops)
{
    struct iovec iov[MAX_DEPTH][2];
    size_t asked[MAX_DEPTH] = {0};
    size_t queued = 0, sent = 0;
    int busy = 0, notifications = 0;
    while (sent < a->total || busy || notifications) {
        for (int slot = 0; slot < depth && queued < a->total; slot++) {
            if (asked[slot])
                continue;
            size_t n = a->total - queued < a->chunk ? a->total - queued : a->chunk;
            int op = (int)(*ops % N_OPS);
            struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
            prep(sqe, op, fixed ? 0 : sock, buf, n, iov[slot], fixed);
            sqe->msg_flags |= op == OP_WRITEV ? 0 : MSG_WAITALL;
            io_uring_sqe_set_data64(sqe, (uint64_t)slot);
            asked[slot] = n;
            queued += n;
            busy++;
            ++*ops;
        }
        struct io_uring_cqe *cqe;
        int rc = io_uring_submit_and_wait(ring, 1);
        if (rc < 0 || (rc = io_uring_wait_cqe(ring, &cqe)) < 0)
            return -1;
        if (cqe->flags & IORING_CQE_F_NOTIF) {
            notifications--;
        } else {
            int slot = (int)io_uring_cqe_get_data64(cqe);
            if (cqe->res < 0)
                return -1;
            notifications += (cqe->flags & IORING_CQE_F_MORE) != 0;
            sent += (size_t)cqe->res;
            queued -= asked[slot] - (size_t)cqe->res;   /* a short write: the rest is queued again */
            asked[slot] = 0;
            busy--;
        }
        io_uring_cqe_seen(ring, cqe);
        sender_pause(a);
    }
    return (long long)sent;
}

int main(int argc, char **argv)
{
    int fixed = 0, send_only = 0, depth = 1, first = 1;
    for (; first < argc && argv[first][0] == '-'; first++)
        if (strcmp(argv[first], "--fixed") == 0)
            fixed = 1;
        else if (strcmp(argv[first], "--send-only") == 0)
            send_only = 1;
        else if (strncmp(argv[first], "--depth=", 8) == 0 && (depth = atoi(argv[first] + 8)) >= 1 && depth <= MAX_DEPTH)
            continue;
        else
            break;
    struct sender_args a;
    if (sender_args_parse(argc, argv, first, "uring-send [--fixed] [--send-only] [--depth=1..8]", &a) < 0)
        return 2;
    int sock = sender_connect(&a, SOCK_STREAM);
    char *buf = sender_buffer(a.chunk);
    struct io_uring ring;
    if (sock < 0 || !buf)
        return 1;
    int rc = io_uring_queue_init(8, &ring, 0);
    if (rc == 0 && fixed)
        rc = io_uring_register_files(&ring, &sock, 1);
    if (rc < 0) {
        fprintf(stderr, "uring-send: io_uring: %s\n", strerror(-rc));
        return 1;
    }
    size_t sent = 0, ops = 0;
    struct iovec iov[2];
    long long t0 = sender_now_ns();
    if (depth > 1) {
        long long done = send_in_flight(&ring, &a, sock, fixed, depth, buf, &ops);
        if (done < 0) {
            fprintf(stderr, "uring-send: operations in flight: failed\n");
            return 1;
        }
        sent = (size_t)done;
    }
    while (sent < a.total) {
        size_t n = a.total - sent < a.chunk ? a.total - sent : a.chunk;
        int op = send_only ? OP_SEND : (int)(ops % N_OPS);
        struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
        prep(sqe, op, fixed ? 0 : sock, buf, n, iov, fixed);
        if ((rc = io_uring_submit(&ring)) < 0 || (rc = complete(&ring, op)) < 0) {
            fprintf(stderr, "uring-send: operation %zu: %s\n", ops, strerror(-rc));
            return 1;
        }
        sent += (size_t)rc;   /* a short send: the rest goes in the next operation */
        ops++;
        sender_pause(&a);
    }
    long long t1 = sender_now_ns();
    io_uring_queue_exit(&ring);
    shutdown(sock, SHUT_WR);
    char drain[256];
    while (read(sock, drain, sizeof(drain)) > 0) {
    }
    close(sock);
    free(buf);
    printf("sent=%zu ops=%zu ns_per_op=%.1f\n", sent, ops, ops ? (double)(t1 - t0) / (double)ops : 0.0);
    return 0;
}
