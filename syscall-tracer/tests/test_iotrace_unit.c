/* Unit tests of the pure parts of hw-iotrace: call lists, record formatting, fd descriptions, the
 * preload region read back into syscalls.tsv. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "hwtest.h"
#include "../iotrace.h"
#include "../region.h"

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
                       "recvmsg,sendfile,splice,connect,accept,accept4,close,socket,dup,dup2,dup3,fcntl,close_range,"
                       "pwritev,pwritev2,vmsplice,tee,fcntl_setfd,ioctl,recvmmsg,scm_rights"));
}

/* The descriptors' calls: what their records say of the fd and of close-on-exec. */
static void test_lifetime_records(void)
{
    int32_t fd = 7;
    int64_t req = -1;
    uint64_t sock[6] = {AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0, 0, 0, 0};
    CHECK_EQ_LL(iot_lifetime_entry(IOT_CALL_SOCKET, sock, &fd, &req), IOT_CALL_SOCKET);
    CHECK_EQ_LL(fd, -1);
    CHECK_EQ_LL(req, 1);
    CHECK_EQ_LL(iot_lifetime_made(IOT_CALL_SOCKET, 5), 5);
    CHECK_EQ_LL(iot_lifetime_made(IOT_CALL_SOCKET, -24), -1);
    CHECK_EQ_LL(iot_lifetime_made(IOT_CALL_CLOSE, 0), -1);
    uint64_t dup3[6] = {3, 9, O_CLOEXEC, 0, 0, 0};
    CHECK_EQ_LL(iot_lifetime_entry(IOT_CALL_DUP3, dup3, &fd, &req), IOT_CALL_DUP3);
    CHECK_EQ_LL(req, 1);
    uint64_t getfl[6] = {3, F_GETFL, 0, 0, 0, 0}, dupfd[6] = {3, F_DUPFD, 10, 0, 0, 0};
    CHECK_EQ_LL(iot_lifetime_entry(IOT_CALL_FCNTL, getfl, &fd, &req), -1);
    CHECK_EQ_LL(iot_lifetime_entry(IOT_CALL_FCNTL, dupfd, &fd, &req), IOT_CALL_FCNTL);
    CHECK_EQ_LL(req, 0);
    uint64_t range[6] = {3, 40, 0, 0, 0, 0}, mark[6] = {3, 40, 1U << 2, 0, 0, 0};
    CHECK_EQ_LL(iot_lifetime_entry(IOT_CALL_CLOSE_RANGE, range, &fd, &req), IOT_CALL_CLOSE_RANGE);
    CHECK_EQ_LL(req, 40);
    CHECK_EQ_LL(iot_lifetime_entry(IOT_CALL_CLOSE_RANGE, mark, &fd, &req), -1);
    /* close-on-exec set and cleared later: fcntl F_SETFD (its own record) and ioctl */
    uint64_t setfd[6] = {4, F_SETFD, FD_CLOEXEC, 0, 0, 0}, clearfd[6] = {4, F_SETFD, 0, 0, 0, 0};
    CHECK_EQ_LL(iot_lifetime_entry(IOT_CALL_FCNTL, setfd, &fd, &req), IOT_CALL_FCNTL_SETFD);
    CHECK_EQ_LL(req, 1);
    CHECK_EQ_LL(iot_lifetime_entry(IOT_CALL_FCNTL, clearfd, &fd, &req), IOT_CALL_FCNTL_SETFD);
    CHECK_EQ_LL(req, 0);
    CHECK_EQ_LL(iot_lifetime_made(IOT_CALL_FCNTL_SETFD, 0), -1);
    uint64_t fioclex[6] = {4, FIOCLEX, 0, 0, 0, 0}, fionclex[6] = {4, FIONCLEX, 0, 0, 0, 0};
    uint64_t tcgets[6] = {0, TCGETS, 0, 0, 0, 0};
    CHECK_EQ_LL(iot_lifetime_entry(IOT_CALL_IOCTL, fioclex, &fd, &req), IOT_CALL_IOCTL);
    CHECK_EQ_LL(req, 1);
    CHECK_EQ_LL(iot_lifetime_entry(IOT_CALL_IOCTL, fionclex, &fd, &req), IOT_CALL_IOCTL);
    CHECK_EQ_LL(req, 0);
    CHECK_EQ_LL(iot_lifetime_entry(IOT_CALL_IOCTL, tcgets, &fd, &req), -1);
    /* the selection: fcntl stops for either record, recvmsg also for the fds it receives */
    CHECK_EQ_LL(iot_call_wanted(IOT_CALL_FCNTL, 1u << IOT_CALL_FCNTL_SETFD), 1);
    CHECK_EQ_LL(iot_call_wanted(IOT_CALL_RECVMSG, 1u << IOT_CALL_SCM_RIGHTS), 1);
    CHECK_EQ_LL(iot_call_wanted(IOT_CALL_RECVMSG, 1u << IOT_CALL_WRITE), 0);
}

