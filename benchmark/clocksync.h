/* NTP-style clock exchange over UDP: t1 (main sends), t2 (receiver receives), t3 (receiver
 * sends), t4 (main receives). The offset of the receiver's clock is estimated from the sample
 * with the smallest round trip: offset = ((t2 - t1) + (t3 - t4)) / 2. */
#ifndef HB_CLOCKSYNC_H
#define HB_CLOCKSYNC_H
#include <stdint.h>
#include <sys/socket.h>

#define HB_SYNC_SPACING_NS 5000000 /* 5 ms between exchanges */
/* The end exchange counts as quiet with a round trip of at most twice the start's plus 100 us
 * (the rule the analysis uses to trust it for the drift), and waits up to 5 s for that. */
#define HB_SYNC_QUIET_FACTOR 2
#define HB_SYNC_QUIET_SLACK_NS 100000LL
#define HB_SYNC_QUIET_WAIT_NS 5000000000LL

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
/* Main side after the run: at least `count` and at most `max` exchanges, going on until one has
 * a round trip of at most quiet_rtt_ns or wait_ns have passed. The senders' last bytes may
 * still queue on the link when they end, and an exchange queued behind them on one way only
 * measures half the queue as clock offset; its round trip shows it. *quiet tells whether an
 * exchange came through that fast. Returns the samples stored, or -errno. */
int hb_sync_run_quiet(int udp_fd, uint32_t first_seq, int count, int max, int64_t quiet_rtt_ns, int64_t wait_ns,
                      struct hb_sync_sample *out, int *quiet);
/* Receiver side: answers one request on udp_fd (blocking). 0 ok, -errno on failure. */
int hb_sync_serve_one(int udp_fd);
/* The minimum-RTT estimate; samples must be > 0. */
struct hb_sync_estimate hb_sync_estimate(const struct hb_sync_sample *s, int n);
#endif
