/* One private tracefs instance: creation, events, filters, per-CPU drains, markers, removal.
 * The drain of each CPU is a thread that splices full pages of trace_pipe_raw into a file, as
 * trace-cmd's recorder does; what is left when tracing stops is read page by page. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <tracefs.h>

#include "hwclock.h"
#include "hwio.h"
#include "st.h"
#include "st_internal.h"

#define SPLICE_PAGES 16
#define WAKE_PERCENT "25"   /* buffer_percent: wake a drain when a quarter of its buffer is full */

struct st_cpu {
    struct st_buffer *buf;
    int cpu;
    int fd;              /* trace_pipe_raw */
    int out;             /* raw pages file */
    int pipe[2];
    pthread_t thread;
    int started;
    int err;             /* errno of a failed drain */
    long long bytes;
};

struct st_buffer {
    struct tracefs_instance *inst;
    char name[64];
    char tmpdir[4096];
    int ncpus;
    unsigned page_size;
    bool drain;
    int rt_prio;
    atomic_int rt_ok;    /* drains that got their real-time priority */
    atomic_int stop;
    int marker_fd;
    struct st_cpu cpus[ST_MAX_CPUS];
    struct st_cpustat stats[2][ST_MAX_CPUS];
    const char *enabled[ST_MAX_EVENTS];
    int nenabled;
    const char *missing[ST_MAX_EVENTS];
    int nmissing;
    char names[ST_MAX_EVENTS][160];
    char *cmdlines;      /* saved_cmdlines read at stop */
    char *tgids;         /* saved_tgids read at stop */
};

int st_instance_name(char *out, size_t len, int pid, const char *suffix)
{
    int n = suffix ? snprintf(out, len, "hw-%d-%s", pid, suffix) : snprintf(out, len, "hw-%d", pid);
    return n > 0 && (size_t)n < len ? 0 : -1;
}

int st_buffer_ncpus(const struct st_buffer *buf) { return buf->ncpus; }
long st_buffer_size_kb(const struct st_buffer *buf)
{
    ssize_t kb = tracefs_instance_get_buffer_size(buf->inst, 0);
    return kb > 0 ? (long)kb : -1;
}
int st_buffer_rt_prio(const struct st_buffer *buf)
{
    return buf->rt_prio && atomic_load(&((struct st_buffer *)buf)->rt_ok) == buf->ncpus ? buf->rt_prio : 0;
}
const char *st_buffer_instance(const struct st_buffer *buf) { return buf->name; }
unsigned st_buffer_page_size(const struct st_buffer *buf) { return buf->page_size; }
const char *st_buffer_cmdlines(const struct st_buffer *buf) { return buf->cmdlines; }
const char *st_buffer_tgids(const struct st_buffer *buf) { return buf->tgids; }

const struct st_cpustat *st_buffer_stats(const struct st_buffer *buf, int when)
{
    return buf->stats[when ? 1 : 0];
}

int st_buffer_enabled(const struct st_buffer *buf, const char ***names)
{
    *names = (const char **)buf->enabled;
    return buf->nenabled;
}

int st_buffer_missing(const struct st_buffer *buf, const char ***names)
{
    *names = (const char **)buf->missing;
    return buf->nmissing;
}

void st_raw_path(const struct st_buffer *buf, int cpu, char *out, size_t len)
{
    snprintf(out, len, "%s/.%s.cpu%d.raw", buf->tmpdir, buf->name, cpu);
}

static int count_cpus(struct tracefs_instance *inst)
{
    char *dir = tracefs_instance_get_file(inst, "per_cpu");
    int n = 0;
    DIR *d = dir ? opendir(dir) : NULL;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        int cpu;
        if (sscanf(e->d_name, "cpu%d", &cpu) == 1 && cpu + 1 > n)
            n = cpu + 1;
    }
    if (d)
        closedir(d);
    tracefs_put_tracing_file(dir);
    return n;
}