/* Two control messages (credentials, then three descriptors) and a truncated tail. */
static void test_scm_rights(void)
{
    union {
        char buf[CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(3 * sizeof(int))];
        struct cmsghdr align;
    } u;
    memset(&u, 0, sizeof(u));
    struct msghdr m = {.msg_control = u.buf, .msg_controllen = sizeof(u.buf)};
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_CREDENTIALS;
    c->cmsg_len = CMSG_LEN(sizeof(struct ucred));
    c = CMSG_NXTHDR(&m, c);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(3 * sizeof(int));
    int sent[3] = {5, 9, 12}, got[8] = {0};
    memcpy(CMSG_DATA(c), sent, sizeof(sent));
    CHECK_EQ_LL(iot_scm_rights(u.buf, sizeof(u.buf), got, 8), 3);
    CHECK_EQ_LL(got[0], 5);
    CHECK_EQ_LL(got[2], 12);
    CHECK_EQ_LL(iot_scm_rights(u.buf, sizeof(u.buf), got, 2), 2);
    /* the kernel truncated the buffer (MSG_CTRUNC): only the whole descriptors inside it */
    size_t cut = (size_t)((char *)CMSG_DATA(c) - u.buf) + sizeof(int) + 2;
    CHECK_EQ_LL(iot_scm_rights(u.buf, cut, got, 8), 1);
    CHECK_EQ_LL(iot_scm_rights(u.buf, 0, got, 8), 0);
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

/* The file's lines after its header, joined. */
static const char *body(const char *path)
{
    static char text[4096];
    char all[8192];
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(all, 1, sizeof(all) - 1, f) : 0;
    if (f)
        fclose(f);
    all[n] = '\0';
    const char *p = strstr(all, "unfinished\n");
    snprintf(text, sizeof(text), "%s", p ? p + strlen("unfinished\n") : "");
    return text;
}

static void put_slot(struct iot_slot *s, uint32_t state, uint32_t image, struct iot_rec r)
{
    s->image = image;
    s->r = r;
    atomic_store(&s->state, state);
}

static void test_region_drain(void)
{
    struct iot_region_run run;
    struct iot_trace_stats st = {0};
    struct hw_err err = {0};
    char path[] = "/tmp/hw-iotrace-unit-XXXXXX";
    int tmp = mkstemp(path);
    CHECK(tmp >= 0);
    close(tmp);
    CHECK(iot_region_create(&run, 256, 1, &err) == 0);
    struct iot_slot *s = iot_region_slots(run.map, run.head.ndescs);
    struct iot_desc_slot *d = iot_region_descs(run.map);
    d[0].image = 1, d[0].id = 1, d[0].kind = IOT_FD_PIPE, d[0].len = 8;
    memcpy(d[0].text, "pipe:[9]", 8);
    atomic_store(&d[0].state, 1);
    atomic_store(&run.map->desc_cursor, 1);
    /* TSC ticks: the anchors map 1000 -> 10000 ns, 1800 -> 11800 (a library's), 2000 -> 12000 */
    struct iot_anchor start = {1000, 10000}, end = {2000, 12000};
    put_slot(&s[0], IOT_SLOT_DONE, 1, (struct iot_rec){.t_enter_ns = 1500, .t_exit_ns = 1600, .req_bytes = 5,
                                                        .result = 5, .pid = 7, .tid = 8, .fd = 3, .desc_id = 1,
                                                        .call = IOT_CALL_WRITE});
    /* slot 1 claimed but never written: the call was not made */
    put_slot(&s[2], IOT_SLOT_ENTERED, 1, (struct iot_rec){.t_enter_ns = 1400, .t_exit_ns = 77, .req_bytes = -1,
                                                           .result = 77, .pid = 7, .tid = 9, .fd = 4,
                                                           .call = IOT_CALL_READ});
    put_slot(&s[3], IOT_SLOT_ANCHOR, 1, (struct iot_rec){.t_enter_ns = 1800, .t_exit_ns = 11800});
    put_slot(&s[4], IOT_SLOT_ENTERED, 2, (struct iot_rec){.t_enter_ns = 1900, .req_bytes = 1, .pid = 10, .tid = 10,
                                                           .fd = 3, .desc_id = 1, .call = IOT_CALL_READ});
    atomic_store(&run.map->cursor, 5);
    atomic_store(&run.map->lost, 3);
    CHECK_EQ_LL(iot_region_drain(&run, start, end, 99999, path, 1u << IOT_CALL_READ, &st, &err), 0);
    /* in order of entry; an unfinished call ends at its image's last stamp (slot 0's exit), or at the
     * command's end when its image did nothing after it; image 2 has no description 1 */
    CHECK(!strcmp(body(path), "10900\t11350\t7\t9\tread\t4\t-1\t\tunknown\t\t1\n"
                              "11125\t11350\t7\t8\twrite\t3\t5\t5\tpipe\tpipe:[9]\t0\n"
                              "11900\t99999\t10\t10\tread\t3\t1\t\tunknown\t\t1\n"
                              "# end: records=3\n"));
    CHECK_EQ_LL(st.records_written, 3);
    CHECK_EQ_LL(st.unfinished, 2);
    CHECK_EQ_LL(st.calls_seen, 6);
    /* a slot no library writes: the records of the slots before it, and the reason */
    put_slot(&s[5], 9, 1, (struct iot_rec){.call = IOT_CALL_READ});
    atomic_store(&run.map->cursor, 6);
    memset(&st, 0, sizeof(st));
    CHECK_EQ_LL(iot_region_drain(&run, start, end, 99999, path, 1, &st, &err), -EBADMSG);
    CHECK(strstr(body(path), "\t1\n# damaged: failed to read the shared region: damaged slot 5 ") != NULL);
    CHECK_EQ_LL(st.records_written, 3);
    /* a head the program wrote over: hw-iotrace's own geometry still reads the slots */
    atomic_store(&s[5].state, IOT_SLOT_FREE);
    run.map->nslots = 1u << 30;
    memset(&st, 0, sizeof(st));
    CHECK_EQ_LL(iot_region_drain(&run, start, end, 99999, path, 1, &st, &err), -EBADMSG);
    CHECK(strstr(body(path), "# damaged: failed to read the shared region: its head was overwritten") != NULL);
    CHECK_EQ_LL(st.records_written, 3);
    iot_region_close(&run);
    unlink(path);
}

HW_TEST_MAIN(test_calls(); test_lifetime_records();
    test_scm_rights(); test_format(); test_describe(); test_intern(); test_region_drain();)
