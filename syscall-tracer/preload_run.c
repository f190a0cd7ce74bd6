/* hw-iotrace --preload: runs the command with libhwiowrap.so preloaded, then turns the spool the
 * library wrote into syscalls.tsv; and syscalls.json, the counters of either backend. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hwclock.h"
#include "hwgate.h"
#include "iotrace.h"

/* In the command, before exec: the library and where it writes. */
struct preload_env {
    const char *preload, *spool, *calls;
};

static int set_env(void *arg)
{
    const struct preload_env *e = arg;
    return setenv("LD_PRELOAD", e->preload, 1) || setenv("HWIOWRAP_SPOOL", e->spool, 1) ||
           setenv("HWIOWRAP_CALLS", e->calls, 1);
}

int iot_preload_run(const struct iot_trace_opts *o, const char *lib_path, struct iot_trace_stats *st,
                    struct hw_err *err)
{
    char abs_out[PATH_MAX], spool[PATH_MAX + 8], calls[512], preload[PATH_MAX * 2];
    memset(st, 0, sizeof(*st));
    st->exit_status = -1;
    if (access(lib_path, R_OK) < 0) {
        hw_seterr(err, "failed to find %s: %s", lib_path, strerror(errno));
        return -ENOENT;
    }
    int fd = open(o->out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        int e = errno;
        hw_seterr(err, "failed to open %s: %s", o->out_path, strerror(e));
        return -e;
    }
    close(fd);
    if (!realpath(o->out_path, abs_out)) {
        int e = errno;
        hw_seterr(err, "failed to resolve %s: %s", o->out_path, strerror(e));
        return -e;
    }
    snprintf(spool, sizeof(spool), "%s.spool", abs_out);
    unlink(spool);
    const char *old = getenv("LD_PRELOAD");
    snprintf(preload, sizeof(preload), "%s%s%s", lib_path, old && *old ? ":" : "", old ? old : "");
    struct preload_env env = {preload, spool, iot_calls_format(o->mask, calls, sizeof(calls))};
    struct hw_gate gate;
    if (hw_gate_start(&gate, "hw-iotrace", o->argv, set_env, &env, err) < 0)
        return -EAGAIN;
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
            int e = errno;
            iot_trace_set_wake(0, IOT_WAKE_NONE, 0);
            hw_seterr(err, "failed to wait for pid %d: %s", pid, strerror(e));
            return -e;
        }
    }
    iot_trace_set_wake(0, IOT_WAKE_NONE, 0);
    st->exit_status = status;
    st->tracees = 1;
    int r = iot_spool_convert(spool, abs_out, o->mask, st, err);
    if (r == 0)
        unlink(spool);
    return r;
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
            (unsigned long long)st->resolve_failures, (unsigned long long)st->stops,
            (unsigned long long)st->tracees, exit_code, exit_signal);
    if (fclose(f) != 0)
        return -errno;
    return 0;
}
