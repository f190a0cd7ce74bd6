/* The calls that make, copy and end descriptors, as syscalls.tsv records them for every backend
 * (docs/formats.md, "System calls"): which enter fields each needs, and what its record says once
 * its result is known. socket's fd is the one it made; dup, dup2, dup3 and fcntl name the old fd
 * and return the new one; req_bytes carries what the analysis needs of the flags: close-on-exec
 * (1 or 0) of the descriptor a call made or marked, close_range's last fd. fcntl is kept only as
 * F_DUPFD, F_DUPFD_CLOEXEC and F_SETFD (written fcntl_setfd: its result is no descriptor), ioctl
 * only as FIOCLEX and FIONCLEX, close_range only when it closes (not CLOSE_RANGE_CLOEXEC). The
 * descriptors a recvmsg receives (SCM_RIGHTS) are in the program's memory, which no tracepoint
 * carries: the socket samples name them (docs/timeline.md). */
#include <fcntl.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "st_internal.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

int st_lifetime_kind(const char *call)
{
    static const char *const names[ST_LT_N] = {
        [ST_LT_SOCKET] = "socket", [ST_LT_ACCEPT] = "accept", [ST_LT_ACCEPT4] = "accept4", [ST_LT_DUP] = "dup",
        [ST_LT_DUP2] = "dup2", [ST_LT_DUP3] = "dup3", [ST_LT_FCNTL] = "fcntl", [ST_LT_CLOSE_RANGE] = "close_range",
        [ST_LT_IOCTL] = "ioctl",
    };
    for (int i = 1; i < ST_LT_N; i++)
        if (names[i] && strcmp(names[i], call) == 0)
            return i;
    return ST_LT_NONE;
}

/* The enter fields: fd (the one the record names, when the tracepoint calls it otherwise) and the
 * two arguments the record's meaning depends on. */
const char *st_lifetime_field(int kind, int which)
{
    static const char *const fields[ST_LT_N][3] = {
        [ST_LT_SOCKET] = {NULL, "type", "family"},
        [ST_LT_ACCEPT4] = {NULL, "flags", NULL},
        [ST_LT_DUP] = {"fildes", NULL, NULL},
        [ST_LT_DUP2] = {"oldfd", NULL, NULL},
        [ST_LT_DUP3] = {"oldfd", "flags", NULL},
        [ST_LT_FCNTL] = {NULL, "cmd", "arg"},
        [ST_LT_CLOSE_RANGE] = {NULL, "max_fd", "flags"},
        [ST_LT_IOCTL] = {NULL, "cmd", NULL},
    };
    return kind > 0 && kind < ST_LT_N && which >= 0 && which < 3 ? fields[kind][which] : NULL;
}

static const char *socket_kind(long long family, long long type)
{
    int base = (int)(type & 0xf);
    if (family == AF_INET || family == AF_INET6)
        return base == SOCK_STREAM ? "tcp" : base == SOCK_DGRAM ? "udp" : "other";
    return family == AF_UNIX ? "unix" : "other";
}

int st_lifetime_record(int kind, long long a, long long b, long long ret, long long *fd, long long *req,
                       const char **fd_kind, const char **call)
{
    switch (kind) {
    case ST_LT_SOCKET:
        *fd = ret;  /* the descriptor it made (-errno on failure, as the result) */
        *req = (a & SOCK_CLOEXEC) != 0;
        *fd_kind = socket_kind(b, a);
        return 0;
    case ST_LT_ACCEPT:
    case ST_LT_DUP:
    case ST_LT_DUP2:
        *req = 0;
        return 0;
    case ST_LT_ACCEPT4:
        *req = (a & SOCK_CLOEXEC) != 0;
        return 0;
    case ST_LT_DUP3:
        *req = (a & O_CLOEXEC) != 0;
        return 0;
    case ST_LT_FCNTL:
        if (a == F_SETFD) {
            *req = (b & FD_CLOEXEC) != 0;
            *call = "fcntl_setfd";
            return 0;
        }
        if (a != F_DUPFD && a != F_DUPFD_CLOEXEC)
            return -1;
        *req = a == F_DUPFD_CLOEXEC;
        return 0;
    case ST_LT_IOCTL:
        if ((unsigned long)a != FIOCLEX && (unsigned long)a != FIONCLEX)
            return -1;
        *req = (unsigned long)a == FIOCLEX;
        return 0;
    case ST_LT_CLOSE_RANGE:
        if (b & CLOSE_RANGE_CLOEXEC)
            return -1;
        *req = (unsigned)a;
        return 0;
    default:
        return 0;
    }
}
