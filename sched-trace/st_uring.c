/* io_uring operations from the kernel's trace events: a submission (io_uring_submit_req: ring,
 * request, opcode, in the submitting task), the file it works on (io_uring_file_get: the fd,
 * traced only for a plain fd, not for a registered file) and its completion (io_uring_complete:
 * the result). The three share the request's address, unique while the request is in flight. A
 * send's zero-copy notification (IORING_CQE_F_NOTIF) is a completion of a request never
 * submitted, and carries no bytes: it is skipped. Only the operations that move bytes into a
 * file or socket are kept (send, sendmsg, their zero-copy forms, write, writev, write_fixed,
 * splice, tee). */
#include "st_uring.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CQE_F_NOTIF (1u << 3)   /* IORING_CQE_F_NOTIF */

const char *const st_uring_events[] = {
    "?io_uring:io_uring_submit_req", "?io_uring:io_uring_file_get", "?io_uring:io_uring_complete",
};
const size_t st_n_uring_events = sizeof(st_uring_events) / sizeof(st_uring_events[0]);

static const char *const kept_ops[] = {
    "SEND", "SENDMSG", "SEND_ZC", "SENDMSG_ZC", "WRITE", "WRITEV", "WRITE_FIXED", "SPLICE", "TEE",
};

enum { EV_NONE, EV_SUBMIT, EV_FILE, EV_COMPLETE };
struct bound {
    int id, kind;
    struct tep_format_field *req, *opcode, *op_str, *fd, *res, *cflags;
};

struct pending {
    unsigned long long req;   /* 0: empty */
    long long t_submit, fd;
    int tid;
    const char *call;
};

struct st_uring {
    struct bound ev[3];
    int nev;
    char names[256][24];      /* by opcode: "uring_<op>", "" not kept, unset until first seen */
    unsigned char named[256];
    struct pending *tab;
    size_t cap, used, scan;
};

struct st_uring *st_uring_new(void)
{
    return calloc(1, sizeof(struct st_uring));
}

void st_uring_free(struct st_uring *u)
{
    if (u)
        free(u->tab);
    free(u);
}

int st_uring_bind(struct st_uring *u, struct tep_event *ev)
{
    int kind = strcmp(ev->name, "io_uring_submit_req") == 0 ? EV_SUBMIT
               : strcmp(ev->name, "io_uring_file_get") == 0  ? EV_FILE
               : strcmp(ev->name, "io_uring_complete") == 0  ? EV_COMPLETE
                                                             : EV_NONE;
    if (kind == EV_NONE || u->nev >= 3 || !(u->ev[u->nev].req = tep_find_field(ev, "req")))
        return 0;
    struct bound *b = &u->ev[u->nev];
    b->id = ev->id;
    b->kind = kind;
    b->opcode = tep_find_field(ev, "opcode");
    b->op_str = tep_find_field(ev, "op_str");
    b->fd = tep_find_field(ev, "fd");
    b->res = tep_find_field(ev, "res");
    b->cflags = tep_find_field(ev, "cflags");
    if ((kind == EV_SUBMIT && !b->opcode) || (kind == EV_FILE && !b->fd) || (kind == EV_COMPLETE && !b->res))
        return 0;
    u->nev++;
    return 1;
}

static long long num(struct tep_format_field *f, struct tep_record *rec)
{
    unsigned long long v = 0;
    tep_read_number_field(f, rec->data, &v);
    if ((f->flags & TEP_FIELD_IS_SIGNED) && f->size < 8) {
        int shift = 64 - 8 * f->size;
        return (long long)(v << shift) >> shift;
    }
    return (long long)v;
}

/* The record's name of an opcode, from the kernel's own op_str the first time it is seen. */
static const char *op_name(struct st_uring *u, const struct bound *b, struct tep_record *rec, unsigned op)
{
    if (!u->named[op]) {
        u->named[op] = 1;
        u->names[op][0] = '\0';
        if (b->op_str && (b->op_str->flags & TEP_FIELD_IS_DYNAMIC)) {
            unsigned loc = (unsigned)num(b->op_str, rec), off = loc & 0xffff, len = loc >> 16;
            char text[16];
            if (len && len < sizeof(text) && off + len <= (unsigned)rec->size) {
                memcpy(text, (const char *)rec->data + off, len);
                text[len] = '\0';
                for (size_t i = 0; i < sizeof(kept_ops) / sizeof(kept_ops[0]); i++)
                    if (strcmp(text, kept_ops[i]) == 0) {
                        int w = snprintf(u->names[op], sizeof(u->names[op]), "uring_");
                        for (size_t c = 0; text[c] && w + 1 < (int)sizeof(u->names[op]); c++)
                            u->names[op][w++] = (char)tolower((unsigned char)text[c]);
                        u->names[op][w] = '\0';
                    }
            }
        }
    }
    return u->names[op][0] ? u->names[op] : NULL;
}

