/* The ptrace backend: PTRACE_SEIZE, follows fork/vfork/clone, and stops only on the selected
 * calls thanks to a seccomp filter installed in the command before exec (entry: the seccomp
 * stop; exit: a PTRACE_SYSCALL exit stop). Attached to a running process, where no filter can be
 * installed, it stops on every call (PTRACE_SYSCALL) and keeps the selected ones. Stamps are
 * CLOCK_MONOTONIC, taken when waitpid reports the stop. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hwclock.h"
#include "hwgate.h"
#include "iotrace.h"

#define REC_CAP 65536
#define OUT_BUF (1 << 20)
#define MAX_IOV 1024

struct tracee {
    pid_t tid, tgid;
    int pidfd;                /* of tgid, for pidfd_getfd; -1 until needed */
    int in_call;              /* between the entry and the exit of a selected call */
    int own_record;           /* the call in progress is written (not only the fds it receives) */
    uint64_t msg_addr, msg_n; /* recvmsg's msghdr, recvmmsg's vector and length: SCM_RIGHTS at exit */
    int msg_cloexec;          /* MSG_CMSG_CLOEXEC */
    struct iot_rec rec;        /* the call in progress */
};

struct fdslot {
    uint64_t key;             /* tgid << 32 | fd; 0 = empty */
    uint32_t desc_id;         /* 0 = not described (or invalidated) */
};

struct tracer {
    const struct iot_trace_opts *o;
    struct iot_trace_stats *st;
    int seccomp;
    pid_t main_pid;
    int detaching;            /* -p or no filter: detach on a stop signal */
    int killing;
    int stop_count_seen;
    int report_fd;            /* the command's report on its filter, until its first stop */
    int header_done;
    int64_t t_start_ns;
    struct tracee *t;
    size_t nt, capt;
    struct fdslot *fds;
    size_t fcap, fused;
    struct iot_desc_tab descs;
    struct iot_rec *recs;
    size_t nrec;
    int out_fd;
    char *out;
    size_t out_len;
    int write_err;
};

/* ---- waking the loop from a signal handler ---- */

static volatile sig_atomic_t wake_pid, wake_mode, wake_kill;

void iot_trace_set_wake(pid_t pid, int mode, int kill_on_exit)
{
    wake_mode = IOT_WAKE_NONE;
    wake_pid = pid;
    wake_kill = kill_on_exit;
    wake_mode = mode;
}

void iot_trace_signal(int sig, int count)
{
    pid_t pid = (pid_t)wake_pid;
    if (pid <= 0)
        return;
    if (wake_mode == IOT_WAKE_FORWARD)
        kill(pid, wake_kill || count > 1 ? SIGKILL : sig);
    else if (wake_mode == IOT_WAKE_INTERRUPT)
        ptrace(PTRACE_INTERRUPT, pid, 0, 0);
}

/* ---- tracees ---- */

static pid_t read_tgid(pid_t tid)
{
    char path[64], line[128];
    snprintf(path, sizeof(path), "/proc/%d/status", tid);
    FILE *f = fopen(path, "re");
    pid_t tgid = tid;
    if (!f)
        return tid;
    while (fgets(line, sizeof(line), f))
        if (!strncmp(line, "Tgid:", 5)) {
            tgid = (pid_t)atoi(line + 5);
            break;
        }
    fclose(f);
    return tgid;
}

static struct tracee *find_tracee(struct tracer *tr, pid_t tid)
{
    for (size_t i = 0; i < tr->nt; i++)
        if (tr->t[i].tid == tid)
            return &tr->t[i];
    return NULL;
}

static struct tracee *add_tracee(struct tracer *tr, pid_t tid)
{
    if (tr->nt == tr->capt) {
        size_t cap = tr->capt ? tr->capt * 2 : 16;
        struct tracee *t = realloc(tr->t, cap * sizeof(*t));
        if (!t)
            return NULL;
        tr->t = t;
        tr->capt = cap;
    }
    struct tracee *t = &tr->t[tr->nt++];
    memset(t, 0, sizeof(*t));
    t->tid = tid;
    t->tgid = read_tgid(tid);
    t->pidfd = -1;
    tr->st->tracees++;
    return t;
}

static void remove_tracee(struct tracer *tr, struct tracee *t)
{
    if (t->pidfd >= 0)
        close(t->pidfd);
    *t = tr->t[--tr->nt];
}

