/* Unit tests of common/: JSON strings, whole transfers on pipes, value parsing, the error
 * convention, the gated start and the syscalls.tsv writer. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hwargs.h"
#include "hwerr.h"
#include "hwgate.h"
#include "hwio.h"
#include "hwjson.h"
#include "hwsafe.h"
#include "hwsyscalls.h"
#include "hwtest.h"

/* hw_json_str(s) as a C string. */
static const char *json(const char *s)
{
    static char out[512];
    FILE *f = fmemopen(out, sizeof(out), "w");
    hw_json_str(f, s);
    fclose(f);
    return out;
}

static void test_json(void)
{
    CHECK(!strcmp(json(NULL), "null"));
    CHECK(!strcmp(json(""), "\"\""));
    CHECK(!strcmp(json("a\"b\\c/d"), "\"a\\\"b\\\\c/d\""));
    CHECK(!strcmp(json("\n\t\r\b\f"), "\"\\n\\t\\r\\b\\f\""));
    CHECK(!strcmp(json("\x01\x1f\x7f"), "\"\\u0001\\u001f\\u007f\""));
    /* valid UTF-8 stays as it is: 2, 3 and 4 bytes */
    CHECK(!strcmp(json("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"), "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\""));
    /* invalid: a stray continuation byte, 0xff, a cut sequence, an overlong '/', a surrogate */
    CHECK(!strcmp(json("a\x80z"), "\"a\\ufffdz\""));
    CHECK(!strcmp(json("\xff"), "\"\\ufffd\""));
    CHECK(!strcmp(json("\xe2\x82"), "\"\\ufffd\\ufffd\""));
    CHECK(!strcmp(json("\xc0\xaf"), "\"\\ufffd\\ufffd\""));
    CHECK(!strcmp(json("\xed\xa0\x80"), "\"\\ufffd\\ufffd\\ufffd\""));
    CHECK(!strcmp(json("\xf4\x90\x80\x80"), "\"\\ufffd\\ufffd\\ufffd\\ufffd\""));
}

static volatile sig_atomic_t alarms;
static void on_alarm(int sig) { (void)sig; alarms++; }

/* 1 MiB through a 4 KiB pipe to a slow reader, while a 1 ms timer interrupts the blocked writer:
 * write() returns short counts and EINTR, and every byte still arrives, in order. */
static void test_write_all_partial(void)
{
    enum { LEN = 1 << 20 };
    int p[2], back[2];
    CHECK(pipe(p) == 0 && pipe(back) == 0);
    fcntl(p[1], F_SETPIPE_SZ, 4096);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[1]);
        close(back[0]);
        uint8_t buf[1000];
        uint64_t sum = 0, n = 0;
        ssize_t r;
        while ((r = read(p[0], buf, sizeof(buf))) > 0) {
            for (ssize_t i = 0; i < r; i++, n++)
                sum += buf[i] ^ (uint8_t)(n * 7);
            if (n % 65536 < 1000)
                usleep(1000);
        }
        uint64_t result[2] = {n, sum};
        _exit(hw_write_all(back[1], result, sizeof(result)) == 0 ? 0 : 1);
    }
    close(p[0]);
    close(back[1]);
    uint8_t *data = malloc(LEN);
    for (size_t i = 0; i < LEN; i++)
        data[i] = (uint8_t)(i * 7);
    struct sigaction sa = {.sa_handler = on_alarm};  /* no SA_RESTART: writes are interrupted */
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval tick = {{0, 1000}, {0, 1000}}, off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &tick, NULL);
    CHECK_EQ_LL(hw_write_all(p[1], data, LEN), 0);
    setitimer(ITIMER_REAL, &off, NULL);
    CHECK(alarms > 10);  /* the writer was interrupted while blocked, again and again */
    close(p[1]);
    uint64_t result[2] = {0, 1};
    CHECK_EQ_LL(hw_read_all(back[0], result, sizeof(result)), 0);
    CHECK_EQ_LL(result[0], LEN);
    CHECK_EQ_LL(result[1], 0);  /* each byte was what was written at its place */
    int status = -1;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* the reader gone: -EPIPE (SIGPIPE ignored), never a silent success */
    signal(SIGPIPE, SIG_IGN);
    CHECK(pipe(p) == 0);
    close(p[0]);
    CHECK_EQ_LL(hw_write_all(p[1], data, 10), -EPIPE);
    close(p[1]);
    /* the writer gone before all was read: -EPIPE */
    CHECK(pipe(p) == 0);
    CHECK_EQ_LL(hw_write_all(p[1], "abc", 3), 0);
    close(p[1]);
    char got[8];
    CHECK_EQ_LL(hw_read_all(p[0], got, 3), 0);
    CHECK(!memcmp(got, "abc", 3));
    CHECK_EQ_LL(hw_read_all(p[0], got, 1), -EPIPE);
    close(p[0]);
    close(back[0]);
    signal(SIGPIPE, SIG_DFL);
    free(data);
}

