/* Helpers shared by the processes of hw-bench: main, the sending and background processes. */
#ifndef HB_CHILD_COMMON_H
#define HB_CHILD_COMMON_H
#include <signal.h>
#include <stdio.h>

#include "bench.h"

/* Set by SIGINT/SIGTERM: the process stops its loop, then writes its log and report. */
extern volatile sig_atomic_t hb_child_stop;

/* Installs the stop handlers (without SA_RESTART, so a blocked write returns EINTR) and asks the
 * kernel to send SIGTERM when main dies, so no child outlives a killed run. */
void hb_child_setup_signals(void);
/* SIGINT and SIGTERM call `handler` (no SA_RESTART: blocking calls return EINTR); SIGPIPE is
 * ignored so a closed peer shows up as EPIPE. */
void hb_catch_stop_signals(void (*handler)(int));
void hb_send_report(int report_fd, const struct hb_child_report *report);
/* -v: one line "hw-bench: MESSAGE" on log (NULL: nothing). */
void hb_say(FILE *log, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#endif
