/* libhwiowrap.so, the LD_PRELOAD backend of hw-iotrace: wraps the C library's I/O calls, stamps
 * CLOCK_MONOTONIC before and after the real call, keeps the records in a per-thread buffer and
 * appends them in binary to the spool $HWIOWRAP_SPOOL when the buffer fills, when the thread or
 * the process ends (exit, _exit, exec) and on SIGINT/SIGTERM; hw-iotrace --preload turns the
 * spool into syscalls.tsv. $HWIOWRAP_CALLS selects the calls.
 * Calls the C library makes internally (stdio's write, the loader's reads) are not seen. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "hwclock.h"
#include "iotrace.h"

#define IOT_EXPORT __attribute__((visibility("default")))
#define REC_CAP 65536
#define FD_CACHE 65536

struct tbuf {
    struct iot_rec *recs;
    size_t n;
    size_t seg;               /* first record still stamped in TSC ticks */
    uint64_t a_tsc;           /* the last anchor: a TSC reading and CLOCK_MONOTONIC at that time */
    int64_t a_ns;
    pid_t tid;
    struct iot_rec *active;    /* the call in progress on this thread (for an unfinished record) */
    struct tbuf *next;
};

static int enabled;
static int use_tsc;           /* stamps in TSC ticks, mapped onto CLOCK_MONOTONIC between anchors */
static uint32_t mask;
static char out_path[4096];
static pid_t cur_pid;
static __thread struct tbuf *tls_buf __attribute__((tls_model("initial-exec")));
static struct tbuf *all_bufs;
static pthread_mutex_t bufs_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t desc_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t buf_key;
static _Atomic uint32_t fd_cache[FD_CACHE];
static struct iot_desc_tab descs;

static ssize_t (*real_read)(int, void *, size_t);
static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_readv)(int, const struct iovec *, int);
static ssize_t (*real_writev)(int, const struct iovec *, int);
static ssize_t (*real_pread)(int, void *, size_t, off_t);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_send)(int, const void *, size_t, int);
static ssize_t (*real_sendto)(int, const void *, size_t, int, __CONST_SOCKADDR_ARG, socklen_t);
static ssize_t (*real_sendmsg)(int, const struct msghdr *, int);
static int (*real_sendmmsg)(int, struct mmsghdr *, unsigned int, int);
static ssize_t (*real_recv)(int, void *, size_t, int);
static ssize_t (*real_recvfrom)(int, void *, size_t, int, __SOCKADDR_ARG, socklen_t *);
static ssize_t (*real_recvmsg)(int, struct msghdr *, int);
static ssize_t (*real_sendfile)(int, int, off_t *, size_t);
static ssize_t (*real_splice)(int, __off64_t *, int, __off64_t *, size_t, unsigned int);
static int (*real_connect)(int, __CONST_SOCKADDR_ARG, socklen_t);
static int (*real_accept)(int, __SOCKADDR_ARG, socklen_t *);
static int (*real_accept4)(int, __SOCKADDR_ARG, socklen_t *, int);
static int (*real_close)(int);
static void (*real_exit)(int) __attribute__((noreturn));
static int (*real_dup)(int);
static int (*real_dup2)(int, int);
static int (*real_dup3)(int, int, int);
static int (*real_close_range)(unsigned int, unsigned int, int);
static int (*real_socket)(int, int, int);
static int (*real_socketpair)(int, int, int, int[2]);
static int (*real_pipe)(int[2]);
static int (*real_pipe2)(int[2], int);
static int (*real_open)(const char *, int, ...);
static int (*real_openat)(int, const char *, int, ...);
static int (*real_execve)(const char *, char *const[], char *const[]);
static int (*real_execvp)(const char *, char *const[]);
static int (*real_execvpe)(const char *, char *const[], char *const[]);

static void *sym(const char *name)
{
    return dlsym(RTLD_NEXT, name);
}

