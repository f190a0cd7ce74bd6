/* Reader of trace.dat version 6 (the files hw-schedtrace writes and `trace-cmd record
 * --file-version 6` writes): loads headers, event formats and cmdlines into a tep handle and
 * finds each CPU's data. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event-parse.h>

#include "st.h"

struct in {
    FILE *f;
    const char *path;
    struct hw_err *err;
};

static int get(struct in *in, void *dst, size_t n, const char *what)
{
    long at = ftell(in->f);
    if (n && fread(dst, 1, n, in->f) != n) {
        hw_seterr(in->err, "failed to read %s: byte %ld: expected %s, the file ends", in->path, at, what);
        return -1;
    }
    return 0;
}

static char *get_blob(struct in *in, int width, uint64_t *size, const char *what)
{
    uint64_t n = 0;
    uint32_t n32 = 0;
    if (width == 8 ? get(in, &n, 8, what) : get(in, &n32, 4, what))
        return NULL;
    if (width == 4)
        n = n32;
    if (n > (1ULL << 31)) {
        hw_seterr(in->err, "failed to read %s: byte %ld: %s claims %llu bytes", in->path,
                  ftell(in->f) - width, what, (unsigned long long)n);
        return NULL;
    }
    char *data = malloc(n + 1);
    if (!data) {
        hw_seterr(in->err, "failed to read %s: out of memory", in->path);
        return NULL;
    }
    if (get(in, data, n, what)) {
        free(data);
        return NULL;
    }
    data[n] = '\0';
    *size = n;
    return data;
}

static int get_string(struct in *in, char *out, size_t len, const char *what)
{
    size_t i = 0;
    int c;
    while ((c = fgetc(in->f)) != EOF && c != '\0') {
        if (i + 1 >= len) {
            hw_seterr(in->err, "failed to read %s: byte %ld: %s is too long", in->path, ftell(in->f), what);
            return -1;
        }
        out[i++] = (char)c;
    }
    out[i] = '\0';
    if (c == EOF) {
        hw_seterr(in->err, "failed to read %s: expected %s, the file ends", in->path, what);
        return -1;
    }
    return 0;
}

static int get_formats(struct in *in, struct tep_handle *tep, const char *sys, uint32_t count)
{
    for (uint32_t i = 0; i < count; i++) {
        uint64_t size;
        char *fmt = get_blob(in, 8, &size, "an event format");
        if (!fmt)
            return -1;
        enum tep_errno rc = tep_parse_event(tep, fmt, size, sys);
        free(fmt);
        if (rc != 0 && rc != TEP_ERRNO__MEM_ALLOC_FAILED) {
            /* like trace-cmd, keep going: such an event prints as unknown */
        }
    }
    return 0;
}

static int get_options(struct in *in, struct st_dat *dat)
{
    for (;;) {
        uint16_t id;
        uint32_t size;
        if (get(in, &id, 2, "an option id"))
            return -1;
        if (id == 0)
            return 0;
        if (get(in, &size, 4, "an option size"))
            return -1;
        char *data = malloc((size_t)size + 1);
        if (!data || get(in, data, size, "option data")) {
            free(data);
            return -1;
        }
        data[size] = '\0';
        if (id == 3 && size >= 9 && !dat->buffer_offset) {   /* BUFFER: offset, name */
            memcpy(&dat->buffer_offset, data, 8);
        } else if (id == 4) {
            char *open = strchr(data, '['), *close = open ? strchr(open, ']') : NULL;
            free(dat->clock);
            dat->clock = open && close ? strndup(open + 1, (size_t)(close - open - 1)) : strdup(data);
        }
        free(data);
    }
}

