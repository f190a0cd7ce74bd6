/* Test program: st-pingpong LOOPS [CPU]. Two processes bounce one byte over two pipes LOOPS times.
 * It prints "pids PARENT CHILD", waits for a line on stdin (start barrier: the child waits in its
 * first pipe read), runs the loops, prints "done" and waits for a second line on stdin (end
 * barrier: the child waits in a pipe read for end of file). While both wait at a barrier they sit
 * in pipe reads, so their context-switch counters in /proc are stable between the barriers. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void pin(int cpu)
{
    cpu_set_t set;
    if (cpu < 0)
        return;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set) < 0) {
        perror("st-pingpong: failed to pin to CPU");
        exit(1);
    }
}

int main(int argc, char **argv)
{
    int p2c[2], c2p[2];
    char byte = 'x', line[64];
    if (argc < 2) {
        fprintf(stderr, "usage: st-pingpong LOOPS [CPU]\n");
        return 2;
    }
    long loops = atol(argv[1]);
    int cpu = argc > 2 ? atoi(argv[2]) : -1;
    pin(cpu);
    if (pipe(p2c) < 0 || pipe(c2p) < 0)
        return 1;
    pid_t child = fork();
    if (child < 0)
        return 1;
    if (child == 0) {
        close(p2c[1]);
        close(c2p[0]);
        for (long i = 0; i < loops; i++)
            if (read(p2c[0], &byte, 1) != 1 || write(c2p[1], &byte, 1) != 1)
                _exit(1);
        _exit(read(p2c[0], &byte, 1) == 0 ? 0 : 1);
    }
    close(p2c[0]);
    close(c2p[1]);
    printf("pids %d %d\n", (int)getpid(), (int)child);
    fflush(stdout);
    if (!fgets(line, sizeof(line), stdin))
        return 1;
    for (long i = 0; i < loops; i++)
        if (write(p2c[1], &byte, 1) != 1 || read(c2p[0], &byte, 1) != 1)
            return 1;
    printf("done\n");
    fflush(stdout);
    if (!fgets(line, sizeof(line), stdin))
        return 1;
    close(p2c[1]);
    int status = 1;
    waitpid(child, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
