/* One recording from the patched kernel's ring: "size N", "clear", "pids ...", "enable" to
 * /proc/schedtrace_control; a drain thread reads /proc/schedtrace (reads consume; an empty ring
 * reads as end of file, so it reads again every 50 ms) into DIR/schedtrace.txt, byte for byte;
 * at a signal, --duration or the command's end: "disable", the last drain, the ring's state at
 * stop, then sched.tsv, syscalls.tsv and sched.json (st_procconv.c, st_procjson.c). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
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
#include "st_internal.h"
#include "st_proc.h"

#define POLL_NS (50 * 1000 * 1000LL)
#define READ_CHUNK (256 * 1024)
#define PROBES 4                    /* clock-check sleeps per phase; the least delayed one counts */

struct paths {
    char ring[4200], control[4200];
};

struct drain {
    int fd, out;
    atomic_int stop;
    int err;                        /* errno of a failed read (reading) or write */
    int reading;
    int rt_prio;
    atomic_int rt_ok;
    pthread_t thread;
    int started;
    char *buf;
};

static void find_paths(struct paths *p)
{
    const char *dir = getenv(ST_PROC_DIR_ENV);
    if (!dir || !*dir)
        dir = "/proc";
    snprintf(p->ring, sizeof(p->ring), "%s/schedtrace", dir);
    snprintf(p->control, sizeof(p->control), "%s/schedtrace_control", dir);
}

static int check_present(const struct paths *p, struct hw_err *err)
{
    const char *const files[2] = { p->ring, p->control };
    for (int i = 0; i < 2; i++) {
        struct stat sb;
        if (stat(files[i], &sb) == 0)
            continue;
        if (errno == ENOENT)
            hw_seterr(err, "%s is missing: this kernel does not carry the schedtrace patch (kernel-patches/)",
                      files[i]);
        else
            hw_seterr(err, "failed to find %s: %s", files[i], strerror(errno));
        return -1;
    }
    return 0;
}

static const char *hint(int e, const char *cmd)
{
    if (e == EACCES || e == EPERM)
        return " (run as root)";
    if (e == EBUSY)
        return " (the ring is enabled: another recording?)";
    if (e == ERANGE)
        return " (the kernel takes 1024 to 16777216 records)";
    if (e == EOPNOTSUPP && strcmp(cmd, "enable") == 0)
        return " (this kernel has the switch records only, without patch 0002: record without --syscalls)";
    return "";
}

/* One command, one write: the kernel takes each write as one command. */
static int control(const struct paths *p, const char *cmd, struct hw_err *err)
{
    char line[1024];
    int n = snprintf(line, sizeof(line), "%s\n", cmd);
    int fd = open(p->control, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0) {
        hw_seterr(err, "failed to open %s: %s%s", p->control, strerror(errno), hint(errno, cmd));
        return -1;
    }
    ssize_t w = write(fd, line, (size_t)n);
    int e = w < 0 ? errno : EIO;
    close(fd);
    if (w == n)
        return 0;
    hw_seterr(err, "failed to write '%s' to %s: %s%s", cmd, p->control, strerror(e), hint(e, cmd));
    return -1;
}

int st_proc_parse_control(const char *text, struct st_proc_header *h)
{
    static const char *const keys[] = { "enabled", "size", "written", "lost", "pending" };
    long long *vals[] = { &h->enabled, &h->size, &h->written, &h->lost, &h->pending };
    int seen[5] = { 0 }, found = 0;
    memset(h, 0, sizeof(*h));
    h->format = ST_PROC_FORMAT;
    snprintf(h->clock, sizeof(h->clock), "mono");
    for (const char *line = text; line && *line;) {
        for (int k = 0; k < 5; k++) {
            size_t n = strlen(keys[k]);
            char *end;
            if (seen[k] || strncmp(line, keys[k], n) != 0 || line[n] != ' ')
                continue;
            long long v = strtoll(line + n + 1, &end, 10);
            if (end != line + n + 1 && (*end == '\n' || *end == '\0') && v >= 0) {
                *vals[k] = v;
                seen[k] = 1;
                found++;
            }
        }
        const char *nl = strchr(line, '\n');
        line = nl ? nl + 1 : NULL;
    }
    return found;
}

