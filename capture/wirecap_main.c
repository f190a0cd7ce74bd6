/* hw-wirecap: capture an interface into a nanosecond pcap plus wirecap.json (thin main). */
#include <stdio.h>
#include <string.h>

#include "hwargs.h"
#include "hwsignal.h"
#include "wirecap.h"

#define TOOL "hw-wirecap"

static const char usage[] =
    "usage: hw-wirecap [OPTIONS] -i IFACE -o FILE\n"
    "Capture IFACE into a pcap FILE with nanosecond stamps until SIGINT/SIGTERM or --duration,\n"
    "then write wirecap.json (loss counters, stamp type, CLOCK_REALTIME/CLOCK_MONOTONIC pairs\n"
    "taken at start and end) beside the pcap, and print the loss counters.\n"
    "\n"
    "OPTIONS\n"
    "  -i, --interface IFACE     interface to capture (required)\n"
    "  -n, --netns NAME          enter network namespace NAME (/run/netns/NAME or a path) first\n"
    "  -o, --output FILE         pcap FILE to write (required)\n"
    "  -j, --json FILE           metadata file (default: wirecap.json beside the pcap)\n"
    "  -d, --duration T          stop after T: 500ms, 2s, 1m (a bare number is seconds)\n"
    "  -f, --filter EXPR         BPF filter, e.g. 'tcp port 5001'\n"
    "  -b, --buffer-size KIB     kernel capture buffer in KiB (default 32768)\n"
    "      --snaplen BYTES       bytes kept of each frame (default 128: headers only)\n"
    "  -T, --tstamp-type TYPE    stamp type (host, adapter, ...; see --list-tstamp-types)\n"
    "      --list-tstamp-types   print the stamp types IFACE offers and exit\n"
    "      --no-immediate        let the kernel batch packets (fewer wake-ups)\n"
    "      --ready-fd N          write \"ready\\n\" to descriptor N once capturing, then close it\n"
    "  -v, --verbose             the settings at start and the clock pairs at the end on stderr\n"
    "  -h, --help                this help\n"
    "\n"
    "EXIT STATUS: 0 ok, 1 runtime failure, 2 usage error.\n"
    "\n"
    "EXAMPLES\n"
    "  hw-wirecap -i hw1r -n hw1-rx -o raw/wire.pcap -d 10\n"
    "  ip netns exec hw1-rx hw-wirecap -i hw1r -o raw/wire.pcap -f 'tcp' &  # stop: kill -TERM\n"
    "  hw-wirecap -i lo -o lo.pcap -d 300ms -v\n"
    "  hw-wirecap -i eth0 --list-tstamp-types\n";

enum { OPT_LIST = 256, OPT_NO_IMMEDIATE, OPT_SNAPLEN, OPT_READY_FD };

struct values {
    struct cap_wirecap_opts opts;
    int list;
};

static int take(void *values, int c, const char *name, const char *arg, struct hw_err *err)
{
    struct cap_wirecap_opts *opts = &((struct values *)values)->opts;
    int kib;
    switch (c) {
    case 'i': opts->iface = arg; return 0;
    case 'n': opts->netns = arg; return 0;
    case 'o': opts->output = arg; return 0;
    case 'j': opts->json_path = arg; return 0;
    case 'd': return hw_parse_duration_ns(name, arg, 1, &opts->duration_ns, err);
    case 'f': opts->filter = arg; return 0;
    case 'T': opts->tstamp_type = arg; return 0;
    case 'B':  /* old spelling of -b */
    case 'b':
        if (hw_parse_int(name, arg, 1, 1 << 21, &kib, err) < 0)
            return -1;
        opts->buffer_size = kib * 1024;
        return 0;
    case OPT_SNAPLEN: return hw_parse_int(name, arg, 1, 1 << 30, &opts->snaplen, err);
    case OPT_LIST: ((struct values *)values)->list = 1; return 0;
    case OPT_NO_IMMEDIATE: opts->immediate = 0; return 0;
    case OPT_READY_FD: return hw_parse_ready_fd(name, arg, &opts->ready_fd, err);
    case 'v': opts->verbose = 1; return 0;
    }
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"interface", required_argument, NULL, 'i'}, {"netns", required_argument, NULL, 'n'},
        {"output", required_argument, NULL, 'o'}, {"json", required_argument, NULL, 'j'},
        {"duration", required_argument, NULL, 'd'}, {"filter", required_argument, NULL, 'f'},
        {"buffer-size", required_argument, NULL, 'b'}, {"snaplen", required_argument, NULL, OPT_SNAPLEN},
        {"tstamp-type", required_argument, NULL, 'T'}, {"list-tstamp-types", no_argument, NULL, OPT_LIST},
        {"no-immediate", no_argument, NULL, OPT_NO_IMMEDIATE}, {"ready-fd", required_argument, NULL, OPT_READY_FD},
        {"verbose", no_argument, NULL, 'v'}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0},
    };
    struct values v = {.opts = {.snaplen = 128, .buffer_size = 32 << 20, .immediate = 1, .ready_fd = -1}};
    struct cap_wirecap_opts opts;
    struct cap_wirecap_result res;
    static struct hw_err err;

    int rc = hw_getopt(argc, argv, ":i:n:o:j:d:f:b:B:T:vh", longopts, usage, take, &v, &err);
    if (rc)
        return rc > 0 ? HW_EXIT_OK : hw_err_exit(TOOL, NULL, &err);
    opts = v.opts;
    if (optind != argc)
        return hw_usage_exit(TOOL, NULL, "unexpected argument '%s'", argv[optind]);
    if (!opts.iface || (!v.list && !opts.output))
        return hw_usage_exit(TOOL, NULL, "expected -i IFACE and -o FILE");
    if (opts.netns && cap_wirecap_enter_netns(opts.netns, &err) < 0)
        return hw_err_exit(TOOL, NULL, &err);
    if (v.list)
        return cap_wirecap_list_tstamp_types(&opts, stdout, &err) < 0 ? hw_err_exit(TOOL, NULL, &err) : 0;
    hw_catch_stop();
    opts.log = stderr;
    rc = cap_wirecap_run(&opts, &hw_stop_requested, &res, &err);
    if (rc < 0)
        hw_err_exit(TOOL, NULL, &err);
    if (rc < 0 && strcmp(res.stop_reason, "error") != 0)
        return HW_EXIT_FAILURE;  /* nothing captured: the failure came before or after the capture */
    fprintf(stderr, "hw-wirecap: %llu packets written, %llu received by filter, %llu dropped by kernel, "
                    "%llu dropped by interface\n",
            (unsigned long long)res.packets_written, (unsigned long long)res.ps_recv,
            (unsigned long long)res.ps_drop, (unsigned long long)res.ps_ifdrop);
    return rc < 0 ? HW_EXIT_FAILURE : HW_EXIT_OK;
}
