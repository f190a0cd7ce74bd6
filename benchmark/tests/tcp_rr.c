/* The added-latency yardstick of `hostwire overhead --program`: one-byte TCP request/response
 * round trips over one connection (netperf's TCP_RR with 1-byte messages), so that a tracer's
 * cost per system call shows as latency on a real socket between two network namespaces.
 *   tcp-rr serve ADDR PORT        echo every byte of every connection; "listening" on stdout once
 *                                 it accepts; runs until a signal ends it
 *   tcp-rr ADDR PORT LOOPS        connect, 100 warm-up round trips, then LOOPS timed ones; prints
 *                                 round_trip_us=MEAN p50_us=P50 p99_us=P99 loops=LOOPS
 * Per round trip the client makes one send and one recv and the server one recv and one send
 * (TCP_NODELAY on both ends). Exit status: 0 ok, 1 a socket failure, 2 usage. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define WARMUP_LOOPS 100

static int usage(void)
{
    fprintf(stderr, "usage: tcp-rr serve ADDR PORT | tcp-rr ADDR PORT LOOPS\n");
    return 2;
}

static int parse_addr(const char *addr, const char *port, struct sockaddr_in *sa)
{
    char *end = NULL;
    long p = strtol(port, &end, 10);
    memset(sa, 0, sizeof(*sa));
    sa->sin_family = AF_INET;
    if (!end || *end || p < 1 || p > 65535 || inet_pton(AF_INET, addr, &sa->sin_addr) != 1)
        return -1;
    sa->sin_port = htons((uint16_t)p);
    return 0;
}

static void no_delay(int fd)
{
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static int serve(const struct sockaddr_in *sa)
{
    int one = 1, lfd = socket(AF_INET, SOCK_STREAM, 0);
    if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        bind(lfd, (const struct sockaddr *)sa, sizeof(*sa)) < 0 || listen(lfd, 8) < 0) {
        fprintf(stderr, "tcp-rr: serve: %s\n", strerror(errno));
        return 1;
    }
    printf("listening\n");
    fflush(stdout);
    for (;;) {
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            fprintf(stderr, "tcp-rr: accept: %s\n", strerror(errno));
            return 1;
        }
        no_delay(fd);
        char c;
        while (recv(fd, &c, 1, 0) == 1 && send(fd, &c, 1, MSG_NOSIGNAL) == 1)
            ;
        close(fd);
    }
}

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int round_trip(int fd)
{
    char c = 'x';
    return send(fd, &c, 1, MSG_NOSIGNAL) == 1 && recv(fd, &c, 1, MSG_WAITALL) == 1 ? 0 : -1;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int client(const struct sockaddr_in *sa, long loops)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) < 0) {
        fprintf(stderr, "tcp-rr: connect: %s\n", strerror(errno));
        return 1;
    }
    no_delay(fd);
    int64_t *rt = malloc((size_t)loops * sizeof(*rt));
    if (!rt) {
        fprintf(stderr, "tcp-rr: out of memory for %ld round trips\n", loops);
        return 1;
    }
    for (long i = 0; i < WARMUP_LOOPS + loops; i++) {
        int64_t start = mono_ns();
        if (round_trip(fd) < 0) {
            fprintf(stderr, "tcp-rr: round trip %ld: %s\n", i, errno ? strerror(errno) : "connection closed");
            free(rt);
            return 1;
        }
        if (i >= WARMUP_LOOPS)
            rt[i - WARMUP_LOOPS] = mono_ns() - start;
    }
    close(fd);
    double sum = 0;
    for (long i = 0; i < loops; i++)
        sum += (double)rt[i];
    qsort(rt, (size_t)loops, sizeof(*rt), cmp_i64);
    printf("round_trip_us=%.3f p50_us=%.3f p99_us=%.3f loops=%ld\n", sum / (double)loops / 1e3,
           (double)rt[loops / 2] / 1e3, (double)rt[(loops * 99) / 100] / 1e3, loops);
    free(rt);
    return 0;
}

int main(int argc, char **argv)
{
    struct sockaddr_in sa;
    if (argc == 4 && strcmp(argv[1], "serve") == 0)
        return parse_addr(argv[2], argv[3], &sa) < 0 ? usage() : serve(&sa);
    if (argc != 4 || parse_addr(argv[1], argv[2], &sa) < 0)
        return usage();
    char *end = NULL;
    long loops = strtol(argv[3], &end, 10);
    if (!end || *end || loops < 1 || loops > 100000000)
        return usage();
    return client(&sa, loops);
}
