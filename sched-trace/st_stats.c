/* Per-CPU ring-buffer counters: parse the text of tracefs per_cpu/cpuN/stats. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "st.h"

static long long *slot(struct st_cpustat *st, const char *key, size_t len)
{
    static const struct { const char *name; size_t off; } keys[] = {
        { "entries", offsetof(struct st_cpustat, entries) },
        { "overrun", offsetof(struct st_cpustat, overrun) },
        { "commit overrun", offsetof(struct st_cpustat, commit_overrun) },
        { "bytes", offsetof(struct st_cpustat, bytes) },
        { "dropped events", offsetof(struct st_cpustat, dropped) },
        { "read events", offsetof(struct st_cpustat, read) },
    };
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        if (strlen(keys[i].name) == len && strncmp(keys[i].name, key, len) == 0)
            return (long long *)((char *)st + keys[i].off);
    return NULL;
}

/* Fills every counter found in text; the others stay ST_UNKNOWN. Returns how many were found. */
int st_stats_parse(const char *text, struct st_cpustat *out)
{
    int found = 0;
    out->entries = out->overrun = out->commit_overrun = ST_UNKNOWN;
    out->bytes = out->dropped = out->read = ST_UNKNOWN;
    if (!text)
        return 0;
    for (const char *line = text; *line; ) {
        const char *end = strchr(line, '\n');
        size_t n = end ? (size_t)(end - line) : strlen(line);
        const char *colon = memchr(line, ':', n);
        if (colon) {
            long long *dst = slot(out, line, (size_t)(colon - line));
            char *stop = NULL;
            long long v = strtoll(colon + 1, &stop, 10);
            if (dst && stop != colon + 1 && v >= 0) {
                *dst = v;
                found++;
            }
        }
        line += n + (end ? 1 : 0);
    }
    return found;
}
