/* The remote receiver (`hw-bench receive`): reserves a TCP and a UDP port and reports them to main
 * on stdout, answers clock-sync datagrams, and forks one receiving process per data connection.
 * Each receiving process stamps every read, counts LF bytes (there must be none), and stores its
 * log when the sender closes: stamps corrected onto the sender's clock and the raw ones. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "child_common.h"
#include "clocksync.h"
#include "evlog.h"
#include "hwclock.h"
#include "hwio.h"
#include "net.h"
#include "wire.h"

#define RECV_BUF (64 * 1024)

static volatile sig_atomic_t receiver_stop;
static void on_stop(int sig) { (void)sig; receiver_stop = 1; }

struct receiver_state {
    const struct hb_receiver_config *cfg;
    struct hb_window_msg window;
    int have_window;
    int control_fd;
    int summary_pipe[2];
    pid_t children[HB_MAX_PROCS];
    int child_count;
    struct hb_recv_summary summaries[HB_MAX_PROCS];
    int summary_count;
    struct hw_err *err;       /* warnings and the error that ended the receiver */
};

static int bind_socket(int type, const char *addr)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = 0};
    if (inet_pton(AF_INET, addr, &sin.sin_addr) != 1)
        return -EINVAL;
    int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 || (type == SOCK_STREAM && listen(fd, 256) < 0)) {
        int err = -errno;
        close(fd);
        return err;
    }
    return fd;
}

static uint16_t local_port(int fd)
{
    struct sockaddr_in sin;
    socklen_t len = sizeof(sin);
    getsockname(fd, (struct sockaddr *)&sin, &len);
    return ntohs(sin.sin_port);
}

static int write_recv_log(const struct receiver_state *st, int index, uint32_t sender_pid,
                          const struct hb_evlog *log, int64_t lf_count, int64_t bytes_total, int fd)
{
    char name[64], local[64], peer[64];
    hb_socket_name(fd, 0, local, sizeof(local));
    hb_socket_name(fd, 1, peer, sizeof(peer));
    snprintf(name, sizeof(name), "recv-%d.tsv", index);
    FILE *f = hb_evlog_open_tsv(st->cfg->out_dir, name, "bench-receive", log);
    if (!f)
        return -errno;
    fprintf(f, "# role: recv-%d\n# index: %d\n# pid: %d\n# sender_pid: %u\n", index, index, (int)getpid(), sender_pid);
    fprintf(f, "# local: %s\n# peer: %s\n", local, peer);
    fprintf(f, "# clock_offset_ns: %lld\n", (long long)st->window.offset_ns);
    fprintf(f, "# lf_received: %lld\n# bytes_total: %lld\n", (long long)lf_count, (long long)bytes_total);
    fprintf(f, "t_ns\tt_raw_ns\tbytes\n");
    for (int64_t i = 0; i < log->count; i++) {
        const struct hb_event *ev = &log->events[i];
        fprintf(f, "%lld\t%lld\t%lld\n", (long long)ev->t_ns, (long long)ev->b, (long long)ev->a);
    }
    return hb_evlog_close_tsv(f, st->cfg->out_dir, name, log->count, hb_evlog_sum_a(log));
}

static int count_lf(const uint8_t *p, size_t n)
{
    int count = 0;
    for (const uint8_t *q = memchr(p, '\n', n); q; q = memchr(q + 1, '\n', n - (size_t)(q + 1 - p)))
        count++;
    return count;
}

