/* The conversion into memory, a file split over threads, and the conversion to files in segments
 * on several threads, against the conversion to column files in one pass, on built files: byte for
 * byte the same columns and the same columns.json, whether the starts were right (a mixed
 * capture), wrong (payloads that hold record headers), or the file sends the walk to another pass
 * (cut short, a record longer than the snap length). */
#include <pcap/dlt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../pcapcols.h"
#include "hwtest.h"

#define SNAPLEN 262144

static uint64_t rng = 88172645463325252ull;
static uint32_t next_random(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)rng;
}

static void put16(uint8_t *p, uint32_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }

/* Ethernet + IPv4 (or IPv6) + TCP (or UDP) + `pay` bytes; returns the frame length. */
static uint32_t build_frame(uint8_t *f, int v6, int tcp, uint32_t pay, uint32_t host, int malformed)
{
    uint32_t l4 = tcp ? 20 : 8, off = 14;
    memset(f, 0, 14 + 40 + l4);
    put16(f + 12, v6 ? 0x86dd : 0x0800);
    if (v6) {
        f[off] = 0x60;
        put16(f + off + 4, l4 + pay);
        f[off + 6] = tcp ? 6 : 17;
        f[off + 8] = 0x20; f[off + 9] = 0x01; f[off + 10] = 0x0d; f[off + 11] = 0xb8;
        f[off + 22] = (uint8_t)(host >> 8); f[off + 23] = (uint8_t)host;
        f[off + 24] = 0x20; f[off + 25] = 0x01; f[off + 26] = 0x0d; f[off + 27] = 0xb8; f[off + 39] = 2;
        off += 40;
    } else {
        f[off] = 0x45;
        put16(f + off + 2, malformed ? 10 : 20 + l4 + pay);
        f[off + 8] = 64;
        f[off + 9] = tcp ? 6 : 17;
        f[off + 12] = 198; f[off + 13] = 18; f[off + 14] = (uint8_t)(host >> 8); f[off + 15] = (uint8_t)host;
        f[off + 16] = 198; f[off + 17] = 19; f[off + 19] = 2;
        off += 20;
    }
    put16(f + off, 40000 + (host & 1023));
    put16(f + off + 2, tcp ? 5001 : 53);
    if (tcp) {
        uint32_t seq = next_random();
        memcpy(f + off + 4, &seq, 4);
        f[off + 12] = 0x50;
        f[off + 13] = 0x18;
        put16(f + off + 14, next_random() & 0xffff);
    } else {
        put16(f + off + 4, 8 + pay);
    }
    return off + l4 + pay;
}

static void write_header(FILE *f, uint32_t magic, uint32_t snaplen)
{
    uint32_t h[6] = {magic, 2 | (4u << 16), 0, 0, snaplen, DLT_EN10MB};
    fwrite(h, sizeof(h), 1, f);
}

static void write_record(FILE *f, uint32_t sec, uint32_t tick, const uint8_t *data, uint32_t caplen, uint32_t len)
{
    uint32_t rec[4] = {sec, tick, caplen, len};
    fwrite(rec, sizeof(rec), 1, f);
    fwrite(data, 1, caplen, f);
}

/* About `bytes` of mixed records: TCP and UDP over IPv4 and IPv6, ARP, malformed IP, frames cut by
 * the snap length, addresses that appear for the first time all through the file. */
static void write_mixed(const char *path, size_t bytes, int records_over_snaplen)
{
    static uint8_t frame[2048];
    FILE *f = fopen(path, "wb");
    write_header(f, 0xa1b23c4d, 1600);
    uint32_t sec = 1700000000, ns = 0;
    for (size_t written = 24, i = 0; written < bytes; i++) {
        uint32_t r = next_random(), len, cap;
        ns += r % 50000;
        if (ns >= 1000000000u) {
            ns -= 1000000000u;
            sec++;
        }
        uint32_t host = (uint32_t)(i / 2000) * 8 + (r >> 8) % 8;
        if (r % 97 == 0) {
            memset(frame, 0, 60);
            put16(frame + 12, 0x0806);
            len = cap = 60;
        } else {
            len = build_frame(frame, r % 5 == 0, r % 3 != 0, (r >> 12) % 1400, host, r % 89 == 0);
            cap = r % 13 == 0 && len > 80 ? 80 : len;
        }
        if (records_over_snaplen && i == 12345)
            cap = len = 1700;
        write_record(f, sec, ns, frame, cap, len);
        written += 16 + cap;
    }
    fclose(f);
}

