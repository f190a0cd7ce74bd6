/* hw-schedtrace: records scheduler, network and (on request) I/O system-call events from a
 * private tracefs instance into trace.dat, sched.tsv, syscalls.tsv and sched.json. */
#include <stdio.h>
#include <string.h>

#include "hwargs.h"
#include "hwsignal.h"
#include "st.h"

#define TOOL "hw-schedtrace"

static const char usage[] =
    "usage: hw-schedtrace [OPTIONS] [-- COMMAND [ARG...]]\n"
    "       hw-schedtrace convert [OPTIONS] TRACE.DAT\n"
    "\n"
    "Records kernel events from its own tracefs instance (hw-<pid>, trace clock mono) until\n"
    "SIGINT/SIGTERM, --duration or the end of COMMAND, draining the per-CPU buffers to disk.\n"
    "Writes DIR/trace.dat (trace-cmd report and KernelShark open it), DIR/sched.tsv,\n"
    "DIR/sched.json (loss counters, clock check) and with --syscalls DIR/syscalls.dat and\n"
    "DIR/syscalls.tsv. Default events: sched_switch, sched_wakeup, sched_wakeup_new,\n"
    "sched_migrate_task, sched_process_fork/exec/exit, net_dev_queue, net_dev_xmit,\n"
    "netif_receive_skb, sock:inet_sock_set_state, tcp:tcp_probe (where the kernel has it),\n"
    "irq:softirq_entry/exit of the network's softirqs (NET_TX, NET_RX).\n"
    "'convert' turns a trace.dat (or syscalls.dat with -s) into DIR/sched.tsv (syscalls.tsv).\n"
    "--switch-ext adds custom:sched_switch_ext_tp, the scheduler's state at every switch, of a\n"
    "kernel built with the sched_switch_ext series (kernel-patches/, CONFIG_SCHED_SWITCH_EXT_EVENT).\n"
    "\n"
    "OPTIONS\n"
    "  -o, --output DIR         output directory, created if missing (default .)\n"
    "  -d, --duration T         stop after T: 500ms, 2s, 1m (a bare number is seconds)\n"
    "  -b, --buffer-size KIB    per-CPU ring buffer size in KiB (default: the kernel's)\n"
    "  -s, --syscalls           also record enter/exit of hw-iotrace's default calls: read,\n"
    "                           write, readv, writev, pread64, pwrite64, sendto, sendmsg,\n"
    "                           sendmmsg, recvfrom, recvmsg, sendfile, splice, connect, accept,\n"
    "                           accept4, close, pwritev, pwritev2, vmsplice, tee, and io_uring's\n"
    "                           send and write operations (own instance hw-<pid>-sys)\n"
    "  -w, --waits              with -s: also the calls a program blocks in between its I/O:\n"
    "                           epoll_wait, epoll_pwait(2), poll, ppoll, select, pselect6,\n"
    "                           nanosleep, clock_nanosleep, futex, futex_waitv, wait4, waitid,\n"
    "                           pause, rt_sigsuspend, rt_sigtimedwait, recvmmsg, io_getevents,\n"
    "                           io_pgetevents, io_uring_enter, msgrcv, semop, semtimedop,\n"
    "                           mq_timedreceive, flock, fsync, fdatasync (where the kernel has them)\n"
    "  -p, --pid PID            system calls of PID and its descendants only (repeatable);\n"
    "                           COMMAND is added to this list\n"
    "  -e, --event SYS:EVENT    record this event instead of the default set (repeatable)\n"
    "  -x, --switch-ext         also record custom:sched_switch_ext_tp (a kernel without it: exit 1)\n"
    "  -f, --filter SYS:EVENT=EXPR  kernel event filter for a recorded event (repeatable)\n"
    "      --no-drain           do not read the buffers while recording (loss tests)\n"
    "  -r, --rt-prio PRIO       SCHED_FIFO priority of the drain threads (default 1, so that\n"
    "                           a loaded machine does not starve them; 0: normal scheduling)\n"
    "      --name SUFFIX        instance name hw-<pid>-SUFFIX\n"
    "      --ready-fd N         write \"ready\\n\" to descriptor N once recording, then close it\n"
    "  -v, --verbose            the events, buffer sizes and pids of each instance on stderr\n"
    "                           (convert: the records of each CPU)\n"
    "  -h, --help               this help\n"
    "\n"
    "EXIT STATUS: 0 ok, 1 runtime failure, 2 usage error.\n"
    "\n"
    "EXAMPLES\n"
    "  hw-schedtrace -o raw -d 10\n"
    "  hw-schedtrace -o raw -d 300ms -v\n"
    "  hw-schedtrace -o raw -s -- hw-bench pingpong --loops 100000 --cpu 0\n"
    "  hw-schedtrace -o raw -s -p 4242\n"
    "  hw-schedtrace -o raw -s -w -- python3 server.py\n"
    "  hw-schedtrace -o raw -b 4 --no-drain -e sched:sched_switch \\\n"
    "      -f 'sched:sched_switch=prev_pid==4242' -- sleep 1\n"
    "  hw-schedtrace convert -o out raw/trace.dat\n"
    "  trace-cmd report -i raw/trace.dat\n"
    "  hw-schedtrace -o raw -x -s -- hw-bench main -o raw/bench\n";

enum { OPT_NO_DRAIN = 256, OPT_NAME, OPT_READY_FD };

/* The options of a recording, parsed by take(). */
struct record_options {
    struct st_config cfg;
};

