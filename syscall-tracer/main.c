/* hw-iotrace: traces the I/O system calls of a command or a running process into syscalls.tsv
 * (ptrace backend with a seccomp filter, or the LD_PRELOAD backend libhwiowrap.so). */
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hwclock.h"
#include "hwsignal.h"
#include "iotrace.h"

static volatile sig_atomic_t stop_sig, stop_count;

static void on_stop(int sig)
{
    stop_sig = sig == SIGALRM ? SIGTERM : sig;
    stop_count++;
    hw_trace_signal((int)stop_sig, (int)stop_count);
}

static void usage(FILE *f)
{
    char calls[512];
    fprintf(f,
            "usage: hw-iotrace [-o FILE] [-e CALLS] [-f] [--preload] [--kill-on-exit] (-p PID | -- CMD ARGS)\n"
            "Records the I/O system calls of a command (or of a running process) with CLOCK_MONOTONIC\n"
            "stamps at entry and exit, what each fd is, and the result, into a hostwire TSV file.\n"
            "\n"
            "  -o, --output FILE     syscalls.tsv to write (default syscalls.tsv); counters go to\n"
            "                        FILE with .json instead of .tsv\n"
            "  -j, --json FILE       write the counters there instead\n"
            "  -e, --calls CALLS     comma-separated calls to trace (default: all of\n"
            "                        %s)\n"
            "  -f, --follow          with -p: follow new children and threads (a command is always followed)\n"
            "  -p, --pid PID         attach to a running process and all its threads (no seccomp filter:\n"
            "                        every call stops the process, slower)\n"
            "      --preload         LD_PRELOAD backend: wrap the C library calls (no ptrace)\n"
            "      --preload-lib SO  the library to preload (default ../lib/libhwiowrap.so beside hw-iotrace)\n"
            "      --no-seccomp      ptrace backend: stop on every call instead of installing the filter\n"
            "      --kill-on-exit    kill the tracees when hw-iotrace stops or dies\n"
            "      --duration SEC    stop after SEC seconds, as on SIGTERM\n"
            "  -v, --verbose         print the counters and the mode\n"
            "  -h, --help            this help\n"
            "\n"
            "On SIGINT/SIGTERM an attached process is detached; a command is passed the signal and traced\n"
            "until it exits (a second signal kills it), then the files are written. The exit status is\n"
            "the command's (128+N when killed by signal N); 1 when tracing failed, 2 on bad usage.\n"
            "\n"
            "EXAMPLES\n"
            "  hw-iotrace -o syscalls.tsv -- hw-bench pingpong --loops 1000\n"
            "  hw-iotrace -e write,sendto -o out.tsv -- ./sender\n"
            "  hw-iotrace -p 1234 -f -o attached.tsv --duration 10\n"
            "  hw-iotrace --preload -o wrapped.tsv -- ./sender\n",
            hw_calls_format((1u << HW_NCALLS) - 1, calls, sizeof(calls)));
}

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

