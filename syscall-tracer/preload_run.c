/* hw-iotrace --preload: runs the command with libhwiowrap.so preloaded, then counts what the
 * library wrote; and syscalls.json, the counters of either backend. */
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
#include "iotrace.h"

/* Counts the records and the unfinished ones; writes the header when no process wrote any. */
static int count_records(const char *path, uint32_t mask, struct hw_trace_stats *st)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return -errno;
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int lines = 0;
    while ((n = getline(&line, &cap, f)) > 0) {
        lines++;
        if (line[0] == '#' || !strncmp(line, "t_enter_ns\t", 11))
            continue;
        st->records_written++;
        if (n >= 2 && line[n - 2] == '1' && line[n - 3] == '\t')
            st->unfinished++;
    }
    free(line);
    fclose(f);
    if (lines == 0) {
        char head[1024];
        int hl = hw_tsv_header(head, sizeof(head), "preload", mask, NULL);
        int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
        if (fd < 0)
            return -errno;
        int ok = hl > 0 && write(fd, head, (size_t)hl) == hl;
        close(fd);
        if (!ok)
            return -EIO;
    }
    st->calls_seen = st->records_written;
    return 0;
}

int hw_preload_run(const struct hw_trace_opts *o, const char *lib_path, struct hw_trace_stats *st,
                   char *err, size_t err_len)
{
    char abs_out[PATH_MAX], calls[512], preload[PATH_MAX * 2];
    memset(st, 0, sizeof(*st));
    st->exit_status = -1;
    if (access(lib_path, R_OK) < 0) {
        snprintf(err, err_len, "failed to find %s: %s", lib_path, strerror(errno));
        return -ENOENT;
    }
    int fd = open(o->out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        int e = errno;
        snprintf(err, err_len, "failed to open %s: %s", o->out_path, strerror(e));
        return -e;
    }
    close(fd);
    if (!realpath(o->out_path, abs_out)) {
        int e = errno;
        snprintf(err, err_len, "failed to resolve %s: %s", o->out_path, strerror(e));
        return -e;
    }
    const char *old = getenv("LD_PRELOAD");
    snprintf(preload, sizeof(preload), "%s%s%s", lib_path, old && *old ? ":" : "", old ? old : "");
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        snprintf(err, err_len, "failed to fork: %s", strerror(e));
        return -e;
    }
    if (pid == 0) {
        setenv("LD_PRELOAD", preload, 1);
        setenv("HWIOWRAP_OUTPUT", abs_out, 1);
        setenv("HWIOWRAP_CALLS", hw_calls_format(o->mask, calls, sizeof(calls)), 1);
        execvp(o->argv[0], o->argv);
        dprintf(2, "hw-iotrace: failed to run %s: %s\n", o->argv[0], strerror(errno));
        _exit(127);
    }
    int status = 0, seen = 0, killed = 0;
    for (;;) {
        pid_t r = waitpid(pid, &status, 0);
        if (r == pid)
            break;
        if (r < 0 && errno != EINTR) {
            int e = errno;
            snprintf(err, err_len, "failed to wait for pid %d: %s", pid, strerror(e));
            return -e;
        }
        /* a signal: pass it on (the library flushes on SIGINT/SIGTERM); kill on the second */
        if (o->stop_count && *o->stop_count != seen) {
            seen = (int)*o->stop_count;
            if ((o->kill_on_exit || seen > 1) && !killed) {
                kill(pid, SIGKILL);
                killed = 1;
            } else if (!killed) {
                kill(pid, (int)*o->stop_sig);
            }
        }
    }
    st->exit_status = status;
    st->tracees = 1;
    int r = count_records(abs_out, o->mask, st);
    if (r < 0)
        snprintf(err, err_len, "failed to read %s: %s", abs_out, strerror(-r));
    return r;
}

int hw_write_json(const char *path, const char *backend, const struct hw_trace_opts *o,
                  const struct hw_trace_stats *st, int64_t t_start_ns, int64_t t_end_ns)
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
            HW_IOTRACE_VERSION, backend,
            !strcmp(backend, "preload") ? "preload" : st->seccomp ? "seccomp" : "syscall-stops",
            hw_calls_format(o->mask, calls, sizeof(calls)), (long long)t_start_ns, (long long)t_end_ns,
            o->attach_pid, (unsigned long long)st->calls_seen, (unsigned long long)st->records_written,
            (unsigned long long)st->unfinished,
            (unsigned long long)(st->calls_seen > st->records_written ? st->calls_seen - st->records_written : 0),
            (unsigned long long)st->resolve_failures, (unsigned long long)st->stops,
            (unsigned long long)st->tracees, exit_code, exit_signal);
    if (fclose(f) != 0)
        return -errno;
    return 0;
}
