/* The calls that make, copy and end descriptors, as every backend records them (docs/formats.md,
 * "System calls"; the tracefs backend's twin is sched-trace/st_lifetimes.c): the analysis replays
 * them to know which socket each descriptor number held at each moment (docs/timeline.md). */
#include <fcntl.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "iotrace.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

int iot_lifetime_entry(int idx, const uint64_t *args, int32_t *fd, int64_t *req)
{
    switch (idx) {
    case IOT_CALL_SOCKET:
        *fd = -1;  /* the descriptor it makes, set at exit */
        *req = (args[1] & SOCK_CLOEXEC) != 0;
        return idx;
    case IOT_CALL_ACCEPT:
    case IOT_CALL_DUP:
    case IOT_CALL_DUP2:
        *req = 0;
        return idx;
    case IOT_CALL_ACCEPT4:
        *req = (args[3] & SOCK_CLOEXEC) != 0;
        return idx;
    case IOT_CALL_DUP3:
        *req = (args[2] & O_CLOEXEC) != 0;
        return idx;
    case IOT_CALL_FCNTL:
        if ((int)args[1] == F_SETFD) {
            *req = (args[2] & FD_CLOEXEC) != 0;
            return IOT_CALL_FCNTL_SETFD;
        }
        if ((int)args[1] != F_DUPFD && (int)args[1] != F_DUPFD_CLOEXEC)
            return -1;
        *req = (int)args[1] == F_DUPFD_CLOEXEC;
        return idx;
    case IOT_CALL_IOCTL:
        if ((unsigned long)args[1] != FIOCLEX && (unsigned long)args[1] != FIONCLEX)
            return -1;
        *req = (unsigned long)args[1] == FIOCLEX;
        return idx;
    case IOT_CALL_CLOSE_RANGE:
        if (args[2] & CLOSE_RANGE_CLOEXEC)
            return -1;
        *req = (int64_t)(uint32_t)args[1];
        return idx;
    default:
        return idx;
    }
}

int iot_call_wanted(int idx, uint32_t mask)
{
    uint32_t also = 0;
    if (idx == IOT_CALL_FCNTL)
        also = 1u << IOT_CALL_FCNTL_SETFD;
    else if (idx == IOT_CALL_RECVMSG || idx == IOT_CALL_RECVMMSG)
        also = 1u << IOT_CALL_SCM_RIGHTS;
    return idx >= 0 && idx < IOT_NCALLS && (mask & ((1u << idx) | also)) != 0;
}

int iot_scm_rights(const void *control, size_t len, int *fds, int max)
{
    /* walked on a copy: CMSG_NXTHDR reads only the msghdr's control pointer and length */
    struct msghdr m = {.msg_control = (void *)control, .msg_controllen = len};
    int n = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS || c->cmsg_len < CMSG_LEN(0))
            continue;
        size_t have = (size_t)((const char *)control + len - (const char *)CMSG_DATA(c));
        size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        if (count * sizeof(int) > have)
            count = have / sizeof(int);
        for (size_t i = 0; i < count && n < max; i++)
            memcpy(&fds[n++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
    }
    return n;
}

int iot_lifetime_made(int idx, int64_t rval)
{
    switch (idx) {
    case IOT_CALL_SOCKET:
    case IOT_CALL_ACCEPT:
    case IOT_CALL_ACCEPT4:
    case IOT_CALL_DUP:
    case IOT_CALL_DUP2:
    case IOT_CALL_DUP3:
    case IOT_CALL_FCNTL:
        return rval >= 0 && rval <= INT32_MAX ? (int)rval : -1;
    default:
        return -1;
    }
}
