/* A dictionary of IP addresses: each distinct address gets a small integer code (in order of
 * first appearance) and its text form, for the categorical src/dst columns. */
#ifndef HW_ADDRDICT_H
#define HW_ADDRDICT_H
#include <stdint.h>
#include <stdio.h>

struct addrdict;

struct addrdict *addrdict_new(void);
void addrdict_free(struct addrdict *d);
/* The code of an address (family 4: first 4 bytes of addr; 6: 16 bytes); -1 when out of memory. */
int32_t addrdict_code(struct addrdict *d, uint8_t family, const uint8_t *addr);
uint32_t addrdict_size(const struct addrdict *d);
/* The text form of code i: IPv4 dotted quad or IPv6 compressed (RFC 5952, as inet_ntop). */
const char *addrdict_text(const struct addrdict *d, uint32_t i);
#endif
