/* Writer of trace.dat, version 6 layout (trace-cmd.dat.v6(5)): headers and event formats read
 * from tracefs, saved cmdlines, options (per-CPU stats, trace clock), then the raw per-CPU pages
 * the drains wrote, each CPU's data starting on a page boundary. */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tracefs.h>

#include "hwio.h"
#include "st.h"
#include "st_internal.h"

#define OPT_DONE 0
#define OPT_CPUSTAT 2
#define OPT_TRACECLOCK 4

struct out {
    FILE *f;
    int failed;
};

static void put(struct out *o, const void *data, size_t n)
{
    if (n && fwrite(data, 1, n, o->f) != n)
        o->failed = 1;
}
static void put16(struct out *o, uint16_t v) { put(o, &v, 2); }
static void put32(struct out *o, uint32_t v) { put(o, &v, 4); }
static void put64(struct out *o, uint64_t v) { put(o, &v, 8); }

/* A tracefs text file preceded by its size in 8 (or 4) bytes. */
static int put_sized(struct out *o, char *text, int size, int width)
{
    if (!text)
        return -1;
    if (width == 8)
        put64(o, (uint64_t)size);
    else
        put32(o, (uint32_t)size);
    put(o, text, (size_t)size);
    free(text);
    return 0;
}

/* A whole tracefs file read by hand (libtracefs reads header_page as empty here). */
static char *slurp(const char *name, int *size)
{
    char *path = tracefs_get_tracing_file(name);
    FILE *f = path ? fopen(path, "r") : NULL;
    char *text = NULL;
    size_t len = 0, cap = 0;
    tracefs_put_tracing_file(path);
    if (!f)
        return NULL;
    for (;;) {
        if (len + 4096 > cap) {
            char *grown = realloc(text, cap = cap * 2 + 8192);
            if (!grown) {
                free(text);
                fclose(f);
                return NULL;
            }
            text = grown;
        }
        size_t n = fread(text + len, 1, 4096, f);
        len += n;
        if (n == 0)
            break;
    }
    fclose(f);
    *size = (int)len;
    return text;
}

static int put_event_format(struct out *o, const char *sys, const char *ev)
{
    int size = 0;
    char *text = tracefs_event_file_read(NULL, sys, ev, "format", &size);
    return put_sized(o, text, size, 8);
}

/* Enabled "system:event" names grouped by system, in first-seen order. */
static int put_systems(struct out *o, const char **names, int n)
{
    char systems[ST_MAX_EVENTS][64];
    int nsys = 0;
    for (int i = 0; i < n; i++) {
        const char *colon = strchr(names[i], ':');
        size_t len = (size_t)(colon - names[i]);
        int found = 0;
        for (int s = 0; s < nsys; s++)
            found |= strlen(systems[s]) == len && strncmp(systems[s], names[i], len) == 0;
        if (!found && strcmp(colon + 1, "") != 0 && strncmp(names[i], "ftrace", len) != 0)
            snprintf(systems[nsys++], sizeof(systems[0]), "%.*s", (int)len, names[i]);
    }
    put32(o, (uint32_t)nsys);
    for (int s = 0; s < nsys; s++) {
        uint32_t count = 0;
        size_t len = strlen(systems[s]);
        for (int i = 0; i < n; i++)
            count += strncmp(names[i], systems[s], len) == 0 && names[i][len] == ':';
        put(o, systems[s], len + 1);
        put32(o, count);
        for (int i = 0; i < n; i++)
            if (strncmp(names[i], systems[s], len) == 0 && names[i][len] == ':' &&
                put_event_format(o, systems[s], names[i] + len + 1) < 0)
                return -1;
    }
    return 0;
}

static int put_ftrace_formats(struct out *o)
{
    char **events = tracefs_system_events(NULL, "ftrace");
    uint32_t n = 0;
    int rc = 0;
    for (char **e = events; e && *e; e++)
        n++;
    put32(o, n);
    for (uint32_t i = 0; i < n && rc == 0; i++)
        rc = put_event_format(o, "ftrace", events[i]);
    tracefs_list_free(events);
    return rc;
}

static void put_options(struct out *o, struct st_buffer *buf)
{
    const struct st_cpustat *st = st_buffer_stats(buf, 1);
    put(o, "options  ", 10);
    for (int cpu = 0; cpu < st_buffer_ncpus(buf); cpu++) {
        char text[512];
        int n = snprintf(text, sizeof(text),
                         "CPU: %d\nentries: %lld\noverrun: %lld\ncommit overrun: %lld\nbytes: %lld\n"
                         "dropped events: %lld\nread events: %lld\n", cpu, st[cpu].entries,
                         st[cpu].overrun, st[cpu].commit_overrun, st[cpu].bytes, st[cpu].dropped,
                         st[cpu].read);
        put16(o, OPT_CPUSTAT);
        put32(o, (uint32_t)n + 1);
        put(o, text, (size_t)n + 1);
    }
    static const char clock[] = "[mono]";
    put16(o, OPT_TRACECLOCK);
    put32(o, sizeof(clock));
    put(o, clock, sizeof(clock));
    put16(o, OPT_DONE);
}

