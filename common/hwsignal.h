/* The stop signals of every hostwire tool: SIGINT and SIGTERM call `handler`, which only sets a
 * flag; no SA_RESTART, so a blocking poll(), read() or waitpid() returns EINTR at once and the
 * tool goes on to finish its files and print its loss counters. */
#ifndef HWSIGNAL_H
#define HWSIGNAL_H
#include <signal.h>
#include <string.h>

static inline void hw_on_stop_signals(void (*handler)(int))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

/* The plain case: SIGINT and SIGTERM set hw_stop_requested, which the library loop watches. */
extern volatile sig_atomic_t hw_stop_requested;
void hw_catch_stop(void);
#endif
