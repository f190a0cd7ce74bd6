/* The tasks a --pid selects: set_event_pid filters by task, and its event-fork option adds only
 * the tasks created afterwards, so a process already running has its threads and its descendants
 * (with theirs) listed at the start: a server's workers forked before the recording, a threaded
 * program's threads. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "st_internal.h"

struct tids {
    char *text;
    size_t len, cap;
    int *seen;
    size_t nseen, capseen;
};

static int add(struct tids *t, int tid)
{
    for (size_t i = 0; i < t->nseen; i++)
        if (t->seen[i] == tid)
            return 0;
    if (t->nseen == t->capseen) {
        size_t cap = t->capseen ? t->capseen * 2 : 64;
        int *grown = realloc(t->seen, cap * sizeof(*grown));
        if (!grown)
            return -1;
        t->seen = grown;
        t->capseen = cap;
    }
    if (t->len + 16 > t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 1024;
        char *grown = realloc(t->text, cap);
        if (!grown)
            return -1;
        t->text = grown;
        t->cap = cap;
    }
    t->seen[t->nseen++] = tid;
    t->len += (size_t)snprintf(t->text + t->len, t->cap - t->len, "%d ", tid);
    return 1;
}

/* A process: its threads, then each thread's children (processes), depth first. */
static int walk(struct tids *t, int pid, int depth)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task", pid);
    DIR *d = opendir(path);
    if (!d)
        return add(t, pid) < 0 ? -1 : 0;  /* gone, or no /proc: the pid alone, as given */
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d))) {
        int tid = atoi(e->d_name);
        if (tid <= 0 || add(t, tid) < 0) {
            rc = tid <= 0 ? 0 : -1;
            continue;
        }
        char cpath[96];
        snprintf(cpath, sizeof(cpath), "/proc/%d/task/%d/children", pid, tid);
        FILE *f = depth < 64 ? fopen(cpath, "re") : NULL;
        int child;
        while (f && rc == 0 && fscanf(f, "%d", &child) == 1)
            rc = walk(t, child, depth + 1);
        if (f)
            fclose(f);
    }
    closedir(d);
    return rc;
}

char *st_pid_tree(const int *pids, int npids)
{
    struct tids t = {0};
    for (int i = 0; i < npids; i++)
        if (walk(&t, pids[i], 0) < 0) {
            free(t.seen);
            free(t.text);
            return NULL;
        }
    free(t.seen);
    return t.text ? t.text : calloc(1, 1);
}
