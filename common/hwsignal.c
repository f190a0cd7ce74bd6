#include "hwsignal.h"

volatile sig_atomic_t hw_stop_requested;

static void request_stop(int sig)
{
    (void)sig;
    hw_stop_requested = 1;
}

void hw_catch_stop(void)
{
    hw_on_stop_signals(request_stop);
}
