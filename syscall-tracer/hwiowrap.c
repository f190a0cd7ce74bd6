/* libhwiowrap.so, the LD_PRELOAD backend of hw-iotrace: wraps the C library's I/O calls and
 * writes each call's record into the region it shares with hw-iotrace (region.h): a slot is
 * claimed and the entry written before the real call, the exit after it. Nothing is kept in the
 * process, so nothing has to be written when a thread or the process ends: however it ends
 * (exit from any thread, a fatal signal, SIGKILL, exec), every call made is in the region, marked
 * unfinished when it never returned. $HWIOWRAP_FD is the region's inherited descriptor
 * ($HWIOWRAP_REGION a path to it, for an image whose program closed that descriptor);
 * $HWIOWRAP_CALLS selects the calls. Calls the C library makes internally (stdio's write, the
 * loader's reads) are not seen. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "hwclock.h"
#include "iotrace.h"
#include "region_layout.h"

#define IOT_EXPORT __attribute__((visibility("default")))
#define FD_CACHE 65536

static struct iot_region *region;   /* NULL: not tracing (set last by the constructor) */
static struct iot_slot *slots;
static struct iot_desc_slot *desc_slots;
static uint64_t nslots, ndescs;
static uintptr_t page_size;
static uint32_t image;              /* this process image's number in the region */
static int use_tsc;                 /* stamps in TSC ticks, mapped onto CLOCK_MONOTONIC by hw-iotrace */
static uint32_t mask;
static pid_t cur_pid;
static pthread_mutex_t desc_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint32_t fd_cache[FD_CACHE];
static struct iot_desc_tab descs;

/* Each thread's claimed slots not used yet, [next, end), and how many it claims next. */
struct thread_state {
    uint64_t next, end, run;
    pid_t tid;
    volatile sig_atomic_t claiming;   /* inside claim(): a signal handler's call must not touch next */
};
static __thread struct thread_state ts __attribute__((tls_model("initial-exec")));

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
static int (*real_recvmmsg)(int, struct mmsghdr *, unsigned int, int, struct timespec *);
static int (*real_ioctl)(int, unsigned long, ...);
static ssize_t (*real_sendfile)(int, int, off_t *, size_t);
static ssize_t (*real_splice)(int, __off64_t *, int, __off64_t *, size_t, unsigned int);
static ssize_t (*real_pwritev)(int, const struct iovec *, int, off_t);
static ssize_t (*real_pwritev2)(int, const struct iovec *, int, off_t, int);
static ssize_t (*real_vmsplice)(int, const struct iovec *, size_t, unsigned int);
static ssize_t (*real_tee)(int, int, size_t, unsigned int);
static int (*real_connect)(int, __CONST_SOCKADDR_ARG, socklen_t);
static int (*real_accept)(int, __SOCKADDR_ARG, socklen_t *);
static int (*real_accept4)(int, __SOCKADDR_ARG, socklen_t *, int);
static int (*real_close)(int);
static int (*real_dup)(int);
static int (*real_dup2)(int, int);
static int (*real_dup3)(int, int, int);
static int (*real_close_range)(unsigned int, unsigned int, int);
static int (*real_socket)(int, int, int);
static int (*real_socketpair)(int, int, int, int[2]);
static int (*real_pipe)(int[2]);
static int (*real_pipe2)(int[2], int);
static int (*real_openat)(int, const char *, int, ...);
static int (*real_fcntl)(int, int, ...);

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
    *(void **)&real_recvmmsg = sym("recvmmsg");
    *(void **)&real_ioctl = sym("ioctl");
    *(void **)&real_sendfile = sym("sendfile64");
    *(void **)&real_splice = sym("splice");
    *(void **)&real_pwritev = sym("pwritev64");
    *(void **)&real_pwritev2 = sym("pwritev64v2");
    *(void **)&real_vmsplice = sym("vmsplice");
    *(void **)&real_tee = sym("tee");
    *(void **)&real_connect = sym("connect");
    *(void **)&real_accept = sym("accept");
    *(void **)&real_accept4 = sym("accept4");
    *(void **)&real_close = sym("close");
    *(void **)&real_dup = sym("dup");
    *(void **)&real_dup2 = sym("dup2");
    *(void **)&real_dup3 = sym("dup3");
    *(void **)&real_close_range = sym("close_range");
    *(void **)&real_socket = sym("socket");
    *(void **)&real_socketpair = sym("socketpair");
    *(void **)&real_pipe = sym("pipe");
    *(void **)&real_pipe2 = sym("pipe2");
    *(void **)&real_openat = sym("openat64");
    *(void **)&real_fcntl = sym("fcntl");
}

