/* One line of /proc/schedtrace (format 1, kernel/sched/schedtrace.c: format_header, format_rec)
 * into a struct st_proc_rec. The kernel writes one space between fields and the keys in a fixed
 * order; anything else is damage, named by what was expected there. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "st_proc.h"

#define HEADER_PREFIX "# schedtrace "

struct cursor {
    const char *p, *end;
    char *why;
    size_t whylen;
};

/* The text at the cursor, up to the next space, quoted for a message (at most 40 bytes, bytes
 * outside printable ASCII as '?'). */
static void quote_word(const struct cursor *c, char *out, size_t len)
{
    size_t o = 0;
    const char *q = c->p;
    while (q < c->end && *q == ' ' && o + 4 < len && o < 40)   /* a space too many shows */
        out[o++] = *q++;
    for (; q < c->end && *q != ' ' && o + 4 < len && o < 40; q++)
        out[o++] = (*q > ' ' && *q < 0x7f) ? *q : '?';
    if (o == 40)
        out[o++] = '.', out[o++] = '.';
    out[o] = '\0';
}

static int fail(struct cursor *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct cursor *c, const char *fmt, ...)
{
    char got[64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(c->why, c->whylen, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < c->whylen) {
        quote_word(c, got, sizeof(got));
        if (c->p >= c->end)
            snprintf(c->why + n, c->whylen - (size_t)n, ", got the end of the line");
        else
            snprintf(c->why + n, c->whylen - (size_t)n, ", got '%s'", got);
    }
    return -1;
}

/* The value of the next field: "key=VALUE" up to the next space (consumed) or the line's end. */
static int field(struct cursor *c, const char *key, const char *kind, const char **v, size_t *n)
{
    size_t k = strlen(key);
    if ((size_t)(c->end - c->p) <= k || strncmp(c->p, key, k) != 0 || c->p[k] != '=')
        return fail(c, "expected %s=%s", key, kind);
    const char *start = c->p + k + 1, *q = start;
    while (q < c->end && *q != ' ')
        q++;
    *v = start;
    *n = (size_t)(q - start);
    return 0;
}

/* Moves past the field just read: one space when more follow, the line's end after the last. */
static int next(struct cursor *c, const char *v, size_t n, int last)
{
    const char *q = v + n;
    if (last) {
        if (q != c->end) {
            c->p = *q == ' ' && q + 1 < c->end ? q + 1 : q;
            return fail(c, "expected the end of the line");
        }
        c->p = q;
        return 0;
    }
    if (q >= c->end || *q != ' ' || q + 1 >= c->end || q[1] == ' ') {
        c->p = q < c->end ? q + 1 : q;
        return fail(c, "expected one space and the next field");
    }
    c->p = q + 1;
    return 0;
}

static int parse_u64(const char *v, size_t n, int base, unsigned long long *out)
{
    unsigned long long x = 0;
    if (n == 0 || n > (base == 16 ? 16u : 20u))
        return -1;
    for (size_t i = 0; i < n; i++) {
        int d;
        char ch = v[i];
        if (ch >= '0' && ch <= '9')
            d = ch - '0';
        else if (base == 16 && ch >= 'a' && ch <= 'f')
            d = ch - 'a' + 10;
        else if (base == 16 && ch >= 'A' && ch <= 'F')
            d = ch - 'A' + 10;
        else
            return -1;
        if (__builtin_mul_overflow(x, (unsigned)base, &x) || __builtin_add_overflow(x, (unsigned)d, &x))
            return -1;
    }
    *out = x;
    return 0;
}

static int parse_s64(const char *v, size_t n, long long lo, long long hi, long long *out)
{
    unsigned long long x;
    int neg = n > 0 && v[0] == '-';
    if (parse_u64(v + neg, n - (size_t)neg, 10, &x) < 0)
        return -1;
    if (neg ? x > (unsigned long long)INT64_MAX + 1 : x > (unsigned long long)INT64_MAX)
        return -1;
    long long s = neg ? (long long)(0 - x) : (long long)x;
    if (s < lo || s > hi)
        return -1;
    *out = s;
    return 0;
}

/* Typed fields: each reads "key=VALUE" and moves on (last: the line must end there). */
static int get_u64(struct cursor *c, const char *key, unsigned long long *out, int last)
{
    const char *v;
    size_t n;
    if (field(c, key, "<unsigned integer>", &v, &n) < 0)
        return -1;
    if (parse_u64(v, n, 10, out) < 0)
        return fail(c, "expected %s=<unsigned integer>", key);
    return next(c, v, n, last);
}

static int get_uint(struct cursor *c, const char *key, unsigned max, unsigned *out, int last)
{
    unsigned long long x;
    const char *v;
    size_t n;
    if (field(c, key, "<unsigned integer>", &v, &n) < 0)
        return -1;
    if (parse_u64(v, n, 10, &x) < 0 || x > max)
        return fail(c, "expected %s=<unsigned integer up to %u>", key, max);
    *out = (unsigned)x;
    return next(c, v, n, last);
}

static int get_u32(struct cursor *c, const char *key, unsigned *out, int last)
{
    return get_uint(c, key, UINT32_MAX, out, last);
}

static int get_s64(struct cursor *c, const char *key, long long *out, int last)
{
    const char *v;
    size_t n;
    if (field(c, key, "<integer>", &v, &n) < 0)
        return -1;
    if (parse_s64(v, n, INT64_MIN, INT64_MAX, out) < 0)
        return fail(c, "expected %s=<integer>", key);
    return next(c, v, n, last);
}

static int get_int(struct cursor *c, const char *key, int *out, int last)
{
    long long x;
    const char *v;
    size_t n;
    if (field(c, key, "<32-bit integer>", &v, &n) < 0)
        return -1;
    if (parse_s64(v, n, INT32_MIN, INT32_MAX, &x) < 0)
        return fail(c, "expected %s=<32-bit integer>", key);
    *out = (int)x;
    return next(c, v, n, last);
}

static int get_hex(struct cursor *c, const char *key, unsigned long long *out, int last)
{
    const char *v;
    size_t n;
    if (field(c, key, "0x<hex>", &v, &n) < 0)
        return -1;
    if (n < 3 || v[0] != '0' || v[1] != 'x' || parse_u64(v + 2, n - 2, 16, out) < 0)
        return fail(c, "expected %s=0x<hex>", key);
    return next(c, v, n, last);
}

static int hexval(char ch)
{
    return ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 :
           ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
}

/* A command name: printable ASCII other than space and backslash as is, any other byte \xNN. */
static int get_comm(struct cursor *c, const char *key, char *out)
{
    const char *v;
    size_t n, o = 0;
    if (field(c, key, "<command name>", &v, &n) < 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)v[i];
        int hi, lo;
        if (o == ST_PROC_COMM)
            return fail(c, "expected %s=<command name of at most %d bytes>", key, ST_PROC_COMM);
        if (ch != '\\') {
            if (ch <= ' ' || ch >= 0x7f)
                return fail(c, "expected %s=<command name, bytes outside printable ASCII as \\xNN>", key);
            out[o++] = (char)ch;
            continue;
        }
        if (i + 3 >= n || v[i + 1] != 'x' || (hi = hexval(v[i + 2])) < 0 || (lo = hexval(v[i + 3])) < 0 ||
            (hi == 0 && lo == 0))
            return fail(c, "expected %s=<command name, a backslash only in \\xNN, NN not 00>", key);
        out[o++] = (char)(hi * 16 + lo);
        i += 3;
    }
    out[o] = '\0';
    return next(c, v, n, 0);
}

