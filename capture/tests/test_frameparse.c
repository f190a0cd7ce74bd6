/* Unit tests of the frame decoder and the address dictionary on hand-built frames. */
#include <pcap/dlt.h>
#include <string.h>

#include "../addrdict.h"
#include "../frameparse.h"
#include "hwtest.h"

static uint8_t frame[2048];

/* Ethernet + IPv4 + TCP with payload `pay`; returns the frame length. */
static uint32_t eth_ipv4_tcp(int vlan, uint16_t tot_override, int pay)
{
    uint8_t *p = frame;
    memset(frame, 0, sizeof(frame));
    p += 12;
    if (vlan) {
        p[0] = 0x81; p[1] = 0x00; p[2] = 0x00; p[3] = 0x05;
        p += 4;
    }
    p[0] = 0x08; p[1] = 0x00;
    p += 2;
    uint16_t tot = tot_override ? tot_override : (uint16_t)(20 + 32 + pay);
    p[0] = 0x45; p[2] = (uint8_t)(tot >> 8); p[3] = (uint8_t)tot; p[6] = 0x40; p[8] = 64; p[9] = 6;
    p[12] = 198; p[13] = 18; p[14] = 0; p[15] = 1;
    p[16] = 198; p[17] = 18; p[18] = 0; p[19] = 2;
    p += 20;
    p[0] = 0x9c; p[1] = 0x40;             /* sport 40000 */
    p[2] = 0x13; p[3] = 0x89;             /* dport 5001 */
    p[4] = 0xde; p[5] = 0xad; p[6] = 0xbe; p[7] = 0xef;  /* seq */
    p[8] = 0; p[9] = 0; p[10] = 1; p[11] = 0;            /* ack 256 */
    p[12] = 0x80; p[13] = 0x18;           /* data offset 8 words, PSH|ACK */
    p[14] = 0x01; p[15] = 0xf5;           /* window 501 */
    return (uint32_t)(p - frame) + 32 + (uint32_t)pay;
}

static void test_ipv4_tcp(void)
{
    struct cap_fp_fields f;
    uint32_t len = eth_ipv4_tcp(0, 0, 1448);
    CHECK_EQ_LL(cap_fp_parse(DLT_EN10MB, frame, len, len, &f), CAP_FP_OK);
    CHECK_EQ_LL(f.ip_len, 1500);
    CHECK_EQ_LL(f.payload_len, 1448);
    CHECK_EQ_LL(f.sport, 40000);
    CHECK_EQ_LL(f.dport, 5001);
    CHECK_EQ_LL(f.seq, 0xdeadbeefu);
    CHECK_EQ_LL(f.ack, 256);
    CHECK_EQ_LL(f.flags, 0x18);
    CHECK_EQ_LL(f.window, 501);
    CHECK_EQ_LL(f.family, 4);
    CHECK_EQ_LL(f.src[3], 1);
    /* headers only (snap length 128): same fields */
    CHECK_EQ_LL(cap_fp_parse(DLT_EN10MB, frame, 128, len, &f), CAP_FP_OK);
    CHECK_EQ_LL(f.payload_len, 1448);
    /* cut inside the TCP header */
    CHECK_EQ_LL(cap_fp_parse(DLT_EN10MB, frame, 14 + 20 + 10, len, &f), CAP_FP_SHORT);
    /* caplen over wire_len */
    CHECK_EQ_LL(cap_fp_parse(DLT_EN10MB, frame, len, len - 1, &f), CAP_FP_MALFORMED);
}

/* A SYN's TCP options (12 bytes after the 20-byte header of eth_ipv4_tcp's frame) */
static uint32_t syn_with_options(const uint8_t opts[12])
{
    uint32_t len = eth_ipv4_tcp(0, 0, 0);
    frame[14 + 20 + 13] = 0x02;  /* SYN */
    memcpy(frame + 14 + 20 + 20, opts, 12);
    return len;
}

