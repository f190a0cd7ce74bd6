/* syscalls.tsv: the header and one line per call, formatted without stdio so that the preload
 * library can flush from a signal handler. */
#include <string.h>

#include "iotrace.h"

const char *const iot_fd_kind_names[] = {
    [IOT_FD_UNKNOWN] = "unknown", [IOT_FD_TCP] = "tcp", [IOT_FD_UDP] = "udp", [IOT_FD_UNIX] = "unix",
    [IOT_FD_FILE] = "file", [IOT_FD_PIPE] = "pipe", [IOT_FD_OTHER] = "other",
};

const char iot_tsv_columns[] =
    "t_enter_ns\tt_exit_ns\tpid\ttid\tcall\tfd\treq_bytes\tresult\tfd_kind\tfd_desc\tunfinished";

int iot_tsv_header(char *buf, size_t len, const char *backend, uint32_t mask, const char *extra)
{
    char calls[512];
    int n = snprintf(buf, len,
                     "# format: hostwire-tsv 2\n"
                     "# kind: syscalls\n"
                     "# backend: %s\n"
                     "# clock: CLOCK_MONOTONIC\n"
                     "# tool: hw-iotrace %s\n"
                     "# calls: %s\n"
                     "%s%s\n",
                     backend, IOT_VERSION, iot_calls_format(mask, calls, sizeof(calls)),
                     extra ? extra : "", iot_tsv_columns);
    return n < 0 || (size_t)n >= len ? -1 : n;
}

static char *put_escaped(char *p, const char *s);
static char *put_i64(char *p, int64_t v);

size_t iot_tsv_trailer(char *buf, uint64_t records)
{
    char *p = buf;
    static const char head[] = "# end: records=";
    memcpy(p, head, sizeof(head) - 1);
    p = put_i64(p + sizeof(head) - 1, (int64_t)records);
    *p++ = '\n';
    return (size_t)(p - buf);
}

size_t iot_tsv_damaged(char *buf, const char *reason)
{
    char *p = buf;
    static const char head[] = "# damaged: ";
    memcpy(p, head, sizeof(head) - 1);
    p = put_escaped(p + sizeof(head) - 1, reason && *reason ? reason : "the tracer failed");
    *p++ = '\n';
    return (size_t)(p - buf);
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
    for (size_t i = 0; s[i] && i < IOT_DESC_MAX; i++) {
        char c = s[i];
        if (c == '\t' || c == '\n' || c == '\r' || c == '\\') {
            *p++ = '\\';
            c = c == '\t' ? 't' : c == '\n' ? 'n' : c == '\r' ? 'r' : '\\';
        }
        *p++ = c;
    }
    return p;
}

size_t iot_rec_format(char *buf, const struct iot_rec *r, int kind, const char *desc)
{
    char *p = buf;
    p = put_i64(p, r->t_enter_ns);
    *p++ = '\t';
    p = put_i64(p, r->t_exit_ns);
    *p++ = '\t';
    p = put_i64(p, r->pid);
    *p++ = '\t';
    p = put_i64(p, r->tid);
    *p++ = '\t';
    p = put_str(p, r->call < IOT_NCALLS ? iot_calls[r->call].name : "?");
    *p++ = '\t';
    p = put_i64(p, r->fd);
    *p++ = '\t';
    p = put_i64(p, r->req_bytes);
    *p++ = '\t';
    if (!r->unfinished)
        p = put_i64(p, r->result);
    *p++ = '\t';
    p = put_str(p, iot_fd_kind_names[kind >= 0 && kind <= IOT_FD_OTHER ? kind : IOT_FD_UNKNOWN]);
    *p++ = '\t';
    p = put_escaped(p, desc ? desc : "");
    *p++ = '\t';
    *p++ = r->unfinished ? '1' : '0';
    *p++ = '\n';
    return (size_t)(p - buf);
}
