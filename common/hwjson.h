/* JSON output for the tools' metadata files (bench.json, sched.json, wirecap.json, ...). */
#ifndef HWJSON_H
#define HWJSON_H
#include <stdio.h>

/* Writes s as a JSON string literal: quoted; '"' and '\\' escaped; control characters as \n, \t,
 * \r, \b, \f or \u00XX (DEL too); valid UTF-8 as is; each byte of an invalid UTF-8 sequence as
 * U+FFFD, so the file stays valid JSON whatever bytes a path or a command holds. NULL writes
 * null. */
void hw_json_str(FILE *f, const char *s);
#endif
