#include "child_common.h"

#include <errno.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "hwclock.h"
#include "hwsignal.h"
#include "wire.h"

volatile sig_atomic_t hw_child_stop;

static void on_stop(int sig)
{
    (void)sig;
    hw_child_stop = 1;
}

void hw_catch_stop_signals(void (*handler)(int))
{
    hw_on_stop_signals(handler);
    signal(SIGPIPE, SIG_IGN);
}

void hw_child_setup_signals(void)
{
    hw_catch_stop_signals(on_stop);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
}

void hw_send_report(int report_fd, const struct hw_child_report *report)
{
    (void)hw_write_all(report_fd, report, sizeof(*report));
}

void hw_sleep_until(int64_t t_ns)
{
    struct timespec ts = {.tv_sec = t_ns / 1000000000LL, .tv_nsec = t_ns % 1000000000LL};
    while (!hw_child_stop && clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}
