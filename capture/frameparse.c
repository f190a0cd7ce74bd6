/* Frame decoding for hw-pcapcols. Every read is bounds-checked against caplen; lengths that the
 * headers claim are checked against the frame's wire length (a capture keeps only the first
 * snaplen bytes, so wire_len, not caplen, bounds what a header may claim). */
#include "frameparse.h"

#include <pcap/dlt.h>
#include <string.h>

const char *const cap_fp_kind_names[CAP_FP_NKINDS] = {
    [CAP_FP_OK] = "tcp-udp",
    [CAP_FP_NON_IP] = "non-ip",
    [CAP_FP_ARP] = "arp",
    [CAP_FP_ICMP] = "icmp",
    [CAP_FP_ICMPV6] = "icmpv6",
    [CAP_FP_OTHER_PROTO] = "other-ip-protocol",
    [CAP_FP_FRAGMENT] = "ip-fragment",
    [CAP_FP_SHORT] = "short-capture",
    [CAP_FP_MALFORMED] = "malformed",
};

#define ETHERTYPE_IPV4 0x0800
#define ETHERTYPE_ARP 0x0806
#define ETHERTYPE_IPV6 0x86dd
#define ETHERTYPE_VLAN 0x8100
#define ETHERTYPE_QINQ 0x88a8
#define ETHERTYPE_QINQ_OLD 0x9100
#define MAX_VLAN_TAGS 4
#define MAX_IPV6_EXT 8

static inline uint16_t rd16(const uint8_t *p) { return (uint16_t)((p[0] << 8) | p[1]); }
static inline uint32_t rd32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

int cap_fp_linktype_supported(int dlt)
{
    switch (dlt) {
    case DLT_EN10MB:
    case DLT_RAW:
    case DLT_IPV4:
    case DLT_IPV6:
    case DLT_LINUX_SLL:
    case DLT_LINUX_SLL2:
        return 1;
    default:
        return 0;
    }
}

/* The link header: sets *l2len and *ethertype (0 when the IP version decides, raw IP). */
static enum cap_fp_status parse_link(int dlt, const uint8_t *d, uint32_t caplen, uint32_t *l2len,
                                     uint16_t *ethertype)
{
    uint32_t off;
    uint16_t type;
    int tags;

    switch (dlt) {
    case DLT_EN10MB:
        if (caplen < 14)
            return CAP_FP_SHORT;
        type = rd16(d + 12);
        off = 14;
        for (tags = 0; (type == ETHERTYPE_VLAN || type == ETHERTYPE_QINQ || type == ETHERTYPE_QINQ_OLD)
                       && tags < MAX_VLAN_TAGS; tags++) {
            if (caplen < off + 4)
                return CAP_FP_SHORT;
            type = rd16(d + off + 2);
            off += 4;
        }
        if (type < 0x0600)  /* an 802.3 length field: LLC/SNAP, STP, ... */
            return CAP_FP_NON_IP;
        break;
    case DLT_LINUX_SLL:
        if (caplen < 16)
            return CAP_FP_SHORT;
        type = rd16(d + 14);
        off = 16;
        break;
    case DLT_LINUX_SLL2:
        if (caplen < 20)
            return CAP_FP_SHORT;
        type = rd16(d);
        off = 20;
        break;
    case DLT_RAW:
        type = 0;
        off = 0;
        break;
    case DLT_IPV4:
        type = ETHERTYPE_IPV4;
        off = 0;
        break;
    case DLT_IPV6:
        type = ETHERTYPE_IPV6;
        off = 0;
        break;
    default:
        return CAP_FP_NON_IP;
    }
    if (type == ETHERTYPE_ARP)
        return CAP_FP_ARP;
    if (type != 0 && type != ETHERTYPE_IPV4 && type != ETHERTYPE_IPV6)
        return CAP_FP_NON_IP;
    *l2len = off;
    *ethertype = type;
    return CAP_FP_OK;
}