int main(int argc, char **argv)
{
    enum { OPT_PRELOAD = 256, OPT_PRELOAD_LIB, OPT_NO_SECCOMP, OPT_KILL, OPT_DURATION };
    static const struct option longopts[] = {
        {"output", required_argument, NULL, 'o'},   {"json", required_argument, NULL, 'j'},
        {"calls", required_argument, NULL, 'e'},    {"follow", no_argument, NULL, 'f'},
        {"pid", required_argument, NULL, 'p'},      {"preload", no_argument, NULL, OPT_PRELOAD},
        {"preload-lib", required_argument, NULL, OPT_PRELOAD_LIB},
        {"no-seccomp", no_argument, NULL, OPT_NO_SECCOMP},
        {"kill-on-exit", no_argument, NULL, OPT_KILL},
        {"duration", required_argument, NULL, OPT_DURATION},
        {"verbose", no_argument, NULL, 'v'},        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct hw_trace_opts o = {.out_path = "syscalls.tsv", .stop_sig = &stop_sig, .stop_count = &stop_count};
    const char *calls = NULL, *json = NULL;
    char lib[PATH_MAX] = "", json_buf[PATH_MAX], err[512] = "", bad[64];
    int preload = 0, c;
    double duration = 0;
    while ((c = getopt_long(argc, argv, "+o:j:e:fp:vh", longopts, NULL)) != -1) {
        char *end;
        switch (c) {
        case 'o': o.out_path = optarg; break;
        case 'j': json = optarg; break;
        case 'e': calls = optarg; break;
        case 'f': o.follow = 1; break;
        case 'p':
            errno = 0;
            long pid = strtol(optarg, &end, 10);
            if (errno || *end || pid <= 0 || pid > INT_MAX) {
                fprintf(stderr, "hw-iotrace: failed to parse -p '%s': expected a process id\n", optarg);
                return 2;
            }
            o.attach_pid = (pid_t)pid;
            break;
        case OPT_PRELOAD: preload = 1; break;
        case OPT_PRELOAD_LIB: snprintf(lib, sizeof(lib), "%s", optarg); break;
        case OPT_NO_SECCOMP: o.no_seccomp = 1; break;
        case OPT_KILL: o.kill_on_exit = 1; break;
        case OPT_DURATION:
            duration = strtod(optarg, &end);
            if (*end || !(duration > 0)) {
                fprintf(stderr, "hw-iotrace: failed to parse --duration '%s': expected seconds > 0\n", optarg);
                return 2;
            }
            break;
        case 'v': o.verbose = 1; break;
        case 'h': usage(stdout); return 0;
        default:
            fprintf(stderr, "hw-iotrace: bad usage (see hw-iotrace --help)\n");
            return 2;
        }
    }
    if (hw_calls_parse(calls, &o.mask, bad, sizeof(bad)) < 0) {
        fprintf(stderr, "hw-iotrace: failed to parse -e: unknown call '%s' (known: %s)\n", bad,
                hw_calls_format((1u << HW_NCALLS) - 1, json_buf, sizeof(json_buf)));
        return 2;
    }
    if ((o.attach_pid > 0) == (optind < argc)) {
        fprintf(stderr, "hw-iotrace: give either -p PID or -- CMD ARGS (see hw-iotrace --help)\n");
        return 2;
    }
    if (preload && o.attach_pid > 0) {
        fprintf(stderr, "hw-iotrace: --preload runs a command; it cannot attach to -p PID\n");
        return 2;
    }
    o.argv = argv + optind;
    if (!json) {
        size_t n = strlen(o.out_path);
        if (n > 4 && !strcmp(o.out_path + n - 4, ".tsv"))
            snprintf(json_buf, sizeof(json_buf), "%.*s.json", (int)(n - 4), o.out_path);
        else
            snprintf(json_buf, sizeof(json_buf), "%s.json", o.out_path);
        json = json_buf;
    }
    o.json_path = json;

    hw_on_stop_signals(on_stop);  /* waitpid returns EINTR */
    struct sigaction sa;
    sigaction(SIGINT, NULL, &sa);
    sigaction(SIGALRM, &sa, NULL);  /* --duration ends as SIGTERM does */
    if (duration > 0)
        alarm((unsigned)(duration + 0.999));

    struct hw_trace_stats st;
    int64_t t0 = hw_mono_ns();
    int r;
    if (preload) {
        if (!lib[0] && default_lib(lib, sizeof(lib)) < 0) {
            fprintf(stderr, "hw-iotrace: failed to find libhwiowrap.so: give --preload-lib\n");
            return 1;
        }
        r = hw_preload_run(&o, lib, &st, err, sizeof(err));
    } else {
        r = hw_trace_run(&o, &st, err, sizeof(err));
    }
    int64_t t1 = hw_mono_ns();
    if (r < 0) {
        fprintf(stderr, "hw-iotrace: %s\n", err);
        return 1;
    }
    const char *backend = preload ? "preload" : "ptrace";
    int jr = hw_write_json(json, backend, &o, &st, t0, t1);
    if (jr < 0) {
        fprintf(stderr, "hw-iotrace: failed to write %s: %s\n", json, strerror(-jr));
        return 1;
    }
    if (o.verbose || stop_count)
        fprintf(stderr, "hw-iotrace: %llu calls seen, %llu written, %llu unfinished, %llu lost (%s%s)\n",
                (unsigned long long)st.calls_seen, (unsigned long long)st.records_written,
                (unsigned long long)st.unfinished,
                (unsigned long long)(st.calls_seen - st.records_written), backend,
                preload ? "" : st.seccomp ? ", seccomp" : ", syscall stops");
    if (st.exit_status >= 0) {
        if (WIFEXITED(st.exit_status))
            return WEXITSTATUS(st.exit_status);
        if (WIFSIGNALED(st.exit_status))
            return 128 + WTERMSIG(st.exit_status);
    }
    return 0;
}
