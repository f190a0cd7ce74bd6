/* Conversion of a trace.dat (version 6) into hostwire TSV logs with libtraceevent: the per-CPU
 * pages are decoded with kbuffer and merged by timestamp (ties: lowest CPU first, as trace-cmd
 * report does). sched.tsv has one line per event; syscalls.tsv one line per I/O system call,
 * pairing sys_enter_* with the next sys_exit_* of the same thread. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event-parse.h>
#include <kbuffer.h>

#include "hwsyscalls.h"
#include "st_uring.h"
#include "st.h"
#include "st_internal.h"

#define TSV_HEADER "# format: hostwire-tsv 2\n# source: hw-schedtrace\n" \
                   "# clock: CLOCK_MONOTONIC (tracefs trace_clock mono)\n"

struct cursor {
    struct kbuffer *kb;
    char *page;
    uint64_t off, end;
    void *data;
    unsigned long long ts;
    int cpu;
};

typedef int (*record_fn)(void *ctx, struct tep_event *ev, struct tep_record *rec);

void st_tsv_escape(char *out, size_t len, const char *in, size_t inlen)
{
    size_t o = 0;
    for (size_t i = 0; i < inlen && in[i] && o + 3 < len; i++) {
        char c = in[i], esc = c == '\t' ? 't' : c == '\n' ? 'n' : c == '\r' ? 'r' : c == '\\' ? '\\' : 0;
        if (!esc && ((unsigned char)c < 0x20 || (unsigned char)c >= 0x7f)) {
            if (o + 5 >= len)
                break;
            o += (size_t)snprintf(out + o, len - o, "\\x%02x", (unsigned char)c);
        } else if (esc) {
            out[o++] = '\\';
            out[o++] = esc;
        } else {
            out[o++] = c;
        }
    }
    out[o] = '\0';
}

/* The last line of a TSV: the trailer "# end: records=N" when the conversion finished, else
 * "# damaged: REASON", so that no reader takes a file cut short by a failure for a whole one
 * (the records before the failure stay). */
void st_tsv_close(FILE *out, int ok, long long records, const char *reason)
{
    if (ok) {
        fprintf(out, "# end: records=%lld\n", records);
        return;
    }
    char text[sizeof(((struct hw_err *)0)->msg) + 8];
    st_tsv_escape(text, sizeof(text), reason && *reason ? reason : "conversion failed", sizeof(text));
    fprintf(out, "# damaged: %s\n", text);
}

static int load_page(struct st_dat *dat, struct cursor *c, struct st_convert_stats *st, struct hw_err *err)
{
    while (c->off < c->end) {
        ssize_t n = pread(dat->fd, c->page, dat->page_size, (off_t)c->off);
        if (n != (ssize_t)dat->page_size) {
            hw_seterr(err, "failed to read CPU %d data: byte %llu: expected a %u-byte page", c->cpu,
                      (unsigned long long)c->off, dat->page_size);
            return -1;
        }
        c->off += dat->page_size;
        if (kbuffer_load_subbuffer(c->kb, c->page) < 0)
            continue;
        int missed = kbuffer_missed_events(c->kb);
        if (st && missed > 0)
            st->missed[c->cpu] += missed;
        else if (st && missed < 0)
            st->missed_unknown[c->cpu]++;
        c->data = kbuffer_read_event(c->kb, &c->ts);
        if (c->data)
            return 1;
    }
    c->data = NULL;
    return 0;
}

/* Calls fn for every record of the file in time order. */
static int iterate(struct st_dat *dat, record_fn fn, void *ctx, struct st_convert_stats *st,
                   struct hw_err *err)
{
    struct cursor *cur = calloc((size_t)dat->ncpus, sizeof(*cur));
    int rc = -1;
    if (!cur) {
        hw_seterr(err, "failed to allocate cursors: out of memory");
        return -1;
    }
    for (int cpu = 0; cpu < dat->ncpus; cpu++) {
        struct cursor *c = &cur[cpu];
        c->cpu = cpu;
        c->off = dat->cpus[cpu].offset;
        c->end = dat->cpus[cpu].offset + dat->cpus[cpu].size;
        c->kb = kbuffer_alloc(dat->long_size == 4 ? KBUFFER_LSIZE_4 : KBUFFER_LSIZE_8, KBUFFER_ENDIAN_LITTLE);
        c->page = malloc(dat->page_size);
        if (!c->kb || !c->page) {
            hw_seterr(err, "failed to allocate a page buffer: out of memory");
            goto out;
        }
        if (load_page(dat, c, st, err) < 0)
            goto out;
    }
    for (;;) {
        struct cursor *best = NULL;
        for (int cpu = 0; cpu < dat->ncpus; cpu++)
            if (cur[cpu].data && (!best || cur[cpu].ts < best->ts))
                best = &cur[cpu];
        if (!best)
            break;
        struct tep_record rec = {
            .ts = best->ts, .cpu = best->cpu, .data = best->data,
            .size = kbuffer_event_size(best->kb),
        };
        struct tep_event *ev = tep_find_event_by_record(dat->tep, &rec);
        if (st) {
            st->records++;
            st->per_cpu[best->cpu]++;
        }
        if (ev && fn(ctx, ev, &rec) < 0)
            goto out;
        best->data = kbuffer_next_event(best->kb, &best->ts);
        if (!best->data && load_page(dat, best, st, err) < 0)
            goto out;
    }
    rc = 0;
out:
    for (int cpu = 0; cpu < dat->ncpus; cpu++) {
        if (cur[cpu].kb)
            kbuffer_free(cur[cpu].kb);
        free(cur[cpu].page);
    }
    free(cur);
    return rc;
}