static enum cap_fp_status classify_proto(uint8_t proto)
{
    if (proto == 6 || proto == 17)
        return CAP_FP_OK;
    if (proto == 1)
        return CAP_FP_ICMP;
    if (proto == 58)
        return CAP_FP_ICMPV6;
    return CAP_FP_OTHER_PROTO;
}

/* IPv4 header at ip (avail captured bytes, room wire bytes): sets *hlen, *ip_len, proto. */
static enum cap_fp_status parse_ipv4(const uint8_t *ip, uint32_t avail, uint32_t room, uint32_t *hlen,
                                     int64_t *ip_len, struct cap_fp_fields *out)
{
    uint32_t ihl, tot;
    uint16_t frag;

    if (avail < 20)
        return room < 20 ? CAP_FP_MALFORMED : CAP_FP_SHORT;
    ihl = (uint32_t)(ip[0] & 0x0f) * 4;
    if (ihl < 20)
        return CAP_FP_MALFORMED;
    tot = rd16(ip + 2);
    if (tot == 0) {
        /* TSO/GSO or BIG TCP super-packet: the length is the frame's. */
        tot = room;
    }
    if (tot < ihl || tot > room)
        return CAP_FP_MALFORMED;
    if (avail < ihl)
        return CAP_FP_SHORT;
    frag = rd16(ip + 6);
    out->proto = ip[9];
    out->family = 4;
    memcpy(out->src, ip + 12, 4);
    memcpy(out->dst, ip + 16, 4);
    *hlen = ihl;
    *ip_len = tot;
    if (frag & 0x3fff)  /* MF set or a non-zero offset */
        return CAP_FP_FRAGMENT;
    return classify_proto(out->proto);
}

/* IPv6 header and extension headers (hop-by-hop with a jumbo option, routing, destination
 * options, fragment). */
static enum cap_fp_status parse_ipv6(const uint8_t *ip, uint32_t avail, uint32_t room, uint32_t *hlen,
                                     int64_t *ip_len, struct cap_fp_fields *out)
{
    uint32_t off = 40, plen, jumbo = 0;
    uint8_t next;
    int n;

    if (avail < 40)
        return room < 40 ? CAP_FP_MALFORMED : CAP_FP_SHORT;
    plen = rd16(ip + 4);
    next = ip[6];
    out->family = 6;
    memcpy(out->src, ip + 8, 16);
    memcpy(out->dst, ip + 24, 16);
    for (n = 0; n < MAX_IPV6_EXT; n++) {
        uint32_t elen;
        if (next != 0 && next != 43 && next != 60 && next != 44)
            break;
        if (avail < off + 8)
            return room < off + 8 ? CAP_FP_MALFORMED : CAP_FP_SHORT;
        if (next == 44) {
            if (rd16(ip + off + 2) & 0xfff9)  /* offset or MF */
                return CAP_FP_FRAGMENT;
            /* an atomic fragment: the header goes on */
            next = ip[off];
            off += 8;
            continue;
        }
        elen = ((uint32_t)ip[off + 1] + 1) * 8;
        if (avail < off + elen)
            return room < off + elen ? CAP_FP_MALFORMED : CAP_FP_SHORT;
        if (next == 0) {
            /* hop-by-hop: look for the jumbo payload option (type 0xC2, length 4) */
            uint32_t o = off + 2;
            while (o + 2 <= off + elen) {
                uint8_t t = ip[o];
                if (t == 0) { o++; continue; }
                if (o + 2 + ip[o + 1] > off + elen)
                    return CAP_FP_MALFORMED;
                if (t == 0xc2 && ip[o + 1] == 4)
                    jumbo = rd32(ip + o + 2);
                o += 2u + ip[o + 1];
            }
        }
        next = ip[off];
        off += elen;
    }
    if (plen == 0)
        plen = jumbo ? jumbo : (room >= 40 ? room - 40 : 0);
    if ((uint64_t)plen + 40 > room || off > (uint64_t)plen + 40)
        return CAP_FP_MALFORMED;
    out->proto = next;
    *hlen = off;
    *ip_len = (int64_t)plen + 40;
    return classify_proto(next);
}