/* The receiving process of one data connection. */
static int receive_connection(struct receiver_state *st, int fd, const struct hb_hello_msg *hello)
{
    struct hb_recv_summary sum = {.index = hello->index, .pid = (uint32_t)getpid()};
    struct hb_evlog log;
    uint8_t *buf = malloc(RECV_BUF);
    int status = 0;
    if (!buf || hb_evlog_init(&log, st->cfg->log_capacity, st->window.window_start_ns,
                              st->window.window_end_ns) != 0) {
        fprintf(stderr, "hw-bench: recv-%u: failed to allocate memory\n", hello->index);
        free(buf);
        return 1;
    }
    /* A receiver that falls behind on purpose: the stamp (on main's clock) at which it stops
     * reading once, for pause_ns. */
    int64_t pause_at = st->cfg->pause_at_ns >= 0 && st->window.window_start_ns != INT64_MAX
                           ? st->window.window_start_ns + st->cfg->pause_at_ns : INT64_MAX;
    for (;;) {
        if (hw_mono_ns() - st->window.offset_ns >= pause_at) {
            hb_sleep_until(hw_mono_ns() + st->cfg->pause_ns);
            pause_at = INT64_MAX;
        }
        ssize_t n = read(fd, buf, RECV_BUF);
        int64_t t_raw = hw_mono_ns();
        if (n < 0 && errno == EINTR) {
            if (receiver_stop)
                break; /* stopped: store what was received */
            continue;
        }
        if (n < 0) {
            fprintf(stderr, "hw-bench: recv-%u: failed to read from the sender: %s\n", hello->index, strerror(errno));
            status = 1;
            break;
        }
        if (n == 0)
            break;
        int64_t t_corrected = t_raw - st->window.offset_ns;
        sum.bytes_total += n;
        sum.lf_count += count_lf(buf, (size_t)n);
        if (hb_evlog_add(&log, t_corrected, 0, n, t_raw, 0))
            sum.bytes_window += n;
    }
    sum.overflow = log.overflow;
    sum.events = log.count;
    if (write_recv_log(st, hello->index, hello->pid, &log, sum.lf_count, sum.bytes_total, fd) != 0)
        status = 1;
    sum.exit_status = status;
    uint8_t packed[HB_SUMMARY_LEN];
    hb_pack_summary(packed, &sum);
    (void)hw_write_all(st->summary_pipe[1], packed, sizeof(packed));
    free(buf);
    hb_evlog_free(&log);
    return status;
}

static void accept_connection(struct receiver_state *st, int listen_fd, int udp_fd)
{
    int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
        return;
    uint8_t raw[HB_HELLO_LEN];
    struct hb_hello_msg hello;
    struct timeval tv = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (hw_read_all(fd, raw, sizeof(raw)) != 0 || hb_unpack_hello(raw, &hello) != 0) {
        hw_adderr(st->err, "receiver: dropped a connection without a valid hello");
        close(fd);
        return;
    }
    tv.tv_sec = 0;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (hello.kind == HB_CONN_CONTROL) {
        if (st->control_fd >= 0) {
            close(fd);
            return;
        }
        st->control_fd = fd;
        return;
    }
    if (st->child_count >= HB_MAX_PROCS) {
        close(fd);
        return;
    }
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        close(listen_fd);
        close(udp_fd);
        close(st->summary_pipe[0]);
        _exit(receive_connection(st, fd, &hello));
    }
    if (pid > 0) {
        st->children[st->child_count++] = pid;
        hb_say(st->cfg->log, "receiver: recv-%u (pid %d) serves the sender pid %u", hello.index, (int)pid, hello.pid);
    }
    close(fd);
}

/* Reads one control message; returns 1 when main asked to stop or went away. */
static int handle_control(struct receiver_state *st)
{
    uint8_t msg[HB_WINDOW_LEN];
    if (hw_read_all(st->control_fd, msg, 1) != 0)
        return 1;
    if (msg[0] == HB_CTL_STOP)
        return 1;
    if (msg[0] == HB_CTL_WINDOW && hw_read_all(st->control_fd, msg + 1, HB_WINDOW_LEN - 1) == 0) {
        hb_unpack_window(msg, &st->window);
        st->have_window = 1;
        return 0;
    }
    hw_adderr(st->err, "receiver: unknown control message 0x%02x", msg[0]);
    return 1;
}

static void drain_summaries(struct receiver_state *st)
{
    uint8_t packed[HB_SUMMARY_LEN];
    while (st->summary_count < HB_MAX_PROCS) {
        ssize_t n = read(st->summary_pipe[0], packed, sizeof(packed));
        if (n != (ssize_t)sizeof(packed))
            break;
        hb_unpack_summary(packed, &st->summaries[st->summary_count++]);
    }
}

static int finish(struct receiver_state *st)
{
    int failed = 0;
    for (int i = 0; i < st->child_count; i++) {
        int wstatus = 0;
        while (waitpid(st->children[i], &wstatus, 0) < 0 && errno == EINTR)
            ;
        if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0)
            failed = 1;
    }
    close(st->summary_pipe[1]);
    drain_summaries(st);
    if (st->control_fd >= 0) {
        uint8_t count[4];
        uint32_t n = htonl((uint32_t)st->summary_count);
        memcpy(count, &n, 4);
        hw_write_all(st->control_fd, count, sizeof(count));
        for (int i = 0; i < st->summary_count; i++) {
            uint8_t packed[HB_SUMMARY_LEN];
            hb_pack_summary(packed, &st->summaries[i]);
            hw_write_all(st->control_fd, packed, sizeof(packed));
        }
    }
    return failed;
}

