/* Clock readings in integer nanoseconds: every host-local stamp in hostwire is CLOCK_MONOTONIC. */
#ifndef HWCLOCK_H
#define HWCLOCK_H
#include <stdint.h>
#include <time.h>

static inline int64_t hw_clock_ns(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline int64_t hw_mono_ns(void) { return hw_clock_ns(CLOCK_MONOTONIC); }
static inline int64_t hw_realtime_ns(void) { return hw_clock_ns(CLOCK_REALTIME); }
#endif
