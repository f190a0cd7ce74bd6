/* What the senders of senders/ share: parsing "ADDR PORT BYTES CHUNK PAUSE_US" and connecting. */
#ifndef SENDERS_NET_COMMON_H
#define SENDERS_NET_COMMON_H
#include <stddef.h>

struct sender_args {
    const char *addr, *port;
    size_t total;        /* bytes to send in all */
    size_t chunk;        /* bytes per send operation */
    long pause_us;       /* sleep between operations: the program's own gaps */
};

/* Parses argv[first..first+4]; prints usage (with name) and returns -1 when wrong. */
int sender_args_parse(int argc, char **argv, int first, const char *name, struct sender_args *a);
/* A socket of type (SOCK_STREAM, SOCK_DGRAM) connected to addr:port, or -1 with a message. */
int sender_connect(const struct sender_args *a, int type);
/* Sleeps pause_us microseconds (nothing when 0). */
void sender_pause(const struct sender_args *a);
/* CLOCK_MONOTONIC in ns: the senders time their loop (ns_per_op=, perf/bench_send_events.py). */
long long sender_now_ns(void);
/* A buffer of n bytes with a recognizable pattern, or NULL. */
char *sender_buffer(size_t n);
#endif