static unsigned read_page_size(struct tracefs_instance *inst)
{
    long long kb = 0;
    if (tracefs_file_exists(inst, "buffer_subbuf_size_kb") &&
        tracefs_instance_file_read_number(inst, "buffer_subbuf_size_kb", &kb) == 0 && kb > 0)
        return (unsigned)kb * 1024;
    return (unsigned)sysconf(_SC_PAGESIZE);
}

static int read_stats(struct st_buffer *buf, int when)
{
    for (int cpu = 0; cpu < buf->ncpus; cpu++) {
        char file[64];
        snprintf(file, sizeof(file), "per_cpu/cpu%d/stats", cpu);
        char *text = tracefs_instance_file_read(buf->inst, file, NULL);
        st_stats_parse(text, &buf->stats[when][cpu]);  /* unreadable: all ST_UNKNOWN */
        free(text);
    }
    return 0;
}

/* Fails with a usage error when a required event is unknown to this kernel. */
static int check_events(struct st_buffer *buf, const struct st_buffer_spec *spec, bool *present,
                        struct hw_err *err)
{
    for (int i = 0; i < spec->nevents; i++) {
        const struct st_event_ref *ev = &spec->events[i];
        present[i] = tracefs_event_file_exists(NULL, ev->system, ev->name, "format");
        snprintf(buf->names[i], sizeof(buf->names[i]), "%s:%s", ev->system, ev->name);
        if (present[i]) {
            buf->enabled[buf->nenabled++] = buf->names[i];
        } else if (spec->optional[i]) {
            buf->missing[buf->nmissing++] = buf->names[i];
        } else if (strcmp(buf->names[i], ST_SWITCH_EXT_EVENT) == 0) {
            /* not a usage error: the same command works on the kernel that has it */
            hw_seterr(err, "failed to find event %s: this kernel was not built with "
                      "CONFIG_SCHED_SWITCH_EXT_EVENT (the sched_switch_ext series, kernel-patches/)",
                      buf->names[i]);
            return -1;
        } else {
            hw_seterr(err, "failed to find event %s: this kernel has no such tracepoint in %s/events",
                      buf->names[i], tracefs_tracing_dir());
            err->usage = 1;
            return -1;
        }
    }
    return 0;
}

static int write_file(struct st_buffer *buf, const char *file, const char *text, struct hw_err *err)
{
    if (tracefs_instance_file_write(buf->inst, file, text) < 0) {
        hw_seterr(err, "failed to write %s of tracefs instance %s: %s", file, buf->name,
                  strerror(errno ? errno : EIO));
        return -1;
    }
    return 0;
}

static int configure(struct st_buffer *buf, const struct st_buffer_spec *spec, const bool *present,
                     struct hw_err *err)
{
    if (tracefs_trace_off(buf->inst) < 0) {
        hw_seterr(err, "failed to stop tracing in instance %s: %s", buf->name, strerror(errno));
        return -1;
    }
    if (write_file(buf, "trace_clock", "mono", err) < 0)
        return -1;
    if (tracefs_file_exists(buf->inst, "buffer_percent"))
        tracefs_instance_file_write(buf->inst, "buffer_percent", WAKE_PERCENT);
    if (spec->buffer_kb > 0 && tracefs_instance_set_buffer_size(buf->inst, (size_t)spec->buffer_kb, -1) < 0) {
        hw_seterr(err, "failed to set buffer size of instance %s to %ld KiB: %s", buf->name,
                  spec->buffer_kb, strerror(errno));
        return -1;
    }
    if (spec->npids > 0) {
        if (tracefs_option_enable(buf->inst, TRACEFS_OPTION_EVENT_FORK) < 0) {
            hw_seterr(err, "failed to enable option event-fork of instance %s: %s", buf->name,
                      strerror(errno));
            return -1;
        }
        char *list = st_pid_tree(spec->pids, spec->npids);  /* after event-fork: a task forked now is kept */
        if (!list) {
            hw_seterr(err, "failed to list the tasks of the pids of instance %s: out of memory", buf->name);
            return -1;
        }
        int rc = write_file(buf, "set_event_pid", list, err);
        free(list);
        if (rc < 0)
            return -1;
    }
    /* tid -> tgid map for syscalls.tsv (costs a little per event); harmless where missing */
    if (spec->record_tgid)
        tracefs_option_enable(buf->inst, TRACEFS_OPTION_RECORD_TGID);
    for (int i = 0; i < spec->nevents; i++) {
        const struct st_event_ref *ev = &spec->events[i];
        if (!present[i])
            continue;
        if (spec->filters[i] &&
            tracefs_event_file_write(buf->inst, ev->system, ev->name, "filter", spec->filters[i]) < 0) {
            hw_seterr(err, "failed to set filter '%s' on event %s:%s: the kernel rejected it",
                      spec->filters[i], ev->system, ev->name);
            err->usage = 1;
            return -1;
        }
        if (tracefs_event_enable(buf->inst, ev->system, ev->name) < 0) {
            hw_seterr(err, "failed to enable event %s:%s in instance %s: %s", ev->system, ev->name,
                      buf->name, strerror(errno ? errno : EIO));
            return -1;
        }
    }
    return 0;
}

