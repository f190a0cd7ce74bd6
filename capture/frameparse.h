/* Decoding of one captured frame into the wire-timeline fields: link layer (Ethernet with VLAN
 * tags, raw IP, Linux cooked v1/v2), IPv4/IPv6 and the TCP/UDP header. No allocation, no I/O. */
#ifndef CAP_FRAMEPARSE_H
#define CAP_FRAMEPARSE_H
#include <stdint.h>

/* Why a frame is not in the table. CAP_FP_OK: it is (TCP or UDP over IP). */
enum cap_fp_status {
    CAP_FP_OK = 0,
    CAP_FP_NON_IP,          /* a link-layer protocol other than IP and ARP (LLC, LLDP, ...) */
    CAP_FP_ARP,
    CAP_FP_ICMP,
    CAP_FP_ICMPV6,
    CAP_FP_OTHER_PROTO,     /* IP, but neither TCP nor UDP (ESP, GRE, OSPF, ...) */
    CAP_FP_FRAGMENT,        /* an IP fragment: the transport header is not (all) there */
    CAP_FP_SHORT,           /* cut by the snap length before the headers we need */
    CAP_FP_MALFORMED,       /* headers that contradict each other or the frame's length */
    CAP_FP_NKINDS
};

/* Kind names as they appear in columns.json ("skipped") and in Python's df.attrs. */
extern const char *const cap_fp_kind_names[CAP_FP_NKINDS];

struct cap_fp_fields {
    int64_t ip_len;       /* real IP length (header + payload), also for super-packets */
    int64_t payload_len;  /* transport payload bytes */
    uint8_t proto;        /* 6 TCP, 17 UDP */
    uint8_t family;       /* 4 or 6 */
    uint8_t src[16], dst[16];  /* IPv4 in the first 4 bytes */
    uint16_t sport, dport;
    uint32_t seq, ack;
    uint8_t flags;
    uint16_t window;
    int8_t wscale;        /* window-scale shift a SYN offers (RFC 7323, at most 14); -1: none, not
                             a SYN, or its options not captured */
};

/* Link types we decode (values of pcap_datalink(), i.e. DLT_*). */
int cap_fp_linktype_supported(int dlt);

/* Decode a frame of link type dlt: caplen bytes captured of a frame wire_len bytes long. */
enum cap_fp_status cap_fp_parse(int dlt, const uint8_t *data, uint32_t caplen, uint32_t wire_len,
                        struct cap_fp_fields *out);
#endif
