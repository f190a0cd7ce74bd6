#include "net_common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int parse_size(const char *text, size_t *out)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || !end || *end || end == text)
        return -1;
    *out = (size_t)v;
    return 0;
}

int sender_args_parse(int argc, char **argv, int first, const char *name, struct sender_args *a)
{
    size_t pause = 0;
    if (argc != first + 5 || parse_size(argv[first + 2], &a->total) < 0 ||
        parse_size(argv[first + 3], &a->chunk) < 0 || parse_size(argv[first + 4], &pause) < 0 || a->chunk == 0) {
        fprintf(stderr, "usage: %s ADDR PORT BYTES CHUNK PAUSE_US\n", name);
        return -1;
    }
    a->addr = argv[first];
    a->port = argv[first + 1];
    a->pause_us = (long)pause;
    return 0;
}

int sender_connect(const struct sender_args *a, int type)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    long port = strtol(a->port, NULL, 10);
    if (port < 1 || port > 65535 || inet_pton(AF_INET, a->addr, &sa.sin_addr) != 1) {
        fprintf(stderr, "sender: bad address %s:%s\n", a->addr, a->port);
        return -1;
    }
    sa.sin_port = htons((uint16_t)port);
    int fd = socket(AF_INET, type, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        fprintf(stderr, "sender: connect %s:%s: %s\n", a->addr, a->port, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

void sender_pause(const struct sender_args *a)
{
    if (a->pause_us <= 0)
        return;
    struct timespec ts = {a->pause_us / 1000000, (a->pause_us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
    }
}

long long sender_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

char *sender_buffer(size_t n)
{
    char *buf = malloc(n ? n : 1);
    for (size_t i = 0; buf && i < n; i++)
        buf[i] = (char)('a' + i % 26);
    return buf;
}
