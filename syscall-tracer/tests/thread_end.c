/* A process that ends under 8 writing threads: the ground truth of hw-iotrace --preload's records
 * at the end of a process. Each thread writes one byte to /dev/null in a loop and counts, in the
 * shared file COUNTS that the test reads after the end, the calls it started (before the call)
 * and those that returned (after it); once every thread has N calls done:
 *   exit  one of the threads calls exit() while the others go on writing;
 *   kill  "ready PID" on stdout, and the threads write until a SIGKILL from outside;
 *   exec  one of the threads execs this program as "after", which writes 1000 more times alone.
 * usage: iotrace-thread-end exit|kill|exec COUNTS [N]    (N default 20000)
 * COUNTS: 64-byte lines of little-endian int64: line 0 the pid; line 1+k thread k's tid, started,
 * completed (k = 0..7); line 9 the same for the exec'd image. */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define NTHREADS 8
#define AFTER_WRITES 1000

struct counter {
    _Atomic int64_t tid, started, completed;
    char pad[40];
};

struct counts {
    _Atomic int64_t pid;
    char pad[56];
    struct counter t[NTHREADS + 1];
};

static struct counts *counts;
static const char *mode, *counts_path, *argv0;
static int64_t first_writes = 20000;
static int devnull;

static struct counts *map_counts(const char *path, int create)
{
    int fd = open(path, O_RDWR | O_CLOEXEC | (create ? O_CREAT | O_TRUNC : 0), 0644);
    if (fd < 0 || (create && ftruncate(fd, sizeof(struct counts)) < 0)) {
        perror(path);
        exit(2);
    }
    void *p = mmap(NULL, sizeof(struct counts), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(2);
    }
    return p;
}

/* One write, counted before and after, so that after any end the test knows which calls were
 * made and which returned. */
static void counted_write(struct counter *c, int64_t *n)
{
    atomic_store_explicit(&c->started, *n + 1, memory_order_relaxed);
    if (write(devnull, "x", 1) != 1) {
        perror("write");
        _exit(2);
    }
    atomic_store_explicit(&c->completed, ++*n, memory_order_relaxed);
}

static int all_reached(int64_t n)
{
    for (int k = 0; k < NTHREADS; k++)
        if (atomic_load_explicit(&counts->t[k].completed, memory_order_relaxed) < n)
            return 0;
    return 1;
}

static void *writer(void *arg)
{
    struct counter *c = arg;
    int ender = c == &counts->t[0] && strcmp(mode, "kill") != 0;
    int64_t n = 0;
    atomic_store_explicit(&c->tid, (int64_t)syscall(SYS_gettid), memory_order_relaxed);
    for (;;) {
        counted_write(c, &n);
        if (ender && n >= first_writes && all_reached(first_writes)) {
            if (strcmp(mode, "exit") == 0)
                exit(0);
            execl("/proc/self/exe", argv0, "after", counts_path, (char *)NULL);
            perror("exec");
            _exit(2);
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 3 || (strcmp(argv[1], "exit") && strcmp(argv[1], "kill") && strcmp(argv[1], "exec") &&
                     strcmp(argv[1], "after"))) {
        fprintf(stderr, "usage: iotrace-thread-end exit|kill|exec COUNTS [N]\n");
        return 2;
    }
    mode = argv[1];
    counts_path = argv[2];
    argv0 = argv[0];
    if (argc > 3)
        first_writes = atoll(argv[3]);
    devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (strcmp(mode, "after") == 0) {   /* the exec'd image: alone now, then a plain exit */
        counts = map_counts(counts_path, 0);
        struct counter *c = &counts->t[NTHREADS];
        int64_t n = 0;
        atomic_store_explicit(&c->tid, (int64_t)syscall(SYS_gettid), memory_order_relaxed);
        for (int i = 0; i < AFTER_WRITES; i++)
            counted_write(c, &n);
        return 0;
    }
    counts = map_counts(counts_path, 1);
    atomic_store_explicit(&counts->pid, (int64_t)getpid(), memory_order_relaxed);
    pthread_t th[NTHREADS];
    for (int k = 0; k < NTHREADS; k++)
        if (pthread_create(&th[k], NULL, writer, &counts->t[k]) != 0) {
            fprintf(stderr, "failed to start a thread\n");
            return 2;
        }
    if (strcmp(mode, "kill") == 0) {
        while (!all_reached(first_writes))
            usleep(1000);
        printf("ready %d\n", (int)getpid());
        fflush(stdout);
    }
    for (int k = 0; k < NTHREADS; k++)   /* never returns: the end comes from a thread or outside */
        pthread_join(th[k], NULL);
    return 0;
}