/* A field's value as TSV text: numbers in decimal, strings escaped, other arrays in hex. */
static void field_text(struct tep_handle *tep, struct tep_format_field *f, struct tep_record *rec,
                       char *out, size_t len)
{
    const unsigned char *data = rec->data;
    int offset = f->offset, size = f->size;
    out[0] = '\0';
    if (f->flags & TEP_FIELD_IS_DYNAMIC) {
        unsigned long long loc = tep_read_number(tep, data + f->offset, f->size);
        offset = (int)(loc & 0xffff);
        size = (int)(loc >> 16);
        if (f->flags & TEP_FIELD_IS_RELATIVE)
            offset += f->offset + f->size;
    }
    if (!(f->flags & TEP_FIELD_IS_DYNAMIC) && (f->flags & TEP_FIELD_IS_ARRAY) && size == 0)
        size = rec->size - offset;   /* a trailing flexible array (ftrace print: char buf[]) */
    if (offset < 0 || size < 0 || offset + size > rec->size)
        return;
    if ((f->flags & TEP_FIELD_IS_STRING) && f->type && strstr(f->type, "char")) {
        st_tsv_escape(out, len, (const char *)data + offset, (size_t)size);
    } else if (f->flags & (TEP_FIELD_IS_ARRAY | TEP_FIELD_IS_DYNAMIC) || size > 8) {
        size_t o = 0;
        for (int i = 0; i < size && o + 3 < len; i++)
            o += (size_t)snprintf(out + o, len - o, "%02x", data[offset + i]);
    } else {
        unsigned long long v = tep_read_number(tep, data + offset, size);
        if (f->flags & TEP_FIELD_IS_POINTER) {
            snprintf(out, len, "0x%llx", v);
        } else if ((f->flags & TEP_FIELD_IS_SIGNED) && size < 8) {
            int shift = 64 - 8 * size;
            snprintf(out, len, "%lld", (long long)(v << shift) >> shift);
        } else if (f->flags & TEP_FIELD_IS_SIGNED) {
            snprintf(out, len, "%lld", (long long)v);
        } else {
            snprintf(out, len, "%llu", v);
        }
    }
}

static void check_marker(struct st_convert_stats *st, const char *text, unsigned long long ts)
{
    static const char *which[2] = { ST_MARKER_PREFIX "start mono_ns=", ST_MARKER_PREFIX "stop mono_ns=" };
    for (int i = 0; i < 2; i++) {
        size_t n = strlen(which[i]);
        if (strncmp(text, which[i], n) != 0)
            continue;
        /* several markers per phase: the one with the least delay bounds the clock offset */
        long long mono = strtoll(text + n, NULL, 10);
        if (st->marker_trace_ns[i] == ST_UNKNOWN ||
            (long long)ts - mono < st->marker_trace_ns[i] - st->marker_mono_ns[i]) {
            st->marker_trace_ns[i] = (long long)ts;
            st->marker_mono_ns[i] = mono;
        }
    }
}

/* ------------------------------------------------------------------ sched.tsv */

#define BASE_COLS 5
enum { COL_UNSET, COL_INT, COL_UINT, COL_STR };
static const char *const base_cols[BASE_COLS] = { "t_ns", "cpu", "event", "pid", "comm" };

struct comm_pair {
    struct tep_format_field *comm, *pid;
};

