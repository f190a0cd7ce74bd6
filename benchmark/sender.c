/* A sending process: connects to the receiver, reads the data file from its own offset, turns
 * every LF into CR and writes the data to the socket, logging time and bytes around each call. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"
#include "child_common.h"
#include "evlog.h"
#include "hwclock.h"
#include "net.h"
#include "wire.h"

enum { EV_READ_START = 1, EV_READ_END, EV_WRITE_START, EV_WRITE_END };
static const char *const event_names[] = {"", "read_start", "read_end", "write_start", "write_end"};

static void lf_to_cr(uint8_t *p, size_t n)
{
    for (uint8_t *q = memchr(p, '\n', n); q; q = memchr(q + 1, '\n', n - (size_t)(q + 1 - p)))
        *q = '\r';
}

static int write_log(const struct hb_config *cfg, int index, const struct hb_evlog *log,
                     uint16_t tcp_port, const char *local)
{
    char name[64];
    snprintf(name, sizeof(name), "send-%d.tsv", index);
    FILE *f = hb_evlog_open_tsv(cfg->out_dir, name, "bench-send", log);
    if (!f)
        return -errno;
    fprintf(f, "# role: send-%d\n# index: %d\n# pid: %d\n", index, index, (int)getpid());
    fprintf(f, "# local: %s\n# peer: %s:%u\n", local, cfg->connect_addr, tcp_port);
    fprintf(f, "# read_size: %lld\n# write_size: %lld\n", (long long)cfg->read_size, (long long)cfg->write_size);
    fprintf(f, "t_ns\tevent\tbytes\n");
    for (int64_t i = 0; i < log->count; i++) {
        const struct hb_event *ev = &log->events[i];
        fprintf(f, "%lld\t%s\t%lld\n", (long long)ev->t_ns, event_names[ev->kind], (long long)ev->a);
    }
    return hb_evlog_close_tsv(f, cfg->out_dir, name, log->count, hb_evlog_sum_a(log));
}

int hb_run_sender(const struct hb_config *cfg, int index, uint16_t tcp_port,
                  int64_t window_start_ns, int64_t window_end_ns, int64_t quiet_end_ns, int report_fd)
{
    struct hb_child_report report = {.role = HB_ROLE_SEND, .index = index, .pid = getpid()};
    struct hb_evlog log;
    uint8_t *buf = NULL;
    int data_fd = -1, sock = -1, status = 1;
    char local[64] = "?";
    const int same_size = cfg->read_size == cfg->write_size;
    const size_t cap = (size_t)(cfg->read_size + cfg->write_size);

    hb_child_setup_signals();
    if (hb_evlog_init(&log, cfg->log_capacity, window_start_ns, window_end_ns) != 0) {
        fprintf(stderr, "hw-bench: send-%d: failed to allocate the event log\n", index);
        report.failed = 1;
        hb_send_report(report_fd, &report);
        return 1;
    }
    buf = malloc(cap);
    data_fd = open(cfg->data_path, O_RDONLY | O_CLOEXEC);
    if (!buf || data_fd < 0) {
        fprintf(stderr, "hw-bench: send-%d: failed to open %s: %s\n", index, cfg->data_path, strerror(errno));
        goto cleanup;
    }
    struct stat st;
    if (fstat(data_fd, &st) < 0 || st.st_size == 0) {
        fprintf(stderr, "hw-bench: send-%d: failed to read %s: empty file\n", index, cfg->data_path);
        goto cleanup;
    }
    /* Senders start evenly spaced over the file, so no two read the same data at once. */
    off_t start = (off_t)((__int128)index * st.st_size / cfg->senders);
    lseek(data_fd, start, SEEK_SET);

    sock = hb_connect_hello(cfg->connect_addr, tcp_port, HB_CONN_DATA, (uint16_t)index);
    if (sock >= 0) {
        struct sockaddr_in me;
        socklen_t me_len = sizeof(me);
        getsockname(sock, (struct sockaddr *)&me, &me_len);
        report.local_port = ntohs(me.sin_port);
        hb_socket_name(sock, 0, local, sizeof(local));
    }
    if (sock < 0) {
        fprintf(stderr, "hw-bench: send-%d: failed to connect to %s:%u: %s\n", index, cfg->connect_addr,
                tcp_port, strerror(-sock));
        goto cleanup;
    }

    size_t have = 0;
    int round_logged = 0;
    status = 0;
    while (!hb_child_stop) {
        int64_t now = hw_mono_ns();
        if (now >= window_end_ns)
            break;
        if (have < (size_t)cfg->write_size && (same_size ? have == 0 : 1)) {
            ssize_t n = read(data_fd, buf + have, (size_t)cfg->read_size);
            int64_t t_read_end = hw_mono_ns();
            if (n == 0) {
                lseek(data_fd, 0, SEEK_SET); /* wrap around the file */
                continue;
            }
            if (n < 0) {
                if (errno == EINTR)
                    continue;
                fprintf(stderr, "hw-bench: send-%d: failed to read %s: %s\n", index, cfg->data_path, strerror(errno));
                status = 1;
                break;
            }
            lf_to_cr(buf + have, (size_t)n);
            have += (size_t)n;
            /* A round (or, with unequal sizes, a call) that starts in the window is logged to its
             * end, so every logged call has its before and after events. */
            round_logged = hb_evlog_add(&log, now, EV_READ_START, cfg->read_size, 0, 0);
            report.events += round_logged;
            if (!same_size && round_logged)
                report.events += hb_evlog_add_always(&log, t_read_end, EV_READ_END, n, 0, 0);
            if (!same_size && have < (size_t)cfg->write_size)
                continue;
        }
        size_t chunk = same_size ? have : (size_t)cfg->write_size;
        int64_t t_write = hw_mono_ns();
        ssize_t w = write(sock, buf, chunk);
        int64_t t_written = hw_mono_ns();
        if (w < 0) {
            if (errno == EINTR)
                continue;
            fprintf(stderr, "hw-bench: send-%d: failed to write to the receiver: %s\n", index, strerror(errno));
            status = 1;
            break;
        }
        int write_logged = same_size && round_logged
                               ? hb_evlog_add_always(&log, t_write, EV_WRITE_START, (int64_t)chunk, 0, 0)
                               : hb_evlog_add(&log, t_write, EV_WRITE_START, (int64_t)chunk, 0, 0);
        if (write_logged)
            write_logged += hb_evlog_add_always(&log, t_written, EV_WRITE_END, w, 0, 0);
        report.events += write_logged;
        report.bytes_total += w;
        report.rounds_total++;
        if (write_logged) {
            report.bytes_window += w;
            report.calls_window++;
        }
        memmove(buf, buf + w, have - (size_t)w);
        have -= (size_t)w;
        if (cfg->think_ns > 0)
            hb_sleep_until(hw_mono_ns() + cfg->think_ns);
    }
    /* Closing ends the receiving process's log; the quiet time lets the system calm down. */
    close(sock);
    sock = -1;
    hb_sleep_until(quiet_end_ns);
    if (write_log(cfg, index, &log, tcp_port, local) != 0)
        status = 1;

cleanup:
    report.overflow = log.overflow;
    report.events -= log.overflow;
    report.failed = status != 0;
    hb_send_report(report_fd, &report);
    if (sock >= 0)
        close(sock);
    if (data_fd >= 0)
        close(data_fd);
    free(buf);
    hb_evlog_free(&log);
    return status;
}
