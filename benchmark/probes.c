/* The cost of each probe a hostwire collector or the benchmark itself puts on a traced path:
 * clock reads, the TSC, one trace_marker write and one event-log append. Each is timed over
 * `calls` calls with CLOCK_MONOTONIC around the loop (the loop's own cost is subtracted). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#include "bench.h"
#include "evlog.h"
#include "hwclock.h"

#define HB_TRACEFS "/sys/kernel/tracing"

static volatile int64_t hb_probe_sink;

/* A measured cost below the empty loop's own jitter comes out negative: it is a cost of 0, and
 * only a probe with a reason (`why`) is unavailable. */
static void put(struct hb_probe_result *r, const char *name, double ns, const char *why)
{
    snprintf(r->name, sizeof(r->name), "%s", name);
    r->ns = why ? -1 : (ns > 0 ? ns : 0);
    snprintf(r->why, sizeof(r->why), "%s", why ? why : "");
}

/* ns per iteration of an empty loop of `calls` iterations (subtracted from every probe). */
static double empty_loop_ns(int64_t calls)
{
    int64_t t0 = hw_mono_ns();
    for (int64_t i = 0; i < calls; i++)
        hb_probe_sink = i;
    return (double)(hw_mono_ns() - t0) / (double)calls;
}

static double time_clock(clockid_t clock, int64_t calls, double loop_ns)
{
    struct timespec ts;
    int64_t t0 = hw_mono_ns();
    for (int64_t i = 0; i < calls; i++) {
        clock_gettime(clock, &ts);
        hb_probe_sink = ts.tv_nsec;
    }
    return (double)(hw_mono_ns() - t0) / (double)calls - loop_ns;
}

/* One write of a short line to trace_marker of a tracefs instance made for it (and removed). */
static void time_marker(int64_t calls, double loop_ns, struct hb_probe_result *r)
{
    char dir[64], path[96], why[256];
    snprintf(dir, sizeof(dir), HB_TRACEFS "/instances/hw-probes-%d", (int)getpid());
    if (mkdir(dir, 0755) < 0) {
        snprintf(why, sizeof(why), "failed to create tracefs instance %s: %s", dir, strerror(errno));
        put(r, "trace_marker_write", -1, why);
        return;
    }
    snprintf(path, sizeof(path), "%s/trace_marker", dir);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, sizeof(why), "failed to open %s: %s", path, strerror(errno));
        put(r, "trace_marker_write", -1, why);
        rmdir(dir);
        return;
    }
    static const char line[] = "hw-probe\n";
    int failed = 0;
    int64_t t0 = hw_mono_ns();
    for (int64_t i = 0; i < calls && !failed; i++)
        failed = write(fd, line, sizeof(line) - 1) < 0;
    double ns = (double)(hw_mono_ns() - t0) / (double)calls - loop_ns;
    int saved = errno;
    close(fd);
    rmdir(dir);
    if (failed) {
        snprintf(why, sizeof(why), "failed to write %s: %s", path, strerror(saved));
        put(r, "trace_marker_write", -1, why);
        return;
    }
    put(r, "trace_marker_write", ns, NULL);
}

int hb_run_probes(int64_t calls, struct hb_probe_result *out, int max)
{
    static const struct { const char *name; clockid_t id; } clocks[] = {
        {"clock_gettime_MONOTONIC", CLOCK_MONOTONIC},
        {"clock_gettime_REALTIME", CLOCK_REALTIME},
        {"clock_gettime_MONOTONIC_RAW", CLOCK_MONOTONIC_RAW},
        {"clock_gettime_BOOTTIME", CLOCK_BOOTTIME},
        {"clock_gettime_MONOTONIC_COARSE", CLOCK_MONOTONIC_COARSE},
        {"clock_gettime_REALTIME_COARSE", CLOCK_REALTIME_COARSE},
    };
    int n = 0;
    (void)time_clock(CLOCK_MONOTONIC, calls, 0);  /* warm-up: the vDSO page, caches, frequency */
    double loop_ns = empty_loop_ns(calls);
    for (size_t i = 0; i < sizeof(clocks) / sizeof(clocks[0]) && n < max; i++)
        put(&out[n++], clocks[i].name, time_clock(clocks[i].id, calls, loop_ns), NULL);
    if (n < max) {
        struct timeval tv;
        int64_t t0 = hw_mono_ns();
        for (int64_t i = 0; i < calls; i++) {
            gettimeofday(&tv, NULL);
            hb_probe_sink = tv.tv_usec;
        }
        put(&out[n++], "gettimeofday", (double)(hw_mono_ns() - t0) / (double)calls - loop_ns, NULL);
    }
    if (n < max) {
        int64_t t0 = hw_mono_ns();
        for (int64_t i = 0; i < calls; i++)
            hb_probe_sink = (int64_t)time(NULL);
        put(&out[n++], "time", (double)(hw_mono_ns() - t0) / (double)calls - loop_ns, NULL);
    }
    if (n < max) {
#if defined(__x86_64__) || defined(__i386__)
        int64_t t0 = hw_mono_ns();
        for (int64_t i = 0; i < calls; i++)
            hb_probe_sink = (int64_t)__rdtsc();
        put(&out[n++], "rdtsc", (double)(hw_mono_ns() - t0) / (double)calls - loop_ns, NULL);
#else
        put(&out[n++], "rdtsc", -1, "not an x86 processor");
#endif
    }
    if (n < max) {
        /* Fewer marker writes: each fills the instance's ring buffer (it overwrites). */
        int64_t marker_calls = calls < 200000 ? calls : 200000;
        time_marker(marker_calls, empty_loop_ns(marker_calls), &out[n++]);
    }
    if (n < max) {
        struct hb_evlog log;
        int64_t cap = calls < (1 << 20) ? calls : (1 << 20);
        if (hb_evlog_init(&log, cap, 0, INT64_MAX) < 0) {
            put(&out[n++], "evlog_append", -1, "failed to allocate the event log");
        } else {
            int64_t t0 = hw_mono_ns();
            for (int64_t i = 0; i < cap; i++)
                hb_evlog_add(&log, t0 + i, 1, i, 0, 0);
            double ns = (double)(hw_mono_ns() - t0) / (double)cap - empty_loop_ns(cap);
            hb_probe_sink = log.count;
            hb_evlog_free(&log);
            put(&out[n++], "evlog_append", ns, NULL);
        }
    }
    return n;
}