struct sched_ctx {
    FILE *out;
    char *is_text;              /* by column: COL_INT, COL_UINT (unsigned 64-bit) or COL_STR */
    struct comm_pair **pairs;   /* by event id: (X_comm, X_pid) fields, NULL-terminated */
    struct tep_handle *tep;
    struct st_convert_stats *st;
    char **cols;
    int ncols;
    int **colmap;           /* by event id: column index of each field of event->format.fields */
    int *marker;            /* by event id: the field carrying the clock markers (print's buf), or -1 */
    int maxid;
    char **cells;
    char *scratch;
    long long lines;            /* records written */
};

static int column_index(struct sched_ctx *sc, const char *name)
{
    char want[160];
    int i;
    snprintf(want, sizeof(want), "%s", name);
    for (i = 0; i < BASE_COLS; i++)
        if (strcmp(base_cols[i], name) == 0)
            snprintf(want, sizeof(want), "arg_%s", name);
    for (i = 0; i < sc->ncols; i++)
        if (strcmp(sc->cols[i], want) == 0)
            return i;
    char **grown = realloc(sc->cols, sizeof(char *) * (size_t)(sc->ncols + 1));
    if (!grown)
        return -1;
    sc->cols = grown;
    char *text = realloc(sc->is_text, (size_t)sc->ncols + 1);
    if (!text)
        return -1;
    sc->is_text = text;
    sc->is_text[sc->ncols] = 0;
    sc->cols[sc->ncols] = strdup(want);
    return sc->cols[sc->ncols] ? sc->ncols++ : -1;
}

static int want_event(const struct tep_event *ev)
{
    return strcmp(ev->system, "ftrace") != 0 || strcmp(ev->name, "print") == 0;
}

/* Fields naming a task (comm, pid / prev_comm, prev_pid / child_comm, child_pid ...). */
static int find_pairs(struct sched_ctx *sc, struct tep_event *ev)
{
    int n = 0;
    struct comm_pair *pairs = calloc(8, sizeof(*pairs));
    if (!pairs)
        return -1;
    for (struct tep_format_field *f = ev->format.fields; f && n < 7; f = f->next) {
        size_t len = strlen(f->name);
        char pidname[128];
        if (len < 4 || strcmp(f->name + len - 4, "comm") != 0 || !(f->flags & TEP_FIELD_IS_STRING) ||
            (f->flags & TEP_FIELD_IS_DYNAMIC) || len >= sizeof(pidname))
            continue;
        snprintf(pidname, sizeof(pidname), "%.*spid", (int)(len - 4), f->name);
        struct tep_format_field *pid = tep_find_field(ev, pidname);
        if (pid && !(pid->flags & TEP_FIELD_IS_ARRAY)) {
            pairs[n].comm = f;
            pairs[n++].pid = pid;
        }
    }
    sc->pairs[ev->id] = pairs;
    return 0;
}

/* Tasks named in events fill the gaps of saved_cmdlines (which keeps only a few hundred);
 * tep_register_comm keeps an existing entry, so saved_cmdlines wins, as in trace-cmd report. */
static void learn_comms(struct sched_ctx *sc, struct tep_event *ev, struct tep_record *rec)
{
    struct comm_pair *p = sc->pairs[ev->id];
    for (; p && p->comm; p++) {
        unsigned long long pid;
        char comm[32];
        if (tep_read_number_field(p->pid, rec->data, &pid) < 0 || (int)pid <= 0 ||
            p->comm->offset + p->comm->size > rec->size)
            continue;
        snprintf(comm, sizeof(comm), "%.*s", p->comm->size, (const char *)rec->data + p->comm->offset);
        if (!tep_is_pid_registered(sc->tep, (int)pid))
            tep_register_comm(sc->tep, comm, (int)pid);
    }
}

