/* hw-iotrace library part: the table of traced calls, the record of one call, fd descriptions,
 * the syscalls.tsv writer, and the two backends (ptrace with a seccomp filter, LD_PRELOAD).
 * Functions return 0 or a negative errno and never exit. */
#ifndef IOTRACE_H
#define IOTRACE_H
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "hwerr.h"
#include "hwsyscalls.h"

#define IOT_VERSION "1.0"

/* ---- the calls (calls.c) ---- */
enum iot_bytes_kind {
    IOT_BYTES_NONE,  /* no byte count: req_bytes is -1 (connect, accept, accept4, close) */
    IOT_BYTES_ARG,   /* a length argument */
    IOT_BYTES_IOV,   /* sum of an iovec array: iov in arg a, count in arg b */
    IOT_BYTES_MSG,   /* sum of a msghdr's iovec: msghdr in arg a */
    IOT_BYTES_MMSG,  /* sum over an mmsghdr vector: vector in arg a, length in arg b */
    IOT_BYTES_FLAGS, /* a descriptor's call (lifetimes.c): req_bytes says close-on-exec, or a range's end */
};

enum iot_call_id {
    IOT_CALL_READ, IOT_CALL_WRITE, IOT_CALL_READV, IOT_CALL_WRITEV, IOT_CALL_PREAD64,
    IOT_CALL_PWRITE64, IOT_CALL_SENDTO, IOT_CALL_SENDMSG, IOT_CALL_SENDMMSG, IOT_CALL_RECVFROM,
    IOT_CALL_RECVMSG, IOT_CALL_SENDFILE, IOT_CALL_SPLICE, IOT_CALL_CONNECT, IOT_CALL_ACCEPT,
    IOT_CALL_ACCEPT4, IOT_CALL_CLOSE,
    /* what makes, copies and ends descriptors (lifetimes.c) */
    IOT_CALL_SOCKET, IOT_CALL_DUP, IOT_CALL_DUP2, IOT_CALL_DUP3, IOT_CALL_FCNTL, IOT_CALL_CLOSE_RANGE,
    IOT_CALL_PWRITEV, IOT_CALL_PWRITEV2, IOT_CALL_VMSPLICE, IOT_CALL_TEE,
    /* close-on-exec set or cleared on a descriptor already made: fcntl F_SETFD (a record of its
     * own name, its result 0 being no descriptor) and ioctl FIOCLEX / FIONCLEX */
    IOT_CALL_FCNTL_SETFD, IOT_CALL_IOCTL,
    /* recvmmsg, and the descriptors recvmsg and recvmmsg received (SCM_RIGHTS): one record each,
     * no system call of its own (lifetimes.c) */
    IOT_CALL_RECVMMSG, IOT_CALL_SCM_RIGHTS,
    IOT_NCALLS  /* at most 31: the selection is a 32-bit mask */
};

struct iot_call {
    const char *name;
    int nr;                  /* system call number on this architecture */
    int fd_arg;              /* which argument is the fd the record names */
    enum iot_bytes_kind bytes;
    int arg_a, arg_b;        /* arguments of the byte count (see iot_bytes_kind) */
};

extern const struct iot_call iot_calls[IOT_NCALLS];

/* Parses "read,write,..." into a selection mask (bit i = iot_calls[i]). An empty or NULL list
 * selects the default set (all calls). Returns 0, or -EINVAL with the unknown name copied into
 * bad (bad_len bytes). */
int iot_calls_parse(const char *list, uint32_t *mask, char *bad, size_t bad_len);
/* Index of the call with system call number nr, or -1. */
int iot_call_by_nr(long nr);
/* "read,write,..." for a mask, written into buf; returns buf. */
char *iot_calls_format(uint32_t mask, char *buf, size_t len);

