/* udpblast: paced UDP datagrams for the capture-rate benchmark (compiled at bench time).
 * udpblast ADDR PORT RATE_PPS SECONDS PAYLOAD -> prints the datagrams sent. RATE 0: unpaced. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define BATCH 32

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: udpblast ADDR PORT RATE_PPS SECONDS PAYLOAD\n");
        return 2;
    }
    struct sockaddr_in dst = {.sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(argv[2]))};
    inet_pton(AF_INET, argv[1], &dst.sin_addr);
    double rate = atof(argv[3]), secs = atof(argv[4]);
    int payload = atoi(argv[5]);
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    if (s < 0 || connect(s, (struct sockaddr *)&dst, sizeof(dst)) < 0) {
        perror("udpblast: socket");
        return 1;
    }
    static char buf[1500];
    struct mmsghdr msgs[BATCH];
    struct iovec iov[BATCH];
    memset(msgs, 0, sizeof(msgs));
    for (int i = 0; i < BATCH; i++) {
        iov[i].iov_base = buf;
        iov[i].iov_len = (size_t)payload;
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
    }
    long long start = now_ns(), end = start + (long long)(secs * 1e9), sent = 0;
    for (;;) {
        long long t = now_ns();
        if (t >= end)
            break;
        if (rate > 0) {
            long long due = start + (long long)((double)(sent + BATCH) * 1e9 / rate);
            if (due > t) {
                struct timespec ts = {.tv_sec = due / 1000000000LL, .tv_nsec = due % 1000000000LL};
                clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
            }
        }
        int n = sendmmsg(s, msgs, BATCH, 0);
        if (n > 0)
            sent += n;
    }
    printf("%lld\n", sent);
    return 0;
}
