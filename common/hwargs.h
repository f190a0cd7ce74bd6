/* Command-line values shared by the hostwire tools: integers, sizes with units, durations with
 * units, process ids, descriptors, and getopt's complaints. Each parser returns 0, or -1 with a
 * usage error in err: "failed to parse OPT: expected WHAT, got 'TEXT'". */
#ifndef HWARGS_H
#define HWARGS_H
#include <getopt.h>
#include <stdint.h>

#include "hwerr.h"

int hw_parse_i64(const char *opt, const char *text, int64_t lo, int64_t hi, int64_t *out, struct hw_err *err);
/* An int from lo to hi. */
int hw_parse_int(const char *opt, const char *text, int lo, int hi, int *out, struct hw_err *err);
/* A byte count with an optional k, M, G suffix (powers of 1024, "B" or "iB" may follow). */
int hw_parse_size(const char *opt, const char *text, int64_t lo, int64_t hi, int64_t *out, struct hw_err *err);
/* A duration: a number with an optional unit ns, us, ms, s, m (a bare number is seconds), e.g.
 * "2", "2.5s", "500ms", "1m"; at most one day. With positive set, 0 is refused. */
int hw_parse_duration_ns(const char *opt, const char *text, int positive, int64_t *out, struct hw_err *err);
/* A process id (1 .. INT32_MAX). */
int hw_parse_pid(const char *opt, const char *text, int *out, struct hw_err *err);
/* --ready-fd N: an open descriptor; it is marked close-on-exec so that no command inherits it. */
int hw_parse_ready_fd(const char *opt, const char *text, int *out, struct hw_err *err);

/* After getopt_long returned c == '?' (unknown option) or ':' (missing value; the option string
 * starts with ':'), with opterr = 0: the usage error "unknown option '--x'" or "option '-o' needs
 * a value". argv and optind as getopt_long left them. */
void hw_getopt_error(int c, char *const argv[], struct hw_err *err);

/* Stores one option: c as getopt_long returned it, name as the user spelled it ("-d" or
 * "--duration", for messages), arg its value (NULL for a flag). 0, or -1 with err set. */
typedef int (*hw_take_fn)(void *values, int c, const char *name, const char *arg, struct hw_err *err);

/* The option loop of every tool: getopt_long over argv (errors are ours, not getopt's: shorts
 * starts with ':', after a '+' where options end at the first operand), calling take for each
 * option; -h/--help ('h') prints help on stdout. Returns 0 with optind at the first operand, 1
 * after --help, or -1 with a usage error in err. */
int hw_getopt(int argc, char **argv, const char *shorts, const struct option *longs, const char *help,
              hw_take_fn take, void *values, struct hw_err *err);
#endif