/* ---- the calls that make, copy and end descriptors (lifetimes.c) ---- */
/* Their record's fd and req_bytes from the call's arguments (docs/formats.md, "System calls"):
 * dup, dup2, dup3 and fcntl name the old fd; req_bytes is the close-on-exec flag (1 or 0) of the
 * descriptor made or marked (fcntl F_SETFD, ioctl FIOCLEX / FIONCLEX), close_range's last fd.
 * Returns the call the record is written as (idx, or IOT_CALL_FCNTL_SETFD for an fcntl F_SETFD),
 * or -1 when the call is not recorded: an fcntl other than F_DUPFD, F_DUPFD_CLOEXEC and F_SETFD,
 * an ioctl other than FIOCLEX and FIONCLEX, a close_range that only marks close-on-exec. */
int iot_lifetime_entry(int idx, const uint64_t *args, int32_t *fd, int64_t *req);
/* Whether a stop of call idx is wanted by the selection: fcntl for either of its records,
 * recvmsg and recvmmsg also for the descriptors they receive. */
int iot_call_wanted(int idx, uint32_t mask);
/* The descriptors an SCM_RIGHTS control message carries, from a copy of the msghdr's control
 * buffer (control, len bytes: msg_controllen as the call left it): up to max fds into fds;
 * returns how many. */
int iot_scm_rights(const void *control, size_t len, int *fds, int max);
/* The descriptor the call made, once it returned rval (socket, accept, accept4, dup, dup2, dup3,
 * fcntl), else -1; a socket's record names it as its fd. */
int iot_lifetime_made(int idx, int64_t rval);

/* ---- one record (record.c) ---- */
enum iot_fd_kind {
    IOT_FD_UNKNOWN, IOT_FD_TCP, IOT_FD_UDP, IOT_FD_UNIX, IOT_FD_FILE, IOT_FD_PIPE, IOT_FD_OTHER,
};

struct iot_rec {
    int64_t t_enter_ns, t_exit_ns;
    int64_t req_bytes;           /* -1: the call has no byte count */
    int64_t result;              /* bytes, new fd or 0; -errno on failure */
    int32_t pid, tid;
    int32_t fd;
    uint32_t desc_id;            /* index into the description table (0: unknown) */
    uint8_t call;                /* enum iot_call_id */
    uint8_t unfinished;
};

extern const char *const iot_fd_kind_names[];

/* Writes the `#` metadata lines and the column line of syscalls.tsv (common/hwsyscalls.h): backend
 * "ptrace" | "preload"; extra is NULL or more "# key: value\n" lines. Returns the number of bytes
 * written into buf, or -1 when buf is too small. */
int iot_tsv_header(char *buf, size_t len, const char *backend, uint32_t mask, const char *extra);

/* Formats one record as a TSV line into buf (at least IOT_LINE_MAX bytes); returns its length.
 * kind and desc are the fd's description (desc is escaped: tab, newline, CR, backslash). The last
 * line of the file is common/'s hw_sys_trailer or hw_sys_damaged. */
#define IOT_DESC_MAX HW_SYS_DESC_MAX
#define IOT_LINE_MAX HW_SYS_LINE_MAX
size_t iot_rec_format(char *buf, const struct iot_rec *r, int kind, const char *desc);

/* ---- descriptions of fds, interned (desc.c) ---- */
struct iot_desc_tab {
    char **desc;       /* desc[id], id >= 1 */
    uint8_t *kind;
    uint32_t n, cap;
};
/* The id of (kind, desc), added when new; 0 on allocation failure (written as unknown). */
uint32_t iot_desc_intern(struct iot_desc_tab *t, int kind, const char *desc);
void iot_desc_free(struct iot_desc_tab *t);

/* Describes an open file: local_fd is a descriptor this process holds on it (its own fd for the
 * preload backend, a pidfd_getfd copy for the ptrace backend), link the /proc/.../fd/N path to
 * read the name from. Writes the description into desc and returns an enum iot_fd_kind.
 * *complete is set to 0 when the description can still change (an inet socket not yet bound). */
int iot_fd_describe(int local_fd, const char *link, char *desc, size_t len, int *complete);
/* Formats a socket address as "a.b.c.d:port", "[v6]:port" or a unix path. */
void iot_sockaddr_format(const void *sa, socklen_t salen, char *buf, size_t len);

