/* C unit tests of the hw-schedtrace library parts that need no kernel: stats parsing, TSV
 * escaping, and the trace.dat reader on hand-built files (bad input must fail with a message). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hwtest.h"
#include "../st.h"
#include "../st_internal.h"

static void test_stats(void)
{
    struct st_cpustat st;
    const char *text = "entries: 12\noverrun: 3456\ncommit overrun: 0\nbytes: 4000\n"
                       "oldest event ts:  5.000\nnow ts:  6.1\ndropped events: 7\nread events: 89\n";
    CHECK_EQ_LL(st_stats_parse(text, &st), 6);
    CHECK_EQ_LL(st.entries, 12);
    CHECK_EQ_LL(st.overrun, 3456);
    CHECK_EQ_LL(st.commit_overrun, 0);
    CHECK_EQ_LL(st.bytes, 4000);
    CHECK_EQ_LL(st.dropped, 7);
    CHECK_EQ_LL(st.read, 89);
    /* a counter that is absent stays unknown, never 0 */
    CHECK_EQ_LL(st_stats_parse("entries: 5\n", &st), 1);
    CHECK_EQ_LL(st.overrun, ST_UNKNOWN);
    CHECK_EQ_LL(st.read, ST_UNKNOWN);
    CHECK_EQ_LL(st_stats_parse(NULL, &st), 0);
    CHECK_EQ_LL(st.entries, ST_UNKNOWN);
    CHECK_EQ_LL(st_stats_parse("entries: garbage\n", &st), 0);
    CHECK_EQ_LL(st.entries, ST_UNKNOWN);
}

static void test_escape(void)
{
    char out[64];
    st_tsv_escape(out, sizeof(out), "a\tb\nc\\d", 7);
    CHECK(strcmp(out, "a\\tb\\nc\\\\d") == 0);
    st_tsv_escape(out, sizeof(out), "abc\0def", 7);   /* stops at NUL */
    CHECK(strcmp(out, "abc") == 0);
    st_tsv_escape(out, 5, "abcdefgh", 8);              /* bounded */
    CHECK(strlen(out) < 5);
}

static int write_bytes(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    size_t w = fwrite(data, 1, n, f);
    fclose(f);
    return w == n ? 0 : -1;
}

static void test_dat_errors(void)
{
    char path[] = "/tmp/st_test_XXXXXX";
    int fd = mkstemp(path);
    struct st_dat dat;
    struct hw_err err = { 0 };
    CHECK(fd >= 0);
    close(fd);
    CHECK(write_bytes(path, "hello", 5) == 0);
    CHECK(st_dat_open(&dat, path, &err) < 0);
    CHECK(strstr(err.msg, "magic") != NULL);
    CHECK(write_bytes(path, "\x17\x08\x44tracing7\0\0\x08", 14) == 0);
    CHECK(st_dat_open(&dat, path, &err) < 0);
    CHECK(strstr(err.msg, "version 7") != NULL);
    /* version 6 header cut short after the page size */
    CHECK(write_bytes(path, "\x17\x08\x44tracing6\0\0\x08\x00\x10\x00\x00", 18) == 0);
    CHECK(st_dat_open(&dat, path, &err) < 0);
    CHECK(strstr(err.msg, "header_page") != NULL);
    /* absurd section size */
    CHECK(write_bytes(path, "\x17\x08\x44tracing6\0\0\x08\x00\x10\x00\x00header_page\0"
                      "\xff\xff\xff\xff\xff\xff\xff\x7f", 38) == 0);
    CHECK(st_dat_open(&dat, path, &err) < 0);
    CHECK(strstr(err.msg, "claims") != NULL);
    CHECK(st_dat_open(&dat, "/nonexistent/trace.dat", &err) < 0);
    CHECK(strstr(err.msg, "No such file") != NULL);
    unlink(path);
}

static void test_names(void)
{
    char name[32];
    CHECK(st_instance_name(name, sizeof(name), 42, NULL) == 0 && strcmp(name, "hw-42") == 0);
    CHECK(st_instance_name(name, sizeof(name), 42, "sys") == 0 && strcmp(name, "hw-42-sys") == 0);
    CHECK(st_instance_name(name, 8, 42, "toolongsuffix") < 0);
}

HW_TEST_MAIN(test_stats(); test_escape(); test_dat_errors(); test_names();)
