/* A command started behind a gate: the child is forked at once but waits on a pipe until its
 * starter (a tracer, a collector) is ready to see it, then runs an optional preparation and execs.
 * The child's pid is known before it runs a single instruction of the command, so a tracer can
 * seize it or a tracefs buffer can filter on it from its first system call. */
#ifndef HWGATE_H
#define HWGATE_H
#include <sys/types.h>

#include "hwerr.h"

struct hw_gate {
    pid_t pid;      /* the child; -1 before hw_gate_start */
    int go_fd;      /* the starter's end of the pipe; -1 once opened or shut */
};

/* Runs in the child once the gate opens, before exec; a non-zero return ends the child with
 * status 127 without running the command. */
typedef int (*hw_gate_prepare_fn)(void *arg);

/* Forks the child of argv (argv[0] looked up in PATH). In the child: SIGINT and SIGTERM go back to
 * their default action, it waits for the gate, runs prepare(arg) if given, then execs; when the
 * exec fails it writes "TOOL: failed to run ARGV0: REASON" on its stderr (it has no caller to
 * return to) and exits 127; when the gate is shut without opening it exits 127 at once.
 * Returns 0, or -1 with err set. */
int hw_gate_start(struct hw_gate *g, const char *tool, char *const argv[], hw_gate_prepare_fn prepare, void *arg,
                  struct hw_err *err);
/* Lets the child go on. 0, or -1 with err set (the child is gone). */
int hw_gate_open(struct hw_gate *g, struct hw_err *err);
/* Shuts the gate unopened (no-op when already opened): the child exits 127 without running. */
void hw_gate_shut(struct hw_gate *g);
#endif
