/* hw-iotrace's side of the shared region (region.h): creating it before the command starts. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "region.h"

int iot_region_tsc_usable(void)
{
#if defined(__x86_64__)
    char cs[32] = "";
    int fd = open("/sys/devices/system/clocksource/clocksource0/current_clocksource", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, cs, sizeof(cs) - 1);
        cs[n > 0 ? n : 0] = '\0';
        close(fd);
    }
    /* another clocksource means the kernel does not trust the TSC across CPUs */
    return !strcmp(cs, "tsc\n") && !getenv("HWIOWRAP_NO_TSC");
#else
    return 0;
#endif
}

int iot_region_create(struct iot_region_run *run, uint64_t nslots, int use_tsc, struct hw_err *err)
{
    uint64_t size = iot_region_size(nslots, IOT_REGION_DESCS);
    run->map = NULL;
    /* memory, not a file: nothing is written back to a disk while the command is measured, and
     * only the pages of records made are ever touched */
    run->fd = memfd_create("hw-iotrace-region", MFD_CLOEXEC);
    if (run->fd < 0) {
        hw_seterr(err, "failed to create the shared region: memfd_create: %s", strerror(errno));
        return -1;
    }
    if (ftruncate(run->fd, (off_t)size) < 0) {
        hw_seterr(err, "failed to size the shared region (%llu bytes): %s", (unsigned long long)size,
                  strerror(errno));
        goto fail;
    }
    void *map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, run->fd, 0);
    if (map == MAP_FAILED) {
        hw_seterr(err, "failed to map the shared region (%llu bytes): %s", (unsigned long long)size, strerror(errno));
        goto fail;
    }
    run->map = map;
    run->head.magic = IOT_REGION_MAGIC;
    run->head.use_tsc = (uint32_t)use_tsc;
    run->head.nslots = nslots;
    run->head.ndescs = IOT_REGION_DESCS;
    run->head.size = size;
    /* the command is forked later: it sees all of this */
    run->map->magic = run->head.magic;
    run->map->use_tsc = run->head.use_tsc;
    run->map->nslots = run->head.nslots;
    run->map->ndescs = run->head.ndescs;
    run->map->size = run->head.size;
    return 0;
fail:
    close(run->fd);
    run->fd = -1;
    return -1;
}

void iot_region_close(struct iot_region_run *run)
{
    if (run->map)
        munmap(run->map, run->head.size);
    if (run->fd >= 0)
        close(run->fd);
    run->map = NULL;
    run->fd = -1;
}
