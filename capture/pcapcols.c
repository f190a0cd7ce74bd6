/* The conversion loop: a classic pcap file in this machine's byte order is walked in its mapping,
 * anything else goes through libpcap (the other byte order, pcapng, a damaged or unusual file);
 * frameparse decodes the records, rows go into fixed-size chunks flushed to one file per column. */
#include "pcapcols.h"

#include <errno.h>
#include <fcntl.h>
#include <pcap/pcap.h>
#include <stdio.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "addrdict.h"
#include "damage.h"
#include "hwio.h"
#include "hwjson.h"
#include "hwsafe.h"

#define CHUNK 16384

enum col {
    C_FRAME, C_T_NS, C_WIRE_LEN, C_CAP_LEN, C_IP_LEN, C_PROTO, C_SRC, C_DST, C_SPORT, C_DPORT,
    C_SEQ, C_ACK, C_FLAGS, C_WINDOW, C_PAYLOAD_LEN, C_WSCALE, C_NCOLS
};

static const struct {
    const char *name;
    const char *dtype;  /* numpy dtype string */
    size_t size;
} cols[C_NCOLS] = {
    [C_FRAME] = {"frame", "<i8", 8},       [C_T_NS] = {"t_ns", "<i8", 8},
    [C_WIRE_LEN] = {"wire_len", "<i8", 8}, [C_CAP_LEN] = {"cap_len", "<i8", 8},
    [C_IP_LEN] = {"ip_len", "<i8", 8},     [C_PROTO] = {"proto", "|u1", 1},
    [C_SRC] = {"src", "<i4", 4},           [C_DST] = {"dst", "<i4", 4},
    [C_SPORT] = {"sport", "<u2", 2},       [C_DPORT] = {"dport", "<u2", 2},
    [C_SEQ] = {"seq", "<u4", 4},           [C_ACK] = {"ack", "<u4", 4},
    [C_FLAGS] = {"flags", "|u1", 1},       [C_WINDOW] = {"window", "<u2", 2},
    [C_PAYLOAD_LEN] = {"payload_len", "<i8", 8}, [C_WSCALE] = {"wscale", "|i1", 1},
};

const char *const cap_pcapcols_column_names[] = {
    "frame", "t_ns", "wire_len", "cap_len", "ip_len", "proto", "src", "dst", "sport", "dport",
    "seq", "ack", "flags", "window", "payload_len", "wscale", NULL,
};

int cap_pcapcols_column_mask(const char *list, uint32_t *mask, struct hw_err *err)
{
    const char *p = list;
    *mask = 0;
    while (*p) {
        size_t len = strcspn(p, ",");
        int found = -1;
        for (int i = 0; i < C_NCOLS; i++)
            if (strlen(cols[i].name) == len && strncmp(cols[i].name, p, len) == 0)
                found = i;
        if (found < 0) {
            hw_usage_err(err, "--columns: no column '%.*s'; columns are frame, t_ns, wire_len, cap_len, ip_len, "
                      "proto, src, dst, sport, dport, seq, ack, flags, window, payload_len, wscale", (int)len, p);
            return -1;
        }
        *mask |= 1u << found;
        p += len;
        if (*p == ',')
            p++;
    }
    if (*mask == 0) {
        hw_usage_err(err, "--columns: expected a comma-separated list of column names");
        return -1;
    }
    return 0;
}

/* Whether column i is written (all of them when no list was given). */
static inline int wanted(const struct cap_pcapcols_opts *opts, int i)
{
    return opts->columns == 0 || (opts->columns >> i) & 1u;
}

struct chunk {
    int64_t frame[CHUNK], t_ns[CHUNK], wire_len[CHUNK], cap_len[CHUNK], ip_len[CHUNK];
    uint8_t proto[CHUNK];
    int32_t src[CHUNK], dst[CHUNK];
    uint16_t sport[CHUNK], dport[CHUNK];
    uint32_t seq[CHUNK], ack[CHUNK];
    uint8_t flags[CHUNK];
    uint16_t window[CHUNK];
    int64_t payload_len[CHUNK];
    int8_t wscale[CHUNK];
    int n;
};

/* The last address seen in one column and its code: most frames repeat their predecessor's. */
struct addr_cache {
    uint8_t family;
    uint8_t addr[16];
    int32_t code;
};

static inline int32_t cached_code(struct cap_addrdict *d, struct addr_cache *c, uint8_t family, const uint8_t *addr)
{
    /* sizes the compiler knows: a call to memcmp per address was a tenth of the conversion */
    if (c->family == family && (family == 4 ? memcmp(c->addr, addr, 4) : memcmp(c->addr, addr, 16)) == 0)
        return c->code;
    c->code = cap_addrdict_code(d, family, addr);
    c->family = family;
    memcpy(c->addr, addr, 16);
    return c->code;
}