/* ---- stamps ----
 * Two clock_gettime() calls cost more than the rest of a wrapper on a VM, so with a TSC
 * clocksource the wrappers read the TSC (rdtsc); hw-iotrace maps the ticks onto CLOCK_MONOTONIC
 * by linear interpolation between anchors, (TSC, CLOCK_MONOTONIC) pairs it takes before and after
 * the command and a thread takes whenever its call ends IOT_ANCHOR_TICKS (about 50 ms) after the
 * last one. */

static inline int64_t stamp(void)
{
#if defined(__x86_64__)
    if (use_tsc)
        return (int64_t)__builtin_ia32_rdtsc();
#endif
    return hw_mono_ns();
}

/* ---- slots ---- */

/* Has the kernel give slots [from, to) their pages in one call rather than by a page fault every
 * 64 records (a few ns less per traced call here). Where MADV_POPULATE_WRITE is unknown (Linux
 * before 5.14) the call fails and the pages come by faults. */
static void populate(uint64_t from, uint64_t to)
{
    uintptr_t page = page_size;
    uintptr_t a = (uintptr_t)&slots[from < nslots ? from : nslots] & ~(page - 1);
    uintptr_t b = ((uintptr_t)&slots[to < nslots ? to : nslots] + page - 1) & ~(page - 1);
    if (b > a)
        madvise((void *)a, b - a, MADV_POPULATE_WRITE);
}

/* The slot of one record, or NULL when the region is full. A thread claims a run of slots at a
 * time, IOT_CHUNK at first and twice as many each time up to IOT_CHUNK_MAX, so that a thread
 * making one call takes one page and a busy one claims and populates rarely. A signal handler's
 * call that interrupts this function on the same thread takes a single slot of its own, so that
 * no slot is handed out twice (a handler that interrupts elsewhere runs to its end before the
 * interrupted code touches next again). */
static struct iot_slot *claim(void)
{
    uint64_t i;
    if (ts.claiming) {
        i = atomic_fetch_add_explicit(&region->cursor, 1, memory_order_relaxed);
    } else {
        ts.claiming = 1;
        atomic_signal_fence(memory_order_seq_cst);
        if (ts.next == ts.end) {
            uint64_t n = ts.run ? ts.run : IOT_CHUNK;
            ts.next = atomic_fetch_add_explicit(&region->cursor, n, memory_order_relaxed);
            ts.end = ts.next + n;
            ts.run = n < IOT_CHUNK_MAX ? 2 * n : n;
            populate(ts.next, ts.end);
        }
        i = ts.next++;
        atomic_signal_fence(memory_order_seq_cst);
        ts.claiming = 0;
    }
    return i < nslots ? &slots[i] : NULL;
}

/* A call ending seen ticks ago: when that is IOT_ANCHOR_TICKS after the last anchor, this thread
 * takes the next one, unless another thread got there first. */
