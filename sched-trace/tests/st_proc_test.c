/* C unit tests of hw-schedtrace's /proc/schedtrace reader: the line parser (every field of the
 * kernel's format_rec and format_header, and damage named by what was expected), the x86_64
 * call table, the control file's state, and the conversion of small raw files. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hwtest.h"
#include "../st_proc.h"

#define SWITCH "5000123456 3 switch prev_comm=hw-bench prev_pid=4242 prev_tgid=4240 prev_prio=120 " \
    "prev_state=256 prev_runtime_ns=123456789 prev_sigpending=0x4000 prev_user_ip=0x7f12abcd0010 preempt=1 " \
    "next_comm=swapper/3 next_pid=0 next_tgid=0 next_prio=120 next_runtime_ns=98765 next_vruntime=18446744073709551615 " \
    "next_deadline=4000000 queue_vruntime=3999000 nr_running=2 cfs_queued=1 rt_running=0 net_backlog=7 " \
    "tcp_mem_pages=-3"

static int parse(const char *line, struct st_proc_rec *rec, char *why, size_t len)
{
    return st_proc_parse_line(line, strlen(line), rec, why, len);
}

static void test_switch(void)
{
    struct st_proc_rec r;
    char why[256];
    CHECK(parse(SWITCH, &r, why, sizeof(why)) == 0);
    CHECK(r.kind == ST_PROC_SWITCH);
    CHECK(r.t_ns == 5000123456ULL && r.cpu == 3);
    const struct st_proc_switch *s = &r.u.sw;
    CHECK(strcmp(s->prev_comm, "hw-bench") == 0 && strcmp(s->next_comm, "swapper/3") == 0);
    CHECK_EQ_LL(s->prev_pid, 4242);
    CHECK_EQ_LL(s->prev_tgid, 4240);
    CHECK_EQ_LL(s->prev_prio, 120);
    CHECK_EQ_LL(s->prev_state, 256);
    CHECK(s->prev_runtime_ns == 123456789ULL);
    CHECK(s->prev_sigpending == 0x4000ULL);
    CHECK(s->prev_user_ip == 0x7f12abcd0010ULL);
    CHECK_EQ_LL(s->preempt, 1);
    CHECK_EQ_LL(s->next_pid, 0);
    CHECK_EQ_LL(s->next_tgid, 0);
    CHECK_EQ_LL(s->next_prio, 120);
    CHECK(s->next_runtime_ns == 98765ULL);
    CHECK(s->next_vruntime == 18446744073709551615ULL);
    CHECK(s->next_deadline == 4000000ULL && s->queue_vruntime == 3999000ULL);
    CHECK(s->nr_running == 2 && s->cfs_queued == 1 && s->rt_running == 0 && s->net_backlog == 7);
    CHECK_EQ_LL(s->tcp_mem_pages, -3);
}

static void test_comm_escapes(void)
{
    struct st_proc_rec r;
    char why[256], line[1024];
    /* space, backslash, tab and a byte above 0x7e, as the kernel's put_comm writes them */
    const char *esc = "my\\x20prog\\x5cx\\x09\\xe9";
    snprintf(line, sizeof(line), "1 0 switch prev_comm=%s prev_pid=1 prev_tgid=1 prev_prio=120 prev_state=1 "
             "prev_runtime_ns=0 prev_sigpending=0x0 prev_user_ip=0x0 preempt=0 next_comm= next_pid=2 next_tgid=2 "
             "next_prio=120 next_runtime_ns=0 next_vruntime=0 next_deadline=0 queue_vruntime=0 nr_running=0 "
             "cfs_queued=0 rt_running=0 net_backlog=0 tcp_mem_pages=0", esc);
    CHECK(parse(line, &r, why, sizeof(why)) == 0);
    CHECK(strcmp(r.u.sw.prev_comm, "my prog\\x\t\xe9") == 0);
    CHECK(strcmp(r.u.sw.next_comm, "") == 0);   /* an empty name is a name */
    /* 16 bytes fit (TASK_COMM_LEN), 17 do not */
    snprintf(line, sizeof(line), "1 0 switch prev_comm=0123456789abcdef prev_pid=1");
    CHECK(parse(line, &r, why, sizeof(why)) < 0);
    CHECK(strstr(why, "expected prev_pid=") == NULL && strstr(why, "end of the line") != NULL);
    snprintf(line, sizeof(line), "1 0 switch prev_comm=0123456789abcdefg prev_pid=1");
    CHECK(parse(line, &r, why, sizeof(why)) < 0);
    CHECK(strstr(why, "at most 16 bytes") != NULL);
    CHECK(parse("1 0 switch prev_comm=a\\b prev_pid=1", &r, why, sizeof(why)) < 0);
    CHECK(strstr(why, "\\xNN") != NULL);
    CHECK(parse("1 0 switch prev_comm=a\\x00 prev_pid=1", &r, why, sizeof(why)) < 0);
    CHECK(parse("1 0 switch prev_comm=a\\x4 prev_pid=1", &r, why, sizeof(why)) < 0);
}