static int build_columns(struct sched_ctx *sc, struct hw_err *err)
{
    struct tep_event **events = tep_list_events(sc->tep, TEP_EVENT_SORT_ID);
    for (int i = 0; events && events[i]; i++)
        if (events[i]->id > sc->maxid)
            sc->maxid = events[i]->id;
    sc->colmap = calloc((size_t)sc->maxid + 1, sizeof(int *));
    sc->pairs = calloc((size_t)sc->maxid + 1, sizeof(struct comm_pair *));
    sc->marker = malloc(((size_t)sc->maxid + 1) * sizeof(int));
    if (!sc->colmap || !sc->pairs || !sc->marker)
        goto oom;
    for (int i = 0; i < BASE_COLS; i++)
        if (column_index(sc, base_cols[i]) < 0)
            goto oom;
    /* column_index maps base names to arg_*; restore the base columns themselves */
    for (int i = 0; i < BASE_COLS; i++) {
        free(sc->cols[i]);
        sc->cols[i] = strdup(base_cols[i]);
        if (!sc->cols[i])
            goto oom;
    }
    for (int i = 0; events && events[i]; i++) {
        struct tep_event *ev = events[i];
        int n = 0;
        if (!want_event(ev))
            continue;
        for (struct tep_format_field *f = ev->format.fields; f; f = f->next)
            n++;
        int *map = calloc((size_t)n + 1, sizeof(int));
        if (!map)
            goto oom;
        sc->colmap[ev->id] = map;
        if (find_pairs(sc, ev) < 0)
            goto oom;
        sc->marker[ev->id] = -1;
        n = 0;
        for (struct tep_format_field *f = ev->format.fields; f; f = f->next) {
            if (strcmp(ev->name, "print") == 0 && strcmp(f->name, "buf") == 0)
                sc->marker[ev->id] = n;
            map[n] = column_index(sc, f->name);
            if (map[n] < 0)
                goto oom;
            char kind = COL_INT;
            if (f->flags & (TEP_FIELD_IS_ARRAY | TEP_FIELD_IS_DYNAMIC | TEP_FIELD_IS_POINTER | TEP_FIELD_IS_STRING) ||
                f->size > 8)
                kind = COL_STR;
            else if (f->size == 8 && !(f->flags & TEP_FIELD_IS_SIGNED))
                kind = COL_UINT;
            char *t = &sc->is_text[map[n]];
            *t = *t == COL_UNSET || *t == kind ? kind : COL_STR;   /* mixed kinds: text */
            n++;
        }
    }
    sc->cells = calloc((size_t)sc->ncols, sizeof(char *));
    sc->scratch = malloc((size_t)sc->ncols * 512);
    if (!sc->cells || !sc->scratch)
        goto oom;
    return 0;
oom:
    hw_seterr(err, "failed to build the sched.tsv columns: out of memory");
    return -1;
}

static int sched_record(void *ctx, struct tep_event *ev, struct tep_record *rec)
{
    struct sched_ctx *sc = ctx;
    if (ev->id > sc->maxid || !sc->colmap[ev->id])
        return 0;
    for (int i = 0; i < sc->ncols; i++)
        sc->cells[i] = NULL;
    learn_comms(sc, ev, rec);
    int pid = tep_data_pid(sc->tep, rec);
    const char *comm = tep_is_pid_registered(sc->tep, pid) ? tep_data_comm_from_pid(sc->tep, pid) : "";
    char *s = sc->scratch;
    snprintf(s, 512, "%d", pid);
    sc->cells[3] = s;
    s += 512;
    st_tsv_escape(s, 512, comm ? comm : "", 512);
    sc->cells[4] = s;
    s += 512;
    int n = 0;
    for (struct tep_format_field *f = ev->format.fields; f; f = f->next, n++) {
        int col = sc->colmap[ev->id][n];
        field_text(sc->tep, f, rec, s, 512);
        sc->cells[col] = s;
        s += 512;
        if (n == sc->marker[ev->id])
            check_marker(sc->st, (const char *)rec->data + f->offset, rec->ts);
    }
    fprintf(sc->out, "%llu\t%d\t%s", rec->ts, rec->cpu, ev->name);
    for (int i = 3; i < sc->ncols; i++) {
        fputc('\t', sc->out);
        if (sc->cells[i])
            fputs(sc->cells[i], sc->out);
    }
    fputc('\n', sc->out);
    sc->lines++;
    return ferror(sc->out) ? -1 : 0;
}

static void init_stats(struct st_convert_stats *st)
{
    memset(st, 0, sizeof(*st));
    st->marker_trace_ns[0] = st->marker_trace_ns[1] = ST_UNKNOWN;
    st->marker_mono_ns[0] = st->marker_mono_ns[1] = ST_UNKNOWN;
}