struct st_buffer *st_buffer_open(const struct st_buffer_spec *spec, const char *tmpdir,
                                 struct hw_err *err)
{
    struct st_buffer *buf = calloc(1, sizeof(*buf));
    bool present[ST_MAX_EVENTS];
    if (!buf) {
        hw_seterr(err, "failed to allocate buffer state: out of memory");
        return NULL;
    }
    buf->marker_fd = -1;
    buf->drain = spec->drain;
    buf->rt_prio = spec->rt_prio;
    for (int i = 0; i < ST_MAX_CPUS; i++)
        buf->cpus[i].fd = buf->cpus[i].out = buf->cpus[i].pipe[0] = buf->cpus[i].pipe[1] = -1;
    snprintf(buf->tmpdir, sizeof(buf->tmpdir), "%s", tmpdir);
    if (st_instance_name(buf->name, sizeof(buf->name), (int)getpid(), spec->suffix) < 0) {
        hw_seterr(err, "failed to name tracefs instance: suffix '%s' is too long", spec->suffix);
        err->usage = 1;
        goto fail;
    }
    const char *dir = tracefs_tracing_dir();
    if (!dir) {
        hw_seterr(err, "failed to find tracefs: it is not mounted (mount -t tracefs nodev /sys/kernel/tracing)");
        goto fail;
    }
    /* a kernel locked down for confidentiality mounts tracefs but creates none of its files (a
     * user without the right to look gets EACCES, and the messages below) */
    char trace_file[PATH_MAX];
    struct stat st;
    snprintf(trace_file, sizeof(trace_file), "%s/trace", dir);
    if (stat(trace_file, &st) < 0 && errno == ENOENT) {
        hw_seterr(err, "failed to read tracefs at %s: it shows no files (a kernel locked down for "
                  "confidentiality closes it; see /sys/kernel/security/lockdown)", dir);
        goto fail;
    }
    if (check_events(buf, spec, present, err) < 0)
        goto fail;
    if (tracefs_instance_exists(buf->name)) {
        hw_seterr(err, "failed to create tracefs instance %s: it exists already; a live collector owns "
                  "it or a killed one left it ('hostwire doctor --cleanup' removes stale ones)", buf->name);
        goto fail;
    }
    errno = 0;
    buf->inst = tracefs_instance_create(buf->name);
    if (!buf->inst) {
        hw_seterr(err, "failed to create tracefs instance %s in %s/instances: %s", buf->name, dir,
                  strerror(errno ? errno : EACCES));
        goto fail;
    }
    if (!tracefs_instance_exists(buf->name)) {
        hw_seterr(err, "failed to create tracefs instance %s in %s/instances: %s", buf->name, dir,
                  strerror(errno ? errno : EACCES));
        tracefs_instance_free(buf->inst);
        buf->inst = NULL;
        goto fail;
    }
    buf->ncpus = count_cpus(buf->inst);
    if (buf->ncpus <= 0 || buf->ncpus > ST_MAX_CPUS) {
        hw_seterr(err, "failed to count CPUs of instance %s: per_cpu has %d entries", buf->name, buf->ncpus);
        goto fail;
    }
    buf->page_size = read_page_size(buf->inst);
    if (configure(buf, spec, present, err) < 0)
        goto fail;
    return buf;
fail:
    st_buffer_close(buf);
    return NULL;
}

