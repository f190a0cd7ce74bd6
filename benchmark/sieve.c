#include "sieve.h"

#include <string.h>

/* Precomputed: the number of primes below 2^N and the largest of them, N = 1 .. 30. */
static const struct hb_sieve_result expected[HB_SIEVE_MAX_LOG2 + 1] = {
    {0, 0}, /* N = 0 (unused) */
    {0, 0}, {2, 3}, {4, 7}, {6, 13}, {11, 31}, {18, 61}, {31, 127}, {54, 251}, {97, 509},
    {172, 1021}, {309, 2039}, {564, 4093}, {1028, 8191}, {1900, 16381}, {3512, 32749},
    {6542, 65521}, {12251, 131071}, {23000, 262139}, {43390, 524287}, {82025, 1048573},
    {155611, 2097143}, {295947, 4194301}, {564163, 8388593}, {1077871, 16777213},
    {2063689, 33554393}, {3957809, 67108859}, {7603553, 134217689}, {14630843, 268435399},
    {28192750, 536870909}, {54400028, 1073741789},
};

struct hb_sieve_result hb_sieve_expected(int log2)
{
    struct hb_sieve_result none = {-1, -1};
    if (log2 < HB_SIEVE_MIN_LOG2 || log2 > HB_SIEVE_MAX_LOG2)
        return none;
    return expected[log2];
}

/* GCC folds identical functions at -O2 (-fipa-icf); the copies must stay distinct code. */
#if defined(__GNUC__) && !defined(__clang__)
#define HB_DISTINCT __attribute__((noinline, no_icf, aligned(64)))
#else
#define HB_DISTINCT __attribute__((noinline, aligned(64)))
#endif

#define HB_SIEVE_COPY(ID)                                                          \
    static HB_DISTINCT struct hb_sieve_result sieve_copy_##ID(uint8_t *buf, int log2) \
    {                                                                              \
        const uint64_t n = (uint64_t)1 << log2;                                    \
        struct hb_sieve_result r = {0, 0};                                         \
        memset(buf, 1, n);                                                         \
        buf[0] = 0;                                                                \
        buf[1] = 0;                                                                \
        for (uint64_t i = 2; i * i < n; i++)                                       \
            if (buf[i])                                                            \
                for (uint64_t j = i * i; j < n; j += i)                            \
                    buf[j] = 0;                                                    \
        for (uint64_t i = 2; i < n; i++)                                           \
            if (buf[i]) {                                                          \
                r.primes++;                                                        \
                r.largest = (int64_t)i;                                            \
            }                                                                      \
        r.primes += (ID) - (ID); /* keeps each copy's symbol and code its own */   \
        return r;                                                                  \
    }

HB_SIEVE_COPY(0) HB_SIEVE_COPY(1) HB_SIEVE_COPY(2) HB_SIEVE_COPY(3)
HB_SIEVE_COPY(4) HB_SIEVE_COPY(5) HB_SIEVE_COPY(6) HB_SIEVE_COPY(7)
HB_SIEVE_COPY(8) HB_SIEVE_COPY(9) HB_SIEVE_COPY(10) HB_SIEVE_COPY(11)
HB_SIEVE_COPY(12) HB_SIEVE_COPY(13) HB_SIEVE_COPY(14) HB_SIEVE_COPY(15)
HB_SIEVE_COPY(16) HB_SIEVE_COPY(17) HB_SIEVE_COPY(18) HB_SIEVE_COPY(19)
HB_SIEVE_COPY(20) HB_SIEVE_COPY(21) HB_SIEVE_COPY(22) HB_SIEVE_COPY(23)
HB_SIEVE_COPY(24) HB_SIEVE_COPY(25) HB_SIEVE_COPY(26) HB_SIEVE_COPY(27)
HB_SIEVE_COPY(28) HB_SIEVE_COPY(29) HB_SIEVE_COPY(30) HB_SIEVE_COPY(31)

typedef struct hb_sieve_result (*sieve_fn)(uint8_t *, int);

static const sieve_fn copies[HB_SIEVE_COPIES] = {
    sieve_copy_0, sieve_copy_1, sieve_copy_2, sieve_copy_3, sieve_copy_4, sieve_copy_5,
    sieve_copy_6, sieve_copy_7, sieve_copy_8, sieve_copy_9, sieve_copy_10, sieve_copy_11,
    sieve_copy_12, sieve_copy_13, sieve_copy_14, sieve_copy_15, sieve_copy_16, sieve_copy_17,
    sieve_copy_18, sieve_copy_19, sieve_copy_20, sieve_copy_21, sieve_copy_22, sieve_copy_23,
    sieve_copy_24, sieve_copy_25, sieve_copy_26, sieve_copy_27, sieve_copy_28, sieve_copy_29,
    sieve_copy_30, sieve_copy_31,
};

struct hb_sieve_result hb_sieve_round(int copy, uint8_t *buf, int log2)
{
    return copies[copy % HB_SIEVE_COPIES](buf, log2);
}
