/* The sampler's filter and resource specs against hand-made /proc texts. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hwtest.h"
#include "../psample.h"

static int differs(const char *now, const char *kept, double share)
{
    return ps_differs(now, strlen(now), kept, strlen(kept), share);
}

static void test_filter(void)
{
    const char *stat = "cpu  100 0 50 1000\nctxt 5000\n";
    CHECK(!differs(stat, stat, 0.05));
    CHECK(!differs("cpu  104 0 50 1000\nctxt 5000\n", stat, 0.05));  /* 4 % of 100 */
    CHECK(differs("cpu  105 0 50 1000\nctxt 5000\n", stat, 0.05));   /* 5 %: kept */
    CHECK(differs("cpu  95 0 50 1000\nctxt 5000\n", stat, 0.05));    /* a fall counts as much */
    CHECK(differs("cpu  100 1 50 1000\nctxt 5000\n", stat, 0.05));   /* a number that was 0 */
    CHECK(differs("cpu  100 0 50 1000\nctxt 5000 7\n", stat, 0.05)); /* one number more */
    CHECK(!differs("cpux 100 0 50 1000\nctxt 5000\n", stat, 0.05));  /* words are not compared */
    CHECK(!differs(" lo: 10|20\n", " lo: 10|20\n", 0.5));            /* ':' and '|' separate */
    CHECK(differs(" lo: 10|31\n", " lo: 10|20\n", 0.5));
    CHECK(!differs(" lo: 10|29\n", " lo: 10|20\n", 0.5));
    CHECK(!differs("0.52 0.40\n", "0.50 0.40\n", 0.05));             /* decimals */
    CHECK(differs("-3\n", "-2\n", 0.05));
    CHECK(!differs("", "", 0.05));
}

static void test_specs(void)
{
    struct ps_resource r;
    struct hw_err err = {0};
    CHECK(ps_parse_resource("cpu:/proc/stat:3:0.05", &r, &err) == 0);
    CHECK(strcmp(r.name, "cpu") == 0 && strcmp(r.path, "/proc/stat") == 0 && r.every == 3 && r.share == 0.05);
    const char *bad[] = {"cpu", "cpu:/proc/stat", "cpu:/proc/stat:1", ":/proc/stat:1:0", "cpu::1:0",
                         "cpu:/proc/stat:0:0", "cpu:/proc/stat:x:0", "cpu:/proc/stat:1:1", "cpu:/proc/stat:1:-0.1",
                         "cpu:/proc/stat:1:"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err.usage = 0;
        CHECK(ps_parse_resource(bad[i], &r, &err) < 0 && err.usage);
    }
}

static void test_read_whole_file_twice(void)
{
    char path[] = "/tmp/psample-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    char big[40000];
    memset(big, 'x', sizeof big);
    CHECK(write(fd, big, sizeof big) == (ssize_t)sizeof big);
    struct ps_text t = {0};
    struct hw_err err = {0};
    CHECK(ps_read_file(path, &t, &err) == 0 && t.len == sizeof big);
    CHECK(ps_read_file(path, &t, &err) == 0 && t.len == sizeof big);  /* whole again */
    CHECK(ps_read_file("/nonexistent/x", &t, &err) < 0 && strstr(err.msg, "failed to open /nonexistent/x"));
    ps_text_free(&t);
    close(fd);
    unlink(path);
}

HW_TEST_MAIN(test_filter(); test_specs(); test_read_whole_file_twice();)
