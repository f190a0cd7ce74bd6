#include "hwsyscalls.h"

#include <stdio.h>
#include <string.h>

const char hw_sys_columns[] =
    "t_enter_ns\tt_exit_ns\tpid\ttid\tcall\tfd\treq_bytes\tresult\tfd_kind\tfd_desc\tunfinished";

int hw_sys_header(char *buf, size_t len, const char *backend, const char *tool, const char *calls,
                  const char *extra)
{
    int n = snprintf(buf, len,
                     "# format: hostwire-tsv 2\n"
                     "# kind: syscalls\n"
                     "# backend: %s\n"
                     "# clock: CLOCK_MONOTONIC\n"
                     "# tool: %s\n"
                     "# calls: %s\n"
                     "%s%s\n",
                     backend, tool, calls, extra ? extra : "", hw_sys_columns);
    return n < 0 || (size_t)n >= len ? -1 : n;
}

static char *put_str(char *p, const char *s)
{
    size_t n = strlen(s);
    memcpy(p, s, n);
    return p + n;
}

static char *put_i64(char *p, int64_t v)
{
    char tmp[24];
    int n = 0;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    if (v < 0)
        *p++ = '-';
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    while (n)
        *p++ = tmp[--n];
    return p;
}

/* tab, newline, CR and backslash become \t \n \r \\ so that a path cannot break the line */
static char *put_escaped(char *p, const char *s)
{
    for (size_t i = 0; s[i] && i < HW_SYS_DESC_MAX; i++) {
        char c = s[i];
        if (c == '\t' || c == '\n' || c == '\r' || c == '\\') {
            *p++ = '\\';
            c = c == '\t' ? 't' : c == '\n' ? 'n' : c == '\r' ? 'r' : '\\';
        }
        *p++ = c;
    }
    return p;
}

size_t hw_sys_format(char *buf, const struct hw_sys_line *l)
{
    char *p = buf;
    p = put_i64(p, l->t_enter_ns);
    *p++ = '\t';
    p = put_i64(p, l->t_exit_ns);
    *p++ = '\t';
    p = put_i64(p, l->pid);
    *p++ = '\t';
    p = put_i64(p, l->tid);
    *p++ = '\t';
    p = put_str(p, l->call);
    *p++ = '\t';
    p = put_i64(p, l->fd);
    *p++ = '\t';
    p = put_i64(p, l->req_bytes);
    *p++ = '\t';
    if (l->has_result)
        p = put_i64(p, l->result);
    *p++ = '\t';
    p = put_str(p, l->fd_kind);
    *p++ = '\t';
    p = put_escaped(p, l->fd_desc ? l->fd_desc : "");
    *p++ = '\t';
    *p++ = l->unfinished ? '1' : '0';
    *p++ = '\n';
    return (size_t)(p - buf);
}

size_t hw_sys_trailer(char *buf, uint64_t records)
{
    static const char head[] = "# end: records=";
    memcpy(buf, head, sizeof(head) - 1);
    char *p = put_i64(buf + sizeof(head) - 1, (int64_t)records);
    *p++ = '\n';
    return (size_t)(p - buf);
}

size_t hw_sys_damaged(char *buf, const char *reason)
{
    static const char head[] = "# damaged: ";
    memcpy(buf, head, sizeof(head) - 1);
    char *p = put_escaped(buf + sizeof(head) - 1, reason && *reason ? reason : "the tracer failed");
    *p++ = '\n';
    return (size_t)(p - buf);
}
