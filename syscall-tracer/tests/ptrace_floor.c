/* The reference of perf/bench_iotrace.py: the least any ptrace tracer pays per traced call.
 * Runs a command under the same kind of seccomp filter as hw-iotrace (here: write() only stops)
 * and, per traced call, does nothing but the two stops: wait for the seccomp entry stop, resume
 * to the exit stop, wait for it, resume. With --regs it also reads the registers once at the
 * exit stop (PTRACE_GETREGSET), the one read a tracer cannot do without to learn the call, its
 * arguments and its result. It keeps no record: it measures the mechanism, not a tracer.
 * With --read, read() stops too (the ping-pong of `hostwire overhead` writes and reads). The
 * command's children and threads are followed (the filter is inherited: an unfollowed child's
 * traced call would fail with ENOSYS).
 * usage: iotrace-ptrace-floor [--regs] [--read] -- CMD ARGS
 * prints to stderr: exit_stops=N */
#include <elf.h>
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

static int install_filter(int trace_read)
{
    struct sock_filter prog[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_write, 1, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, trace_read ? SYS_read : SYS_write, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRACE),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog fprog = {.len = sizeof(prog) / sizeof(prog[0]), .filter = prog};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return -1;
    return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fprog);
}

int main(int argc, char **argv)
{
    int read_regs = 0, trace_read = 0, first = 1;
    for (; first < argc && strcmp(argv[first], "--"); first++) {
        if (!strcmp(argv[first], "--regs")) {
            read_regs = 1;
        } else if (!strcmp(argv[first], "--read")) {
            trace_read = 1;
        } else {
            fprintf(stderr, "usage: iotrace-ptrace-floor [--regs] [--read] -- CMD ARGS\n");
            return 2;
        }
    }
    if (first + 1 >= argc) {
        fprintf(stderr, "usage: iotrace-ptrace-floor [--regs] [--read] -- CMD ARGS\n");
        return 2;
    }
    char **cmd = argv + first + 1;
    pid_t child = fork();
    if (child < 0) {
        perror("iotrace-ptrace-floor: fork");
        return 1;
    }
    if (child == 0) {
        raise(SIGSTOP);  /* until seized */
        if (install_filter(trace_read) < 0) {
            perror("iotrace-ptrace-floor: seccomp");
            _exit(127);
        }
        execvp(cmd[0], cmd);
        perror("iotrace-ptrace-floor: exec");
        _exit(127);
    }
    long opts = PTRACE_O_TRACESYSGOOD | PTRACE_O_TRACESECCOMP | PTRACE_O_EXITKILL | PTRACE_O_TRACEFORK |
                PTRACE_O_TRACEVFORK | PTRACE_O_TRACECLONE;
    if (ptrace(PTRACE_SEIZE, child, 0, opts) < 0) {
        perror("iotrace-ptrace-floor: PTRACE_SEIZE");
        kill(child, SIGKILL);
        return 1;
    }
    long exit_stops = 0;
    int status = 0, child_status = 0;
    for (;;) {
        pid_t tid = waitpid(-1, &status, __WALL);
        if (tid < 0 && errno == EINTR)
            continue;
        if (tid < 0)
            break;  /* ECHILD: every tracee is gone */
        if (WIFEXITED(status) || WIFSIGNALED(status)) {
            if (tid == child)
                child_status = status;
            continue;
        }
        int sig = WSTOPSIG(status), event = (unsigned)status >> 16, request = PTRACE_CONT, inject = 0;
        if (event == PTRACE_EVENT_SECCOMP) {
            request = PTRACE_SYSCALL;
        } else if (sig == (SIGTRAP | 0x80)) {
            if (read_regs) {
                struct user_regs_struct regs;
                struct iovec iov = {&regs, sizeof(regs)};
                ptrace(PTRACE_GETREGSET, tid, NT_PRSTATUS, &iov);
            }
            exit_stops++;
        } else if (event == 0 && sig != SIGSTOP) {
            inject = sig;  /* a signal for the command; its own SIGSTOP was only our start gate */
        }
        ptrace(request, tid, 0, inject);
    }
    fprintf(stderr, "exit_stops=%ld\n", exit_stops);
    return WIFEXITED(child_status) ? WEXITSTATUS(child_status) : 1;
}
