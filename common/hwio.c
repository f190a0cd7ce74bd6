#include "hwio.h"

#include <errno.h>
#include <stdint.h>
#include <unistd.h>

/* The loop of both: short transfers and EINTR go on; a read of 0 bytes is the writer gone. */
static int transfer(int fd, uint8_t *p, size_t len, int writing)
{
    while (len > 0) {
        ssize_t n = writing ? write(fd, p, len) : read(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            return writing ? -EIO : -EPIPE;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int hw_write_all(int fd, const void *buf, size_t len)
{
    return transfer(fd, (uint8_t *)buf, len, 1);
}

int hw_read_all(int fd, void *buf, size_t len)
{
    return transfer(fd, buf, len, 0);
}

int hw_ready_notify(int *fd)
{
    if (*fd < 0)
        return 0;
    int rc = hw_write_all(*fd, "ready\n", 6);
    close(*fd);
    *fd = -1;
    return rc;
}
