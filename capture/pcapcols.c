/* The conversion loop: a classic pcap file in this machine's byte order is walked in its mapping
 * (pcapcols_rows.c; over several threads when the rows go to memory, pcapcols_parts.c), anything
 * else goes through libpcap (the other byte order, pcapng, a damaged or unusual file); the rows go
 * into fixed-size chunks flushed to one file per column, or into columns mapped in memory. */
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
#include "colpool.h"
#include "damage.h"
#include "hwjson.h"
#include "hwsafe.h"
#include "pcapcols_rows.h"

#define CHUNK 16384

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
            if (strlen(cap_cols[i].name) == len && strncmp(cap_cols[i].name, p, len) == 0)
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
};

static void point_at_chunk(struct cap_rows *r, struct chunk *c)
{
    void *cols[C_NCOLS] = {
        c->frame, c->t_ns, c->wire_len, c->cap_len, c->ip_len, c->proto, c->src, c->dst,
        c->sport, c->dport, c->seq, c->ack, c->flags, c->window, c->payload_len, c->wscale,
    };
    cap_rows_point(r, cols, CHUNK);
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

#define MAPPED_POPULATE_MAX (256u << 20)

/* A classic pcap file in this machine's byte order, mapped for the walk (1), or 0 when the file is
 * for libpcap (the other byte order, an unknown precision) or cannot be mapped. */
static int map_capture(pcap_t *p, const char *path, uint32_t snaplen, int dlt, struct cap_mapped *m)
{
    const char *precision = file_precision(path, 0);
    int64_t ns_per_tick = strcmp(precision, "nano") == 0 ? 1 : strcmp(precision, "micro") == 0 ? 1000 : 0;
    int fd = fileno(pcap_file(p));
    struct stat st;
    if (!ns_per_tick || pcap_is_swapped(p) || fstat(fd, &st) < 0 || st.st_size < PCAP_FILE_HEADER)
        return 0;
    size_t size = (size_t)st.st_size;
    /* Mapped in one go when small (no fault per page); a large file (an hour's capture can
     * outgrow the memory) is faulted in as it is walked, read ahead and dropped behind. */
    int populate = size <= MAPPED_POPULATE_MAX ? MAP_POPULATE : 0;
    const uint8_t *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE | populate, fd, 0);
    if (map == MAP_FAILED)
        return 0;
    madvise((void *)map, size, MADV_SEQUENTIAL);
    *m = (struct cap_mapped){.map = map, .size = size, .ns_per_tick = ns_per_tick, .snaplen = snaplen, .dlt = dlt};
    return 1;
}

/* columns.json's text: the file's format, the columns (all of them in memory), the address
 * dictionary, the frames skipped and malformed, the damage. */
static void print_meta(FILE *f, const struct cap_pcapcols_opts *opts, const struct cap_state *s,
                       const struct cap_pcapcols_result *res, pcap_t *p, const struct cap_damage *dmg,
                       const char *damage)
{
    int is_ng, dlt = pcap_datalink(p);
    const char *fmt = format_name(p, &is_ng);
    const char *dlt_name = pcap_datalink_val_to_name(dlt);

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
            fprintf(f, "    {\"name\": \"%s\", \"dtype\": \"%s\", \"file\": \"%s.bin\"%s}%s\n", cap_cols[i].name,
                    cap_cols[i].dtype, cap_cols[i].name,
                    (i == C_SRC || i == C_DST) ? ", \"dictionary\": \"addresses\"" : "", i < last ? "," : "");
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
}

static int write_json(const char *outdir, const struct cap_pcapcols_opts *opts, struct cap_state *s,
                      struct cap_pcapcols_result *res, pcap_t *p, const struct cap_damage *dmg, const char *damage,
                      const char *meta)
{
    struct hw_safe_file sf;
    /* through a fresh temporary file, in the output folder not followed if it is a symbolic link */
    FILE *f = hw_safe_open(&sf, outdir, "columns.json");
    if (!f)
        return -1;
    if (meta)
        fputs(meta, f);
    else
        print_meta(f, opts, s, res, p, dmg, damage);
    int rc = hw_safe_commit(&sf);
    if (rc < 0) {
        errno = -rc;
        return -1;
    }
    return 0;
}

