#include "hwargs.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int reject(const char *opt, const char *what, const char *text, struct hw_err *err)
{
    hw_usage_err(err, "failed to parse %s: expected %s, got '%s'", opt, what, text);
    return -1;
}

int hw_parse_i64(const char *opt, const char *text, int64_t lo, int64_t hi, int64_t *out, struct hw_err *err)
{
    char what[96];
    char *end = NULL;
    snprintf(what, sizeof(what), "an integer from %lld to %lld", (long long)lo, (long long)hi);
    errno = 0;
    long long value = strtoll(text, &end, 10);
    if (errno || end == text || *end != '\0' || value < lo || value > hi)
        return reject(opt, what, text, err);
    *out = value;
    return 0;
}

int hw_parse_int(const char *opt, const char *text, int lo, int hi, int *out, struct hw_err *err)
{
    int64_t v;
    if (hw_parse_i64(opt, text, lo, hi, &v, err) < 0)
        return -1;
    *out = (int)v;
    return 0;
}

int hw_parse_size(const char *opt, const char *text, int64_t lo, int64_t hi, int64_t *out, struct hw_err *err)
{
    char what[128];
    char *end = NULL;
    snprintf(what, sizeof(what), "a size from %lld to %lld bytes (suffix k, M, G allowed)", (long long)lo,
             (long long)hi);
    errno = 0;
    long long value = strtoll(text, &end, 10);
    if (errno || end == text || value < 0)
        return reject(opt, what, text, err);
    int64_t scale = 1;
    if (*end) {
        switch (*end) {
        case 'k': case 'K': scale = 1024; break;
        case 'm': case 'M': scale = 1024 * 1024; break;
        case 'g': case 'G': scale = 1024LL * 1024 * 1024; break;
        default: return reject(opt, what, text, err);
        }
        if (end[1] != '\0' && strcmp(end + 1, "B") != 0 && strcmp(end + 1, "iB") != 0)
            return reject(opt, what, text, err);
    }
    if (value > hi / scale || value * scale < lo || value * scale > hi)
        return reject(opt, what, text, err);
    *out = value * scale;
    return 0;
}

int hw_parse_duration_ns(const char *opt, const char *text, int positive, int64_t *out, struct hw_err *err)
{
    const char *what = positive ? "a duration above 0 such as 2, 2.5s, 500ms, 1m (at most one day)"
                                : "a duration such as 0, 2, 2.5s, 500ms, 1m (at most one day)";
    static const struct { const char *unit; double ns; } units[] = {
        {"", 1e9}, {"s", 1e9}, {"ms", 1e6}, {"us", 1e3}, {"ns", 1}, {"m", 60e9},
    };
    char *end = NULL;
    errno = 0;
    double value = strtod(text, &end);
    /* strtod also takes "inf", "nan" and hex floats: only plain decimal numbers are durations */
    const char *odd = strpbrk(text, "xXnNiI");
    if (errno || end == text || !isfinite(value) || value < 0 || (odd && odd < end))
        return reject(opt, what, text, err);
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcmp(end, units[i].unit) != 0)
            continue;
        double ns = value * units[i].ns;
        if (ns > 86400e9 || (positive && llround(ns) <= 0))
            return reject(opt, what, text, err);
        *out = (int64_t)llround(ns);
        return 0;
    }
    return reject(opt, what, text, err);
}

int hw_parse_pid(const char *opt, const char *text, int *out, struct hw_err *err)
{
    int64_t v;
    char *end = NULL;
    errno = 0;
    v = strtoll(text, &end, 10);
    if (errno || end == text || *end != '\0' || v < 1 || v > INT32_MAX)
        return reject(opt, "a process id", text, err);
    *out = (int)v;
    return 0;
}

int hw_parse_ready_fd(const char *opt, const char *text, int *out, struct hw_err *err)
{
    int fd;
    if (hw_parse_int(opt, text, 0, 1 << 20, &fd, err) < 0)
        return -1;
    int flags = fcntl(fd, F_GETFD);
    if (flags < 0) {
        hw_usage_err(err, "failed to parse %s: descriptor %d is not open", opt, fd);
        return -1;
    }
    fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
    *out = fd;
    return 0;
}

void hw_getopt_error(int c, char *const argv[], struct hw_err *err)
{
    const char *arg = optind > 0 ? argv[optind - 1] : "";
    char name[128];
    if (arg && strncmp(arg, "--", 2) == 0)
        snprintf(name, sizeof(name), "%.*s", (int)strcspn(arg, "="), arg);
    else
        snprintf(name, sizeof(name), "-%c", optopt ? optopt : '?');
    if (c == ':')
        hw_usage_err(err, "option '%s' needs a value", name);
    else
        hw_usage_err(err, "unknown option '%s'", name);
}

int hw_getopt(int argc, char **argv, const char *shorts, const struct option *longs, const char *help,
              hw_take_fn take, void *values, struct hw_err *err)
{
    int c, at;
    opterr = 0;
    optind = 0;   /* a fresh scan, also for a second parse (a subcommand's) */
    while (at = -1, (c = getopt_long(argc, argv, shorts, longs, &at)) != -1) {
        char name[80];
        if (c == 'h') {
            fputs(help, stdout);
            return 1;
        }
        if (c == '?' || c == ':') {
            hw_getopt_error(c, argv, err);
            return -1;
        }
        if (at >= 0)
            snprintf(name, sizeof(name), "--%s", longs[at].name);
        else
            snprintf(name, sizeof(name), "-%c", c);
        if (take(values, c, name, optarg, err) < 0)
            return -1;
    }
    return 0;
}