static void anchor(uint64_t seen)
{
    uint64_t last = atomic_load_explicit(&region->anchor_tsc, memory_order_relaxed);
    if ((int64_t)(seen - last) <= (int64_t)IOT_ANCHOR_TICKS ||
        !atomic_compare_exchange_strong_explicit(&region->anchor_tsc, &last, seen, memory_order_relaxed,
                                                 memory_order_relaxed))
        return;
    struct iot_slot *s = claim();
    if (!s)
        return;
    struct iot_anchor a = iot_anchor_now();
    s->image = image;
    s->r.t_enter_ns = a.tsc;
    s->r.t_exit_ns = a.ns;
    atomic_store_explicit(&s->state, IOT_SLOT_ANCHOR, memory_order_release);
}

/* ---- fd descriptions ---- */

/* Into the region, before any record naming it; a full table leaves it out (its records say
 * "unknown"). */
static void publish(uint32_t id, int kind, const char *desc)
{
    uint64_t k = atomic_fetch_add_explicit(&region->desc_cursor, 1, memory_order_relaxed);
    if (k >= ndescs)
        return;
    struct iot_desc_slot *d = &desc_slots[k];
    size_t len = strnlen(desc, IOT_DESC_MAX);
    d->image = image;
    d->id = id;
    d->kind = (uint16_t)kind;
    d->len = (uint16_t)len;
    memcpy(d->text, desc, len);
    atomic_store_explicit(&d->state, 1, memory_order_release);
}

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
    if (id > known)
        publish(id, kind, desc);
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

#define TRACED(call) (region && (mask & (1u << (call))))

/* Claims the call's slot and writes its entry; NULL when the region is full (the call is counted
 * lost). desc_id is the fd's description, taken at entry so that a call that never returns is
 * described too. */
static inline struct iot_slot *begin(int call, int fd, int64_t req, uint32_t desc_id)
{
    struct iot_slot *s = claim();
    if (!s) {
        atomic_fetch_add_explicit(&region->lost, 1, memory_order_relaxed);
        return NULL;
    }
    if (!ts.tid)
        ts.tid = (pid_t)syscall(SYS_gettid);
    s->image = image;
    s->r = (struct iot_rec){.pid = cur_pid, .tid = ts.tid, .fd = fd, .req_bytes = req, .desc_id = desc_id,
                            .call = (uint8_t)call};
    s->r.t_enter_ns = stamp();
    atomic_store_explicit(&s->state, IOT_SLOT_ENTERED, memory_order_release);
    return s;
}

static inline void end(struct iot_slot *s, int64_t ret, int err)
{
    int64_t t = stamp();
    s->r.t_exit_ns = t;
    s->r.result = ret < 0 ? -(int64_t)err : ret;
    if (s->r.call == IOT_CALL_CONNECT || (!s->r.desc_id && s->r.call != IOT_CALL_CLOSE))
        s->r.desc_id = describe(s->r.fd);  /* connected now: its 4-tuple */
    atomic_store_explicit(&s->state, IOT_SLOT_DONE, memory_order_release);
    if (use_tsc)
        anchor((uint64_t)t);
}

static int64_t iov_total(const struct iovec *iov, int n)
{
    int64_t s = 0;
    for (int i = 0; iov && i < n; i++)
        s += (int64_t)iov[i].iov_len;
    return s;
}

/* WRAP(type, call id, fd, requested bytes, expression calling the real function) */
#define WRAP(type, call, fd, req, expr)                                                            \
    do {                                                                                           \
        struct iot_slot *s_;                                                                       \
        if (!TRACED(call) || !(s_ = begin(call, fd, req, describe(fd))))                          \
            return expr;                                                                           \
        type ret_ = expr;                                                                          \
        int err_ = errno;                                                                          \
        end(s_, (int64_t)ret_, err_);                                                              \
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

/* glibc's large-file name of a call (pread64 beside pread, open64 beside open, ...) is the same
 * function where off_t has 64 bits: one body under both names. */
_Static_assert(sizeof(off_t) == 8, "the large-file calls are the plain ones");
#define LFS_ALIAS(type, name64, params, name) IOT_EXPORT type name64 params __attribute__((alias(#name)))

IOT_EXPORT ssize_t pread(int fd, void *buf, size_t n, off_t off)
{
    NEED(real_pread);
    WRAP(ssize_t, IOT_CALL_PREAD64, fd, (int64_t)n, real_pread(fd, buf, n, off));
}
LFS_ALIAS(ssize_t, pread64, (int, void *, size_t, off_t), pread);

IOT_EXPORT ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
    NEED(real_pwrite);
    WRAP(ssize_t, IOT_CALL_PWRITE64, fd, (int64_t)n, real_pwrite(fd, buf, n, off));
}
LFS_ALIAS(ssize_t, pwrite64, (int, const void *, size_t, off_t), pwrite);

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

