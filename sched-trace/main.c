/* hw-schedtrace: records scheduler, network and (on request) I/O system-call events from a
 * private tracefs instance into trace.dat, sched.tsv, syscalls.tsv and sched.json; 'proc' does
 * the same from the patched kernel's /proc/schedtrace ring (kernel-patches/). */
#include <stdio.h>
#include <string.h>

#include "hwargs.h"
#include "hwsignal.h"
#include "st.h"
#include "st_proc.h"

#define TOOL "hw-schedtrace"

static const char usage[] =
    "usage: hw-schedtrace [OPTIONS] [-- COMMAND [ARG...]]\n"
    "       hw-schedtrace convert [OPTIONS] TRACE.DAT\n"
    "       hw-schedtrace proc [OPTIONS] [-- COMMAND [ARG...]]   (see 'hw-schedtrace proc --help')\n"
    "       hw-schedtrace proc convert [OPTIONS] SCHEDTRACE.TXT\n"
    "\n"
    "Records kernel events from its own tracefs instance (hw-<pid>, trace clock mono) until\n"
    "SIGINT/SIGTERM, --duration or the end of COMMAND, draining the per-CPU buffers to disk.\n"
    "Writes DIR/trace.dat (trace-cmd report and KernelShark open it), DIR/sched.tsv,\n"
    "DIR/sched.json (loss counters, clock check) and with --syscalls DIR/syscalls.dat and\n"
    "DIR/syscalls.tsv. Default events: sched_switch, sched_wakeup, sched_wakeup_new,\n"
    "sched_migrate_task, sched_process_fork/exec/exit, net_dev_queue, net_dev_xmit,\n"
    "netif_receive_skb, sock:inet_sock_set_state, tcp:tcp_probe (where the kernel has it).\n"
    "'convert' turns a trace.dat (or syscalls.dat with -s) into DIR/sched.tsv (syscalls.tsv).\n"
    "'proc' records from the schedtrace-patched kernel's /proc/schedtrace ring instead of tracefs\n"
    "(same sched.tsv and syscalls.tsv; 'proc convert' converts its raw schedtrace.txt).\n"
    "\n"
    "OPTIONS\n"
    "  -o, --output DIR         output directory, created if missing (default .)\n"
    "  -d, --duration T         stop after T: 500ms, 2s, 1m (a bare number is seconds)\n"
    "  -b, --buffer-size KIB    per-CPU ring buffer size in KiB (default: the kernel's)\n"
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
    "  hw-schedtrace -o raw -b 4 --no-drain -e sched:sched_switch \\\n"
    "      -f 'sched:sched_switch=prev_pid==4242' -- sleep 1\n"
    "  hw-schedtrace convert -o out raw/trace.dat\n"
    "  trace-cmd report -i raw/trace.dat\n"
    "  hw-schedtrace proc -o raw -s -- hw-bench main -o raw/bench\n";

static const char proc_usage[] =
    "usage: hw-schedtrace proc [OPTIONS] [-- COMMAND [ARG...]]\n"
    "       hw-schedtrace proc convert [OPTIONS] SCHEDTRACE.TXT\n"
    "\n"
    "Records from the ring of the schedtrace-patched kernel (kernel-patches/) instead of tracefs:\n"
    "writes 'size N' (with -b), 'clear', 'pids ...' (the -p pids and COMMAND with -s, else none)\n"
    "and 'enable' to /proc/schedtrace_control, reads /proc/schedtrace (reads consume the ring;\n"
    "an empty ring reads as end of file, read again every 50 ms) into DIR/schedtrace.txt, the\n"
    "lines as read, until SIGINT/SIGTERM, --duration or the end of COMMAND; then 'disable', the\n"
    "last read, and DIR/sched.tsv (one sched_switch line per switch record, tracefs's columns and\n"
    "the ring's own), DIR/syscalls.tsv (with -s, or when the ring has system-call records) and\n"
    "DIR/sched.json (losses: records a full ring dropped, records another reader took).\n"
    "'proc convert' turns a schedtrace.txt into DIR/sched.tsv, syscalls.tsv, sched.json; a cut\n"
    "or malformed line ends them with '# damaged: FILE:LINE: ...' (exit 1), the records before\n"
    "it kept. HW_SCHEDTRACE_PROC_DIR=DIR reads DIR/schedtrace{,_control} instead (tests).\n"
    "\n"
    "OPTIONS\n"
    "  -o, --output DIR         output directory, created if missing (default .)\n"
    "  -d, --duration T         stop after T: 500ms, 2s, 1m (a bare number is seconds)\n"
    "  -b, --buffer-size N      ring size in records, 1024 to 16777216 (default: leave the\n"
    "                           kernel's; a new size clears the ring)\n"
    "  -s, --syscalls           also record enter/exit of hw-iotrace's default calls (patch\n"
    "                           0002) of the -p pids, COMMAND and their descendants\n"
    "  -p, --pid PID            system calls of PID and its descendants (repeatable)\n"
    "  -r, --rt-prio PRIO       SCHED_FIFO priority of the drain thread (default 1; 0: normal)\n"
    "      --ready-fd N         write \"ready\\n\" to descriptor N once recording, then close it\n"
    "  -v, --verbose            the ring's size, pids and drain on stderr (convert: records per CPU)\n"
    "  -h, --help               this help\n"
    "\n"
    "EXIT STATUS: 0 ok, 1 runtime failure (no /proc/schedtrace, a damaged input), 2 usage error.\n"
    "\n"
    "EXAMPLES\n"
    "  hw-schedtrace proc -o raw -d 10\n"
    "  hw-schedtrace proc -o raw -b 1048576 -s -- hw-bench pingpong --loops 100000 --cpu 0\n"
    "  hw-schedtrace proc -o raw -s -p 4242 -v\n"
    "  hw-schedtrace proc convert -o out raw/schedtrace.txt\n";

