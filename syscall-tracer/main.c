/* hw-iotrace: traces the I/O system calls of a command or of running processes into syscalls.tsv
 * (ptrace backend with a seccomp filter, or the LD_PRELOAD backend libhwiowrap.so). */
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hwargs.h"
#include "hwclock.h"
#include "hwsignal.h"
#include "iotrace.h"

#define TOOL "hw-iotrace"

static volatile sig_atomic_t stop_sig, stop_count;

static void on_stop(int sig)
{
    stop_sig = sig == SIGALRM ? SIGTERM : sig;
    stop_count++;
    iot_trace_signal((int)stop_sig, (int)stop_count);
}

static const char usage_text[] =
    "usage: hw-iotrace [OPTIONS] (-p PID [-p PID...] | -- COMMAND [ARG...])\n"
    "Records the I/O system calls of a command (or of running processes) with CLOCK_MONOTONIC\n"
    "stamps at entry and exit, what each fd is, and the result, into a hostwire TSV file.\n"
    "\n"
    "OPTIONS\n"
    "  -o, --output FILE     syscalls.tsv to write (default syscalls.tsv); counters go to\n"
    "                        FILE with .json instead of .tsv\n"
    "  -j, --json FILE       write the counters there instead\n"
    "      --calls CALLS     comma-separated calls to trace (default: all of\n"
    "                        %s)\n"
    "  -p, --pid PID         attach to a running process and all its threads (repeatable; no\n"
    "                        seccomp filter: every call stops the process, slower)\n"
    "      --follow          with -p: follow new children and threads (a command is always followed)\n"
    "  -d, --duration T      stop after T, as on SIGTERM: 500ms, 2s, 1m (a bare number is seconds)\n"
    "      --preload         LD_PRELOAD backend: wrap the C library calls (no ptrace)\n"
    "      --preload-lib SO  the library to preload (default ../lib/libhwiowrap.so beside hw-iotrace)\n"
    "      --no-seccomp      ptrace backend: stop on every call instead of installing the filter\n"
    "      --kill-on-exit    kill the tracees when hw-iotrace stops or dies\n"
    "  -v, --verbose         the mode, then the counters on stderr\n"
    "  -h, --help            this help\n"
    "\n"
    "On SIGINT/SIGTERM an attached process is detached; a command is passed the signal and traced\n"
    "until it exits (a second signal kills it), then the files are written.\n"
    "\n"
    "EXIT STATUS: 0 ok (with a command: the command's own status, 128+N when signal N killed it),\n"
    "1 runtime failure, 2 usage error.\n"
    "\n"
    "EXAMPLES\n"
    "  hw-iotrace -o syscalls.tsv -- hw-bench pingpong --loops 1000\n"
    "  hw-iotrace --calls write,sendto -o out.tsv -- ./sender\n"
    "  hw-iotrace -p 1234 -p 1240 --follow -o attached.tsv -d 10\n"
    "  hw-iotrace --preload -o wrapped.tsv -d 300ms -- ./sender\n";

static int default_lib(char *buf, size_t len)
{
    const char *env = getenv("HWIOWRAP_LIB");
    if (env && *env) {
        snprintf(buf, len, "%s", env);
        return 0;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0)
        return -1;
    exe[n] = '\0';
    snprintf(buf, len, "%s/../lib/libhwiowrap.so", dirname(exe));
    char real[PATH_MAX];
    if (realpath(buf, real))
        snprintf(buf, len, "%s", real);
    return 0;
}

enum { OPT_PRELOAD = 256, OPT_PRELOAD_LIB, OPT_NO_SECCOMP, OPT_KILL, OPT_CALLS, OPT_FOLLOW };

struct values {
    struct iot_trace_opts o;
    int pids[64];
    const char *calls, *json, *calls_opt;
    char lib[PATH_MAX];
    int preload;
    int64_t duration_ns;
};

static int take(void *values, int c, const char *name, const char *arg, struct hw_err *err)
{
    struct values *v = values;
    switch (c) {
    case 'o': v->o.out_path = arg; return 0;
    case 'j': v->json = arg; return 0;
    case 'e':  /* old spelling of --calls (-e is --event in hostwire's vocabulary) */
    case OPT_CALLS: v->calls = arg; v->calls_opt = c == 'e' ? "-e" : "--calls"; return 0;
    case OPT_FOLLOW: v->o.follow = 1; return 0;
    case 'p':
        if (v->o.npids >= (int)(sizeof(v->pids) / sizeof(v->pids[0])))
            return hw_usage_err(err, "failed to parse %s: at most 64 processes", name), -1;
        return hw_parse_pid(name, arg, &v->pids[v->o.npids++], err);
    case 'd': return hw_parse_duration_ns(name, arg, 1, &v->duration_ns, err);
    case OPT_PRELOAD: v->preload = 1; return 0;
    case OPT_PRELOAD_LIB: snprintf(v->lib, sizeof(v->lib), "%s", arg); return 0;
    case OPT_NO_SECCOMP: v->o.no_seccomp = 1; return 0;
    case OPT_KILL: v->o.kill_on_exit = 1; return 0;
    case 'v': v->o.verbose = 1; return 0;
    }
    return 0;
}

