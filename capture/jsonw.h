/* Tiny JSON output functions for the metadata files (columns.json, wirecap.json). */
#ifndef HW_JSONW_H
#define HW_JSONW_H
#include <stdio.h>

/* Write s as a JSON string literal (quoted and escaped); NULL writes null. */
void json_str(FILE *f, const char *s);
#endif
