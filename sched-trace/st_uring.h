/* io_uring's submitted send and write operations, from the kernel's io_uring trace events
 * (io_uring_submit_req, io_uring_file_get, io_uring_complete) in the system-call buffer: each
 * operation on a file becomes one syscalls.tsv record "uring_<op>" from its submission to its
 * completion, whose result is the completion's. Not part of hw-schedtrace's interface. */
#ifndef HW_ST_URING_H
#define HW_ST_URING_H
#include <event-parse.h>
#include <stdint.h>

/* The io_uring events recorded beside the system calls (in st_record's system-call buffer). */
extern const char *const st_uring_events[];
extern const size_t st_n_uring_events;

/* One finished (or, at the end, unfinished) operation. */
struct st_uring_op {
    long long t_submit, t_done;
    int tid;                /* the task that submitted it (an SQPOLL thread's submissions are not seen) */
    long long fd;           /* -1: a registered (fixed) file, whose fd the kernel does not trace */
    long long result;       /* the completion's res: bytes, or -errno */
    const char *call;       /* "uring_send", "uring_writev", ... */
};

struct st_uring;

struct st_uring *st_uring_new(void);
void st_uring_free(struct st_uring *u);
/* Whether ev is one of st_uring_events; its fields are looked up once here. */
int st_uring_bind(struct st_uring *u, struct tep_event *ev);
/* Reads one record of a bound event. Returns 1 when an operation finished (filled into op), 0
 * when not, -1 when out of memory. */
int st_uring_record(struct st_uring *u, struct tep_event *ev, struct tep_record *rec, struct st_uring_op *op);
/* The operations still pending (submitted, no completion seen) one by one: 1 while one is
 * filled into op (its t_done 0), then 0. */
int st_uring_next_pending(struct st_uring *u, struct st_uring_op *op);
#endif