int hb_run_receiver(const struct hb_receiver_config *cfg, struct hw_err *err)
{
    struct receiver_state st = {.cfg = cfg, .control_fd = -1, .err = err};
    int listen_fd = -1, udp_fd = -1, rc = -1;

    hb_catch_stop_signals(on_stop);
    /* Until main sends the window, log nothing. */
    st.window.window_start_ns = INT64_MAX;
    st.window.window_end_ns = INT64_MAX;

    if (pipe2(st.summary_pipe, O_CLOEXEC) < 0) {
        hw_seterr(err, "receiver: failed to create a pipe: %s", strerror(errno));
        return -1;
    }
    listen_fd = bind_socket(SOCK_STREAM, cfg->listen_addr);
    udp_fd = bind_socket(SOCK_DGRAM, cfg->listen_addr);
    if (listen_fd < 0 || udp_fd < 0) {
        hw_seterr(err, "receiver: failed to bind to %s: %s", cfg->listen_addr,
                  strerror(-(listen_fd < 0 ? listen_fd : udp_fd)));
        goto cleanup;
    }
    if (cfg->rcvbuf > 0) {
        int size = (int)cfg->rcvbuf;
        if (setsockopt(listen_fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size)) < 0) {
            hw_seterr(err, "receiver: failed to set the receive buffer to %d bytes: %s", size, strerror(errno));
            goto cleanup;
        }
    }
    uint8_t ports[HB_PORTS_LEN];
    struct hb_ports_msg pm = {HB_MAGIC_PORTS, HB_WIRE_VERSION, local_port(listen_fd), local_port(udp_fd)};
    hb_pack_ports(ports, &pm);
    if (hw_write_all(STDOUT_FILENO, ports, sizeof(ports)) != 0) {
        hw_seterr(err, "receiver: failed to report the ports on stdout");
        goto cleanup;
    }
    /* stdout is main's pipe: close it so nothing else reaches main that way. */
    int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) {
        dup2(devnull, STDOUT_FILENO);
        close(devnull);
    }
    hb_say(cfg->log, "receiver: listening on %s, tcp port %u, udp port %u", cfg->listen_addr, pm.tcp_port,
           pm.udp_port);
    int64_t started = hw_mono_ns();
    while (!receiver_stop) {
        struct pollfd pfd[3] = {{.fd = listen_fd, .events = POLLIN}, {.fd = udp_fd, .events = POLLIN},
                                {.fd = st.control_fd, .events = POLLIN}};
        int ready = poll(pfd, st.control_fd >= 0 ? 3 : 2, 1000);
        if (ready < 0 && errno != EINTR)
            break;
        if (st.control_fd < 0 && hw_mono_ns() - started > 30000000000LL) {
            hw_adderr(err, "receiver: no control connection from main within 30 s");
            break;
        }
        if (ready <= 0)
            continue;
        if (pfd[1].revents & POLLIN)
            hb_sync_serve_one(udp_fd);
        /* The window before new connections: main sends it before any sender connects, so it is
         * queued by the time their connections are, and a receiving process forked before reading
         * it would log nothing in the window. */
        if (st.control_fd >= 0 && (pfd[2].revents & (POLLIN | POLLHUP | POLLERR)) && handle_control(&st))
            break;
        if (pfd[0].revents & POLLIN)
            accept_connection(&st, listen_fd, udp_fd);
    }
    if (receiver_stop) {
        for (int i = 0; i < st.child_count; i++)
            kill(st.children[i], SIGTERM);
    }
    rc = finish(&st) ? -1 : 0;
    hb_say(cfg->log, "receiver: %d connections served", st.summary_count);

cleanup:
    if (listen_fd >= 0)
        close(listen_fd);
    if (udp_fd >= 0)
        close(udp_fd);
    if (st.control_fd >= 0)
        close(st.control_fd);
    close(st.summary_pipe[0]);
    return rc;
}
