/* Unit tests of the pure parts of hw-iotrace: call lists, record formatting, fd descriptions. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "hwtest.h"
#include "../iotrace.h"

static void test_calls(void)
{
    uint32_t mask;
    char bad[32], buf[512];
    CHECK_EQ_LL(iot_calls_parse(NULL, &mask, bad, sizeof(bad)), 0);
    CHECK_EQ_LL(mask, (1u << IOT_NCALLS) - 1);
    CHECK_EQ_LL(iot_calls_parse("write,sendto", &mask, bad, sizeof(bad)), 0);
    CHECK_EQ_LL(mask, (1u << IOT_CALL_WRITE) | (1u << IOT_CALL_SENDTO));
    CHECK(!strcmp(iot_calls_format(mask, buf, sizeof(buf)), "write,sendto"));
    CHECK_EQ_LL(iot_calls_parse("write,bogus", &mask, bad, sizeof(bad)), -22);
    CHECK(!strcmp(bad, "bogus"));
    CHECK_EQ_LL(iot_calls_parse("writ", &mask, bad, sizeof(bad)), -22);
    CHECK_EQ_LL(iot_calls_parse("write,", &mask, bad, sizeof(bad)), 0);
    CHECK_EQ_LL(iot_calls_parse(",write", &mask, bad, sizeof(bad)), -22);
    CHECK_EQ_LL(iot_call_by_nr(iot_calls[IOT_CALL_CLOSE].nr), IOT_CALL_CLOSE);
    CHECK_EQ_LL(iot_call_by_nr(-5), -1);
    iot_calls_format((1u << IOT_NCALLS) - 1, buf, sizeof(buf));
    CHECK(!strcmp(buf, "read,write,readv,writev,pread64,pwrite64,sendto,sendmsg,sendmmsg,recvfrom,"
                       "recvmsg,sendfile,splice,connect,accept,accept4,close"));
}

static void test_format(void)
{
    char line[IOT_LINE_MAX];
    struct iot_rec r = {.t_enter_ns = 1000000000123LL, .t_exit_ns = 1000000000456LL, .req_bytes = 5000,
                       .result = -11, .pid = 42, .tid = 43, .fd = 4, .call = IOT_CALL_WRITE};
    size_t n = iot_rec_format(line, &r, IOT_FD_PIPE, "pipe:[77]");
    line[n] = '\0';
    CHECK(!strcmp(line, "1000000000123\t1000000000456\t42\t43\twrite\t4\t5000\t-11\tpipe\tpipe:[77]\t0\n"));
    r.unfinished = 1;
    r.req_bytes = -1;
    r.call = IOT_CALL_ACCEPT;
    n = iot_rec_format(line, &r, IOT_FD_FILE, "/a\tb\\c\nd");
    line[n] = '\0';
    CHECK(!strcmp(line, "1000000000123\t1000000000456\t42\t43\taccept\t4\t-1\t\tfile\t/a\\tb\\\\c\\nd\t1\n"));
    r.t_enter_ns = INT64_MIN;
    n = iot_rec_format(line, &r, 99, NULL);
    line[n] = '\0';
    CHECK(!strncmp(line, "-9223372036854775808\t", 21));
    CHECK(strstr(line, "\tunknown\t\t1\n") != NULL);
    char head[1024];
    int hl = iot_tsv_header(head, sizeof(head), "ptrace", 1u << IOT_CALL_READ, "# mode: seccomp\n");
    CHECK(hl > 0);
    CHECK(!strncmp(head, "# format: hostwire-tsv 2\n# kind: syscalls\n# backend: ptrace\n", 59));
    CHECK(strstr(head, "# calls: read\n# mode: seccomp\nt_enter_ns\t") != NULL);
    CHECK_EQ_LL(iot_tsv_header(head, 10, "ptrace", 1, NULL), -1);
    /* the last line: a trailer with the record count, or the reason the file is not whole */
    n = iot_tsv_trailer(line, 12345);
    line[n] = '\0';
    CHECK(!strcmp(line, "# end: records=12345\n"));
    n = iot_tsv_trailer(line, 0);
    line[n] = '\0';
    CHECK(!strcmp(line, "# end: records=0\n"));
    n = iot_tsv_damaged(line, "failed to read x.spool: damaged block at byte 96\nsecond line");
    line[n] = '\0';
    CHECK(!strcmp(line, "# damaged: failed to read x.spool: damaged block at byte 96\\nsecond line\n"));
    n = iot_tsv_damaged(line, "");
    line[n] = '\0';
    CHECK(!strcmp(line, "# damaged: the tracer failed\n"));
}