/* The descriptors a message received (SCM_RIGHTS): a record scm_rights each, at the call's
 * return, its req_bytes the close-on-exec flag (MSG_CMSG_CLOEXEC); their numbers were free
 * before, so their descriptions are forgotten. */
static void received_fds(const struct msghdr *m, int flags)
{
    if (!m || !m->msg_control || m->msg_controllen < sizeof(struct cmsghdr))
        return;
    int fds[1024];
    int n = iot_scm_rights(m->msg_control, m->msg_controllen, fds, 1024);
    for (int k = 0; k < n; k++) {
        forget(fds[k]);
        struct iot_slot *s = TRACED(IOT_CALL_SCM_RIGHTS)
                                 ? begin(IOT_CALL_SCM_RIGHTS, fds[k], (flags & MSG_CMSG_CLOEXEC) != 0, describe(fds[k]))
                                 : NULL;
        if (s)
            end(s, fds[k], 0);
    }
}

IOT_EXPORT ssize_t recvmsg(int fd, struct msghdr *m, int flags)
{
    NEED(real_recvmsg);
    if (!TRACED(IOT_CALL_RECVMSG) && !TRACED(IOT_CALL_SCM_RIGHTS))
        return real_recvmsg(fd, m, flags);
    ssize_t ret;
    struct iot_slot *s = TRACED(IOT_CALL_RECVMSG)
                             ? begin(IOT_CALL_RECVMSG, fd, m ? iov_total(m->msg_iov, (int)m->msg_iovlen) : -1, describe(fd))
                             : NULL;
    ret = real_recvmsg(fd, m, flags);
    int err = errno;
    if (s)
        end(s, (int64_t)ret, err);
    if (ret >= 0)
        received_fds(m, flags);
    errno = err;
    return ret;
}

IOT_EXPORT int recvmmsg(int fd, struct mmsghdr *v, unsigned int n, int flags, struct timespec *timeout)
{
    NEED(real_recvmmsg);
    if (!TRACED(IOT_CALL_RECVMMSG) && !TRACED(IOT_CALL_SCM_RIGHTS))
        return real_recvmmsg(fd, v, n, flags, timeout);
    struct iot_slot *s = TRACED(IOT_CALL_RECVMMSG) ? begin(IOT_CALL_RECVMMSG, fd, mmsg_total(v, n), describe(fd)) : NULL;
    int ret = real_recvmmsg(fd, v, n, flags, timeout);
    int err = errno;
    if (s)
        end(s, (int64_t)ret, err);
    for (int i = 0; i < ret && v; i++)
        received_fds(&v[i].msg_hdr, flags);
    errno = err;
    return ret;
}

IOT_EXPORT ssize_t sendfile(int out, int in, off_t *off, size_t n)
{
    NEED(real_sendfile);
    WRAP(ssize_t, IOT_CALL_SENDFILE, out, (int64_t)n, real_sendfile(out, in, off, n));
}
LFS_ALIAS(ssize_t, sendfile64, (int, int, off_t *, size_t), sendfile);