/* ---- the ptrace backend (ptrace_backend.c, seccomp_filter.c) ---- */
struct iot_trace_opts {
    uint32_t mask;           /* selected calls */
    const int *pids;         /* npids > 0: attach to these running processes (all their threads) */
    int npids;
    char *const *argv;       /* else: run this command */
    int follow;              /* follow fork/vfork/clone (always on for a command we start) */
    int kill_on_exit;        /* kill the tracees when the tracer stops */
    int no_seccomp;          /* stop on every call even for a command we start */
    int verbose;
    FILE *log;               /* warnings and progress ("attached to a running process ..."); NULL: none */
    const char *out_path;    /* syscalls.tsv */
    const char *json_path;   /* syscalls.json */
    /* set by main's SIGINT/SIGTERM handlers: the last signal and how many arrived */
    volatile sig_atomic_t *stop_sig, *stop_count;
};

struct iot_trace_stats {
    uint64_t calls_seen;       /* entries of selected calls observed */
    uint64_t records_written;
    uint64_t unfinished;
    uint64_t stops;            /* ptrace stops handled */
    uint64_t tracees;          /* threads traced */
    uint64_t resolve_failures; /* fds that could not be described */
    uint64_t uring_setups;     /* io_uring_setup calls seen (ptrace): their rings' I/O is not recorded */
    int seccomp;               /* 1 when the seccomp filter was installed */
    int exit_status;           /* of the command (wait status), -1 when attached */
};

/* Runs the tracer to the end (all tracees gone, or stop_flag and then detach/kill). Returns 0 or
 * a negative errno; err receives a one-line reason on failure. */
int iot_trace_run(const struct iot_trace_opts *o, struct iot_trace_stats *st, struct hw_err *err);

/* For main's SIGINT/SIGTERM handler (async-signal-safe): wakes the tracer out of waitpid by
 * passing the signal to the command (SIGKILL for the second signal or with kill_on_exit), or by
 * interrupting an attached tracee; the tracer loop does the rest. */
enum { IOT_WAKE_NONE, IOT_WAKE_FORWARD, IOT_WAKE_INTERRUPT };
void iot_trace_set_wake(pid_t pid, int mode, int kill_on_exit);
void iot_trace_signal(int sig, int count);

/* Builds the seccomp-bpf program tracing the calls of mask (SECCOMP_RET_TRACE with the call's
 * index as data) and allowing the others; installs it in the calling process. The calls that
 * change what an fd number means (close when not selected, dup2, dup3, close_range) also stop,
 * with data IOT_BOOKKEEP + code, so that the tracer forgets its description; no record. */
enum { IOT_BOOKKEEP = 0x100, IOT_BK_CLOSE = 0, IOT_BK_DUP2, IOT_BK_DUP3, IOT_BK_CLOSE_RANGE, IOT_BK_URING_SETUP,
       IOT_NBK };
/* IOT_BK_URING_SETUP: an io_uring instance made; its ring's operations are in the tracee's memory,
 * which is not read: counted (io_uring_setups in syscalls.json) so that the run says so. */
/* The bookkeeping code of system call nr (not counting a selected close), or -1. */
int iot_bookkeep_by_nr(long nr, uint32_t mask);
int iot_seccomp_install(uint32_t mask);

/* ---- the LD_PRELOAD runner (preload_run.c; the region the library writes: region.h) ---- */
/* Runs argv with libhwiowrap.so preloaded, then writes out_path from what the library recorded;
 * fills st. */
int iot_preload_run(const struct iot_trace_opts *o, const char *lib_path, struct iot_trace_stats *st,
                    struct hw_err *err);

/* Writes syscalls.json (counters) for either backend. 0 or -errno. */
int iot_write_json(const char *path, const char *backend, const struct iot_trace_opts *o,
                   const struct iot_trace_stats *st, int64_t t_start_ns, int64_t t_end_ns);
#endif
