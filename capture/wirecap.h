/* hw-wirecap library part: a libpcap capture with nanosecond stamps into a pcap file, and its
 * metadata (wirecap.json: loss counters, stamp type, clock pairs for mapping onto MONOTONIC). */
#ifndef CAP_WIRECAP_H
#define CAP_WIRECAP_H
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hwerr.h"

struct cap_wirecap_opts {
    const char *iface;
    const char *netns;        /* name under /run/netns, or a path; NULL: the current namespace */
    const char *output;       /* the pcap file */
    const char *json_path;    /* NULL: wirecap.json beside the pcap */
    const char *filter;       /* BPF expression or NULL */
    const char *tstamp_type;  /* libpcap stamp type name ("host", "adapter", ...) or NULL */
    int snaplen;              /* default 128: headers only */
    int buffer_size;          /* kernel buffer in bytes */
    int immediate;            /* deliver each packet at once (no batching in the kernel) */
    int64_t duration_ns;      /* stop after this long; <= 0: until stopped */
    FILE *log;                /* progress messages (the "capturing" line); NULL: none */
    int verbose;              /* more detail on log: settings at start, clock pairs at the end */
    int ready_fd;             /* "ready\n" goes there once capturing, then it is closed; -1: none */
};

struct cap_wirecap_clock_pair {
    int64_t realtime_ns, monotonic_ns;
};

struct cap_wirecap_result {
    uint64_t ps_recv, ps_drop, ps_ifdrop;
    uint64_t packets_written;
    struct cap_wirecap_clock_pair start, end;
    const char *stop_reason;  /* "signal", "duration" or "error" (the interface went away) */
};

/* Enter the network namespace (name or path). Returns 0 or -1 with err set. */
int cap_wirecap_enter_netns(const char *netns, struct hw_err *err);

/* Print the stamp types the interface offers, one per line (name and description). */
int cap_wirecap_list_tstamp_types(const struct cap_wirecap_opts *opts, FILE *out, struct hw_err *err);

/* Capture until *stop becomes non-zero or the duration has passed, then write the pcap's last
 * packets and the JSON file. Returns 0, or -1 with err set. When reading fails mid-capture (the
 * interface disappeared), the pcap and the JSON (stop_reason "error", "error": the message) are
 * still written, and the return is -1. */
int cap_wirecap_run(const struct cap_wirecap_opts *opts, volatile sig_atomic_t *stop, struct cap_wirecap_result *res,
                    struct hw_err *err);

/* One reading of (CLOCK_REALTIME, CLOCK_MONOTONIC): realtime read on both sides of monotonic and
 * averaged, so the pair is good to a fraction of a clock read. */
void cap_wirecap_clock_pair(struct cap_wirecap_clock_pair *pair);
#endif
