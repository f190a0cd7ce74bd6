/* hw-wirecap: capture an interface into a nanosecond pcap plus wirecap.json (thin main). */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hwsignal.h"
#include "wirecap.h"

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
    (void)sig;
    stop_flag = 1;
}

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: hw-wirecap -i IFACE [-n NETNS] -o FILE.pcap [options]\n"
            "Capture IFACE into a pcap with nanosecond stamps until SIGINT/SIGTERM or --duration,\n"
            "then write wirecap.json (loss counters, stamp type, CLOCK_REALTIME/CLOCK_MONOTONIC pairs\n"
            "taken at start and end) beside the pcap, and print the loss counters.\n"
            "\n"
            "  -i, --interface IFACE     interface to capture (required)\n"
            "  -n, --netns NAME          enter network namespace NAME (/run/netns/NAME or a path) first\n"
            "  -o, --output FILE         pcap file to write (required)\n"
            "  -j, --json FILE           metadata file (default: wirecap.json beside the pcap)\n"
            "  -s, --snaplen BYTES       bytes kept of each frame (default 128: headers only)\n"
            "  -B, --buffer-size KIB     kernel capture buffer in KiB (default 32768)\n"
            "  -f, --filter EXPR         BPF filter, e.g. 'tcp port 5001'\n"
            "  -T, --tstamp-type TYPE    stamp type (host, adapter, ...; see --list-tstamp-types)\n"
            "      --list-tstamp-types   print the stamp types IFACE offers and exit\n"
            "      --no-immediate        let the kernel batch packets (fewer wake-ups)\n"
            "      --duration SECONDS    stop after this long\n"
            "  -v, --verbose             accepted for symmetry with the other tools\n"
            "  -h, --help                this help\n"
            "\n"
            "Exit status: 0 ok, 1 runtime failure, 2 usage error.\n"
            "\n"
            "EXAMPLES\n"
            "  hw-wirecap -i hw1r -n hw1-rx -o raw/wire.pcap --duration 10\n"
            "  ip netns exec hw1-rx hw-wirecap -i hw1r -o raw/wire.pcap -f 'tcp' &  # stop: kill -TERM\n"
            "  hw-wirecap -i eth0 --list-tstamp-types\n");
}

static int parse_int(const char *s, const char *what, int min, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < min || v > 1 << 30) {
        fprintf(stderr, "hw-wirecap: %s '%s': expected an integer >= %d\n", what, s, min);
        return -1;
    }
    *out = (int)v;
    return 0;
}

int main(int argc, char **argv)
{
    enum { OPT_LIST = 256, OPT_NO_IMMEDIATE, OPT_DURATION };
    static const struct option longopts[] = {
        {"interface", required_argument, NULL, 'i'},
        {"netns", required_argument, NULL, 'n'},
        {"output", required_argument, NULL, 'o'},
        {"json", required_argument, NULL, 'j'},
        {"snaplen", required_argument, NULL, 's'},
        {"buffer-size", required_argument, NULL, 'B'},
        {"filter", required_argument, NULL, 'f'},
        {"tstamp-type", required_argument, NULL, 'T'},
        {"list-tstamp-types", no_argument, NULL, OPT_LIST},
        {"no-immediate", no_argument, NULL, OPT_NO_IMMEDIATE},
        {"duration", required_argument, NULL, OPT_DURATION},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct wirecap_opts opts = {.snaplen = 128, .buffer_size = 32 << 20, .immediate = 1};
    struct wirecap_result res;
    char err[8192] = "";
    int c, list = 0, verbose = 0, kib;
    char *end;

    while ((c = getopt_long(argc, argv, "i:n:o:j:s:B:f:T:vh", longopts, NULL)) != -1) {
        switch (c) {
        case 'i': opts.iface = optarg; break;
        case 'n': opts.netns = optarg; break;
        case 'o': opts.output = optarg; break;
        case 'j': opts.json_path = optarg; break;
        case 's':
            if (parse_int(optarg, "snap length", 1, &opts.snaplen) < 0)
                return 2;
            break;
        case 'B':
            if (parse_int(optarg, "buffer size", 1, &kib) < 0)
                return 2;
            if (kib > (1 << 21)) {
                fprintf(stderr, "hw-wirecap: buffer size %d KiB: at most 2097152\n", kib);
                return 2;
            }
            opts.buffer_size = kib * 1024;
            break;
        case 'f': opts.filter = optarg; break;
        case 'T': opts.tstamp_type = optarg; break;
        case OPT_LIST: list = 1; break;
        case OPT_NO_IMMEDIATE: opts.immediate = 0; break;
        case OPT_DURATION:
            opts.duration_s = strtod(optarg, &end);
            if (*optarg == '\0' || *end != '\0' || !(opts.duration_s > 0)) {
                fprintf(stderr, "hw-wirecap: duration '%s': expected a positive number of seconds\n", optarg);
                return 2;
            }
            break;
        case 'v': verbose = 1; break;
        case 'h': usage(stdout); return 0;
        default:
            fprintf(stderr, "hw-wirecap: see 'hw-wirecap --help'\n");
            return 2;
        }
    }
    if (optind != argc || !opts.iface || (!list && !opts.output)) {
        fprintf(stderr, "hw-wirecap: expected -i IFACE and -o FILE.pcap (see 'hw-wirecap --help')\n");
        return 2;
    }
    if (opts.netns && wirecap_enter_netns(opts.netns, err, sizeof(err)) < 0) {
        fprintf(stderr, "hw-wirecap: %s\n", err);
        return 1;
    }
    if (list) {
        if (wirecap_list_tstamp_types(&opts, stdout, err, sizeof(err)) < 0) {
            fprintf(stderr, "hw-wirecap: %s\n", err);
            return 1;
        }
        return 0;
    }
    hw_on_stop_signals(on_signal);
    opts.log = stderr;
    (void)verbose;
    int rc = wirecap_run(&opts, &stop_flag, &res, err, sizeof(err));
    if (rc < 0)
        fprintf(stderr, "hw-wirecap: %s\n", err);
    if (rc < 0 && strcmp(res.stop_reason, "error") != 0)
        return 1;  /* nothing captured: the failure came before or after the capture */
    fprintf(stderr, "hw-wirecap: %llu packets written, %llu received by filter, %llu dropped by kernel, "
                    "%llu dropped by interface\n",
            (unsigned long long)res.packets_written, (unsigned long long)res.ps_recv,
            (unsigned long long)res.ps_drop, (unsigned long long)res.ps_ifdrop);
    return rc < 0 ? 1 : 0;
}