int st_dat_open(struct st_dat *dat, const char *path, struct hw_err *err)
{
    struct in in = { .path = path, .err = err };
    char magic[10], version[16], label[16];
    unsigned char flags[2];
    uint64_t size;
    uint32_t count;
    char *blob;
    memset(dat, 0, sizeof(*dat));
    dat->fd = -1;
    in.f = fopen(path, "r");
    if (!in.f) {
        hw_seterr(err, "failed to open %s: %s", path, strerror(errno));
        return -1;
    }
    if (get(&in, magic, 10, "the trace.dat magic"))
        goto fail;
    if (memcmp(magic, "\x17\x08\x44tracing", 10) != 0) {
        hw_seterr(err, "failed to read %s: byte 0: expected the trace.dat magic 17 08 44 'tracing'", path);
        goto fail;
    }
    if (get_string(&in, version, sizeof(version), "the version string"))
        goto fail;
    if (strcmp(version, "6") != 0) {
        hw_seterr(err, "failed to read %s: byte 10: trace.dat version %s, this reader knows version 6 "
                  "(trace-cmd record --file-version 6)", path, version);
        goto fail;
    }
    if (get(&in, flags, 2, "endianness and long size") || get(&in, &dat->page_size, 4, "the page size"))
        goto fail;
    if (flags[0] != 0) {
        hw_seterr(err, "failed to read %s: byte 12: big-endian traces are not supported", path);
        goto fail;
    }
    dat->long_size = flags[1];
    dat->tep = tep_alloc();
    if (!dat->tep) {
        hw_seterr(err, "failed to allocate a tep handle: out of memory");
        goto fail;
    }
    tep_set_file_bigendian(dat->tep, TEP_LITTLE_ENDIAN);
    tep_set_local_bigendian(dat->tep, TEP_LITTLE_ENDIAN);
    tep_set_long_size(dat->tep, dat->long_size);
    tep_set_page_size(dat->tep, (int)dat->page_size);
    if (get_string(&in, label, sizeof(label), "'header_page'") || strcmp(label, "header_page") != 0) {
        hw_seterr(err, "failed to read %s: expected the 'header_page' section", path);
        goto fail;
    }
    if (!(blob = get_blob(&in, 8, &size, "the header_page text")))
        goto fail;
    tep_parse_header_page(dat->tep, blob, (unsigned long)size, dat->long_size);
    free(blob);
    if (get_string(&in, label, sizeof(label), "'header_event'") || strcmp(label, "header_event") != 0) {
        hw_seterr(err, "failed to read %s: expected the 'header_event' section", path);
        goto fail;
    }
    if (!(blob = get_blob(&in, 8, &size, "the header_event text")))
        goto fail;
    free(blob);
    if (get(&in, &count, 4, "the ftrace format count") || get_formats(&in, dat->tep, "ftrace", count))
        goto fail;
    uint32_t nsys;
    if (get(&in, &nsys, 4, "the event system count"))
        goto fail;
    for (uint32_t s = 0; s < nsys; s++) {
        char sys[128];
        if (get_string(&in, sys, sizeof(sys), "a system name") || get(&in, &count, 4, "an event count") ||
            get_formats(&in, dat->tep, sys, count))
            goto fail;
    }
    if (!(blob = get_blob(&in, 4, &size, "the kallsyms section")))
        goto fail;
    if (size)
        tep_parse_kallsyms(dat->tep, blob);
    free(blob);
    if (!(blob = get_blob(&in, 4, &size, "the printk section")))
        goto fail;
    if (size)
        tep_parse_printk_formats(dat->tep, blob);
    free(blob);
    if (!(blob = get_blob(&in, 8, &size, "the cmdlines section")))
        goto fail;
    if (size)
        tep_parse_saved_cmdlines(dat->tep, blob);
    free(blob);
    uint32_t ncpus;
    if (get(&in, &ncpus, 4, "the CPU count"))
        goto fail;
    if (ncpus > ST_MAX_CPUS) {
        hw_seterr(err, "failed to read %s: %u CPUs, at most %d are supported", path, ncpus, ST_MAX_CPUS);
        goto fail;
    }
    dat->ncpus = (int)ncpus;
    if (get(&in, label, 10, "'options' or 'flyrecord'"))
        goto fail;
    if (memcmp(label, "options  ", 10) == 0) {
        if (get_options(&in, dat) || get(&in, label, 10, "'flyrecord'"))
            goto fail;
    }
    if (memcmp(label, "flyrecord", 10) != 0) {
        hw_seterr(err, "failed to read %s: byte %ld: expected 'flyrecord' (latency traces are not supported)",
                  path, ftell(in.f) - 10);
        goto fail;
    }
    uint64_t total = 0;
    for (int cpu = 0; cpu < dat->ncpus; cpu++) {
        if (get(&in, &dat->cpus[cpu].offset, 8, "a CPU data offset") ||
            get(&in, &dat->cpus[cpu].size, 8, "a CPU data size"))
            goto fail;
        total += dat->cpus[cpu].size;
    }
    /* trace-cmd record -B NAME leaves the top buffer empty and puts the instance's data in a
     * second flyrecord section named by a BUFFER option: read the first such buffer */
    if (total == 0 && dat->buffer_offset) {
        if (fseek(in.f, (long)dat->buffer_offset, SEEK_SET) < 0 ||
            get(&in, label, 10, "the buffer's 'flyrecord'") || memcmp(label, "flyrecord", 10) != 0) {
            hw_seterr(err, "failed to read %s: byte %llu: expected the buffer's 'flyrecord'", path,
                      (unsigned long long)dat->buffer_offset);
            goto fail;
        }
        for (int cpu = 0; cpu < dat->ncpus; cpu++)
            if (get(&in, &dat->cpus[cpu].offset, 8, "a CPU data offset") ||
                get(&in, &dat->cpus[cpu].size, 8, "a CPU data size"))
                goto fail;
    }
    dat->fd = dup(fileno(in.f));
    fclose(in.f);
    return dat->fd < 0 ? -1 : 0;
fail:
    fclose(in.f);
    st_dat_close(dat);
    return -1;
}

void st_dat_close(struct st_dat *dat)
{
    if (dat->tep)
        tep_free(dat->tep);
    if (dat->fd >= 0)
        close(dat->fd);
    free(dat->clock);
    memset(dat, 0, sizeof(*dat));
    dat->fd = -1;
}
