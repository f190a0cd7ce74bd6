/* One recording: the scheduler buffer (system-wide) and, on request, the system-call
 * buffer (filtered to the given pids and their descendants), run until a signal, --duration or
 * the command's end; then trace.dat files, TSV logs and sched.json. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hwclock.h"
#include "hwgate.h"
#include "hwio.h"
#include "hwjson.h"
#include "st.h"
#include "st_internal.h"
#include "st_uring.h"

#define ST_MARKERS 4   /* clock-check markers per phase; the least delayed one counts */

static const char *const sched_events[] = {
    "sched:sched_switch", "sched:sched_wakeup", "sched:sched_wakeup_new", "sched:sched_migrate_task",
    "sched:sched_process_fork", "sched:sched_process_exec", "sched:sched_process_exit",
    "net:net_dev_queue", "net:net_dev_xmit", "net:netif_receive_skb", "sock:inet_sock_set_state",
    "?tcp:tcp_probe",   /* '?': where the kernel has it */
    /* the network's softirqs: whose task they ran in, and for how long (hostwire diff's CPU terms) */
    "?irq:softirq_entry", "?irq:softirq_exit",
};
/* only NET_TX (2) and NET_RX (3): the timer, RCU and scheduler softirqs are not the network's work */
#define ST_NET_SOFTIRQS "vec == 2 || vec == 3"
const char *const st_io_calls[] = {
    "read", "write", "readv", "writev", "pread64", "pwrite64", "sendto", "sendmsg", "sendmmsg",
    "recvfrom", "recvmsg", "sendfile64", "splice", "connect", "accept", "accept4", "close",
    /* what makes, copies and ends descriptors (st_lifetimes.c) */
    "socket", "dup", "dup2", "dup3", "fcntl", "close_range",
    "pwritev", "pwritev2", "vmsplice", "tee",
    /* close-on-exec set or cleared later (FIOCLEX, FIONCLEX; fcntl F_SETFD is fcntl's) */
    "ioctl",
};
const size_t st_n_io_calls = sizeof(st_io_calls) / sizeof(st_io_calls[0]);
/* --waits: the calls a program sleeps in between its I/O (what an idle sender waited for). */
const char *const st_wait_calls[] = {
    "epoll_wait", "epoll_pwait", "epoll_pwait2", "poll", "ppoll", "select", "pselect6", "nanosleep",
    "clock_nanosleep", "futex", "futex_waitv", "wait4", "waitid", "pause", "rt_sigsuspend",
    "rt_sigtimedwait", "recvmmsg", "io_getevents", "io_pgetevents", "io_uring_enter", "msgrcv", "semop",
    "semtimedop", "mq_timedreceive", "flock", "fsync", "fdatasync",
};
const size_t st_n_wait_calls = sizeof(st_wait_calls) / sizeof(st_wait_calls[0]);

static int add_event(struct st_buffer_spec *spec, const char *name, struct hw_err *err);

static bool is_io_call(const char *call)
{
    for (size_t i = 0; i < st_n_io_calls; i++)
        if (strcmp(st_io_calls[i], call) == 0)
            return true;
    return false;
}

/* A call's enter and exit events in the system-call buffer; optional ones are skipped where the
 * kernel lacks them (epoll_pwait2, futex_waitv are recent). */
static int add_call(struct st_buffer_spec *sy, const char *call, bool optional, struct hw_err *err)
{
    char name[80];
    snprintf(name, sizeof(name), "%ssyscalls:sys_enter_%s", optional ? "?" : "", call);
    if (add_event(sy, name, err) < 0)
        return -1;
    snprintf(name, sizeof(name), "%ssyscalls:sys_exit_%s", optional ? "?" : "", call);
    return add_event(sy, name, err);
}

struct recording {
    const struct st_config *cfg;
    struct st_buffer *buf[2];           /* 0: scheduler, 1: system calls */
    struct st_buffer_spec spec[2];
    char *filter_text[ST_MAX_FILTERS];
    struct hw_gate gate;                /* the command, waiting until tracing runs */
    pid_t child;                        /* > 0 running, < 0 reaped (its pid negated), 0 none */
    int child_status;
    long long t_start, t_stop;
    struct st_convert_stats conv[2];
};

