/* The seccomp-bpf filter installed in a command before exec: the selected calls stop the tracee
 * (SECCOMP_RET_TRACE, the data being the call's index in iot_calls), every other call runs
 * without a stop. */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "iotrace.h"

#if defined(__x86_64__)
#define IOT_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define IOT_AUDIT_ARCH AUDIT_ARCH_AARCH64
#else
#error "hw-iotrace: add the AUDIT_ARCH value of this architecture"
#endif

static const long bookkeep_nr[IOT_NBK] = {
    [IOT_BK_CLOSE] = SYS_close,
#ifdef SYS_dup2
    [IOT_BK_DUP2] = SYS_dup2,
#else
    [IOT_BK_DUP2] = -1,
#endif
    [IOT_BK_DUP3] = SYS_dup3,
    [IOT_BK_CLOSE_RANGE] = SYS_close_range,
};

int iot_bookkeep_by_nr(long nr, uint32_t mask)
{
    for (int i = 0; i < IOT_NBK; i++)
        if (bookkeep_nr[i] == nr && nr >= 0)
            return i == IOT_BK_CLOSE && (mask & (1u << IOT_CALL_CLOSE)) ? -1 : i;
    return -1;
}

int iot_seccomp_install(uint32_t mask)
{
    struct sock_filter prog[4 + 2 * IOT_NCALLS + 2 * IOT_NBK + 1];
    unsigned n = 0;
    prog[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
    /* another ABI (i386 compat): not traced */
    prog[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, IOT_AUDIT_ARCH, 1, 0);
    prog[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    prog[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
    for (int i = 0; i < IOT_NCALLS; i++) {
        if (!(mask & (1u << i)))
            continue;
        prog[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)iot_calls[i].nr, 0, 1);
        prog[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRACE | (unsigned)i);
    }
    for (int i = 0; i < IOT_NBK; i++) {
        if (bookkeep_nr[i] < 0 || (i == IOT_BK_CLOSE && (mask & (1u << IOT_CALL_CLOSE))))
            continue;
        prog[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)bookkeep_nr[i], 0, 1);
        prog[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRACE | (unsigned)(IOT_BOOKKEEP + i));
    }
    prog[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    struct sock_fprog fprog = {.len = (unsigned short)n, .filter = prog};
    /* without CAP_SYS_ADMIN a filter needs no_new_privs; as root, keep setuid programs working */
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fprog) == 0)
        return 0;
    if (errno != EACCES)
        return -errno;
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return -errno;
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fprog) < 0)
        return -errno;
    return 0;
}
