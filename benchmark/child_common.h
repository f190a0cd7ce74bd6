/* Helpers shared by the sending and background processes. */
#ifndef HW_CHILD_COMMON_H
#define HW_CHILD_COMMON_H
#include <signal.h>

#include "bench.h"

/* Set by SIGINT/SIGTERM: the process stops its loop, then writes its log and report. */
extern volatile sig_atomic_t hw_child_stop;

/* Installs the stop handlers (without SA_RESTART, so a blocked write returns EINTR) and asks the
 * kernel to send SIGTERM when main dies, so no child outlives a killed run. */
void hw_child_setup_signals(void);
/* SIGINT and SIGTERM call `handler` (no SA_RESTART: blocking calls return EINTR); SIGPIPE is
 * ignored so a closed peer shows up as EPIPE. */
void hw_catch_stop_signals(void (*handler)(int));
void hw_send_report(int report_fd, const struct hw_child_report *report);
#endif
