/* The shared region (region.h) into syscalls.tsv, once the command has ended: the records of
 * every slot that got as far as its entry, stamps mapped onto CLOCK_MONOTONIC, in order of entry.
 * Slots are copied out before use: a descendant that outlived the command may still be writing
 * its own. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "region.h"

struct drained {
    struct iot_rec r;
    uint32_t image;
    uint64_t slot;              /* order in the region: breaks ties of t_enter_ns */
};

struct desc_ref {
    uint64_t key;               /* image << 32 | id */
    const struct iot_desc_slot *d;
};

static int by_key(const void *a, const void *b)
{
    const struct desc_ref *x = a, *y = b;
    return (x->key > y->key) - (x->key < y->key);
}

static int by_tsc(const void *a, const void *b)
{
    const struct iot_anchor *x = a, *y = b;
    return (x->tsc > y->tsc) - (x->tsc < y->tsc);
}

static int by_entry(const void *a, const void *b)
{
    const struct drained *x = a, *y = b;
    if (x->r.t_enter_ns != y->r.t_enter_ns)
        return x->r.t_enter_ns < y->r.t_enter_ns ? -1 : 1;
    return (x->slot > y->slot) - (x->slot < y->slot);
}

/* The anchors in TSC order, keeping only those later than the one before in both clocks: two
 * anchors taken microseconds apart by two threads can disagree by the few ns of their readings,
 * and a segment that ran backwards would put a call's exit before its entry. */
static size_t clean_anchors(struct iot_anchor *a, size_t n)
{
    size_t kept = 0;
    qsort(a, n, sizeof(*a), by_tsc);
    for (size_t i = 0; i < n; i++)
        if (!kept || (a[i].tsc > a[kept - 1].tsc && a[i].ns > a[kept - 1].ns))
            a[kept++] = a[i];
    return kept;
}

/* t (TSC) on CLOCK_MONOTONIC: linear between the anchors around it, the nearest segment's rate
 * outside them. */
static int64_t tsc_to_ns(const struct iot_anchor *a, size_t n, int64_t t)
{
    if (n < 2)
        return n ? a[0].ns : t;
    size_t lo = 0, hi = n - 2;   /* the segment [a[k], a[k+1]] with the largest k, a[k].tsc <= t */
    while (lo < hi) {
        size_t mid = (lo + hi + 1) / 2;
        if (a[mid].tsc <= t)
            lo = mid;
        else
            hi = mid - 1;
    }
    double scale = (double)(a[lo + 1].ns - a[lo].ns) / (double)(a[lo + 1].tsc - a[lo].tsc);
    return a[lo].ns + (int64_t)((double)(t - a[lo].tsc) * scale);
}

/* The published descriptions, sorted by (image, id). */
static struct desc_ref *read_descs(const struct iot_region_run *run, size_t *n)
{
    uint64_t claimed = atomic_load_explicit(&run->map->desc_cursor, memory_order_acquire);
    uint64_t nd = claimed < run->head.ndescs ? claimed : run->head.ndescs;
    struct desc_ref *refs = malloc((nd ? nd : 1) * sizeof(*refs));
    struct iot_desc_slot *d = iot_region_descs(run->map);
    *n = 0;
    if (!refs)
        return NULL;
    for (uint64_t i = 0; i < nd; i++)
        if (atomic_load_explicit(&d[i].state, memory_order_acquire) == 1)
            refs[(*n)++] = (struct desc_ref){(uint64_t)d[i].image << 32 | d[i].id, &d[i]};
    qsort(refs, *n, sizeof(*refs), by_key);
    return refs;
}

static const struct iot_desc_slot *find_desc(const struct desc_ref *refs, size_t n, uint32_t image, uint32_t id)
{
    struct desc_ref want = {(uint64_t)image << 32 | id, NULL};
    const struct desc_ref *hit = id ? bsearch(&want, refs, n, sizeof(*refs), by_key) : NULL;
    return hit ? hit->d : NULL;
}

/* Copies out the records, and the anchors when stamps are TSC ticks (after start, before end).
 * Returns the number of records; *bad is the first damaged slot, or UINT64_MAX. */
static size_t read_slots(const struct iot_region_run *run, struct drained *recs, struct iot_anchor *anchors,
                         size_t *nanchors, uint64_t n, uint64_t *bad)
{
    struct iot_slot *slots = iot_region_slots(run->map, run->head.ndescs);
    size_t nrec = 0;
    *bad = UINT64_MAX;
    for (uint64_t i = 0; i < n; i++) {
        uint32_t state = atomic_load_explicit(&slots[i].state, memory_order_acquire);
        if (state == IOT_SLOT_FREE)
            continue;   /* claimed, and the call was not made */
        if (state == IOT_SLOT_ANCHOR) {
            anchors[(*nanchors)++] = (struct iot_anchor){slots[i].r.t_enter_ns, slots[i].r.t_exit_ns};
            continue;
        }
        struct drained *d = &recs[nrec];
        d->r = slots[i].r;
        d->image = slots[i].image;
        d->slot = i;
        if ((state != IOT_SLOT_ENTERED && state != IOT_SLOT_DONE) || d->r.call >= IOT_NCALLS) {
            *bad = i;
            break;
        }
        d->r.unfinished = state == IOT_SLOT_ENTERED;
        nrec++;
    }
    return nrec;
}

/* An unfinished call ends when its process image was last seen doing anything: its latest stamp
 * after the call's entry (the other threads went on until the end came), else t_end_ns. */
