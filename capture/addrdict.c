/* Open-addressing hash table of addresses; the last looked-up address is cached, since a flow's
 * frames repeat the same pair. */
#include "addrdict.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

struct addr_entry {
    uint8_t family;
    uint8_t addr[16];
    char text[INET6_ADDRSTRLEN];
};

struct cap_addrdict {
    struct addr_entry *entries;  /* in code order */
    uint32_t n, cap;
    int32_t *slots;              /* hash slot -> code, -1 empty */
    uint32_t nslots;
    int32_t last_code, prev_code;  /* a two-entry cache: a flow's source and destination */
};

struct cap_addrdict *cap_addrdict_new(void)
{
    struct cap_addrdict *d = calloc(1, sizeof(*d));
    if (!d)
        return NULL;
    d->nslots = 256;
    d->slots = malloc(d->nslots * sizeof(*d->slots));
    if (!d->slots) {
        free(d);
        return NULL;
    }
    memset(d->slots, 0xff, d->nslots * sizeof(*d->slots));
    d->last_code = d->prev_code = -1;
    return d;
}

void cap_addrdict_free(struct cap_addrdict *d)
{
    if (!d)
        return;
    free(d->entries);
    free(d->slots);
    free(d);
}

static uint32_t addr_hash(uint8_t family, const uint8_t *a)
{
    uint32_t h = 2166136261u ^ family;
    int n = family == 4 ? 4 : 16;
    for (int i = 0; i < n; i++)
        h = (h ^ a[i]) * 16777619u;
    return h;
}

static inline int same(const struct addr_entry *e, uint8_t family, const uint8_t *a)
{
    if (e->family != family)
        return 0;
    return family == 4 ? memcmp(e->addr, a, 4) == 0 : memcmp(e->addr, a, 16) == 0;
}

static int grow_slots(struct cap_addrdict *d)
{
    uint32_t nslots = d->nslots * 2;
    int32_t *slots = malloc(nslots * sizeof(*slots));
    if (!slots)
        return -1;
    memset(slots, 0xff, nslots * sizeof(*slots));
    for (uint32_t i = 0; i < d->n; i++) {
        uint32_t s = addr_hash(d->entries[i].family, d->entries[i].addr) & (nslots - 1);
        while (slots[s] >= 0)
            s = (s + 1) & (nslots - 1);
        slots[s] = (int32_t)i;
    }
    free(d->slots);
    d->slots = slots;
    d->nslots = nslots;
    return 0;
}

int32_t cap_addrdict_code(struct cap_addrdict *d, uint8_t family, const uint8_t *addr)
{
    uint32_t s;
    struct addr_entry *e;

    if (d->last_code >= 0 && same(&d->entries[d->last_code], family, addr))
        return d->last_code;
    if (d->prev_code >= 0 && same(&d->entries[d->prev_code], family, addr)) {
        int32_t c = d->prev_code;
        d->prev_code = d->last_code;
        return d->last_code = c;
    }
    d->prev_code = d->last_code;
    s = addr_hash(family, addr) & (d->nslots - 1);
    while (d->slots[s] >= 0) {
        if (same(&d->entries[d->slots[s]], family, addr))
            return d->last_code = d->slots[s];
        s = (s + 1) & (d->nslots - 1);
    }
    if (d->n == INT32_MAX)
        return -1;
    if (d->n == d->cap) {
        uint32_t cap = d->cap ? d->cap * 2 : 64;
        struct addr_entry *entries = realloc(d->entries, cap * sizeof(*entries));
        if (!entries)
            return -1;
        d->entries = entries;
        d->cap = cap;
    }
    e = &d->entries[d->n];
    memset(e, 0, sizeof(*e));
    e->family = family;
    memcpy(e->addr, addr, family == 4 ? 4 : 16);
    inet_ntop(family == 4 ? AF_INET : AF_INET6, e->addr, e->text, sizeof(e->text));
    d->slots[s] = (int32_t)d->n;
    d->last_code = (int32_t)d->n;
    d->n++;
    if (d->n * 2 > d->nslots && grow_slots(d) < 0)
        return -1;
    return d->last_code;
}

uint32_t cap_addrdict_size(const struct cap_addrdict *d) { return d->n; }

const char *cap_addrdict_text(const struct cap_addrdict *d, uint32_t i) { return d->entries[i].text; }

int32_t cap_addrdict_add_from(struct cap_addrdict *d, const struct cap_addrdict *other, uint32_t i)
{
    return cap_addrdict_code(d, other->entries[i].family, other->entries[i].addr);
}