static void resolve_all(void)
{
    *(void **)&real_read = sym("read");
    *(void **)&real_write = sym("write");
    *(void **)&real_readv = sym("readv");
    *(void **)&real_writev = sym("writev");
    *(void **)&real_pread = sym("pread64");
    *(void **)&real_pwrite = sym("pwrite64");
    *(void **)&real_send = sym("send");
    *(void **)&real_sendto = sym("sendto");
    *(void **)&real_sendmsg = sym("sendmsg");
    *(void **)&real_sendmmsg = sym("sendmmsg");
    *(void **)&real_recv = sym("recv");
    *(void **)&real_recvfrom = sym("recvfrom");
    *(void **)&real_recvmsg = sym("recvmsg");
    *(void **)&real_sendfile = sym("sendfile64");
    *(void **)&real_splice = sym("splice");
    *(void **)&real_connect = sym("connect");
    *(void **)&real_accept = sym("accept");
    *(void **)&real_accept4 = sym("accept4");
    *(void **)&real_close = sym("close");
    *(void **)&real_exit = sym("_exit");
    *(void **)&real_dup = sym("dup");
    *(void **)&real_dup2 = sym("dup2");
    *(void **)&real_dup3 = sym("dup3");
    *(void **)&real_close_range = sym("close_range");
    *(void **)&real_socket = sym("socket");
    *(void **)&real_socketpair = sym("socketpair");
    *(void **)&real_pipe = sym("pipe");
    *(void **)&real_pipe2 = sym("pipe2");
    *(void **)&real_open = sym("open64");
    *(void **)&real_openat = sym("openat64");
    *(void **)&real_execve = sym("execve");
    *(void **)&real_execvp = sym("execvp");
    *(void **)&real_execvpe = sym("execvpe");
}

/* ---- stamps ----
 * Two clock_gettime() calls cost more than the rest of a wrapper on a VM, so with a TSC
 * clocksource the wrappers read the TSC (rdtsc) and each thread maps its ticks onto
 * CLOCK_MONOTONIC by linear interpolation between anchors, (TSC, CLOCK_MONOTONIC) pairs taken at
 * least every 2^27 ticks (about 50 ms) and at every flush. */
#define ANCHOR_TICKS (1ull << 27)

static inline int64_t stamp(void)
{
#if defined(__x86_64__)
    if (use_tsc)
        return (int64_t)__builtin_ia32_rdtsc();
#endif
    return hw_mono_ns();
}

static void anchor(struct tbuf *b)
{
#if defined(__x86_64__)
    if (!use_tsc)
        return;
    uint64_t t0 = __builtin_ia32_rdtsc();
    int64_t ns = hw_mono_ns();
    uint64_t t1 = __builtin_ia32_rdtsc();
    uint64_t tsc = t0 + (t1 - t0) / 2;
    double scale = tsc > b->a_tsc ? (double)(ns - b->a_ns) / (double)(tsc - b->a_tsc) : 0.0;
    for (size_t i = b->seg; i < b->n; i++) {
        struct iot_rec *r = &b->recs[i];
        r->t_enter_ns = b->a_ns + (int64_t)((double)(r->t_enter_ns - (int64_t)b->a_tsc) * scale);
        r->t_exit_ns = b->a_ns + (int64_t)((double)(r->t_exit_ns - (int64_t)b->a_tsc) * scale);
    }
    b->a_tsc = tsc;
    b->a_ns = ns;
    b->seg = b->n;
#else
    (void)b;
#endif
}

/* ---- flushing: binary blocks appended to the spool ---- */