static void test_syn_window_scale(void)
{
    struct cap_fp_fields f;
    uint32_t len = eth_ipv4_tcp(0, 0, 100);
    CHECK_EQ_LL(cap_fp_parse(DLT_EN10MB, frame, len, len, &f), CAP_FP_OK);
    CHECK_EQ_LL(f.wscale, -1);  /* not a SYN */
    /* MSS 1460, NOP, WS 7, SACK permitted, EOL: what Linux sends, less the timestamps */
    const uint8_t linux_like[12] = {2, 4, 0x05, 0xb4, 1, 3, 3, 7, 4, 2, 0, 0};
    len = syn_with_options(linux_like);
    CHECK_EQ_LL(cap_fp_parse(DLT_EN10MB, frame, len, len, &f), CAP_FP_OK);
    CHECK_EQ_LL(f.wscale, 7);
    CHECK_EQ_LL(f.flags, 0x02);
    /* options cut by the snap length: the frame is kept, the scale is unknown */
    CHECK_EQ_LL(cap_fp_parse(DLT_EN10MB, frame, 14 + 20 + 26, len, &f), CAP_FP_OK);
    CHECK_EQ_LL(f.wscale, -1);
    /* a shift above 14 counts as 14 */
    const uint8_t too_big[12] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 15};
    len = syn_with_options(too_big);
    CHECK_EQ_LL(cap_fp_parse(DLT_EN10MB, frame, len, len, &f), CAP_FP_OK);
    CHECK_EQ_LL(f.wscale, 14);
    /* WS 0 is a scale (no shift), not its absence */
    const uint8_t zero[12] = {3, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    len = syn_with_options(zero);
    CHECK_EQ_LL(cap_fp_parse(DLT_EN10MB, frame, len, len, &f), CAP_FP_OK);
    CHECK_EQ_LL(f.wscale, 0);
    /* a zero option length ends the search; so does EOL before the option */
    const uint8_t bad_len[12] = {2, 0, 3, 3, 5, 0, 0, 0, 0, 0, 0, 0};
    len = syn_with_options(bad_len);
    CHECK_EQ_LL(cap_fp_parse(DLT_EN10MB, frame, len, len, &f), CAP_FP_OK);
    CHECK_EQ_LL(f.wscale, -1);
    const uint8_t after_eol[12] = {0, 3, 3, 5, 0, 0, 0, 0, 0, 0, 0, 0};
    len = syn_with_options(after_eol);
    CHECK_EQ_LL(cap_fp_parse(DLT_EN10MB, frame, len, len, &f), CAP_FP_OK);
    CHECK_EQ_LL(f.wscale, -1);
    /* an option running past the header */
    const uint8_t overrun[12] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 3, 3};
    len = syn_with_options(overrun);
    CHECK_EQ_LL(cap_fp_parse(DLT_EN10MB, frame, len, len, &f), CAP_FP_OK);
    CHECK_EQ_LL(f.wscale, -1);
}

static void test_vlan_and_superpacket(void)
{
    struct cap_fp_fields f;
    uint32_t len = eth_ipv4_tcp(1, 0, 100);
    CHECK_EQ_LL(cap_fp_parse(DLT_EN10MB, frame, len, len, &f), CAP_FP_OK);
    CHECK_EQ_LL(f.ip_len, 152);
    CHECK_EQ_LL(f.payload_len, 100);
    /* BIG TCP: IP total length 0, the frame is 80066 bytes long, 128 captured */
    eth_ipv4_tcp(0, 0, 0);
    frame[16] = 0; frame[17] = 0;
    CHECK_EQ_LL(cap_fp_parse(DLT_EN10MB, frame, 128, 80066, &f), CAP_FP_OK);
    CHECK_EQ_LL(f.ip_len, 80052);
    CHECK_EQ_LL(f.payload_len, 80052 - 52);
    /* IP length longer than the frame */
    eth_ipv4_tcp(0, 3000, 0);
    CHECK_EQ_LL(cap_fp_parse(DLT_EN10MB, frame, 128, 1514, &f), CAP_FP_MALFORMED);
    /* IHL below 5 */
    len = eth_ipv4_tcp(0, 0, 10);
    frame[14] = 0x44;
    CHECK_EQ_LL(cap_fp_parse(DLT_EN10MB, frame, len, len, &f), CAP_FP_MALFORMED);
    /* a fragment */
    len = eth_ipv4_tcp(0, 0, 10);
    frame[14 + 6] = 0x20;  /* MF */
    CHECK_EQ_LL(cap_fp_parse(DLT_EN10MB, frame, len, len, &f), CAP_FP_FRAGMENT);
}

static void test_other_kinds(void)
{
    struct cap_fp_fields f;
    uint32_t len = eth_ipv4_tcp(0, 0, 10);
    frame[12] = 0x08; frame[13] = 0x06;
    CHECK_EQ_LL(cap_fp_parse(DLT_EN10MB, frame, len, len, &f), CAP_FP_ARP);
    frame[12] = 0x00; frame[13] = 0x26;  /* 802.3 length */
    CHECK_EQ_LL(cap_fp_parse(DLT_EN10MB, frame, len, len, &f), CAP_FP_NON_IP);
    len = eth_ipv4_tcp(0, 0, 10);
    frame[14 + 9] = 1;
    CHECK_EQ_LL(cap_fp_parse(DLT_EN10MB, frame, len, len, &f), CAP_FP_ICMP);
    frame[14 + 9] = 47;
    CHECK_EQ_LL(cap_fp_parse(DLT_EN10MB, frame, len, len, &f), CAP_FP_OTHER_PROTO);
    /* IPv6 ethertype with an IPv4 header */
    len = eth_ipv4_tcp(0, 0, 10);
    frame[12] = 0x86; frame[13] = 0xdd;
    CHECK_EQ_LL(cap_fp_parse(DLT_EN10MB, frame, len, len, &f), CAP_FP_MALFORMED);
    CHECK_EQ_LL(cap_fp_parse(DLT_EN10MB, frame, 10, 60, &f), CAP_FP_SHORT);
}