int st_convert_sched(const char *dat_path, const char *tsv_path, struct st_convert_stats *st,
                     struct hw_err *err)
{
    struct st_dat dat;
    struct sched_ctx sc = { 0 };
    int rc = -1;
    init_stats(st);
    if (st_dat_open(&dat, dat_path, err) < 0)
        return -1;
    sc.tep = dat.tep;
    sc.st = st;
    if (build_columns(&sc, err) < 0)
        goto out;
    sc.out = fopen(tsv_path, "w");
    if (!sc.out) {
        hw_seterr(err, "failed to create %s: %s", tsv_path, strerror(errno));
        goto out;
    }
    setvbuf(sc.out, NULL, _IOFBF, 1 << 20);
    fprintf(sc.out, TSV_HEADER "# trace_clock: %s\n", dat.clock ? dat.clock : "unknown");
    static const char *const kinds[] = { "int", "int", "uint", "str" };
    sc.is_text[0] = sc.is_text[1] = sc.is_text[3] = COL_INT;
    sc.is_text[2] = sc.is_text[4] = COL_STR;
    fprintf(sc.out, "# column_types:");
    for (int i = 0; i < sc.ncols; i++)
        fprintf(sc.out, " %s", kinds[(int)sc.is_text[i]]);
    fputc('\n', sc.out);
    for (int i = 0; i < sc.ncols; i++)
        fprintf(sc.out, "%s%s", i ? "\t" : "", sc.cols[i]);
    fputc('\n', sc.out);
    if (iterate(&dat, sched_record, &sc, st, err) < 0) {
        if (!err->msg[0])
            hw_seterr(err, "failed to write %s: %s", tsv_path, strerror(errno ? errno : EIO));
        st_tsv_close(sc.out, 0, sc.lines, err->msg);
        goto out;
    }
    st_tsv_close(sc.out, 1, sc.lines, NULL);
    rc = ferror(sc.out) ? -1 : 0;
    if (rc < 0)
        hw_seterr(err, "failed to write %s: %s", tsv_path, strerror(errno ? errno : EIO));
out:
    if (sc.out && fclose(sc.out) != 0 && rc == 0) {
        hw_seterr(err, "failed to write %s: %s", tsv_path, strerror(errno));
        rc = -1;
    }
    for (int i = 0; i < sc.ncols; i++)
        free(sc.cols[i]);
    for (int i = 0; sc.colmap && i <= sc.maxid; i++)
        free(sc.colmap[i]);
    for (int i = 0; sc.pairs && i <= sc.maxid; i++)
        free(sc.pairs[i]);
    free(sc.pairs);
    free(sc.marker);
    free(sc.colmap);
    free(sc.cols);
    free(sc.is_text);
    free(sc.cells);
    free(sc.scratch);
    st_dat_close(&dat);
    return rc;
}

/* ------------------------------------------------------------------ syscalls.tsv */

struct pending {
    int tid;             /* 0: empty slot */
    int active;
    long long t_enter;
    const char *call;    /* the name in the event's handles */
    long long fd, req;
    int has_fd, has_req;
    int lt;              /* a descriptor's call (st_lifetimes.c): its kind and arguments a, b */
    long long lt_a, lt_b;
};

/* What sys_record reads of one event type, found once by name before the first record instead
 * of for every record (the names cost more than the rest of the conversion of a call). */
enum { SYS_OTHER, SYS_ENTER, SYS_EXIT, SYS_PRINT, SYS_URING, SYS_SEND_LENGTH };
struct sys_event {
    int kind;
    char call[32];                      /* sys_enter_<call> / sys_exit_<call>, sendfile64 as sendfile */
    struct tep_format_field *fd, *req;  /* enter: NULL when the call has none */
    struct tep_format_field *ret;       /* exit */
    struct tep_format_field *buf;       /* ftrace print: the clock markers */
    int lt;                             /* enter: the descriptor call's kind (st_lifetimes.c) */
    struct tep_format_field *lt_a, *lt_b;
};

struct sys_ctx {
    FILE *out;
    struct tep_handle *tep;
    struct st_convert_stats *st;
    struct sys_event *events;           /* by event id */
    int maxid;
    struct pending *slots;
    size_t cap, used;
    struct tgid_pair { int tid, tgid; } *tgid;
    size_t ntgid;
    long long last_ts;
    struct st_uring *uring;             /* io_uring's operations (st_uring.h) */
    char waits[512];                    /* the wait calls the trace has events of, comma-separated */
};

static struct pending *slot_for(struct sys_ctx *sc, int tid)
{
    if ((sc->used + 1) * 2 > sc->cap) {
        size_t cap = sc->cap ? sc->cap * 2 : 4096;
        struct pending *grown = calloc(cap, sizeof(*grown));
        if (!grown)
            return NULL;
        for (size_t i = 0; i < sc->cap; i++) {
            if (!sc->slots[i].tid)
                continue;
            size_t h = (size_t)sc->slots[i].tid * 2654435761u % cap;
            while (grown[h].tid)
                h = (h + 1) % cap;
            grown[h] = sc->slots[i];
        }
        free(sc->slots);
        sc->slots = grown;
        sc->cap = cap;
    }
    size_t h = (size_t)tid * 2654435761u % sc->cap;
    while (sc->slots[h].tid && sc->slots[h].tid != tid)
        h = (h + 1) % sc->cap;
    if (!sc->slots[h].tid) {
        sc->slots[h].tid = tid;
        sc->used++;
    }
    return &sc->slots[h];
}