static int open_columns(const char *outdir, const struct cap_pcapcols_opts *opts, int fds[C_NCOLS],
                        struct hw_err *err)
{
    char name[64];
    int dirfd;
    if (mkdir(outdir, 0777) < 0 && errno != EEXIST) {
        hw_seterr(err, "failed to create %s: %s", outdir, strerror(errno));
        return -1;
    }
    /* neither the folder nor a column file is followed if it is a symbolic link */
    dirfd = hw_open_dir_nofollow(outdir);
    if (dirfd < 0) {
        hw_seterr(err, "%s: %s", outdir, dirfd == -ELOOP || dirfd == -ENOTDIR
                  ? "is a symbolic link or not a directory; refusing to write through it" : strerror(-dirfd));
        return -1;
    }
    for (int i = 0; i < C_NCOLS; i++) {
        if (!wanted(opts, i))
            continue;
        snprintf(name, sizeof(name), "%s.bin", cap_cols[i].name);
        fds[i] = openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fds[i] < 0) {
            hw_seterr(err, "failed to create %s/%s: %s", outdir, name,
                      errno == ELOOP ? "is a symbolic link; refusing to write through it" : strerror(errno));
            close(dirfd);
            return -1;
        }
    }
    close(dirfd);
    return 0;
}

/* Closes the column files; -1 (err set) when one of them failed to write. */
static int close_columns(const char *outdir, int fds[C_NCOLS], struct hw_err *err)
{
    int ret = 0;
    for (int i = 0; i < C_NCOLS; i++) {
        int fd = fds[i];
        fds[i] = -1;
        if (fd >= 0 && close(fd) < 0 && ret == 0) {
            hw_seterr(err, "failed to write %s: %s", outdir, strerror(errno));
            ret = -1;
        }
    }
    return ret;
}

/* Where a conversion's rows go: column files in opts->outdir, or (table set) mapped columns;
 * and by how many threads. */
struct target {
    struct cap_pcapcols_table *table;
    int threads;
    size_t segment_bytes;
};

/* The most rows a file of `size` bytes can hold: one per record header at least. */
static int64_t row_bound(int64_t size)
{
    return size / PCAP_RECORD_HEADER + 1;
}

/* The mapped columns handed over to the table, each cut down to its rows' pages. */
static void hand_over(struct cap_state *s, struct cap_pcapcols_table *t)
{
    void *cols[C_NCOLS];
    cap_rows_columns(&s->rows, cols);
    for (int i = 0; i < C_NCOLS; i++) {
        t->columns[i] = cols[i];
        t->mapped[i] = cap_rows_trim(&s->rows, i);
    }
    t->rows = s->rows.n;
    memset(&s->rows, 0, sizeof(s->rows));
}

static char *meta_text(const struct cap_pcapcols_opts *opts, const struct cap_state *s,
                       const struct cap_pcapcols_result *res, pcap_t *p, const struct cap_damage *dmg,
                       const char *damage)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return NULL;
    print_meta(f, opts, s, res, p, dmg, damage);
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

