/* Unit tests of hw-bench's library parts: wire encoding, value parsing, sieve, clock estimate,
 * event-log overflow. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../clocksync.h"
#include "../evlog.h"
#include "../sieve.h"
#include "../wire.h"
#include "hwargs.h"
#include "hwtest.h"

static void test_wire_byte_order(void)
{
    uint8_t buf[HW_SUMMARY_LEN];
    struct hw_ports_msg ports = {HW_MAGIC_PORTS, HW_WIRE_VERSION, 0x1234, 0xabcd}, back;
    hw_pack_ports(buf, &ports);
    const uint8_t want[HW_PORTS_LEN] = {'H', 'W', 'R', 'P', 0, 1, 0x12, 0x34, 0xab, 0xcd};
    CHECK(memcmp(buf, want, sizeof(want)) == 0);
    CHECK(hw_unpack_ports(buf, &back) == 0 && back.tcp_port == 0x1234 && back.udp_port == 0xabcd);
    buf[0] = 'X';
    CHECK(hw_unpack_ports(buf, &back) != 0);

    struct hw_window_msg w = {-5, 0x0102030405060708LL, 42}, w2;
    hw_pack_window(buf, &w);
    CHECK(buf[0] == 'W' && buf[1] == 0xff && buf[8] == 0xfb);
    CHECK(buf[9] == 0x01 && buf[16] == 0x08);
    hw_unpack_window(buf, &w2);
    CHECK(w2.offset_ns == -5 && w2.window_start_ns == w.window_start_ns && w2.window_end_ns == 42);

    struct hw_recv_summary s = {7, 99, -1, 1LL << 40, 5, 0, 3, 2}, s2;
    hw_pack_summary(buf, &s);
    hw_unpack_summary(buf, &s2);
    CHECK(s2.index == 7 && s2.pid == 99 && s2.exit_status == -1 && s2.bytes_total == (1LL << 40));
    CHECK(s2.bytes_window == 5 && s2.events == 3 && s2.overflow == 2);

    struct hw_hello_msg h = {HW_MAGIC_HELLO, 3, 1, 1}, h2;
    hw_pack_hello(buf, &h);
    CHECK(hw_unpack_hello(buf, &h2) != 0); /* kind 3 is not a connection kind */

    struct hw_sync_msg m = {HW_MAGIC_SYNC, 9, 100, 200, 300}, m2;
    hw_pack_sync(buf, &m, HW_SYNC_REPLY_LEN);
    CHECK(hw_unpack_sync(buf, HW_SYNC_REPLY_LEN, &m2) == 0 && m2.seq == 9 && m2.t3 == 300);
    CHECK(hw_unpack_sync(buf, 20, &m2) != 0);
}

static void test_parsing(void)
{
    int64_t v;
    CHECK(hw_parse_size("t", "--s", "8k", 1, 1 << 30, &v) == 0 && v == 8192);
    CHECK(hw_parse_size("t", "--s", "2M", 1, 1 << 30, &v) == 0 && v == 2 << 20);
    CHECK(hw_parse_size("t", "--s", "12", 1, 1 << 30, &v) == 0 && v == 12);
    CHECK(hw_parse_size("t", "--s", "12x", 1, 1 << 30, &v) != 0);
    CHECK(hw_parse_size("t", "--s", "0", 1, 1 << 30, &v) != 0);
    CHECK(hw_parse_duration_ns("t", "--d", "2", &v) == 0 && v == 2000000000LL);
    CHECK(hw_parse_duration_ns("t", "--d", "2.5s", &v) == 0 && v == 2500000000LL);
    CHECK(hw_parse_duration_ns("t", "--d", "500ms", &v) == 0 && v == 500000000LL);
    CHECK(hw_parse_duration_ns("t", "--d", "-1", &v) != 0);
    CHECK(hw_parse_duration_ns("t", "--d", "3h", &v) != 0);
    CHECK(hw_parse_i64("t", "--n", "31", 1, 30, &v) != 0);
    CHECK(hw_parse_i64("t", "--n", "30", 1, 30, &v) == 0 && v == 30);
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
        struct hw_sieve_result want = hw_sieve_expected(log2);
        CHECK_EQ_LL(want.primes, count);
        CHECK_EQ_LL(want.largest, largest);
        for (int copy = 0; copy < HW_SIEVE_COPIES; copy += 7) {
            struct hw_sieve_result got = hw_sieve_round(copy, buf, log2);
            CHECK_EQ_LL(got.primes, count);
            CHECK_EQ_LL(got.largest, largest);
        }
    }
    CHECK(hw_sieve_expected(0).primes == -1 && hw_sieve_expected(31).primes == -1);
    free(buf);
}

static void test_clock_estimate(void)
{
    /* Receiver 1000 ns ahead; the second sample has the shortest round trip and symmetric delays. */
    struct hw_sync_sample s[3] = {
        {0, 0, 1500, 1600, 900},   /* rtt 800, asymmetric */
        {1, 2000, 3100, 3150, 2250}, /* rtt 200: offset ((1100) + (900)) / 2 = 1000 */
        {2, 4000, 5900, 5950, 4900}, /* rtt 850 */
    };
    struct hw_sync_estimate e = hw_sync_estimate(s, 3);
    CHECK_EQ_LL(e.rtt_ns, 200);
    CHECK_EQ_LL(e.offset_ns, 1000);
    CHECK_EQ_LL(e.t_ns, 2125);
}

static void test_evlog_overflow(void)
{
    struct hw_evlog log;
    CHECK(hw_evlog_init(&log, 3, 100, 200) == 0);
    CHECK(hw_evlog_add(&log, 99, 1, 0, 0, 0) == 0);  /* before the window: not stored */
    for (int i = 0; i < 5; i++)
        hw_evlog_add(&log, 100 + i, 1, i, 0, 0);
    CHECK(hw_evlog_add(&log, 200, 1, 0, 0, 0) == 0); /* the end is outside */
    CHECK_EQ_LL(log.count, 3);
    CHECK_EQ_LL(log.overflow, 2);
    CHECK_EQ_LL(log.events[2].a, 2);
    hw_evlog_free(&log);
}

/* A log ends with its trailer only when it was written whole: records and the bytes column's sum. */
static void test_evlog_trailer(void)
{
    char dir[] = "/tmp/hw-bench-unit-XXXXXX", path[64], text[512];
    CHECK(mkdtemp(dir) != NULL);
    struct hw_evlog log;
    CHECK(hw_evlog_init(&log, 4, 100, 200) == 0);
    hw_evlog_add(&log, 100, 1, 1448, 0, 0);
    hw_evlog_add(&log, 150, 1, 8192, 0, 0);
    CHECK_EQ_LL(hw_evlog_sum_a(&log), 9640);
    FILE *f = hw_evlog_open_tsv(dir, "recv-0.tsv", "bench-receive", &log);
    CHECK(f != NULL);
    if (f) {
        fprintf(f, "t_ns\tbytes\n");
        for (int64_t i = 0; i < log.count; i++)
            fprintf(f, "%lld\t%lld\n", (long long)log.events[i].t_ns, (long long)log.events[i].a);
        CHECK_EQ_LL(hw_evlog_close_tsv(f, dir, "recv-0.tsv", log.count, hw_evlog_sum_a(&log)), 0);
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
        hw_tsv_put_trailer(f, 7, -1);
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
    hw_evlog_free(&log);
}

HW_TEST_MAIN(test_wire_byte_order(); test_parsing(); test_sieve(); test_clock_estimate(); test_evlog_overflow();
             test_evlog_trailer();)