#define TCP_SYN 0x02
#define TCPOPT_EOL 0
#define TCPOPT_NOP 1
#define TCPOPT_WSCALE 3
#define TCP_MAX_WSCALE 14

/* The shift of the window-scale option among a SYN's options, or -1. A receiver takes a shift
 * above 14 as 14 (RFC 7323 section 2.3); a malformed option list ends the search. */
static int8_t syn_wscale(const uint8_t *opt, uint32_t len)
{
    uint32_t i = 0;
    while (i < len && opt[i] != TCPOPT_EOL) {
        if (opt[i] == TCPOPT_NOP) {
            i++;
            continue;
        }
        if (i + 1 >= len || opt[i + 1] < 2 || i + opt[i + 1] > len)
            return -1;
        if (opt[i] == TCPOPT_WSCALE && opt[i + 1] == 3)
            return (int8_t)(opt[i + 2] > TCP_MAX_WSCALE ? TCP_MAX_WSCALE : opt[i + 2]);
        i += opt[i + 1];
    }
    return -1;
}

enum cap_fp_status cap_fp_parse(int dlt, const uint8_t *data, uint32_t caplen, uint32_t wire_len,
                        struct cap_fp_fields *out)
{
    uint32_t l2len = 0, hlen = 0, avail, room;
    uint16_t ethertype = 0;
    int64_t ip_len = 0, l4room;
    const uint8_t *ip, *l4;
    enum cap_fp_status st;
    int version;

    if (caplen > wire_len)
        return CAP_FP_MALFORMED;
    st = parse_link(dlt, data, caplen, &l2len, &ethertype);
    if (st != CAP_FP_OK)
        return st;
    if (wire_len < l2len + 1)
        return CAP_FP_MALFORMED;
    if (caplen < l2len + 1)
        return CAP_FP_SHORT;
    ip = data + l2len;
    avail = caplen - l2len;
    room = wire_len - l2len;
    version = ip[0] >> 4;
    if (ethertype == 0) {
        if (version != 4 && version != 6)
            return CAP_FP_MALFORMED;
    } else if ((ethertype == ETHERTYPE_IPV4 && version != 4) || (ethertype == ETHERTYPE_IPV6 && version != 6)) {
        return CAP_FP_MALFORMED;
    }
    if (version == 4)
        st = parse_ipv4(ip, avail, room, &hlen, &ip_len, out);
    else
        st = parse_ipv6(ip, avail, room, &hlen, &ip_len, out);
    if (st != CAP_FP_OK)
        return st;

    out->ip_len = ip_len;
    l4room = ip_len - hlen;
    l4 = ip + hlen;
    if (out->proto == 6) {
        uint32_t thl;
        if (l4room < 20)
            return CAP_FP_MALFORMED;
        if (avail < hlen + 20)
            return CAP_FP_SHORT;
        thl = (uint32_t)(l4[12] >> 4) * 4;
        if (thl < 20 || thl > l4room)
            return CAP_FP_MALFORMED;
        out->sport = rd16(l4);
        out->dport = rd16(l4 + 2);
        out->seq = rd32(l4 + 4);
        out->ack = rd32(l4 + 8);
        out->flags = l4[13];
        out->window = rd16(l4 + 14);
        out->wscale = (out->flags & TCP_SYN) && avail >= hlen + thl ? syn_wscale(l4 + 20, thl - 20) : -1;
        out->payload_len = l4room - thl;
    } else {
        if (l4room < 8)
            return CAP_FP_MALFORMED;
        if (avail < hlen + 8)
            return CAP_FP_SHORT;
        out->sport = rd16(l4);
        out->dport = rd16(l4 + 2);
        out->seq = out->ack = 0;
        out->flags = 0;
        out->window = 0;
        out->wscale = -1;
        out->payload_len = l4room - 8;
    }
    return CAP_FP_OK;
}
