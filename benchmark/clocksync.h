/* NTP-style clock exchange over UDP: t1 (main sends), t2 (receiver receives), t3 (receiver
 * sends), t4 (main receives). The offset of the receiver's clock is estimated from the sample
 * with the smallest round trip: offset = ((t2 - t1) + (t3 - t4)) / 2. */
#ifndef HB_CLOCKSYNC_H
#define HB_CLOCKSYNC_H
#include <stdint.h>
#include <sys/socket.h>

#define HB_SYNC_SPACING_NS 5000000 /* 5 ms between exchanges */

struct hb_sync_sample { uint32_t seq; int64_t t1, t2, t3, t4; };

struct hb_sync_estimate {
    int64_t offset_ns;  /* receiver clock minus sender clock */
    int64_t rtt_ns;     /* round trip of the sample used */
    int64_t t_ns;       /* sender-clock midpoint of that sample */
    int samples;
};

/* Main side: `count` exchanges on a connected UDP socket; waits up to 500 ms for each reply and
 * skips lost ones. Returns the number of samples stored, or -errno. */
int hb_sync_run(int udp_fd, uint32_t first_seq, int count, struct hb_sync_sample *out);
/* Receiver side: answers one request on udp_fd (blocking). 0 ok, -errno on failure. */
int hb_sync_serve_one(int udp_fd);
/* The minimum-RTT estimate; samples must be > 0. */
struct hb_sync_estimate hb_sync_estimate(const struct hb_sync_sample *s, int n);
#endif
