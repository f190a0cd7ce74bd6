/* Rows from records: a record parsed into one row of every column, and the walk of a mapped pcap
 * file record by record, with no copy of a record. */
#include "pcapcols_rows.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "colpool.h"
#include "frameparse.h"
#include "hwerr.h"
#include "hwio.h"

const struct cap_col_info cap_cols[C_NCOLS] = {
    [C_FRAME] = {"frame", "<i8", 8},       [C_T_NS] = {"t_ns", "<i8", 8},
    [C_WIRE_LEN] = {"wire_len", "<i8", 8}, [C_CAP_LEN] = {"cap_len", "<i8", 8},
    [C_IP_LEN] = {"ip_len", "<i8", 8},     [C_PROTO] = {"proto", "|u1", 1},
    [C_SRC] = {"src", "<i4", 4},           [C_DST] = {"dst", "<i4", 4},
    [C_SPORT] = {"sport", "<u2", 2},       [C_DPORT] = {"dport", "<u2", 2},
    [C_SEQ] = {"seq", "<u4", 4},           [C_ACK] = {"ack", "<u4", 4},
    [C_FLAGS] = {"flags", "|u1", 1},       [C_WINDOW] = {"window", "<u2", 2},
    [C_PAYLOAD_LEN] = {"payload_len", "<i8", 8}, [C_WSCALE] = {"wscale", "|i1", 1},
};

void cap_rows_columns(const struct cap_rows *r, void *out[C_NCOLS])
{
    void *cols[C_NCOLS] = {
        r->frame, r->t_ns, r->wire_len, r->cap_len, r->ip_len, r->proto, r->src, r->dst,
        r->sport, r->dport, r->seq, r->ack, r->flags, r->window, r->payload_len, r->wscale,
    };
    memcpy(out, cols, sizeof(cols));
}

void cap_rows_point(struct cap_rows *r, void *const c[C_NCOLS], int64_t cap)
{
    *r = (struct cap_rows){
        .frame = c[C_FRAME], .t_ns = c[C_T_NS], .wire_len = c[C_WIRE_LEN], .cap_len = c[C_CAP_LEN],
        .ip_len = c[C_IP_LEN], .proto = c[C_PROTO], .src = c[C_SRC], .dst = c[C_DST],
        .sport = c[C_SPORT], .dport = c[C_DPORT], .seq = c[C_SEQ], .ack = c[C_ACK],
        .flags = c[C_FLAGS], .window = c[C_WINDOW], .payload_len = c[C_PAYLOAD_LEN],
        .wscale = c[C_WSCALE], .n = 0, .cap = cap,
    };
}

int cap_rows_map(struct cap_rows *r, int64_t cap)
{
    void *cols[C_NCOLS] = {0};
    /* the widest columns first: they take the largest of the kept mappings */
    for (size_t width = 8; width >= 1; width /= 2)
        for (int i = 0; i < C_NCOLS; i++) {
            if (cap_cols[i].size != width)
                continue;
            if (!(cols[i] = cap_colpool_take((size_t)cap * width))) {
                int saved = errno;
                for (int j = 0; j < C_NCOLS; j++)
                    if (cols[j])
                        cap_colpool_give(cols[j], (size_t)cap * cap_cols[j].size);
                memset(r, 0, sizeof(*r));
                errno = saved;
                return -1;
            }
        }
    cap_rows_point(r, cols, cap);
    return 0;
}

size_t cap_rows_trim(const struct cap_rows *r, int i)
{
    void *cols[C_NCOLS];
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    cap_rows_columns(r, cols);
    size_t full = (size_t)r->cap * cap_cols[i].size;
    size_t used = ((size_t)r->n * cap_cols[i].size + page - 1) / page * page;
    if (used == 0)
        used = page;
    if (used >= full)
        return full;
    munmap((char *)cols[i] + used, full - used);
    return used;
}

void cap_rows_unmap(struct cap_rows *r)
{
    void *cols[C_NCOLS];
    cap_rows_columns(r, cols);
    for (int i = 0; i < C_NCOLS; i++)
        if (cols[i])  /* kept with the pages its rows touched only: the rest was never backed */
            cap_colpool_give(cols[i], cap_rows_trim(r, i));
    memset(r, 0, sizeof(*r));
}

int cap_state_add_malformed(struct cap_state *s, int64_t frame)
{
    if (s->n_malformed == s->cap_malformed) {
        size_t cap = s->cap_malformed ? s->cap_malformed * 2 : 64;
        int64_t *m = realloc(s->malformed, cap * sizeof(*m));
        if (!m)
            return -1;
        s->malformed = m;
        s->cap_malformed = cap;
    }
    s->malformed[s->n_malformed++] = frame;
    return 0;
}

