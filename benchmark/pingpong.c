/* The probe-effect yardstick (lmbench lat_pipe): two processes joined by two pipes pass one byte
 * back and forth; each round trip costs two context switches on one CPU. With inject_ns > 0 the
 * parent busy-waits once per round trip: a known added cost, to check that `hostwire overhead`
 * recovers what it is given. The busy-wait counts loop iterations instead of reading a clock: a
 * clock-read spin overruns its deadline by its own reads, and the first read after a context
 * switch is slower than any calibration done back to back (about 0.1 us here, 10 % of a 1 us
 * injection). The iteration count for N ns is calibrated before the loop. */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "hwclock.h"

static int pass_byte(int rfd, int wfd, int first)
{
    char c = 'x';
    if (first && write(wfd, &c, 1) != 1)
        return -errno;
    if (read(rfd, &c, 1) != 1)
        return -EPIPE;
    if (!first && write(wfd, &c, 1) != 1)
        return -errno;
    return 0;
}

static volatile uint64_t spin_counter;

static void spin_iterations(int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        spin_counter = spin_counter + 1;
}

/* ns per iteration of spin_iterations: the least of 10 timed batches of about 2 ms each (an
 * interruption only ever adds time), after a warm-up batch. */
static double spin_ns_per_iteration(void)
{
    int64_t n = 1 << 16;
    int64_t t0 = hw_mono_ns();
    while (hw_mono_ns() - t0 < 2000000) {  /* warm-up, and the batch size that takes 2 ms */
        spin_iterations(n);
        n += n / 2;
    }
    double best = 1e9;
    for (int batch = 0; batch < 10; batch++) {
        int64_t start = hw_mono_ns();
        spin_iterations(n);
        double per = (double)(hw_mono_ns() - start) / (double)n;
        best = per < best ? per : best;
    }
    return best;
}

int hb_run_pingpong(int64_t loops, int cpu, int64_t inject_ns, double *round_trip_us)
{
    int to_child[2], to_parent[2];
    if (cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        if (sched_setaffinity(0, sizeof(set), &set) < 0)
            return -errno;
    }
    if (pipe(to_child) < 0 || pipe(to_parent) < 0)
        return -errno;
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        close(to_child[1]);
        close(to_parent[0]);
        for (int64_t i = 0; i < loops; i++)
            if (pass_byte(to_child[0], to_parent[1], 0) != 0)
                _exit(1);
        _exit(0);
    }
    close(to_child[0]);
    close(to_parent[1]);
    int64_t spin = inject_ns > 0 ? (int64_t)((double)inject_ns / spin_ns_per_iteration() + 0.5) : 0;
    int err = 0;
    int64_t start = hw_mono_ns();
    for (int64_t i = 0; i < loops && !err; i++) {
        spin_iterations(spin);
        err = pass_byte(to_parent[0], to_child[1], 1);
    }
    int64_t elapsed = hw_mono_ns() - start;
    close(to_child[1]);
    close(to_parent[0]);
    int wstatus = 0;
    if (err)
        kill(pid, SIGTERM);
    waitpid(pid, &wstatus, 0);
    if (err)
        return err;
    if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0)
        return -ECHILD;
    *round_trip_us = (double)elapsed / (double)loops / 1000.0;
    return 0;
}
