#include "hwargs.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int reject(const char *tool, const char *opt, const char *what, const char *text)
{
    fprintf(stderr, "%s: %s: expected %s, got '%s'\n", tool, opt, what, text);
    return -1;
}

int hw_parse_i64(const char *tool, const char *opt, const char *text, int64_t lo, int64_t hi, int64_t *out)
{
    char what[96];
    char *end = NULL;
    snprintf(what, sizeof(what), "an integer from %lld to %lld", (long long)lo, (long long)hi);
    errno = 0;
    long long value = strtoll(text, &end, 10);
    if (errno || end == text || *end != '\0' || value < lo || value > hi)
        return reject(tool, opt, what, text);
    *out = value;
    return 0;
}

int hw_parse_size(const char *tool, const char *opt, const char *text, int64_t lo, int64_t hi, int64_t *out)
{
    char what[128];
    char *end = NULL;
    snprintf(what, sizeof(what), "a size from %lld to %lld bytes (suffix k, M, G allowed)",
             (long long)lo, (long long)hi);
    errno = 0;
    long long value = strtoll(text, &end, 10);
    if (errno || end == text || value < 0)
        return reject(tool, opt, what, text);
    int64_t scale = 1;
    if (*end) {
        switch (*end) {
        case 'k': case 'K': scale = 1024; break;
        case 'm': case 'M': scale = 1024 * 1024; break;
        case 'g': case 'G': scale = 1024LL * 1024 * 1024; break;
        default: return reject(tool, opt, what, text);
        }
        if (end[1] != '\0' && strcmp(end + 1, "B") != 0 && strcmp(end + 1, "iB") != 0)
            return reject(tool, opt, what, text);
    }
    if (value > hi / scale || value * scale < lo || value * scale > hi)
        return reject(tool, opt, what, text);
    *out = value * scale;
    return 0;
}

int hw_parse_duration_ns(const char *tool, const char *opt, const char *text, int64_t *out)
{
    const char *what = "a duration such as 2, 2.5s, 500ms, 100us (0 to 86400 s)";
    char *end = NULL;
    errno = 0;
    double value = strtod(text, &end);
    if (errno || end == text || !isfinite(value) || value < 0)
        return reject(tool, opt, what, text);
    double scale = 1e9;
    if (*end) {
        if (strcmp(end, "s") == 0) scale = 1e9;
        else if (strcmp(end, "ms") == 0) scale = 1e6;
        else if (strcmp(end, "us") == 0) scale = 1e3;
        else if (strcmp(end, "ns") == 0) scale = 1;
        else return reject(tool, opt, what, text);
    }
    double ns = value * scale;
    if (ns > 86400e9)
        return reject(tool, opt, what, text);
    *out = (int64_t)llround(ns);
    return 0;
}