static int tgid_of(struct sys_ctx *sc, int tid)
{
    size_t lo = 0, hi = sc->ntgid;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (sc->tgid[mid].tid < tid)
            lo = mid + 1;
        else
            hi = mid;
    }
    /* a thread saved_tgids does not know is taken as its own process (single-threaded) */
    return lo < sc->ntgid && sc->tgid[lo].tid == tid ? sc->tgid[lo].tgid : tid;
}

/* One record in hw-iotrace's layout: every integer column filled (req_bytes -1 when the
 * tracepoint has no byte count), fd_kind "unknown", fd_desc empty; an unfinished call ends at the
 * last stamp of the trace and has no result. */
static void emit(struct sys_ctx *sc, int tid, const struct pending *p, long long t_exit, int has_ret,
                 long long ret, int unfinished)
{
    char line[HW_SYS_LINE_MAX];
    long long fd = p->has_fd ? p->fd : -1LL, req = p->has_req ? p->req : -1LL;
    const char *kind = "unknown", *call = p->call;
    if (p->lt && st_lifetime_record(p->lt, p->lt_a, p->lt_b, has_ret && !unfinished ? ret : -1, &fd, &req,
                                    &kind, &call) < 0)
        return;  /* not a descriptor's call after all (fcntl F_GETFL, a terminal's ioctl, ...) */
    struct hw_sys_line l = {
        .t_enter_ns = p->t_enter, .t_exit_ns = t_exit, .pid = tgid_of(sc, tid), .tid = tid, .call = call,
        .fd = fd, .req_bytes = req, .result = ret,
        .has_result = has_ret && !unfinished, .unfinished = unfinished, .fd_kind = kind,
    };
    fwrite(line, 1, hw_sys_format(line, &l), sc->out);
    sc->st->syscalls++;
    sc->st->unfinished += unfinished;
}

/* An io_uring operation as a record: entered at its submission, returned at its completion, by
 * the task that submitted it; req_bytes -1 (the submission does not carry the length). */
static void emit_uring(struct sys_ctx *sc, const struct st_uring_op *op, int unfinished)
{
    struct pending p = { .tid = op->tid, .t_enter = op->t_submit, .call = op->call, .fd = op->fd, .has_fd = 1 };
    emit(sc, op->tid, &p, unfinished ? sc->last_ts : op->t_done, 1, op->result, unfinished);
}

/* A number field tep_read_number_field can read (1, 2, 4 or 8 bytes), or NULL. */
static struct tep_format_field *num_field(struct tep_event *ev, const char *name)
{
    struct tep_format_field *f = tep_find_field(ev, name);
    return f && (f->size == 1 || f->size == 2 || f->size == 4 || f->size == 8) ? f : NULL;
}

static long long get_num(const struct tep_format_field *f, const struct tep_record *rec)
{
    unsigned long long v = 0;
    tep_read_number_field((struct tep_format_field *)f, rec->data, &v);
    if ((f->flags & TEP_FIELD_IS_SIGNED) && f->size < 8) {
        int shift = 64 - 8 * f->size;
        return (long long)(v << shift) >> shift;
    }
    return (long long)v;
}

static void call_name(const char *event, size_t skip, char *out, size_t len)
{
    snprintf(out, len, "%s", event + skip);
    if (strcmp(out, "sendfile64") == 0)
        out[8] = '\0';
}

