/* syscalls.tsv, the application timeline (docs/formats.md, "System calls"): the one writer of
 * its header, its lines and its last line, shared by every backend that produces it (hw-iotrace's
 * ptrace and preload backends, hw-schedtrace's tracefs and proc backends), so that the files
 * cannot drift apart. Everything is formatted into the caller's buffer, without stdio: a line
 * costs a few dozen nanoseconds, which matters to a converter writing millions of them. */
#ifndef HWSYSCALLS_H
#define HWSYSCALLS_H
#include <stddef.h>
#include <stdint.h>

/* fd_desc is cut at this many bytes (before escaping); a line fits in HW_SYS_LINE_MAX bytes. */
#define HW_SYS_DESC_MAX 256
#define HW_SYS_LINE_MAX (HW_SYS_DESC_MAX * 2 + 256)

/* The column line (no newline). */
extern const char hw_sys_columns[];

/* The `#` metadata lines (format, kind, backend, clock, tool, calls), then extra (NULL, or more
 * "# key: value\n" lines), then the column line. calls is the comma-separated list of the traced
 * calls. Returns the number of bytes written into buf, or -1 when buf is too small. */
int hw_sys_header(char *buf, size_t len, const char *backend, const char *tool, const char *calls,
                  const char *extra);

/* One call. */
struct hw_sys_line {
    int64_t t_enter_ns, t_exit_ns;
    int64_t pid, tid;
    const char *call;           /* system call name */
    int64_t fd, req_bytes;      /* -1: none */
    int64_t result;
    int has_result;             /* 0: the result column is empty (unfinished, or no result known) */
    int unfinished;
    const char *fd_kind;        /* "tcp", "pipe", ..., "unknown" */
    const char *fd_desc;        /* NULL or text; escaped here (tab, newline, CR, backslash) */
};

/* Formats one line into buf (at least HW_SYS_LINE_MAX bytes); returns its length. */
size_t hw_sys_format(char *buf, const struct hw_sys_line *l);

/* The last line, into buf (at least HW_SYS_LINE_MAX bytes); returns its length. A complete file
 * ends with "# end: records=N"; one whose writer failed with "# damaged: REASON" (escaped as
 * fd_desc, at most HW_SYS_DESC_MAX bytes of it), so that no reader takes it for whole. */
size_t hw_sys_trailer(char *buf, uint64_t records);
size_t hw_sys_damaged(char *buf, const char *reason);
#endif
