/* The pool: a few kept mappings, the largest taken first (the largest columns ask first). */
#include "colpool.h"

#include <pthread.h>
#include <sys/mman.h>

#define POOL_ENTRIES 32              /* two conversions' columns */
#define POOL_BYTES (256u << 20)      /* what a process keeps at most */
#define POOL_ENTRY_MIN (1u << 20)    /* smaller columns are cheap to map anew */
#define HUGE_PAGE_MIN (8u << 20)

static struct {
    void *addr;
    size_t size;
} kept[POOL_ENTRIES];
static int n_kept;
static size_t kept_bytes;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void *map_new(size_t size)
{
    void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    /* huge pages where a column can fill them: a fault per 4 KiB page (and its bookkeeping) cost
     * a fifth of a conversion, more than clearing the pages */
    if (size >= HUGE_PAGE_MIN)
        madvise(m, size, MADV_HUGEPAGE);
    return m;
}

void *cap_colpool_take(size_t size)
{
    void *addr = NULL;
    size_t had = 0;
    pthread_mutex_lock(&lock);
    int best = -1;
    for (int i = 0; i < n_kept; i++)
        if (best < 0 || kept[i].size > kept[best].size)
            best = i;
    if (best >= 0) {
        addr = kept[best].addr;
        had = kept[best].size;
        kept_bytes -= had;
        kept[best] = kept[--n_kept];
    }
    pthread_mutex_unlock(&lock);
    if (!addr)
        return map_new(size);
    if (had == size)
        return addr;
    /* the kept pages stay at the start; the rest of the room is reserved anew (the mapping keeps
     * its no-reserve and huge-page flags) */
    void *m = mremap(addr, had, size, MREMAP_MAYMOVE);
    if (m != MAP_FAILED)
        return m;
    munmap(addr, had);
    return map_new(size);
}

void cap_colpool_give(void *addr, size_t size)
{
    if (!addr)
        return;
    if (size >= POOL_ENTRY_MIN) {
        pthread_mutex_lock(&lock);
        int keep = n_kept < POOL_ENTRIES && kept_bytes + size <= POOL_BYTES;
        if (keep) {
            kept[n_kept].addr = addr;
            kept[n_kept].size = size;
            n_kept++;
            kept_bytes += size;
        }
        pthread_mutex_unlock(&lock);
        if (keep) {
            madvise(addr, size, MADV_FREE);
            return;
        }
    }
    munmap(addr, size);
}