static void test_sys(void)
{
    struct st_proc_rec r;
    char why[256];
    CHECK(parse("7000 1 sys_enter pid=10 tid=11 nr=275 a0=0x3 a1=0x0 a2=0xffffffff a3=0x0 a4=0x10000 a5=0x1",
                &r, why, sizeof(why)) == 0);
    CHECK(r.kind == ST_PROC_SYS_ENTER && r.t_ns == 7000 && r.cpu == 1);
    CHECK(r.u.sys.pid == 10 && r.u.sys.tid == 11 && r.u.sys.nr == 275);
    CHECK(r.u.sys.args[2] == 0xffffffffULL && r.u.sys.args[4] == 0x10000ULL && r.u.sys.args[5] == 1);
    CHECK(parse("7001 1 sys_exit pid=10 tid=11 nr=275 ret=-11", &r, why, sizeof(why)) == 0);
    CHECK(r.kind == ST_PROC_SYS_EXIT && r.u.sys.ret == -11);
    CHECK(parse("7001 1 sys_exit pid=10 tid=11 nr=275", &r, why, sizeof(why)) < 0);
    CHECK(strstr(why, "expected one space and the next field") != NULL);
    CHECK(parse("7001 1 sys_exit pid=10 tid=11 nr=275 ret=5 extra=1", &r, why, sizeof(why)) < 0);
    CHECK(strcmp(why, "expected the end of the line, got 'extra=1'") == 0);
    CHECK(parse("7000 1 sys_enter pid=10 tid=11 nr=0 a0=3 a1=0x0 a2=0x0 a3=0x0 a4=0x0 a5=0x0",
                &r, why, sizeof(why)) < 0);
    CHECK(strcmp(why, "expected a0=0x<hex>, got 'a0=3'") == 0);
}

static void test_header(void)
{
    struct st_proc_rec r;
    char why[256];
    CHECK(parse("# schedtrace format=1 clock=mono size=131072 enabled=1 written=10 lost=2 pending=8",
                &r, why, sizeof(why)) == 0);
    CHECK(r.kind == ST_PROC_HEADER && r.u.hdr.format == 1 && strcmp(r.u.hdr.clock, "mono") == 0);
    CHECK(r.u.hdr.size == 131072 && r.u.hdr.enabled == 1 && r.u.hdr.written == 10 && r.u.hdr.lost == 2 &&
          r.u.hdr.pending == 8);
    CHECK(parse("# schedtrace format=2 clock=mono size=1 enabled=1 written=1 lost=0 pending=0", &r, why,
                sizeof(why)) < 0);
    CHECK(strstr(why, "expected format=1") != NULL && strstr(why, "got 'format=2'") != NULL);
    CHECK(parse("# schedtrace format=1 clock=boot size=1 enabled=1 written=1 lost=0 pending=0", &r, why,
                sizeof(why)) < 0);
    CHECK(strcmp(why, "expected clock=mono, got 'clock=boot'") == 0);
    CHECK(parse("# something else", &r, why, sizeof(why)) < 0);
    CHECK(strstr(why, "expected a record or the header") != NULL);
}