static void test_describe(void)
{
    char desc[IOT_DESC_MAX], link[64];
    int complete;
    int p[2];
    CHECK(pipe(p) == 0);
    snprintf(link, sizeof(link), "/proc/self/fd/%d", p[0]);
    CHECK_EQ_LL(iot_fd_describe(p[0], link, desc, sizeof(desc), &complete), IOT_FD_PIPE);
    CHECK(!strncmp(desc, "pipe:[", 6));
    close(p[0]);
    close(p[1]);

    int f = open("/dev/null", O_WRONLY);
    snprintf(link, sizeof(link), "/proc/self/fd/%d", f);
    CHECK_EQ_LL(iot_fd_describe(f, link, desc, sizeof(desc), &complete), IOT_FD_FILE);
    CHECK(!strcmp(desc, "/dev/null"));
    close(f);

    /* TCP over loopback: unbound is incomplete, connected is the 4-tuple */
    int ls = socket(AF_INET, SOCK_STREAM, 0), cs = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof(a);
    CHECK(bind(ls, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(ls, 1) == 0);
    CHECK(getsockname(ls, (struct sockaddr *)&a, &al) == 0);
    CHECK_EQ_LL(iot_fd_describe(cs, "/nonexistent", desc, sizeof(desc), &complete), IOT_FD_TCP);
    CHECK_EQ_LL(complete, 0);
    CHECK(connect(cs, (struct sockaddr *)&a, sizeof(a)) == 0);
    struct sockaddr_in c;
    socklen_t cl = sizeof(c);
    CHECK(getsockname(cs, (struct sockaddr *)&c, &cl) == 0);
    char want[128];
    snprintf(want, sizeof(want), "127.0.0.1:%u>127.0.0.1:%u", ntohs(c.sin_port), ntohs(a.sin_port));
    CHECK_EQ_LL(iot_fd_describe(cs, "/nonexistent", desc, sizeof(desc), &complete), IOT_FD_TCP);
    CHECK(!strcmp(desc, want));
    CHECK_EQ_LL(complete, 1);
    snprintf(want, sizeof(want), "127.0.0.1:%u>*", ntohs(a.sin_port));
    CHECK_EQ_LL(iot_fd_describe(ls, "/nonexistent", desc, sizeof(desc), &complete), IOT_FD_TCP);
    CHECK(!strcmp(desc, want));
    close(ls);
    close(cs);

    int us = socket(AF_INET6, SOCK_DGRAM, 0);
    if (us >= 0) {
        struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
        if (bind(us, (struct sockaddr *)&a6, sizeof(a6)) == 0) {
            socklen_t l6 = sizeof(a6);
            getsockname(us, (struct sockaddr *)&a6, &l6);
            snprintf(want, sizeof(want), "[::1]:%u>*", ntohs(a6.sin6_port));
            CHECK_EQ_LL(iot_fd_describe(us, "/nonexistent", desc, sizeof(desc), &complete), IOT_FD_UDP);
            CHECK(!strcmp(desc, want));
        }
        close(us);
    }

    int sp[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sp) == 0);
    snprintf(link, sizeof(link), "/proc/self/fd/%d", sp[0]);
    CHECK_EQ_LL(iot_fd_describe(sp[0], link, desc, sizeof(desc), &complete), IOT_FD_UNIX);
    CHECK(!strncmp(desc, "socket:[", 8));
    close(sp[0]);
    close(sp[1]);

    CHECK_EQ_LL(iot_fd_describe(-1, "/nonexistent", desc, sizeof(desc), &complete), IOT_FD_UNKNOWN);
    CHECK(!strcmp(desc, ""));
}

static void test_intern(void)
{
    struct iot_desc_tab t = {0};
    uint32_t a = iot_desc_intern(&t, IOT_FD_FILE, "/x");
    uint32_t b = iot_desc_intern(&t, IOT_FD_PIPE, "/x");
    CHECK_EQ_LL(a, 1);
    CHECK_EQ_LL(b, 2);
    CHECK_EQ_LL(iot_desc_intern(&t, IOT_FD_FILE, "/x"), 1);
    char name[32];
    for (int i = 0; i < 200; i++) {
        snprintf(name, sizeof(name), "/f%d", i);
        iot_desc_intern(&t, IOT_FD_FILE, name);
    }
    CHECK_EQ_LL(t.n, 202);
    CHECK(!strcmp(t.desc[202], "/f199"));
    CHECK_EQ_LL(iot_desc_intern(&t, IOT_FD_FILE, "/f7"), 10);
    iot_desc_free(&t);
}

HW_TEST_MAIN(test_calls(); test_format(); test_describe(); test_intern();)
