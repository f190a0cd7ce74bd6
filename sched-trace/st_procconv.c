/* The ring's raw file (/proc/schedtrace's lines as read) into sched.tsv and syscalls.tsv, the
 * tracefs backend's files: a first pass checks every line and indexes the records, which are
 * then written in time order (the kernel stamps a record before it takes the ring's lock, so
 * the ring's order can differ from the stamps' by the time a task waits for the lock or is
 * preempted in between; ties keep the ring's order). System calls pair sys_enter with the next
 * sys_exit of the same thread, as st_convert.c does for tracefs. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hwsyscalls.h"
#include "st_internal.h"
#include "st_proc.h"

#define SCHED_COLUMNS "t_ns\tcpu\tevent\tpid\tcomm\t" \
    "prev_comm\tprev_pid\tprev_prio\tprev_state\tnext_comm\tnext_pid\tnext_prio\t" \
    "prev_tgid\tprev_runtime_ns\tprev_sigpending\tprev_user_ip\tpreempt\tnext_tgid\tnext_runtime_ns\t" \
    "next_vruntime\tnext_deadline\tqueue_vruntime\tnr_running\tcfs_queued\trt_running\tnet_backlog\t" \
    "tcp_mem_pages\n"
#define SCHED_TYPES "int int str int str " "str int int int str int int " \
    "int uint str str int int uint uint uint uint int int int int int"

struct entry {
    unsigned long long t;
    size_t off;                     /* of the line in the file: the ring's order */
};

struct call {
    int tid;                        /* 0: empty slot */
    int active, pid, nr;
    long long t_enter, fd, req;
    char name[24];
};

struct conv {
    const char *raw;
    const char *data;
    size_t size;
    struct entry *idx;
    size_t n, cap;
    struct st_proc_stats *st;
    FILE *sched, *sys;
    struct call *slots;
    size_t slot_cap, slot_used;
    const struct st_proc_probe *probes;
    int nprobes;
    long long probe_hit[64];
};

static void init_stats(struct st_proc_stats *st)
{
    memset(st, 0, sizeof(*st));
    st->marker_trace_ns[0] = st->marker_trace_ns[1] = ST_UNKNOWN;
    st->marker_mono_ns[0] = st->marker_mono_ns[1] = ST_UNKNOWN;
}

static void damage(struct conv *c, long long line, const char *why)
{
    c->st->damaged = 1;
    snprintf(c->st->damage, sizeof(c->st->damage), "%s:%lld: %s", c->raw, line, why);
}

static void header_seen(struct st_proc_stats *st, const struct st_proc_header *h)
{
    if (!st->have_header)
        st->first = *h;
    else if (h->written < st->last.written || h->lost < st->last.lost)
        st->resets++;   /* cleared or resized while being read: what went before is not counted */
    st->last = *h;
    st->have_header = 1;
    st->headers++;
}

static int push(struct conv *c, unsigned long long t, size_t off)
{
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 65536;
        struct entry *grown = realloc(c->idx, cap * sizeof(*grown));
        if (!grown)
            return -1;
        c->idx = grown;
        c->cap = cap;
    }
    c->idx[c->n].t = t;
    c->idx[c->n++].off = off;
    return 0;
}

/* Pass 1: every line parsed, headers counted, records indexed; stops at the first damage. */
static int scan(struct conv *c, struct hw_err *err)
{
    struct st_proc_stats *st = c->st;
    struct st_proc_rec rec;
    char why[400];
    size_t off = 0;
    long long line = 0;
    while (off < c->size) {
        const char *start = c->data + off, *nl = memchr(start, '\n', c->size - off);
        line++;
        if (!nl) {
            damage(c, line, "expected a newline at the end of the line (the file is cut)");
            return 0;
        }
        if (st_proc_parse_line(start, (size_t)(nl - start), &rec, why, sizeof(why)) < 0) {
            damage(c, line, why);
            return 0;
        }
        if (rec.kind == ST_PROC_HEADER) {
            header_seen(st, &rec.u.hdr);
        } else if (!st->have_header) {
            damage(c, line, "expected the header line '# schedtrace format=1 ...' before the first record");
            return 0;
        } else {
            if (push(c, rec.t_ns, off) < 0) {
                hw_seterr(err, "failed to index the records of %s: out of memory", c->raw);
                return -1;
            }
            st->records++;
            st->switches += rec.kind == ST_PROC_SWITCH;
            st->sys_enter += rec.kind == ST_PROC_SYS_ENTER;
            st->sys_exit += rec.kind == ST_PROC_SYS_EXIT;
            if (rec.cpu < ST_MAX_CPUS)
                st->per_cpu[rec.cpu]++;
        }
        st->lines = line;
        off = (size_t)(nl - c->data) + 1;
    }
    if (line == 0)
        damage(c, 1, "expected the header line '# schedtrace format=1 ...', got an empty file");
    return 0;
}