static void test_ready_notify(void)
{
    int p[2], none = -1;
    char got[16] = "";
    CHECK(pipe(p) == 0);
    CHECK_EQ_LL(hw_ready_notify(&none), 0);
    CHECK_EQ_LL(hw_ready_notify(&p[1]), 0);
    CHECK_EQ_LL(p[1], -1);
    CHECK_EQ_LL(read(p[0], got, sizeof(got)), 6);
    CHECK(!memcmp(got, "ready\n", 6));
    CHECK_EQ_LL(read(p[0], got, sizeof(got)), 0);  /* closed: the starter sees the end too */
    close(p[0]);
}

static void test_numbers(void)
{
    struct hw_err err = {0};
    int64_t v;
    int i;
    CHECK(hw_parse_i64("--n", "30", 1, 30, &v, &err) == 0 && v == 30);
    CHECK(hw_parse_i64("--n", "31", 1, 30, &v, &err) != 0);
    CHECK(!strcmp(err.msg, "failed to parse --n: expected an integer from 1 to 30, got '31'") && err.usage);
    CHECK(hw_parse_i64("--n", "", 1, 30, &v, &err) != 0);
    CHECK(hw_parse_i64("--n", "12x", 1, 30, &v, &err) != 0);
    CHECK(hw_parse_i64("--n", "99999999999999999999", 1, INT64_MAX, &v, &err) != 0);
    CHECK(hw_parse_int("-r", "-3", -5, 5, &i, &err) == 0 && i == -3);
    CHECK(hw_parse_pid("-p", "4242", &i, &err) == 0 && i == 4242);
    CHECK(hw_parse_pid("-p", "0", &i, &err) != 0);
    CHECK(hw_parse_pid("-p", "12x", &i, &err) != 0);
    CHECK(!strcmp(err.msg, "failed to parse -p: expected a process id, got '12x'"));
    CHECK(hw_parse_pid("-p", "4294967297", &i, &err) != 0);
}

static void test_sizes(void)
{
    struct hw_err err = {0};
    int64_t v;
    CHECK(hw_parse_size("--s", "8k", 1, 1 << 30, &v, &err) == 0 && v == 8192);
    CHECK(hw_parse_size("--s", "2M", 1, 1 << 30, &v, &err) == 0 && v == 2 << 20);
    CHECK(hw_parse_size("--s", "1GiB", 1, 1LL << 31, &v, &err) == 0 && v == 1LL << 30);
    CHECK(hw_parse_size("--s", "3KB", 1, 1 << 30, &v, &err) == 0 && v == 3072);
    CHECK(hw_parse_size("--s", "12", 1, 1 << 30, &v, &err) == 0 && v == 12);
    CHECK(hw_parse_size("--s", "12x", 1, 1 << 30, &v, &err) != 0);
    CHECK(hw_parse_size("--s", "12kX", 1, 1 << 30, &v, &err) != 0);
    CHECK(hw_parse_size("--s", "0", 1, 1 << 30, &v, &err) != 0);
    CHECK(hw_parse_size("--s", "-1k", 0, 1 << 30, &v, &err) != 0);
    CHECK(hw_parse_size("--s", "2G", 1, 1 << 30, &v, &err) != 0);   /* above the limit */
    CHECK(hw_parse_size("--s", "9999999999999G", 1, INT64_MAX, &v, &err) != 0);  /* overflow */
}