static int find_sys_events(struct sys_ctx *sc, struct hw_err *err)
{
    struct tep_event **events = tep_list_events(sc->tep, TEP_EVENT_SORT_ID);
    for (int i = 0; events && events[i]; i++)
        if (events[i]->id > sc->maxid)
            sc->maxid = events[i]->id;
    sc->events = calloc((size_t)sc->maxid + 1, sizeof(*sc->events));
    if (!sc->events) {
        hw_seterr(err, "failed to allocate the event table: out of memory");
        return -1;
    }
    for (int i = 0; events && events[i]; i++) {
        struct tep_event *ev = events[i];
        struct sys_event *e = &sc->events[ev->id];
        if (strcmp(ev->name, "print") == 0) {
            e->kind = (e->buf = tep_find_field(ev, "buf")) ? SYS_PRINT : SYS_OTHER;
        } else if (st_uring_bind(sc->uring, ev)) {
            e->kind = SYS_URING;
        } else if (strcmp(ev->name, "sock_send_length") == 0) {
            e->ret = num_field(ev, "ret");
            e->kind = e->ret ? SYS_SEND_LENGTH : SYS_OTHER;
        } else if (strncmp(ev->name, "sys_enter_", 10) == 0) {
            e->kind = SYS_ENTER;
            call_name(ev->name, 10, e->call, sizeof(e->call));
            /* sendfile's and splice's fd is the one they write to, as hw-iotrace records it */
            e->fd = num_field(ev, "fd");
            e->fd = e->fd ? e->fd : num_field(ev, "out_fd");
            e->fd = e->fd ? e->fd : num_field(ev, "fd_out");
            e->fd = e->fd ? e->fd : num_field(ev, "fdout");   /* tee */
            e->req = num_field(ev, "count");
            e->req = e->req ? e->req : num_field(ev, "len");
            e->req = e->req ? e->req : num_field(ev, "size");
            if ((e->lt = st_lifetime_kind(e->call)) != ST_LT_NONE) {
                const char *fd = st_lifetime_field(e->lt, 0), *a = st_lifetime_field(e->lt, 1),
                           *b = st_lifetime_field(e->lt, 2);
                e->fd = fd ? num_field(ev, fd) : e->fd;
                e->lt_a = a ? num_field(ev, a) : NULL;
                e->lt_b = b ? num_field(ev, b) : NULL;
            }
        } else if (strncmp(ev->name, "sys_exit_", 9) == 0) {
            e->kind = SYS_EXIT;
            call_name(ev->name, 9, e->call, sizeof(e->call));
            e->ret = num_field(ev, "ret");
        }
    }
    /* the wait calls recorded (--waits): those whose entry event the trace has a format of */
    size_t o = 0;
    for (size_t w = 0; w < st_n_wait_calls; w++) {
        char name[64];
        snprintf(name, sizeof(name), "sys_enter_%s", st_wait_calls[w]);
        for (int i = 0; events && events[i]; i++)
            if (strcmp(events[i]->name, name) == 0 && o < sizeof(sc->waits)) {
                o += (size_t)snprintf(sc->waits + o, sizeof(sc->waits) - o, "%s%s", o ? "," : "", st_wait_calls[w]);
                break;
            }
    }
    return 0;
}

static int sys_record(void *ctx, struct tep_event *ev, struct tep_record *rec)
{
    struct sys_ctx *sc = ctx;
    int tid = tep_data_pid(sc->tep, rec);
    sc->last_ts = (long long)rec->ts;
    const struct sys_event *e = ev->id >= 0 && ev->id <= sc->maxid ? &sc->events[ev->id] : NULL;
    if (!e || e->kind == SYS_OTHER)
        return 0;
    if (e->kind == SYS_PRINT) {
        check_marker(sc->st, (const char *)rec->data + e->buf->offset, rec->ts);
        return 0;
    }
    if (e->kind == SYS_URING) {
        struct st_uring_op op;
        int done = st_uring_record(sc->uring, ev, rec, &op);
        if (done > 0)
            emit_uring(sc, &op, 0);
        return done < 0 || ferror(sc->out) ? -1 : 0;
    }
    struct pending *p = slot_for(sc, tid);
    if (!p)
        return -1;
    if (e->kind == SYS_SEND_LENGTH) {
        /* one per message a socket took: sendmmsg's bytes, which its tracepoints do not carry */
        long long sent = get_num(e->ret, rec);
        if (p->active && strcmp(p->call, "sendmmsg") == 0 && sent >= 0) {
            p->req = (p->has_req ? p->req : 0) + sent;
            p->has_req = 1;
        }
        return 0;
    }
    if (e->kind == SYS_ENTER) {
        if (p->active)   /* a thread cannot enter twice: the exit was lost */
            emit(sc, tid, p, (long long)rec->ts, 0, 0, 1);
        p->active = 1;
        p->t_enter = (long long)rec->ts;
        p->call = e->call;
        p->has_fd = e->fd != NULL;
        if (p->has_fd)  /* an "unsigned int fd" field: the program passed an int (-1 is -1) */
            p->fd = (int32_t)(uint32_t)get_num(e->fd, rec);
        p->has_req = e->req != NULL;
        if (p->has_req)
            p->req = get_num(e->req, rec);
        p->lt = e->lt;
        p->lt_a = e->lt_a ? get_num(e->lt_a, rec) : 0;
        p->lt_b = e->lt_b ? get_num(e->lt_b, rec) : 0;
        return 0;
    }
    long long ret = e->ret ? get_num(e->ret, rec) : 0;
    if (p->active && strcmp(p->call, e->call) == 0) {
        emit(sc, tid, p, (long long)rec->ts, e->ret != NULL, ret, 0);
    } else {
        if (p->active)
            emit(sc, tid, p, (long long)rec->ts, 0, 0, 1);
        sc->st->exits_without_enter++;   /* entered before tracing started: no record */
    }
    p->active = 0;
    return ferror(sc->out) ? -1 : 0;
}