static int parse_header(struct cursor *c, struct st_proc_header *h)
{
    const char *v;
    size_t n;
    unsigned long long x;
    c->p += strlen(HEADER_PREFIX);
    if (field(c, "format", "<integer>", &v, &n) < 0)
        return -1;
    if (parse_u64(v, n, 10, &x) < 0 || x > INT32_MAX)
        return fail(c, "expected format=<integer>");
    if (x != ST_PROC_FORMAT)
        return fail(c, "expected format=%d (the only ring format this hw-schedtrace reads)", ST_PROC_FORMAT);
    h->format = (int)x;
    if (next(c, v, n, 0) < 0 || field(c, "clock", "<name>", &v, &n) < 0)
        return -1;
    if (n != 4 || memcmp(v, "mono", 4) != 0)   /* format 1 stamps with CLOCK_MONOTONIC only */
        return fail(c, "expected clock=mono");
    memcpy(h->clock, v, n);
    h->clock[n] = '\0';
    if (next(c, v, n, 0) < 0)
        return -1;
    static const char *const keys[] = { "size", "enabled", "written", "lost", "pending" };
    long long *vals[] = { &h->size, &h->enabled, &h->written, &h->lost, &h->pending };
    for (int i = 0; i < 5; i++) {
        if (get_u64(c, keys[i], &x, i == 4) < 0)
            return -1;
        if (x > INT64_MAX)
            return fail(c, "expected %s=<integer below 2^63>", keys[i]);
        *vals[i] = (long long)x;
    }
    return 0;
}

