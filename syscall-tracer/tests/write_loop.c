/* The workload of perf/bench_iotrace.py: N one-byte writes to /dev/null (a traced call), or N
 * getppid() calls (a call no tracer selects), or N of a descriptor's calls: fcntl(F_GETFL) (made
 * no descriptor: not stopped), dup2 onto a second fd, socket() then close(), fcntl(F_SETFD)
 * (close-on-exec set and cleared in turn: stopped), ioctl(TCGETS) (a terminal's ioctl, on a file
 * that is none: not stopped) or ioctl(FIOCLEX / FIONCLEX) in turn (stopped); timed with
 * CLOCK_MONOTONIC around the loop.
 * usage: iotrace-write-loop write|getppid|fcntl|dup2|socket|setfd|ioctl|fioclex N [--wait]
 *        (--wait: read one byte from stdin first)
 * prints: calls=N ns_per_call=X.XXX t0_ns=T t1_ns=T (CLOCK_MONOTONIC before and after the loop) */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "hwclock.h"

int main(int argc, char **argv)
{
    static const char *const modes[] = {"write", "getppid", "fcntl", "dup2", "socket", "setfd", "ioctl", "fioclex"};
    int mode = -1;
    for (int i = 0; argc >= 3 && i < 8; i++)
        if (!strcmp(argv[1], modes[i]))
            mode = i;
    if (mode < 0) {
        fprintf(stderr, "usage: iotrace-write-loop write|getppid|fcntl|dup2|socket|setfd|ioctl|fioclex N [--wait]\n");
        return 2;
    }
    long n = atol(argv[2]);
    int fd = open("/dev/null", O_WRONLY);
    if (fd < 0 || n <= 0) {
        fprintf(stderr, "iotrace-write-loop: failed to open /dev/null or bad N\n");
        return 1;
    }
    char c = 'x';
    if (argc > 3 && !strcmp(argv[3], "--wait") && read(0, &c, 1) != 1)
        return 1;
    int64_t t0 = hw_mono_ns();
    for (long i = 0; i < n; i++) {
        if (mode == 0) {
            if (write(fd, &c, 1) != 1)
                return 1;
        } else if (mode == 1) {
            syscall(SYS_getppid);
        } else if (mode == 2) {
            if (fcntl(fd, F_GETFL) < 0)
                return 1;
        } else if (mode == 3) {
            if (dup2(fd, fd + 1) != fd + 1)
                return 1;
        } else if (mode == 4) {
            int s = socket(AF_INET, SOCK_STREAM, 0);
            if (s < 0 || close(s) < 0)
                return 1;
        } else if (mode == 5) {
            if (fcntl(fd, F_SETFD, (i & 1) ? FD_CLOEXEC : 0) < 0)
                return 1;
        } else if (mode == 6) {
            struct termios_like { char bytes[64]; } t;
            if (ioctl(fd, TCGETS, &t) == 0)  /* /dev/null is no terminal: ENOTTY */
                return 1;
        } else if (ioctl(fd, (i & 1) ? FIOCLEX : FIONCLEX) < 0) {
            return 1;
        }
    }
    int64_t t1 = hw_mono_ns();
    printf("calls=%ld ns_per_call=%.3f t0_ns=%lld t1_ns=%lld\n", n, (double)(t1 - t0) / (double)n, (long long)t0,
           (long long)t1);
    return 0;
}
