/* The memory hw-iotrace --preload shares with the traced processes: libhwiowrap.so writes each
 * call's record there, hw-iotrace reads them after the command has ended. The region is a memfd
 * hw-iotrace creates and maps before the command starts; the command inherits a descriptor of
 * it (an exec'd image maps it again from there), a forked child inherits the mapping. Nothing is
 * written at the end of a thread or a process, so no way of ending (exit from any thread, a
 * fatal signal, SIGKILL, exec) can lose a record that was made.
 *
 * A record's slot is claimed before the call, and its state word, written last with release
 * order, says how far it got: FREE (claimed, the call not made: a thread killed in between),
 * ENTERED (the entry is written and the call made, but it never returned: an unfinished record),
 * DONE (the whole record). A call finding no slot left is counted in `lost`, never waited for.
 * Same machine, same build on both sides: the layout is read as is. */
#ifndef IOT_REGION_LAYOUT_H
#define IOT_REGION_LAYOUT_H
#include <stdatomic.h>
#include <stdint.h>

#include "hwclock.h"
#include "iotrace.h"

_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2 && ATOMIC_INT_LOCK_FREE == 2,
               "the region's counters are shared between processes: they must be lock-free");

#define IOT_REGION_MAGIC 0x31525748u /* "HWR1" */
#define IOT_REGION_SLOTS (1u << 24)  /* default capacity (HWIOWRAP_SLOTS): 1 GiB at most, touched as used */
#define IOT_REGION_DESCS 65536u      /* fd descriptions */
/* A thread claims its slots in runs, IOT_CHUNK (one page) at first, doubling up to IOT_CHUNK_MAX:
 * pages no other thread writes, and one atomic add on the shared cursor per run instead of one
 * per call. */
#define IOT_CHUNK 64u
#define IOT_CHUNK_MAX 1024u
/* With TSC stamps, a thread whose call ends this many ticks (about 50 ms) after the last anchor
 * takes the next one (see iot_anchor_now). */
#define IOT_ANCHOR_TICKS (1ull << 27)

enum { IOT_SLOT_FREE, IOT_SLOT_ENTERED, IOT_SLOT_DONE, IOT_SLOT_ANCHOR };

struct iot_slot {
    _Atomic uint32_t state;          /* IOT_SLOT_*, written last (release) */
    uint32_t image;                  /* the process image that wrote it: keys its descriptions */
    struct iot_rec r;                /* ANCHOR: t_enter_ns is a TSC reading, t_exit_ns the
                                        CLOCK_MONOTONIC reading of the same instant */
};
_Static_assert(sizeof(struct iot_slot) == 64, "one slot, one cache line");

/* An fd description, published once per process image before any record naming it. */
struct iot_desc_slot {
    _Atomic uint32_t state;          /* 1 once written (release) */
    uint32_t image, id;
    uint16_t kind, len;
    char text[IOT_DESC_MAX];
};

struct iot_region {
    uint32_t magic;
    uint32_t use_tsc;                /* stamps are TSC ticks, mapped onto CLOCK_MONOTONIC by the anchors */
    uint64_t nslots, ndescs;
    uint64_t size;                   /* bytes of the whole region */
    _Alignas(64) _Atomic uint64_t cursor;     /* slots claimed (may pass nslots: then none was left) */
    _Alignas(64) _Atomic uint64_t lost;       /* calls that found no slot */
    _Atomic uint64_t desc_cursor;             /* description slots claimed */
    _Atomic uint32_t images;                  /* process images attached (each exec, each fork) */
    _Alignas(64) _Atomic uint64_t anchor_tsc; /* TSC of the latest anchor */
};

#define IOT_REGION_HEAD 4096u

static inline uint64_t iot_region_size(uint64_t nslots, uint64_t ndescs)
{
    return IOT_REGION_HEAD + ndescs * sizeof(struct iot_desc_slot) + nslots * sizeof(struct iot_slot);
}

static inline struct iot_desc_slot *iot_region_descs(struct iot_region *r)
{
    return (struct iot_desc_slot *)((char *)r + IOT_REGION_HEAD);
}

static inline struct iot_slot *iot_region_slots(struct iot_region *r, uint64_t ndescs)
{
    return (struct iot_slot *)((char *)iot_region_descs(r) + ndescs * sizeof(struct iot_desc_slot));
}

/* An anchor: a TSC reading and CLOCK_MONOTONIC at the same instant (the TSC read on both sides of
 * clock_gettime, the middle taken). Stamps between two anchors are mapped linearly. */
struct iot_anchor {
    int64_t tsc, ns;
};

static inline struct iot_anchor iot_anchor_now(void)
{
    struct iot_anchor a = {0, hw_mono_ns()};
#if defined(__x86_64__)
    uint64_t t0 = __builtin_ia32_rdtsc();
    a.ns = hw_mono_ns();
    uint64_t t1 = __builtin_ia32_rdtsc();
    a.tsc = (int64_t)(t0 + (t1 - t0) / 2);
#endif
    return a;
}
#endif
