/* Minimal C unit-test harness: CHECK() records a failure and goes on; HW_TEST_MAIN prints the
 * closing line "N passed, N failed" that CI reads, and exits non-zero on any failure. */
#ifndef HWTEST_H
#define HWTEST_H
#include <stdio.h>

static int hwtest_passed, hwtest_failed;

#define CHECK(cond) do { \
    if (cond) { hwtest_passed++; } \
    else { hwtest_failed++; fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); } \
} while (0)

#define CHECK_EQ_LL(got, want) do { \
    long long g_ = (long long)(got), w_ = (long long)(want); \
    if (g_ == w_) { hwtest_passed++; } \
    else { hwtest_failed++; fprintf(stderr, "%s:%d: %s = %lld, expected %lld\n", \
                                    __FILE__, __LINE__, #got, g_, w_); } \
} while (0)

#define HW_TEST_MAIN(...) int main(void) { \
    __VA_ARGS__ \
    printf("%d passed, %d failed\n", hwtest_passed, hwtest_failed); \
    return hwtest_failed != 0; \
}
#endif
