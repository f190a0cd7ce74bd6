/* The background workload: the sieve of Eratosthenes over 2^N bytes, byte i standing for the
 * number i, so one round finds the primes below 2^N. HB_SIEVE_COPIES identical copies of the
 * routine are compiled in, so that processes can run different code (a larger code working set)
 * without recompiling. */
#ifndef HB_SIEVE_H
#define HB_SIEVE_H
#include <stdint.h>

#define HB_SIEVE_MIN_LOG2 1
#define HB_SIEVE_MAX_LOG2 30
#define HB_SIEVE_COPIES 32

struct hb_sieve_result {
    int64_t primes;   /* how many primes are below 2^N */
    int64_t largest;  /* the largest of them, 0 if none */
};

/* Runs one round with copy `copy` (0 <= copy < HB_SIEVE_COPIES) over buf[0 .. 2^log2). */
struct hb_sieve_result hb_sieve_round(int copy, uint8_t *buf, int log2);
/* The precomputed answer for 2^log2 (computed once, independently, and checked in the tests). */
struct hb_sieve_result hb_sieve_expected(int log2);
#endif
