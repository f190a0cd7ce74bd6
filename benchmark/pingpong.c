/* The probe-effect yardstick (lmbench lat_pipe): two processes joined by two pipes pass one byte
 * back and forth; each round trip costs two context switches on one CPU. With inject_ns > 0 the
 * parent busy-waits that long on CLOCK_MONOTONIC once per round trip: a known added cost, to check
 * that `hostwire overhead` recovers what it is given. A spin overruns its deadline by its own clock
 * reads (the one that starts it, the one that crosses the deadline): that overrun is measured
 * before the loop (spins of N ns back to back) and taken off, so a round trip gains N ns. */
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

void hb_spin_ns(int64_t ns)
{
    if (ns <= 0)
        return;
    int64_t until = hw_mono_ns() + ns;
    while (hw_mono_ns() < until)
        ;
}

/* The overrun of a spin of ns nanoseconds: spins back to back in 10 batches of about 2 ms each;
 * the least batch mean (an interruption only ever adds time). Spins of 1 ms or more are taken as
 * they are (two clock reads are below 0.01 % of them). */
static int64_t spin_overrun_ns(int64_t ns)
{
    if (ns >= 1000000)
        return 0;
    int64_t n = 2000000 / ns;
    n = n < 20 ? 20 : n > 2000 ? 2000 : n;
    for (int64_t i = 0; i < n; i++)  /* warm-up */
        hb_spin_ns(ns);
    int64_t best = INT64_MAX;
    for (int batch = 0; batch < 10; batch++) {
        int64_t t0 = hw_mono_ns();
        for (int64_t i = 0; i < n; i++)
            hb_spin_ns(ns);
        int64_t per = (hw_mono_ns() - t0) / n;
        best = per < best ? per : best;
    }
    int64_t over = best - ns;
    return over < 0 ? 0 : over > ns / 2 ? ns / 2 : over;
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
    int64_t spin = inject_ns > 0 ? inject_ns - spin_overrun_ns(inject_ns) : 0;
    int err = 0;
    int64_t start = hw_mono_ns();
    for (int64_t i = 0; i < loops && !err; i++) {
        hb_spin_ns(spin);
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
