/* hw-schedtrace's reader of the patched kernel's ring (kernel-patches/, kernel/sched/schedtrace.c):
 * /proc/schedtrace gives one ASCII line per record and consumes what it gives,
 * /proc/schedtrace_control enables, disables, clears and sizes the ring. The records become the
 * same sched.tsv and syscalls.tsv as the tracefs backend's (docs/formats.md, "hw-schedtrace").
 * No function here exits; errors come back as -1 with a message in the caller's struct hw_err. */
#ifndef HW_ST_PROC_H
#define HW_ST_PROC_H
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hwerr.h"
#include "st.h"

#define ST_PROC_FORMAT 1            /* the ring's line format this reader knows (SCHEDTRACE_FORMAT) */
#define ST_PROC_COMM 16             /* TASK_COMM_LEN: a command name has at most 15 bytes */
#define ST_PROC_LINE 640            /* SCHEDTRACE_LINE: the longest line the kernel writes */
#define ST_PROC_MIN_SIZE 1024       /* ring size limits of "size N", in records */
#define ST_PROC_MAX_SIZE (16 << 20)
#define ST_PROC_DIR_ENV "HW_SCHEDTRACE_PROC_DIR"   /* where schedtrace{,_control} are; default /proc */
#define ST_PROC_RAW "schedtrace.txt"

/* ---- one line of /proc/schedtrace ---- */
enum st_proc_kind { ST_PROC_HEADER = 1, ST_PROC_SWITCH, ST_PROC_SYS_ENTER, ST_PROC_SYS_EXIT };

/* "# schedtrace format=1 clock=mono size=N enabled=E written=W lost=L pending=P": the ring's
 * state when the file was opened (written, lost: since the last clear). */
struct st_proc_header {
    int format;
    char clock[16];
    long long size, enabled, written, lost, pending;
};

/* "T CPU switch prev_comm=... tcp_mem_pages=N": comm as the raw bytes (the line's \xNN
 * escapes undone), NUL-terminated. */
struct st_proc_switch {
    char prev_comm[ST_PROC_COMM + 1], next_comm[ST_PROC_COMM + 1];
    int prev_pid, prev_tgid, prev_prio, preempt;
    long long prev_state;
    unsigned long long prev_runtime_ns, prev_sigpending, prev_user_ip;
    int next_pid, next_tgid, next_prio;
    unsigned long long next_runtime_ns, next_vruntime, next_deadline, queue_vruntime;
    unsigned nr_running, cfs_queued, rt_running, net_backlog;
    long long tcp_mem_pages;
};

/* "T CPU sys_enter pid= tid= nr= a0=0x.. .. a5=0x.." and "T CPU sys_exit pid= tid= nr= ret=". */
struct st_proc_sys {
    int pid, tid, nr;
    unsigned long long args[6];     /* enter only */
    long long ret;                  /* exit only */
};

struct st_proc_rec {
    enum st_proc_kind kind;
    unsigned long long t_ns;        /* records only: CLOCK_MONOTONIC ns */
    unsigned cpu;
    union {
        struct st_proc_header hdr;
        struct st_proc_switch sw;
        struct st_proc_sys sys;
    } u;
};

/* Parses one line (len bytes, without its newline). 0, or -1 with "expected ..." in why. */
int st_proc_parse_line(const char *line, size_t len, struct st_proc_rec *rec, char *why, size_t whylen);

/* The x86_64 system call nr of hw-iotrace's default set: its name, the argument holding the fd
 * (sendfile, splice: the one written to) and the one holding the byte count (-1: none, as for
 * the vector calls). NULL for a number outside the set. */
const char *st_proc_call(int nr, int *fd_arg, int *req_arg);

/* ---- conversion of a raw file (the ring's lines as read) ---- */