struct state {
    int fds[C_NCOLS];  /* -1 for a column not written */
    struct chunk *chunk;
    struct cap_addrdict *dict;
    struct addr_cache src_cache, dst_cache;
    const char *outdir;
    int64_t *malformed;
    size_t n_malformed, cap_malformed;
};

static int flush_chunk(struct state *s)
{
    struct chunk *c = s->chunk;
    const void *arrays[C_NCOLS] = {
        c->frame, c->t_ns, c->wire_len, c->cap_len, c->ip_len, c->proto, c->src, c->dst,
        c->sport, c->dport, c->seq, c->ack, c->flags, c->window, c->payload_len, c->wscale,
    };
    for (int i = 0; i < C_NCOLS; i++)
        if (s->fds[i] >= 0 && hw_write_all(s->fds[i], arrays[i], cols[i].size * (size_t)c->n) < 0)
            return -1;
    c->n = 0;
    return 0;
}

static int add_malformed(struct state *s, int64_t frame)
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

/* One record: counted, parsed and, when it is a TCP or UDP frame, added as a row. */
static int take_frame(struct state *s, struct cap_pcapcols_result *res, int dlt, int64_t frame, int64_t t_ns,
                      const u_char *data, uint32_t caplen, uint32_t len, int malformed_record, struct hw_err *err)
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
        if (add_malformed(s, frame) < 0) {
            hw_seterr(err, "failed to allocate buffers: %s", strerror(ENOMEM));
            return -1;
        }
        return 0;
    }
    if (st != CAP_FP_OK)
        return 0;
    struct chunk *c = s->chunk;
    int n = c->n;
    int32_t src = cached_code(s->dict, &s->src_cache, ff.family, ff.src);
    int32_t dst = cached_code(s->dict, &s->dst_cache, ff.family, ff.dst);
    if (src < 0 || dst < 0) {
        hw_seterr(err, "failed to allocate buffers: %s", strerror(ENOMEM));
        return -1;
    }
    c->frame[n] = frame;
    c->t_ns[n] = t_ns;
    c->wire_len[n] = len;
    c->cap_len[n] = caplen;
    c->ip_len[n] = ff.ip_len;
    c->proto[n] = ff.proto;
    c->src[n] = src;
    c->dst[n] = dst;
    c->sport[n] = ff.sport;
    c->dport[n] = ff.dport;
    c->seq[n] = ff.seq;
    c->ack[n] = ff.ack;
    c->flags[n] = ff.flags;
    c->window[n] = ff.window;
    c->payload_len[n] = ff.payload_len;
    c->wscale[n] = ff.wscale;
    res->rows++;
    if (++c->n == CHUNK && flush_chunk(s) < 0) {
        hw_seterr(err, "failed to write %s: %s", s->outdir, strerror(errno));
        return -1;
    }
    return 0;
}

static const char *format_name(pcap_t *p, int *is_ng)
{
    /* pcap_major_version() is 1 for pcapng in libpcap (documented), 2 for pcap. */
    *is_ng = pcap_major_version(p) == 1;
    return *is_ng ? "pcapng" : "pcap";
}

/* The stamp precision the file itself records (the table is in nanoseconds either way). */
static const char *file_precision(const char *path, int is_ng)
{
    uint32_t magic = 0;
    int fd;
    if (is_ng)
        return "per-interface";  /* pcapng: if_tsresol of each interface */
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return "unknown";
    if (pread(fd, &magic, 4, 0) != 4)
        magic = 0;
    close(fd);
    if (magic == 0xa1b23c4d || magic == 0x4d3cb2a1)
        return "nano";
    if (magic == 0xa1b2c3d4 || magic == 0xd4c3b2a1)
        return "micro";
    return "unknown";
}

#define PCAP_FILE_HEADER 24
#define PCAP_RECORD_HEADER 16
/* The passes over a file, each the fallback of the one before (and convert()'s return asking for it). */
enum pass { PASS_MAPPED = 0, PASS_LIBPCAP = 3, PASS_EXACT = 4 };
#define MAPPED_POPULATE_MAX (256u << 20)

/* The records of a classic pcap file in this machine's byte order, read from a mapping of the
 * file. Returns 0, -1 (err set), PASS_EXACT for a record longer than the snap length or
 * PASS_LIBPCAP for anything else it does not take as it is (the other byte order, a file cut
 * short): the caller then converts the file again from the start in that pass. */