void st_syscalls_header(FILE *out, const char *backend, const char *waits)
{
    char calls[1024], call[32], head[1536];
    size_t o = 0;
    calls[0] = '\0';
    for (size_t i = 0; i < st_n_io_calls && o < sizeof(calls); i++) {
        call_name(st_io_calls[i], 0, call, sizeof(call));
        o += (size_t)snprintf(calls + o, sizeof(calls) - o, "%s%s", i ? "," : "", call);
    }
    if (waits && waits[0] && o < sizeof(calls))
        snprintf(calls + o, sizeof(calls) - o, ",%s", waits);
    int n = hw_sys_header(head, sizeof(head), backend, "hw-schedtrace", calls, NULL);
    fwrite(head, 1, n > 0 ? (size_t)n : 0, out);
}

static int by_tid(const void *a, const void *b)
{
    const struct tgid_pair *x = a, *y = b;
    return (x->tid > y->tid) - (x->tid < y->tid);
}

static void parse_tgids(struct sys_ctx *sc, const char *text)
{
    size_t cap = 0;
    for (const char *line = text; line && *line; ) {
        int tid, tgid;
        if (sscanf(line, "%d %d", &tid, &tgid) == 2) {
            if (sc->ntgid == cap) {
                size_t ncap = cap ? cap * 2 : 256;
                struct tgid_pair *grown = realloc(sc->tgid, ncap * sizeof(*grown));
                if (!grown)
                    break;
                sc->tgid = grown;
                cap = ncap;
            }
            sc->tgid[sc->ntgid].tid = tid;
            sc->tgid[sc->ntgid++].tgid = tgid;
        }
        const char *nl = strchr(line, '\n');
        line = nl ? nl + 1 : NULL;
    }
    if (sc->ntgid)
        qsort(sc->tgid, sc->ntgid, sizeof(*sc->tgid), by_tid);
}

int st_convert_syscalls_tgids(const char *dat_path, const char *tsv_path, const char *tgids,
                              struct st_convert_stats *st, struct hw_err *err)
{
    struct st_dat dat;
    struct sys_ctx sc = { 0 };
    int rc = -1;
    init_stats(st);
    if (st_dat_open(&dat, dat_path, err) < 0)
        return -1;
    sc.tep = dat.tep;
    sc.st = st;
    parse_tgids(&sc, tgids);
    if (!(sc.uring = st_uring_new())) {
        hw_seterr(err, "failed to allocate the io_uring table: out of memory");
        goto out;
    }
    if (find_sys_events(&sc, err) < 0)
        goto out;
    sc.out = fopen(tsv_path, "w");
    if (!sc.out) {
        hw_seterr(err, "failed to create %s: %s", tsv_path, strerror(errno));
        goto out;
    }
    setvbuf(sc.out, NULL, _IOFBF, 1 << 20);
    st_syscalls_header(sc.out, "tracefs", sc.waits);
    if (iterate(&dat, sys_record, &sc, st, err) < 0) {
        if (!err->msg[0])
            hw_seterr(err, "failed to write %s: %s", tsv_path, strerror(errno ? errno : ENOMEM));
        st_tsv_close(sc.out, 0, st->syscalls, err->msg);
        goto out;
    }
    for (size_t i = 0; i < sc.cap; i++)
        if (sc.slots[i].tid && sc.slots[i].active)
            emit(&sc, sc.slots[i].tid, &sc.slots[i], sc.last_ts, 0, 0, 1);
    for (struct st_uring_op op; st_uring_next_pending(sc.uring, &op);)
        emit_uring(&sc, &op, 1);
    st_tsv_close(sc.out, 1, st->syscalls, NULL);
    rc = ferror(sc.out) ? -1 : 0;
    if (rc < 0)
        hw_seterr(err, "failed to write %s: %s", tsv_path, strerror(errno ? errno : EIO));
out:
    if (sc.out && fclose(sc.out) != 0 && rc == 0) {
        hw_seterr(err, "failed to write %s: %s", tsv_path, strerror(errno));
        rc = -1;
    }
    free(sc.events);
    free(sc.slots);
    free(sc.tgid);
    st_uring_free(sc.uring);
    st_dat_close(&dat);
    return rc;
}

int st_convert_syscalls(const char *dat_path, const char *tsv_path, struct st_convert_stats *st,
                        struct hw_err *err)
{
    return st_convert_syscalls_tgids(dat_path, tsv_path, NULL, st, err);
}
