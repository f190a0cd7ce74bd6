/* The error convention of every hostwire library part: a function that fails fills a struct
 * hw_err (one message shaped "failed to <verb> <object>: <reason>", without the tool's name) and
 * returns -1 (or NULL); it never prints and never exits. The thin main.c prints the message as
 * "hw-<tool>: <message>" and exits 1, or 2 when `usage` says the fault is in what was asked. */
#ifndef HWERR_H
#define HWERR_H

#define HW_EXIT_OK 0
#define HW_EXIT_FAILURE 1
#define HW_EXIT_USAGE 2

struct hw_err {
    char msg[8192];  /* one line, or several separated by '\n' (a run with several failures) */
    int usage;       /* 1 when the fault is in what the user asked for (exit 2) */
};

/* Sets the message (err may be NULL: nothing happens). */
void hw_seterr(struct hw_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same, and marks the error as a usage error. */
void hw_usage_err(struct hw_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Adds one more line to the message (sets it when empty). */
void hw_adderr(struct hw_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* For a thin main.c: prints each line of err as "TOOL: line" on stderr, followed on a usage error
 * by " (see 'TOOL[ COMMAND] --help')"; returns the exit status, 2 for a usage error, else 1.
 * command is NULL for a tool without subcommands. */
int hw_err_exit(const char *tool, const char *command, const struct hw_err *err);
/* Prints "TOOL: [COMMAND: ]PROBLEM (see 'TOOL[ COMMAND] --help')" and returns 2. */
int hw_usage_exit(const char *tool, const char *command, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#endif
