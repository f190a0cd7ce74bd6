/* hw-schedtrace library: records kernel events of a private tracefs instance into trace.dat
 * (version 6 layout) and converts them to hostwire TSV logs. No function here exits; errors come
 * back as -1 with a message in the caller's struct hw_err (common/hwerr.h). */
#ifndef HW_ST_H
#define HW_ST_H
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hwerr.h"

#define ST_MAX_CPUS 256
#define ST_MAX_PIDS 512   /* a --pid recording names every task of a running tree */
#define ST_MAX_EVENTS 128
#define ST_MAX_FILTERS 16
#define ST_UNKNOWN (-1LL)   /* a counter that could not be read */


/* ---- per-CPU ring-buffer counters (per_cpu/cpuN/stats) ---- */
struct st_cpustat {
    long long entries, overrun, commit_overrun, bytes, dropped, read;
};
int st_stats_parse(const char *text, struct st_cpustat *out);

/* ---- one tracefs instance with its events, filters and per-CPU drains ---- */
struct st_event_ref {
    char system[64];
    char name[96];
};

struct st_buffer_spec {
    const char *suffix;                 /* NULL: instance hw-<pid>; else hw-<pid>-<suffix> */
    struct st_event_ref events[ST_MAX_EVENTS];
    int nevents;
    bool optional[ST_MAX_EVENTS];       /* skip, do not fail, when the kernel lacks it */
    char *filters[ST_MAX_EVENTS];       /* per event, NULL for none (owned by caller) */
    int pids[ST_MAX_PIDS];              /* set_event_pid with event-fork; none: whole system */
    int npids;
    long buffer_kb;                     /* per CPU; 0 leaves the kernel default */
    bool drain;                         /* false: read the buffer only at the end */
    bool record_tgid;                   /* keep tid -> tgid (saved_tgids) for syscalls.tsv */
    int rt_prio;                        /* SCHED_FIFO priority of the drain threads, 0: normal */
};

struct st_buffer;                       /* opaque */

struct st_buffer *st_buffer_open(const struct st_buffer_spec *spec, const char *tmpdir,
                                 struct hw_err *err);
int st_buffer_start(struct st_buffer *buf, struct hw_err *err);   /* drains + tracing_on */
int st_buffer_marker(struct st_buffer *buf, const char *what, struct hw_err *err);
int st_buffer_stop(struct st_buffer *buf, struct hw_err *err);    /* tracing_off + flush */
int st_buffer_write_dat(struct st_buffer *buf, const char *path, struct hw_err *err);
void st_buffer_close(struct st_buffer *buf);                      /* removes the instance */
int st_buffer_ncpus(const struct st_buffer *buf);
const char *st_buffer_instance(const struct st_buffer *buf);
const struct st_cpustat *st_buffer_stats(const struct st_buffer *buf, int when); /* 0 start, 1 end */
int st_buffer_enabled(const struct st_buffer *buf, const char ***names);  /* "sys:event" list */
int st_buffer_missing(const struct st_buffer *buf, const char ***names);
int st_buffer_rt_prio(const struct st_buffer *buf);
long st_buffer_size_kb(const struct st_buffer *buf);  /* per CPU as the kernel has it, -1 unknown */   /* what the drains got (0: normal) */
int st_instance_name(char *out, size_t len, int pid, const char *suffix);

/* ---- trace.dat (version 6) ---- */
struct st_dat_cpu {
    uint64_t offset, size;
};
struct st_dat {
    int fd;
    uint32_t page_size;
    int long_size;
    int ncpus;
    struct st_dat_cpu cpus[ST_MAX_CPUS];
    struct tep_handle *tep;
    char *clock;
    uint64_t buffer_offset;             /* first BUFFER option's flyrecord section, 0: none */
};
int st_dat_open(struct st_dat *dat, const char *path, struct hw_err *err);
void st_dat_close(struct st_dat *dat);

/* ---- conversion ---- */
struct st_convert_stats {
    long long records;
    long long missed[ST_MAX_CPUS];      /* MISSING_EVENTS seen in the stream, per CPU */
    int missed_unknown[ST_MAX_CPUS];    /* pages that said events were lost, without a count */
    long long per_cpu[ST_MAX_CPUS];
    long long marker_trace_ns[2], marker_mono_ns[2]; /* clock check: start, stop; -1 unknown */
    long long syscalls, unfinished, exits_without_enter;
};
int st_convert_sched(const char *dat_path, const char *tsv_path, struct st_convert_stats *st,
                     struct hw_err *err);
int st_convert_syscalls(const char *dat_path, const char *tsv_path, struct st_convert_stats *st,
                        struct hw_err *err);
/* tgids: text of tracefs saved_tgids ("tid tgid" lines) for the pid column; NULL leaves it empty */
int st_convert_syscalls_tgids(const char *dat_path, const char *tsv_path, const char *tgids,
                              struct st_convert_stats *st, struct hw_err *err);

/* ---- one recording ---- */
struct st_config {
    const char *outdir;
    int64_t duration_ns;                /* 0: until a signal or the command's end */
    long buffer_kb;                     /* per CPU, 0: kernel default */
    bool drain;
    bool syscalls;
    bool waits;                         /* with syscalls: also the calls a program blocks in */
    int pids[ST_MAX_PIDS];
    int npids;
    const char *events[ST_MAX_EVENTS];  /* "system:event"; none: the default scheduler set */
    int nevents;
    bool switch_ext;                    /* also custom:sched_switch_ext_tp (kernel-patches/) */
    const char *filters[ST_MAX_FILTERS];/* "system:event=EXPR" */
    int nfilters;
    const char *suffix;
    int rt_prio;                        /* drain threads' SCHED_FIFO priority, 0: normal */
    char **command;                     /* run under tracing, NULL: none */
    int verbose;                        /* describe the buffers on log */
    FILE *log;                          /* progress: the "recording" line, loss counters; NULL: none */
    int ready_fd;                       /* "ready\n" there once recording, then closed; -1: none */
    volatile sig_atomic_t *stop;        /* set by the signal handler */
};
int st_record(const struct st_config *cfg, struct hw_err *err);
/* log: the line naming what was written (verbose: and the records of each CPU); NULL: none. */
int st_convert_file(const char *dat_path, const char *outdir, bool syscalls, FILE *log, int verbose,
                    struct hw_err *err);

/* The scheduler's state at every switch: a custom event of a kernel built with the
 * sched_switch_ext series (kernel-patches/, CONFIG_SCHED_SWITCH_EXT_EVENT). */
#define ST_SWITCH_EXT_EVENT "custom:sched_switch_ext_tp"

#define ST_MARKER_PREFIX "hw-schedtrace clock "

#endif
