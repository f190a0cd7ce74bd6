/* A background process: repeats the sieve over 2^N bytes, checks every round's answer against
 * the precomputed one, and logs the end of each round. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "child_common.h"
#include "evlog.h"
#include "hwclock.h"
#include "sieve.h"

static int write_log(const struct hb_config *cfg, int index, const struct hb_evlog *log, int copy)
{
    char name[64];
    snprintf(name, sizeof(name), "bg-%d.tsv", index);
    FILE *f = hb_evlog_open_tsv(cfg->out_dir, name, "bench-background", log);
    if (!f)
        return -errno;
    fprintf(f, "# role: bg-%d\n# index: %d\n# pid: %d\n", index, index, (int)getpid());
    fprintf(f, "# sieve_log2: %d\n# code_copy: %d\n", cfg->sieve_log2, copy);
    fprintf(f, "t_ns\tround\tprimes\tlargest\tok\n");
    for (int64_t i = 0; i < log->count; i++) {
        const struct hb_event *ev = &log->events[i];
        fprintf(f, "%lld\t%lld\t%lld\t%lld\t%d\n", (long long)ev->t_ns, (long long)ev->a, (long long)ev->b,
                (long long)ev->c, ev->kind);
    }
    return hb_evlog_close_tsv(f, cfg->out_dir, name, log->count, -1);
}

int hb_run_background(const struct hb_config *cfg, int index, int64_t window_start_ns,
                      int64_t window_end_ns, int64_t quiet_end_ns, int report_fd)
{
    struct hb_child_report report = {.role = HB_ROLE_BG, .index = index, .pid = getpid()};
    struct hb_evlog log;
    const int copy = index % cfg->code_copies;
    const struct hb_sieve_result want = hb_sieve_expected(cfg->sieve_log2);
    int status = 1;

    hb_child_setup_signals();
    uint8_t *data = malloc((size_t)1 << cfg->sieve_log2);
    if (!data || hb_evlog_init(&log, cfg->log_capacity, window_start_ns, window_end_ns) != 0) {
        fprintf(stderr, "hw-bench: bg-%d: failed to allocate memory\n", index);
        free(data);
        report.failed = 1;
        hb_send_report(report_fd, &report);
        return 1;
    }
    while (!hb_child_stop && hw_mono_ns() < window_end_ns) {
        struct hb_sieve_result got = hb_sieve_round(copy, data, cfg->sieve_log2);
        int64_t t_end = hw_mono_ns();
        int ok = got.primes == want.primes && got.largest == want.largest;
        if (!ok) {
            report.check_failures++;
            fprintf(stderr, "hw-bench: bg-%d: sieve check failed in round %lld: %lld primes, largest %lld "
                            "(expected %lld, %lld)\n", index, (long long)report.rounds_total,
                    (long long)got.primes, (long long)got.largest, (long long)want.primes, (long long)want.largest);
        }
        if (hb_evlog_in_window(&log, t_end))
            report.calls_window++;
        report.events += hb_evlog_add(&log, t_end, ok, report.rounds_total, got.primes, got.largest);
        report.rounds_total++;
    }
    hb_sleep_until(quiet_end_ns);
    status = write_log(cfg, index, &log, copy) != 0 || report.check_failures > 0;
    report.overflow = log.overflow;
    report.events -= log.overflow;
    report.failed = status;
    hb_send_report(report_fd, &report);
    free(data);
    hb_evlog_free(&log);
    return status;
}