static int walk_mapped(pcap_t *p, const char *path, struct state *s, struct cap_pcapcols_result *res,
                       uint32_t snaplen, int dlt, struct hw_err *err)
{
    const char *precision = file_precision(path, 0);
    int64_t ns_per_tick = strcmp(precision, "nano") == 0 ? 1 : strcmp(precision, "micro") == 0 ? 1000 : 0;
    int fd = fileno(pcap_file(p));
    struct stat st;
    if (!ns_per_tick || pcap_is_swapped(p) || fstat(fd, &st) < 0 || st.st_size < PCAP_FILE_HEADER)
        return PASS_LIBPCAP;
    size_t size = (size_t)st.st_size;
    /* Mapped in one go when small (no fault per page); a large file (an hour's capture can
     * outgrow the memory) is faulted in as it is walked, read ahead and dropped behind. */
    int populate = size <= MAPPED_POPULATE_MAX ? MAP_POPULATE : 0;
    const u_char *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE | populate, fd, 0);
    if (map == MAP_FAILED)
        return PASS_LIBPCAP;
    madvise((void *)map, size, MADV_SEQUENTIAL);
    int ret = 0;
    size_t off = PCAP_FILE_HEADER;
    while (ret == 0 && off < size) {
        uint32_t rec[4];  /* seconds, sub-second ticks, captured length, wire length */
        if (size - off < PCAP_RECORD_HEADER) {
            ret = PASS_LIBPCAP;
            break;
        }
        memcpy(rec, map + off, sizeof(rec));
        off += PCAP_RECORD_HEADER;
        if (rec[2] > snaplen) {
            ret = PASS_EXACT;
            break;
        }
        if (rec[2] > size - off) {
            ret = PASS_LIBPCAP;
            break;
        }
        int64_t frame = ++res->frames;
        if (take_frame(s, res, dlt, frame, (int64_t)rec[0] * 1000000000LL + (int64_t)rec[1] * ns_per_tick,
                       map + off, rec[2], rec[3], 0, err) < 0)
            ret = -1;
        off += rec[2];
    }
    munmap((void *)map, size);
    return ret;
}

static int write_json(const struct cap_pcapcols_opts *opts, struct state *s, struct cap_pcapcols_result *res,
                      pcap_t *p, const struct cap_damage *dmg, const char *damage)
{
    struct hw_safe_file sf;
    FILE *f;
    int is_ng, dlt = pcap_datalink(p);
    const char *fmt = format_name(p, &is_ng);
    const char *dlt_name = pcap_datalink_val_to_name(dlt);

    /* through a fresh temporary file, in the output folder not followed if it is a symbolic link */
    f = hw_safe_open(&sf, opts->outdir, "columns.json");
    if (!f)
        return -1;
    fprintf(f, "{\n  \"format\": \"hostwire-columns 1\",\n  \"source\": ");
    hw_json_str(f, opts->input);
    fprintf(f, ",\n  \"file_format\": \"%s\",\n  \"link_type\": ", fmt);
    hw_json_str(f, dlt_name ? dlt_name : "unknown");
    fprintf(f, ",\n  \"snaplen\": %d,\n  \"tstamp_precision\": \"%s\",\n", pcap_snapshot(p),
            file_precision(opts->input, is_ng));
    fprintf(f, "  \"frames\": %lld,\n  \"rows\": %lld,\n  \"columns\": [\n",
            (long long)res->frames, (long long)res->rows);
    int last = 0;
    for (int i = 0; i < C_NCOLS; i++)
        if (wanted(opts, i))
            last = i;
    for (int i = 0; i < C_NCOLS; i++)
        if (wanted(opts, i))
            fprintf(f, "    {\"name\": \"%s\", \"dtype\": \"%s\", \"file\": \"%s.bin\"%s}%s\n", cols[i].name,
                    cols[i].dtype, cols[i].name, (i == C_SRC || i == C_DST) ? ", \"dictionary\": \"addresses\"" : "",
                    i < last ? "," : "");
    fprintf(f, "  ],\n  \"dictionaries\": {\"addresses\": [");
    for (uint32_t i = 0; i < cap_addrdict_size(s->dict); i++) {
        if (i)
            fputs(", ", f);
        hw_json_str(f, cap_addrdict_text(s->dict, i));
    }
    fprintf(f, "]},\n  \"skipped\": {");
    int first = 1;
    for (int k = CAP_FP_NON_IP; k < CAP_FP_NKINDS; k++) {
        if (k == CAP_FP_MALFORMED || res->kinds[k] == 0)
            continue;
        fprintf(f, "%s\"%s\": %lld", first ? "" : ", ", cap_fp_kind_names[k], (long long)res->kinds[k]);
        first = 0;
    }
    fprintf(f, "},\n  \"malformed\": [");
    for (size_t i = 0; i < s->n_malformed; i++)
        fprintf(f, "%s%lld", i ? ", " : "", (long long)s->malformed[i]);
    fprintf(f, "],\n  \"damage\": ");
    if (res->damaged) {
        fprintf(f, "{\"message\": ");
        hw_json_str(f, damage);
        fprintf(f, ", \"byte_offset\": %lld, \"frame\": %lld}", dmg->found ? (long long)dmg->offset : -1LL,
                dmg->found ? (long long)dmg->frame : (long long)res->frames + 1);
    } else {
        fputs("null", f);
    }
    fputs("\n}\n", f);
    int rc = hw_safe_commit(&sf);
    if (rc < 0) {
        errno = -rc;
        return -1;
    }
    return 0;
}

