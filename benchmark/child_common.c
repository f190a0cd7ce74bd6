#include "child_common.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "hwclock.h"
#include "hwio.h"
#include "hwsignal.h"
#include "wire.h"

volatile sig_atomic_t hb_child_stop;

static void on_stop(int sig)
{
    (void)sig;
    hb_child_stop = 1;
}

void hb_catch_stop_signals(void (*handler)(int))
{
    hw_on_stop_signals(handler);
    signal(SIGPIPE, SIG_IGN);
}

void hb_child_setup_signals(void)
{
    hb_catch_stop_signals(on_stop);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
}

void hb_send_report(int report_fd, const struct hb_child_report *report)
{
    (void)hw_write_all(report_fd, report, sizeof(*report));
}

void hb_sleep_until(int64_t t_ns)
{
    struct timespec ts = {.tv_sec = t_ns / 1000000000LL, .tv_nsec = t_ns % 1000000000LL};
    while (!hb_child_stop && clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

void hb_say(FILE *log, const char *fmt, ...)
{
    va_list ap;
    if (!log)
        return;
    va_start(ap, fmt);
    fprintf(log, "%s: ", HB_TOOL);
    vfprintf(log, fmt, ap);
    fputc('\n', log);
    va_end(ap);
}