static size_t slot_of(unsigned long long req, size_t cap)
{
    return (size_t)((req >> 6) * 11400714819323198485ull % cap);
}

/* The pending request req, or (add) a new slot for it; NULL when absent (or out of memory). */
static struct pending *find(struct st_uring *u, unsigned long long req, int add)
{
    if (add && (u->used + 1) * 2 > u->cap) {
        size_t cap = u->cap ? u->cap * 2 : 256;
        struct pending *grown = calloc(cap, sizeof(*grown));
        if (!grown)
            return NULL;
        for (size_t i = 0; i < u->cap; i++)
            if (u->tab[i].req) {
                size_t h = slot_of(u->tab[i].req, cap);
                while (grown[h].req)
                    h = (h + 1) % cap;
                grown[h] = u->tab[i];
            }
        free(u->tab);
        u->tab = grown;
        u->cap = cap;
    }
    if (!u->cap)
        return NULL;
    size_t h = slot_of(req, u->cap);
    while (u->tab[h].req && u->tab[h].req != req)
        h = (h + 1) % u->cap;
    if (u->tab[h].req == req)
        return &u->tab[h];
    if (!add)
        return NULL;
    u->tab[h].req = req;
    u->used++;
    return &u->tab[h];
}

/* Empties slot p and moves the entries after it back (linear probing without tombstones). */
static void erase(struct st_uring *u, struct pending *p)
{
    size_t i = (size_t)(p - u->tab);
    u->tab[i].req = 0;
    u->used--;
    for (size_t j = (i + 1) % u->cap; u->tab[j].req; j = (j + 1) % u->cap) {
        size_t h = slot_of(u->tab[j].req, u->cap);
        if ((j > i && (h <= i || h > j)) || (j < i && h <= i && h > j)) {
            u->tab[i] = u->tab[j];
            u->tab[j].req = 0;
            i = j;
        }
    }
}

static void fill(struct st_uring_op *op, const struct pending *p, long long t_done, long long result)
{
    *op = (struct st_uring_op){.t_submit = p->t_submit, .t_done = t_done, .tid = p->tid, .fd = p->fd,
                               .result = result, .call = p->call};
}

int st_uring_record(struct st_uring *u, struct tep_event *ev, struct tep_record *rec, struct st_uring_op *op)
{
    const struct bound *b = NULL;
    for (int i = 0; i < u->nev && !b; i++)
        if (u->ev[i].id == ev->id)
            b = &u->ev[i];
    if (!b)
        return 0;
    unsigned long long req = (unsigned long long)num(b->req, rec);
    if (!req)   /* a completion posted without a request (an extra CQE of a multishot operation) */
        return 0;
    if (b->kind == EV_SUBMIT) {
        const char *call = op_name(u, b, rec, (unsigned)num(b->opcode, rec) & 0xff);
        struct pending *p = find(u, req, 0);
        if (p)          /* a request submitted again before its completion was seen: that one was lost */
            erase(u, p);
        if (!call)
            return 0;
        if (!(p = find(u, req, 1)))
            return -1;
        p->t_submit = (long long)rec->ts;
        p->tid = tep_data_pid(ev->tep, rec);
        p->fd = -1;
        p->call = call;
        return 0;
    }
    struct pending *p = find(u, req, 0);
    if (!p)
        return 0;
    if (b->kind == EV_FILE) {   /* the first is the file it writes to: splice and tee get their input after */
        if (p->fd < 0)
            p->fd = num(b->fd, rec);
        return 0;
    }
    if (b->cflags && ((unsigned long long)num(b->cflags, rec) & CQE_F_NOTIF))
        return 0;
    fill(op, p, (long long)rec->ts, num(b->res, rec));
    erase(u, p);
    return 1;
}

int st_uring_next_pending(struct st_uring *u, struct st_uring_op *op)
{
    for (; u->scan < u->cap; u->scan++)
        if (u->tab[u->scan].req) {
            fill(op, &u->tab[u->scan], 0, 0);
            u->scan++;
            return 1;
        }
    return 0;
}