static int by_time(const void *a, const void *b)
{
    const struct entry *x = a, *y = b;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    return (x->off > y->off) - (x->off < y->off);
}

/* ---- clock check ---- */

static void probe_switch(struct conv *c, const struct st_proc_rec *r)
{
    for (int i = 0; i < c->nprobes; i++) {
        const struct st_proc_probe *p = &c->probes[i];
        if (r->u.sw.prev_pid == p->tid && (long long)r->t_ns >= p->t0 && (long long)r->t_ns <= p->t1 &&
            c->probe_hit[i] == ST_UNKNOWN)
            c->probe_hit[i] = (long long)r->t_ns;
    }
}

/* The least delayed probe of each phase bounds the clock difference, as the tracefs markers do. */
static void probe_results(struct conv *c)
{
    for (int i = 0; i < c->nprobes; i++) {
        const struct st_proc_probe *p = &c->probes[i];
        int ph = p->phase ? 1 : 0;
        if (c->probe_hit[i] == ST_UNKNOWN)
            continue;
        if (c->st->marker_trace_ns[ph] == ST_UNKNOWN ||
            c->probe_hit[i] - p->t0 < c->st->marker_trace_ns[ph] - c->st->marker_mono_ns[ph]) {
            c->st->marker_trace_ns[ph] = c->probe_hit[i];
            c->st->marker_mono_ns[ph] = p->t0;
        }
    }
}

/* ---- sched.tsv ---- */

static void write_switch(struct conv *c, const struct st_proc_rec *r)
{
    const struct st_proc_switch *s = &r->u.sw;
    char prev[4 * ST_PROC_COMM + 8], nextc[4 * ST_PROC_COMM + 8];
    st_tsv_escape(prev, sizeof(prev), s->prev_comm, sizeof(s->prev_comm));
    st_tsv_escape(nextc, sizeof(nextc), s->next_comm, sizeof(s->next_comm));
    fprintf(c->sched, "%llu\t%u\tsched_switch\t%d\t%s\t%s\t%d\t%d\t%lld\t%s\t%d\t%d\t"
            "%d\t%llu\t0x%llx\t0x%llx\t%d\t%d\t%llu\t%llu\t%llu\t%llu\t%u\t%u\t%u\t%u\t%lld\n",
            r->t_ns, r->cpu, s->prev_pid, prev, prev, s->prev_pid, s->prev_prio, s->prev_state, nextc,
            s->next_pid, s->next_prio, s->prev_tgid, s->prev_runtime_ns, s->prev_sigpending, s->prev_user_ip,
            s->preempt, s->next_tgid, s->next_runtime_ns, s->next_vruntime, s->next_deadline, s->queue_vruntime,
            s->nr_running, s->cfs_queued, s->rt_running, s->net_backlog, s->tcp_mem_pages);
}

/* ---- syscalls.tsv ---- */

static struct call *slot_for(struct conv *c, int tid)
{
    if ((c->slot_used + 1) * 2 > c->slot_cap) {
        size_t cap = c->slot_cap ? c->slot_cap * 2 : 1024;
        struct call *grown = calloc(cap, sizeof(*grown));
        if (!grown)
            return NULL;
        for (size_t i = 0; i < c->slot_cap; i++) {
            if (!c->slots[i].tid)
                continue;
            size_t h = (size_t)(unsigned)c->slots[i].tid * 2654435761u % cap;
            while (grown[h].tid)
                h = (h + 1) % cap;
            grown[h] = c->slots[i];
        }
        free(c->slots);
        c->slots = grown;
        c->slot_cap = cap;
    }
    size_t h = (size_t)(unsigned)tid * 2654435761u % c->slot_cap;
    while (c->slots[h].tid && c->slots[h].tid != tid)
        h = (h + 1) % c->slot_cap;
    if (!c->slots[h].tid) {
        c->slots[h].tid = tid;
        c->slot_used++;
    }
    return &c->slots[h];
}

