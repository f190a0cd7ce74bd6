/* Parsing of command-line values shared by the hostwire tools. Each parser returns 0 on success
 * and -1 after writing one line "<tool>: <option>: expected ..., got '...'" to stderr. */
#ifndef HWARGS_H
#define HWARGS_H
#include <stdint.h>

int hw_parse_i64(const char *tool, const char *opt, const char *text, int64_t lo, int64_t hi, int64_t *out);
/* A byte count with an optional k, M, G suffix (powers of 1024). */
int hw_parse_size(const char *tool, const char *opt, const char *text, int64_t lo, int64_t hi, int64_t *out);
/* A duration in seconds with an optional unit: ns, us, ms, s (default s); e.g. "2", "2.5s", "500ms". */
int hw_parse_duration_ns(const char *tool, const char *opt, const char *text, int64_t *out);
#endif
