/* The workload of perf/bench_iotrace.py: N one-byte writes to /dev/null (a traced call), or N
 * getppid() calls (a call no tracer selects), timed with CLOCK_MONOTONIC around the loop.
 * usage: iotrace-write-loop write|getppid N [--wait]   (--wait: read one byte from stdin first)
 * prints: calls=N ns_per_call=X.XXX t0_ns=T t1_ns=T (CLOCK_MONOTONIC before and after the loop) */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "hwclock.h"

int main(int argc, char **argv)
{
    if (argc < 3 || (strcmp(argv[1], "write") && strcmp(argv[1], "getppid"))) {
        fprintf(stderr, "usage: iotrace-write-loop write|getppid N [--wait]\n");
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
    int do_write = !strcmp(argv[1], "write");
    int64_t t0 = hw_mono_ns();
    for (long i = 0; i < n; i++) {
        if (do_write) {
            if (write(fd, &c, 1) != 1)
                return 1;
        } else {
            syscall(SYS_getppid);
        }
    }
    int64_t t1 = hw_mono_ns();
    printf("calls=%ld ns_per_call=%.3f t0_ns=%lld t1_ns=%lld\n", n, (double)(t1 - t0) / (double)n, (long long)t0,
           (long long)t1);
    return 0;
}