static void spool_write(const struct iot_spool_hdr *h, const void *payload)
{
    int fd = (int)syscall(SYS_openat, AT_FDCWD, out_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    struct iovec iov[2] = {{(void *)h, sizeof(*h)}, {(void *)payload, h->len}};
    syscall(SYS_writev, fd, iov, h->len ? 2 : 1);  /* one append: blocks never interleave */
    syscall(SYS_close, fd);
}

/* Writes the records of b (and its call in progress when `unfinished`), then empties it. */
static void flush_buf(struct tbuf *b, int unfinished)
{
    if (unfinished && b->active && b->n < REC_CAP) {
        struct iot_rec *r = &b->recs[b->n++];
        *r = *b->active;
        r->t_exit_ns = stamp();
        r->unfinished = 1;
        b->active = NULL;
    }
    anchor(b);
    if (!b->n)
        return;
    struct iot_spool_hdr h = {.magic = IOT_SPOOL_MAGIC, .type = IOT_SPOOL_RECS, .pid = cur_pid,
                             .count = (uint32_t)b->n, .len = (uint32_t)(b->n * sizeof(struct iot_rec))};
    spool_write(&h, b->recs);
    b->n = 0;
    b->seg = 0;
}

static void flush_all(int unfinished, int in_signal)
{
    if (!enabled)
        return;
    if (in_signal ? pthread_mutex_trylock(&bufs_lock) != 0 : pthread_mutex_lock(&bufs_lock) != 0)
        return;
    for (struct tbuf *b = all_bufs; b; b = b->next)
        flush_buf(b, unfinished);
    pthread_mutex_unlock(&bufs_lock);
}

static void thread_end(void *arg)
{
    struct tbuf *b = arg;
    pthread_mutex_lock(&bufs_lock);
    flush_buf(b, 0);
    for (struct tbuf **p = &all_bufs; *p; p = &(*p)->next)
        if (*p == b) {
            *p = b->next;
            break;
        }
    pthread_mutex_unlock(&bufs_lock);
    munmap(b->recs, REC_CAP * sizeof(struct iot_rec));
    munmap(b, sizeof(*b));
    tls_buf = NULL;
}

static struct tbuf *get_buf(void)
{
    struct tbuf *b = tls_buf;
    if (b)
        return b;
    b = mmap(NULL, sizeof(*b), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (b == MAP_FAILED)
        return NULL;
    b->recs = mmap(NULL, REC_CAP * sizeof(struct iot_rec), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (b->recs == MAP_FAILED) {
        munmap(b, sizeof(*b));
        return NULL;
    }
    b->tid = (pid_t)syscall(SYS_gettid);
    anchor(b);
    pthread_mutex_lock(&bufs_lock);
    b->next = all_bufs;
    all_bufs = b;
    pthread_mutex_unlock(&bufs_lock);
    pthread_setspecific(buf_key, b);
    tls_buf = b;
    return b;
}

/* ---- fd descriptions ---- */

static uint32_t describe(int fd)
{
    if (fd < 0)
        return 0;
    if (fd < FD_CACHE) {
        uint32_t id = atomic_load_explicit(&fd_cache[fd], memory_order_relaxed);
        if (id)
            return id;
    }
    char link[64], desc[IOT_DESC_MAX];
    int complete = 1;
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    int kind = iot_fd_describe(fd, link, desc, sizeof(desc), &complete);
    if (kind == IOT_FD_UNKNOWN)
        return 0;
    pthread_mutex_lock(&desc_lock);
    uint32_t known = descs.n;
    uint32_t id = iot_desc_intern(&descs, kind, desc);
    if (id > known) {  /* new: into the spool before any record that names it */
        struct iot_spool_hdr h = {.magic = IOT_SPOOL_MAGIC, .type = IOT_SPOOL_DESC, .kind = (uint16_t)kind,
                                 .pid = cur_pid, .count = id, .len = (uint32_t)strlen(desc)};
        spool_write(&h, desc);
    }
    pthread_mutex_unlock(&desc_lock);
    if (id && complete && fd < FD_CACHE)
        atomic_store_explicit(&fd_cache[fd], id, memory_order_relaxed);
    return id;
}

static void forget(int fd)
{
    if (fd >= 0 && fd < FD_CACHE)
        atomic_store_explicit(&fd_cache[fd], 0, memory_order_relaxed);
}

/* ---- the record of one call ---- */

#define TRACED(call) (enabled && (mask & (1u << (call))))

struct call_ctx {
    struct tbuf *b;
    struct iot_rec r;
    struct iot_rec *prev_active;
};

static inline int begin(struct call_ctx *c, int call, int fd, int64_t req)
{
    c->b = get_buf();
    if (!c->b)
        return 0;
    c->r.pid = cur_pid;
    c->r.tid = c->b->tid;
    c->r.call = (uint8_t)call;
    c->r.unfinished = 0;
    c->r.fd = fd;
    c->r.req_bytes = req;
    /* described at entry, so that a call cut short by a signal is described too */
    c->r.desc_id = call == IOT_CALL_CLOSE ? 0 : describe(fd);
    c->prev_active = c->b->active;
    c->b->active = &c->r;
    c->r.t_enter_ns = stamp();
    return 1;
}

static inline void end(struct call_ctx *c, int64_t ret, int err)
{
    c->r.t_exit_ns = stamp();
    c->r.result = ret < 0 ? -(int64_t)err : ret;
    struct tbuf *b = c->b;
    b->active = c->prev_active;
    if (c->r.call == IOT_CALL_CONNECT || (!c->r.desc_id && c->r.call != IOT_CALL_CLOSE))
        c->r.desc_id = describe(c->r.fd);  /* connected now: its 4-tuple */
    b->recs[b->n++] = c->r;
    if (b->n == REC_CAP)
        flush_buf(b, 0);
    else if (use_tsc && (uint64_t)c->r.t_exit_ns - b->a_tsc > ANCHOR_TICKS)
        anchor(b);
}

static int64_t iov_total(const struct iovec *iov, int n)
{
    int64_t s = 0;
    for (int i = 0; iov && i < n; i++)
        s += (int64_t)iov[i].iov_len;
    return s;
}

/* WRAP(call id, fd, requested bytes, expression calling the real function) */
#define WRAP(type, call, fd, req, expr)                                                            \
    do {                                                                                           \
        struct call_ctx c_;                                                                        \
        if (!TRACED(call) || !begin(&c_, call, fd, req))                                           \
            return expr;                                                                           \
        type ret_ = expr;                                                                          \
        int err_ = errno;                                                                          \
        end(&c_, (int64_t)ret_, err_);                                                             \
        errno = err_;                                                                              \
        return ret_;                                                                               \
    } while (0)

#define NEED(fn)                 \
    do {                         \
        if (!(fn))               \
            resolve_all();       \
    } while (0)

IOT_EXPORT ssize_t read(int fd, void *buf, size_t n)
{
    NEED(real_read);
    WRAP(ssize_t, IOT_CALL_READ, fd, (int64_t)n, real_read(fd, buf, n));
}

IOT_EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
    NEED(real_write);
    WRAP(ssize_t, IOT_CALL_WRITE, fd, (int64_t)n, real_write(fd, buf, n));
}

IOT_EXPORT ssize_t readv(int fd, const struct iovec *iov, int n)
{
    NEED(real_readv);
    WRAP(ssize_t, IOT_CALL_READV, fd, iov_total(iov, n), real_readv(fd, iov, n));
}

IOT_EXPORT ssize_t writev(int fd, const struct iovec *iov, int n)
{
    NEED(real_writev);
    WRAP(ssize_t, IOT_CALL_WRITEV, fd, iov_total(iov, n), real_writev(fd, iov, n));
}

IOT_EXPORT ssize_t pread(int fd, void *buf, size_t n, off_t off)
{
    NEED(real_pread);
    WRAP(ssize_t, IOT_CALL_PREAD64, fd, (int64_t)n, real_pread(fd, buf, n, off));
}

IOT_EXPORT ssize_t pread64(int fd, void *buf, size_t n, off_t off)
{
    NEED(real_pread);
    WRAP(ssize_t, IOT_CALL_PREAD64, fd, (int64_t)n, real_pread(fd, buf, n, off));
}

IOT_EXPORT ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
    NEED(real_pwrite);
    WRAP(ssize_t, IOT_CALL_PWRITE64, fd, (int64_t)n, real_pwrite(fd, buf, n, off));
}

IOT_EXPORT ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off)
{
    NEED(real_pwrite);
    WRAP(ssize_t, IOT_CALL_PWRITE64, fd, (int64_t)n, real_pwrite(fd, buf, n, off));
}

