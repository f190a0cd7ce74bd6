#include "evlog.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

int hb_evlog_init(struct hb_evlog *log, int64_t capacity, int64_t window_start_ns, int64_t window_end_ns)
{
    memset(log, 0, sizeof(*log));
    log->capacity = capacity;
    log->window_start_ns = window_start_ns;
    log->window_end_ns = window_end_ns;
    if (capacity == 0)
        return 0;
    log->events = calloc((size_t)capacity, sizeof(*log->events));
    if (!log->events)
        return -ENOMEM;
    /* Touch and lock the pages now so the window sees no page faults for the log itself. */
    memset(log->events, 0, (size_t)capacity * sizeof(*log->events));
    (void)mlock(log->events, (size_t)capacity * sizeof(*log->events));
    return 0;
}

void hb_evlog_free(struct hb_evlog *log)
{
    free(log->events);
    log->events = NULL;
}

FILE *hb_evlog_open_tsv(const char *dir, const char *name, const char *kind, const struct hb_evlog *log)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f)
        return NULL;
    fprintf(f, "# format: hostwire-tsv 2\n");
    fprintf(f, "# kind: %s\n", kind);
    fprintf(f, "# clock: CLOCK_MONOTONIC\n");
    fprintf(f, "# window_start_ns: %lld\n", (long long)log->window_start_ns);
    fprintf(f, "# window_end_ns: %lld\n", (long long)log->window_end_ns);
    fprintf(f, "# log_capacity: %lld\n", (long long)log->capacity);
    fprintf(f, "# overflow: %lld\n", (long long)log->overflow);
    return f;
}

int64_t hb_evlog_sum_a(const struct hb_evlog *log)
{
    int64_t sum = 0;
    for (int64_t i = 0; i < log->count; i++)
        sum += log->events[i].a;
    return sum;
}

void hb_tsv_put_trailer(FILE *f, int64_t records, int64_t bytes)
{
    if (ferror(f))
        return;
    if (bytes >= 0)
        fprintf(f, "# end: records=%lld bytes=%lld\n", (long long)records, (long long)bytes);
    else
        fprintf(f, "# end: records=%lld\n", (long long)records);
}

int hb_evlog_close_tsv(FILE *f, const char *dir, const char *name, int64_t records, int64_t bytes)
{
    hb_tsv_put_trailer(f, records, bytes);
    int failed = ferror(f);
    if (fclose(f) != 0 || failed) {
        fprintf(stderr, "hw-bench: failed to write %s/%s: %s\n", dir, name, strerror(errno ? errno : EIO));
        return -1;
    }
    return 0;
}
