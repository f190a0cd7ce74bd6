/* hw-iotrace's side of the region that hw-iotrace --preload shares with the traced processes
 * (region_layout.h has the layout both sides know): creating it, and reading it back into
 * syscalls.tsv after the command. */
#ifndef IOT_REGION_H
#define IOT_REGION_H
#include "hwerr.h"
#include "region_layout.h"

/* hw-iotrace's side (region.c). The traced program can write anywhere in the region, its head
 * included, so hw-iotrace reads it with its own copy of the geometry. */
struct iot_region_run {
    struct iot_region *map;
    int fd;                          /* the memfd, close-on-exec; -1 when none */
    struct iot_region head;          /* the head as created (magic, use_tsc, nslots, ndescs, size) */
};
/* Whether stamps should be TSC ticks: x86_64, the kernel's clocksource is tsc, and
 * HWIOWRAP_NO_TSC is not set. */
int iot_region_tsc_usable(void);
/* Creates and maps a region of nslots record slots. 0, or -1 with err set. */
int iot_region_create(struct iot_region_run *run, uint64_t nslots, int use_tsc, struct hw_err *err);
void iot_region_close(struct iot_region_run *run);

/* The region into syscalls.tsv (region_drain.c): the records in order of entry, stamps mapped
 * onto CLOCK_MONOTONIC through the anchors the library took and hw-iotrace's own first and last
 * (start, end); an unfinished call ends at its process image's last stamp after its entry, else
 * at t_end_ns (when the command was seen to end). Fills records_written, unfinished,
 * calls_seen (written + lost) of st. When the traced program wrote over the region (its head
 * changed, or a slot that no library writes) writes the records of the slots before the damage
 * and returns -EBADMSG with err set. */
int iot_region_drain(const struct iot_region_run *run, struct iot_anchor start, struct iot_anchor end,
                     int64_t t_end_ns, const char *tsv, uint32_t mask, struct iot_trace_stats *st,
                     struct hw_err *err);
#endif
