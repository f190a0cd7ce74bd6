/* Preallocated in-memory event log of one benchmark process. Events are stored only while the
 * logging window is open; a full buffer counts what it drops (never silent). The log is written
 * as a hostwire TSV file after the quiet time, so disk I/O never disturbs the window. */
#ifndef HW_EVLOG_H
#define HW_EVLOG_H
#include <stdint.h>
#include <stdio.h>

struct hw_event {
    int64_t t_ns;
    int64_t a;  /* bytes, or a round number */
    int64_t b;  /* raw stamp, prime count, ... */
    int64_t c;
    int32_t kind;
};

struct hw_evlog {
    struct hw_event *events;
    int64_t capacity;
    int64_t count;
    int64_t overflow;
    int64_t window_start_ns;
    int64_t window_end_ns;
};

int hw_evlog_init(struct hw_evlog *log, int64_t capacity, int64_t window_start_ns, int64_t window_end_ns);
void hw_evlog_free(struct hw_evlog *log);

static inline int hw_evlog_in_window(const struct hw_evlog *log, int64_t t_ns)
{
    return t_ns >= log->window_start_ns && t_ns < log->window_end_ns;
}

/* Stores the event whatever its time (the end of a call that started in the window); returns 1,
 * stored or counted as overflow. */
static inline int hw_evlog_add_always(struct hw_evlog *log, int64_t t_ns, int32_t kind, int64_t a, int64_t b,
                                      int64_t c)
{
    if (log->count >= log->capacity) {
        log->overflow++;
        return 1;
    }
    struct hw_event *ev = &log->events[log->count++];
    ev->t_ns = t_ns;
    ev->kind = kind;
    ev->a = a;
    ev->b = b;
    ev->c = c;
    return 1;
}

/* Stores the event when t_ns lies in the window; returns 1 if stored or counted as overflow. */
static inline int hw_evlog_add(struct hw_evlog *log, int64_t t_ns, int32_t kind, int64_t a, int64_t b, int64_t c)
{
    if (!hw_evlog_in_window(log, t_ns))
        return 0;
    return hw_evlog_add_always(log, t_ns, kind, a, b, c);
}

/* Opens DIR/NAME for writing and prints the common header lines (format, kind, clock, window,
 * overflow). The caller adds its own "# key: value" lines, the column line and the records. */
FILE *hw_evlog_open_tsv(const char *dir, const char *name, const char *kind, const struct hw_evlog *log);
/* Ends the file with its trailer "# end: records=N[ bytes=B]" (bytes: the sum of the `bytes`
 * column, -1 for a log without one) when everything before it was written, then closes it; a
 * file whose writing failed gets no trailer, so no reader takes it for whole. Returns 0 or -1
 * after naming the file on stderr. */
int hw_evlog_close_tsv(FILE *f, const char *dir, const char *name, int64_t records, int64_t bytes);
/* The sum of the events' `a` values (the bytes column of the sender and receiver logs). */
int64_t hw_evlog_sum_a(const struct hw_evlog *log);
/* Writes the trailer line (see hw_evlog_close_tsv) unless f already had an error. */
void hw_tsv_put_trailer(FILE *f, int64_t records, int64_t bytes);
#endif
