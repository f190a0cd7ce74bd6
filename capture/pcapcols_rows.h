/* The rows of a conversion as they are built: the columns, where the rows go (a chunk flushed to
 * column files, or columns mapped in memory), and the walk of a mapped pcap file that fills them;
 * shared by pcapcols.c (the passes) and pcapcols_parts.c (a mapped file split over threads). */
#ifndef CAP_PCAPCOLS_ROWS_H
#define CAP_PCAPCOLS_ROWS_H
#include <stddef.h>
#include <stdint.h>

#include "addrdict.h"
#include "pcapcols.h"

enum cap_col {
    C_FRAME, C_T_NS, C_WIRE_LEN, C_CAP_LEN, C_IP_LEN, C_PROTO, C_SRC, C_DST, C_SPORT, C_DPORT,
    C_SEQ, C_ACK, C_FLAGS, C_WINDOW, C_PAYLOAD_LEN, C_WSCALE, C_NCOLS
};

struct cap_col_info {
    const char *name;
    const char *dtype;  /* numpy dtype string */
    size_t size;
};
extern const struct cap_col_info cap_cols[C_NCOLS];

/* Rows [0, n) of every column; room for cap. */
struct cap_rows {
    int64_t *frame, *t_ns, *wire_len, *cap_len, *ip_len;
    uint8_t *proto;
    int32_t *src, *dst;
    uint16_t *sport, *dport;
    uint32_t *seq, *ack;
    uint8_t *flags;
    uint16_t *window;
    int64_t *payload_len;
    int8_t *wscale;
    int64_t n, cap;
};

/* The columns of r in enum cap_col order. */
void cap_rows_columns(const struct cap_rows *r, void *out[C_NCOLS]);
/* Points r at columns[] (enum order), empty, with room for cap rows. */
void cap_rows_point(struct cap_rows *r, void *const columns[C_NCOLS], int64_t cap);

/* Columns of `cap` rows each in their own anonymous mapping, reserved but not committed: only
 * the pages rows are written into take memory. -1 (errno set) when they cannot be mapped. */
int cap_rows_map(struct cap_rows *r, int64_t cap);
/* Unmaps column i's pages past its rows (one page is kept); returns the bytes still mapped. */
size_t cap_rows_trim(const struct cap_rows *r, int i);
/* Trims the columns and gives them back to the pool (capture/colpool.h). */
void cap_rows_unmap(struct cap_rows *r);

/* The last address seen in one column and its code: most frames repeat their predecessor's. */
struct cap_addr_cache {
    uint8_t family;
    uint8_t addr[16];
    int32_t code;
};

struct cap_state {
    int in_memory;          /* rows go to mapped columns (else to the chunk, flushed to fds) */
    int fds[C_NCOLS];       /* -1 for a column not written */
    void *chunk;            /* file mode: the chunk the rows point into */
    struct cap_rows rows;
    struct cap_addrdict *dict;
    struct cap_addr_cache src_cache, dst_cache;
    const char *outdir;
    int64_t *malformed;     /* frame numbers */
    size_t n_malformed, cap_malformed;
};

int cap_state_add_malformed(struct cap_state *s, int64_t frame);

/* Rows [0, r->n) appended to s's column files (the columns s writes). */
int cap_rows_write(const struct cap_rows *r, const struct cap_state *s, struct hw_err *err);

/* A part of the file walked on its own (its own dictionary, frame numbers counted from 0 or, with
 * frames_before 0, already the file's) joined to s: the part's rows[first, first + rows) get the
 * file's frame numbers and s's address codes (s's dictionary takes the part's new addresses, in
 * the order one walk meets them), its malformed frames and counts go to s and res. -1 when out of
 * memory. */
int cap_state_join(struct cap_state *s, struct cap_pcapcols_result *res, const struct cap_state *part,
                   const struct cap_pcapcols_result *part_res, struct cap_rows *rows, int64_t first,
                   int64_t frames_before);

/* One record: counted, parsed and, when it is a TCP or UDP frame, added as a row. */
int cap_take_frame(struct cap_state *s, struct cap_pcapcols_result *res, int dlt, int64_t frame, int64_t t_ns,
                   const uint8_t *data, uint32_t caplen, uint32_t len, int malformed_record, struct hw_err *err);

#define PCAP_FILE_HEADER 24
#define PCAP_RECORD_HEADER 16

/* The passes over a file, each the fallback of the one before (and a walk's return asking for it). */
enum cap_pass { PASS_MAPPED = 0, PASS_LIBPCAP = 3, PASS_EXACT = 4, PASS_ONE_THREAD = 5 };

/* A classic pcap file in this machine's byte order, mapped. */
struct cap_mapped {
    const uint8_t *map;
    size_t size;
    int64_t ns_per_tick;
    uint32_t snaplen;
    int dlt;
};

/* Walks the records from byte offset `from` (a record's start) to `to`: 0 when the last one ends
 * exactly at `to`, -1 (err set), PASS_EXACT for a record longer than the snap length, PASS_LIBPCAP
 * for anything else it does not take as it is (a file cut short, a record running past `to`).
 * Frame numbers count from res->frames. */
int cap_walk_range(const struct cap_mapped *m, size_t from, size_t to, struct cap_state *s,
                   struct cap_pcapcols_result *res, struct hw_err *err);

/* The same over the whole file, in up to `threads` parts walked at once, each from a record
 * boundary found near its share of the file (and proven when the part before it ends there); the
 * rows, frames, address codes and malformed frames come out as one walk would give them, or
 * PASS_ONE_THREAD asks for that one walk (a start not proven, a part that stopped early). */
int cap_walk_parts(const struct cap_mapped *m, int threads, struct cap_state *s, struct cap_pcapcols_result *res,
                   struct hw_err *err);

/* A plausible record start in [from, from + 1 MiB): CHAIN record headers in a row (or every one
 * to the end of the file) that look like headers; 0 when there is none. */
size_t cap_find_record_start(const struct cap_mapped *m, size_t from, uint32_t first_s);

/* The whole file into s's column files by up to `threads` threads, segment_bytes (0: 8 MiB) of
 * it at a time each (pcapcols_segments.c); returns as cap_walk_range, or PASS_ONE_THREAD when a
 * segment did not end where the next was guessed to start (the files are then to be written
 * again by one walk). */
int cap_walk_segments(const struct cap_mapped *m, int threads, size_t segment_bytes, struct cap_state *s,
                      struct cap_pcapcols_result *res, struct hw_err *err);
#endif