static void test_ipv6_udp_raw_and_sll(void)
{
    struct cap_fp_fields f;
    uint8_t *ip;
    memset(frame, 0, sizeof(frame));
    ip = frame + 20;  /* SLL2 header first */
    frame[0] = 0x86; frame[1] = 0xdd;
    ip[0] = 0x60; ip[4] = 0; ip[5] = 8 + 8 + 29; ip[6] = 0;  /* hop-by-hop first */
    ip[8] = 0x20; ip[9] = 0x01; ip[23] = 1;
    ip[24] = 0x26; ip[25] = 0x20; ip[39] = 9;
    ip[40] = 17; ip[41] = 0;  /* HBH: next UDP, 8 bytes */
    ip[42] = 1; ip[43] = 4;   /* PadN */
    uint8_t *u = ip + 48;
    u[0] = 0x30; u[1] = 0x39; u[2] = 0; u[3] = 53; u[4] = 0; u[5] = 37;
    uint32_t len = 20 + 40 + 8 + 8 + 29;
    CHECK_EQ_LL(cap_fp_parse(DLT_LINUX_SLL2, frame, len, len, &f), CAP_FP_OK);
    CHECK_EQ_LL(f.family, 6);
    CHECK_EQ_LL(f.proto, 17);
    CHECK_EQ_LL(f.ip_len, 40 + 8 + 8 + 29);
    CHECK_EQ_LL(f.payload_len, 29);
    CHECK_EQ_LL(f.sport, 12345);
    CHECK_EQ_LL(f.dport, 53);
    /* the same packet as raw IP */
    CHECK_EQ_LL(cap_fp_parse(DLT_RAW, ip, len - 20, len - 20, &f), CAP_FP_OK);
    CHECK_EQ_LL(f.payload_len, 29);
    /* raw IP with version 0 */
    ip[0] = 0x00;
    CHECK_EQ_LL(cap_fp_parse(DLT_RAW, ip, len - 20, len - 20, &f), CAP_FP_MALFORMED);
    ip[0] = 0x60;
    /* IPv6 jumbo: payload length 0 and a jumbo option of 70000 */
    ip[4] = 0; ip[5] = 0;
    ip[40] = 6; ip[42] = 0xc2; ip[43] = 4; ip[44] = 0; ip[45] = 1; ip[46] = 0x11; ip[47] = 0x70;
    u[12] = 0x50;
    CHECK_EQ_LL(cap_fp_parse(DLT_RAW, ip, 128, 40 + 70000, &f), CAP_FP_OK);
    CHECK_EQ_LL(f.ip_len, 40 + 70000);
    CHECK_EQ_LL(f.payload_len, 70000 - 8 - 20);
    /* cooked v1: protocol at offset 14 */
    memset(frame, 0, 16);
    frame[14] = 0x86; frame[15] = 0xdd;
    memmove(frame + 16, ip, 40 + 8 + 40);
    CHECK_EQ_LL(cap_fp_parse(DLT_LINUX_SLL, frame, 128, 16 + 40 + 70000, &f), CAP_FP_OK);
    CHECK_EQ_LL(f.ip_len, 40 + 70000);
    CHECK(!cap_fp_linktype_supported(DLT_C_HDLC));
}

static void test_addrdict(void)
{
    struct cap_addrdict *d = cap_addrdict_new();
    uint8_t a[16] = {198, 18, 0, 1}, b[16] = {0x20, 0x01, 0x0d, 0xb8};
    b[15] = 1;
    CHECK_EQ_LL(cap_addrdict_code(d, 4, a), 0);
    CHECK_EQ_LL(cap_addrdict_code(d, 6, b), 1);
    CHECK_EQ_LL(cap_addrdict_code(d, 4, a), 0);
    for (int i = 0; i < 1000; i++) {
        uint8_t c[4] = {10, 0, (uint8_t)(i >> 8), (uint8_t)i};
        CHECK(cap_addrdict_code(d, 4, c) == i + 2);
    }
    CHECK_EQ_LL(cap_addrdict_code(d, 6, b), 1);
    CHECK_EQ_LL(cap_addrdict_size(d), 1002);
    CHECK(strcmp(cap_addrdict_text(d, 0), "198.18.0.1") == 0);
    CHECK(strcmp(cap_addrdict_text(d, 1), "2001:db8::1") == 0);
    cap_addrdict_free(d);
}

HW_TEST_MAIN(
    test_ipv4_tcp();
    test_syn_window_scale();
    test_vlan_and_superpacket();
    test_other_kinds();
    test_ipv6_udp_raw_and_sll();
    test_addrdict();
)
