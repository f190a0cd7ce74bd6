/* What main knows at the end of a run, and how it is written: main.tsv (the clock exchanges)
 * and bench.json (configuration, window, clock estimates, per-process totals and exit statuses). */
#ifndef HW_REPORT_H
#define HW_REPORT_H
#include <sys/types.h>

#include "bench.h"
#include "clocksync.h"
#include "wire.h"

#define HW_SYNC_MAX 256

struct hw_proc_record {
    int role;
    int index;
    pid_t pid;
    int reaped;
    int wstatus;
    int have_report;
    struct hw_child_report report;
};

struct hw_run_record {
    const struct hw_bench_config *cfg;
    struct hw_ports_msg ports;
    int64_t t0_ns, window_start_ns, window_end_ns, quiet_end_ns;
    struct hw_sync_sample sync_start[HW_SYNC_MAX], sync_end[HW_SYNC_MAX];
    int sync_start_count, sync_end_count;
    struct hw_sync_estimate est_start, est_end;
    struct hw_proc_record procs[HW_MAX_PROCS];
    int proc_count;
    struct hw_recv_summary receivers[HW_MAX_PROCS];
    int receiver_count;
    int receiver_wstatus;
    int interrupted;
    char failures[8192];
};

/* Prints one line per failed process ("send-1 (pid 123) was killed by signal 9") to stderr and
 * keeps them for bench.json; returns the number of failures. */
int hw_report_failures(struct hw_run_record *run);
int hw_write_main_log(const struct hw_run_record *run);
int hw_write_bench_json(const struct hw_run_record *run);
#endif
