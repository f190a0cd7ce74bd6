#include "damage.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define PCAP_MAX_RECORD 262144u  /* libpcap's largest record (MAXIMUM_SNAPLEN) */

static uint32_t rd32(const uint8_t *p, int swap)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return swap ? __builtin_bswap32(v) : v;
}

static int walk_pcap(FILE *f, int64_t size, int swap, struct cap_damage *out)
{
    uint8_t hdr[16];
    int64_t off = 24, frame = 1;

    while (off < size) {
        if (off + 16 > size) {
            snprintf(out->what, sizeof(out->what),
                     "file cut inside the record header of frame %lld (%lld of 16 bytes)",
                     (long long)frame, (long long)(size - off));
            goto found;
        }
        if (fseeko(f, off, SEEK_SET) < 0 || fread(hdr, 1, 16, f) != 16)
            return -1;
        uint32_t caplen = rd32(hdr + 8, swap);
        if (caplen > PCAP_MAX_RECORD) {
            snprintf(out->what, sizeof(out->what),
                     "record length %u of frame %lld is over the largest snap length %u",
                     caplen, (long long)frame, PCAP_MAX_RECORD);
            goto found;
        }
        if (off + 16 + caplen > size) {
            snprintf(out->what, sizeof(out->what),
                     "file cut inside the packet data of frame %lld (%lld of %u bytes)",
                     (long long)frame, (long long)(size - off - 16), caplen);
            goto found;
        }
        off += 16 + (int64_t)caplen;
        frame++;
    }
    out->found = 0;
    return 0;
found:
    out->found = 1;
    out->offset = off;
    out->frame = frame;
    return 0;
}

static int walk_pcapng(FILE *f, int64_t size, struct cap_damage *out)
{
    uint8_t hdr[12];
    int64_t off = 0, frame = 1;
    int swap = 0;

    while (off < size) {
        if (off + 12 > size) {
            snprintf(out->what, sizeof(out->what), "file cut inside a block header (%lld of 12 bytes)",
                     (long long)(size - off));
            goto found;
        }
        if (fseeko(f, off, SEEK_SET) < 0 || fread(hdr, 1, 12, f) != 12)
            return -1;
        uint32_t type = rd32(hdr, 0);
        if (type == 0x0a0d0d0a) {
            uint32_t bom;
            memcpy(&bom, hdr + 8, 4);
            swap = bom == 0x4d3c2b1a;
        }
        uint32_t len = rd32(hdr + 4, swap);
        type = rd32(hdr, swap);
        if (len < 12 || len % 4 != 0) {
            snprintf(out->what, sizeof(out->what), "block of type 0x%x has the impossible length %u", type, len);
            goto found;
        }
        if (off + len > size) {
            snprintf(out->what, sizeof(out->what), "file cut inside a block of type 0x%x (%lld of %u bytes)",
                     type, (long long)(size - off), len);
            goto found;
        }
        if (type == 6 || type == 3 || type == 2)
            frame++;
        off += len;
    }
    out->found = 0;
    return 0;
found:
    out->found = 1;
    out->offset = off;
    out->frame = frame;
    return 0;
}

int cap_damage_locate(const char *path, struct cap_damage *out)
{
    FILE *f = fopen(path, "rb");
    struct stat st;
    uint8_t magic[4];
    uint32_t m;
    int ret = -1;

    memset(out, 0, sizeof(*out));
    if (!f)
        return -1;
    if (fstat(fileno(f), &st) < 0)
        goto cleanup;
    if (fread(magic, 1, 4, f) != 4) {
        out->found = 1;
        snprintf(out->what, sizeof(out->what), "file too short for a file header");
        ret = 0;
        goto cleanup;
    }
    memcpy(&m, magic, 4);
    if (m == 0x0a0d0d0a) {
        ret = walk_pcapng(f, st.st_size, out);
    } else if (m == 0xa1b2c3d4 || m == 0xa1b23c4d) {
        ret = walk_pcap(f, st.st_size, 0, out);
    } else if (m == 0xd4c3b2a1 || m == 0x4d3cb2a1) {
        ret = walk_pcap(f, st.st_size, 1, out);
    } else {
        out->found = 1;
        snprintf(out->what, sizeof(out->what), "unknown file magic 0x%08x", __builtin_bswap32(m));
        ret = 0;
    }
cleanup:
    fclose(f);
    return ret;
}