IOT_EXPORT ssize_t send(int fd, const void *buf, size_t n, int flags)
{
    NEED(real_send);
    WRAP(ssize_t, IOT_CALL_SENDTO, fd, (int64_t)n, real_send(fd, buf, n, flags));
}

IOT_EXPORT ssize_t sendto(int fd, const void *buf, size_t n, int flags, __CONST_SOCKADDR_ARG to, socklen_t tl)
{
    NEED(real_sendto);
    WRAP(ssize_t, IOT_CALL_SENDTO, fd, (int64_t)n, real_sendto(fd, buf, n, flags, to, tl));
}

IOT_EXPORT ssize_t sendmsg(int fd, const struct msghdr *m, int flags)
{
    NEED(real_sendmsg);
    WRAP(ssize_t, IOT_CALL_SENDMSG, fd, m ? iov_total(m->msg_iov, (int)m->msg_iovlen) : -1,
         real_sendmsg(fd, m, flags));
}

static int64_t mmsg_total(const struct mmsghdr *v, unsigned int n)
{
    int64_t s = 0;
    for (unsigned int i = 0; v && i < n; i++)
        s += iov_total(v[i].msg_hdr.msg_iov, (int)v[i].msg_hdr.msg_iovlen);
    return s;
}

IOT_EXPORT int sendmmsg(int fd, struct mmsghdr *v, unsigned int n, int flags)
{
    NEED(real_sendmmsg);
    WRAP(int, IOT_CALL_SENDMMSG, fd, mmsg_total(v, n), real_sendmmsg(fd, v, n, flags));
}