static void test_durations(void)
{
    struct hw_err err = {0};
    int64_t v;
    CHECK(hw_parse_duration_ns("--d", "2", 1, &v, &err) == 0 && v == 2000000000LL);
    CHECK(hw_parse_duration_ns("--d", "2.5s", 1, &v, &err) == 0 && v == 2500000000LL);
    CHECK(hw_parse_duration_ns("--d", "500ms", 1, &v, &err) == 0 && v == 500000000LL);
    CHECK(hw_parse_duration_ns("--d", "300ms", 1, &v, &err) == 0 && v == 300000000LL);
    CHECK(hw_parse_duration_ns("--d", "100us", 1, &v, &err) == 0 && v == 100000LL);
    CHECK(hw_parse_duration_ns("--d", "7ns", 1, &v, &err) == 0 && v == 7);
    CHECK(hw_parse_duration_ns("--d", "1m", 1, &v, &err) == 0 && v == 60000000000LL);
    CHECK(hw_parse_duration_ns("--d", "0.5m", 1, &v, &err) == 0 && v == 30000000000LL);
    CHECK(hw_parse_duration_ns("--d", "0", 0, &v, &err) == 0 && v == 0);
    CHECK(hw_parse_duration_ns("--d", "0", 1, &v, &err) != 0);
    CHECK(!strncmp(err.msg, "failed to parse --d: expected a duration above 0", 48));
    CHECK(hw_parse_duration_ns("--d", "-1", 0, &v, &err) != 0);
    CHECK(hw_parse_duration_ns("--d", "3h", 0, &v, &err) != 0);
    CHECK(hw_parse_duration_ns("--d", "2 s", 0, &v, &err) != 0);
    CHECK(hw_parse_duration_ns("--d", "soon", 0, &v, &err) != 0);
    CHECK(!strcmp(err.msg + strlen(err.msg) - 14, ", got 'soon'") || strstr(err.msg, "got 'soon'"));
    CHECK(hw_parse_duration_ns("--d", "inf", 0, &v, &err) != 0);
    CHECK(hw_parse_duration_ns("--d", "nan", 0, &v, &err) != 0);
    CHECK(hw_parse_duration_ns("--d", "0x10", 0, &v, &err) != 0);
    CHECK(hw_parse_duration_ns("--d", "1441m", 0, &v, &err) != 0);  /* more than a day */
    CHECK(hw_parse_duration_ns("--d", "", 0, &v, &err) != 0);
}