static int convert(const struct cap_pcapcols_opts *opts, struct cap_pcapcols_result *res, enum cap_pass pass,
                   const struct target *to, struct hw_err *err)
{
    char errbuf[PCAP_ERRBUF_SIZE];
    struct cap_state s;
    struct cap_damage dmg;
    struct cap_mapped m = {0};
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
    int mapped = !is_ng && pass == PASS_MAPPED && map_capture(p, opts->input, snaplen, dlt, &m);
    if (!is_ng && pass == PASS_MAPPED && !mapped) {
        ret = PASS_LIBPCAP;
        goto cleanup;
    }

    s.dict = cap_addrdict_new();
    if (!s.dict) {
        hw_seterr(err, "failed to allocate buffers: %s", strerror(ENOMEM));
        goto cleanup;
    }
    s.outdir = opts->outdir;
    if (to->table) {
        struct stat st;
        s.in_memory = 1;
        if (fstat(fileno(pcap_file(p)), &st) < 0 || cap_rows_map(&s.rows, row_bound(st.st_size)) < 0) {
            hw_seterr(err, "failed to allocate the columns of %s: %s", opts->input, strerror(errno));
            goto cleanup;
        }
    } else {
        s.chunk = malloc(sizeof(struct chunk));
        if (!s.chunk) {
            hw_seterr(err, "failed to allocate buffers: %s", strerror(ENOMEM));
            goto cleanup;
        }
        point_at_chunk(&s.rows, s.chunk);
        if (open_columns(opts->outdir, opts, s.fds, err) < 0)
            goto cleanup;
    }

    if (mapped) {
        if (to->threads <= 1)
            rc = cap_walk_range(&m, PCAP_FILE_HEADER, m.size, &s, res, err);
        else if (to->table)
            rc = cap_walk_parts(&m, to->threads, &s, res, err);
        else
            rc = cap_walk_segments(&m, to->threads, to->segment_bytes, &s, res, err);
        if (rc == PASS_LIBPCAP || rc == PASS_EXACT || rc == PASS_ONE_THREAD)
            ret = rc;
        if (rc != 0)
            goto cleanup;
        if (res->parts == 0)
            res->parts = 1;
    } else {
        while ((rc = pcap_next_ex(p, &hdr, &data)) == 1) {
            int64_t frame = ++res->frames;
            int64_t next = pf ? ftello(pf) : 0;
            int64_t record_caplen = pf ? next - pos - PCAP_RECORD_HEADER : hdr->caplen;
            expected_size += PCAP_RECORD_HEADER + (int64_t)hdr->caplen;
            pos = next;
            int malformed_record = hdr->caplen > snaplen || record_caplen != hdr->caplen;
            if (cap_take_frame(&s, res, dlt, frame, (int64_t)hdr->ts.tv_sec * 1000000000LL + hdr->ts.tv_usec,
                               data, hdr->caplen, hdr->len, malformed_record, err) < 0)
                goto cleanup;
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
    }
    if (!is_ng && pass == PASS_LIBPCAP && !res->damaged) {
        struct stat st;
        if (fstat(fileno(pcap_file(p)), &st) == 0 && st.st_size != expected_size) {
            ret = PASS_EXACT;  /* some record was longer than libpcap let us see */
            goto cleanup;
        }
    }
    if (to->table) {
        char *meta = meta_text(opts, &s, res, p, &dmg, err->msg);
        if (!meta) {
            hw_seterr(err, "failed to allocate buffers: %s", strerror(ENOMEM));
            goto cleanup;
        }
        hand_over(&s, to->table);
        to->table->meta = meta;
    } else {
        if (cap_rows_write(&s.rows, &s, err) < 0)
            goto cleanup;
        if (close_columns(opts->outdir, s.fds, err) < 0)
            goto cleanup;
        if (write_json(opts->outdir, opts, &s, res, p, &dmg, err->msg, NULL) < 0) {
            hw_seterr(err, "failed to write %s/columns.json: %s", opts->outdir, strerror(errno));
            goto cleanup;
        }
    }
    ret = res->damaged ? 1 : 0;
cleanup:
    for (int i = 0; i < C_NCOLS; i++)
        if (s.fds[i] >= 0)
            close(s.fds[i]);
    if (m.map)
        munmap((void *)m.map, m.size);
    if (p)
        pcap_close(p);
    if (fp)
        fclose(fp);
    free(iobuf);
    free(s.chunk);
    if (s.in_memory)
        cap_rows_unmap(&s.rows);
    free(s.malformed);
    cap_addrdict_free(s.dict);
    return ret;
}

static int convert_in_passes(const struct cap_pcapcols_opts *opts, struct cap_pcapcols_result *res,
                             const struct target *to, struct hw_err *err)
{
    int ret = convert(opts, res, PASS_MAPPED, to, err);
    if (ret == PASS_ONE_THREAD) {
        const struct target one = {to->table, 1, 0};
        ret = convert(opts, res, PASS_MAPPED, &one, err);
    }
    if (ret == PASS_LIBPCAP)
        ret = convert(opts, res, PASS_LIBPCAP, to, err);
    if (ret == PASS_EXACT)
        ret = convert(opts, res, PASS_EXACT, to, err);
    return ret;
}

int cap_pcapcols_convert(const struct cap_pcapcols_opts *opts, struct cap_pcapcols_result *res, struct hw_err *err)
{
    const struct target files = {NULL, opts->threads, opts->segment_bytes};
    return convert_in_passes(opts, res, &files, err);
}

int cap_pcapcols_to_memory(const char *input, int threads, struct cap_pcapcols_table *table,
                           struct cap_pcapcols_result *res, struct hw_err *err)
{
    const struct cap_pcapcols_opts opts = {.input = input, .outdir = NULL, .columns = 0};
    const struct target memory = {table, threads, 0};
    memset(table, 0, sizeof(*table));
    return convert_in_passes(&opts, res, &memory, err);
}

void cap_pcapcols_unmap(void *column, size_t mapped)
{
    cap_colpool_give(column, mapped);
}

void cap_pcapcols_struct_sizes(size_t sizes[3])
{
    sizes[0] = sizeof(struct cap_pcapcols_table);
    sizes[1] = sizeof(struct cap_pcapcols_result);
    sizes[2] = sizeof(struct hw_err);
}
