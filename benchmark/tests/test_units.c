/* Unit tests of hw-bench's library parts: wire encoding, sieve, clock estimate, event-log
 * overflow (value parsing is common/'s: common/tests/test_common.c). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../bench.h"
#include "../clocksync.h"
#include "../evlog.h"
#include "../sieve.h"
#include "../wire.h"
#include "hwtest.h"

static void test_wire_byte_order(void)
{
    uint8_t buf[HB_SUMMARY_LEN];
    struct hb_ports_msg ports = {HB_MAGIC_PORTS, HB_WIRE_VERSION, 0x1234, 0xabcd}, back;
    hb_pack_ports(buf, &ports);
    const uint8_t want[HB_PORTS_LEN] = {'H', 'W', 'R', 'P', 0, 1, 0x12, 0x34, 0xab, 0xcd};
    CHECK(memcmp(buf, want, sizeof(want)) == 0);
    CHECK(hb_unpack_ports(buf, &back) == 0 && back.tcp_port == 0x1234 && back.udp_port == 0xabcd);
    buf[0] = 'X';
    CHECK(hb_unpack_ports(buf, &back) != 0);

    struct hb_window_msg w = {-5, 0x0102030405060708LL, 42}, w2;
    hb_pack_window(buf, &w);
    CHECK(buf[0] == 'W' && buf[1] == 0xff && buf[8] == 0xfb);
    CHECK(buf[9] == 0x01 && buf[16] == 0x08);
    hb_unpack_window(buf, &w2);
    CHECK(w2.offset_ns == -5 && w2.window_start_ns == w.window_start_ns && w2.window_end_ns == 42);

    struct hb_recv_summary s = {7, 99, -1, 1LL << 40, 5, 0, 3, 2}, s2;
    hb_pack_summary(buf, &s);
    hb_unpack_summary(buf, &s2);
    CHECK(s2.index == 7 && s2.pid == 99 && s2.exit_status == -1 && s2.bytes_total == (1LL << 40));
    CHECK(s2.bytes_window == 5 && s2.events == 3 && s2.overflow == 2);

    struct hb_hello_msg h = {HB_MAGIC_HELLO, 3, 1, 1}, h2;
    hb_pack_hello(buf, &h);
    CHECK(hb_unpack_hello(buf, &h2) != 0); /* kind 3 is not a connection kind */

    struct hb_sync_msg m = {HB_MAGIC_SYNC, 9, 100, 200, 300}, m2;
    hb_pack_sync(buf, &m, HB_SYNC_REPLY_LEN);
    CHECK(hb_unpack_sync(buf, HB_SYNC_REPLY_LEN, &m2) == 0 && m2.seq == 9 && m2.t3 == 300);
    CHECK(hb_unpack_sync(buf, 20, &m2) != 0);
}

static int is_prime_by_division(uint64_t n)
{
    if (n < 2)
        return 0;
    for (uint64_t d = 2; d * d <= n; d++)
        if (n % d == 0)
            return 0;
    return 1;
}

static void test_sieve(void)
{
    uint8_t *buf = malloc(1 << 16);
    for (int log2 = 1; log2 <= 16; log2++) {
        int64_t count = 0, largest = 0;
        for (uint64_t n = 0; n < (1u << log2); n++)
            if (is_prime_by_division(n)) {
                count++;
                largest = (int64_t)n;
            }
        struct hb_sieve_result want = hb_sieve_expected(log2);
        CHECK_EQ_LL(want.primes, count);
        CHECK_EQ_LL(want.largest, largest);
        for (int copy = 0; copy < HB_SIEVE_COPIES; copy += 7) {
            struct hb_sieve_result got = hb_sieve_round(copy, buf, log2);
            CHECK_EQ_LL(got.primes, count);
            CHECK_EQ_LL(got.largest, largest);
        }
    }
    CHECK(hb_sieve_expected(0).primes == -1 && hb_sieve_expected(31).primes == -1);
    free(buf);
}

static void test_clock_estimate(void)
{
    /* Receiver 1000 ns ahead; the second sample has the shortest round trip and symmetric delays. */
    struct hb_sync_sample s[3] = {
        {0, 0, 1500, 1600, 900},   /* rtt 800, asymmetric */
        {1, 2000, 3100, 3150, 2250}, /* rtt 200: offset ((1100) + (900)) / 2 = 1000 */
        {2, 4000, 5900, 5950, 4900}, /* rtt 850 */
    };
    struct hb_sync_estimate e = hb_sync_estimate(s, 3);
    CHECK_EQ_LL(e.rtt_ns, 200);
    CHECK_EQ_LL(e.offset_ns, 1000);
    CHECK_EQ_LL(e.t_ns, 2125);
}

/* A peer whose first `slow` requests wait delay_ms in its socket before it answers: one way of
 * the path queued, as when the senders' last bytes still fill the link after the run. */
static pid_t start_sync_peer(int *client_fd, int slow, int delay_ms)
{
    int server = socket(AF_INET, SOCK_DGRAM, 0), client = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(addr);
    if (server < 0 || client < 0 || bind(server, (struct sockaddr *)&addr, sizeof(addr)) != 0 ||
        getsockname(server, (struct sockaddr *)&addr, &len) != 0 ||
        connect(client, (struct sockaddr *)&addr, sizeof(addr)) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        for (int i = 0;; i++) {
            if (i < slow || slow < 0)
                usleep((useconds_t)delay_ms * 1000);
            if (hb_sync_serve_one(server) != 0)
                _exit(1);
        }
    }
    close(server);
    *client_fd = client;
    return pid;
}

