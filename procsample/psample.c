/* The sampler's pieces that need no loop: a resource's spec, the differential filter, reading a
 * /proc file whole (see psample.h). */
#include "psample.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int ps_parse_resource(const char *text, struct ps_resource *r, struct hw_err *err)
{
    const char *colon1 = strchr(text, ':');
    const char *colon3 = strrchr(text, ':');
    const char *colon2 = colon3 ? colon3 - 1 : NULL;
    while (colon2 && colon2 > colon1 && *colon2 != ':')
        colon2--;
    if (!colon1 || !colon3 || colon2 == NULL || colon2 <= colon1 || colon3 <= colon2) {
        hw_usage_err(err, "failed to parse --resource: expected NAME:PATH:EVERY:SHARE, got '%s'", text);
        return -1;
    }
    size_t name_len = (size_t)(colon1 - text), path_len = (size_t)(colon2 - colon1 - 1);
    if (name_len == 0 || name_len >= sizeof r->name || path_len == 0 || path_len >= sizeof r->path) {
        hw_usage_err(err, "failed to parse --resource: expected a NAME of 1 to 31 and a PATH of 1 to 255 "
                     "characters, got '%s'", text);
        return -1;
    }
    memset(r, 0, sizeof *r);
    memcpy(r->name, text, name_len);
    memcpy(r->path, colon1 + 1, path_len);
    char *end;
    errno = 0;
    long long every = strtoll(colon2 + 1, &end, 10);
    if (errno || end != colon3 || every < 1 || every > 1000000) {
        hw_usage_err(err, "failed to parse --resource: expected EVERY a whole number of rounds from 1, got '%s'", text);
        return -1;
    }
    double share = strtod(colon3 + 1, &end);
    if (*end != '\0' || end == colon3 + 1 || !(share >= 0 && share < 1)) {
        hw_usage_err(err, "failed to parse --resource: expected SHARE from 0 to below 1, got '%s'", text);
        return -1;
    }
    r->every = every;
    r->share = share;
    return 0;
}

static int is_separator(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == ':' || c == '|';
}

/* The next token of [*at, end): its start and length; 0 when none is left. */
static int next_token(const char **at, const char *end, const char **start, size_t *len)
{
    const char *p = *at;
    while (p < end && is_separator(*p))
        p++;
    if (p == end)
        return 0;
    *start = p;
    while (p < end && !is_separator(*p))
        p++;
    *len = (size_t)(p - *start);
    *at = p;
    return 1;
}

/* As the awk sampler's /^-?[0-9.]+$/. */
static int is_number(const char *s, size_t len)
{
    size_t i = (len > 0 && s[0] == '-') ? 1 : 0;
    if (i == len)
        return 0;
    for (; i < len; i++)
        if ((s[i] < '0' || s[i] > '9') && s[i] != '.')
            return 0;
    return 1;
}

static double number(const char *s, size_t len)
{
    char buf[64];
    if (len >= sizeof buf)
        len = sizeof buf - 1;
    memcpy(buf, s, len);
    buf[len] = '\0';
    return strtod(buf, NULL);
}

int ps_differs(const char *now, size_t now_len, const char *kept, size_t kept_len, double share)
{
    const char *a = now, *a_end = now + now_len, *b = kept, *b_end = kept + kept_len;
    const char *ta, *tb;
    size_t la, lb;
    for (;;) {
        int more_a = next_token(&a, a_end, &ta, &la), more_b = next_token(&b, b_end, &tb, &lb);
        if (more_a != more_b)
            return 1;
        if (!more_a)
            return 0;
        if ((la == lb && memcmp(ta, tb, la) == 0) || !is_number(ta, la))
            continue;
        double x = number(ta, la), y = number(tb, lb);
        double base = fabs(y);
        if (base == 0 || fabs(x - y) >= share * base)
            return 1;
    }
}

int ps_append(struct ps_text *t, const char *data, size_t len)
{
    if (t->len + len > t->cap) {
        size_t cap = t->cap ? t->cap : 4096;
        while (cap < t->len + len)
            cap *= 2;
        char *grown = realloc(t->data, cap);
        if (!grown)
            return -1;
        t->data = grown;
        t->cap = cap;
    }
    memcpy(t->data + t->len, data, len);
    t->len += len;
    return 0;
}

int ps_read_file(const char *path, struct ps_text *t, struct hw_err *err)
{
    t->len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        hw_seterr(err, "failed to open %s: %s", path, strerror(errno));
        return -1;
    }
    for (;;) {
        if (t->cap - t->len < 4096) {
            size_t cap = t->cap ? t->cap * 2 : 16384;
            char *grown = realloc(t->data, cap);
            if (!grown) {
                hw_seterr(err, "failed to read %s: out of memory", path);
                break;
            }
            t->data = grown;
            t->cap = cap;
        }
        ssize_t got = read(fd, t->data + t->len, t->cap - t->len);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            hw_seterr(err, "failed to read %s: %s", path, strerror(errno));
            break;
        }
        if (got == 0) {
            close(fd);
            return 0;
        }
        t->len += (size_t)got;
    }
    close(fd);
    return -1;
}

void ps_text_free(struct ps_text *t)
{
    free(t->data);
    t->data = NULL;
    t->len = t->cap = 0;
}
