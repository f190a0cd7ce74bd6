/* The calls that make, copy and end descriptors, as every backend records them (docs/formats.md,
 * "System calls"; the tracefs backend's twin is sched-trace/st_lifetimes.c): the analysis replays
 * them to know which socket each descriptor number held at each moment (docs/timeline.md). */
#include <fcntl.h>
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
        return 0;
    case IOT_CALL_ACCEPT:
    case IOT_CALL_DUP:
    case IOT_CALL_DUP2:
        *req = 0;
        return 0;
    case IOT_CALL_ACCEPT4:
        *req = (args[3] & SOCK_CLOEXEC) != 0;
        return 0;
    case IOT_CALL_DUP3:
        *req = (args[2] & O_CLOEXEC) != 0;
        return 0;
    case IOT_CALL_FCNTL:
        if ((int)args[1] != F_DUPFD && (int)args[1] != F_DUPFD_CLOEXEC)
            return -1;
        *req = (int)args[1] == F_DUPFD_CLOEXEC;
        return 0;
    case IOT_CALL_CLOSE_RANGE:
        if (args[2] & CLOSE_RANGE_CLOEXEC)
            return -1;
        *req = (int64_t)(uint32_t)args[1];
        return 0;
    default:
        return 0;
    }
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