static int pipe_to_file(struct st_cpu *c, ssize_t n)
{
    while (n > 0) {
        ssize_t m = splice(c->pipe[0], NULL, c->out, NULL, (size_t)n, SPLICE_F_MOVE);
        if (m < 0 && errno == EINTR)
            continue;
        if (m <= 0) {
            c->err = m < 0 ? errno : EIO;
            return -1;
        }
        n -= m;
        c->bytes += m;
    }
    return 0;
}

static void *drain_main(void *arg)
{
    struct st_cpu *c = arg;
    size_t chunk = (size_t)c->buf->page_size * SPLICE_PAGES;
    if (c->buf->rt_prio > 0) {
        struct sched_param sp = { .sched_priority = c->buf->rt_prio };
        if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) == 0)
            atomic_fetch_add(&c->buf->rt_ok, 1);
    }
    for (;;) {
        ssize_t n = splice(c->fd, NULL, c->pipe[1], NULL, chunk, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        if (n > 0) {
            if (pipe_to_file(c, n) < 0)
                break;
            continue;
        }
        if (n < 0 && errno != EAGAIN && errno != EINTR) {
            c->err = errno;
            break;
        }
        if (atomic_load(&c->buf->stop))
            break;
        struct pollfd p = { .fd = c->fd, .events = POLLIN };
        poll(&p, 1, 20);
    }
    return NULL;
}

/* What is left in the kernel buffer, one (possibly partial) page per read. */
static int flush_cpu(struct st_cpu *c, struct hw_err *err)
{
    unsigned page = c->buf->page_size;
    char *data = malloc(page);
    int rc = 0;
    if (!data) {
        hw_seterr(err, "failed to allocate a page: out of memory");
        return -1;
    }
    for (;;) {
        memset(data, 0, page);
        ssize_t n = read(c->fd, data, page);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        int failed = hw_write_all(c->out, data, page);
        if (failed) {
            hw_seterr(err, "failed to write raw pages of CPU %d: %s", c->cpu, strerror(-failed));
            rc = -1;
            break;
        }
        c->bytes += page;
    }
    free(data);
    return rc;
}

int st_buffer_start(struct st_buffer *buf, struct hw_err *err)
{
    read_stats(buf, 0);
    for (int cpu = 0; cpu < buf->ncpus; cpu++) {
        struct st_cpu *c = &buf->cpus[cpu];
        char file[64], path[4200];
        c->buf = buf;
        c->cpu = cpu;
        snprintf(file, sizeof(file), "per_cpu/cpu%d/trace_pipe_raw", cpu);
        c->fd = tracefs_instance_file_open(buf->inst, file, O_RDONLY | O_NONBLOCK);
        if (c->fd < 0) {
            hw_seterr(err, "failed to open %s of instance %s: %s", file, buf->name, strerror(errno));
            return -1;
        }
        st_raw_path(buf, cpu, path, sizeof(path));
        c->out = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (c->out < 0) {
            hw_seterr(err, "failed to create %s: %s", path, strerror(errno));
            return -1;
        }
        if (pipe2(c->pipe, O_CLOEXEC) < 0) {
            hw_seterr(err, "failed to create a pipe for CPU %d: %s", cpu, strerror(errno));
            return -1;
        }
        fcntl(c->pipe[1], F_SETPIPE_SZ, (int)(buf->page_size * SPLICE_PAGES));
    }
    buf->marker_fd = tracefs_instance_file_open(buf->inst, "trace_marker", O_WRONLY);
    if (buf->drain) {
        for (int cpu = 0; cpu < buf->ncpus; cpu++) {
            int rc = pthread_create(&buf->cpus[cpu].thread, NULL, drain_main, &buf->cpus[cpu]);
            if (rc != 0) {
                hw_seterr(err, "failed to start the drain thread of CPU %d: %s", cpu, strerror(rc));
                return -1;
            }
            buf->cpus[cpu].started = 1;
        }
    }
    if (tracefs_trace_on(buf->inst) < 0) {
        hw_seterr(err, "failed to start tracing in instance %s: %s", buf->name, strerror(errno));
        return -1;
    }
    return 0;
}