int cap_state_join(struct cap_state *s, struct cap_pcapcols_result *res, const struct cap_state *part,
                   const struct cap_pcapcols_result *part_res, struct cap_rows *rows, int64_t first,
                   int64_t frames_before)
{
    uint32_t n_codes = cap_addrdict_size(part->dict);
    int32_t *code = malloc(((size_t)n_codes + 1) * sizeof(*code));
    if (!code)
        return -1;
    int same = 1;
    for (uint32_t i = 0; i < n_codes; i++) {
        if ((code[i] = cap_addrdict_add_from(s->dict, part->dict, i)) < 0) {
            free(code);
            return -1;
        }
        same = same && code[i] == (int32_t)i;
    }
    int64_t last = first + part_res->rows;
    for (int64_t r = first; frames_before && r < last; r++)
        rows->frame[r] += frames_before;
    for (int64_t r = first; !same && r < last; r++) {
        rows->src[r] = code[rows->src[r]];
        rows->dst[r] = code[rows->dst[r]];
    }
    free(code);
    for (size_t i = 0; i < part->n_malformed; i++)
        if (cap_state_add_malformed(s, part->malformed[i] + frames_before) < 0)
            return -1;
    res->frames += part_res->frames;
    res->rows += part_res->rows;
    res->malformed_records += part_res->malformed_records;
    for (int k = 0; k < CAP_FP_NKINDS; k++)
        res->kinds[k] += part_res->kinds[k];
    return 0;
}

int cap_rows_write(const struct cap_rows *r, const struct cap_state *s, struct hw_err *err)
{
    void *cols[C_NCOLS];
    cap_rows_columns(r, cols);
    for (int i = 0; i < C_NCOLS; i++)
        if (s->fds[i] >= 0 && hw_write_all(s->fds[i], cols[i], cap_cols[i].size * (size_t)r->n) < 0) {
            hw_seterr(err, "failed to write %s: %s", s->outdir, strerror(errno));
            return -1;
        }
    return 0;
}

static inline int32_t cached_code(struct cap_addrdict *d, struct cap_addr_cache *c, uint8_t family,
                                  const uint8_t *addr)
{
    /* sizes the compiler knows: a call to memcmp per address was a tenth of the conversion */
    if (c->family == family && (family == 4 ? memcmp(c->addr, addr, 4) : memcmp(c->addr, addr, 16)) == 0)
        return c->code;
    c->code = cap_addrdict_code(d, family, addr);
    c->family = family;
    memcpy(c->addr, addr, 16);
    return c->code;
}

/* Room for one more row: a full chunk goes to the column files; mapped columns are sized for
 * every record the file can hold, so they are never full. */
static int make_room(struct cap_state *s, struct hw_err *err)
{
    struct cap_rows *r = &s->rows;
    if (s->in_memory) {
        hw_seterr(err, "failed to convert: more rows than the file's size allows (%lld)", (long long)r->cap);
        return -1;
    }
    if (cap_rows_write(r, s, err) < 0)
        return -1;
    r->n = 0;
    return 0;
}

int cap_take_frame(struct cap_state *s, struct cap_pcapcols_result *res, int dlt, int64_t frame, int64_t t_ns,
                   const uint8_t *data, uint32_t caplen, uint32_t len, int malformed_record, struct hw_err *err)
{
    struct cap_fp_fields ff;
    enum cap_fp_status st;
    if (malformed_record) {
        res->malformed_records++;
        st = CAP_FP_MALFORMED;
    } else {
        st = cap_fp_parse(dlt, data, caplen, len, &ff);
    }
    res->kinds[st]++;
    if (st == CAP_FP_MALFORMED) {
        if (cap_state_add_malformed(s, frame) < 0) {
            hw_seterr(err, "failed to allocate buffers: %s", strerror(ENOMEM));
            return -1;
        }
        return 0;
    }
    if (st != CAP_FP_OK)
        return 0;
    struct cap_rows *r = &s->rows;
    if (r->n == r->cap && make_room(s, err) < 0)
        return -1;
    int64_t n = r->n;
    int32_t src = cached_code(s->dict, &s->src_cache, ff.family, ff.src);
    int32_t dst = cached_code(s->dict, &s->dst_cache, ff.family, ff.dst);
    if (src < 0 || dst < 0) {
        hw_seterr(err, "failed to allocate buffers: %s", strerror(ENOMEM));
        return -1;
    }
    r->frame[n] = frame;
    r->t_ns[n] = t_ns;
    r->wire_len[n] = len;
    r->cap_len[n] = caplen;
    r->ip_len[n] = ff.ip_len;
    r->proto[n] = ff.proto;
    r->src[n] = src;
    r->dst[n] = dst;
    r->sport[n] = ff.sport;
    r->dport[n] = ff.dport;
    r->seq[n] = ff.seq;
    r->ack[n] = ff.ack;
    r->flags[n] = ff.flags;
    r->window[n] = ff.window;
    r->payload_len[n] = ff.payload_len;
    r->wscale[n] = ff.wscale;
    r->n = n + 1;
    res->rows++;
    return 0;
}

int cap_walk_range(const struct cap_mapped *m, size_t from, size_t to, struct cap_state *s,
                   struct cap_pcapcols_result *res, struct hw_err *err)
{
    size_t off = from;
    while (off < to) {
        uint32_t rec[4];  /* seconds, sub-second ticks, captured length, wire length */
        if (m->size - off < PCAP_RECORD_HEADER)
            return PASS_LIBPCAP;
        memcpy(rec, m->map + off, sizeof(rec));
        off += PCAP_RECORD_HEADER;
        if (rec[2] > m->snaplen)
            return PASS_EXACT;
        if (rec[2] > m->size - off)
            return PASS_LIBPCAP;
        int64_t frame = ++res->frames;
        if (cap_take_frame(s, res, m->dlt, frame, (int64_t)rec[0] * 1000000000LL + (int64_t)rec[1] * m->ns_per_tick,
                           m->map + off, rec[2], rec[3], 0, err) < 0)
            return -1;
        off += rec[2];
    }
    return off == to ? 0 : PASS_LIBPCAP;
}
