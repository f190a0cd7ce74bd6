/* The probe-effect yardstick (lmbench lat_pipe): two processes joined by two pipes pass one byte
 * back and forth; each round trip costs two context switches on one CPU. */
#include <errno.h>
#include <sched.h>
#include <signal.h>
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

int hb_run_pingpong(int64_t loops, int cpu, double *round_trip_us)
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
    int err = 0;
    int64_t start = hw_mono_ns();
    for (int64_t i = 0; i < loops && !err; i++)
        err = pass_byte(to_parent[0], to_child[1], 1);
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
