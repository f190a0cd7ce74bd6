/* Shared definitions of hw-bench's processes: the run configuration and what each child reports
 * back to main. */
#ifndef HB_BENCH_H
#define HB_BENCH_H
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "hwerr.h"

#define HB_TOOL "hw-bench"
#define HB_MAX_PROCS 1024
/* Events a process may keep in the window: at least one (a log that can hold nothing would
 * discard every event of the run), at most 2^28 (40 bytes each, preallocated). */
#define HB_LOG_CAPACITY_MAX (1LL << 28)

struct hb_config {
    int senders;              /* M */
    int background;           /* N */
    int sieve_log2;           /* background data set is 2^sieve_log2 bytes */
    int code_copies;          /* background i runs sieve copy i % code_copies */
    int64_t read_size;
    int64_t write_size;
    const char *data_path;
    int64_t warmup_ns;
    int64_t duration_ns;
    int64_t quiet_ns;
    int64_t log_capacity;     /* events per process */
    const char *receiver_cmd; /* shell command that starts the receiver; NULL: local loopback */
    const char *connect_addr; /* receiver address for the senders and the clock exchange */
    const char *out_dir;
    int sync_samples;
    int64_t think_ns;         /* each sender sleeps this long after each write (0: never) */
    FILE *log;                /* -v: what happens, one line a step; NULL: nothing */
};

enum hb_role { HB_ROLE_SEND = 1, HB_ROLE_BG = 2 };

/* A child's totals, written to main through one shared pipe (atomic: smaller than PIPE_BUF). */
struct hb_child_report {
    int32_t role;
    int32_t index;
    int32_t pid;
    int32_t failed;           /* a check failed (sieve mismatch, LF seen, I/O error) */
    int64_t bytes_total;      /* sender: bytes written over the whole connection */
    int64_t bytes_window;     /* sender: bytes written by writes that started in the window */
    int64_t calls_window;     /* sender: writes started in the window; bg: rounds ended in it */
    int64_t rounds_total;
    int64_t events;
    int64_t overflow;
    int64_t check_failures;
    uint16_t local_port;
};

/* Process entry points; each returns the process's exit status. */
int hb_run_sender(const struct hb_config *cfg, int index, uint16_t tcp_port,
                  int64_t window_start_ns, int64_t window_end_ns, int64_t quiet_end_ns, int report_fd);
int hb_run_background(const struct hb_config *cfg, int index, int64_t window_start_ns,
                      int64_t window_end_ns, int64_t quiet_end_ns, int report_fd);
/* Runs the benchmark to its end. 0 when every process ended cleanly; -1 with err set otherwise:
 * one line per failure ("send-1 (pid 123) was killed by signal 9"), or why nothing could run. */
int hb_run_main(const struct hb_config *cfg, struct hw_err *err);

struct hb_receiver_config {
    const char *listen_addr;
    const char *out_dir;
    int64_t log_capacity;
    int64_t pause_at_ns;      /* each receiving process stops reading this long after the window's
                                 start (-1: never) ... */
    int64_t pause_ns;         /* ... for this long */
    int64_t rcvbuf;           /* SO_RCVBUF of the data connections in bytes (0: the kernel's autotuning) */
    FILE *log;                /* -v: what happens; NULL: nothing */
};
/* Serves one run of main. 0 ok; -1 with err set. */
int hb_run_receiver(const struct hb_receiver_config *cfg, struct hw_err *err);

/* Round trips through two pipes; inject_ns > 0: the parent busy-waits that long per round trip. */
int hb_run_pingpong(int64_t loops, int cpu, int64_t inject_ns, double *round_trip_us);
/* One probe's cost: name, and ns per call (ns < 0: unavailable, `why` says why). */
struct hb_probe_result {
    char name[40];
    double ns;
    char why[256];
};
/* Times each probe (clocks, TSC, a trace_marker write in a private tracefs instance, an event-log
 * append) over `calls` calls; fills up to max results and returns their count. */
int hb_run_probes(int64_t calls, struct hb_probe_result *out, int max);
int hb_make_data(const char *path, int64_t size, uint64_t seed);

/* Sleeps until the CLOCK_MONOTONIC instant t_ns (absolute). */
void hb_sleep_until(int64_t t_ns);
#endif
