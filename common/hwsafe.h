/* Files written beside others, safely: the folder is opened without following a symbolic link at
 * its last component (O_NOFOLLOW|O_DIRECTORY), the content goes to a fresh temporary file made in
 * it with O_CREAT|O_EXCL|O_NOFOLLOW under a random name, and that file is synced and renamed over
 * the target (renameat). A link planted at the target or at a temporary name is replaced, never
 * followed; a reader sees the old file or the new one, never half of one. */
#ifndef HWSAFE_H
#define HWSAFE_H
#include <stddef.h>
#include <stdio.h>

/* A descriptor of the folder path (O_RDONLY|O_DIRECTORY|O_NOFOLLOW|O_CLOEXEC), or -errno
 * (-ELOOP or -ENOTDIR for a symbolic link). */
int hw_open_dir_nofollow(const char *path);

struct hw_safe_file {
    int dirfd;
    FILE *f;
    char tmp[288];
    char name[256];
};

/* Starts writing dir/name: returns the stream of the temporary file, or NULL with errno set. */
FILE *hw_safe_open(struct hw_safe_file *sf, const char *dir, const char *name);
/* Flushes, syncs and closes the stream and renames the temporary file over the target: 0, or
 * -errno (the temporary file is then removed). Always releases sf. */
int hw_safe_commit(struct hw_safe_file *sf);
/* Drops what was written: the temporary file is removed and sf released. */
void hw_safe_abort(struct hw_safe_file *sf);
/* dir/name holds exactly data[0..len) afterwards, written as above: 0 or -errno. */
int hw_write_file_atomic(const char *dir, const char *name, const void *data, size_t len);
#endif