static int add_event(struct st_buffer_spec *spec, const char *name, struct hw_err *err)
{
    int optional = name[0] == '?';
    const char *full = name + optional;
    const char *colon = strchr(full, ':');
    if (!colon || colon == full || !colon[1] || spec->nevents >= ST_MAX_EVENTS ||
        (size_t)(colon - full) >= sizeof(spec->events[0].system) ||
        strlen(colon + 1) >= sizeof(spec->events[0].name)) {
        hw_seterr(err, "failed to parse event '%s': expected SYSTEM:EVENT (at most %d events)", full,
                  ST_MAX_EVENTS);
        err->usage = 1;
        return -1;
    }
    struct st_event_ref *ev = &spec->events[spec->nevents];
    snprintf(ev->system, sizeof(ev->system), "%.*s", (int)(colon - full), full);
    snprintf(ev->name, sizeof(ev->name), "%s", colon + 1);
    spec->optional[spec->nevents++] = optional;
    return 0;
}

/* --filter SYSTEM:EVENT=EXPR applies to that event of whichever buffer records it. */
static int apply_filters(struct recording *s, struct hw_err *err)
{
    const struct st_config *cfg = s->cfg;
    for (int i = 0; i < cfg->nfilters; i++) {
        const char *eq = strchr(cfg->filters[i], '=');
        int used = 0;
        if (!eq) {
            hw_seterr(err, "failed to parse filter '%s': expected SYSTEM:EVENT=EXPRESSION", cfg->filters[i]);
            err->usage = 1;
            return -1;
        }
        s->filter_text[i] = strdup(eq + 1);
        for (int b = 0; b < 2; b++)
            for (int e = 0; e < s->spec[b].nevents; e++) {
                char name[170];
                snprintf(name, sizeof(name), "%s:%s", s->spec[b].events[e].system, s->spec[b].events[e].name);
                if (strlen(name) == (size_t)(eq - cfg->filters[i]) &&
                    strncmp(name, cfg->filters[i], (size_t)(eq - cfg->filters[i])) == 0) {
                    s->spec[b].filters[e] = s->filter_text[i];
                    used = 1;
                }
            }
        if (!used) {
            hw_seterr(err, "failed to apply filter '%s': that event is not recorded", cfg->filters[i]);
            err->usage = 1;
            return -1;
        }
    }
    return 0;
}

static int build_specs(struct recording *s, struct hw_err *err)
{
    const struct st_config *cfg = s->cfg;
    struct st_buffer_spec *sp = &s->spec[0], *sy = &s->spec[1];
    sp->suffix = cfg->suffix;
    sp->buffer_kb = sy->buffer_kb = cfg->buffer_kb;
    sp->drain = sy->drain = cfg->drain;
    sp->rt_prio = sy->rt_prio = cfg->rt_prio;
    if (cfg->nevents == 0) {
        for (size_t i = 0; i < sizeof(sched_events) / sizeof(sched_events[0]); i++)
            if (add_event(sp, sched_events[i], err) < 0)
                return -1;
        for (int e = 0; e < sp->nevents; e++)
            if (strcmp(sp->events[e].system, "irq") == 0 && strncmp(sp->events[e].name, "softirq_", 8) == 0)
                sp->filters[e] = ST_NET_SOFTIRQS;
    }
    for (int i = 0; i < cfg->nevents; i++)
        if (add_event(sp, cfg->events[i], err) < 0)
            return -1;
    if (cfg->switch_ext && add_event(sp, ST_SWITCH_EXT_EVENT, err) < 0)
        return -1;
    if (cfg->syscalls) {
        static char suffix[80];
        snprintf(suffix, sizeof(suffix), "%s%ssys", cfg->suffix ? cfg->suffix : "", cfg->suffix ? "-" : "");
        sy->suffix = suffix;
        sy->record_tgid = true;
        for (size_t i = 0; i < st_n_io_calls; i++)  /* the descriptors' calls where the kernel has them (no dup2 on arm64) */
            if (add_call(sy, st_io_calls[i], st_lifetime_kind(st_io_calls[i]) != ST_LT_NONE, err) < 0)
                return -1;
        for (size_t i = 0; i < st_n_uring_events; i++)
            if (add_event(sy, st_uring_events[i], err) < 0)
                return -1;
        /* the bytes of each message a socket takes: sendmmsg's byte count (st_convert.c) */
        if (add_event(sy, "?sock:sock_send_length", err) < 0)
            return -1;
        for (size_t i = 0; cfg->waits && i < st_n_wait_calls; i++)
            if (!is_io_call(st_wait_calls[i]) && add_call(sy, st_wait_calls[i], true, err) < 0)
                return -1;
        for (int i = 0; i < cfg->npids; i++)
            sy->pids[sy->npids++] = cfg->pids[i];
        if (s->child > 0)
            sy->pids[sy->npids++] = s->child;
    }
    return apply_filters(s, err);
}