enum { OPT_NO_DRAIN = 256, OPT_NAME, OPT_READY_FD };

/* The options of a recording, in either mode, parsed by one take(): -b is KiB per CPU for
 * tracefs and a ring size in records for proc; the options proc has not are not in its option
 * string, so they never reach take() there. */
struct record_options {
    struct st_config cfg;
    bool proc;
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
        if (hw_parse_int(name, arg, o->proc ? ST_PROC_MIN_SIZE : 1, o->proc ? ST_PROC_MAX_SIZE : 1 << 30, &n, err) < 0)
            return -1;
        cfg->buffer_kb = n;
        return 0;
    case 's': cfg->syscalls = true; return 0;
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

static int proc_convert_main(int argc, char **argv, struct hw_err *err)
{
    static const struct option longopts[] = {
        { "output", required_argument, NULL, 'o' }, { "verbose", no_argument, NULL, 'v' },
        { "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
    };
    struct convert_values v = { .outdir = "." };
    int rc = hw_getopt(argc, argv, ":o:vh", longopts, proc_usage, take_convert, &v, err);
    if (rc)
        return rc > 0 ? HW_EXIT_OK : hw_err_exit(TOOL, "proc convert", err);
    if (optind + 1 != argc)
        return hw_usage_exit(TOOL, "proc convert", "needs one SCHEDTRACE.TXT");
    if (st_proc_convert_file(argv[optind], v.outdir, stderr, v.verbose, err) < 0)
        return hw_err_exit(TOOL, NULL, err);
    return HW_EXIT_OK;
}

static int proc_main(int argc, char **argv, struct hw_err *err)
{
    static const struct option longopts[] = {
        { "output", required_argument, NULL, 'o' }, { "duration", required_argument, NULL, 'd' },
        { "buffer-size", required_argument, NULL, 'b' }, { "syscalls", no_argument, NULL, 's' },
        { "pid", required_argument, NULL, 'p' }, { "rt-prio", required_argument, NULL, 'r' },
        { "ready-fd", required_argument, NULL, OPT_READY_FD }, { "verbose", no_argument, NULL, 'v' },
        { "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
    };
    static struct record_options o = { .cfg = { .outdir = ".", .rt_prio = 1, .ready_fd = -1 }, .proc = true };
    if (argc > 1 && strcmp(argv[1], "convert") == 0)
        return proc_convert_main(argc - 1, argv + 1, err);
    int rc = parse_record(argc, argv, "+:o:d:b:sp:r:vh", longopts, proc_usage, "proc", &o, err);
    if (rc >= 0)
        return rc;
    static struct st_proc_config cfg;
    cfg = (struct st_proc_config){ .outdir = o.cfg.outdir, .duration_ns = o.cfg.duration_ns, .size = o.cfg.buffer_kb,
                                   .syscalls = o.cfg.syscalls, .npids = o.cfg.npids, .rt_prio = o.cfg.rt_prio,
                                   .command = o.cfg.command, .verbose = o.cfg.verbose, .log = stderr,
                                   .ready_fd = o.cfg.ready_fd, .stop = &hw_stop_requested };
    memcpy(cfg.pids, o.cfg.pids, sizeof(cfg.pids));
    hw_catch_stop();
    if (st_proc_record(&cfg, err) < 0)
        return hw_err_exit(TOOL, NULL, err);
    return HW_EXIT_OK;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "output", required_argument, NULL, 'o' }, { "duration", required_argument, NULL, 'd' },
        { "buffer-size", required_argument, NULL, 'b' },
        { "buffer-kb", required_argument, NULL, 'b' },   /* old spelling of --buffer-size */
        { "syscalls", no_argument, NULL, 's' }, { "pid", required_argument, NULL, 'p' },
        { "event", required_argument, NULL, 'e' }, { "filter", required_argument, NULL, 'f' },
        { "no-drain", no_argument, NULL, OPT_NO_DRAIN }, { "rt-prio", required_argument, NULL, 'r' },
        { "name", required_argument, NULL, OPT_NAME }, { "ready-fd", required_argument, NULL, OPT_READY_FD },
        { "verbose", no_argument, NULL, 'v' }, { "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
    };
    struct record_options o = { .cfg = { .outdir = ".", .drain = true, .rt_prio = 1, .ready_fd = -1,
                                         .stop = &hw_stop_requested, .log = stderr } };
    static struct hw_err err;
    if (argc > 1 && strcmp(argv[1], "convert") == 0)
        return convert_main(argc - 1, argv + 1, &err);
    if (argc > 1 && strcmp(argv[1], "proc") == 0)
        return proc_main(argc - 1, argv + 1, &err);
    int rc = parse_record(argc, argv, "+:o:d:b:sp:e:f:n:r:vh", longopts, usage, NULL, &o, &err);
    if (rc >= 0)
        return rc;
    hw_catch_stop();
    if (st_record(&o.cfg, &err) < 0)
        return hw_err_exit(TOOL, NULL, &err);
    return HW_EXIT_OK;
}