static int open_columns(const struct cap_pcapcols_opts *opts, struct state *s, struct hw_err *err)
{
    char name[64];
    int dirfd;
    if (mkdir(opts->outdir, 0777) < 0 && errno != EEXIST) {
        hw_seterr(err, "failed to create %s: %s", opts->outdir, strerror(errno));
        return -1;
    }
    /* neither the folder nor a column file is followed if it is a symbolic link */
    dirfd = hw_open_dir_nofollow(opts->outdir);
    if (dirfd < 0) {
        hw_seterr(err, "%s: %s", opts->outdir, dirfd == -ELOOP || dirfd == -ENOTDIR
                  ? "is a symbolic link or not a directory; refusing to write through it" : strerror(-dirfd));
        return -1;
    }
    for (int i = 0; i < C_NCOLS; i++) {
        if (!wanted(opts, i))
            continue;
        snprintf(name, sizeof(name), "%s.bin", cols[i].name);
        s->fds[i] = openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (s->fds[i] < 0) {
            hw_seterr(err, "failed to create %s/%s: %s", opts->outdir, name,
                      errno == ELOOP ? "is a symbolic link; refusing to write through it" : strerror(errno));
            close(dirfd);
            return -1;
        }
    }
    close(dirfd);
    return 0;
}

static int convert(const struct cap_pcapcols_opts *opts, struct cap_pcapcols_result *res, enum pass pass,
                   struct hw_err *err)
{
    char errbuf[PCAP_ERRBUF_SIZE];
    struct state s;
    struct cap_damage dmg;
    struct pcap_pkthdr *hdr;
    const u_char *data;
    pcap_t *p = NULL;
    FILE *fp = NULL;
    char *iobuf = NULL;
    int ret = -1, dlt, rc;
    uint32_t snaplen;

    memset(res, 0, sizeof(*res));
    memset(&s, 0, sizeof(s));
    memset(&dmg, 0, sizeof(dmg));
    for (int i = 0; i < C_NCOLS; i++)
        s.fds[i] = -1;

    fp = fopen(opts->input, "rb");
    if (!fp) {
        hw_seterr(err, "failed to open %s: %s", opts->input, strerror(errno));
        ret = 2;
        goto cleanup;
    }
    iobuf = malloc(1 << 20);
    if (iobuf)
        setvbuf(fp, iobuf, _IOFBF, 1 << 20);
    /* one thread reads this stream: libpcap's two fread() calls per record need no locking */
    __fsetlocking(fp, FSETLOCKING_BYCALLER);
    posix_fadvise(fileno(fp), 0, 0, POSIX_FADV_SEQUENTIAL);
    p = pcap_fopen_offline_with_tstamp_precision(fp, PCAP_TSTAMP_PRECISION_NANO, errbuf);
    if (!p) {
        hw_seterr(err, "failed to read %s: unsupported format: %s", opts->input, errbuf);
        ret = 2;
        goto cleanup;  /* fp is still ours */
    }
    fp = NULL;  /* pcap_close closes it */
    dlt = pcap_datalink(p);
    if (!cap_fp_linktype_supported(dlt)) {
        const char *name = pcap_datalink_val_to_name(dlt);
        hw_seterr(err, "failed to read %s: unsupported link type %d (%s); supported: EN10MB (Ethernet, VLAN), "
                  "RAW, IPV4, IPV6, LINUX_SLL, LINUX_SLL2", opts->input, dlt, name ? name : "unknown");
        ret = 2;
        goto cleanup;
    }
    snaplen = (uint32_t)pcap_snapshot(p);
    /* A pcap file is read from its mapping, record by record, without libpcap's copies (most of
     * the time libpcap's fread() took, docs/performance.md). A file the walk does not take as it
     * is (the other byte order, cut short) goes to libpcap again; libpcap cuts a record longer
     * than the snap length down without a word, so such a record (seen by the walk, or by the sum
     * of the record sizes against the file's size) sends the file to the exact pass, with the
     * file position checked after every record (ftello() costs a system call, hence only then). */
    int is_ng;
    format_name(p, &is_ng);
    FILE *pf = (is_ng || pass != PASS_EXACT) ? NULL : pcap_file(p);
    int64_t pos = pf ? ftello(pf) : 0, expected_size = PCAP_FILE_HEADER;