IOT_EXPORT ssize_t recv(int fd, void *buf, size_t n, int flags)
{
    NEED(real_recv);
    WRAP(ssize_t, IOT_CALL_RECVFROM, fd, (int64_t)n, real_recv(fd, buf, n, flags));
}

IOT_EXPORT ssize_t recvfrom(int fd, void *buf, size_t n, int flags, __SOCKADDR_ARG from, socklen_t *fl)
{
    NEED(real_recvfrom);
    WRAP(ssize_t, IOT_CALL_RECVFROM, fd, (int64_t)n, real_recvfrom(fd, buf, n, flags, from, fl));
}

IOT_EXPORT ssize_t recvmsg(int fd, struct msghdr *m, int flags)
{
    NEED(real_recvmsg);
    WRAP(ssize_t, IOT_CALL_RECVMSG, fd, m ? iov_total(m->msg_iov, (int)m->msg_iovlen) : -1,
         real_recvmsg(fd, m, flags));
}

IOT_EXPORT ssize_t sendfile(int out, int in, off_t *off, size_t n)
{
    NEED(real_sendfile);
    WRAP(ssize_t, IOT_CALL_SENDFILE, out, (int64_t)n, real_sendfile(out, in, off, n));
}

IOT_EXPORT ssize_t sendfile64(int out, int in, off_t *off, size_t n)
{
    NEED(real_sendfile);
    WRAP(ssize_t, IOT_CALL_SENDFILE, out, (int64_t)n, real_sendfile(out, in, off, n));
}

IOT_EXPORT ssize_t splice(int in, __off64_t *oin, int out, __off64_t *oout, size_t n, unsigned int flags)
{
    NEED(real_splice);
    WRAP(ssize_t, IOT_CALL_SPLICE, out, (int64_t)n, real_splice(in, oin, out, oout, n, flags));
}

