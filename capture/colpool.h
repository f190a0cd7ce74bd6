/* Column mappings kept for the next conversion: a conversion's columns are new memory, and new
 * memory is what this kind of machine hands out slowest (a virtual machine backs each new page on
 * first touch: 73 MB in 10.6 ms with huge pages, 3.1 ms to write them again, docs/performance.md).
 * A released column waits here, lazily freed (the kernel takes its pages back when memory is
 * short), for the next conversion of the process. Thread-safe. */
#ifndef CAP_COLPOOL_H
#define CAP_COLPOOL_H
#include <stddef.h>

/* A private anonymous mapping of `size` bytes, reserved but not committed (huge pages when
 * large), a kept one resized when there is one; NULL (errno set) when none can be mapped. Its
 * bytes are not zeroed: the caller writes every byte it reads. */
void *cap_colpool_take(size_t size);
/* Keeps the mapping for a later take, or unmaps it when the pool is full. */
void cap_colpool_give(void *addr, size_t size);
#endif
