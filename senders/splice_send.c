/* A TCP sender whose bytes reach its socket only through pipes: each chunk is vmspliced from
 * memory into a pipe, duplicated into a second pipe with tee, and the first pipe spliced into
 * the socket; the copy in the second pipe is spliced into the socket too, so the stream carries
 * every chunk twice and every byte on the wire came from a splice.
 *   splice-send ADDR PORT BYTES CHUNK PAUSE_US      (BYTES: the bytes on the socket, CHUNK <= 32 KiB)
 * Prints "sent=N" on stdout at the end. Exit 0, 1 on a failure, 2 usage. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "net_common.h"

static int fail(const char *what)
{
    fprintf(stderr, "splice-send: %s: %s\n", what, strerror(errno));
    return 1;
}

/* Moves n bytes from the pipe's read end into the socket. */
static int drain_into(int pipe_rd, int sock, size_t n, size_t *sent)
{
    while (n) {
        ssize_t r = splice(pipe_rd, NULL, sock, NULL, n, SPLICE_F_MOVE);
        if (r <= 0)
            return -1;
        n -= (size_t)r;
        *sent += (size_t)r;
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct sender_args a;
    if (sender_args_parse(argc, argv, 1, "splice-send", &a) < 0 || a.chunk > 32768)
        return 2;
    int sock = sender_connect(&a, SOCK_STREAM);
    char *buf = sender_buffer(a.chunk);
    int p1[2], p2[2];
    /* a pipe holds 16 pages: a chunk of 64 KiB not aligned to a page spans 17 and would not fit */
    if (sock < 0 || !buf)
        return 1;
    if (pipe(p1) < 0 || pipe(p2) < 0)
        return fail("pipe");
    size_t sent = 0;
    while (sent < a.total) {
        size_t left = a.total - sent, n = left / 2 < a.chunk ? (left + 1) / 2 : a.chunk;
        struct iovec iov = {buf, n};
        size_t in_pipe = 0;
        while (in_pipe < n) {  /* vmsplice may take less than asked */
            iov.iov_base = buf + in_pipe;
            iov.iov_len = n - in_pipe;
            ssize_t r = vmsplice(p1[1], &iov, 1, 0);
            if (r <= 0)
                return fail("vmsplice");
            in_pipe += (size_t)r;
        }
        ssize_t copied = tee(p1[0], p2[1], n, 0);
        if (copied <= 0)
            return fail("tee");
        size_t copy = left - n < (size_t)copied ? left - n : (size_t)copied;
        if (drain_into(p1[0], sock, n, &sent) < 0 || drain_into(p2[0], sock, copy, &sent) < 0)
            return fail("splice");
        if ((size_t)copied > copy) {  /* the last chunk's copy that the total leaves out */
            char rest[65536];
            if (read(p2[0], rest, (size_t)copied - copy) < 0)
                return fail("read");
        }
        sender_pause(&a);
    }
    shutdown(sock, SHUT_WR);
    char drain[256];
    while (read(sock, drain, sizeof(drain)) > 0) {
    }
    close(sock);
    free(buf);
    printf("sent=%zu\n", sent);
    return 0;
}
