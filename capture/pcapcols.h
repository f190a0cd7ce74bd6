/* hw-pcapcols library part: convert a pcap/pcapng file into one raw little-endian array file per
 * column plus columns.json (format "hostwire-columns 1"), which numpy maps without copying. */
#ifndef CAP_PCAPCOLS_H
#define CAP_PCAPCOLS_H
#include <stddef.h>
#include <stdint.h>

#include "frameparse.h"
#include "hwerr.h"

struct cap_pcapcols_opts {
    const char *input;   /* the capture file */
    const char *outdir;  /* created if missing */
    uint32_t columns;    /* bit i: write column i (enum order of cap_pcapcols_column_names); 0: all */
    int threads;         /* a pcap file converted by this many threads at once (0, 1: one walk) */
    size_t segment_bytes;  /* the bytes of it a thread converts at a time (0: 8 MiB) */
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
    int parts;                      /* parts the mapped walk was split into (1: one walk; 0: libpcap read it) */
};

/* Returns 0 when the whole file was read, 1 when it is damaged (the table holds every frame
 * before the damage; columns.json says where it is), 2 when the file cannot be read at all
 * (format or link type unsupported, no such file; nothing is written), -1 on a local failure
 * (output, memory). err holds one line for any non-zero return (for 1: where the damage is). */
int cap_pcapcols_convert(const struct cap_pcapcols_opts *opts, struct cap_pcapcols_result *res, struct hw_err *err);

#define CAP_PCAPCOLS_NCOLS 16

/* The same conversion into memory, every column: columns[i] (in cap_pcapcols_column_names order)
 * is an anonymous mapping of mapped[i] bytes holding rows values, released with cap_pcapcols_unmap(columns[i], mapped[i]); meta is
 * columns.json's text (malloc'd, free() it). A pcap file is split over up to `threads` threads.
 * Returns as cap_pcapcols_convert; on a return other than 0 and 1 nothing is left to release. */
struct cap_pcapcols_table {
    void *columns[CAP_PCAPCOLS_NCOLS];
    size_t mapped[CAP_PCAPCOLS_NCOLS];
    int64_t rows;
    char *meta;
};
int cap_pcapcols_to_memory(const char *input, int threads, struct cap_pcapcols_table *table,
                           struct cap_pcapcols_result *res, struct hw_err *err);
void cap_pcapcols_unmap(void *column, size_t mapped);
/* sizeof the table, the result and struct hw_err: a binding checks its copies of them against these. */
void cap_pcapcols_struct_sizes(size_t sizes[3]);
#endif
