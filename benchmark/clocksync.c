#include "clocksync.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "hwclock.h"
#include "wire.h"

/* One exchange; 1 when a sample was stored in *out, 0 when its reply was lost (500 ms), -errno. */
static int sync_exchange(int udp_fd, uint32_t seq, struct hb_sync_sample *out)
{
    uint8_t buf[HB_SYNC_REPLY_LEN];
    struct hb_sync_msg req = {.magic = HB_MAGIC_SYNC, .seq = seq};
    req.t1 = hw_mono_ns();
    hb_pack_sync(buf, &req, HB_SYNC_REQ_LEN);
    if (send(udp_fd, buf, HB_SYNC_REQ_LEN, 0) != HB_SYNC_REQ_LEN)
        return -errno;
    int64_t deadline = req.t1 + 500000000LL;
    for (;;) {
        int64_t left_ms = (deadline - hw_mono_ns()) / 1000000;
        if (left_ms <= 0)
            return 0;
        struct pollfd pfd = {.fd = udp_fd, .events = POLLIN};
        int rc = poll(&pfd, 1, (int)left_ms);
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc <= 0)
            return 0;
        ssize_t n = recv(udp_fd, buf, sizeof(buf), 0);
        int64_t t4 = hw_mono_ns();
        struct hb_sync_msg reply;
        if (n < 0 || hb_unpack_sync(buf, (size_t)n, &reply) != 0 || n != HB_SYNC_REPLY_LEN)
            continue;
        if (reply.seq != req.seq)
            continue; /* a late answer to an earlier request */
        *out = (struct hb_sync_sample){reply.seq, reply.t1, reply.t2, reply.t3, t4};
        return 1;
    }
}

static void sync_spacing(void)
{
    /* Spread the exchanges over time: on a busy host a receiver kept off its CPU delays a burst
     * of back-to-back samples alike, while one of several spaced ones gets through. */
    struct timespec gap = {.tv_sec = 0, .tv_nsec = HB_SYNC_SPACING_NS};
    nanosleep(&gap, NULL);
}

int hb_sync_run(int udp_fd, uint32_t first_seq, int count, struct hb_sync_sample *out)
{
    int stored = 0;
    for (int i = 0; i < count; i++) {
        if (i > 0)
            sync_spacing();
        int rc = sync_exchange(udp_fd, first_seq + (uint32_t)i, &out[stored]);
        if (rc < 0)
            return rc;
        stored += rc;
    }
    return stored;
}

int hb_sync_run_quiet(int udp_fd, uint32_t first_seq, int count, int max, int64_t quiet_rtt_ns, int64_t wait_ns,
                      struct hb_sync_sample *out, int *quiet)
{
    int stored = 0;
    int64_t best = INT64_MAX, give_up = hw_mono_ns() + wait_ns;
    *quiet = 0;
    for (int i = 0; i < max; i++) {
        if (i >= count && (best <= quiet_rtt_ns || hw_mono_ns() >= give_up))
            break;
        if (i > 0)
            sync_spacing();
        int rc = sync_exchange(udp_fd, first_seq + (uint32_t)i, &out[stored]);
        if (rc < 0)
            return rc;
        if (rc == 1) {
            const struct hb_sync_sample *s = &out[stored++];
            int64_t rtt = (s->t4 - s->t1) - (s->t3 - s->t2);
            if (rtt < best)
                best = rtt;
        }
    }
    *quiet = best <= quiet_rtt_ns;
    return stored;
}

int hb_sync_serve_one(int udp_fd)
{
    uint8_t buf[HB_SYNC_REPLY_LEN];
    struct sockaddr_storage peer;
    socklen_t peer_len = sizeof(peer);
    ssize_t n = recvfrom(udp_fd, buf, sizeof(buf), 0, (struct sockaddr *)&peer, &peer_len);
    int64_t t2 = hw_mono_ns();
    if (n < 0)
        return -errno;
    struct hb_sync_msg msg;
    if (hb_unpack_sync(buf, (size_t)n, &msg) != 0 || n != HB_SYNC_REQ_LEN)
        return 0; /* not ours: ignore */
    msg.t2 = t2;
    msg.t3 = hw_mono_ns();
    hb_pack_sync(buf, &msg, HB_SYNC_REPLY_LEN);
    if (sendto(udp_fd, buf, HB_SYNC_REPLY_LEN, 0, (struct sockaddr *)&peer, peer_len) < 0)
        return -errno;
    return 0;
}

struct hb_sync_estimate hb_sync_estimate(const struct hb_sync_sample *s, int n)
{
    struct hb_sync_estimate best = {0, INT64_MAX, 0, n};
    for (int i = 0; i < n; i++) {
        int64_t rtt = (s[i].t4 - s[i].t1) - (s[i].t3 - s[i].t2);
        if (rtt < best.rtt_ns) {
            best.rtt_ns = rtt;
            best.offset_ns = ((s[i].t2 - s[i].t1) + (s[i].t3 - s[i].t4)) / 2;
            best.t_ns = s[i].t1 + (s[i].t4 - s[i].t1) / 2;
        }
    }
    if (n == 0)
        best.rtt_ns = -1;
    return best;
}