IOT_EXPORT int connect(int fd, __CONST_SOCKADDR_ARG addr, socklen_t len)
{
    NEED(real_connect);
    forget(fd);
    WRAP(int, IOT_CALL_CONNECT, fd, -1, real_connect(fd, addr, len));
}

IOT_EXPORT int accept(int fd, __SOCKADDR_ARG addr, socklen_t *len)
{
    NEED(real_accept);
    WRAP(int, IOT_CALL_ACCEPT, fd, -1, real_accept(fd, addr, len));
}

IOT_EXPORT int accept4(int fd, __SOCKADDR_ARG addr, socklen_t *len, int flags)
{
    NEED(real_accept4);
    WRAP(int, IOT_CALL_ACCEPT4, fd, -1, real_accept4(fd, addr, len, flags));
}

IOT_EXPORT int close(int fd)
{
    NEED(real_close);
    struct call_ctx c;
    if (!TRACED(IOT_CALL_CLOSE)) {
        forget(fd);
        return real_close(fd);
    }
    uint32_t id = describe(fd);  /* while it exists */
    forget(fd);
    if (!begin(&c, IOT_CALL_CLOSE, fd, -1))
        return real_close(fd);
    int ret = real_close(fd);
    int err = errno;
    c.r.desc_id = id;
    end(&c, ret, err);
    errno = err;
    return ret;
}

/* ---- calls that give an fd number a new meaning: forget its description (no record) ---- */

static int fresh(int fd)
{
    forget(fd);
    return fd;
}

IOT_EXPORT int dup(int fd)
{
    NEED(real_dup);
    return fresh(real_dup(fd));
}

IOT_EXPORT int dup2(int fd, int to)
{
    NEED(real_dup2);
    forget(to);
    return real_dup2(fd, to);
}

IOT_EXPORT int dup3(int fd, int to, int flags)
{
    NEED(real_dup3);
    forget(to);
    return real_dup3(fd, to, flags);
}

IOT_EXPORT int close_range(unsigned int first, unsigned int last, int flags)
{
    NEED(real_close_range);
    for (unsigned int fd = first; fd <= last && fd < FD_CACHE; fd++)
        forget((int)fd);
    return real_close_range(first, last, flags);
}

IOT_EXPORT int socket(int domain, int type, int proto)
{
    NEED(real_socket);
    return fresh(real_socket(domain, type, proto));
}

IOT_EXPORT int socketpair(int domain, int type, int proto, int sv[2])
{
    NEED(real_socketpair);
    int r = real_socketpair(domain, type, proto, sv);
    if (r == 0) {
        forget(sv[0]);
        forget(sv[1]);
    }
    return r;
}

IOT_EXPORT int pipe(int p[2])
{
    NEED(real_pipe);
    int r = real_pipe(p);
    if (r == 0) {
        forget(p[0]);
        forget(p[1]);
    }
    return r;
}

IOT_EXPORT int pipe2(int p[2], int flags)
{
    NEED(real_pipe2);
    int r = real_pipe2(p, flags);
    if (r == 0) {
        forget(p[0]);
        forget(p[1]);
    }
    return r;
}

static mode_t open_mode(int flags, va_list ap)
{
    return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? (mode_t)va_arg(ap, int) : 0;
}

IOT_EXPORT int open(const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    mode_t mode = open_mode(flags, ap);
    va_end(ap);
    NEED(real_open);
    return fresh(real_open(path, flags, mode));
}

IOT_EXPORT int open64(const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    mode_t mode = open_mode(flags, ap);
    va_end(ap);
    NEED(real_open);
    return fresh(real_open(path, flags, mode));
}

IOT_EXPORT int openat(int dir, const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    mode_t mode = open_mode(flags, ap);
    va_end(ap);
    NEED(real_openat);
    return fresh(real_openat(dir, path, flags, mode));
}

