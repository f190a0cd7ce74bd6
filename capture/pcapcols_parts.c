/* A mapped pcap file walked in parts on several threads at once. A part starts where a chain of
 * plausible record headers starts near its share of the file; that guess is proven only when the
 * part before it ends exactly there. The parts' rows are then put after each other as one walk
 * would have made them (frame numbers, address codes, malformed frames); a guess the walk does not
 * prove, or a part that stops early (a file cut short, a record longer than the snap length),
 * asks for one walk of the whole file (PASS_ONE_THREAD), so the output never depends on the guess. */
#include "pcapcols_rows.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "hwerr.h"

#define MAX_PARTS 16
#define PART_MIN (4u << 20)       /* smaller parts gain less than a thread costs */
#define SEARCH_SPAN (1u << 20)    /* how far past its share a part's start is looked for */
#define CHAIN 8                   /* record headers in a row that make a start plausible */
#define SPAN_MAX_S (100u * 86400) /* seconds a record may be from the file's first one */
#define HOP_COST 0.25

/* Whether CHAIN records (or every record to the end of the file) start at off, as record headers
 * look: lengths within the snap length and the file, sub-second ticks below a second, stamps near
 * the first record's. */
static int plausible_at(const struct cap_mapped *m, size_t off, uint32_t first_s)
{
    uint32_t second = m->ns_per_tick == 1 ? 1000000000u : 1000000u;
    for (int i = 0; i < CHAIN; i++) {
        uint32_t rec[4];
        if (off == m->size)
            return 1;
        if (m->size - off < PCAP_RECORD_HEADER)
            return 0;
        memcpy(rec, m->map + off, sizeof(rec));
        uint32_t apart = rec[0] > first_s ? rec[0] - first_s : first_s - rec[0];
        if (rec[1] >= second || apart > SPAN_MAX_S || rec[2] > m->snaplen || rec[2] > rec[3]
            || rec[2] > m->size - off - PCAP_RECORD_HEADER)
            return 0;
        off += PCAP_RECORD_HEADER + rec[2];
    }
    return 1;
}

size_t cap_find_record_start(const struct cap_mapped *m, size_t from, uint32_t first_s)
{
    size_t end = m->size - from > SEARCH_SPAN ? from + SEARCH_SPAN : m->size;
    for (size_t off = from; off < end; off++)
        if (plausible_at(m, off, first_s))
            return off;
    return 0;
}

struct parts;

struct part {
    struct parts *all;
    int k;
    size_t from, to;
    int64_t records;   /* of this part, found by the next part's thread hopping over it */
    int landed;        /* that hop ended exactly at `to`, so the next part's start is a record's */
    int hopped;
    int64_t base;      /* the frames before the part: where its rows go in the columns */
    struct cap_state state;  /* its rows: a view of the columns from row `base` */
    struct cap_pcapcols_result res;
    struct hw_err err;
    int rc;            /* of its walk; 1: not walked (a start not proven) */
};

struct parts {
    const struct cap_mapped *m;
    struct cap_rows *columns;
    struct part part[MAX_PARTS];
    int n;
    int abandoned;     /* a thread could not be started: no part after the first is walked */
    pthread_mutex_t lock;
    pthread_cond_t hopped;
};

/* Record by record over part p, without parsing: its records, and whether the last one ends
 * exactly where the next part starts (else the guess of that start was wrong, or the file is cut
 * short, or holds a record longer than the snap length: one walk from the start sorts it out). */
static void hop(const struct cap_mapped *m, struct part *p)
{
    size_t off = p->from;
    int64_t n = 0;
    while (off < p->to && m->size - off >= PCAP_RECORD_HEADER) {
        uint32_t caplen;
        memcpy(&caplen, m->map + off + 8, sizeof(caplen));
        if (caplen > m->snaplen || caplen > m->size - off - PCAP_RECORD_HEADER)
            break;
        off += PCAP_RECORD_HEADER + caplen;
        n++;
    }
    p->records = n;
    p->landed = off == p->to;
}

static void walk(struct parts *all, struct part *p)
{
    void *cols[C_NCOLS];
    cap_rows_columns(all->columns, cols);
    for (int i = 0; i < C_NCOLS; i++)
        cols[i] = (char *)cols[i] + (size_t)p->base * cap_cols[i].size;
    /* A part's rows never outnumber its frames, and the next part's rows start after them: the
     * parts write apart. The room is only the bound its bytes allow. */
    cap_rows_point(&p->state.rows, cols, (int64_t)((p->to - p->from) / PCAP_RECORD_HEADER) + 1);
    p->res.frames = p->base;  /* so the part's frame numbers are the file's */
    p->rc = cap_walk_range(all->m, p->from, p->to, &p->state, &p->res, &p->err);
    p->res.frames -= p->base;
}

/* Part k >= 1 on its own thread: the hop over part k-1, all hops before it awaited (the frames
 * before part k), then the walk of part k. Part 0 needs neither and is walked at once. */
static void *run_part(void *arg)
{
    struct part *p = arg;
    struct parts *all = p->all;
    struct part *before = &all->part[p->k - 1];
    hop(all->m, before);
    pthread_mutex_lock(&all->lock);
    before->hopped = 1;
    pthread_cond_broadcast(&all->hopped);
    int proven = 1;
    int64_t base = 0;
    for (int j = 0; j < p->k && !all->abandoned; j++) {
        while (!all->part[j].hopped && !all->abandoned)
            pthread_cond_wait(&all->hopped, &all->lock);
        proven = proven && all->part[j].landed;
        base += all->part[j].records;
    }
    int go = proven && !all->abandoned;
    pthread_mutex_unlock(&all->lock);
    if (go) {
        p->base = base;
        walk(all, p);
    }
    return NULL;
}

