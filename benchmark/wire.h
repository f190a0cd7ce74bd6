/* Messages between hw-bench main, its sending processes and the remote receiver. Every field is
 * in network byte order on the wire, so sender and receiver hosts may differ in byte order. */
#ifndef HB_WIRE_H
#define HB_WIRE_H
#include <stddef.h>
#include <stdint.h>

#define HB_MAGIC_PORTS 0x48575250u  /* "HWRP": receiver reports its ports to main */
#define HB_MAGIC_HELLO 0x4857484cu  /* "HWHL": first bytes of every TCP connection */
#define HB_MAGIC_SYNC 0x48575359u   /* "HWSY": clock-sync datagrams */
#define HB_WIRE_VERSION 1

enum hb_conn_kind { HB_CONN_CONTROL = 1, HB_CONN_DATA = 2 };

struct hb_ports_msg { uint32_t magic; uint16_t version; uint16_t tcp_port; uint16_t udp_port; };
#define HB_PORTS_LEN 10

struct hb_hello_msg { uint32_t magic; uint16_t kind; uint16_t index; uint32_t pid; };
#define HB_HELLO_LEN 12

/* Control messages from main: 'W' (offset and logging window, in the sender's clock), 'S' (stop). */
#define HB_CTL_WINDOW 'W'
#define HB_CTL_STOP 'S'
struct hb_window_msg { int64_t offset_ns; int64_t window_start_ns; int64_t window_end_ns; };
#define HB_WINDOW_LEN 25 /* type byte + 3 x int64 */

struct hb_sync_msg { uint32_t magic; uint32_t seq; int64_t t1; int64_t t2; int64_t t3; };
#define HB_SYNC_REQ_LEN 16
#define HB_SYNC_REPLY_LEN 32

/* One receiving process's totals, sent back to main when it stops the receiver. */
struct hb_recv_summary {
    uint16_t index;
    uint32_t pid;
    int32_t exit_status;
    int64_t bytes_total;
    int64_t bytes_window;
    int64_t lf_count;
    int64_t events;
    int64_t overflow;
};
#define HB_SUMMARY_LEN 50

void hb_pack_ports(uint8_t *buf, const struct hb_ports_msg *m);
int hb_unpack_ports(const uint8_t *buf, struct hb_ports_msg *m);
void hb_pack_hello(uint8_t *buf, const struct hb_hello_msg *m);
int hb_unpack_hello(const uint8_t *buf, struct hb_hello_msg *m);
void hb_pack_window(uint8_t *buf, const struct hb_window_msg *m);
void hb_unpack_window(const uint8_t *buf, struct hb_window_msg *m);
void hb_pack_sync(uint8_t *buf, const struct hb_sync_msg *m, size_t len);
int hb_unpack_sync(const uint8_t *buf, size_t len, struct hb_sync_msg *m);
void hb_pack_summary(uint8_t *buf, const struct hb_recv_summary *s);
void hb_unpack_summary(const uint8_t *buf, struct hb_recv_summary *s);
#endif