static int end_unfinished(struct drained *recs, size_t n, int64_t t_end_ns)
{
    uint32_t nimages = 0;   /* image numbers count from 1, one per image */
    for (size_t i = 0; i < n; i++)
        nimages = recs[i].image > nimages ? recs[i].image : nimages;
    int64_t *last = calloc((size_t)nimages + 1, sizeof(*last));
    if (!last)
        return -1;
    for (size_t i = 0; i < n; i++) {
        int64_t t = recs[i].r.unfinished ? recs[i].r.t_enter_ns : recs[i].r.t_exit_ns;
        if (t > last[recs[i].image])
            last[recs[i].image] = t;
    }
    for (size_t i = 0; i < n; i++) {
        struct iot_rec *r = &recs[i].r;
        if (!r->unfinished)
            continue;
        int64_t seen = last[recs[i].image];
        r->t_exit_ns = seen > r->t_enter_ns ? seen : t_end_ns > r->t_enter_ns ? t_end_ns : r->t_enter_ns;
        r->result = 0;
    }
    free(last);
    return 0;
}

/* Whether the head is still as hw-iotrace wrote it. */
static int head_intact(const struct iot_region_run *run)
{
    const struct iot_region *m = run->map, *h = &run->head;
    return m->magic == h->magic && m->use_tsc == h->use_tsc && m->nslots == h->nslots && m->ndescs == h->ndescs &&
           m->size == h->size;
}

int iot_region_drain(const struct iot_region_run *run, struct iot_anchor start, struct iot_anchor end,
                     int64_t t_end_ns, const char *tsv, uint32_t mask, struct iot_trace_stats *st,
                     struct hw_err *err)
{
    int ret = 0;
    uint64_t claimed = atomic_load_explicit(&run->map->cursor, memory_order_acquire);
    uint64_t n = claimed < run->head.nslots ? claimed : run->head.nslots, bad;
    size_t ndesc = 0, nanchors = 0, nrec = 0;
    struct desc_ref *descs = read_descs(run, &ndesc);
    struct drained *recs = malloc((n ? n : 1) * sizeof(*recs));
    struct iot_anchor *anchors = malloc((n + 2) * sizeof(*anchors));
    char *line = malloc(IOT_LINE_MAX);
    FILE *out = fopen(tsv, "we");
    if (!out) {
        ret = -errno;
        hw_seterr(err, "failed to open %s: %s", tsv, strerror(errno));
        goto cleanup;
    }
    if (!descs || !recs || !anchors || !line) {
        ret = -ENOMEM;
        hw_seterr(err, "failed to read the shared region: out of memory");
        goto finish;
    }
    setvbuf(out, NULL, _IOFBF, 1 << 20);
    char head[1024];
    int hl = iot_tsv_header(head, sizeof(head), "preload", mask, NULL);
    fwrite(head, 1, hl > 0 ? (size_t)hl : 0, out);
    anchors[nanchors++] = start;
    nrec = read_slots(run, recs, anchors, &nanchors, n, &bad);
    anchors[nanchors++] = end;
    if (!head_intact(run)) {
        ret = -EBADMSG;
        hw_seterr(err, "failed to read the shared region: its head was overwritten (by the traced program)");
    } else if (bad != UINT64_MAX) {
        ret = -EBADMSG;
        hw_seterr(err, "failed to read the shared region: damaged slot %llu (the traced program wrote over it)",
                  (unsigned long long)bad);
    }
    if (run->head.use_tsc) {
        nanchors = clean_anchors(anchors, nanchors);
        for (size_t i = 0; i < nrec; i++) {
            recs[i].r.t_enter_ns = tsc_to_ns(anchors, nanchors, recs[i].r.t_enter_ns);
            if (!recs[i].r.unfinished)   /* an unfinished call's exit stamp was never written */
                recs[i].r.t_exit_ns = tsc_to_ns(anchors, nanchors, recs[i].r.t_exit_ns);
        }
    }
    if (end_unfinished(recs, nrec, t_end_ns) < 0) {
        ret = -ENOMEM;
        hw_seterr(err, "failed to read the shared region: out of memory");
        nrec = 0;
    }
    qsort(recs, nrec, sizeof(*recs), by_entry);
    for (size_t i = 0; i < nrec; i++) {
        const struct iot_desc_slot *d = find_desc(descs, ndesc, recs[i].image, recs[i].r.desc_id);
        char text[IOT_DESC_MAX + 1];
        text[0] = '\0';
        if (d) {
            size_t len = d->len < IOT_DESC_MAX ? d->len : IOT_DESC_MAX;
            memcpy(text, d->text, len);
            text[len] = '\0';
        }
        fwrite(line, 1, iot_rec_format(line, &recs[i].r, d ? d->kind : IOT_FD_UNKNOWN, text), out);
        st->records_written++;
        st->unfinished += recs[i].r.unfinished;
    }
finish:
    /* the last line: the trailer when every slot was read, else what went wrong (the records
     * before a damaged slot stay) */
    if (line)
        fwrite(line, 1, ret ? hw_sys_damaged(line, err->msg) : hw_sys_trailer(line, st->records_written), out);
    else
        fputs("# damaged: out of memory\n", out);
    if ((ferror(out) | fclose(out)) != 0 && !ret) {
        ret = errno ? -errno : -EIO;
        hw_seterr(err, "failed to write %s: %s", tsv, strerror(-ret));
    }
cleanup:
    free(line);
    free(anchors);
    free(recs);
    free(descs);
    st->calls_seen = st->records_written + atomic_load(&run->map->lost);
    return ret;
}