/* UDP frames whose payloads are record headers and frames themselves, ending exactly where the
 * next real record starts: a start searched for inside them is plausible and wrong. */
static void write_decoys(const char *path, size_t bytes)
{
    static uint8_t frame[2048], inner[256];
    FILE *f = fopen(path, "wb");
    write_header(f, 0xa1b23c4d, 65535);
    uint32_t sec = 1700000000;
    for (size_t written = 24, i = 0; written < bytes; i++) {
        uint32_t len = build_frame(frame, 0, 0, 10 * 140, (uint32_t)i % 64, 0);
        uint8_t *pay = frame + len - 10 * 140;
        for (int k = 0; k < 10; k++) {
            uint32_t inner_len = build_frame(inner, 0, 1, 124 - 54, 7, 0);
            uint32_t rec[4] = {sec, (uint32_t)i, inner_len, inner_len};
            memcpy(pay + k * 140, rec, 16);
            memcpy(pay + k * 140 + 16, inner, inner_len);
        }
        write_record(f, sec, (uint32_t)i * 1000, frame, len, len);
        written += 16 + len;
    }
    fclose(f);
}

static char *read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (fread(buf, 1, (size_t)n, f) != (size_t)n)
        n = 0;
    buf[n] = 0;
    fclose(f);
    *size = (size_t)n;
    return buf;
}

static const size_t sizes[CAP_PCAPCOLS_NCOLS] = {8, 8, 8, 8, 8, 1, 4, 4, 2, 2, 4, 4, 1, 2, 8, 1};

/* Converts `path` to files in one pass and to memory on `threads` threads; checks the two agree
 * and returns the memory conversion's parts (-1 when they disagree). */
static int same_both_ways(const char *path, const char *dir, int threads, int want_rc)
{
    struct cap_pcapcols_opts opts = {.input = path, .outdir = dir, .columns = 0};
    struct cap_pcapcols_result file_res, mem_res;
    struct cap_pcapcols_table table;
    static struct hw_err err;
    int file_rc = cap_pcapcols_convert(&opts, &file_res, &err);
    int mem_rc = cap_pcapcols_to_memory(path, threads, &table, &mem_res, &err);
    CHECK_EQ_LL(file_rc, want_rc);
    CHECK_EQ_LL(mem_rc, want_rc);
    CHECK_EQ_LL(mem_res.frames, file_res.frames);
    CHECK_EQ_LL(mem_res.rows, file_res.rows);
    CHECK_EQ_LL(table.rows, file_res.rows);
    CHECK(memcmp(mem_res.kinds, file_res.kinds, sizeof(mem_res.kinds)) == 0);
    int same = mem_rc == file_rc && table.rows == file_res.rows;
    char name[512];
    size_t n;
    snprintf(name, sizeof(name), "%s/columns.json", dir);
    char *meta = read_file(name, &n);
    same = same && meta && table.meta && strcmp(meta, table.meta) == 0;
    free(meta);
    for (int i = 0; i < CAP_PCAPCOLS_NCOLS && same; i++) {
        snprintf(name, sizeof(name), "%s/%s.bin", dir, cap_pcapcols_column_names[i]);
        char *col = read_file(name, &n);
        same = col && n == (size_t)table.rows * sizes[i] && memcmp(col, table.columns[i], n) == 0;
        if (!same)
            fprintf(stderr, "%s: column %s differs\n", path, cap_pcapcols_column_names[i]);
        free(col);
    }
    CHECK(same);
    for (int i = 0; i < CAP_PCAPCOLS_NCOLS; i++)
        cap_pcapcols_unmap(table.columns[i], table.mapped[i]);
    free(table.meta);
    return same ? mem_res.parts : -1;
}