IOT_EXPORT ssize_t splice(int in, __off64_t *oin, int out, __off64_t *oout, size_t n, unsigned int flags)
{
    NEED(real_splice);
    WRAP(ssize_t, IOT_CALL_SPLICE, out, (int64_t)n, real_splice(in, oin, out, oout, n, flags));
}

IOT_EXPORT ssize_t pwritev(int fd, const struct iovec *iov, int n, off_t off)
{
    NEED(real_pwritev);
    WRAP(ssize_t, IOT_CALL_PWRITEV, fd, iov_total(iov, n), real_pwritev(fd, iov, n, off));
}
LFS_ALIAS(ssize_t, pwritev64, (int, const struct iovec *, int, off_t), pwritev);

IOT_EXPORT ssize_t pwritev2(int fd, const struct iovec *iov, int n, off_t off, int flags)
{
    NEED(real_pwritev2);
    WRAP(ssize_t, IOT_CALL_PWRITEV2, fd, iov_total(iov, n), real_pwritev2(fd, iov, n, off, flags));
}
LFS_ALIAS(ssize_t, pwritev64v2, (int, const struct iovec *, int, off_t, int), pwritev2);

IOT_EXPORT ssize_t vmsplice(int fd, const struct iovec *iov, size_t n, unsigned int flags)
{
    NEED(real_vmsplice);
    WRAP(ssize_t, IOT_CALL_VMSPLICE, fd, iov_total(iov, (int)n), real_vmsplice(fd, iov, n, flags));
}

/* tee's record names the pipe it fills, as splice's names the fd it writes to */
IOT_EXPORT ssize_t tee(int in, int out, size_t n, unsigned int flags)
{
    NEED(real_tee);
    WRAP(ssize_t, IOT_CALL_TEE, out, (int64_t)n, real_tee(in, out, n, flags));
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
    WRAP(int, IOT_CALL_ACCEPT, fd, 0, real_accept(fd, addr, len));  /* req_bytes: not close-on-exec */
}

IOT_EXPORT int accept4(int fd, __SOCKADDR_ARG addr, socklen_t *len, int flags)
{
    NEED(real_accept4);
    WRAP(int, IOT_CALL_ACCEPT4, fd, (flags & SOCK_CLOEXEC) != 0, real_accept4(fd, addr, len, flags));
}

IOT_EXPORT int close(int fd)
{
    NEED(real_close);
    if (!TRACED(IOT_CALL_CLOSE)) {
        forget(fd);
        return real_close(fd);
    }
    uint32_t id = describe(fd);  /* while it exists */
    forget(fd);
    struct iot_slot *s = begin(IOT_CALL_CLOSE, fd, -1, id);
    if (!s)
        return real_close(fd);
    int ret = real_close(fd);
    int err = errno;
    end(s, ret, err);
    errno = err;
    return ret;
}

/* ---- calls that give an fd number a new meaning: forget its description ---- */

static int fresh(int fd)
{
    forget(fd);
    return fd;
}

/* The descriptors' calls (lifetimes.c): recorded when selected, from the call's arguments a;
 * NULL when not recorded. */
static struct iot_slot *lifetime_begin(int call, int fd, const uint64_t *a)
{
    int32_t f = fd;
    int64_t req = -1;
    if (!region || !iot_call_wanted(call, mask))
        return NULL;
    int as = iot_lifetime_entry(call, a, &f, &req);  /* fcntl F_SETFD is written as fcntl_setfd */
    if (as < 0 || !TRACED(as))
        return NULL;
    return begin(as, f, req, f >= 0 ? describe(f) : 0);
}

static int lifetime_end(struct iot_slot *s, int call, int ret)
{
    int err = errno;
    int made = iot_lifetime_made(s ? s->r.call : call, ret);  /* fcntl F_SETFD makes none */
    if (made >= 0)
        forget(made);
    if (s) {
        if (call == IOT_CALL_SOCKET)
            s->r.fd = made;
        end(s, ret, err);
    }
    errno = err;
    return ret;
}

