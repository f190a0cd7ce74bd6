/* `hw-bench mkdata`: an ASCII text file of printable lines ending in LF, from a fixed seed, so
 * the senders have line feeds to turn into carriage returns. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"

static uint64_t next_random(uint64_t *state)
{
    /* xorshift64*: fast, deterministic, good enough for text. */
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545F4914F6CDD1DULL;
}

int hb_make_data(const char *path, int64_t size, uint64_t seed)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -errno;
    uint64_t state = seed ? seed : 1;
    char line[128];
    int64_t written = 0;
    while (written < size) {
        int len = 1 + (int)(next_random(&state) % 79);
        for (int i = 0; i < len; i++)
            line[i] = (char)(' ' + next_random(&state) % 95);
        line[len++] = '\n';
        if (written + len > size)
            len = (int)(size - written);
        if (fwrite(line, 1, (size_t)len, f) != (size_t)len)
            break;
        written += len;
    }
    int failed = ferror(f) || written != size;
    if (fclose(f) != 0 || failed)
        return -(errno ? errno : EIO);
    return 0;
}