/* ---- the fd description cache, keyed by (tgid, fd) ---- */

static uint64_t fd_key(pid_t tgid, int fd)
{
    return ((uint64_t)(uint32_t)tgid << 32) | (uint32_t)fd;
}

static struct fdslot *fd_slot(struct tracer *tr, uint64_t key, int create)
{
    if (create && (tr->fused + 1) * 2 > tr->fcap) {
        size_t cap = tr->fcap ? tr->fcap * 2 : 256;
        struct fdslot *n = calloc(cap, sizeof(*n));
        if (!n)
            return NULL;
        for (size_t i = 0; i < tr->fcap; i++) {
            if (!tr->fds[i].key)
                continue;
            size_t j = (tr->fds[i].key * 0x9E3779B97F4A7C15ull >> 20) & (cap - 1);
            while (n[j].key)
                j = (j + 1) & (cap - 1);
            n[j] = tr->fds[i];
        }
        free(tr->fds);
        tr->fds = n;
        tr->fcap = cap;
    }
    if (!tr->fcap)
        return NULL;
    size_t j = (key * 0x9E3779B97F4A7C15ull >> 20) & (tr->fcap - 1);
    while (tr->fds[j].key) {
        if (tr->fds[j].key == key)
            return &tr->fds[j];
        j = (j + 1) & (tr->fcap - 1);
    }
    if (!create)
        return NULL;
    tr->fds[j].key = key;
    tr->fds[j].desc_id = 0;
    tr->fused++;
    return &tr->fds[j];
}

static void fd_forget(struct tracer *tr, pid_t tgid, int fd)
{
    struct fdslot *s = fd_slot(tr, fd_key(tgid, fd), 0);
    if (s)
        s->desc_id = 0;
}

static void fd_forget_process(struct tracer *tr, pid_t tgid)
{
    for (size_t i = 0; i < tr->fcap; i++)
        if (tr->fds[i].key >> 32 == (uint32_t)tgid)
            tr->fds[i].desc_id = 0;
}

/* The description id of fd in the tracee; described once and cached (unless incomplete). */
static uint32_t fd_desc(struct tracer *tr, struct tracee *t, int fd, int may_resolve)
{
    if (fd < 0)
        return 0;
    struct fdslot *s = fd_slot(tr, fd_key(t->tgid, fd), 0);
    if (s && s->desc_id)
        return s->desc_id;
    if (!may_resolve)
        return 0;
    if (t->pidfd < 0)
        t->pidfd = (int)syscall(SYS_pidfd_open, t->tgid, 0);
    int local = t->pidfd >= 0 ? (int)syscall(SYS_pidfd_getfd, t->pidfd, fd, 0) : -1;
    char link[64], desc[IOT_DESC_MAX];
    int complete = 1;
    snprintf(link, sizeof(link), "/proc/%d/fd/%d", t->tgid, fd);
    int kind = iot_fd_describe(local, link, desc, sizeof(desc), &complete);
    if (local >= 0)
        close(local);
    if (kind == IOT_FD_UNKNOWN) {
        tr->st->resolve_failures++;
        return 0;
    }
    uint32_t id = iot_desc_intern(&tr->descs, kind, desc);
    if (id && complete) {
        s = fd_slot(tr, fd_key(t->tgid, fd), 1);
        if (s)
            s->desc_id = id;
    }
    return id;
}

/* ---- output ---- */

