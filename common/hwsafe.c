/* Safe, atomic writes of files beside others: see hwsafe.h. */
#include "hwsafe.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

int hw_open_dir_nofollow(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

static void release(struct hw_safe_file *sf)
{
    if (sf->dirfd >= 0)
        close(sf->dirfd);
    sf->dirfd = -1;
    sf->f = NULL;
}

FILE *hw_safe_open(struct hw_safe_file *sf, const char *dir, const char *name)
{
    static const char digits[] = "0123456789abcdefghijklmnopqrstuvwxyz";
    int fd = -1;

    memset(sf, 0, sizeof(*sf));
    sf->dirfd = -1;
    if (!name[0] || strchr(name, '/') || strlen(name) >= sizeof(sf->name) - 1) {
        errno = EINVAL;
        return NULL;
    }
    snprintf(sf->name, sizeof(sf->name), "%s", name);
    sf->dirfd = hw_open_dir_nofollow(dir);
    if (sf->dirfd < 0) {
        errno = -sf->dirfd;
        sf->dirfd = -1;
        return NULL;
    }
    for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
        uint8_t rnd[8];
        char suffix[sizeof(rnd) + 1];
        if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
            int e = errno;
            release(sf);
            errno = e;
            return NULL;
        }
        for (size_t i = 0; i < sizeof(rnd); i++)
            suffix[i] = digits[rnd[i] % 36];
        suffix[sizeof(rnd)] = '\0';
        snprintf(sf->tmp, sizeof(sf->tmp), ".%s.%s.tmp", name, suffix);
        fd = openat(sf->dirfd, sf->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST) {
            int e = errno;
            release(sf);
            errno = e;
            return NULL;
        }
    }
    if (fd < 0) {
        release(sf);
        errno = EEXIST;
        return NULL;
    }
    sf->f = fdopen(fd, "w");
    if (!sf->f) {
        int e = errno;
        close(fd);
        unlinkat(sf->dirfd, sf->tmp, 0);
        release(sf);
        errno = e;
        return NULL;
    }
    return sf->f;
}

int hw_safe_commit(struct hw_safe_file *sf)
{
    int err = 0;

    if (!sf->f)
        return -EBADF;
    if (fflush(sf->f) != 0 || ferror(sf->f))
        err = errno ? -errno : -EIO;
    if (!err && fsync(fileno(sf->f)) < 0)
        err = -errno;
    if (fclose(sf->f) != 0 && !err)
        err = -errno;
    sf->f = NULL;
    if (!err && renameat(sf->dirfd, sf->tmp, sf->dirfd, sf->name) < 0)
        err = -errno;
    if (err)
        unlinkat(sf->dirfd, sf->tmp, 0);
    release(sf);
    return err;
}

void hw_safe_abort(struct hw_safe_file *sf)
{
    if (sf->f)
        fclose(sf->f);
    sf->f = NULL;
    if (sf->dirfd >= 0)
        unlinkat(sf->dirfd, sf->tmp, 0);
    release(sf);
}

int hw_write_file_atomic(const char *dir, const char *name, const void *data, size_t len)
{
    struct hw_safe_file sf;
    FILE *f = hw_safe_open(&sf, dir, name);

    if (!f)
        return -errno;
    if (len && fwrite(data, 1, len, f) != len) {
        int e = errno ? errno : EIO;
        hw_safe_abort(&sf);
        return -e;
    }
    return hw_safe_commit(&sf);
}
