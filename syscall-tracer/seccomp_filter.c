/* The seccomp-bpf filter installed in a command before exec: the selected calls stop the tracee
 * (SECCOMP_RET_TRACE, the data being the call's index in iot_calls), every other call runs
 * without a stop. */
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/ioctl.h>
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
    [IOT_BK_URING_SETUP] = SYS_io_uring_setup,
};

/* The call whose record does the bookkeeping when it is selected. */
static const int bookkeep_call[IOT_NBK] = {
    [IOT_BK_CLOSE] = IOT_CALL_CLOSE, [IOT_BK_DUP2] = IOT_CALL_DUP2, [IOT_BK_DUP3] = IOT_CALL_DUP3,
    [IOT_BK_CLOSE_RANGE] = IOT_CALL_CLOSE_RANGE, [IOT_BK_URING_SETUP] = -1,  /* no record: always counted */
};

static int selected(int call, uint32_t mask)
{
    return call >= 0 && (mask & (1u << call));
}

int iot_bookkeep_by_nr(long nr, uint32_t mask)
{
    for (int i = 0; i < IOT_NBK; i++)
        if (bookkeep_nr[i] == nr && nr >= 0)
            return selected(bookkeep_call[i], mask) ? -1 : i;
    return -1;
}

/* fcntl stops only as F_DUPFD, F_DUPFD_CLOEXEC (when fcntl is selected) or F_SETFD (when
 * fcntl_setfd is), ioctl only as FIOCLEX or FIONCLEX: the other commands (F_GETFL, F_SETFL, locks,
 * a terminal's ioctls) make or mark no descriptor and are among the most frequent calls of some
 * programs. Compares the command (the low 32 bits of args[1]) with up to three values; leaves
 * the number in A untouched on the paths that do not return. */
static unsigned stop_for_commands(struct sock_filter *prog, unsigned n, unsigned idx, const unsigned *cmds,
                                  unsigned ncmds)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    const unsigned cmd = offsetof(struct seccomp_data, args[1]);
#else
    const unsigned cmd = offsetof(struct seccomp_data, args[1]) + 4;
#endif
    if (ncmds == 0)
        return n;
    /* not this call: skip the load, the compares, the allow and the trace */
    prog[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)iot_calls[idx].nr, 0,
                                             (unsigned char)(ncmds + 3));
    prog[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, cmd);
    for (unsigned i = 0; i < ncmds; i++)  /* a match jumps over the later compares and the allow */
        prog[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, cmds[i], (unsigned char)(ncmds - i), 0);
    prog[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    prog[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRACE | idx);
    return n;
}

static unsigned fcntl_commands(struct sock_filter *prog, unsigned n, uint32_t mask)
{
    unsigned cmds[3], k = 0;
    if (mask & (1u << IOT_CALL_FCNTL)) {
        cmds[k++] = F_DUPFD;
        cmds[k++] = F_DUPFD_CLOEXEC;
    }
    if (mask & (1u << IOT_CALL_FCNTL_SETFD))
        cmds[k++] = F_SETFD;
    return stop_for_commands(prog, n, IOT_CALL_FCNTL, cmds, k);
}

int iot_seccomp_install(uint32_t mask)
{
    /* two instructions a call, three more for fcntl's commands and two for ioctl's */
    struct sock_filter prog[4 + 2 * IOT_NCALLS + 3 + 2 + 2 * IOT_NBK + 1];
    unsigned n = 0;
    prog[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
    /* another ABI (i386 compat): not traced */
    prog[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, IOT_AUDIT_ARCH, 1, 0);
    prog[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    prog[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
    for (int i = 0; i < IOT_NCALLS; i++) {
        if (!iot_call_wanted(i, mask) || iot_calls[i].nr < 0)
            continue;
        if (i == IOT_CALL_FCNTL) {
            n = fcntl_commands(prog, n, mask);
            continue;
        }
        if (i == IOT_CALL_IOCTL) {
            const unsigned cloexec[2] = {FIOCLEX, FIONCLEX};
            n = stop_for_commands(prog, n, (unsigned)i, cloexec, 2);
            continue;
        }
        prog[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)iot_calls[i].nr, 0, 1);
        prog[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRACE | (unsigned)i);
    }
    for (int i = 0; i < IOT_NBK; i++) {
        if (bookkeep_nr[i] < 0 || selected(bookkeep_call[i], mask))
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