static void out_flush(struct tracer *tr)
{
    size_t off = 0;
    while (off < tr->out_len && !tr->write_err) {
        ssize_t w = write(tr->out_fd, tr->out + off, tr->out_len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            tr->write_err = w < 0 ? errno : EIO;
        else
            off += (size_t)w;
    }
    tr->out_len = 0;
}

static void write_header(struct tracer *tr)
{
    char extra[128];
    snprintf(extra, sizeof(extra), "# mode: %s\n# t_start_ns: %lld\n", tr->seccomp ? "seccomp" : "syscall-stops",
             (long long)tr->t_start_ns);
    int n = iot_tsv_header(tr->out + tr->out_len, OUT_BUF - tr->out_len, "ptrace", tr->o->mask, extra);
    tr->out_len += n > 0 ? (size_t)n : 0;
    tr->header_done = 1;
}

static void recs_flush(struct tracer *tr)
{
    if (!tr->header_done)  /* the mode is known from the command's first stop, before any record */
        write_header(tr);
    for (size_t i = 0; i < tr->nrec; i++) {
        const struct iot_rec *r = &tr->recs[i];
        if (tr->out_len + IOT_LINE_MAX > OUT_BUF)
            out_flush(tr);
        uint32_t id = r->desc_id <= tr->descs.n ? r->desc_id : 0;
        tr->out_len += iot_rec_format(tr->out + tr->out_len, r, id ? tr->descs.kind[id] : IOT_FD_UNKNOWN,
                                      id ? tr->descs.desc[id] : "");
        if (!tr->write_err)
            tr->st->records_written++;
    }
    tr->nrec = 0;
    out_flush(tr);
}

static void push_rec(struct tracer *tr, const struct iot_rec *r)
{
    if (tr->nrec == REC_CAP)
        recs_flush(tr);
    tr->recs[tr->nrec++] = *r;
}

/* ---- the calls ---- */

static int peek(pid_t tid, uint64_t addr, void *buf, size_t len)
{
    struct iovec local = {buf, len}, remote = {(void *)(uintptr_t)addr, len};
    return process_vm_readv(tid, &local, 1, &remote, 1, 0) == (ssize_t)len ? 0 : -1;
}

static int64_t iov_sum(pid_t tid, uint64_t addr, uint64_t cnt)
{
    struct iovec iov[64];
    int64_t sum = 0;
    if (cnt > MAX_IOV)
        return -1;
    while (cnt) {
        size_t n = cnt < 64 ? cnt : 64;
        if (peek(tid, addr, iov, n * sizeof(iov[0])) < 0)
            return -1;
        for (size_t i = 0; i < n; i++)
            sum += (int64_t)iov[i].iov_len;
        cnt -= n;
        addr += n * sizeof(iov[0]);
    }
    return sum;
}

static int64_t req_bytes(pid_t tid, const struct iot_call *c, const uint64_t *args)
{
    switch (c->bytes) {
    case IOT_BYTES_ARG:
        return (int64_t)args[c->arg_a];
    case IOT_BYTES_IOV:
        return iov_sum(tid, args[c->arg_a], args[c->arg_b]);
    case IOT_BYTES_MSG: {
        struct msghdr m;
        if (peek(tid, args[c->arg_a], &m, sizeof(m)) < 0)
            return -1;
        return iov_sum(tid, (uintptr_t)m.msg_iov, m.msg_iovlen);
    }
    case IOT_BYTES_MMSG: {
        uint64_t vlen = args[c->arg_b] > MAX_IOV ? MAX_IOV : args[c->arg_b];
        int64_t sum = 0;
        for (uint64_t i = 0; i < vlen; i++) {
            struct mmsghdr m;
            if (peek(tid, args[c->arg_a] + i * sizeof(m), &m, sizeof(m)) < 0)
                return -1;
            int64_t s = iov_sum(tid, (uintptr_t)m.msg_hdr.msg_iov, m.msg_hdr.msg_iovlen);
            if (s < 0)
                return -1;
            sum += s;
        }
        return sum;
    }
    case IOT_BYTES_NONE:
    case IOT_BYTES_FLAGS:  /* set by iot_lifetime_entry */
        break;
    }
    return -1;
}

static void bookkeep(struct tracer *tr, struct tracee *t, int code, const uint64_t *args);

static void on_entry(struct tracer *tr, struct tracee *t, int idx, const uint64_t *args, int64_t now)
{
    const struct iot_call *c = &iot_calls[idx];
    struct iot_rec *r = &t->rec;
    memset(r, 0, sizeof(*r));
    r->t_enter_ns = now;
    r->pid = t->tgid;
    r->tid = t->tid;
    r->call = (uint8_t)idx;
    r->fd = c->fd_arg >= 0 ? (int32_t)args[c->fd_arg] : -1;
    r->req_bytes = req_bytes(t->tid, c, args);
    int as = iot_lifetime_entry(idx, args, &r->fd, &r->req_bytes);
    if (as < 0)
        return;  /* an fcntl or ioctl that makes or marks no descriptor (attached: every call stops) */
    r->call = (uint8_t)as;
    t->own_record = (tr->o->mask & (1u << as)) != 0;
    t->msg_addr = t->msg_n = 0;
    if ((idx == IOT_CALL_RECVMSG || idx == IOT_CALL_RECVMMSG) && (tr->o->mask & (1u << IOT_CALL_SCM_RIGHTS))) {
        t->msg_addr = args[1];
        t->msg_n = idx == IOT_CALL_RECVMMSG ? args[2] : 1;
        t->msg_cloexec = ((idx == IOT_CALL_RECVMMSG ? args[3] : args[2]) & MSG_CMSG_CLOEXEC) != 0;
    } else if (!t->own_record) {
        return;
    }
    if (idx == IOT_CALL_DUP2 || idx == IOT_CALL_DUP3)
        bookkeep(tr, t, IOT_BK_DUP2, args);
    else if (idx == IOT_CALL_CLOSE_RANGE)
        bookkeep(tr, t, IOT_BK_CLOSE_RANGE, args);
    if (idx == IOT_CALL_CLOSE) {  /* describe it while it exists */
        r->desc_id = fd_desc(tr, t, r->fd, 1);
        fd_forget(tr, t->tgid, r->fd);
    }
    t->in_call = 1;
    tr->st->calls_seen += (uint64_t)t->own_record;
}

/* The descriptors a recvmsg or recvmmsg received (SCM_RIGHTS), read from the control buffers
 * the kernel filled: each a record scm_rights at the call's exit, its fd the new descriptor, its
 * req_bytes the close-on-exec flag (MSG_CMSG_CLOEXEC). A buffer that cannot be read (or is larger
 * than 4 KiB: its first 4 KiB are read) leaves its descriptors to the socket samples. */
static void received_fds(struct tracer *tr, struct tracee *t, uint64_t messages, int64_t now)
{
    for (uint64_t i = 0; i < messages && i < t->msg_n && i < MAX_IOV; i++) {
        struct msghdr m;
        uint64_t at = t->rec.call == IOT_CALL_RECVMMSG ? t->msg_addr + i * sizeof(struct mmsghdr) : t->msg_addr;
        if (peek(t->tid, at, &m, sizeof(m)) < 0 || !m.msg_control || m.msg_controllen < sizeof(struct cmsghdr))
            continue;
        char control[4096] __attribute__((aligned(8)));
        size_t len = m.msg_controllen < sizeof(control) ? m.msg_controllen : sizeof(control);
        if (peek(t->tid, (uintptr_t)m.msg_control, control, len) < 0)
            continue;
        int fds[sizeof(control) / sizeof(int)];
        int n = iot_scm_rights(control, len, fds, (int)(sizeof(fds) / sizeof(fds[0])));
        for (int k = 0; k < n; k++) {
            struct iot_rec r = {.t_enter_ns = now, .t_exit_ns = now, .pid = t->tgid, .tid = t->tid, .fd = fds[k],
                                .req_bytes = t->msg_cloexec, .result = fds[k], .call = IOT_CALL_SCM_RIGHTS};
            fd_forget(tr, t->tgid, fds[k]);
            r.desc_id = fd_desc(tr, t, fds[k], 1);
            push_rec(tr, &r);
            tr->st->calls_seen++;
        }
    }
}

static void on_exit_stop(struct tracer *tr, struct tracee *t, int64_t rval, int64_t now)
{
    struct iot_rec *r = &t->rec;
    r->t_exit_ns = now;
    r->result = rval;
    /* ERESTARTSYS, ERESTARTNOINTR, ERESTARTNOHAND, ERESTART_RESTARTBLOCK: a signal interrupted
     * it; the program never sees this value (it dies, gets EINTR, or the call restarts as a new
     * record), so the call is written as unfinished */
    if (rval == -512 || rval == -513 || rval == -514 || rval == -516) {
        r->unfinished = 1;
        tr->st->unfinished += (uint64_t)t->own_record;
    }
    if (r->call == IOT_CALL_CONNECT)
        fd_forget(tr, t->tgid, r->fd);
    int made = iot_lifetime_made(r->call, rval);
    if (made >= 0) {  /* a number a process sharing the table (CLONE_FILES) may have freed unseen */
        fd_forget(tr, t->tgid, made);
        if (r->call == IOT_CALL_SOCKET)
            r->fd = made;
    }
    if (r->call != IOT_CALL_CLOSE && r->call != IOT_CALL_CLOSE_RANGE)
        r->desc_id = fd_desc(tr, t, r->fd, 1);
    if (t->own_record)
        push_rec(tr, r);
    if (t->msg_addr && rval >= 0 && !r->unfinished)
        received_fds(tr, t, r->call == IOT_CALL_RECVMMSG ? (uint64_t)rval : 1, now);
    t->in_call = 0;
}

/* The call in progress when the tracee died or the tracer stopped watching it. */
static void end_unfinished(struct tracer *tr, struct tracee *t, int64_t now, int alive)
{
    if (!t->in_call)
        return;
    t->in_call = 0;
    if (!t->own_record)
        return;
    struct iot_rec *r = &t->rec;
    r->t_exit_ns = now;
    r->unfinished = 1;
    tr->st->unfinished++;
    if (r->call != IOT_CALL_CLOSE)
        r->desc_id = fd_desc(tr, t, r->fd, alive);
    push_rec(tr, r);
}

/* ---- the stop loop ---- */

static void resume(struct tracer *tr, struct tracee *t, int sig)
{
    int req = (!tr->seccomp || t->in_call) ? PTRACE_SYSCALL : PTRACE_CONT;
    ptrace(req, t->tid, 0, sig);  /* ESRCH: it died meanwhile; its exit is reported next */
}

static void detach(struct tracer *tr, struct tracee *t, int sig, int64_t now)
{
    end_unfinished(tr, t, now, 1);
    ptrace(PTRACE_DETACH, t->tid, 0, sig);
    remove_tracee(tr, t);
}

/* close, dup2, dup3, close_range: the fd numbers they touch may name something else afterwards */
static void bookkeep(struct tracer *tr, struct tracee *t, int code, const uint64_t *args)
{
    if (code == IOT_BK_CLOSE)
        fd_forget(tr, t->tgid, (int)args[0]);
    else if (code == IOT_BK_URING_SETUP)
        tr->st->uring_setups++;
    else if (code == IOT_BK_DUP2 || code == IOT_BK_DUP3)
        fd_forget(tr, t->tgid, (int)args[1]);
    else if (code == IOT_BK_CLOSE_RANGE)
        for (size_t i = 0; i < tr->fcap; i++) {
            uint64_t k = tr->fds[i].key;
            uint32_t fd = (uint32_t)k;
            if (k && k >> 32 == (uint32_t)t->tgid && fd >= (uint32_t)args[0] && fd <= (uint32_t)args[1])
                tr->fds[i].desc_id = 0;
        }
}

static void handle_syscall_stop(struct tracer *tr, struct tracee *t, int64_t now, int seccomp_stop)
{
    struct __ptrace_syscall_info info;
    memset(&info, 0, sizeof(info));
    if (ptrace(PTRACE_GET_SYSCALL_INFO, t->tid, sizeof(info), &info) <= 0)
        return;
    if (info.op == PTRACE_SYSCALL_INFO_SECCOMP && seccomp_stop) {
        int idx = (int)(info.seccomp.ret_data & 0xffff);
        if (idx >= IOT_BOOKKEEP && idx < IOT_BOOKKEEP + IOT_NBK)
            bookkeep(tr, t, idx - IOT_BOOKKEEP, info.seccomp.args);
        else if (iot_call_wanted(idx, tr->o->mask))
            on_entry(tr, t, idx, info.seccomp.args, now);
    } else if (info.op == PTRACE_SYSCALL_INFO_ENTRY && !tr->seccomp) {
        int idx = iot_call_by_nr((long)info.entry.nr);
        if (iot_call_wanted(idx, tr->o->mask)) {
            on_entry(tr, t, idx, info.entry.args, now);
        } else {
            int code = iot_bookkeep_by_nr((long)info.entry.nr, tr->o->mask);
            if (code >= 0)
                bookkeep(tr, t, code, info.entry.args);
        }
    } else if (info.op == PTRACE_SYSCALL_INFO_EXIT && t->in_call) {
        on_exit_stop(tr, t, info.exit.rval, now);
    }
}

static int is_stop_signal(int sig)
{
    return sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU;
}

/* At the command's first stop (its exec, or a traced call if exec failed): did the child say
 * that the filter could not be installed? It wrote that before exec, so it is there by now. */
static void read_report(struct tracer *tr)
{
    char c;
    if (read(tr->report_fd, &c, 1) == 1 && c == 'N') {
        tr->seccomp = 0;
        tr->st->seccomp = 0;
    }
    close(tr->report_fd);
    tr->report_fd = -1;
}

static void handle(struct tracer *tr, pid_t tid, int status, int64_t now)
{
    struct tracee *t = find_tracee(tr, tid);
    if (WIFEXITED(status) || WIFSIGNALED(status)) {
        if (tid == tr->main_pid)
            tr->st->exit_status = status;
        if (t) {
            end_unfinished(tr, t, now, 0);
            if (t->tid == t->tgid)
                fd_forget_process(tr, t->tgid);
            remove_tracee(tr, t);
        }
        return;
    }
    if (!WIFSTOPPED(status))
        return;
    if (!t && !(t = add_tracee(tr, tid))) {
        ptrace(PTRACE_DETACH, tid, 0, 0);
        return;
    }
    tr->st->stops++;
    if (tr->report_fd >= 0 && tid == tr->main_pid)
        read_report(tr);
    int sig = WSTOPSIG(status), event = (unsigned)status >> 16;
    int inject = 0;
    if (sig == (SIGTRAP | 0x80)) {
        handle_syscall_stop(tr, t, now, 0);
    } else if (event == PTRACE_EVENT_SECCOMP) {
        handle_syscall_stop(tr, t, now, 1);
    } else if (event == PTRACE_EVENT_STOP) {
        if (is_stop_signal(sig) && !tr->detaching) {  /* group-stop: stay stopped until SIGCONT */
            ptrace(PTRACE_LISTEN, tid, 0, 0);
            return;
        }
    } else if (event == PTRACE_EVENT_EXEC) {
        fd_forget_process(tr, t->tgid);  /* close-on-exec fds are gone */
        t->in_call = 0;
    } else if (event == 0) {
        inject = sig;  /* signal-delivery-stop: deliver it */
    }
    if (tr->detaching) {
        detach(tr, t, inject, now);
        return;
    }
    resume(tr, t, inject);
}

static int seize(struct tracer *tr, pid_t tid, int interrupt)
{
    long opts = PTRACE_O_TRACESYSGOOD | PTRACE_O_TRACEEXEC;
    if (tr->o->follow || !tr->o->npids)
        opts |= PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK | PTRACE_O_TRACECLONE;
    if (tr->seccomp || !tr->o->npids)
        opts |= PTRACE_O_TRACESECCOMP;
    if (tr->o->kill_on_exit)
        opts |= PTRACE_O_EXITKILL;
    if (ptrace(PTRACE_SEIZE, tid, 0, opts) < 0)
        return -errno;
    if (!add_tracee(tr, tid))
        return -ENOMEM;
    if (interrupt)
        ptrace(PTRACE_INTERRUPT, tid, 0, 0);
    return 0;
}

static void explain_attach(pid_t pid, int code, struct hw_err *err)
{
    char path[64], line[128];
    int tracer = 0;
    snprintf(path, sizeof(path), "/proc/%d/status", pid);
    FILE *f = fopen(path, "re");
    if (f) {
        while (fgets(line, sizeof(line), f))
            if (!strncmp(line, "TracerPid:", 10))
                tracer = atoi(line + 10);
        fclose(f);
    }
    int scope = -1;
    f = fopen("/proc/sys/kernel/yama/ptrace_scope", "re");
    if (f) {
        if (fscanf(f, "%d", &scope) != 1)
            scope = -1;
        fclose(f);
    }
    if (code == -ESRCH)
        hw_seterr(err, "failed to attach to pid %d: no such process", pid);
    else if (code == -EPERM && tracer)
        hw_seterr(err, "failed to attach to pid %d: already traced by pid %d", pid, tracer);
    else if (code == -EPERM && scope >= 1)
        hw_seterr(err, "failed to attach to pid %d: not permitted (kernel.yama.ptrace_scope = %d; "
                  "run as root or lower it)", pid, scope);
    else if (code == -EPERM)
        hw_seterr(err, "failed to attach to pid %d: not permitted (another user's process, "
                  "or it is not dumpable)", pid);
    else
        hw_seterr(err, "failed to attach to pid %d: %s", pid, strerror(-code));
}

static void attach_children(struct tracer *tr, pid_t pid);

/* Seizes every thread of pid; scans /proc/pid/task until no new thread appears. */
static int attach_all(struct tracer *tr, pid_t pid, struct hw_err *err)
{
    int r = seize(tr, pid, 1);
    if (r < 0) {
        explain_attach(pid, r, err);
        return r;
    }
    for (int round = 0, added = 1; added && round < 10; round++) {
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/task", pid);
        DIR *d = opendir(path);
        if (!d)
            break;
        added = 0;
        struct dirent *e;
        while ((e = readdir(d))) {
            pid_t tid = (pid_t)atoi(e->d_name);
            if (tid > 0 && !find_tracee(tr, tid) && seize(tr, tid, 1) == 0)
                added = 1;
        }
        closedir(d);
    }
    if (tr->o->follow)
        attach_children(tr, pid);
    return 0;
}

/* With --follow, the processes pid forked before the attach too (a server's workers), each with
 * its threads and children: the ones it forks later are followed by the ptrace options. A child
 * that cannot be seized (gone, traced by another) is left out, not an error. */
static void attach_children(struct tracer *tr, pid_t pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task", pid);
    DIR *d = opendir(path);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        pid_t tid = (pid_t)atoi(e->d_name);
        char cpath[96];
        snprintf(cpath, sizeof(cpath), "/proc/%d/task/%d/children", pid, tid);
        FILE *f = tid > 0 ? fopen(cpath, "re") : NULL;
        int child;
        while (f && fscanf(f, "%d", &child) == 1) {
            struct hw_err ignored = {0};
            if (!find_tracee(tr, child))
                attach_all(tr, child, &ignored);
        }
        if (f)
            fclose(f);
    }
    closedir(d);
}

