/* The calls hw-iotrace knows: name, number, which argument is the fd, where the byte count is. */
#include <errno.h>
#include <string.h>
#include <sys/syscall.h>

#include "iotrace.h"

const struct iot_call iot_calls[IOT_NCALLS] = {
    [IOT_CALL_READ] = {"read", SYS_read, 0, IOT_BYTES_ARG, 2, 0},
    [IOT_CALL_WRITE] = {"write", SYS_write, 0, IOT_BYTES_ARG, 2, 0},
    [IOT_CALL_READV] = {"readv", SYS_readv, 0, IOT_BYTES_IOV, 1, 2},
    [IOT_CALL_WRITEV] = {"writev", SYS_writev, 0, IOT_BYTES_IOV, 1, 2},
    [IOT_CALL_PREAD64] = {"pread64", SYS_pread64, 0, IOT_BYTES_ARG, 2, 0},
    [IOT_CALL_PWRITE64] = {"pwrite64", SYS_pwrite64, 0, IOT_BYTES_ARG, 2, 0},
    [IOT_CALL_SENDTO] = {"sendto", SYS_sendto, 0, IOT_BYTES_ARG, 2, 0},
    [IOT_CALL_SENDMSG] = {"sendmsg", SYS_sendmsg, 0, IOT_BYTES_MSG, 1, 0},
    [IOT_CALL_SENDMMSG] = {"sendmmsg", SYS_sendmmsg, 0, IOT_BYTES_MMSG, 1, 2},
    [IOT_CALL_RECVFROM] = {"recvfrom", SYS_recvfrom, 0, IOT_BYTES_ARG, 2, 0},
    [IOT_CALL_RECVMSG] = {"recvmsg", SYS_recvmsg, 0, IOT_BYTES_MSG, 1, 0},
    /* sendfile and splice name the fd the data goes to */
    [IOT_CALL_SENDFILE] = {"sendfile", SYS_sendfile, 0, IOT_BYTES_ARG, 3, 0},
    [IOT_CALL_SPLICE] = {"splice", SYS_splice, 2, IOT_BYTES_ARG, 4, 0},
    [IOT_CALL_CONNECT] = {"connect", SYS_connect, 0, IOT_BYTES_NONE, 0, 0},
    [IOT_CALL_ACCEPT] = {"accept", SYS_accept, 0, IOT_BYTES_NONE, 0, 0},
    [IOT_CALL_ACCEPT4] = {"accept4", SYS_accept4, 0, IOT_BYTES_NONE, 0, 0},
    [IOT_CALL_CLOSE] = {"close", SYS_close, 0, IOT_BYTES_NONE, 0, 0},
    [IOT_CALL_SOCKET] = {"socket", SYS_socket, -1, IOT_BYTES_FLAGS, 0, 0},
    [IOT_CALL_DUP] = {"dup", SYS_dup, 0, IOT_BYTES_FLAGS, 0, 0},
#ifdef SYS_dup2
    [IOT_CALL_DUP2] = {"dup2", SYS_dup2, 0, IOT_BYTES_FLAGS, 0, 0},
#else  /* arm64 has dup3 alone */
    [IOT_CALL_DUP2] = {"dup2", -1, 0, IOT_BYTES_FLAGS, 0, 0},
#endif
    [IOT_CALL_DUP3] = {"dup3", SYS_dup3, 0, IOT_BYTES_FLAGS, 0, 0},
    [IOT_CALL_FCNTL] = {"fcntl", SYS_fcntl, 0, IOT_BYTES_FLAGS, 0, 0},
    [IOT_CALL_CLOSE_RANGE] = {"close_range", SYS_close_range, 0, IOT_BYTES_FLAGS, 0, 0},
    /* the vector writes at an offset (pwritev2 at offset -1 also writes to a socket) */
    [IOT_CALL_PWRITEV] = {"pwritev", SYS_pwritev, 0, IOT_BYTES_IOV, 1, 2},
    [IOT_CALL_PWRITEV2] = {"pwritev2", SYS_pwritev2, 0, IOT_BYTES_IOV, 1, 2},
    /* into a pipe, never a socket: what a later splice moves on to the socket */
    [IOT_CALL_VMSPLICE] = {"vmsplice", SYS_vmsplice, 0, IOT_BYTES_IOV, 1, 2},
    [IOT_CALL_TEE] = {"tee", SYS_tee, 1, IOT_BYTES_ARG, 2, 0},
    /* stopped as fcntl (seccomp_filter.c): no number of its own */
    [IOT_CALL_FCNTL_SETFD] = {"fcntl_setfd", -1, 0, IOT_BYTES_FLAGS, 0, 0},
    [IOT_CALL_IOCTL] = {"ioctl", SYS_ioctl, 0, IOT_BYTES_FLAGS, 0, 0},
    [IOT_CALL_RECVMMSG] = {"recvmmsg", SYS_recvmmsg, 0, IOT_BYTES_MMSG, 1, 2},
    /* written after a recvmsg or recvmmsg that received descriptors */
    [IOT_CALL_SCM_RIGHTS] = {"scm_rights", -1, -1, IOT_BYTES_FLAGS, 0, 0},
};

int iot_call_by_nr(long nr)
{
    for (int i = 0; i < IOT_NCALLS; i++)
        if (iot_calls[i].nr == nr && nr >= 0)
            return i;
    return -1;
}

int iot_calls_parse(const char *list, uint32_t *mask, char *bad, size_t bad_len)
{
    *mask = 0;
    if (!list || !*list) {
        *mask = (1u << IOT_NCALLS) - 1;
        return 0;
    }
    const char *p = list;
    while (*p) {
        size_t n = strcspn(p, ",");
        int found = -1;
        for (int i = 0; i < IOT_NCALLS && n; i++)
            if (strlen(iot_calls[i].name) == n && !strncmp(iot_calls[i].name, p, n))
                found = i;
        if (found < 0) {
            if (bad && bad_len) {
                size_t c = n < bad_len - 1 ? n : bad_len - 1;
                memcpy(bad, p, c);
                bad[c] = '\0';
            }
            return -EINVAL;
        }
        *mask |= 1u << found;
        p += n;
        if (*p == ',')
            p++;
    }
    return 0;
}

char *iot_calls_format(uint32_t mask, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < IOT_NCALLS; i++) {
        if (!(mask & (1u << i)))
            continue;
        int w = snprintf(buf + used, len - used, "%s%s", used ? "," : "", iot_calls[i].name);
        if (w < 0 || (size_t)w >= len - used)
            break;
        used += (size_t)w;
    }
    return buf;
}