/* Checks what the options say together; fills the json path. 0, or -1 with a usage error. */
static int check(struct values *v, int argc, char **argv, char *json_buf, size_t json_len, struct hw_err *err)
{
    char bad[64];
    if (iot_calls_parse(v->calls, &v->o.mask, bad, sizeof(bad)) < 0) {
        char known[512];
        return hw_usage_err(err, "failed to parse %s: unknown call '%s' (known: %s)", v->calls_opt, bad,
                            iot_calls_format((1u << IOT_NCALLS) - 1, known, sizeof(known))), -1;
    }
    if ((v->o.npids > 0) == (optind < argc))
        return hw_usage_err(err, "give either -p PID or -- CMD ARGS"), -1;
    if (v->preload && v->o.npids > 0)
        return hw_usage_err(err, "--preload runs a command; it cannot attach to -p PID"), -1;
    v->o.argv = argv + optind;
    v->o.pids = v->pids;
    if (!v->json) {
        size_t n = strlen(v->o.out_path);
        if (n > 4 && !strcmp(v->o.out_path + n - 4, ".tsv"))
            snprintf(json_buf, json_len, "%.*s.json", (int)(n - 4), v->o.out_path);
        else
            snprintf(json_buf, json_len, "%s.json", v->o.out_path);
        v->json = json_buf;
    }
    v->o.json_path = v->json;
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"output", required_argument, NULL, 'o'}, {"json", required_argument, NULL, 'j'},
        {"calls", required_argument, NULL, OPT_CALLS}, {"follow", no_argument, NULL, OPT_FOLLOW},
        {"pid", required_argument, NULL, 'p'}, {"duration", required_argument, NULL, 'd'},
        {"preload", no_argument, NULL, OPT_PRELOAD}, {"preload-lib", required_argument, NULL, OPT_PRELOAD_LIB},
        {"no-seccomp", no_argument, NULL, OPT_NO_SECCOMP}, {"kill-on-exit", no_argument, NULL, OPT_KILL},
        {"verbose", no_argument, NULL, 'v'}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0},
    };
    static struct values v = {.o = {.out_path = "syscalls.tsv", .stop_sig = &stop_sig, .stop_count = &stop_count}};
    static struct hw_err err;
    static char help[sizeof(usage_text) + 512], json_buf[PATH_MAX];
    char calls[512];
    snprintf(help, sizeof(help), usage_text, iot_calls_format((1u << IOT_NCALLS) - 1, calls, sizeof(calls)));
    int rc = hw_getopt(argc, argv, "+:o:j:e:p:d:vh", longopts, help, take, &v, &err);
    if (rc > 0)
        return HW_EXIT_OK;
    if (rc < 0 || check(&v, argc, argv, json_buf, sizeof(json_buf), &err) < 0)
        return hw_err_exit(TOOL, NULL, &err);
    struct iot_trace_opts *o = &v.o;
    o->log = stderr;

    hw_on_stop_signals(on_stop);  /* waitpid returns EINTR */
    struct sigaction sa;
    sigaction(SIGINT, NULL, &sa);
    sigaction(SIGALRM, &sa, NULL);  /* --duration ends as SIGTERM does */
    if (v.duration_ns > 0) {
        struct itimerval t = {{0, 0}, {v.duration_ns / 1000000000, (v.duration_ns % 1000000000) / 1000}};
        setitimer(ITIMER_REAL, &t, NULL);
    }

    const char *backend = v.preload ? "preload" : "ptrace";
    if (o->verbose) {
        fprintf(stderr, "hw-iotrace: %s backend, ", backend);
        if (o->npids)
            for (int i = 0; i < o->npids; i++)
                fprintf(stderr, "%s%d", i ? ", " : "attaching to pid ", o->pids[i]);
        else
            fprintf(stderr, "running %s", o->argv[0]);
        fprintf(stderr, "; writing %s and %s\n", o->out_path, o->json_path);
    }
    struct iot_trace_stats st;
    int64_t t0 = hw_mono_ns();
    int r;
    if (v.preload) {
        if (!v.lib[0] && default_lib(v.lib, sizeof(v.lib)) < 0) {
            hw_seterr(&err, "failed to find libhwiowrap.so: give --preload-lib");
            return hw_err_exit(TOOL, NULL, &err);
        }
        r = iot_preload_run(o, v.lib, &st, &err);
    } else {
        r = iot_trace_run(o, &st, &err);
    }
    int64_t t1 = hw_mono_ns();
    if (r < 0)
        return hw_err_exit(TOOL, NULL, &err);
    int jr = iot_write_json(v.json, backend, o, &st, t0, t1);
    if (jr < 0) {
        hw_seterr(&err, "failed to write %s: %s", v.json, strerror(-jr));
        return hw_err_exit(TOOL, NULL, &err);
    }
    if (o->verbose || stop_count)
        fprintf(stderr, "hw-iotrace: %llu calls seen, %llu written, %llu unfinished, %llu lost (%s%s)\n",
                (unsigned long long)st.calls_seen, (unsigned long long)st.records_written,
                (unsigned long long)st.unfinished,
                (unsigned long long)(st.calls_seen - st.records_written), backend,
                v.preload ? "" : st.seccomp ? ", seccomp" : ", syscall stops");
    if (st.exit_status >= 0) {
        if (WIFEXITED(st.exit_status))
            return WEXITSTATUS(st.exit_status);
        if (WIFSIGNALED(st.exit_status))
            return 128 + WTERMSIG(st.exit_status);
    }
    return HW_EXIT_OK;
}
