/* The /proc sampler of real hosts (docs/hosts.md, after dproc's resource modules): each resource
 * a /proc file read at its own multiple of the period and printed as the kernel wrote it, unless
 * the differential filter drops it (kept only when one of its numbers differs by at least a share
 * from the last sample kept). Library part of hw-procsample; main.c is the loop. */
#ifndef PSAMPLE_H
#define PSAMPLE_H
#include <stddef.h>
#include <stdint.h>

#include "hwerr.h"

#define PS_MAX_RESOURCES 32

struct ps_text {
    char *data;
    size_t len, cap;
};

struct ps_resource {
    char name[32];
    char path[256];
    int64_t every;       /* sampled at rounds 0, every, 2 * every, ... */
    double share;        /* the filter's share; 0: every sample kept */
    struct ps_text now;  /* this round's read */
    struct ps_text kept; /* the last sample printed */
    int64_t dropped;
};

/* "NAME:PATH:EVERY:SHARE" (EVERY a whole number of rounds from 1, SHARE from 0 to below 1) into
 * r; 0, or -1 with a usage error. */
int ps_parse_resource(const char *text, struct ps_resource *r, struct hw_err *err);

/* Whether the filter keeps `now` against `kept`: their tokens (split at blanks, ':' and '|')
 * differ in number, or a number in `now` differs from the one at its place in `kept` by at
 * least share of the latter's size (any change of a number that was 0). Words are not compared. */
int ps_differs(const char *now, size_t now_len, const char *kept, size_t kept_len, double share);

/* Reads the file at path whole into t (grown as needed); 0, or -1 with err set. Opened each time:
 * a file replaced by a rename is read anew. */
int ps_read_file(const char *path, struct ps_text *t, struct hw_err *err);

/* Appends len bytes to t; 0, or -1 when memory runs out. */
int ps_append(struct ps_text *t, const char *data, size_t len);

void ps_text_free(struct ps_text *t);
#endif
