/* hw-iotrace --preload: creates the region the library writes its records into (region.h), runs
 * the command with libhwiowrap.so preloaded and the region's descriptor inherited, and once the
 * command has ended turns the region into syscalls.tsv; and syscalls.json, the counters of either
 * backend. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hwargs.h"
#include "hwclock.h"
#include "hwgate.h"
#include "region.h"

/* In the command, before exec: the library, the calls, and where the region is. */
struct preload_env {
    const char *preload, *calls;
    int region_fd;
    char region_path[64];
};

static int set_env(void *arg)
{
    const struct preload_env *e = arg;
    /* the inherited descriptor sits far above those a program opens, so that it gets the numbers
     * it would get untraced */
    struct rlimit rl;
    int low = 512;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur / 2 < (rlim_t)low)
        low = (int)(rl.rlim_cur / 2);
    int fd = fcntl(e->region_fd, F_DUPFD, low);  /* not close-on-exec: every image of the command gets it */
    char num[16];
    if (fd < 0)
        return -1;
    snprintf(num, sizeof(num), "%d", fd);
    return setenv("LD_PRELOAD", e->preload, 1) || setenv("HWIOWRAP_FD", num, 1) ||
           setenv("HWIOWRAP_REGION", e->region_path, 1) || setenv("HWIOWRAP_CALLS", e->calls, 1);
}

int iot_preload_run(const struct iot_trace_opts *o, const char *lib_path, struct iot_trace_stats *st,
                    struct hw_err *err)
{
    char calls[512], preload[PATH_MAX * 2];
    int64_t nslots = IOT_REGION_SLOTS;
    struct iot_region_run region = {.map = NULL, .fd = -1};
    int ret = 0;
    memset(st, 0, sizeof(*st));
    st->exit_status = -1;
    const char *slots_env = getenv("HWIOWRAP_SLOTS");
    if (slots_env && hw_parse_i64("HWIOWRAP_SLOTS", slots_env, IOT_CHUNK, INT64_C(1) << 32, &nslots, err) < 0)
        return -EINVAL;
    if (access(lib_path, R_OK) < 0) {
        hw_seterr(err, "failed to find %s: %s", lib_path, strerror(errno));
        return -ENOENT;
    }
    int fd = open(o->out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);  /* fail before running anything */
    if (fd < 0) {
        int e = errno;
        hw_seterr(err, "failed to open %s: %s", o->out_path, strerror(e));
        return -e;
    }
    close(fd);
    if (iot_region_create(&region, (uint64_t)nslots, iot_region_tsc_usable(), err) < 0)
        return -ENOMEM;
    /* after what is preloaded already: a sanitizer's runtime must stay first, and the library then
     * records the calls as they reach the C library */
    const char *old = getenv("LD_PRELOAD");
    snprintf(preload, sizeof(preload), "%s%s%s", old ? old : "", old && *old ? ":" : "", lib_path);
    struct preload_env env = {preload, iot_calls_format(o->mask, calls, sizeof(calls)), region.fd, ""};
    snprintf(env.region_path, sizeof(env.region_path), "/proc/%d/fd/%d", (int)getpid(), region.fd);
    struct iot_anchor start = iot_anchor_now();
    region.map->anchor_tsc = (uint64_t)start.tsc;
    struct hw_gate gate;
    if (hw_gate_start(&gate, "hw-iotrace", o->argv, set_env, &env, err) < 0) {
        ret = -EAGAIN;
        goto cleanup;
    }
    pid_t pid = gate.pid;
    iot_trace_set_wake(pid, IOT_WAKE_FORWARD, o->kill_on_exit);  /* signals are passed on */
    if (o->stop_count && *o->stop_count)  /* one that came before the line above */
        iot_trace_signal((int)*o->stop_sig, (int)*o->stop_count);
    hw_gate_open(&gate, NULL);  /* a command gone already shows in its wait status */
    int status = 0;
    for (;;) {
        pid_t r = waitpid(pid, &status, 0);
        if (r == pid)
            break;
        if (r < 0 && errno != EINTR) {
            ret = -errno;
            iot_trace_set_wake(0, IOT_WAKE_NONE, 0);
            hw_seterr(err, "failed to wait for pid %d: %s", pid, strerror(-ret));
            goto cleanup;
        }
    }
    iot_trace_set_wake(0, IOT_WAKE_NONE, 0);
    int64_t t_end = hw_mono_ns();
    st->exit_status = status;
    st->tracees = 1;
    ret = iot_region_drain(&region, start, iot_anchor_now(), t_end, o->out_path, o->mask, st, err);
cleanup:
    iot_region_close(&region);
    return ret;
}

int iot_write_json(const char *path, const char *backend, const struct iot_trace_opts *o,
                   const struct iot_trace_stats *st, int64_t t_start_ns, int64_t t_end_ns)
{
    char calls[512];
    FILE *f = fopen(path, "we");
    if (!f)
        return -errno;
    int exit_code = -1, exit_signal = -1;
    if (st->exit_status >= 0 && WIFEXITED(st->exit_status))
        exit_code = WEXITSTATUS(st->exit_status);
    else if (st->exit_status >= 0 && WIFSIGNALED(st->exit_status))
        exit_signal = WTERMSIG(st->exit_status);
    fprintf(f,
            "{\n"
            "  \"format\": \"hostwire-syscalls 1\",\n"
            "  \"tool\": \"hw-iotrace %s\",\n"
            "  \"backend\": \"%s\",\n"
            "  \"mode\": \"%s\",\n"
            "  \"calls\": \"%s\",\n"
            "  \"clock\": \"CLOCK_MONOTONIC\",\n"
            "  \"t_start_ns\": %lld,\n"
            "  \"t_end_ns\": %lld,\n"
            "  \"attached_pid\": %d,\n"
            "  \"calls_seen\": %llu,\n"
            "  \"records_written\": %llu,\n"
            "  \"unfinished\": %llu,\n"
            "  \"lost\": %llu,\n"
            "  \"resolve_failures\": %llu,\n"
            "  \"io_uring_setups\": %lld,\n"
            "  \"stops\": %llu,\n"
            "  \"tracees\": %llu,\n"
            "  \"exit_code\": %d,\n"
            "  \"exit_signal\": %d\n"
            "}\n",
            IOT_VERSION, backend,
            !strcmp(backend, "preload") ? "preload" : st->seccomp ? "seccomp" : "syscall-stops",
            iot_calls_format(o->mask, calls, sizeof(calls)), (long long)t_start_ns, (long long)t_end_ns,
            o->npids ? o->pids[0] : 0, (unsigned long long)st->calls_seen, (unsigned long long)st->records_written,
            (unsigned long long)st->unfinished,
            (unsigned long long)(st->calls_seen > st->records_written ? st->calls_seen - st->records_written : 0),
            (unsigned long long)st->resolve_failures,
            /* the preload library sees no io_uring_setup (liburing may make it without the C library) */
            !strcmp(backend, "preload") ? -1LL : (long long)st->uring_setups, (unsigned long long)st->stops,
            (unsigned long long)st->tracees, exit_code, exit_signal);
    if (fclose(f) != 0)
        return -errno;
    return 0;
}