static char dir[256], pcap[300], out[300], out2[300];

/* Converts `path` to files in one pass and in segments of 1 MiB on `threads` threads; checks the
 * two directories hold the same files and returns the segments written (-1 when they differ). */
static int same_files(const char *path, int threads, int want_rc)
{
    struct cap_pcapcols_opts one = {.input = path, .outdir = out, .columns = 0};
    struct cap_pcapcols_opts segs = {.input = path, .outdir = out2, .columns = 0, .threads = threads,
                                     .segment_bytes = 1 << 20};
    struct cap_pcapcols_result one_res, seg_res;
    static struct hw_err err;
    CHECK_EQ_LL(cap_pcapcols_convert(&one, &one_res, &err), want_rc);
    CHECK_EQ_LL(cap_pcapcols_convert(&segs, &seg_res, &err), want_rc);
    CHECK_EQ_LL(seg_res.frames, one_res.frames);
    CHECK_EQ_LL(seg_res.rows, one_res.rows);
    int same = 1;
    for (int i = 0; i <= CAP_PCAPCOLS_NCOLS && same; i++) {
        char a[512], b[512];
        const char *name = i < CAP_PCAPCOLS_NCOLS ? cap_pcapcols_column_names[i] : "columns";
        const char *ext = i < CAP_PCAPCOLS_NCOLS ? "bin" : "json";
        snprintf(a, sizeof(a), "%s/%s.%s", out, name, ext);
        snprintf(b, sizeof(b), "%s/%s.%s", out2, name, ext);
        size_t na, nb;
        char *da = read_file(a, &na), *db = read_file(b, &nb);
        /* columns.json names its output folder nowhere, so the two are equal byte for byte */
        same = da && db && na == nb && memcmp(da, db, na) == 0;
        if (!same)
            fprintf(stderr, "%s: %s.%s differs in segments\n", path, name, ext);
        free(da);
        free(db);
    }
    CHECK(same);
    return same ? seg_res.parts : -1;
}

static void test_mixed_capture_in_parts(void)
{
    write_mixed(pcap, 13u << 20, 0);
    CHECK_EQ_LL(same_both_ways(pcap, out, 1, 0), 1);
    CHECK_EQ_LL(same_both_ways(pcap, out, 2, 0), 2);
    CHECK_EQ_LL(same_both_ways(pcap, out, 3, 0), 3);
    CHECK_EQ_LL(same_both_ways(pcap, out, 8, 0), 3);  /* 4 MiB parts at least */
    CHECK_EQ_LL(same_files(pcap, 2, 0), 13);
    CHECK_EQ_LL(same_files(pcap, 3, 0), 13);
}

static void test_wrong_starts_walk_again(void)
{
    write_decoys(pcap, 9u << 20);
    CHECK_EQ_LL(same_both_ways(pcap, out, 2, 0), 1);
    CHECK_EQ_LL(same_files(pcap, 2, 0), 1);
}

static void test_other_passes(void)
{
    write_mixed(pcap, 9u << 20, 0);
    struct stat st;
    stat(pcap, &st);
    CHECK(truncate(pcap, st.st_size - 7) == 0);  /* cut short in the last record */
    CHECK_EQ_LL(same_both_ways(pcap, out, 2, 1), 0);
    CHECK_EQ_LL(same_files(pcap, 2, 1), 0);
    write_mixed(pcap, 9u << 20, 1);
    CHECK_EQ_LL(same_both_ways(pcap, out, 2, 0), 0);
    CHECK_EQ_LL(same_files(pcap, 2, 0), 0);
}

HW_TEST_MAIN(
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof(dir), "%s/hw-parts-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(pcap, sizeof(pcap), "%s/in.pcap", dir);
    snprintf(out, sizeof(out), "%s/cols", dir);
    snprintf(out2, sizeof(out2), "%s/cols2", dir);
    test_mixed_capture_in_parts();
    test_wrong_starts_walk_again();
    test_other_passes();
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
)