/* Appends a CPU's raw pages: copy_file_range (in the kernel, no user copy), read/write where
 * the filesystems do not allow it. */
static int copy_cpu(struct out *o, const char *raw, uint64_t *size)
{
    int in = open(raw, O_RDONLY | O_CLOEXEC);
    *size = 0;
    if (in < 0)
        return errno == ENOENT ? 0 : -1;
    if (fflush(o->f) != 0) {
        close(in);
        return -1;
    }
    int outfd = fileno(o->f);
    off_t pos = lseek(outfd, 0, SEEK_END);
    int rc = 0;
    for (;;) {
        ssize_t n = copy_file_range(in, NULL, outfd, NULL, 1 << 30, 0);
        if (n > 0) {
            *size += (uint64_t)n;
            continue;
        }
        if (n == 0)
            break;
        if (*size == 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP)) {
            char chunk[1 << 16];
            ssize_t r;
            while ((r = read(in, chunk, sizeof(chunk))) > 0) {
                if (hw_write_all(outfd, chunk, (size_t)r) != 0) {
                    rc = -1;
                    break;
                }
                *size += (uint64_t)r;
            }
            if (r < 0)
                rc = -1;
            break;
        }
        rc = -1;
        break;
    }
    close(in);
    /* keep the stdio position in step with the descriptor */
    if (fseek(o->f, pos + (off_t)*size, SEEK_SET) < 0)
        rc = -1;
    return rc;
}

int st_buffer_write_dat(struct st_buffer *buf, const char *path, struct hw_err *err)
{
    struct out o = { .f = fopen(path, "w") };
    unsigned page = st_buffer_page_size(buf);
    int ncpus = st_buffer_ncpus(buf);
    const char **names;
    int nnames = st_buffer_enabled(buf, &names);
    char raw[4200];
    int size = 0;
    char *text;
    if (!o.f) {
        hw_seterr(err, "failed to create %s: %s", path, strerror(errno));
        return -1;
    }
    put(&o, "\x17\x08\x44tracing6", 11);
    put(&o, "", 1);                  /* end of the version string */
    put(&o, "\0\x08", 2);            /* little endian, 8-byte long */
    put32(&o, page);
    put(&o, "header_page", 12);
    text = slurp("events/header_page", &size);
    if (put_sized(&o, text, size, 8) < 0)
        goto fail_read;
    put(&o, "header_event", 13);
    text = slurp("events/header_event", &size);
    if (put_sized(&o, text, size, 8) < 0)
        goto fail_read;
    if (put_ftrace_formats(&o) < 0 || put_systems(&o, names, nnames) < 0)
        goto fail_read;
    put32(&o, 0);                    /* kallsyms: none (the events recorded carry no addresses) */
    put32(&o, 0);                    /* printk formats: none */
    const char *cmdlines = st_buffer_cmdlines(buf);
    put64(&o, cmdlines ? strlen(cmdlines) : 0);
    if (cmdlines)
        put(&o, cmdlines, strlen(cmdlines));
    put32(&o, (uint32_t)ncpus);
    put_options(&o, buf);
    put(&o, "flyrecord", 10);
    long table = ftell(o.f);
    for (int cpu = 0; cpu < ncpus; cpu++) {
        put64(&o, 0);
        put64(&o, 0);
    }
    uint64_t offsets[ST_MAX_CPUS], sizes[ST_MAX_CPUS];
    for (int cpu = 0; cpu < ncpus; cpu++) {
        long pos = ftell(o.f);
        long pad = (long)((page - (unsigned long)pos % page) % page);
        static const char zeros[65536];
        put(&o, zeros, (size_t)pad);
        offsets[cpu] = (uint64_t)(pos + pad);
        st_raw_path(buf, cpu, raw, sizeof(raw));
        if (copy_cpu(&o, raw, &sizes[cpu]) < 0) {
            hw_seterr(err, "failed to read %s: %s", raw, strerror(errno));
            goto fail;
        }
    }
    if (fseek(o.f, table, SEEK_SET) < 0)
        o.failed = 1;
    for (int cpu = 0; cpu < ncpus; cpu++) {
        put64(&o, offsets[cpu]);
        put64(&o, sizes[cpu]);
    }
    if (fclose(o.f) != 0 || o.failed) {
        o.f = NULL;
        hw_seterr(err, "failed to write %s: %s", path, strerror(errno ? errno : EIO));
        return -1;
    }
    return 0;
fail_read:
    hw_seterr(err, "failed to read event formats from tracefs: %s", strerror(errno ? errno : EIO));
fail:
    if (o.f)
        fclose(o.f);
    return -1;
}