IOT_EXPORT int dup(int fd)
{
    NEED(real_dup);
    uint64_t a[6] = {(uint64_t)fd};
    struct iot_slot *s = lifetime_begin(IOT_CALL_DUP, fd, a);
    return lifetime_end(s, IOT_CALL_DUP, real_dup(fd));
}

IOT_EXPORT int dup2(int fd, int to)
{
    NEED(real_dup2);
    forget(to);
    uint64_t a[6] = {(uint64_t)fd, (uint64_t)to};
    struct iot_slot *s = lifetime_begin(IOT_CALL_DUP2, fd, a);
    return lifetime_end(s, IOT_CALL_DUP2, real_dup2(fd, to));
}

IOT_EXPORT int dup3(int fd, int to, int flags)
{
    NEED(real_dup3);
    forget(to);
    uint64_t a[6] = {(uint64_t)fd, (uint64_t)to, (uint64_t)flags};
    struct iot_slot *s = lifetime_begin(IOT_CALL_DUP3, fd, a);
    return lifetime_end(s, IOT_CALL_DUP3, real_dup3(fd, to, flags));
}

IOT_EXPORT int fcntl(int fd, int cmd, ...)
{
    NEED(real_fcntl);
    va_list ap;
    va_start(ap, cmd);
    unsigned long arg = va_arg(ap, unsigned long);  /* an int or a pointer: one register either way */
    va_end(ap);
    uint64_t a[6] = {(uint64_t)fd, (uint64_t)cmd, arg};
    struct iot_slot *s = lifetime_begin(IOT_CALL_FCNTL, fd, a);
    if (!s)
        return real_fcntl(fd, cmd, arg);
    return lifetime_end(s, IOT_CALL_FCNTL, real_fcntl(fd, cmd, arg));
}
LFS_ALIAS(int, fcntl64, (int fd, int cmd, ...), fcntl);

/* Recorded only as FIOCLEX and FIONCLEX (lifetimes.c): close-on-exec set or cleared. */
IOT_EXPORT int ioctl(int fd, unsigned long request, ...)
{
    NEED(real_ioctl);
    va_list ap;
    va_start(ap, request);
    void *arg = va_arg(ap, void *);  /* an int or a pointer: one register either way */
    va_end(ap);
    uint64_t a[6] = {(uint64_t)fd, (uint64_t)request, (uint64_t)(uintptr_t)arg};
    struct iot_slot *s = request == FIOCLEX || request == FIONCLEX ? lifetime_begin(IOT_CALL_IOCTL, fd, a) : NULL;
    if (!s)
        return real_ioctl(fd, request, arg);
    return lifetime_end(s, IOT_CALL_IOCTL, real_ioctl(fd, request, arg));
}

IOT_EXPORT int close_range(unsigned int first, unsigned int last, int flags)
{
    NEED(real_close_range);
    for (unsigned int fd = first; fd <= last && fd < FD_CACHE; fd++)
        forget((int)fd);
    uint64_t a[6] = {first, last, (uint64_t)flags};
    struct iot_slot *s = lifetime_begin(IOT_CALL_CLOSE_RANGE, (int)first, a);
    return lifetime_end(s, IOT_CALL_CLOSE_RANGE, real_close_range(first, last, flags));
}

