/* Preallocated in-memory event log of one benchmark process. Events are stored only while the
 * logging window is open; a full buffer counts what it drops (never silent). The log is written
 * as a hostwire TSV file after the quiet time, so disk I/O never disturbs the window. */
#ifndef HB_EVLOG_H
#define HB_EVLOG_H
#include <stdint.h>
#include <stdio.h>

struct hb_event {
    int64_t t_ns;
    int64_t a;  /* bytes, or a round number */
    int64_t b;  /* raw stamp, prime count, ... */
    int64_t c;
    int32_t kind;
};

struct hb_evlog {
    struct hb_event *events;
    int64_t capacity;
    int64_t count;
    int64_t overflow;
    int64_t window_start_ns;
    int64_t window_end_ns;
};

int hb_evlog_init(struct hb_evlog *log, int64_t capacity, int64_t window_start_ns, int64_t window_end_ns);
void hb_evlog_free(struct hb_evlog *log);

static inline int hb_evlog_in_window(const struct hb_evlog *log, int64_t t_ns)
{
    return t_ns >= log->window_start_ns && t_ns < log->window_end_ns;
}

/* Stores the event whatever its time (the end of a call that started in the window); returns 1,
 * stored or counted as overflow. */
static inline int hb_evlog_add_always(struct hb_evlog *log, int64_t t_ns, int32_t kind, int64_t a, int64_t b,
                                      int64_t c)
{
    if (log->count >= log->capacity) {
        log->overflow++;
        return 1;
    }
    struct hb_event *ev = &log->events[log->count++];
    ev->t_ns = t_ns;
    ev->kind = kind;
    ev->a = a;
    ev->b = b;
    ev->c = c;
    return 1;
}

/* Stores the event when t_ns lies in the window; returns 1 if stored or counted as overflow. */
static inline int hb_evlog_add(struct hb_evlog *log, int64_t t_ns, int32_t kind, int64_t a, int64_t b, int64_t c)
{
    if (!hb_evlog_in_window(log, t_ns))
        return 0;
    return hb_evlog_add_always(log, t_ns, kind, a, b, c);
}

/* Opens DIR/NAME for writing and prints the common header lines (format, kind, clock, window,
 * overflow). The caller adds its own "# key: value" lines, the column line and the records. */
FILE *hb_evlog_open_tsv(const char *dir, const char *name, const char *kind, const struct hb_evlog *log);
/* Ends the file with its trailer "# end: records=N[ bytes=B]" (bytes: the sum of the `bytes`
 * column, -1 for a log without one) when everything before it was written, then closes it; a
 * file whose writing failed gets no trailer, so no reader takes it for whole. Returns 0 or -1
 * after naming the file on stderr. */
int hb_evlog_close_tsv(FILE *f, const char *dir, const char *name, int64_t records, int64_t bytes);
/* The sum of the events' `a` values (the bytes column of the sender and receiver logs). */
int64_t hb_evlog_sum_a(const struct hb_evlog *log);
/* Writes the trailer line (see hb_evlog_close_tsv) unless f already had an error. */
void hb_tsv_put_trailer(FILE *f, int64_t records, int64_t bytes);
#endif