/* A clock check of the recording: the collector's own thread tid went to sleep between t0 and
 * t1 (its CLOCK_MONOTONIC readings); the stamp of its switch record there, minus t0, is the
 * difference of the two clocks plus the way into the scheduler (phase 0 start, 1 stop). */
struct st_proc_probe {
    int tid, phase;
    long long t0, t1;
};

struct st_proc_stats {
    long long lines, headers;
    long long records;              /* record lines: switch + sys_enter + sys_exit */
    long long switches, sys_enter, sys_exit;
    long long syscalls, unfinished, exits_without_enter;
    long long per_cpu[ST_MAX_CPUS];
    int have_header, resets;        /* resets: a header whose written or lost went down */
    struct st_proc_header first, last;
    int wrote_syscalls;             /* syscalls.tsv was written */
    int damaged;                    /* the input is damaged: damage holds "<file>:<line>: ..." */
    char damage[1024];
    long long marker_trace_ns[2], marker_mono_ns[2];   /* clock check, -1 unknown */
};

/* raw -> outdir/sched.tsv and, when the raw file has system-call records or with_syscalls,
 * outdir/syscalls.tsv (outdir must exist). A damaged input keeps the records before the damage,
 * ends the TSVs with "# damaged: ..." and returns -1 with the reason in err (st->damaged set);
 * other failures return -1 too, st->damaged clear. */
int st_proc_convert(const char *raw, const char *outdir, bool with_syscalls, const struct st_proc_probe *probes,
                    int nprobes, struct st_proc_stats *st, struct hw_err *err);

/* What sched.json tells about one use of the ring besides the conversion's counts. */
struct st_proc_run {
    const char *ring;               /* path of the ring as read */
    long long start_mono_ns, stop_mono_ns;   /* -1: unknown (a conversion of a file) */
    long long size_requested;       /* -b, 0: the kernel's */
    int rt_prio;                    /* what the drain got, -1: no drain (a conversion) */
    const int *pids;
    int npids;
    int syscalls;                   /* system calls were asked for */
    char *const *command;           /* NULL: none */
    int child_pid, child_status, child_done;
    int have_control;               /* control_at_stop below was read */
    struct st_proc_header control;  /* schedtrace_control at stop (format, enabled, size, written, lost, pending) */
};

/* The ring's losses: lost (records a full ring dropped, from the control file at stop, else the
 * last header) plus unread (written - records read: taken by another reader or left in the
 * ring; known when the last state is of a stopped ring). -1 when unknown. */
long long st_proc_lost(const struct st_proc_stats *st, const struct st_proc_run *run, long long *lost,
                       long long *unread);
int st_proc_write_json(const char *path, const struct st_proc_stats *st, const struct st_proc_run *run,
                       struct hw_err *err);

/* proc convert: raw -> outdir/sched.tsv, syscalls.tsv, sched.json (outdir created if missing). */
int st_proc_convert_file(const char *raw, const char *outdir, FILE *log, int verbose, struct hw_err *err);

/* The state /proc/schedtrace_control shows ("enabled E", "size N", "written W", "lost L",
 * "pending P" lines; the first of each counts): how many of those five it found. */
int st_proc_parse_control(const char *text, struct st_proc_header *h);

/* ---- one recording from the ring ---- */
struct st_proc_config {
    const char *outdir;
    int64_t duration_ns;            /* 0: until a signal or the command's end */
    long size;                      /* ring size in records, 0: leave the kernel's */
    bool syscalls;
    int pids[ST_MAX_PIDS];
    int npids;
    int rt_prio;                    /* drain thread's SCHED_FIFO priority, 0: normal */
    char **command;                 /* run while recording, NULL: none */
    int verbose;
    FILE *log;                      /* the "recording" line, counters; NULL: none */
    int ready_fd;                   /* "ready\n" there once recording, then closed; -1: none */
    volatile sig_atomic_t *stop;    /* set by the signal handler */
};
int st_proc_record(const struct st_proc_config *cfg, struct hw_err *err);

#endif