/* The command waits at a gate until tracing runs, so its first system calls are recorded. */
static int spawn(struct recording *s, struct hw_err *err)
{
    if (hw_gate_start(&s->gate, "hw-schedtrace", s->cfg->command, NULL, NULL, err) < 0)
        return -1;
    s->child = s->gate.pid;
    return 0;
}

void st_wait(volatile sig_atomic_t *stop, long long deadline, pid_t *child, int *child_status)
{
    for (;;) {
        if (stop && *stop)
            return;
        if (deadline >= 0 && hw_mono_ns() >= deadline)
            return;
        if (*child > 0) {
            int status;
            pid_t r = waitpid(*child, &status, WNOHANG);
            if (r == *child) {
                *child_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
                *child = -*child;        /* reaped; keep the pid for the report */
                return;
            }
        }
        struct timespec ts = { 0, 5 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
}

static void wait_loop(struct recording *s)
{
    const struct st_config *cfg = s->cfg;
    st_wait(cfg->stop, cfg->duration_ns > 0 ? s->t_start + cfg->duration_ns : -1, &s->child, &s->child_status);
}

static void json_stat(FILE *f, const char *key, long long v, const char *sep)
{
    if (v == ST_UNKNOWN)
        fprintf(f, "\"%s\": null%s", key, sep);
    else
        fprintf(f, "\"%s\": %lld%s", key, v, sep);
}

static void json_cpustat(FILE *f, const struct st_cpustat *c)
{
    fputc('{', f);
    json_stat(f, "entries", c->entries, ", ");
    json_stat(f, "overrun", c->overrun, ", ");
    json_stat(f, "commit_overrun", c->commit_overrun, ", ");
    json_stat(f, "bytes", c->bytes, ", ");
    json_stat(f, "dropped_events", c->dropped, ", ");
    json_stat(f, "read_events", c->read, "");
    fputc('}', f);
}

/* Lost events of one buffer: overrun + dropped + commit overrun (end minus start) + missed in
 * stream; -1 when a counter is unknown. */
static long long buffer_lost(struct st_buffer *buf, const struct st_convert_stats *conv)
{
    const struct st_cpustat *a = st_buffer_stats(buf, 0), *b = st_buffer_stats(buf, 1);
    long long lost = 0;
    for (int cpu = 0; cpu < st_buffer_ncpus(buf); cpu++) {
        const long long pairs[3][2] = { { a[cpu].overrun, b[cpu].overrun }, { a[cpu].dropped, b[cpu].dropped },
                                        { a[cpu].commit_overrun, b[cpu].commit_overrun } };
        for (int k = 0; k < 3; k++) {
            if (pairs[k][0] == ST_UNKNOWN || pairs[k][1] == ST_UNKNOWN)
                return ST_UNKNOWN;
            lost += pairs[k][1] - pairs[k][0];
        }
    }
    (void)conv;   /* MISSING_EVENTS counts are the same losses seen from the reader's side */
    return lost;
}

static void json_buffer(FILE *f, struct recording *s, int b, const char *dat, const char *tsv)
{
    struct st_buffer *buf = s->buf[b];
    const struct st_convert_stats *cv = &s->conv[b];
    const char **names;
    int n = st_buffer_enabled(buf, &names);
    fprintf(f, "    {\"name\": \"%s\", \"instance\": \"%s\", \"trace\": \"%s\", \"tsv\": \"%s\",\n",
            b ? "syscalls" : "sched", st_buffer_instance(buf), dat, tsv);
    fprintf(f, "     \"events\": [");
    for (int i = 0; i < n; i++) {
        hw_json_str(f, names[i]);
        fputs(i + 1 < n ? ", " : "", f);
    }
    n = st_buffer_missing(buf, &names);
    fprintf(f, "],\n     \"events_missing\": [");
    for (int i = 0; i < n; i++) {
        hw_json_str(f, names[i]);
        fputs(i + 1 < n ? ", " : "", f);
    }
    fprintf(f, "],\n     \"pids\": [");
    for (int i = 0; i < s->spec[b].npids; i++)
        fprintf(f, "%d%s", s->spec[b].pids[i], i + 1 < s->spec[b].npids ? ", " : "");
    fprintf(f, "], \"buffer_kb\": %ld, \"buffer_kb_actual\": %ld, \"drain\": %s, \"drain_rt_prio\": %d, \"page_size\": %u, "
            "\"records\": %lld, \"markers_written\": %d, ", s->spec[b].buffer_kb, st_buffer_size_kb(buf),
            s->spec[b].drain ? "true" : "false", st_buffer_rt_prio(buf), st_buffer_page_size(buf),
            cv->records, 2 * ST_MARKERS);
    if (b == 1)
        fprintf(f, "\"syscall_records\": %lld, \"unfinished\": %lld, \"exits_without_enter\": %lld, ",
                cv->syscalls, cv->unfinished, cv->exits_without_enter);
    json_stat(f, "lost_events", buffer_lost(buf, cv), ",\n     \"cpus\": [\n");
    for (int cpu = 0; cpu < st_buffer_ncpus(buf); cpu++) {
        fprintf(f, "       {\"cpu\": %d, \"records\": %lld, \"missed_in_stream\": %lld, "
                "\"pages_with_unknown_missed\": %d,\n        \"start\": ", cpu, cv->per_cpu[cpu],
                cv->missed[cpu], cv->missed_unknown[cpu]);
        json_cpustat(f, &st_buffer_stats(buf, 0)[cpu]);
        fputs(",\n        \"end\": ", f);
        json_cpustat(f, &st_buffer_stats(buf, 1)[cpu]);
        fprintf(f, "}%s\n", cpu + 1 < st_buffer_ncpus(buf) ? "," : "");
    }
    fprintf(f, "     ]}");
}

void st_json_clock(FILE *f, const struct st_convert_stats *cv)
{
    static const char *which[2] = { "start", "stop" };
    long long worst = ST_UNKNOWN;
    fprintf(f, "  \"clock_check\": {");
    for (int i = 0; i < 2; i++) {
        fprintf(f, "\"%s\": ", which[i]);
        if (cv->marker_trace_ns[i] == ST_UNKNOWN) {
            fprintf(f, "null, ");
            continue;
        }
        long long diff = cv->marker_trace_ns[i] - cv->marker_mono_ns[i];
        fprintf(f, "{\"trace_ns\": %lld, \"payload_mono_ns\": %lld, \"diff_ns\": %lld}, ",
                cv->marker_trace_ns[i], cv->marker_mono_ns[i], diff);
        if (llabs(diff) > worst)
            worst = llabs(diff);
    }
    json_stat(f, "max_abs_diff_ns", worst, ", ");
    fprintf(f, "\"limit_ns\": 10000, \"ok\": %s},\n",
            worst == ST_UNKNOWN ? "null" : worst <= 10000 ? "true" : "false");
}

static int write_json(struct recording *s, const char *path, struct hw_err *err)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        hw_seterr(err, "failed to create %s: %s", path, strerror(errno));
        return -1;
    }
    fprintf(f, "{\n  \"format\": \"hostwire-sched 1\",\n  \"tool\": \"hw-schedtrace\",\n");
    fprintf(f, "  \"clock\": \"CLOCK_MONOTONIC\",\n  \"start_mono_ns\": %lld,\n  \"stop_mono_ns\": %lld,\n",
            s->t_start, s->t_stop);
    st_json_clock(f, &s->conv[0]);
    if (s->cfg->command) {
        fprintf(f, "  \"command\": {\"argv\": [");
        for (char **a = s->cfg->command; *a; a++) {
            hw_json_str(f, *a);
            fputs(a[1] ? ", " : "", f);
        }
        fprintf(f, "], \"pid\": %d, ", s->child < 0 ? -s->child : s->child);
        if (s->child < 0)
            fprintf(f, "\"exit_status\": %d},\n", s->child_status);
        else
            fprintf(f, "\"exit_status\": null},\n");
    }
    fprintf(f, "  \"buffers\": [\n");
    json_buffer(f, s, 0, "trace.dat", "sched.tsv");
    if (s->buf[1]) {
        fputs(",\n", f);
        json_buffer(f, s, 1, "syscalls.dat", "syscalls.tsv");
    }
    fprintf(f, "\n  ]\n}\n");
    if (fclose(f) != 0) {
        hw_seterr(err, "failed to write %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

static void report(struct recording *s, FILE *log)
{
    for (int b = 0; b < 2; b++) {
        struct st_buffer *buf = s->buf[b];
        if (!buf)
            continue;
        const struct st_cpustat *a = st_buffer_stats(buf, 0), *e = st_buffer_stats(buf, 1);
        long long over = 0, drop = 0, commit = 0, missed = 0;
        for (int cpu = 0; cpu < st_buffer_ncpus(buf); cpu++) {
            over += e[cpu].overrun - a[cpu].overrun;
            drop += e[cpu].dropped - a[cpu].dropped;
            commit += e[cpu].commit_overrun - a[cpu].commit_overrun;
            missed += s->conv[b].missed[cpu];
        }
        fprintf(log, "hw-schedtrace: %s: %lld events recorded; lost: overrun %lld, dropped %lld, "
                "commit overrun %lld, missed in stream %lld\n", b ? "syscalls" : "sched",
                s->conv[b].records, over, drop, commit, missed);
    }
    const struct st_convert_stats *cv = &s->conv[0];
    if (cv->marker_trace_ns[0] != ST_UNKNOWN && cv->marker_trace_ns[1] != ST_UNKNOWN)
        fprintf(log, "hw-schedtrace: clock check: trace stamp - monotonic stamp = %lld ns at start, "
                "%lld ns at stop\n", cv->marker_trace_ns[0] - cv->marker_mono_ns[0],
                cv->marker_trace_ns[1] - cv->marker_mono_ns[1]);
    else
        fprintf(log, "hw-schedtrace: clock check: a marker was lost from the buffer (unknown)\n");
}

static void describe(struct st_buffer *buf, const struct st_buffer_spec *spec, FILE *log)
{
    const char **names;
    int n = st_buffer_enabled(buf, &names);
    fprintf(log, "hw-schedtrace: %s: %d events:", st_buffer_instance(buf), n);
    for (int i = 0; i < n; i++)
        fprintf(log, " %s", names[i]);
    n = st_buffer_missing(buf, &names);
    for (int i = 0; i < n; i++)
        fprintf(log, "%s%s", i ? " " : "; not in this kernel: ", names[i]);
    fprintf(log, "\nhw-schedtrace: %s: buffer %ld KiB per CPU%s, %u-byte pages, %s", st_buffer_instance(buf),
            st_buffer_size_kb(buf), spec->buffer_kb ? "" : " (kernel default)", st_buffer_page_size(buf),
            spec->drain ? "drained while recording" : "read only at the end");
    if (spec->npids) {
        fprintf(log, ", pids");
        for (int i = 0; i < spec->npids; i++)
            fprintf(log, " %d", spec->pids[i]);
        fprintf(log, " and descendants");
    }
    fputc('\n', log);
}

static void path_in(char *out, size_t len, const char *dir, const char *name)
{
    snprintf(out, len, "%s/%s", dir, name);
}

int st_record(const struct st_config *cfg, struct hw_err *err)
{
    struct recording s = { .cfg = cfg, .gate = { .pid = -1, .go_fd = -1 } };
    char path[4200], tsv[4200];
    int rc = -1, nb = cfg->syscalls ? 2 : 1, ready_fd = cfg->ready_fd;
    if (mkdir(cfg->outdir, 0755) < 0 && errno != EEXIST) {
        hw_seterr(err, "failed to create directory %s: %s", cfg->outdir, strerror(errno));
        return -1;
    }
    if (cfg->command && spawn(&s, err) < 0)
        return -1;
    if (build_specs(&s, err) < 0)
        goto out;
    for (int b = 0; b < nb; b++)
        if (!(s.buf[b] = st_buffer_open(&s.spec[b], cfg->outdir, err)))
            goto out;
    for (int b = 0; b < nb; b++)
        if (st_buffer_start(s.buf[b], err) < 0)
            goto out;
    s.t_start = hw_mono_ns();
    for (int b = 0; b < nb; b++)
        for (int i = 0; i < ST_MARKERS; i++)
            if (st_buffer_marker(s.buf[b], "start", err) < 0)
                goto out;
    if (cfg->log) {
        fprintf(cfg->log, "hw-schedtrace: recording in tracefs instance %s%s%s (%d CPUs)\n",
                st_buffer_instance(s.buf[0]), nb > 1 ? " and " : "", nb > 1 ? st_buffer_instance(s.buf[1]) : "",
                st_buffer_ncpus(s.buf[0]));
        if (cfg->verbose)
            for (int b = 0; b < nb; b++)
                describe(s.buf[b], &s.spec[b], cfg->log);
        fflush(cfg->log);
    }
    hw_ready_notify(&ready_fd);
    if (cfg->command && hw_gate_open(&s.gate, err) < 0)
        goto out;
    wait_loop(&s);
    for (int b = 0; b < nb; b++)
        for (int i = 0; i < ST_MARKERS; i++)
            st_buffer_marker(s.buf[b], "stop", NULL);
    s.t_stop = hw_mono_ns();
    for (int b = 0; b < nb; b++)
        if (st_buffer_stop(s.buf[b], err) < 0)
            goto out;
    path_in(path, sizeof(path), cfg->outdir, "trace.dat");
    if (st_buffer_write_dat(s.buf[0], path, err) < 0)
        goto out;
    path_in(tsv, sizeof(tsv), cfg->outdir, "sched.tsv");
    if (st_convert_sched(path, tsv, &s.conv[0], err) < 0)
        goto out;
    if (nb > 1) {
        path_in(path, sizeof(path), cfg->outdir, "syscalls.dat");
        if (st_buffer_write_dat(s.buf[1], path, err) < 0)
            goto out;
        path_in(tsv, sizeof(tsv), cfg->outdir, "syscalls.tsv");
        if (st_convert_syscalls_tgids(path, tsv, st_buffer_tgids(s.buf[1]), &s.conv[1], err) < 0)
            goto out;
    }
    path_in(path, sizeof(path), cfg->outdir, "sched.json");
    if (write_json(&s, path, err) < 0)
        goto out;
    if (cfg->log)
        report(&s, cfg->log);
    rc = 0;
out:
    if (ready_fd >= 0)
        close(ready_fd);     /* never ready: the starter reads the end of the pipe */
    hw_gate_shut(&s.gate);   /* an unreleased command exits 127 without running */
    if (s.child > 0) {
        kill(s.child, rc < 0 ? SIGKILL : SIGTERM);   /* stopped before the command ended */
        waitpid(s.child, NULL, 0);
    }
    for (int b = 0; b < 2; b++)
        st_buffer_close(s.buf[b]);
    for (int i = 0; i < ST_MAX_FILTERS; i++)
        free(s.filter_text[i]);
    return rc;
}

/* trace.dat (or syscalls.dat) -> sched.tsv (or syscalls.tsv) in outdir, created if missing. */
int st_convert_file(const char *dat_path, const char *outdir, bool syscalls, FILE *log, int verbose,
                    struct hw_err *err)
{
    struct st_convert_stats st;
    char tsv[4200];
    if (mkdir(outdir, 0755) < 0 && errno != EEXIST) {
        hw_seterr(err, "failed to create directory %s: %s", outdir, strerror(errno));
        return -1;
    }
    path_in(tsv, sizeof(tsv), outdir, syscalls ? "syscalls.tsv" : "sched.tsv");
    if (syscalls ? st_convert_syscalls(dat_path, tsv, &st, err) : st_convert_sched(dat_path, tsv, &st, err))
        return -1;
    if (!log)
        return 0;
    fprintf(log, "hw-schedtrace: %s: %lld records -> %s\n", dat_path, st.records, tsv);
    for (int cpu = 0; verbose && cpu < ST_MAX_CPUS; cpu++)
        if (st.per_cpu[cpu] || st.missed[cpu] || st.missed_unknown[cpu])
            fprintf(log, "hw-schedtrace: cpu %d: %lld records, %lld missed in the stream%s\n", cpu, st.per_cpu[cpu],
                    st.missed[cpu], st.missed_unknown[cpu] ? " (and pages that lost an unknown number)" : "");
    return 0;
}
