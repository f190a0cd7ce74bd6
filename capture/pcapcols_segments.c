/* A mapped pcap file converted into column files by several threads, in bounded memory: the file
 * is cut into segments of SEGMENT_BYTES, each starting at a record start guessed near its place
 * (pcapcols_parts.c's search); the threads take the segments in order, each converts one into
 * memory, then writes it when all the segments before it are written, its frame numbers moved on
 * by the frames before it and its address codes made the file's. A segment's walk proves the next
 * segment's start only by ending exactly on it; when one does not, the conversion asks for one
 * walk of the whole file instead (PASS_ONE_THREAD), so the files never depend on a guess. At most
 * `threads` segments are held at once. */
#include "pcapcols_rows.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hwerr.h"

#define SEGMENT_BYTES (8u << 20)
#define MAX_THREADS 16

struct segment {
    size_t from, to;
    struct cap_state state;
    struct cap_pcapcols_result res;
    struct hw_err err;
    int rc;
};

struct segments {
    const struct cap_mapped *m;
    struct cap_state *file;           /* the column files, the address dictionary, the malformed frames */
    struct cap_pcapcols_result *res;  /* of the whole file */
    size_t *starts;                   /* n + 1: the segments' starts and the file's end */
    size_t n;
    size_t longest;                   /* bytes of the longest segment */
    int held;                         /* segments converted and not yet written, at most */
    pthread_mutex_t lock;
    pthread_cond_t turn;
    size_t next;                      /* the next segment to take */
    size_t written;                   /* the segments written */
    int stop;                         /* 0, or the first failure: -1 (err), PASS_* */
    struct hw_err err;
};

/* The segment joined to the file (cap_state_join), its rows written to the column files. */
static int write_segment(struct segments *all, struct segment *seg, struct hw_err *err)
{
    struct cap_state *file = all->file;
    struct cap_pcapcols_result *res = all->res;
    struct cap_rows *rows = &seg->state.rows;
    if (cap_state_join(file, res, &seg->state, &seg->res, rows, 0, res->frames) < 0) {
        hw_seterr(err, "failed to allocate buffers: %s", strerror(ENOMEM));
        return -1;
    }
    return cap_rows_write(rows, file, err);
}

static void release_segment(struct segment *seg)
{
    if (seg->state.rows.cap)
        cap_rows_unmap(&seg->state.rows);
    cap_addrdict_free(seg->state.dict);
    free(seg->state.malformed);
    memset(seg, 0, sizeof(*seg));
}

/* Converts segment i into seg, whose columns (mapped once per thread, for the longest segment:
 * mapping and unmapping them per segment cost more system time than the conversion, each unmap
 * stopping the other CPU to flush its TLB) are written over; its rc says how it went. */
static void convert_segment(struct segments *all, size_t i, struct segment *seg)
{
    seg->from = all->starts[i];
    seg->to = all->starts[i + 1];
    memset(&seg->res, 0, sizeof(seg->res));
    seg->state.rows.n = 0;
    seg->state.n_malformed = 0;
    memset(&seg->state.src_cache, 0, sizeof(seg->state.src_cache));
    memset(&seg->state.dst_cache, 0, sizeof(seg->state.dst_cache));
    cap_addrdict_free(seg->state.dict);
    seg->state.dict = cap_addrdict_new();
    if (!seg->state.dict) {
        hw_seterr(&seg->err, "failed to allocate buffers: %s", strerror(ENOMEM));
        seg->rc = -1;
        return;
    }
#ifdef MADV_POPULATE_READ
    /* the segment's pages mapped in one go: a large capture is not populated when mapped, and a
     * fault per few pages, on two threads at once, doubled the system time */
    size_t page = (size_t)sysconf(_SC_PAGESIZE), first = seg->from / page * page;
    madvise((void *)(all->m->map + first), seg->to - first, MADV_POPULATE_READ);
#endif
    seg->rc = cap_walk_range(all->m, seg->from, seg->to, &seg->state, &seg->res, &seg->err);
}