IOT_EXPORT int socket(int domain, int type, int proto)
{
    NEED(real_socket);
    uint64_t a[6] = {(uint64_t)domain, (uint64_t)type, (uint64_t)proto};
    struct iot_slot *s = lifetime_begin(IOT_CALL_SOCKET, -1, a);
    return lifetime_end(s, IOT_CALL_SOCKET, real_socket(domain, type, proto));
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

/* open and openat: the mode argument is there only with O_CREAT or O_TMPFILE. */
#define OPEN_AT(dir, path, flags)                                                                  \
    do {                                                                                           \
        va_list ap;                                                                                \
        va_start(ap, flags);                                                                       \
        mode_t mode = open_mode(flags, ap);                                                        \
        va_end(ap);                                                                                \
        NEED(real_openat);                                                                         \
        return fresh(real_openat(dir, path, flags, mode));                                         \
    } while (0)

IOT_EXPORT int open(const char *path, int flags, ...)
{
    OPEN_AT(AT_FDCWD, path, flags);
}
LFS_ALIAS(int, open64, (const char *, int, ...), open);

IOT_EXPORT int openat(int dir, const char *path, int flags, ...)
{
    OPEN_AT(dir, path, flags);
}
LFS_ALIAS(int, openat64, (int, const char *, int, ...), openat);

/* ---- attaching to the region ---- */

/* The region open on fd, mapped; NULL when fd is not one (closed, or its number reused by the
 * program: only a file whose head says it is a region of its own size is taken). */
static struct iot_region *map_region(int fd)
{
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) || sb.st_size < (off_t)IOT_REGION_HEAD)
        return NULL;
    struct iot_region *r = mmap(NULL, (size_t)sb.st_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
    if (r == MAP_FAILED)
        return NULL;
    if (r->magic != IOT_REGION_MAGIC || r->size != (uint64_t)sb.st_size ||
        iot_region_size(r->nslots, r->ndescs) != r->size) {
        munmap(r, (size_t)sb.st_size);
        return NULL;
    }
    return r;
}

/* The inherited descriptor first; else the path, which the library opens and closes with raw
 * system calls so that it records nothing of its own. */
static struct iot_region *attach(void)
{
    const char *num = getenv("HWIOWRAP_FD"), *path = getenv("HWIOWRAP_REGION");
    struct iot_region *r = map_region(num ? atoi(num) : -1);
    if (!r && path) {
        int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDWR | O_CLOEXEC);
        r = map_region(fd);
        if (fd >= 0)
            syscall(SYS_close, fd);
    }
    return r;
}

/* fork: the child is a process image of its own (its own description ids, the fds it describes
 * again), and takes slots of its own: the parent goes on filling the ones it had claimed. */
static void after_fork_child(void)
{
    cur_pid = (pid_t)syscall(SYS_getpid);
    image = atomic_fetch_add_explicit(&region->images, 1, memory_order_relaxed) + 1;
    ts.next = ts.end = ts.run = 0;
    ts.tid = 0;
    pthread_mutex_init(&desc_lock, NULL);
    iot_desc_free(&descs);
    memset((void *)fd_cache, 0, sizeof(fd_cache));
}

__attribute__((constructor)) static void hwiowrap_init(void)
{
    resolve_all();
    if (!getenv("HWIOWRAP_FD") && !getenv("HWIOWRAP_REGION"))
        return;   /* not started by hw-iotrace */
    char bad[64];
    if (iot_calls_parse(getenv("HWIOWRAP_CALLS"), &mask, bad, sizeof(bad)) < 0) {
        dprintf(2, "libhwiowrap: unknown call '%s' in HWIOWRAP_CALLS; not tracing\n", bad);
        return;
    }
    struct iot_region *r = attach();
    if (!r) {
        dprintf(2, "libhwiowrap: cannot map hw-iotrace's region (HWIOWRAP_FD, HWIOWRAP_REGION); "
                "not tracing pid %d\n", (int)getpid());
        return;
    }
    page_size = (uintptr_t)sysconf(_SC_PAGESIZE);
    nslots = r->nslots;
    ndescs = r->ndescs;
    slots = iot_region_slots(r, ndescs);
    desc_slots = iot_region_descs(r);
    use_tsc = (int)r->use_tsc;
    cur_pid = (pid_t)syscall(SYS_getpid);
    image = atomic_fetch_add_explicit(&r->images, 1, memory_order_relaxed) + 1;
    pthread_atfork(NULL, NULL, after_fork_child);
    region = r;  /* last: the wrappers trace from here on */
}
