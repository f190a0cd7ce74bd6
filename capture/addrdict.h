/* A dictionary of IP addresses: each distinct address gets a small integer code (in order of
 * first appearance) and its text form, for the categorical src/dst columns. */
#ifndef CAP_ADDRDICT_H
#define CAP_ADDRDICT_H
#include <stdint.h>
#include <stdio.h>

struct cap_addrdict;

struct cap_addrdict *cap_addrdict_new(void);
void cap_addrdict_free(struct cap_addrdict *d);
/* The code of an address (family 4: first 4 bytes of addr; 6: 16 bytes); -1 when out of memory. */
int32_t cap_addrdict_code(struct cap_addrdict *d, uint8_t family, const uint8_t *addr);
uint32_t cap_addrdict_size(const struct cap_addrdict *d);
/* The text form of code i: IPv4 dotted quad or IPv6 compressed (RFC 5952, as inet_ntop). */
const char *cap_addrdict_text(const struct cap_addrdict *d, uint32_t i);
/* The code in d of code i of `other` (added to d when it is new): merges the dictionary of a later
 * part of a file into the earlier part's, in the order one pass over the file would have met them. */
int32_t cap_addrdict_add_from(struct cap_addrdict *d, const struct cap_addrdict *other, uint32_t i);
#endif