static void *worker(void *arg)
{
    struct segments *all = arg;
    struct segment seg;
    memset(&seg, 0, sizeof(seg));
    seg.state.in_memory = 1;
    for (int c = 0; c < C_NCOLS; c++)
        seg.state.fds[c] = -1;
    if (cap_rows_map(&seg.state.rows, (int64_t)(all->longest / PCAP_RECORD_HEADER) + 1) < 0) {
        pthread_mutex_lock(&all->lock);
        if (!all->stop) {
            all->stop = -1;
            hw_seterr(&all->err, "failed to allocate the columns of a segment: %s", strerror(errno));
        }
        pthread_cond_broadcast(&all->turn);
        pthread_mutex_unlock(&all->lock);
        return NULL;
    }
    pthread_mutex_lock(&all->lock);
    for (;;) {
        while (!all->stop && all->next < all->n && all->next >= all->written + (size_t)all->held)
            pthread_cond_wait(&all->turn, &all->lock);
        if (all->stop || all->next >= all->n)
            break;
        size_t i = all->next++;
        pthread_mutex_unlock(&all->lock);
        convert_segment(all, i, &seg);
        pthread_mutex_lock(&all->lock);
        while (!all->stop && all->written != i)
            pthread_cond_wait(&all->turn, &all->lock);
        if (!all->stop && seg.rc != 0) {
            all->stop = seg.rc;
            all->err = seg.err;
        }
        if (!all->stop) {
            /* its turn: the segments before it are written, and no other thread writes until
             * `written` moves on */
            pthread_mutex_unlock(&all->lock);
            struct hw_err err = {0};
            int rc = write_segment(all, &seg, &err);
            pthread_mutex_lock(&all->lock);
            if (rc < 0) {
                all->stop = -1;
                all->err = err;
            }
            all->written++;
        }
        pthread_cond_broadcast(&all->turn);
    }
    pthread_cond_broadcast(&all->turn);
    pthread_mutex_unlock(&all->lock);
    release_segment(&seg);
    return NULL;
}

int cap_walk_segments(const struct cap_mapped *m, int threads, size_t segment_bytes, struct cap_state *s,
                      struct cap_pcapcols_result *res, struct hw_err *err)
{
    size_t body = m->size - PCAP_FILE_HEADER, step = segment_bytes ? segment_bytes : SEGMENT_BYTES;
    size_t n = body / step + 1;
    int t = threads < MAX_THREADS ? threads : MAX_THREADS;
    if ((size_t)t > n)
        t = (int)n;
    if (t < 2 || s->rows.n != 0)
        return cap_walk_range(m, PCAP_FILE_HEADER, m->size, s, res, err);

    struct segments all = {.m = m, .file = s, .res = res, .held = t};
    all.starts = malloc((n + 1) * sizeof(*all.starts));
    if (!all.starts) {
        hw_seterr(err, "failed to allocate buffers: %s", strerror(ENOMEM));
        return -1;
    }
    uint32_t first_s;
    memcpy(&first_s, m->map + PCAP_FILE_HEADER, sizeof(first_s));
    all.starts[0] = PCAP_FILE_HEADER;
    all.n = 1;
    for (size_t i = 1; i < n; i++) {
        size_t start = cap_find_record_start(m, PCAP_FILE_HEADER + i * step, first_s);
        if (start > all.starts[all.n - 1])
            all.starts[all.n++] = start;
    }
    all.starts[all.n] = m->size;
    for (size_t i = 0; i < all.n; i++)
        if (all.starts[i + 1] - all.starts[i] > all.longest)
            all.longest = all.starts[i + 1] - all.starts[i];
    pthread_mutex_init(&all.lock, NULL);
    pthread_cond_init(&all.turn, NULL);
    pthread_t ids[MAX_THREADS];
    int started = 0;
    for (int k = 0; k < t; k++)
        if (pthread_create(&ids[k], NULL, worker, &all) == 0)
            started++;
    if (started == 0)
        worker(&all);
    for (int k = 0; k < started; k++)
        pthread_join(ids[k], NULL);
    pthread_cond_destroy(&all.turn);
    pthread_mutex_destroy(&all.lock);
    free(all.starts);
    if (all.stop == -1) {
        *err = all.err;
        return -1;
    }
    if (all.stop != 0)
        return PASS_ONE_THREAD;  /* a start not proven, a file cut short, a record over the snap length */
    res->parts = (int)all.n;
    return 0;
}