/* In the command, once it is seized: the seccomp filter, then exec. Only a failure to install the
 * filter is reported, before there is one (the filter makes write stop); the tracer reads the
 * report at the command's first stop (exec). */
struct filter_setup {
    const struct iot_trace_opts *o;
    int report_fd;
};

static int install_filter(void *arg)
{
    const struct filter_setup *f = arg;
    char no = 'N';
    int r = f->o->no_seccomp ? -EPERM : iot_seccomp_install(f->o->mask);
    if (r < 0) {
        if (!f->o->no_seccomp)
            dprintf(STDERR_FILENO, "hw-iotrace: warning: failed to install the seccomp filter: %s; "
                    "stopping on every system call\n", strerror(-r));
        if (write(f->report_fd, &no, 1) != 1)
            return -1;
    }
    return 0;
}

/* Starts the command behind a gate; the gate opens once it is seized. */
static int start_command(struct tracer *tr, struct hw_err *err)
{
    int report[2];
    struct hw_gate gate;
    if (pipe2(report, O_CLOEXEC | O_NONBLOCK) < 0) {
        hw_seterr(err, "failed to create pipe: %s", strerror(errno));
        return -errno;
    }
    struct filter_setup setup = {tr->o, report[1]};
    if (hw_gate_start(&gate, "hw-iotrace", tr->o->argv, install_filter, &setup, err) < 0) {
        close(report[0]);
        close(report[1]);
        return -EAGAIN;
    }
    close(report[1]);
    pid_t pid = gate.pid;
    tr->main_pid = pid;
    tr->seccomp = 1;  /* until the child reports otherwise (read_report) */
    tr->st->seccomp = 1;
    int r = seize(tr, pid, 0);
    if (r < 0) {
        hw_gate_shut(&gate);
        close(report[0]);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        hw_seterr(err, "failed to seize pid %d: %s", pid, strerror(-r));
        return r;
    }
    tr->report_fd = report[0];
    hw_gate_open(&gate, NULL);   /* a command gone already shows at its first wait */
    return 0;
}