/* A print event carrying this process's CLOCK_MONOTONIC stamp: the clock check. */
int st_buffer_marker(struct st_buffer *buf, const char *what, struct hw_err *err)
{
    char text[128];
    if (buf->marker_fd < 0) {
        hw_seterr(err, "failed to open trace_marker of instance %s", buf->name);
        return -1;
    }
    int64_t now = hw_mono_ns();
    int n = snprintf(text, sizeof(text), ST_MARKER_PREFIX "%s mono_ns=%lld", what, (long long)now);
    if (write(buf->marker_fd, text, (size_t)n) != n) {
        hw_seterr(err, "failed to write trace_marker of instance %s: %s", buf->name, strerror(errno));
        return -1;
    }
    return 0;
}

int st_buffer_stop(struct st_buffer *buf, struct hw_err *err)
{
    int rc = 0;
    tracefs_trace_off(buf->inst);
    atomic_store(&buf->stop, 1);
    for (int cpu = 0; cpu < buf->ncpus; cpu++) {
        struct st_cpu *c = &buf->cpus[cpu];
        if (c->started) {
            pthread_join(c->thread, NULL);
            c->started = 0;
        }
        if (c->err && rc == 0) {
            hw_seterr(err, "failed to drain CPU %d of instance %s: %s", cpu, buf->name, strerror(c->err));
            rc = -1;
        }
    }
    read_stats(buf, 1);
    for (int cpu = 0; cpu < buf->ncpus && rc == 0; cpu++)
        if (buf->cpus[cpu].fd >= 0 && flush_cpu(&buf->cpus[cpu], err) < 0)
            rc = -1;
    free(buf->cmdlines);
    buf->cmdlines = tracefs_instance_file_read(NULL, "saved_cmdlines", NULL);
    free(buf->tgids);
    buf->tgids = tracefs_instance_file_read(NULL, "saved_tgids", NULL);
    return rc;
}

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

void st_buffer_close(struct st_buffer *buf)
{
    if (!buf)
        return;
    atomic_store(&buf->stop, 1);
    for (int cpu = 0; cpu < ST_MAX_CPUS; cpu++) {
        struct st_cpu *c = &buf->cpus[cpu];
        if (c->started)
            pthread_join(c->thread, NULL);
        close_fd(&c->fd);
        close_fd(&c->out);
        close_fd(&c->pipe[0]);
        close_fd(&c->pipe[1]);
        if (cpu < buf->ncpus && buf->tmpdir[0]) {
            char path[4200];
            st_raw_path(buf, cpu, path, sizeof(path));
            unlink(path);
        }
    }
    close_fd(&buf->marker_fd);
    if (buf->inst) {
        tracefs_trace_off(buf->inst);
        tracefs_event_disable(buf->inst, NULL, NULL);
        tracefs_instance_destroy(buf->inst);
        tracefs_instance_free(buf->inst);
    }
    free(buf->cmdlines);
    free(buf->tgids);
    free(buf);
}
