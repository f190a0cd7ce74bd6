#include "hwerr.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void vset(struct hw_err *err, size_t at, int usage, const char *fmt, va_list ap)
{
    if (!err)
        return;
    if (at < sizeof(err->msg))
        vsnprintf(err->msg + at, sizeof(err->msg) - at, fmt, ap);
    err->usage |= usage;
}

void hw_seterr(struct hw_err *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vset(err, 0, 0, fmt, ap);
    va_end(ap);
}

void hw_usage_err(struct hw_err *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vset(err, 0, 1, fmt, ap);
    va_end(ap);
}

void hw_adderr(struct hw_err *err, const char *fmt, ...)
{
    va_list ap;
    size_t used = err ? strnlen(err->msg, sizeof(err->msg)) : 0;
    if (used > 0 && used + 1 < sizeof(err->msg))
        err->msg[used++] = '\n';
    va_start(ap, fmt);
    vset(err, used, 0, fmt, ap);
    va_end(ap);
}

static void see_help(const char *tool, const char *command)
{
    fprintf(stderr, " (see '%s %s%s--help')", tool, command ? command : "", command ? " " : "");
}

int hw_err_exit(const char *tool, const char *command, const struct hw_err *err)
{
    const char *line = err->msg[0] ? err->msg : "failed (no reason given)";
    for (;;) {
        const char *end = strchr(line, '\n');
        int len = end ? (int)(end - line) : (int)strlen(line);
        fprintf(stderr, "%s: %s%s%.*s", tool, err->usage && command ? command : "",
                err->usage && command ? ": " : "", len, line);
        if (err->usage && !end)
            see_help(tool, command);
        fputc('\n', stderr);
        if (!end)
            break;
        line = end + 1;
    }
    return err->usage ? HW_EXIT_USAGE : HW_EXIT_FAILURE;
}

int hw_usage_exit(const char *tool, const char *command, const char *fmt, ...)
{
    struct hw_err err = {.usage = 1};
    va_list ap;
    va_start(ap, fmt);
    vset(&err, 0, 1, fmt, ap);
    va_end(ap);
    return hw_err_exit(tool, command, &err);
}