/* SIGINT/SIGTERM: an attached process is detached; a command gets the signal (passed on by the
 * handler, iot_trace_signal) and tracing goes on until it exits, since a filtered tracee cannot
 * run untraced (its traced calls would fail with ENOSYS); a second signal, or --kill-on-exit,
 * kills the tracees. */
static void on_stop_request(struct tracer *tr)
{
    int count = (int)*tr->o->stop_count;
    if (count == tr->stop_count_seen)
        return;
    tr->stop_count_seen = count;
    if (tr->o->kill_on_exit || (count > 1 && !tr->o->npids)) {
        if (!tr->killing)
            for (size_t i = 0; i < tr->nt; i++)
                kill(tr->t[i].tgid, SIGKILL);
        tr->killing = 1;
        return;
    }
    if (tr->o->npids > 0) {
        if (!tr->detaching)
            for (size_t i = 0; i < tr->nt; i++)
                ptrace(PTRACE_INTERRUPT, tr->t[i].tid, 0, 0);
        tr->detaching = 1;
    }
}

int iot_trace_run(const struct iot_trace_opts *o, struct iot_trace_stats *st, struct hw_err *err)
{
    struct tracer tr = {.o = o, .st = st, .out_fd = -1, .report_fd = -1};
    int ret = 0;
    memset(st, 0, sizeof(*st));
    st->exit_status = -1;
    tr.recs = malloc(REC_CAP * sizeof(*tr.recs));
    tr.out = malloc(OUT_BUF);
    if (!tr.recs || !tr.out) {
        hw_seterr(err, "failed to allocate buffers: %s", strerror(ENOMEM));
        ret = -ENOMEM;
        goto cleanup;
    }
    tr.out_fd = open(o->out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (tr.out_fd < 0) {
        ret = -errno;
        hw_seterr(err, "failed to open %s: %s", o->out_path, strerror(errno));
        goto cleanup;
    }
    tr.t_start_ns = hw_mono_ns();
    if (o->npids > 0) {
        tr.detaching = 0;
        tr.seccomp = 0;
        for (int i = 0; i < o->npids && ret == 0; i++)
            ret = attach_all(&tr, o->pids[i], err);
        if (ret < 0)
            goto cleanup;
        iot_trace_set_wake(o->pids[0], IOT_WAKE_INTERRUPT, o->kill_on_exit);
        if (o->log)
            fprintf(o->log, "hw-iotrace: warning: attached to a running process: no seccomp filter "
                    "can be installed, so it stops on every system call (slower)\n");
    } else {
        ret = start_command(&tr, err);
        if (ret < 0)
            goto cleanup;
        iot_trace_set_wake(tr.main_pid, IOT_WAKE_FORWARD, o->kill_on_exit);
        if (o->stop_count && *o->stop_count)  /* a signal that came before the line above */
            iot_trace_signal((int)*o->stop_sig, (int)*o->stop_count);
    }

    while (tr.nt > 0) {
        if (o->stop_count && *o->stop_count != tr.stop_count_seen)
            on_stop_request(&tr);
        int status;
        pid_t tid = waitpid(-1, &status, __WALL);
        int64_t now = hw_mono_ns();
        if (tid < 0) {
            if (errno == EINTR)
                continue;
            if (errno == ECHILD)
                break;
            ret = -errno;
            hw_seterr(err, "failed to wait for the tracees: %s", strerror(errno));
            break;
        }
        handle(&tr, tid, status, now);
    }
    /* tracees not reported gone (ECHILD): their open calls end here */
    int64_t now = hw_mono_ns();
    while (tr.nt > 0)
        detach(&tr, &tr.t[tr.nt - 1], 0, now);
    iot_trace_set_wake(0, IOT_WAKE_NONE, 0);
    recs_flush(&tr);
    /* the last line: the trailer when every record is in the file, else what went wrong */
    if (!tr.write_err) {
        char *end = tr.out + tr.out_len;  /* empty: recs_flush flushed it */
        tr.out_len += ret ? hw_sys_damaged(end, err->msg) : hw_sys_trailer(end, st->records_written);
        out_flush(&tr);
    }
    if (tr.write_err && !ret) {
        ret = -tr.write_err;
        hw_seterr(err, "failed to write %s: %s", o->out_path, strerror(tr.write_err));
    }
cleanup:
    if (tr.out_fd >= 0 && close(tr.out_fd) < 0 && !ret) {
        ret = -errno;
        hw_seterr(err, "failed to write %s: %s", o->out_path, strerror(errno));
    }
    while (tr.nt > 0)
        remove_tracee(&tr, &tr.t[tr.nt - 1]);
    if (tr.report_fd >= 0)
        close(tr.report_fd);
    free(tr.t);
    free(tr.fds);
    free(tr.recs);
    free(tr.out);
    iot_desc_free(&tr.descs);
    return ret;
}
