/* hw-pcapcols library part: convert a pcap/pcapng file into one raw little-endian array file per
 * column plus columns.json (format "hostwire-columns 1"), which numpy maps without copying. */
#ifndef CAP_PCAPCOLS_H
#define CAP_PCAPCOLS_H
#include <stdint.h>

#include "frameparse.h"
#include "hwerr.h"

struct cap_pcapcols_opts {
    const char *input;   /* the capture file */
    const char *outdir;  /* created if missing */
    uint32_t columns;    /* bit i: write column i (enum order of cap_pcapcols_column_names); 0: all */
};

/* The column names in file order, NULL-terminated; cap_pcapcols_column_mask turns a comma list of
 * them into opts.columns (-1 and err naming the first unknown name). */
extern const char *const cap_pcapcols_column_names[];
int cap_pcapcols_column_mask(const char *list, uint32_t *mask, struct hw_err *err);

struct cap_pcapcols_result {
    int64_t frames;                 /* frames read from the file */
    int64_t rows;                   /* frames in the table (TCP/UDP over IP) */
    int64_t kinds[CAP_FP_NKINDS];       /* frames per kind (CAP_FP_OK: rows) */
    int64_t malformed_records;      /* records longer than the snap length (also malformed) */
    int damaged;                    /* the file is cut short or damaged after `frames` frames */
};

/* Returns 0 when the whole file was read, 1 when it is damaged (the table holds every frame
 * before the damage; columns.json says where it is), 2 when the file cannot be read at all
 * (format or link type unsupported, no such file; nothing is written), -1 on a local failure
 * (output, memory). err holds one line for any non-zero return (for 1: where the damage is). */
int cap_pcapcols_convert(const struct cap_pcapcols_opts *opts, struct cap_pcapcols_result *res, struct hw_err *err);
#endif