static int parse_switch(struct cursor *c, struct st_proc_switch *s)
{
    unsigned pre;
    if (get_comm(c, "prev_comm", s->prev_comm) < 0 || get_int(c, "prev_pid", &s->prev_pid, 0) < 0 ||
        get_int(c, "prev_tgid", &s->prev_tgid, 0) < 0 || get_int(c, "prev_prio", &s->prev_prio, 0) < 0 ||
        get_s64(c, "prev_state", &s->prev_state, 0) < 0 ||
        get_u64(c, "prev_runtime_ns", &s->prev_runtime_ns, 0) < 0 ||
        get_hex(c, "prev_sigpending", &s->prev_sigpending, 0) < 0 ||
        get_hex(c, "prev_user_ip", &s->prev_user_ip, 0) < 0 || get_uint(c, "preempt", 255, &pre, 0) < 0)
        return -1;
    s->preempt = (int)pre;
    return get_comm(c, "next_comm", s->next_comm) < 0 || get_int(c, "next_pid", &s->next_pid, 0) < 0 ||
           get_int(c, "next_tgid", &s->next_tgid, 0) < 0 || get_int(c, "next_prio", &s->next_prio, 0) < 0 ||
           get_u64(c, "next_runtime_ns", &s->next_runtime_ns, 0) < 0 ||
           get_u64(c, "next_vruntime", &s->next_vruntime, 0) < 0 ||
           get_u64(c, "next_deadline", &s->next_deadline, 0) < 0 ||
           get_u64(c, "queue_vruntime", &s->queue_vruntime, 0) < 0 ||
           get_u32(c, "nr_running", &s->nr_running, 0) < 0 || get_u32(c, "cfs_queued", &s->cfs_queued, 0) < 0 ||
           get_u32(c, "rt_running", &s->rt_running, 0) < 0 || get_u32(c, "net_backlog", &s->net_backlog, 0) < 0 ||
           get_s64(c, "tcp_mem_pages", &s->tcp_mem_pages, 1) < 0 ? -1 : 0;
}

static int parse_sys(struct cursor *c, struct st_proc_sys *s, int enter)
{
    static const char *const args[6] = { "a0", "a1", "a2", "a3", "a4", "a5" };
    if (get_int(c, "pid", &s->pid, 0) < 0 || get_int(c, "tid", &s->tid, 0) < 0 || get_int(c, "nr", &s->nr, 0) < 0)
        return -1;
    if (!enter)
        return get_s64(c, "ret", &s->ret, 1);
    for (int i = 0; i < 6; i++)
        if (get_hex(c, args[i], &s->args[i], i == 5) < 0)
            return -1;
    return 0;
}

