/* hw-pcapcols: a capture file to columns (thin main around pcapcols.c). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pcapcols.h"

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: hw-pcapcols [-v] FILE -o OUTDIR\n"
            "Convert a pcap or pcapng capture into columns: OUTDIR/<column>.bin (raw little-endian\n"
            "arrays) and OUTDIR/columns.json (format, dtypes, address dictionary, skipped and\n"
            "malformed frames, damage). Only TCP and UDP over IPv4/IPv6 frames become rows.\n"
            "\n"
            "  -o, --output DIR   output directory (created if missing)\n"
            "  -v, --verbose      print the counts of frames per kind\n"
            "  -h, --help         this help\n"
            "\n"
            "Link types: Ethernet (VLAN tags), raw IP, Linux cooked v1/v2. Exit status: 0 ok;\n"
            "1 damaged file (the frames before the damage are written, columns.json names the\n"
            "byte offset and frame), unsupported format or link type (nothing written), or\n"
            "another runtime failure; 2 usage error.\n"
            "\n"
            "EXAMPLES\n"
            "  hw-pcapcols raw/wire.pcap -o /tmp/wire.cols\n"
            "  python3 -c 'import hostwire; print(hostwire.read_pcap(\"raw/wire.pcap\"))'\n");
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"output", required_argument, NULL, 'o'},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct pcapcols_opts opts = {0};
    struct pcapcols_result res;
    int c, verbose = 0, ret;

    while ((c = getopt_long(argc, argv, "o:vh", longopts, NULL)) != -1) {
        switch (c) {
        case 'o':
            opts.outdir = optarg;
            break;
        case 'v':
            verbose = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            fprintf(stderr, "hw-pcapcols: see 'hw-pcapcols --help'\n");
            return 2;
        }
    }
    if (optind != argc - 1 || !opts.outdir) {
        fprintf(stderr, "hw-pcapcols: expected one input FILE and -o OUTDIR (see 'hw-pcapcols --help')\n");
        return 2;
    }
    opts.input = argv[optind];
    ret = pcapcols_convert(&opts, &res);
    if (ret != 0)
        fprintf(stderr, "hw-pcapcols: %s\n", res.error);
    if (verbose && (ret == 0 || ret == 1)) {
        fprintf(stderr, "hw-pcapcols: %lld frames, %lld rows", (long long)res.frames, (long long)res.rows);
        for (int k = FP_NON_IP; k < FP_NKINDS; k++)
            if (res.kinds[k])
                fprintf(stderr, ", %lld %s", (long long)res.kinds[k], fp_kind_names[k]);
        fputc('\n', stderr);
    }
    return ret == 0 ? 0 : 1;
}