/* hw-iotrace's layout, as the tracefs backend writes it: fd_kind unknown, fd_desc empty; an
 * unfinished call has no result. */
static void emit(struct conv *c, const struct call *p, long long t_exit, long long ret, int unfinished)
{
    char line[HW_SYS_LINE_MAX];
    struct hw_sys_line l = {
        .t_enter_ns = p->t_enter, .t_exit_ns = t_exit, .pid = p->pid, .tid = p->tid, .call = p->name, .fd = p->fd,
        .req_bytes = p->req, .result = ret, .has_result = !unfinished, .unfinished = unfinished, .fd_kind = "unknown",
    };
    fwrite(line, 1, hw_sys_format(line, &l), c->sys);
    c->st->syscalls++;
    c->st->unfinished += unfinished;
}

static int sys_record(struct conv *c, const struct st_proc_rec *r)
{
    const struct st_proc_sys *s = &r->u.sys;
    struct call *p = slot_for(c, s->tid ? s->tid : -1);
    if (!p)
        return -1;
    if (r->kind == ST_PROC_SYS_ENTER) {
        int fd_arg = 0, req_arg = -1;
        const char *name = st_proc_call(s->nr, &fd_arg, &req_arg);
        if (p->active)   /* a thread cannot enter twice: the exit was lost */
            emit(c, p, (long long)r->t_ns, 0, 1);
        p->active = 1;
        p->pid = s->pid;
        p->nr = s->nr;
        p->t_enter = (long long)r->t_ns;
        if (name)
            snprintf(p->name, sizeof(p->name), "%s", name);
        else
            snprintf(p->name, sizeof(p->name), "nr_%d", s->nr);
        p->fd = (int32_t)(uint32_t)s->args[fd_arg];   /* an int fd: -1 stays -1 */
        p->req = req_arg < 0 ? -1 : (long long)s->args[req_arg];
        return 0;
    }
    if (p->active && p->nr == s->nr) {
        emit(c, p, (long long)r->t_ns, s->ret, 0);
    } else {
        if (p->active)
            emit(c, p, (long long)r->t_ns, 0, 1);
        c->st->exits_without_enter++;   /* entered before recording began: no record */
    }
    p->active = 0;
    return 0;
}

static int by_enter(const void *a, const void *b)
{
    const struct call *x = *(const struct call *const *)a, *y = *(const struct call *const *)b;
    if (x->t_enter != y->t_enter)
        return x->t_enter < y->t_enter ? -1 : 1;
    return (x->tid > y->tid) - (x->tid < y->tid);
}

/* Calls still open at the end: unfinished, ending at the last stamp of the ring, by entry. */
static int close_calls(struct conv *c, long long last_t)
{
    struct call **open = calloc(c->slot_used + 1, sizeof(*open));
    size_t n = 0;
    if (!open)
        return -1;
    for (size_t i = 0; i < c->slot_cap; i++)
        if (c->slots[i].tid && c->slots[i].active)
            open[n++] = &c->slots[i];
    qsort(open, n, sizeof(*open), by_enter);
    for (size_t i = 0; i < n; i++)
        emit(c, open[i], last_t, 0, 1);
    free(open);
    return 0;
}

static FILE *create(const char *outdir, const char *name, char *path, size_t len, struct hw_err *err)
{
    snprintf(path, len, "%s/%s", outdir, name);
    FILE *f = fopen(path, "w");
    if (!f)
        hw_seterr(err, "failed to create %s: %s", path, strerror(errno));
    else
        setvbuf(f, NULL, _IOFBF, 1 << 20);
    return f;
}

static void write_headers(struct conv *c)
{
    fprintf(c->sched, "# format: hostwire-tsv 2\n# source: hw-schedtrace\n"
            "# clock: CLOCK_MONOTONIC (/proc/schedtrace clock=mono)\n# trace_clock: mono\n# backend: proc\n"
            "# column_types: " SCHED_TYPES "\n" SCHED_COLUMNS);
    if (c->sys)
        st_syscalls_header(c->sys, "proc");
}

