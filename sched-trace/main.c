/* hw-schedtrace: records scheduler, network and (on request) I/O system-call events from a
 * private tracefs instance into trace.dat, sched.tsv, syscalls.tsv and sched.json. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hwsignal.h"
#include "st.h"

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
    (void)sig;
    stop_flag = 1;
}

static void usage(FILE *out)
{
    fprintf(out,
        "usage: hw-schedtrace [options] [-- COMMAND [ARG...]]\n"
        "       hw-schedtrace convert [--syscalls] [-o DIR] TRACE.DAT\n"
        "\n"
        "Records kernel events from its own tracefs instance (hw-<pid>, trace clock mono) until\n"
        "SIGINT/SIGTERM, --duration or the end of COMMAND, draining the per-CPU buffers to disk.\n"
        "Writes DIR/trace.dat (trace-cmd report and KernelShark open it), DIR/sched.tsv,\n"
        "DIR/sched.json (loss counters, clock check) and with --syscalls DIR/syscalls.dat and\n"
        "DIR/syscalls.tsv. Default events: sched_switch, sched_wakeup, sched_wakeup_new,\n"
        "sched_migrate_task, sched_process_fork/exec/exit, net_dev_queue, net_dev_xmit,\n"
        "netif_receive_skb, sock:inet_sock_set_state, tcp:tcp_probe (where the kernel has it).\n"
        "\n"
        "  -o, --output DIR         output directory, created if missing (default .)\n"
        "  -d, --duration SECONDS   stop after this long\n"
        "  -b, --buffer-kb KB       per-CPU ring buffer size (default: the kernel's)\n"
        "  -s, --syscalls           also record enter/exit of hw-iotrace's default calls: read,\n"
        "                           write, readv, writev, pread64, pwrite64, sendto, sendmsg,\n"
        "                           sendmmsg, recvfrom, recvmsg, sendfile, splice, connect, accept,\n"
        "                           accept4, close (own instance hw-<pid>-sys)\n"
        "  -p, --pid PID            system calls of PID and its descendants only (repeatable);\n"
        "                           COMMAND is added to this list\n"
        "  -e, --event SYS:EVENT    record this event instead of the default set (repeatable)\n"
        "  -f, --filter SYS:EVENT=EXPR  kernel event filter for a recorded event (repeatable)\n"
        "      --no-drain           do not read the buffers while recording (loss tests)\n"
        "  -r, --rt-prio PRIO       SCHED_FIFO priority of the drain threads (default 1, so that\n"
        "                           a loaded machine does not starve them; 0: normal scheduling)\n"
        "  -n, --name SUFFIX        instance name hw-<pid>-SUFFIX\n"
        "  -v, --verbose            more messages\n"
        "  -h, --help               this help\n"
        "\n"
        "Exit status: 0 ok, 1 runtime failure, 2 usage.\n"
        "\n"
        "EXAMPLES\n"
        "  hw-schedtrace -o raw --duration 10\n"
        "  hw-schedtrace -o raw -s -- hw-bench pingpong --loops 100000 --cpu 0\n"
        "  hw-schedtrace -o raw -s -p 4242\n"
        "  hw-schedtrace -o raw -b 4 --no-drain -e sched:sched_switch \\\n"
        "      -f 'sched:sched_switch=prev_pid==4242' -- sleep 1\n"
        "  hw-schedtrace convert -o out raw/trace.dat\n"
        "  trace-cmd report -i raw/trace.dat\n");
}

static int parse_number(const char *text, double *out)
{
    char *end;
    *out = strtod(text, &end);
    return end != text && *end == '\0' && *out >= 0;
}

static int convert_main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "output", required_argument, NULL, 'o' }, { "syscalls", no_argument, NULL, 's' },
        { "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
    };
    const char *outdir = ".";
    bool syscalls = false;
    int c;
    while ((c = getopt_long(argc, argv, "o:sh", longopts, NULL)) != -1) {
        switch (c) {
        case 'o': outdir = optarg; break;
        case 's': syscalls = true; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind + 1 != argc) {
        fprintf(stderr, "hw-schedtrace: failed to parse arguments: convert needs one TRACE.DAT\n");
        return 2;
    }
    struct st_err err = { 0 };
    if (st_convert_file(argv[optind], outdir, syscalls, &err) < 0) {
        fprintf(stderr, "hw-schedtrace: %s\n", err.msg);
        return err.usage ? 2 : 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "output", required_argument, NULL, 'o' }, { "duration", required_argument, NULL, 'd' },
        { "buffer-kb", required_argument, NULL, 'b' }, { "syscalls", no_argument, NULL, 's' },
        { "pid", required_argument, NULL, 'p' }, { "event", required_argument, NULL, 'e' },
        { "filter", required_argument, NULL, 'f' }, { "no-drain", no_argument, NULL, 'N' },
        { "name", required_argument, NULL, 'n' }, { "verbose", no_argument, NULL, 'v' },
        { "rt-prio", required_argument, NULL, 'r' },
        { "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
    };
    struct st_config cfg = { .outdir = ".", .drain = true, .rt_prio = 1, .stop = &stop_flag };
    double num;
    int c;
    if (argc > 1 && strcmp(argv[1], "convert") == 0)
        return convert_main(argc - 1, argv + 1);
    while ((c = getopt_long(argc, argv, "+o:d:b:sp:e:f:n:r:vh", longopts, NULL)) != -1) {
        switch (c) {
        case 'o': cfg.outdir = optarg; break;
        case 'd':
            if (!parse_number(optarg, &num) || num <= 0) {
                fprintf(stderr, "hw-schedtrace: failed to parse --duration '%s': expected seconds > 0\n", optarg);
                return 2;
            }
            cfg.duration_s = num;
            break;
        case 'b':
            if (!parse_number(optarg, &num) || num < 1 || num != (long)num) {
                fprintf(stderr, "hw-schedtrace: failed to parse --buffer-kb '%s': expected a whole number >= 1\n", optarg);
                return 2;
            }
            cfg.buffer_kb = (long)num;
            break;
        case 's': cfg.syscalls = true; break;
        case 'p':
            if (!parse_number(optarg, &num) || num < 1 || num != (int)num || cfg.npids >= ST_MAX_PIDS - 1) {
                fprintf(stderr, "hw-schedtrace: failed to parse --pid '%s': expected a process id\n", optarg);
                return 2;
            }
            cfg.pids[cfg.npids++] = (int)num;
            break;
        case 'e':
            if (cfg.nevents >= ST_MAX_EVENTS) {
                fprintf(stderr, "hw-schedtrace: failed to parse --event: at most %d events\n", ST_MAX_EVENTS);
                return 2;
            }
            cfg.events[cfg.nevents++] = optarg;
            break;
        case 'f':
            if (cfg.nfilters >= ST_MAX_FILTERS) {
                fprintf(stderr, "hw-schedtrace: failed to parse --filter: at most %d filters\n", ST_MAX_FILTERS);
                return 2;
            }
            cfg.filters[cfg.nfilters++] = optarg;
            break;
        case 'N': cfg.drain = false; break;
        case 'r':
            if (!parse_number(optarg, &num) || num > 99 || num != (int)num) {
                fprintf(stderr, "hw-schedtrace: failed to parse --rt-prio '%s': expected 0 to 99\n", optarg);
                return 2;
            }
            cfg.rt_prio = (int)num;
            break;
        case 'n': cfg.suffix = optarg; break;
        case 'v': cfg.verbose++; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc)
        cfg.command = argv + optind;
    if (cfg.npids && !cfg.syscalls) {
        fprintf(stderr, "hw-schedtrace: failed to parse --pid: it selects system calls, give --syscalls too\n");
        return 2;
    }
    hw_on_stop_signals(on_signal);
    struct st_err err = { 0 };
    if (st_record(&cfg, &err) < 0) {
        fprintf(stderr, "hw-schedtrace: %s\n", err.msg);
        return err.usage ? 2 : 1;
    }
    return 0;
}
