/* Shared between the files of the hw-schedtrace library; not part of its interface. */
#ifndef HW_ST_INTERNAL_H
#define HW_ST_INTERNAL_H
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

#include "st.h"

void st_raw_path(const struct st_buffer *buf, int cpu, char *out, size_t len);
unsigned st_buffer_page_size(const struct st_buffer *buf);
const char *st_buffer_cmdlines(const struct st_buffer *buf);
const char *st_buffer_tgids(const struct st_buffer *buf);

/* The I/O system calls recorded with --syscalls: hw-iotrace's default set, by tracepoint name
 * (sys_enter_<name>, sys_exit_<name>; sendfile's is sendfile64). */
extern const char *const st_io_calls[];
extern const size_t st_n_io_calls;
/* --waits: the calls a program blocks in between its I/O (futex, epoll_wait, clock_nanosleep, ...). */
extern const char *const st_wait_calls[];
extern const size_t st_n_wait_calls;

/* The calls that make, copy and end descriptors (st_lifetimes.c): their kind by name
 * (ST_LT_NONE for the others), the names of the enter fields each reads (which 0: the fd when the
 * tracepoint names it otherwise, 1 and 2: the arguments a and b), and their record once the
 * result is known: fd, req_bytes, fd_kind and the record's call name set where they differ from
 * a plain call's (fcntl F_SETFD is written as fcntl_setfd); -1 when the call is not recorded
 * (fcntl other than F_DUPFD*, F_SETFD; ioctl other than FIOCLEX, FIONCLEX; close_range marking
 * close-on-exec). */
enum { ST_LT_NONE, ST_LT_SOCKET, ST_LT_ACCEPT, ST_LT_ACCEPT4, ST_LT_DUP, ST_LT_DUP2, ST_LT_DUP3, ST_LT_FCNTL,
       ST_LT_CLOSE_RANGE, ST_LT_IOCTL, ST_LT_N };
int st_lifetime_kind(const char *call);
const char *st_lifetime_field(int kind, int which);
int st_lifetime_record(int kind, long long a, long long b, long long ret, long long *fd, long long *req,
                       const char **fd_kind, const char **call);

/* The tasks set_event_pid lists for these pids: each one's threads and its descendants' (read
 * from /proc), as "tid tid ... " (malloc'd; NULL when out of memory). */
char *st_pid_tree(const int *pids, int npids);

/* The head of syscalls.tsv (common/hwsyscalls.h) for backend "tracefs": the calls are
 * those of st_io_calls, then `waits` (comma-separated: the wait calls recorded; "" for none). */
void st_syscalls_header(FILE *out, const char *backend, const char *waits);

/* TSV text escaping: tab, newline, carriage return and backslash become \t \n \r \\. */
void st_tsv_escape(char *out, size_t len, const char *in, size_t inlen);
/* The last line of a TSV: "# end: records=N" when ok, else "# damaged: REASON" (escaped). */
void st_tsv_close(FILE *out, int ok, long long records, const char *reason);

/* Waits until *stop is set, the deadline (CLOCK_MONOTONIC ns; -1: none) passes or the command
 * *child (> 0: running) ends; then *child is its pid negated and *child_status its exit status
 * (128 + signal when killed). */
void st_wait(volatile sig_atomic_t *stop, long long deadline, pid_t *child, int *child_status);

/* sched.json's "clock_check" member (and its trailing ",\n") from the markers' stamps. */
void st_json_clock(FILE *f, const struct st_convert_stats *cv);
#endif