static int take(void *values, int c, const char *name, const char *arg, struct hw_err *err)
{
    struct record_options *o = values;
    struct st_config *cfg = &o->cfg;
    int n;
    switch (c) {
    case 'o': cfg->outdir = arg; return 0;
    case 'd': return hw_parse_duration_ns(name, arg, 1, &cfg->duration_ns, err);
    case 'b':
        if (hw_parse_int(name, arg, 1, 1 << 30, &n, err) < 0)
            return -1;
        cfg->buffer_kb = n;
        return 0;
    case 's': cfg->syscalls = true; return 0;
    case 'w': cfg->waits = true; return 0;
    case 'x': cfg->switch_ext = true; return 0;
    case 'p':
        if (cfg->npids >= ST_MAX_PIDS - 1)
            return hw_usage_err(err, "failed to parse %s: at most %d pids", name, ST_MAX_PIDS - 1), -1;
        return hw_parse_pid(name, arg, &cfg->pids[cfg->npids++], err);
    case 'e':
        if (cfg->nevents >= ST_MAX_EVENTS)
            return hw_usage_err(err, "failed to parse %s: at most %d events", name, ST_MAX_EVENTS), -1;
        cfg->events[cfg->nevents++] = arg;
        return 0;
    case 'f':
        if (cfg->nfilters >= ST_MAX_FILTERS)
            return hw_usage_err(err, "failed to parse %s: at most %d filters", name, ST_MAX_FILTERS), -1;
        cfg->filters[cfg->nfilters++] = arg;
        return 0;
    case OPT_NO_DRAIN: cfg->drain = false; return 0;
    case 'r': return hw_parse_int(name, arg, 0, 99, &cfg->rt_prio, err);
    case 'n':  /* old spelling of --name (-n is --netns in hostwire's vocabulary) */
    case OPT_NAME: cfg->suffix = arg; return 0;
    case OPT_READY_FD: return hw_parse_ready_fd(name, arg, &cfg->ready_fd, err);
    case 'v': cfg->verbose++; return 0;
    }
    return 0;
}

/* The option loop of a recording, then its command and the check that -p comes with -s. Returns
 * -1 to go on and record, else the exit status (after --help or a usage error). */
static int parse_record(int argc, char **argv, const char *shorts, const struct option *longs, const char *help,
                        const char *command, struct record_options *o, struct hw_err *err)
{
    int rc = hw_getopt(argc, argv, shorts, longs, help, take, o, err);
    if (rc)
        return rc > 0 ? HW_EXIT_OK : hw_err_exit(TOOL, command, err);
    if (optind < argc)
        o->cfg.command = argv + optind;
    if (o->cfg.waits && !o->cfg.syscalls)
        return hw_usage_exit(TOOL, command, "failed to parse --waits: it adds system calls, give --syscalls too");
    if (o->cfg.npids && !o->cfg.syscalls)
        return hw_usage_exit(TOOL, command, "failed to parse --pid: it selects system calls, give --syscalls too");
    return -1;
}

struct convert_values {
    const char *outdir;
    bool syscalls;
    int verbose;
};

static int take_convert(void *values, int c, const char *name, const char *arg, struct hw_err *err)
{
    struct convert_values *v = values;
    (void)name, (void)err;
    if (c == 'o')
        v->outdir = arg;
    else if (c == 's')
        v->syscalls = true;
    else if (c == 'v')
        v->verbose = 1;
    return 0;
}

static int convert_main(int argc, char **argv, struct hw_err *err)
{
    static const struct option longopts[] = {
        { "output", required_argument, NULL, 'o' }, { "syscalls", no_argument, NULL, 's' },
        { "verbose", no_argument, NULL, 'v' }, { "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
    };
    struct convert_values v = { .outdir = "." };
    int rc = hw_getopt(argc, argv, ":o:svh", longopts, usage, take_convert, &v, err);
    if (rc)
        return rc > 0 ? HW_EXIT_OK : hw_err_exit(TOOL, "convert", err);
    if (optind + 1 != argc)
        return hw_usage_exit(TOOL, NULL, "convert needs one TRACE.DAT");
    if (st_convert_file(argv[optind], v.outdir, v.syscalls, stderr, v.verbose, err) < 0)
        return hw_err_exit(TOOL, NULL, err);
    return HW_EXIT_OK;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "output", required_argument, NULL, 'o' }, { "duration", required_argument, NULL, 'd' },
        { "buffer-size", required_argument, NULL, 'b' },
        { "buffer-kb", required_argument, NULL, 'b' },   /* old spelling of --buffer-size */
        { "syscalls", no_argument, NULL, 's' }, { "waits", no_argument, NULL, 'w' },
        { "pid", required_argument, NULL, 'p' },
        { "event", required_argument, NULL, 'e' }, { "filter", required_argument, NULL, 'f' },
        { "switch-ext", no_argument, NULL, 'x' },
        { "no-drain", no_argument, NULL, OPT_NO_DRAIN }, { "rt-prio", required_argument, NULL, 'r' },
        { "name", required_argument, NULL, OPT_NAME }, { "ready-fd", required_argument, NULL, OPT_READY_FD },
        { "verbose", no_argument, NULL, 'v' }, { "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
    };
    struct record_options o = { .cfg = { .outdir = ".", .drain = true, .rt_prio = 1, .ready_fd = -1,
                                         .stop = &hw_stop_requested, .log = stderr } };
    static struct hw_err err;
    if (argc > 1 && strcmp(argv[1], "convert") == 0)
        return convert_main(argc - 1, argv + 1, &err);
    int rc = parse_record(argc, argv, "+:o:d:b:swp:e:xf:n:r:vh", longopts, usage, NULL, &o, &err);
    if (rc >= 0)
        return rc;
    hw_catch_stop();
    if (st_record(&o.cfg, &err) < 0)
        return hw_err_exit(TOOL, NULL, &err);
    return HW_EXIT_OK;
}