IOT_EXPORT int openat64(int dir, const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    mode_t mode = open_mode(flags, ap);
    va_end(ap);
    NEED(real_openat);
    return fresh(real_openat(dir, path, flags, mode));
}

/* ---- ends of the process: flush first ---- */

IOT_EXPORT void _exit(int status)
{
    flush_all(0, 0);
    NEED(real_exit);
    real_exit(status);
}

IOT_EXPORT void _Exit(int status)
{
    flush_all(0, 0);
    NEED(real_exit);
    real_exit(status);
}

IOT_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
    flush_all(0, 0);
    NEED(real_execve);
    return real_execve(path, argv, envp);
}

IOT_EXPORT int execv(const char *path, char *const argv[])
{
    flush_all(0, 0);
    NEED(real_execve);
    return real_execve(path, argv, environ);
}

IOT_EXPORT int execvp(const char *file, char *const argv[])
{
    flush_all(0, 0);
    NEED(real_execvp);
    return real_execvp(file, argv);
}

IOT_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
    flush_all(0, 0);
    NEED(real_execvpe);
    return real_execvpe(file, argv, envp);
}

static void on_signal(int sig)
{
    flush_all(1, 1);
    signal(sig, SIG_DFL);
    raise(sig);
}

/* fork: the child keeps only the calling thread, and the parent writes the records it had */
static void after_fork_child(void)
{
    cur_pid = (pid_t)syscall(SYS_getpid);
    struct tbuf *mine = tls_buf;
    struct tbuf *b = all_bufs;
    all_bufs = NULL;
    pthread_mutex_init(&bufs_lock, NULL);
    pthread_mutex_init(&desc_lock, NULL);
    /* its own description ids from now on: the spool keys them by pid */
    iot_desc_free(&descs);
    memset((void *)fd_cache, 0, sizeof(fd_cache));
    while (b) {
        struct tbuf *next = b->next;
        if (b != mine) {
            munmap(b->recs, REC_CAP * sizeof(struct iot_rec));
            munmap(b, sizeof(*b));
        }
        b = next;
    }
    if (mine) {
        mine->n = 0;
        mine->seg = 0;
        mine->active = NULL;
        mine->tid = cur_pid;
        mine->next = NULL;
        all_bufs = mine;
    }
}

__attribute__((constructor)) static void hwiowrap_init(void)
{
    resolve_all();
    const char *out = getenv("HWIOWRAP_SPOOL");
    if (!out || !*out || strlen(out) >= sizeof(out_path))
        return;
    char bad[64];
    if (iot_calls_parse(getenv("HWIOWRAP_CALLS"), &mask, bad, sizeof(bad)) < 0) {
        dprintf(2, "libhwiowrap: unknown call '%s' in HWIOWRAP_CALLS; not tracing\n", bad);
        return;
    }
    strcpy(out_path, out);
#if defined(__x86_64__)
    char cs[32] = "";
    int fd = (int)syscall(SYS_openat, AT_FDCWD, "/sys/devices/system/clocksource/clocksource0/current_clocksource",
                          O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        long n = syscall(SYS_read, fd, cs, sizeof(cs) - 1);
        cs[n > 0 ? n : 0] = '\0';
        syscall(SYS_close, fd);
    }
    use_tsc = !strcmp(cs, "tsc\n") && !getenv("HWIOWRAP_NO_TSC");
#endif
    cur_pid = (pid_t)syscall(SYS_getpid);
    pthread_key_create(&buf_key, thread_end);
    pthread_atfork(NULL, NULL, after_fork_child);
    int sigs[] = {SIGINT, SIGTERM};
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
        struct sigaction old;
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_DFL) {
            struct sigaction sa;
            memset(&sa, 0, sizeof(sa));
            sa.sa_handler = on_signal;
            sigaction(sigs[i], &sa, NULL);
        }
    }
    enabled = 1;
}

__attribute__((destructor)) static void hwiowrap_fini(void)
{
    flush_all(0, 0);
}