static void stop_sync_peer(pid_t pid, int client_fd)
{
    close(client_fd);
    if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
}

static void test_end_exchange_waits_for_quiet_link(void)
{
    static struct hb_sync_sample s[100];
    int fd = -1, quiet = -1;
    /* Six exchanges queue 200 ms one way, then the path is clear: an exchange over loopback
     * comes back far below the 50 ms that counts as quiet, even on a loaded machine. */
    pid_t peer = start_sync_peer(&fd, 6, 200);
    CHECK(peer > 0);
    int n = hb_sync_run_quiet(fd, 1000, 4, 100, 50000000LL, 5000000000LL, s, &quiet);
    stop_sync_peer(peer, fd);
    CHECK(n >= 7 && n <= 8);
    CHECK(quiet == 1);
    struct hb_sync_estimate e = hb_sync_estimate(s, n);
    CHECK(e.rtt_ns < 50000000LL && e.offset_ns > -25000000LL && e.offset_ns < 25000000LL);
    /* a queued one alone would have put the clocks some 100 ms apart (the one the estimate of
     * the six picks may be less queued, when this process itself was kept off its CPU) */
    int biased = 0;
    for (int i = 0; i < 6; i++)
        biased += hb_sync_estimate(&s[i], 1).offset_ns > 50000000LL;
    CHECK(biased > 0);
    /* A path that never clears: it gives up after wait_ns, with `count` samples, not quiet. */
    peer = start_sync_peer(&fd, -1, 200);
    CHECK(peer > 0);
    n = hb_sync_run_quiet(fd, 1000, 2, 100, 50000000LL, 100000000LL, s, &quiet);
    stop_sync_peer(peer, fd);
    CHECK(n == 2);
    CHECK(quiet == 0);
}

static void test_evlog_overflow(void)
{
    struct hb_evlog log;
    CHECK(hb_evlog_init(&log, 3, 100, 200) == 0);
    CHECK(hb_evlog_add(&log, 99, 1, 0, 0, 0) == 0);  /* before the window: not stored */
    for (int i = 0; i < 5; i++)
        hb_evlog_add(&log, 100 + i, 1, i, 0, 0);
    CHECK(hb_evlog_add(&log, 200, 1, 0, 0, 0) == 0); /* the end is outside */
    CHECK_EQ_LL(log.count, 3);
    CHECK_EQ_LL(log.overflow, 2);
    CHECK_EQ_LL(log.events[2].a, 2);
    hb_evlog_free(&log);
}

/* A log ends with its trailer only when it was written whole: records and the bytes column's sum. */
static void test_evlog_trailer(void)
{
    char dir[] = "/tmp/hw-bench-unit-XXXXXX", path[64], text[512];
    CHECK(mkdtemp(dir) != NULL);
    struct hb_evlog log;
    CHECK(hb_evlog_init(&log, 4, 100, 200) == 0);
    hb_evlog_add(&log, 100, 1, 1448, 0, 0);
    hb_evlog_add(&log, 150, 1, 8192, 0, 0);
    CHECK_EQ_LL(hb_evlog_sum_a(&log), 9640);
    FILE *f = hb_evlog_open_tsv(dir, "recv-0.tsv", "bench-receive", &log);
    CHECK(f != NULL);
    if (f) {
        fprintf(f, "t_ns\tbytes\n");
        for (int64_t i = 0; i < log.count; i++)
            fprintf(f, "%lld\t%lld\n", (long long)log.events[i].t_ns, (long long)log.events[i].a);
        CHECK_EQ_LL(hb_evlog_close_tsv(f, dir, "recv-0.tsv", log.count, hb_evlog_sum_a(&log)), 0);
    }
    snprintf(path, sizeof(path), "%s/recv-0.tsv", dir);
    FILE *in = fopen(path, "r");
    size_t n = in ? fread(text, 1, sizeof(text) - 1, in) : 0;
    text[n] = '\0';
    if (in)
        fclose(in);
    CHECK(!strncmp(text, "# format: hostwire-tsv 2\n", 25));
    static const char tail[] = "150\t8192\n# end: records=2 bytes=9640\n";
    CHECK(n > sizeof(tail) && !strcmp(text + n - (sizeof(tail) - 1), tail));
    /* no bytes column: records only */
    f = fopen(path, "w");
    if (f) {
        hb_tsv_put_trailer(f, 7, -1);
        fclose(f);
    }
    in = fopen(path, "r");
    n = in ? fread(text, 1, sizeof(text) - 1, in) : 0;
    text[n] = '\0';
    if (in)
        fclose(in);
    CHECK(!strcmp(text, "# end: records=7\n"));
    unlink(path);
    rmdir(dir);
    hb_evlog_free(&log);
}

/* A probe cheaper than the timing noise of a short loop is a cost of 0, never "unavailable". */
static void test_probes_never_negative(void)
{
    struct hb_probe_result res[16];
    for (int round = 0; round < 100; round++) {
        int n = hb_run_probes(2, res, 16);
        CHECK(n >= 10);
        for (int i = 0; i < n; i++)
            CHECK(res[i].why[0] != '\0' || res[i].ns >= 0);
    }
}

HW_TEST_MAIN(test_wire_byte_order(); test_sieve(); test_clock_estimate(); test_end_exchange_waits_for_quiet_link();
             test_evlog_overflow();
             test_evlog_trailer();
             test_probes_never_negative();)