static void test_damage(void)
{
    static const struct { const char *line, *why; } cases[] = {
        { "", "expected a record: T_NS CPU switch|sys_enter|sys_exit ..., got the end of the line" },
        { "12x 0 switch", "expected a record: T_NS CPU switch|sys_enter|sys_exit ..., got '12x'" },
        { "12 0 wakeup pid=1", "expected the record kind switch, sys_enter or sys_exit, got 'wakeup'" },
        { "12  0 switch", "expected one space and the next field, got ' 0'" },
        { "12 0 switch prev_comm=a prev_pid=99999999999", "expected prev_pid=<32-bit integer>, got 'prev_pid=99999999999'" },
        { "12 0 switch prev_comm=a prev_tgid=1", "expected prev_pid=<32-bit integer>, got 'prev_tgid=1'" },
        { "18446744073709551616 0 switch", "expected a record: T_NS CPU switch|sys_enter|sys_exit ..., got '18446744073709551616'" },
    };
    struct st_proc_rec r;
    char why[256];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        CHECK(parse(cases[i].line, &r, why, sizeof(why)) < 0);
        if (strcmp(why, cases[i].why) != 0) {
            fprintf(stderr, "case %zu: got \"%s\"\n", i, why);
            CHECK(0);
        }
    }
    /* preempt is a u8, the tail must be exact: tcp_mem_pages last, a trailing space is damage */
    char line[1024];
    snprintf(line, sizeof(line), "%s ", SWITCH);
    CHECK(parse(line, &r, why, sizeof(why)) < 0);
    CHECK(strncmp(why, "expected the end of the line", 28) == 0);
    CHECK(st_proc_parse_line(SWITCH, strlen(SWITCH) - 2, &r, why, sizeof(why)) < 0);   /* "tcp_mem_pages=" */
    CHECK(strcmp(why, "expected tcp_mem_pages=<integer>, got 'tcp_mem_pages='") == 0);
}

static void test_calls(void)
{
    int fd, req;
    CHECK(strcmp(st_proc_call(0, &fd, &req), "read") == 0 && fd == 0 && req == 2);
    CHECK(strcmp(st_proc_call(40, &fd, &req), "sendfile") == 0 && fd == 0 && req == 3);
    CHECK(strcmp(st_proc_call(275, &fd, &req), "splice") == 0 && fd == 2 && req == 4);
    CHECK(strcmp(st_proc_call(307, &fd, &req), "sendmmsg") == 0 && req == -1);
    CHECK(strcmp(st_proc_call(20, &fd, &req), "writev") == 0 && req == -1);
    CHECK(strcmp(st_proc_call(45, &fd, &req), "recvfrom") == 0 && req == 2);
    CHECK(st_proc_call(59, &fd, &req) == NULL);
}

