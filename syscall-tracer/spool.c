/* The LD_PRELOAD spool to syscalls.tsv: descriptions are keyed by (pid, id), records follow
 * the descriptions they name; blocks are read in file order. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "iotrace.h"

struct desc_map {
    uint64_t *key;    /* pid << 32 | id; 0 = empty */
    char **desc;
    uint8_t *kind;
    size_t cap, used;
};

static uint64_t map_key(int32_t pid, uint32_t id)
{
    return ((uint64_t)(uint32_t)pid << 32) | id;
}

static size_t map_find(const struct desc_map *m, uint64_t key)
{
    size_t j = (key * 0x9E3779B97F4A7C15ull >> 17) & (m->cap - 1);
    while (m->key[j] && m->key[j] != key)
        j = (j + 1) & (m->cap - 1);
    return j;
}

static int map_put(struct desc_map *m, uint64_t key, int kind, const char *d, size_t len)
{
    if ((m->used + 1) * 2 > m->cap) {
        struct desc_map n = {.cap = m->cap ? m->cap * 2 : 256};
        n.key = calloc(n.cap, sizeof(*n.key));
        n.desc = calloc(n.cap, sizeof(*n.desc));
        n.kind = calloc(n.cap, 1);
        if (!n.key || !n.desc || !n.kind) {
            free(n.key);
            free(n.desc);
            free(n.kind);
            return -ENOMEM;
        }
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->key[i])
                continue;
            size_t j = map_find(&n, m->key[i]);
            n.key[j] = m->key[i];
            n.desc[j] = m->desc[i];
            n.kind[j] = m->kind[i];
        }
        n.used = m->used;
        free(m->key);
        free(m->desc);
        free(m->kind);
        *m = n;
    }
    size_t j = map_find(m, key);
    char *copy = strndup(d, len);
    if (!copy)
        return -ENOMEM;
    if (m->key[j])
        free(m->desc[j]);  /* a later process with the same pid (or after exec) */
    else
        m->used++;
    m->key[j] = key;
    m->desc[j] = copy;
    m->kind[j] = (uint8_t)kind;
    return 0;
}

static void map_free(struct desc_map *m)
{
    for (size_t i = 0; i < m->cap; i++)
        free(m->desc[i]);
    free(m->key);
    free(m->desc);
    free(m->kind);
}

int iot_spool_convert(const char *spool, const char *tsv, uint32_t mask, struct iot_trace_stats *st,
                      struct hw_err *err)
{
    struct desc_map m = {0};
    int ret = 0, in = -1;
    const char *data = MAP_FAILED;
    size_t size = 0;
    char *line = malloc(IOT_LINE_MAX);
    FILE *out = fopen(tsv, "we");
    if (!out || !line) {
        ret = -errno;
        hw_seterr(err, "failed to open %s: %s", tsv, strerror(errno));
        goto cleanup;
    }
    char head[1024];
    int hl = iot_tsv_header(head, sizeof(head), "preload", mask, NULL);
    fwrite(head, 1, hl > 0 ? (size_t)hl : 0, out);
    in = open(spool, O_RDONLY | O_CLOEXEC);
    if (in < 0 && errno == ENOENT)
        goto finish;  /* no call was traced */
    struct stat sb;
    if (in < 0 || fstat(in, &sb) < 0) {
        ret = -errno;
        hw_seterr(err, "failed to read %s: %s", spool, strerror(errno));
        goto finish;
    }
    size = (size_t)sb.st_size;
    if (size && (data = mmap(NULL, size, PROT_READ, MAP_PRIVATE, in, 0)) == MAP_FAILED) {
        ret = -errno;
        hw_seterr(err, "failed to map %s: %s", spool, strerror(errno));
        goto finish;
    }
    for (size_t off = 0; off < size;) {
        struct iot_spool_hdr h;
        if (size - off < sizeof(h)) {
            ret = -EBADMSG;
            break;
        }
        memcpy(&h, data + off, sizeof(h));
        if (h.magic != IOT_SPOOL_MAGIC || h.len > size - off - sizeof(h) ||
            (h.type == IOT_SPOOL_RECS && h.len != h.count * sizeof(struct iot_rec)) ||
            (h.type != IOT_SPOOL_RECS && h.type != IOT_SPOOL_DESC)) {
            ret = -EBADMSG;
            hw_seterr(err, "failed to read %s: damaged block at byte %zu", spool, off);
            break;
        }
        const char *payload = data + off + sizeof(h);
        if (h.type == IOT_SPOOL_DESC) {
            ret = map_put(&m, map_key(h.pid, h.count), h.kind, payload, h.len);
            if (ret < 0) {
                hw_seterr(err, "failed to read %s: %s", spool, strerror(-ret));
                break;
            }
        } else {
            for (uint32_t i = 0; i < h.count; i++) {
                struct iot_rec r;
                memcpy(&r, payload + i * sizeof(r), sizeof(r));
                int kind = IOT_FD_UNKNOWN;
                const char *d = "";
                if (r.desc_id && m.cap) {
                    size_t j = map_find(&m, map_key(r.pid, r.desc_id));
                    if (m.key[j]) {
                        kind = m.kind[j];
                        d = m.desc[j];
                    }
                }
                size_t n = iot_rec_format(line, &r, kind, d);
                fwrite(line, 1, n, out);
                st->records_written++;
                st->unfinished += r.unfinished;
            }
        }
        off += sizeof(h) + h.len;
    }
    if (ret == -EBADMSG && !err->msg[0])
        hw_seterr(err, "failed to read %s: truncated block at its end", spool);
finish:
    /* the last line: the trailer when every block was converted, else what went wrong (the
     * records before the damage stay) */
    fwrite(line, 1, ret ? iot_tsv_damaged(line, err->msg) : iot_tsv_trailer(line, st->records_written), out);
cleanup:
    if (out && fclose(out) != 0 && !ret) {
        ret = -errno;
        hw_seterr(err, "failed to write %s: %s", tsv, strerror(errno));
    }
    if (data != MAP_FAILED)
        munmap((void *)data, size);
    if (in >= 0)
        close(in);
    free(line);
    map_free(&m);
    st->calls_seen = st->records_written;
    return ret;
}
