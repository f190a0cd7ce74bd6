/* hw-pcapcols: a capture file to columns (thin main around pcapcols.c). */
#include <stdio.h>
#include <stdlib.h>

#include "hwargs.h"
#include "hwsignal.h"
#include "pcapcols.h"

#define TOOL "hw-pcapcols"
#define OPT_SEGMENT 0x100  /* a long option only */

static const char usage[] =
    "usage: hw-pcapcols [OPTIONS] FILE -o DIR\n"
    "Convert a pcap or pcapng capture into columns: DIR/<column>.bin (raw little-endian arrays)\n"
    "and DIR/columns.json (format, dtypes, address dictionary, skipped and malformed frames,\n"
    "damage). Only TCP and UDP over IPv4/IPv6 frames become rows. Link types: Ethernet (VLAN\n"
    "tags), raw IP, Linux cooked v1/v2.\n"
    "\n"
    "OPTIONS\n"
    "  -o, --output DIR   output directory (created if missing)\n"
    "  -c, --columns LIST write only these columns (comma-separated names, e.g. t_ns,proto,src);\n"
    "                     default all: frame, t_ns, wire_len, cap_len, ip_len, proto, src, dst,\n"
    "                     sport, dport, seq, ack, flags, window, payload_len, wscale\n"
    "  -t, --threads N    a pcap file converted by N threads at once, each a segment of it at a\n"
    "                     time, written in order (the same files; default 1: one pass)\n"
    "      --segment SIZE the bytes of the file a thread converts at a time (default 8M; memory\n"
    "                     is about twice that per thread)\n"
    "  -v, --verbose      the counts of frames per kind on stderr (and the parts walked)\n"
    "  -h, --help         this help\n"
    "\n"
    "EXIT STATUS: 0 ok, 1 runtime failure (a damaged file: the frames before the damage are\n"
    "written and columns.json names the byte offset and frame; an unsupported format or link\n"
    "type: nothing written), 2 usage error.\n"
    "\n"
    "EXAMPLES\n"
    "  hw-pcapcols raw/wire.pcap -o /tmp/wire.cols\n"
    "  hw-pcapcols -v raw/wire.pcap -o /tmp/wire.cols\n"
    "  hw-pcapcols -c t_ns,proto,payload_len raw/wire.pcap -o /tmp/wire.cols\n"
    "  hw-pcapcols -t 2 raw/wire.pcap -o /var/tmp/wire.cols\n"
    "  python3 -c 'import hostwire; print(hostwire.read_pcap(\"raw/wire.pcap\"))'\n";

struct values {
    struct cap_pcapcols_opts opts;
    int verbose;
};

static int take(void *values, int c, const char *name, const char *arg, struct hw_err *err)
{
    struct values *v = values;
    (void)name;
    if (c == 'o')
        v->opts.outdir = arg;
    else if (c == 'c')
        return cap_pcapcols_column_mask(arg, &v->opts.columns, err);
    else if (c == 'v')
        v->verbose = 1;
    else if (c == 't')
        return hw_parse_int("--threads", arg, 1, 64, &v->opts.threads, err);
    else if (c == OPT_SEGMENT) {
        int64_t bytes;
        if (hw_parse_size("--segment", arg, 1 << 16, (int64_t)1 << 40, &bytes, err) < 0)
            return -1;
        v->opts.segment_bytes = (size_t)bytes;
    }
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"output", required_argument, NULL, 'o'}, {"columns", required_argument, NULL, 'c'},
        {"verbose", no_argument, NULL, 'v'}, {"threads", required_argument, NULL, 't'},
        {"segment", required_argument, NULL, OPT_SEGMENT},
        {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0},
    };
    struct values v = {{0}, 0};
    struct cap_pcapcols_result res;
    static struct hw_err err;

    hw_die_with_parent_from_env();
    int rc = hw_getopt(argc, argv, ":o:c:t:vh", longopts, usage, take, &v, &err);
    if (rc)
        return rc > 0 ? HW_EXIT_OK : hw_err_exit(TOOL, NULL, &err);
    if (optind != argc - 1 || !v.opts.outdir)
        return hw_usage_exit(TOOL, NULL, "expected one input FILE and -o DIR");
    v.opts.input = argv[optind];
    rc = cap_pcapcols_convert(&v.opts, &res, &err);
    if (rc != 0)
        hw_err_exit(TOOL, NULL, &err);
    if (v.verbose && (rc == 0 || rc == 1)) {
        fprintf(stderr, "hw-pcapcols: %lld frames, %lld rows, %d part%s", (long long)res.frames,
                (long long)res.rows, res.parts, res.parts == 1 ? "" : "s");
        for (int k = CAP_FP_NON_IP; k < CAP_FP_NKINDS; k++)
            if (res.kinds[k])
                fprintf(stderr, ", %lld %s", (long long)res.kinds[k], cap_fp_kind_names[k]);
        fputc('\n', stderr);
    }
    return rc == 0 ? HW_EXIT_OK : HW_EXIT_FAILURE;
}