/* Part p's rows moved to row `at` of the columns (after the parts before it, which skipped some
 * of their frames), then joined to s (cap_state_join). */
static int join_part(struct cap_state *s, struct cap_pcapcols_result *res, struct part *p, int64_t at)
{
    if (at != p->base) {
        void *cols[C_NCOLS];
        cap_rows_columns(&s->rows, cols);
        for (int i = 0; i < C_NCOLS; i++) {
            char *col = cols[i];
            memmove(col + (size_t)at * cap_cols[i].size, col + (size_t)p->base * cap_cols[i].size,
                    (size_t)p->state.rows.n * cap_cols[i].size);
        }
    }
    return cap_state_join(s, res, &p->state, &p->res, &s->rows, at, 0);
}

static void close_part(struct part *p)
{
    cap_addrdict_free(p->state.dict);
    free(p->state.malformed);
}

/* The parts walked and joined: 0, -1 (err set) or PASS_ONE_THREAD when a start proved wrong or a
 * part stopped early (nothing of the parts is kept). */
static int walk_in_parts(struct parts *all, struct cap_state *s, struct cap_pcapcols_result *res,
                         struct hw_err *err)
{
    pthread_t threads[MAX_PARTS];
    int started[MAX_PARTS] = {0};
    for (int k = 0; k < all->n; k++) {
        struct part *p = &all->part[k];
        p->all = all;
        p->k = k;
        p->rc = 1;
        p->state.in_memory = 1;
        for (int i = 0; i < C_NCOLS; i++)
            p->state.fds[i] = -1;
        if (!(p->state.dict = cap_addrdict_new())) {
            hw_seterr(err, "failed to allocate buffers: %s", strerror(ENOMEM));
            return -1;
        }
    }
    for (int k = 1; k < all->n; k++) {
        started[k] = pthread_create(&threads[k], NULL, run_part, &all->part[k]) == 0;
        if (!started[k]) {
            pthread_mutex_lock(&all->lock);
            all->abandoned = 1;
            pthread_cond_broadcast(&all->hopped);
            pthread_mutex_unlock(&all->lock);
            break;
        }
    }
    all->part[0].base = 0;
    if (!all->abandoned)
        walk(all, &all->part[0]);
    for (int k = 1; k < all->n; k++)
        if (started[k])
            pthread_join(threads[k], NULL);
    for (int k = 0; k < all->n; k++)
        if (all->part[k].rc == -1) {
            *err = all->part[k].err;
            return -1;
        }
    for (int k = 0; k < all->n; k++)
        if (all->part[k].rc != 0 || (k + 1 < all->n && !all->part[k].landed))
            return PASS_ONE_THREAD;
    for (int k = 0; k < all->n; k++)
        if (join_part(s, res, &all->part[k], res->rows) < 0) {
            hw_seterr(err, "failed to allocate buffers: %s", strerror(ENOMEM));
            return -1;
        }
    s->rows.n = res->rows;
    return 0;
}

int cap_walk_parts(const struct cap_mapped *m, int threads, struct cap_state *s, struct cap_pcapcols_result *res,
                   struct hw_err *err)
{
    size_t body = m->size - PCAP_FILE_HEADER;
    int n = threads < MAX_PARTS ? threads : MAX_PARTS;
    if ((size_t)n > body / PART_MIN)
        n = (int)(body / PART_MIN);
    if (n < 2 || s->rows.n != 0)
        return cap_walk_range(m, PCAP_FILE_HEADER, m->size, s, res, err);

    /* Thread k hops over part k-1 before it walks part k, so later parts are made smaller:
     * share_k = share_0 - HOP_COST * share_{k-1}, a hop costing a quarter of a walk of the same
     * records (5 and 20 ms for 5e5 records of 82 bytes, this 2-CPU machine). */
    double share[MAX_PARTS], total = 0;
    for (int k = 0; k < n; k++) {
        share[k] = k == 0 ? 1.0 : 1.0 - HOP_COST * share[k - 1];
        total += share[k];
    }
    struct parts *ps = calloc(1, sizeof(*ps));
    if (!ps) {
        hw_seterr(err, "failed to allocate buffers: %s", strerror(ENOMEM));
        return -1;
    }
    ps->m = m;
    ps->columns = &s->rows;
    pthread_mutex_init(&ps->lock, NULL);
    pthread_cond_init(&ps->hopped, NULL);
    uint32_t first_s;
    memcpy(&first_s, m->map + PCAP_FILE_HEADER, sizeof(first_s));
    int count = 1;
    double before = 0;
    ps->part[0].from = PCAP_FILE_HEADER;
    for (int k = 1; k < n; k++) {
        before += share[k - 1];
        size_t start = cap_find_record_start(m, PCAP_FILE_HEADER + (size_t)((double)body * before / total), first_s);
        if (start > ps->part[count - 1].from)
            ps->part[count++].from = start;
    }
    for (int k = 0; k < count; k++)
        ps->part[k].to = k + 1 < count ? ps->part[k + 1].from : m->size;
    ps->n = count;
    int rc = count > 1 ? walk_in_parts(ps, s, res, err) : cap_walk_range(m, PCAP_FILE_HEADER, m->size, s, res, err);
    for (int k = 0; k < count; k++)
        close_part(&ps->part[k]);
    pthread_cond_destroy(&ps->hopped);
    pthread_mutex_destroy(&ps->lock);
    free(ps);
    if (rc == 0)
        res->parts = count;
    return rc;
}