    s.chunk = malloc(sizeof(*s.chunk));
    s.dict = cap_addrdict_new();
    if (!s.chunk || !s.dict) {
        hw_seterr(err, "failed to allocate buffers: %s", strerror(ENOMEM));
        goto cleanup;
    }
    s.chunk->n = 0;
    s.outdir = opts->outdir;
    if (open_columns(opts, &s, err) < 0)
        goto cleanup;

    if (!is_ng && pass == PASS_MAPPED) {
        rc = walk_mapped(p, opts->input, &s, res, snaplen, dlt, err);
        if (rc == PASS_LIBPCAP || rc == PASS_EXACT)
            ret = rc;
        if (rc != 0)
            goto cleanup;
        rc = 0;
    } else {
        while ((rc = pcap_next_ex(p, &hdr, &data)) == 1) {
            int64_t frame = ++res->frames;
            int64_t next = pf ? ftello(pf) : 0;
            int64_t record_caplen = pf ? next - pos - PCAP_RECORD_HEADER : hdr->caplen;
            expected_size += PCAP_RECORD_HEADER + (int64_t)hdr->caplen;
            pos = next;
            int malformed_record = hdr->caplen > snaplen || record_caplen != hdr->caplen;
            if (take_frame(&s, res, dlt, frame, (int64_t)hdr->ts.tv_sec * 1000000000LL + hdr->ts.tv_usec,
                           data, hdr->caplen, hdr->len, malformed_record, err) < 0)
                goto cleanup;
        }
    }
    if (rc == PCAP_ERROR) {
        res->damaged = 1;
        if (cap_damage_locate(opts->input, &dmg) == 0 && dmg.found)
            hw_seterr(err, "failed to read %s: %s, at byte offset %lld (frame %lld)",
                      opts->input, dmg.what, (long long)dmg.offset, (long long)dmg.frame);
        else
            hw_seterr(err, "failed to read %s: %s, after frame %lld", opts->input,
                      pcap_geterr(p), (long long)res->frames);
    }
    if (flush_chunk(&s) < 0) {
        hw_seterr(err, "failed to write %s: %s", opts->outdir, strerror(errno));
        goto cleanup;
    }
    for (int i = 0; i < C_NCOLS; i++) {
        int fd = s.fds[i];
        s.fds[i] = -1;
        if (fd >= 0 && close(fd) < 0) {
            hw_seterr(err, "failed to write %s: %s", opts->outdir, strerror(errno));
            goto cleanup;
        }
    }
    if (write_json(opts, &s, res, p, &dmg, err->msg) < 0) {
        hw_seterr(err, "failed to write %s/columns.json: %s", opts->outdir,
                  strerror(errno));
        goto cleanup;
    }
    ret = res->damaged ? 1 : 0;
    if (!is_ng && pass == PASS_LIBPCAP && !res->damaged) {
        struct stat st;
        if (fstat(fileno(pcap_file(p)), &st) == 0 && st.st_size != expected_size)
            ret = PASS_EXACT;  /* some record was longer than libpcap let us see */
    }
cleanup:
    for (int i = 0; i < C_NCOLS; i++)
        if (s.fds[i] >= 0)
            close(s.fds[i]);
    if (p)
        pcap_close(p);
    if (fp)
        fclose(fp);
    free(iobuf);
    free(s.chunk);
    free(s.malformed);
    cap_addrdict_free(s.dict);
    return ret;
}

int cap_pcapcols_convert(const struct cap_pcapcols_opts *opts, struct cap_pcapcols_result *res, struct hw_err *err)
{
    int ret = convert(opts, res, PASS_MAPPED, err);
    if (ret == PASS_LIBPCAP)
        ret = convert(opts, res, PASS_LIBPCAP, err);
    if (ret == PASS_EXACT)
        ret = convert(opts, res, PASS_EXACT, err);
    return ret;
}
