#include "hwjson.h"

#include <stdint.h>

/* Length of the valid UTF-8 sequence at p (1 to 4), or 0 when the bytes there are not one
 * (overlong forms, surrogates and code points above U+10FFFF included). */
static int utf8_len(const unsigned char *p)
{
    uint32_t cp;
    int n;
    if (p[0] < 0x80)
        return 1;
    if (p[0] >= 0xc2 && p[0] <= 0xdf)
        n = 2, cp = p[0] & 0x1f;
    else if (p[0] >= 0xe0 && p[0] <= 0xef)
        n = 3, cp = p[0] & 0x0f;
    else if (p[0] >= 0xf0 && p[0] <= 0xf4)
        n = 4, cp = p[0] & 0x07;
    else
        return 0;
    for (int i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80)   /* a NUL ends the string here too */
            return 0;
        cp = cp << 6 | (p[i] & 0x3f);
    }
    if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        return 0;
    return n;
}

void hw_json_str(FILE *f, const char *s)
{
    if (!s) {
        fputs("null", f);
        return;
    }
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        unsigned char c = *p;
        const char *esc = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\n' ? "\\n" : c == '\t' ? "\\t"
                        : c == '\r' ? "\\r" : c == '\b' ? "\\b" : c == '\f' ? "\\f" : NULL;
        int n = utf8_len(p);
        if (esc)
            fputs(esc, f);
        else if (c < 0x20 || c == 0x7f)
            fprintf(f, "\\u%04x", c);
        else if (n == 0)
            fputs("\\ufffd", f);
        else
            fwrite(p, 1, (size_t)n, f);
        p += n ? n : 1;
    }
    fputc('"', f);
}