static void test_control(void)
{
    struct st_proc_header h;
    CHECK_EQ_LL(st_proc_parse_control("format 1\nenabled 0\nsize 131072\nwritten 9\nlost 3\npending 0\npids 1 2\n"
                                      "size 2048\n", &h), 5);
    CHECK(h.enabled == 0 && h.size == 131072 && h.written == 9 && h.lost == 3 && h.pending == 0);
    CHECK_EQ_LL(st_proc_parse_control("enable\nclear\n", &h), 0);
    CHECK_EQ_LL(st_proc_parse_control("", &h), 0);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    static char buf[16384];
    size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = '\0';
    return buf;
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

#define MINI(t, cpu, prev, pid, next, npid) #t " " #cpu " switch prev_comm=" prev " prev_pid=" #pid " prev_tgid=" #pid \
    " prev_prio=120 prev_state=1 prev_runtime_ns=5 prev_sigpending=0x0 prev_user_ip=0x10 preempt=0 next_comm=" next \
    " next_pid=" #npid " next_tgid=" #npid " next_prio=120 next_runtime_ns=6 next_vruntime=7 next_deadline=8" \
    " queue_vruntime=9 nr_running=1 cfs_queued=1 rt_running=0 net_backlog=0 tcp_mem_pages=4\n"

static void test_convert(void)
{
    char dir[] = "/tmp/st_proc_test_XXXXXX", raw[256], path[256];
    struct st_proc_stats *st = calloc(1, sizeof(*st));
    struct hw_err err = { 0 };
    CHECK(mkdtemp(dir) != NULL && st != NULL);
    snprintf(raw, sizeof(raw), "%s/schedtrace.txt", dir);
    /* out of order by stamp (as the ring can be); a call entered twice; one left open */
    write_text(raw, "# schedtrace format=1 clock=mono size=1024 enabled=1 written=0 lost=0 pending=0\n"
               MINI(300, 1, "b", 20, "c", 30)
               MINI(200, 0, "a\\x09", 10, "b", 20)
               "250 0 sys_enter pid=20 tid=21 nr=1 a0=0xffffffff a1=0x0 a2=0x64 a3=0x0 a4=0x0 a5=0x0\n"
               "260 0 sys_exit pid=20 tid=21 nr=1 ret=100\n"
               "270 0 sys_enter pid=20 tid=21 nr=40 a0=0x5 a1=0x6 a2=0x0 a3=0x1000 a4=0x0 a5=0x0\n"
               "280 0 sys_enter pid=20 tid=22 nr=999 a0=0x7 a1=0x0 a2=0x0 a3=0x0 a4=0x0 a5=0x0\n"
               "290 0 sys_exit pid=20 tid=23 nr=0 ret=0\n"
               "# schedtrace format=1 clock=mono size=1024 enabled=0 written=9 lost=2 pending=0\n");
    CHECK(st_proc_convert(raw, dir, false, NULL, 0, st, &err) == 0);
    CHECK_EQ_LL(st->records, 7);
    CHECK_EQ_LL(st->switches, 2);
    CHECK_EQ_LL(st->headers, 2);
    CHECK_EQ_LL(st->syscalls, 3);
    CHECK_EQ_LL(st->unfinished, 2);
    CHECK_EQ_LL(st->exits_without_enter, 1);
    long long lost, unread;
    CHECK_EQ_LL(st_proc_lost(st, NULL, &lost, &unread), 4);   /* 2 dropped, 2 read by someone else */
    CHECK_EQ_LL(lost, 2);
    CHECK_EQ_LL(unread, 2);
    snprintf(path, sizeof(path), "%s/sched.tsv", dir);
    const char *tsv = slurp(path);
    const char *rows = strstr(tsv, "tcp_mem_pages\n");
    CHECK(strstr(tsv, "# backend: proc\n") != NULL && rows != NULL);
    CHECK(rows && strcmp(rows + 14,
        "200\t0\tsched_switch\t10\ta\\t\ta\\t\t10\t120\t1\tb\t20\t120\t10\t5\t0x0\t0x10\t0\t20\t6\t7\t8\t9\t1\t1\t0\t0\t4\n"
        "300\t1\tsched_switch\t20\tb\tb\t20\t120\t1\tc\t30\t120\t20\t5\t0x0\t0x10\t0\t30\t6\t7\t8\t9\t1\t1\t0\t0\t4\n"
        "# end: records=2\n") == 0);
    snprintf(path, sizeof(path), "%s/syscalls.tsv", dir);
    tsv = slurp(path);
    rows = strstr(tsv, "unfinished\n");
    CHECK(strstr(tsv, "# backend: proc\n") != NULL && rows != NULL);
    CHECK(rows && strcmp(rows + 11,
        "250\t260\t20\t21\twrite\t-1\t100\t100\tunknown\t\t0\n"
        "270\t300\t20\t21\tsendfile\t5\t4096\t\tunknown\t\t1\n"
        "280\t300\t20\t22\tnr_999\t7\t-1\t\tunknown\t\t1\n"
        "# end: records=3\n") == 0);

    /* a cut last line: the records before it stay, the files say where and what */
    write_text(raw, "# schedtrace format=1 clock=mono size=1024 enabled=1 written=0 lost=0 pending=0\n"
               MINI(200, 0, "a", 10, "b", 20) "300 1 switch prev_comm=b prev_pid=2");
    memset(&err, 0, sizeof(err));
    CHECK(st_proc_convert(raw, dir, false, NULL, 0, st, &err) < 0);
    CHECK(st->damaged && st->switches == 1);
    CHECK(strstr(err.msg, "schedtrace.txt:3: expected a newline at the end of the line (the file is cut)") != NULL);
    CHECK(st_proc_lost(st, NULL, &lost, &unread) == ST_UNKNOWN && lost == 0 && unread == ST_UNKNOWN);
    snprintf(path, sizeof(path), "%s/sched.tsv", dir);
    tsv = slurp(path);
    CHECK(strstr(tsv, "\n200\t0\tsched_switch\t10\t") != NULL);
    CHECK(strstr(tsv, "schedtrace.txt:3: expected a newline at the end of the line (the file is cut)\n") != NULL);
    CHECK(strstr(tsv, "# end:") == NULL && strstr(tsv, "\n# damaged: ") != NULL);

    /* records before any header; an empty file */
    write_text(raw, MINI(200, 0, "a", 10, "b", 20));
    CHECK(st_proc_convert(raw, dir, false, NULL, 0, st, &err) < 0);
    CHECK(strstr(err.msg, ":1: expected the header line") != NULL);
    write_text(raw, "");
    CHECK(st_proc_convert(raw, dir, false, NULL, 0, st, &err) < 0);
    CHECK(strstr(err.msg, ":1: expected the header line") != NULL && strstr(err.msg, "empty file") != NULL);
    CHECK(st_proc_convert("/nonexistent/schedtrace.txt", dir, false, NULL, 0, st, &err) < 0);
    CHECK(!st->damaged && strstr(err.msg, "failed to open /nonexistent/schedtrace.txt") != NULL);

    /* the clock check: the probe thread's switch inside its sleep */
    struct st_proc_probe probes[2] = { { .tid = 10, .phase = 0, .t0 = 190, .t1 = 210 },
                                       { .tid = 20, .phase = 1, .t0 = 295, .t1 = 400 } };
    write_text(raw, "# schedtrace format=1 clock=mono size=1024 enabled=1 written=0 lost=0 pending=0\n"
               MINI(200, 0, "a", 10, "b", 20) MINI(300, 1, "b", 20, "c", 30));
    CHECK(st_proc_convert(raw, dir, true, probes, 2, st, &err) == 0);
    CHECK_EQ_LL(st->marker_trace_ns[0] - st->marker_mono_ns[0], 10);
    CHECK_EQ_LL(st->marker_trace_ns[1] - st->marker_mono_ns[1], 5);
    CHECK(st->wrote_syscalls && st->syscalls == 0);   /* asked for: written, empty */

    const char *names[] = { "schedtrace.txt", "sched.tsv", "syscalls.tsv" };
    for (size_t i = 0; i < 3; i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        unlink(path);
    }
    rmdir(dir);
    free(st);
}

HW_TEST_MAIN(test_switch(); test_comm_escapes(); test_sys(); test_header(); test_damage(); test_calls();
             test_control(); test_convert();)
