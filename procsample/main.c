/* hw-procsample: the /proc sampler of real hosts (thin loop over psample.c). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hwargs.h"
#include "hwio.h"
#include "psample.h"

#define TOOL "hw-procsample"

static const char usage[] =
    "usage: hw-procsample [-p PERIOD] -r NAME:PATH:EVERY:SHARE...\n"
    "Every PERIOD, prints each resource due in that round (round 0, EVERY, 2*EVERY, ...) as\n"
    "'@ <uptime> NAME' followed by PATH as the kernel wrote it, unless SHARE is above 0 and no\n"
    "number in it differs by SHARE or more from the last sample printed (the differential\n"
    "filter; words are not compared). Whenever the filter dropped a sample, prints\n"
    "'% <uptime> dropped NAME=COUNT ...' (counts since the start). <uptime> is /proc/uptime's\n"
    "first field. Rounds start on a fixed grid of PERIOD (a late round is not made up).\n"
    "Runs until killed; each round is one write to standard output.\n"
    "\n"
    "OPTIONS\n"
    "  -p, --period T      the period: 100ms, 2s (a bare number is seconds; default 100ms)\n"
    "  -r, --resource R    NAME:PATH:EVERY:SHARE, e.g. cpu:/proc/stat:1:0.05 (repeatable)\n"
    "  -n, --rounds N      stop after N rounds (default: never)\n"
    "  -h, --help          this help\n"
    "\n"
    "EXIT STATUS: 0 after --rounds, 1 runtime failure, 2 usage error.\n"
    "\n"
    "EXAMPLES\n"
    "  hw-procsample -p 2s -r cpu:/proc/stat:1:0.05 -r disk:/proc/diskstats:5:0\n"
    "  hw-procsample -p 100ms -n 10 -r load:/proc/loadavg:1:0\n";

struct values {
    int64_t period_ns;
    int64_t rounds;
    struct ps_resource resources[PS_MAX_RESOURCES];
    size_t count;
};

static int take(void *values, int c, const char *name, const char *arg, struct hw_err *err)
{
    struct values *v = values;
    switch (c) {
    case 'p': return hw_parse_duration_ns(name, arg, 1, &v->period_ns, err);
    case 'n': return hw_parse_i64(name, arg, 1, INT64_MAX, &v->rounds, err);
    case 'r':
        if (v->count == PS_MAX_RESOURCES) {
            hw_usage_err(err, "failed to parse %s: at most %d resources", name, PS_MAX_RESOURCES);
            return -1;
        }
        return ps_parse_resource(arg, &v->resources[v->count++], err);
    }
    return 0;
}

static int64_t ts_ns(const struct timespec *t)
{
    return (int64_t)t->tv_sec * 1000000000 + t->tv_nsec;
}

static int sleep_until(int64_t deadline_ns)
{
    struct timespec at = {.tv_sec = deadline_ns / 1000000000, .tv_nsec = deadline_ns % 1000000000};
    int rc;
    while ((rc = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL)) == EINTR) {
    }
    return rc == 0 ? 0 : -1;
}

/* One round into out: the uptime, each resource due, the drop counts when they grew. */
static int round_text(struct values *v, int64_t round, struct ps_text *uptime, struct ps_text *out,
                      struct hw_err *err)
{
    char head[128];
    int grew = 0;
    out->len = 0;
    if (ps_read_file("/proc/uptime", uptime, err) < 0)
        return -1;
    size_t up_len = 0;
    while (up_len < uptime->len && uptime->data[up_len] != ' ' && uptime->data[up_len] != '\n')
        up_len++;
    for (size_t i = 0; i < v->count; i++) {
        struct ps_resource *r = &v->resources[i];
        if (round % r->every)
            continue;
        if (ps_read_file(r->path, &r->now, err) < 0)
            return -1;
        if (round > 0 && r->share > 0 && !ps_differs(r->now.data, r->now.len, r->kept.data, r->kept.len, r->share)) {
            r->dropped++;
            grew = 1;
            continue;
        }
        int n = snprintf(head, sizeof head, "@ %.*s %s\n", (int)up_len, uptime->data, r->name);
        struct ps_text swap = r->kept;
        r->kept = r->now;
        r->now = swap;
        if (ps_append(out, head, (size_t)n) < 0 || ps_append(out, r->kept.data, r->kept.len) < 0)
            goto oom;
    }
    if (grew) {
        int n = snprintf(head, sizeof head, "%% %.*s dropped", (int)up_len, uptime->data);
        if (ps_append(out, head, (size_t)n) < 0)
            goto oom;
        for (size_t i = 0; i < v->count; i++) {
            n = snprintf(head, sizeof head, " %s=%" PRId64, v->resources[i].name, v->resources[i].dropped);
            if (ps_append(out, head, (size_t)n) < 0)
                goto oom;
        }
        if (ps_append(out, "\n", 1) < 0)
            goto oom;
    }
    return 0;
oom:
    hw_seterr(err, "failed to keep a sample: out of memory");
    return -1;
}

static int sample(struct values *v, struct hw_err *err)
{
    struct ps_text uptime = {0}, out = {0};
    int rc = -1;
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    int64_t t0 = ts_ns(&start);
    for (int64_t round = 0; v->rounds == 0 || round < v->rounds; round++) {
        if (round_text(v, round, &uptime, &out, err) < 0)
            goto done;
        if (out.len && hw_write_all(STDOUT_FILENO, out.data, out.len) < 0) {
            hw_seterr(err, "failed to write the samples: %s", strerror(errno));
            goto done;
        }
        if (v->rounds && round + 1 == v->rounds)
            break;
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        int64_t next = t0 + (round + 1) * v->period_ns;
        if (next <= ts_ns(&now)) {  /* late (a stalled host): the grid moves on, no burst of rounds */
            int64_t skipped = (ts_ns(&now) - next) / v->period_ns + 1;
            round += skipped;
            next += skipped * v->period_ns;
        }
        if (sleep_until(next) < 0) {
            hw_seterr(err, "failed to wait for the next round: %s", strerror(errno));
            goto done;
        }
    }
    rc = 0;
done:
    for (size_t i = 0; i < v->count; i++) {
        ps_text_free(&v->resources[i].now);
        ps_text_free(&v->resources[i].kept);
    }
    ps_text_free(&uptime);
    ps_text_free(&out);
    return rc;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"period", required_argument, NULL, 'p'}, {"resource", required_argument, NULL, 'r'},
        {"rounds", required_argument, NULL, 'n'}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0},
    };
    static struct values v = {.period_ns = 100000000};
    struct hw_err err = {0};
    int rc = hw_getopt(argc, argv, ":p:r:n:h", longopts, usage, take, &v, &err);
    if (rc == 1)
        return HW_EXIT_OK;
    if (rc < 0)
        return hw_err_exit(TOOL, NULL, &err);
    if (optind < argc)
        return hw_usage_exit(TOOL, NULL, "unexpected argument '%s'", argv[optind]);
    if (v.count == 0)
        return hw_usage_exit(TOOL, NULL, "no --resource given");
    if (sample(&v, &err) < 0)
        return hw_err_exit(TOOL, NULL, &err);
    return HW_EXIT_OK;
}