/* Pass 2: the indexed records in time order into the TSVs. */
static int write_records(struct conv *c, struct hw_err *err)
{
    struct st_proc_rec rec;
    char why[400];
    long long last_t = 0;
    for (size_t i = 1; i < c->n; i++)
        if (c->idx[i].t < c->idx[i - 1].t) {
            qsort(c->idx, c->n, sizeof(*c->idx), by_time);
            break;
        }
    for (size_t i = 0; i < c->n; i++) {
        const char *line = c->data + c->idx[i].off;
        const char *nl = memchr(line, '\n', c->size - c->idx[i].off);
        if (!nl || st_proc_parse_line(line, (size_t)(nl - line), &rec, why, sizeof(why)) < 0) {
            hw_seterr(err, "failed to read %s again: it changed while being converted", c->raw);
            return -1;
        }
        last_t = (long long)rec.t_ns;
        if (rec.kind == ST_PROC_SWITCH) {
            write_switch(c, &rec);
            if (c->nprobes)
                probe_switch(c, &rec);
        } else if (c->sys && sys_record(c, &rec) < 0) {
            hw_seterr(err, "failed to pair the system calls: out of memory");
            return -1;
        }
    }
    if (c->sys && !c->st->damaged && close_calls(c, last_t) < 0) {
        hw_seterr(err, "failed to close the open system calls: out of memory");
        return -1;
    }
    return 0;
}

static int finish(FILE *f, const char *path, int ok, long long records, const char *reason, int rc,
                  struct hw_err *err)
{
    if (!f)
        return rc;
    st_tsv_close(f, ok, records, reason);
    if ((ferror(f) | fclose(f)) != 0 && rc == 0) {
        hw_seterr(err, "failed to write %s: %s", path, strerror(errno ? errno : EIO));
        return -1;
    }
    return rc;
}

static int map_file(struct conv *c, struct hw_err *err)
{
    struct stat sb;
    int fd = open(c->raw, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &sb) < 0) {
        hw_seterr(err, "failed to open %s: %s", c->raw, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    c->size = (size_t)sb.st_size;
    if (c->size > 0) {
        void *p = mmap(NULL, c->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            hw_seterr(err, "failed to read %s: %s", c->raw, strerror(errno));
            close(fd);
            return -1;
        }
        madvise(p, c->size, MADV_SEQUENTIAL);
        c->data = p;
    }
    close(fd);
    return 0;
}

int st_proc_convert(const char *raw, const char *outdir, bool with_syscalls, const struct st_proc_probe *probes,
                    int nprobes, struct st_proc_stats *st, struct hw_err *err)
{
    struct conv c = { .raw = raw, .st = st, .probes = probes };
    char sched_path[4200], sys_path[4200];
    int rc = -1;
    init_stats(st);
    c.nprobes = nprobes < 64 ? nprobes : 64;
    for (int i = 0; i < 64; i++)
        c.probe_hit[i] = ST_UNKNOWN;
    if (map_file(&c, err) < 0)
        return -1;
    if (scan(&c, err) < 0)
        goto out;
    if (!(c.sched = create(outdir, "sched.tsv", sched_path, sizeof(sched_path), err)))
        goto out;
    if ((with_syscalls || st->sys_enter || st->sys_exit) &&
        !(c.sys = create(outdir, "syscalls.tsv", sys_path, sizeof(sys_path), err)))
        goto out;
    st->wrote_syscalls = c.sys != NULL;
    write_headers(&c);
    rc = write_records(&c, err);
    probe_results(&c);
    if (rc == 0 && st->damaged) {
        hw_seterr(err, "failed to parse %s", st->damage);
        rc = -1;
    }
out:
    /* a failure of our own (not damage of the input) marks the TSVs damaged with its message */
    {
        int ok = rc == 0, bad_input = st->damaged;
        const char *reason = bad_input ? st->damage : err->msg;
        int rc2 = finish(c.sched, sched_path, ok, st->switches, reason, rc, err);
        rc2 = finish(c.sys, sys_path, ok, st->syscalls, reason, rc2, err);
        rc = rc2;
    }
    if (c.data)
        munmap((void *)c.data, c.size);
    free(c.idx);
    free(c.slots);
    return rc;
}