/* The control file's state: 1 when it gave every counter, 0 when not, -1 when unreadable. */
static int read_control(const struct paths *p, struct st_proc_header *h, struct hw_err *err)
{
    char text[65536];
    size_t n = 0;
    int fd = open(p->control, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        hw_seterr(err, "failed to open %s: %s%s", p->control, strerror(errno), hint(errno, ""));
        return -1;
    }
    for (;;) {
        ssize_t r = read(fd, text + n, sizeof(text) - 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
        if (n == sizeof(text) - 1)
            break;
    }
    close(fd);
    text[n] = '\0';
    return st_proc_parse_control(text, h) == 5;
}

/* ---- the drain ---- */

static int drain_to_eof(struct drain *d)
{
    for (;;) {
        ssize_t n = read(d->fd, d->buf, READ_CHUNK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            d->err = errno;
            d->reading = 1;
            return -1;
        }
        if (n == 0)
            return 0;
        int failed = hw_write_all(d->out, d->buf, (size_t)n);
        if (failed) {
            d->err = -failed;
            return -1;
        }
    }
}

static void *drain_main(void *arg)
{
    struct drain *d = arg;
    for (;;) {
        /* stop is set after "disable": a drain begun after seeing it empties the ring for good */
        int last = atomic_load(&d->stop);
        if (drain_to_eof(d) < 0 || last)
            break;
        struct timespec ts = { 0, POLL_NS };
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static int drain_start(struct drain *d, struct hw_err *err)
{
    sigset_t stop_signals, old;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, &old);   /* the signals stay with the main thread */
    int rc = pthread_create(&d->thread, NULL, drain_main, d);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        hw_seterr(err, "failed to start the drain thread: %s", strerror(rc));
        return -1;
    }
    d->started = 1;
    if (d->rt_prio > 0) {   /* like the tracefs drains: a loaded machine must not starve it */
        struct sched_param sp = { .sched_priority = d->rt_prio };
        if (pthread_setschedparam(d->thread, SCHED_FIFO, &sp) == 0)
            atomic_store(&d->rt_ok, 1);
    }
    return 0;
}

static void drain_stop(struct drain *d)
{
    atomic_store(&d->stop, 1);
    if (d->started)
        pthread_join(d->thread, NULL);
    d->started = 0;
}

/* A fresh open's first line is the header with the ring's state after the last drain (its
 * lost and written are final); read byte by byte, so that no record leaves the ring. */
static void final_header(const char *ring, int out)
{
    char line[ST_PROC_LINE];
    size_t n = 0;
    int fd = open(ring, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    while (n < sizeof(line)) {
        ssize_t r = read(fd, line + n, 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0 || line[n++] == '\n')
            break;
    }
    close(fd);
    if (n > 13 && line[n - 1] == '\n' && memcmp(line, "# schedtrace ", 13) == 0)
        hw_write_all(out, line, n);
}

/* ---- clock check ---- */

static void probe(struct st_proc_probe *p, int phase)
{
    struct timespec ts = { 0, 100 * 1000 };   /* long enough to block: a switch record */
    p->tid = gettid();
    p->phase = phase;
    p->t0 = hw_mono_ns();
    nanosleep(&ts, NULL);
    p->t1 = hw_mono_ns();
}

static void counter(FILE *log, const char *what, long long v, const char *sep)
{
    if (v == ST_UNKNOWN)
        fprintf(log, "%s unknown%s", what, sep);
    else
        fprintf(log, "%s %lld%s", what, v, sep);
}

static void report(FILE *log, const struct st_proc_stats *st, const struct st_proc_run *run)
{
    long long lost, unread;
    st_proc_lost(st, run, &lost, &unread);
    fprintf(log, "hw-schedtrace: %s: %lld records (switch %lld, sys_enter/sys_exit %lld: %lld calls); lost: ",
            run->ring, st->records, st->switches, st->sys_enter + st->sys_exit, st->syscalls);
    counter(log, "ring full", lost, ", ");
    counter(log, "unread", unread, "\n");
    if (st->marker_trace_ns[0] != ST_UNKNOWN && st->marker_trace_ns[1] != ST_UNKNOWN)
        fprintf(log, "hw-schedtrace: clock check: switch stamp - monotonic stamp before sleeping = %lld ns at "
                "start, %lld ns at stop\n", st->marker_trace_ns[0] - st->marker_mono_ns[0],
                st->marker_trace_ns[1] - st->marker_mono_ns[1]);
    else
        fprintf(log, "hw-schedtrace: clock check: a probe's switch record is missing (unknown)\n");
}

static void describe(FILE *log, const struct paths *p, const struct st_proc_config *cfg, long long size,
                     const int *pids, int npids, struct drain *d)
{
    if (cfg->size)
        fprintf(log, "hw-schedtrace: %s: ring of %ld records, switches", p->ring, cfg->size);
    else if (size > 0)
        fprintf(log, "hw-schedtrace: %s: ring of %lld records (the kernel's), switches", p->ring, size);
    else
        fprintf(log, "hw-schedtrace: %s: ring of the kernel's size, switches", p->ring);
    if (cfg->syscalls) {
        fprintf(log, " and the I/O system calls of pids");
        for (int i = 0; i < npids; i++)
            fprintf(log, " %d", pids[i]);
        fprintf(log, " and descendants");
    }
    if (atomic_load(&d->rt_ok))
        fprintf(log, "; drained every %lld ms at SCHED_FIFO priority %d\n", POLL_NS / 1000000, d->rt_prio);
    else
        fprintf(log, "; drained every %lld ms (normal scheduling)\n", POLL_NS / 1000000);
}

static int build_pids(const struct st_proc_config *cfg, pid_t child, int *pids, char *cmd, size_t len)
{
    int n = 0;
    size_t o = (size_t)snprintf(cmd, len, "pids");
    for (int i = 0; cfg->syscalls && i < cfg->npids; i++)
        pids[n++] = cfg->pids[i];
    if (cfg->syscalls && child > 0)
        pids[n++] = child;
    for (int i = 0; i < n && o < len; i++)
        o += (size_t)snprintf(cmd + o, len - o, " %d", pids[i]);
    return n;
}

static int open_files(struct drain *d, const struct paths *p, const char *raw, struct hw_err *err)
{
    d->fd = open(p->ring, O_RDONLY | O_CLOEXEC);
    if (d->fd < 0) {
        hw_seterr(err, "failed to open %s: %s%s", p->ring, strerror(errno), hint(errno, ""));
        return -1;
    }
    d->out = open(raw, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (d->out < 0) {
        hw_seterr(err, "failed to create %s: %s", raw, strerror(errno));
        return -1;
    }
    d->buf = malloc(READ_CHUNK);
    if (!d->buf) {
        hw_seterr(err, "failed to allocate the read buffer: out of memory");
        return -1;
    }
    return 0;
}

/* After the recording: the TSVs and sched.json; a damaged raw file still gets its sched.json. */
static int convert(const struct st_proc_config *cfg, const char *raw, struct st_proc_probe *probes, int nprobes,
                   struct st_proc_run *run, struct hw_err *err)
{
    struct st_proc_stats *st = calloc(1, sizeof(*st));
    char path[4200];
    struct hw_err json_err = { 0 };
    if (!st) {
        hw_seterr(err, "failed to convert %s: out of memory", raw);
        return -1;
    }
    int rc = st_proc_convert(raw, cfg->outdir, cfg->syscalls, probes, nprobes, st, err);
    if (rc == 0 || st->damaged) {
        snprintf(path, sizeof(path), "%s/sched.json", cfg->outdir);
        if (st_proc_write_json(path, st, run, &json_err) < 0) {
            if (rc == 0)
                *err = json_err;
            rc = -1;
        } else if (cfg->log) {
            report(cfg->log, st, run);
        }
    }
    free(st);
    return rc;
}

int st_proc_record(const struct st_proc_config *cfg, struct hw_err *err)
{
    struct drain d;
    struct paths p;
    struct hw_gate gate = { .pid = -1, .go_fd = -1 };
    struct st_proc_header before;
    struct st_proc_probe probes[2 * PROBES];
    struct st_proc_run run = { .start_mono_ns = ST_UNKNOWN, .stop_mono_ns = ST_UNKNOWN, .size_requested = cfg->size,
                               .syscalls = cfg->syscalls, .command = cfg->command };
    int pids[ST_MAX_PIDS], npids, nprobes = 0, rc = -1, enabled = 0, ready_fd = cfg->ready_fd;
    pid_t child = 0;
    char raw[4200], cmd[ST_MAX_PIDS * 12 + 8];
    memset(&d, 0, sizeof(d));
    d.fd = d.out = -1;
    d.rt_prio = cfg->rt_prio;
    find_paths(&p);
    run.ring = p.ring;
    if (check_present(&p, err) < 0)
        goto out;
    int state = read_control(&p, &before, err);
    if (state < 0)
        goto out;
    if (state > 0 && before.enabled) {
        hw_seterr(err, "failed to start recording: %s says the ring is enabled already (another recording? "
                  "'echo disable > %s' ends it)", p.control, p.control);
        goto out;
    }
    if (mkdir(cfg->outdir, 0755) < 0 && errno != EEXIST) {
        hw_seterr(err, "failed to create directory %s: %s", cfg->outdir, strerror(errno));
        goto out;
    }
    if (cfg->command) {
        if (hw_gate_start(&gate, "hw-schedtrace", cfg->command, NULL, NULL, err) < 0)
            goto out;
        child = gate.pid;
    }
    npids = build_pids(cfg, child, pids, cmd, sizeof(cmd));
    run.pids = pids;
    run.npids = npids;
    run.child_pid = child;
    if (cfg->size) {
        char size[64];
        snprintf(size, sizeof(size), "size %ld", cfg->size);
        if (control(&p, size, err) < 0)
            goto out;
    }
    snprintf(raw, sizeof(raw), "%s/" ST_PROC_RAW, cfg->outdir);
    if (control(&p, "clear", err) < 0 || control(&p, cmd, err) < 0 || open_files(&d, &p, raw, err) < 0)
        goto out;
    if (control(&p, "enable", err) < 0)
        goto out;
    enabled = 1;
    run.start_mono_ns = hw_mono_ns();
    if (drain_start(&d, err) < 0)
        goto out;
    for (int i = 0; i < PROBES; i++)
        probe(&probes[nprobes++], 0);
    if (cfg->log) {
        fprintf(cfg->log, "hw-schedtrace: recording from %s\n", p.ring);
        if (cfg->verbose)
            describe(cfg->log, &p, cfg, state > 0 ? before.size : -1, pids, npids, &d);
        fflush(cfg->log);
    }
    hw_ready_notify(&ready_fd);
    if (cfg->command && hw_gate_open(&gate, err) < 0)
        goto out;
    st_wait(cfg->stop, cfg->duration_ns > 0 ? run.start_mono_ns + cfg->duration_ns : -1, &child,
            &run.child_status);
    run.child_done = child < 0;
    for (int i = 0; i < PROBES; i++)
        probe(&probes[nprobes++], 1);
    run.stop_mono_ns = hw_mono_ns();
    if (control(&p, "disable", err) < 0)
        goto out;
    enabled = 0;
    drain_stop(&d);
    if (d.err) {
        hw_seterr(err, "failed to %s %s: %s", d.reading ? "read" : "write", d.reading ? p.ring : raw,
                  strerror(d.err));
        goto out;
    }
    final_header(p.ring, d.out);
    if (close(d.out) < 0) {
        d.out = -1;
        hw_seterr(err, "failed to write %s: %s", raw, strerror(errno));
        goto out;
    }
    d.out = -1;
    run.have_control = read_control(&p, &run.control, NULL) > 0;
    run.rt_prio = atomic_load(&d.rt_ok) ? d.rt_prio : 0;
    rc = convert(cfg, raw, probes, nprobes, &run, err);
out:
    if (enabled)
        control(&p, "disable", NULL);   /* a failure must not leave the ring recording */
    drain_stop(&d);
    if (d.fd >= 0)
        close(d.fd);
    if (d.out >= 0)
        close(d.out);
    free(d.buf);
    if (ready_fd >= 0)
        close(ready_fd);     /* never ready: the starter reads the end of the pipe */
    hw_gate_shut(&gate);     /* an unreleased command exits 127 without running */
    if (child > 0) {
        kill(child, rc < 0 ? SIGKILL : SIGTERM);   /* stopped before the command ended */
        waitpid(child, NULL, 0);
    }
    return rc;
}

/* proc convert: outdir created if missing; sched.json without the recording's facts. */
int st_proc_convert_file(const char *raw, const char *outdir, FILE *log, int verbose, struct hw_err *err)
{
    struct st_proc_run run = { .ring = raw, .start_mono_ns = ST_UNKNOWN, .stop_mono_ns = ST_UNKNOWN, .rt_prio = -1 };
    struct st_proc_stats *st = calloc(1, sizeof(*st));
    struct hw_err json_err = { 0 };
    char path[4200];
    int rc = -1;
    if (!st) {
        hw_seterr(err, "failed to convert %s: out of memory", raw);
        return -1;
    }
    if (mkdir(outdir, 0755) < 0 && errno != EEXIST) {
        hw_seterr(err, "failed to create directory %s: %s", outdir, strerror(errno));
        goto out;
    }
    rc = st_proc_convert(raw, outdir, false, NULL, 0, st, err);
    if (rc < 0 && !st->damaged)
        goto out;
    snprintf(path, sizeof(path), "%s/sched.json", outdir);
    if (st_proc_write_json(path, st, &run, &json_err) < 0) {
        if (rc == 0)
            *err = json_err;
        rc = -1;
    }
    if (log && rc == 0) {
        long long lost, unread;
        st_proc_lost(st, &run, &lost, &unread);
        fprintf(log, "hw-schedtrace: %s: %lld records (switch %lld, sys_enter/sys_exit %lld: %lld calls) -> "
                "%s/sched.tsv%s; lost: ", raw, st->records, st->switches, st->sys_enter + st->sys_exit,
                st->syscalls, outdir, st->wrote_syscalls ? ", syscalls.tsv" : "");
        counter(log, "ring full", lost, ", ");
        counter(log, "unread", unread, "\n");
        for (int cpu = 0; verbose && cpu < ST_MAX_CPUS; cpu++)
            if (st->per_cpu[cpu])
                fprintf(log, "hw-schedtrace: cpu %d: %lld records\n", cpu, st->per_cpu[cpu]);
    }
out:
    free(st);
    return rc;
}
