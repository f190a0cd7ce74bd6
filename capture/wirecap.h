/* hw-wirecap library part: a libpcap capture with nanosecond stamps into a pcap file, and its
 * metadata (wirecap.json: loss counters, stamp type, clock pairs for mapping onto MONOTONIC). */
#ifndef HW_WIRECAP_H
#define HW_WIRECAP_H
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct wirecap_opts {
    const char *iface;
    const char *netns;        /* name under /run/netns, or a path; NULL: the current namespace */
    const char *output;       /* the pcap file */
    const char *json_path;    /* NULL: wirecap.json beside the pcap */
    const char *filter;       /* BPF expression or NULL */
    const char *tstamp_type;  /* libpcap stamp type name ("host", "adapter", ...) or NULL */
    int snaplen;              /* default 128: headers only */
    int buffer_size;          /* kernel buffer in bytes */
    int immediate;            /* deliver each packet at once (no batching in the kernel) */
    double duration_s;        /* stop after this many seconds; <= 0: until stopped */
    FILE *log;                /* progress messages (the "capturing" line); NULL: none */
};

struct wirecap_clock_pair {
    int64_t realtime_ns, monotonic_ns;
};

struct wirecap_result {
    uint64_t ps_recv, ps_drop, ps_ifdrop;
    uint64_t packets_written;
    struct wirecap_clock_pair start, end;
    const char *stop_reason;  /* "signal", "duration" or "error" (the interface went away) */
};

/* Enter the network namespace (name or path). Returns 0 or -1 with err set. */
int wirecap_enter_netns(const char *netns, char *err, size_t errlen);

/* Print the stamp types the interface offers, one per line (name and description). */
int wirecap_list_tstamp_types(const struct wirecap_opts *opts, FILE *out, char *err, size_t errlen);

/* Capture until *stop becomes non-zero or the duration has passed, then write the pcap's last
 * packets and the JSON file. Returns 0, or -1 with err set. When reading fails mid-capture (the
 * interface disappeared), the pcap and the JSON (stop_reason "error", "error": the message) are
 * still written, and the return is -1. */
int wirecap_run(const struct wirecap_opts *opts, volatile sig_atomic_t *stop, struct wirecap_result *res,
                char *err, size_t errlen);

/* One reading of (CLOCK_REALTIME, CLOCK_MONOTONIC): realtime read on both sides of monotonic and
 * averaged, so the pair is good to a fraction of a clock read. */
void wirecap_clock_pair(struct wirecap_clock_pair *pair);
#endif