static void test_ready_fd(void)
{
    struct hw_err err = {0};
    int p[2], fd = -1;
    CHECK(pipe(p) == 0);
    char text[16];
    snprintf(text, sizeof(text), "%d", p[1]);
    CHECK(hw_parse_ready_fd("--ready-fd", text, &fd, &err) == 0 && fd == p[1]);
    CHECK(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    close(p[0]);
    close(p[1]);
    CHECK(hw_parse_ready_fd("--ready-fd", text, &fd, &err) != 0);   /* closed now */
    CHECK(strstr(err.msg, "is not open") != NULL && err.usage);
    CHECK(hw_parse_ready_fd("--ready-fd", "x", &fd, &err) != 0);
}

static void test_getopt_error(void)
{
    static const struct option opts[] = {{"duration", required_argument, 0, 'd'}, {0, 0, 0, 0}};
    char a0[] = "t", a1[] = "--bogus", a2[] = "-x", a3[] = "--duration", a4[] = "-d";
    struct hw_err err = {0};
    char *cases[][2] = {{a0, a1}, {a0, a2}, {a0, a3}, {a0, a4}};
    const char *want[] = {"unknown option '--bogus'", "unknown option '-x'", "option '--duration' needs a value",
                          "option '-d' needs a value"};
    opterr = 0;
    for (int i = 0; i < 4; i++) {
        optind = 0;
        int c = getopt_long(2, cases[i], ":d:", opts, NULL);
        CHECK(c == '?' || c == ':');
        hw_getopt_error(c, cases[i], &err);
        CHECK(!strcmp(err.msg, want[i]) && err.usage);
    }
    optind = 0;
}

static void test_err(void)
{
    struct hw_err err = {0};
    hw_adderr(&err, "first %d", 1);
    hw_adderr(&err, "second");
    CHECK(!strcmp(err.msg, "first 1\nsecond") && !err.usage);
    hw_seterr(&err, "failed to open %s: %s", "x", "gone");
    CHECK(!strcmp(err.msg, "failed to open x: gone"));
    hw_seterr(NULL, "ignored");
    hw_usage_err(&err, "bad");
    CHECK(err.usage == 1);
}

static int to_devnull_stderr(void *arg)
{
    (void)arg;
    int fd = open("/dev/null", O_WRONLY);
    return fd < 0 || dup2(fd, STDERR_FILENO) < 0;
}

static int set_marker(void *arg)
{
    return arg ? setenv("HW_GATE_TEST", (const char *)arg, 1) : -1;  /* no value: a failed preparation */
}

static int wait_status(pid_t pid)
{
    int status = -1;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void test_gate(void)
{
    char dir[] = "/tmp/hw-common-unit-XXXXXX", path[128], script[256];
    struct hw_err err = {0};
    struct hw_gate g;
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof(path), "%s/ran", dir);
    snprintf(script, sizeof(script), "echo \"$HW_GATE_TEST\" > %s", path);
    char *argv[] = {"sh", "-c", script, NULL};
    /* the child waits at the gate: nothing runs until it opens */
    CHECK(hw_gate_start(&g, "hw-test", argv, set_marker, "opened", &err) == 0);
    CHECK(g.pid > 0 && g.go_fd >= 0);
    usleep(50000);
    struct stat st;
    CHECK(stat(path, &st) < 0);
    CHECK(waitpid(g.pid, NULL, WNOHANG) == 0);
    CHECK(hw_gate_open(&g, &err) == 0 && g.go_fd == -1);
    CHECK_EQ_LL(wait_status(g.pid), 0);
    char text[32] = "";
    FILE *f = fopen(path, "r");
    CHECK(f && fgets(text, sizeof(text), f));
    if (f)
        fclose(f);
    CHECK(!strcmp(text, "opened\n"));  /* the preparation ran in the child before exec */
    unlink(path);
    /* shut without opening: the command never runs */
    CHECK(hw_gate_start(&g, "hw-test", argv, NULL, NULL, &err) == 0);
    hw_gate_shut(&g);
    CHECK_EQ_LL(wait_status(g.pid), 127);
    CHECK(stat(path, &st) < 0);
    CHECK(hw_gate_open(&g, &err) == 0);   /* no-op once shut */
    /* a command that cannot run: 127 */
    char *missing[] = {"/nonexistent/hw-prog", NULL};
    CHECK(hw_gate_start(&g, "hw-test", missing, to_devnull_stderr, NULL, &err) == 0);
    CHECK(hw_gate_open(&g, &err) == 0);
    CHECK_EQ_LL(wait_status(g.pid), 127);
    /* a preparation that fails: 127, nothing runs */
    CHECK(hw_gate_start(&g, "hw-test", argv, set_marker, NULL, &err) == 0);
    CHECK(hw_gate_open(&g, &err) == 0);
    CHECK_EQ_LL(wait_status(g.pid), 127);
    CHECK(stat(path, &st) < 0);
    /* opening the gate of a child that is gone: an error, not a SIGPIPE */
    CHECK(hw_gate_start(&g, "hw-test", argv, NULL, NULL, &err) == 0);
    kill(g.pid, SIGKILL);
    CHECK_EQ_LL(wait_status(g.pid), 128 + SIGKILL);
    CHECK(hw_gate_open(&g, &err) == -1 && strstr(err.msg, "failed to start pid") != NULL);
    rmdir(dir);
}

static void test_syscalls_tsv(void)
{
    char line[HW_SYS_LINE_MAX], head[1024];
    struct hw_sys_line l = {.t_enter_ns = 1000000000123LL, .t_exit_ns = 1000000000456LL, .pid = 42, .tid = 43,
                            .call = "write", .fd = 4, .req_bytes = 5000, .result = -11, .has_result = 1,
                            .fd_kind = "pipe", .fd_desc = "pipe:[77]"};
    size_t n = hw_sys_format(line, &l);
    line[n] = '\0';
    CHECK(!strcmp(line, "1000000000123\t1000000000456\t42\t43\twrite\t4\t5000\t-11\tpipe\tpipe:[77]\t0\n"));
    /* unfinished: no result; the description escaped so that it cannot break the line */
    l.unfinished = 1, l.has_result = 0, l.req_bytes = -1, l.call = "accept", l.fd_kind = "file";
    l.fd_desc = "/a\tb\\c\nd";
    n = hw_sys_format(line, &l);
    line[n] = '\0';
    CHECK(!strcmp(line, "1000000000123\t1000000000456\t42\t43\taccept\t4\t-1\t\tfile\t/a\\tb\\\\c\\nd\t1\n"));
    l.t_enter_ns = INT64_MIN, l.fd_desc = NULL, l.fd_kind = "unknown";
    n = hw_sys_format(line, &l);
    line[n] = '\0';
    CHECK(!strncmp(line, "-9223372036854775808\t", 21) && strstr(line, "\tunknown\t\t1\n") != NULL);
    /* a description longer than the limit is cut, and the line still fits */
    char big[2 * HW_SYS_DESC_MAX];
    memset(big, '\\', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    l.t_enter_ns = l.t_exit_ns = l.pid = l.tid = l.fd = l.req_bytes = INT64_MIN, l.fd_desc = big;
    CHECK(hw_sys_format(line, &l) <= sizeof(line));
    int hl = hw_sys_header(head, sizeof(head), "tracefs", "hw-schedtrace", "read,write", "# mode: seccomp\n");
    CHECK(hl > 0 && (size_t)hl == strlen(head));
    CHECK(!strcmp(head, "# format: hostwire-tsv 2\n# kind: syscalls\n# backend: tracefs\n# clock: CLOCK_MONOTONIC\n"
                        "# tool: hw-schedtrace\n# calls: read,write\n# mode: seccomp\nt_enter_ns\tt_exit_ns\tpid\ttid\t"
                        "call\tfd\treq_bytes\tresult\tfd_kind\tfd_desc\tunfinished\n"));
    CHECK_EQ_LL(hw_sys_header(head, 10, "ptrace", "hw-iotrace 1.0", "read", NULL), -1);
    /* the last line: a trailer with the record count, or the reason the file is not whole */
    n = hw_sys_trailer(line, 12345);
    line[n] = '\0';
    CHECK(!strcmp(line, "# end: records=12345\n"));
    n = hw_sys_trailer(line, 0);
    line[n] = '\0';
    CHECK(!strcmp(line, "# end: records=0\n"));
    n = hw_sys_damaged(line, "failed to read x.spool: damaged block at byte 96\nsecond line");
    line[n] = '\0';
    CHECK(!strcmp(line, "# damaged: failed to read x.spool: damaged block at byte 96\\nsecond line\n"));
    n = hw_sys_damaged(line, "");
    line[n] = '\0';
    CHECK(!strcmp(line, "# damaged: the tracer failed\n"));
}

/* Reads path whole into buf (NUL-terminated): its length, or -1. */
static long slurp(const char *path, char *buf, size_t size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, size - 1, f);
    buf[n] = '\0';
    fclose(f);
    return (long)n;
}

/* hw_write_file_atomic: a link at the target is replaced, never followed; a symlinked folder is
 * refused; nothing temporary is left; a stream dropped with hw_safe_abort leaves the old file. */
static void test_safe_write(void)
{
    char dir[] = "/tmp/hwsafe-XXXXXX", path[256], victim[256], link[256], buf[128];
    struct hw_safe_file sf;
    FILE *f;
    CHECK(mkdtemp(dir) != NULL);
    snprintf(victim, sizeof(victim), "%s/victim", dir);
    snprintf(path, sizeof(path), "%s/out.json", dir);
    CHECK(hw_write_file_atomic(dir, "victim", "precious\n", 9) == 0);
    CHECK(symlink(victim, path) == 0);
    CHECK(hw_write_file_atomic(dir, "out.json", "{}\n", 3) == 0);
    CHECK(slurp(victim, buf, sizeof(buf)) == 9 && !strcmp(buf, "precious\n"));
    struct stat st;
    CHECK(lstat(path, &st) == 0 && S_ISREG(st.st_mode));
    CHECK(slurp(path, buf, sizeof(buf)) == 3 && !strcmp(buf, "{}\n"));
    /* a dropped stream: the old file stays */
    f = hw_safe_open(&sf, dir, "out.json");
    CHECK(f != NULL);
    if (f) {
        fputs("half", f);
        hw_safe_abort(&sf);
    }
    CHECK(slurp(path, buf, sizeof(buf)) == 3);
    /* a symlinked folder is refused */
    snprintf(link, sizeof(link), "%s/linked", dir);
    CHECK(symlink(dir, link) == 0);
    int rc = hw_write_file_atomic(link, "x", "x", 1);
    CHECK(rc == -ELOOP || rc == -ENOTDIR);
    CHECK(hw_open_dir_nofollow(link) < 0);
    int fd = hw_open_dir_nofollow(dir);
    CHECK(fd >= 0);
    if (fd >= 0)
        close(fd);
    CHECK(hw_write_file_atomic(dir, "a/b", "x", 1) == -EINVAL);
    /* only victim, out.json and linked are left: no temporary file */
    int entries = 0;
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "ls -A %s | wc -l", dir);
    FILE *ls = popen(cmd, "r");
    if (ls) {
        if (fscanf(ls, "%d", &entries) != 1)
            entries = -1;
        pclose(ls);
    }
    CHECK_EQ_LL(entries, 3);
    unlink(path);
    unlink(victim);
    unlink(link);
    rmdir(dir);
}

HW_TEST_MAIN(test_json(); test_write_all_partial(); test_ready_notify(); test_numbers(); test_sizes();
             test_durations(); test_ready_fd(); test_getopt_error(); test_err(); test_gate();
             test_syscalls_tsv(); test_safe_write();)
