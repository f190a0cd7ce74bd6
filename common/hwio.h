/* Whole transfers on a descriptor, and the readiness line a collector gives its starter. */
#ifndef HWIO_H
#define HWIO_H
#include <stddef.h>

/* Writes all len bytes, going on after short writes and EINTR. 0, or -errno (-EPIPE when the
 * reader is gone and SIGPIPE is ignored). */
int hw_write_all(int fd, const void *buf, size_t len);
/* Reads exactly len bytes, going on after short reads and EINTR. 0, -EPIPE when the writer closed
 * first, or -errno. */
int hw_read_all(int fd, void *buf, size_t len);

/* --ready-fd: writes "ready\n" to *fd once recording has started and closes it (*fd becomes -1).
 * Nothing happens for *fd < 0. Returns 0 or -errno (a starter that went away is not an error of
 * the recording: callers go on). */
int hw_ready_notify(int *fd);
#endif
