/* What main knows at the end of a run, and how it is written: main.tsv (the clock exchanges)
 * and bench.json (configuration, window, clock estimates, per-process totals and exit statuses). */
#ifndef HB_REPORT_H
#define HB_REPORT_H
#include <sys/types.h>

#include "bench.h"
#include "clocksync.h"
#include "wire.h"

#define HB_SYNC_MAX 256
#define HB_SYNC_END_MAX 1100 /* the wait for a quiet link: 5 s / 5 ms, and the samples */

struct hb_proc_record {
    int role;
    int index;
    pid_t pid;
    int reaped;
    int wstatus;
    int have_report;
    struct hb_child_report report;
};

struct hb_run_record {
    const struct hb_config *cfg;
    struct hb_ports_msg ports;
    int64_t t0_ns, window_start_ns, window_end_ns, quiet_end_ns;
    struct hb_sync_sample sync_start[HB_SYNC_MAX], sync_end[HB_SYNC_END_MAX];
    int sync_start_count, sync_end_count, sync_end_quiet;
    int64_t sync_end_wait_ns;
    struct hb_sync_estimate est_start, est_end;
    struct hb_proc_record procs[HB_MAX_PROCS];
    int proc_count;
    struct hb_recv_summary receivers[HB_MAX_PROCS];
    int receiver_count;
    int receiver_wstatus;
    int interrupted;
    char failures[8192];
};

/* Keeps one line per failed process ("send-1 (pid 123) was killed by signal 9") in
 * run->failures, for bench.json and the caller; returns the number of failures. */
int hb_report_failures(struct hb_run_record *run);
/* Write main.tsv and bench.json; 0, or -1 with the file named in err. */
int hb_write_main_log(const struct hb_run_record *run, struct hw_err *err);
int hb_write_bench_json(const struct hb_run_record *run, struct hw_err *err);
#endif