/* A leading unsigned decimal and the space after it. */
static int lead(struct cursor *c, const char *what, unsigned long long max, unsigned long long *out)
{
    const char *q = c->p;
    while (q < c->end && *q != ' ')
        q++;
    if (parse_u64(c->p, (size_t)(q - c->p), 10, out) < 0 || *out > max)
        return fail(c, "expected %s", what);
    if (q >= c->end || q + 1 >= c->end || q[1] == ' ') {
        c->p = q < c->end ? q + 1 : q;
        return fail(c, "expected one space and the next field");
    }
    c->p = q + 1;
    return 0;
}

int st_proc_parse_line(const char *line, size_t len, struct st_proc_rec *rec, char *why, size_t whylen)
{
    struct cursor c = { line, line + len, why, whylen };
    unsigned long long t, cpu;
    memset(rec, 0, sizeof(*rec));
    if (whylen)
        why[0] = '\0';
    if (len >= strlen(HEADER_PREFIX) && memcmp(line, HEADER_PREFIX, strlen(HEADER_PREFIX)) == 0) {
        rec->kind = ST_PROC_HEADER;
        return parse_header(&c, &rec->u.hdr);
    }
    if (len > 0 && line[0] == '#')
        return fail(&c, "expected a record or the header '" HEADER_PREFIX "format=%d ...'", ST_PROC_FORMAT);
    if (lead(&c, "a record: T_NS CPU switch|sys_enter|sys_exit ...", UINT64_MAX, &t) < 0 ||
        lead(&c, "a CPU number after the stamp", UINT32_MAX, &cpu) < 0)
        return -1;
    rec->t_ns = t;
    rec->cpu = (unsigned)cpu;
    static const char *const kinds[] = { "switch ", "sys_enter ", "sys_exit " };
    for (int k = 0; k < 3; k++) {
        size_t n = strlen(kinds[k]);
        if ((size_t)(c.end - c.p) > n && memcmp(c.p, kinds[k], n) == 0) {
            c.p += n;
            rec->kind = (enum st_proc_kind)(ST_PROC_SWITCH + k);
            return k == 0 ? parse_switch(&c, &rec->u.sw) : parse_sys(&c, &rec->u.sys, k == 1);
        }
    }
    return fail(&c, "expected the record kind switch, sys_enter or sys_exit");
}

/* hw-iotrace's default set by x86_64 number (arch/x86/entry/syscalls/syscall_64.tbl). */
static const struct {
    int nr;
    const char *name;
    int fd_arg, req_arg;
} x86_64_calls[] = {
    { 0, "read", 0, 2 },       { 1, "write", 0, 2 },      { 3, "close", 0, -1 },
    { 17, "pread64", 0, 2 },   { 18, "pwrite64", 0, 2 },  { 19, "readv", 0, -1 },
    { 20, "writev", 0, -1 },   { 40, "sendfile", 0, 3 },  /* out_fd, in_fd, offset, count */
    { 42, "connect", 0, -1 },  { 43, "accept", 0, -1 },   { 44, "sendto", 0, 2 },
    { 45, "recvfrom", 0, 2 },  { 46, "sendmsg", 0, -1 },  { 47, "recvmsg", 0, -1 },
    { 275, "splice", 2, 4 },   /* fd_in, off_in, fd_out, off_out, len, flags */
    { 288, "accept4", 0, -1 }, { 307, "sendmmsg", 0, -1 },
};

const char *st_proc_call(int nr, int *fd_arg, int *req_arg)
{
    for (size_t i = 0; i < sizeof(x86_64_calls) / sizeof(x86_64_calls[0]); i++)
        if (x86_64_calls[i].nr == nr) {
            *fd_arg = x86_64_calls[i].fd_arg;
            *req_arg = x86_64_calls[i].req_arg;
            return x86_64_calls[i].name;
        }
    return NULL;
}
