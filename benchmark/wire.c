#include "wire.h"

#include <endian.h>
#include <errno.h>
#include <string.h>

static void put16(uint8_t *p, uint16_t v) { v = htobe16(v); memcpy(p, &v, 2); }
static void put32(uint8_t *p, uint32_t v) { v = htobe32(v); memcpy(p, &v, 4); }
static void put64(uint8_t *p, int64_t v) { uint64_t u = htobe64((uint64_t)v); memcpy(p, &u, 8); }
static uint16_t get16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return be16toh(v); }
static uint32_t get32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return be32toh(v); }
static int64_t get64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return (int64_t)be64toh(v); }

void hb_pack_ports(uint8_t *buf, const struct hb_ports_msg *m)
{
    put32(buf, m->magic);
    put16(buf + 4, m->version);
    put16(buf + 6, m->tcp_port);
    put16(buf + 8, m->udp_port);
}

int hb_unpack_ports(const uint8_t *buf, struct hb_ports_msg *m)
{
    m->magic = get32(buf);
    m->version = get16(buf + 4);
    m->tcp_port = get16(buf + 6);
    m->udp_port = get16(buf + 8);
    return m->magic == HB_MAGIC_PORTS && m->version == HB_WIRE_VERSION ? 0 : -EPROTO;
}

void hb_pack_hello(uint8_t *buf, const struct hb_hello_msg *m)
{
    put32(buf, m->magic);
    put16(buf + 4, m->kind);
    put16(buf + 6, m->index);
    put32(buf + 8, m->pid);
}

int hb_unpack_hello(const uint8_t *buf, struct hb_hello_msg *m)
{
    m->magic = get32(buf);
    m->kind = get16(buf + 4);
    m->index = get16(buf + 6);
    m->pid = get32(buf + 8);
    if (m->magic != HB_MAGIC_HELLO)
        return -EPROTO;
    return m->kind == HB_CONN_CONTROL || m->kind == HB_CONN_DATA ? 0 : -EPROTO;
}

void hb_pack_window(uint8_t *buf, const struct hb_window_msg *m)
{
    buf[0] = HB_CTL_WINDOW;
    put64(buf + 1, m->offset_ns);
    put64(buf + 9, m->window_start_ns);
    put64(buf + 17, m->window_end_ns);
}

void hb_unpack_window(const uint8_t *buf, struct hb_window_msg *m)
{
    m->offset_ns = get64(buf + 1);
    m->window_start_ns = get64(buf + 9);
    m->window_end_ns = get64(buf + 17);
}

void hb_pack_sync(uint8_t *buf, const struct hb_sync_msg *m, size_t len)
{
    put32(buf, m->magic);
    put32(buf + 4, m->seq);
    put64(buf + 8, m->t1);
    if (len >= HB_SYNC_REPLY_LEN) {
        put64(buf + 16, m->t2);
        put64(buf + 24, m->t3);
    }
}

int hb_unpack_sync(const uint8_t *buf, size_t len, struct hb_sync_msg *m)
{
    if (len != HB_SYNC_REQ_LEN && len != HB_SYNC_REPLY_LEN)
        return -EPROTO;
    m->magic = get32(buf);
    m->seq = get32(buf + 4);
    m->t1 = get64(buf + 8);
    m->t2 = len == HB_SYNC_REPLY_LEN ? get64(buf + 16) : 0;
    m->t3 = len == HB_SYNC_REPLY_LEN ? get64(buf + 24) : 0;
    return m->magic == HB_MAGIC_SYNC ? 0 : -EPROTO;
}

void hb_pack_summary(uint8_t *buf, const struct hb_recv_summary *s)
{
    put16(buf, s->index);
    put32(buf + 2, s->pid);
    put32(buf + 6, (uint32_t)s->exit_status);
    put64(buf + 10, s->bytes_total);
    put64(buf + 18, s->bytes_window);
    put64(buf + 26, s->lf_count);
    put64(buf + 34, s->events);
    put64(buf + 42, s->overflow);
}

void hb_unpack_summary(const uint8_t *buf, struct hb_recv_summary *s)
{
    s->index = get16(buf);
    s->pid = get32(buf + 2);
    s->exit_status = (int32_t)get32(buf + 6);
    s->bytes_total = get64(buf + 10);
    s->bytes_window = get64(buf + 18);
    s->lf_count = get64(buf + 26);
    s->events = get64(buf + 34);
    s->overflow = get64(buf + 42);
}
