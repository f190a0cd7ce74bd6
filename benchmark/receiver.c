/* The remote receiver (`hw-bench receive`): reserves a TCP and a UDP port and reports them to main
 * on stdout, answers clock-sync datagrams, reads each connection's hello without blocking (no
 * connection waits for another's), and forks one receiving process per data connection.
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

/* How long a connection's hello may take after its accept. A sender on a starved host (a CPU cap
 * shared by every sender and sieve) can wait seconds between its connect and its hello (up to 6 s
 * measured with 20 senders and 10 sieves in 2 % of a CPU), the longer the more processes main
 * starts in the warm-up: so at least 5 s, plus the warm-up, plus HELLO_PER_SENDER_NS for each
 * sender main announced. A hello that never comes costs only its table entry until then. */
#define HELLO_MIN_NS 5000000000LL
#define HELLO_PER_SENDER_NS 500000000LL
#define HELLO_WARMUP_MAX_NS (86400LL * 1000000000LL) /* keeps the sum far from overflowing */
/* Connections whose hello is still coming; when all are taken, new ones wait in the listen
 * backlog, where the kernel holds them without a deadline running. */
#define PENDING_MAX 64
#define POLL_FIXED 3 /* listen, clock sync, control; the pending connections follow */

static volatile sig_atomic_t receiver_stop;
static void on_stop(int sig) { (void)sig; receiver_stop = 1; }

/* An accepted connection whose hello is read a piece at a time from a non-blocking socket, so
 * that a slow sender holds up no one else. A data connection whose hello is whole waits here
 * (without a deadline) until main's window is in, so its receiving process logs the window. */
struct pending_conn {
    int fd;
    size_t got;               /* bytes of the hello read so far */
    uint8_t hello[HB_HELLO_LEN];
    int64_t accepted_ns;
};

struct receiver_state {
    const struct hb_receiver_config *cfg;
    struct hb_window_msg window;
    int have_window;
    int listen_fd;
    int udp_fd;
    int control_fd;
    int summary_pipe[2];
    pid_t children[HB_MAX_PROCS];
    int child_count;
    struct hb_recv_summary summaries[HB_MAX_PROCS];
    int summary_count;
    struct pending_conn pending[PENDING_MAX];
    int pending_count;
    int senders;              /* announced by main in its control hello (0: not yet) */
    int64_t warmup_ns;        /* from main's window message (0: not yet) */
    int64_t hello_timeout_ns; /* HELLO_MIN_NS until main has said both */
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

static int64_t hello_timeout_ns(int64_t warmup_ns, int senders)
{
    if (warmup_ns < 0)
        warmup_ns = 0;
    if (warmup_ns > HELLO_WARMUP_MAX_NS)
        warmup_ns = HELLO_WARMUP_MAX_NS;
    return HELLO_MIN_NS + warmup_ns + (int64_t)senders * HELLO_PER_SENDER_NS;
}

/* The warm-up as the receiver sees it: from now to the window's start, on main's clock. Main
 * sends the window as the warm-up begins, so this is the warm-up less the message's way here. */
static int64_t warmup_left_ns(const struct hb_window_msg *w)
{
    int64_t now_main, left;
    if (__builtin_sub_overflow(hw_mono_ns(), w->offset_ns, &now_main) ||
        __builtin_sub_overflow(w->window_start_ns, now_main, &left) || left < 0)
        return 0;
    return left;
}

static void set_blocking(int fd)
{
    int flags = fcntl(fd, F_GETFL);
    if (flags >= 0)
        fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
}

/* Takes connections from the backlog while the table has room. */
static void accept_pending(struct receiver_state *st)
{
    while (st->pending_count < PENDING_MAX) {
        int fd = accept4(st->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0)
            return;
        st->pending[st->pending_count++] = (struct pending_conn){.fd = fd, .accepted_ns = hw_mono_ns()};
    }
}

/* Reads what has come of the hello. 1: whole; 0: more to come; -EPIPE: the peer closed first;
 * -errno otherwise. */
static int read_hello(struct pending_conn *p)
{
    while (p->got < sizeof(p->hello)) {
        ssize_t n = read(p->fd, p->hello + p->got, sizeof(p->hello) - p->got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
        if (n == 0)
            return -EPIPE;
        p->got += (size_t)n;
    }
    return 1;
}

/* Removes entry i (the last one takes its place) and returns its descriptor. */
static int take_pending(struct receiver_state *st, int i)
{
    int fd = st->pending[i].fd;
    st->pending[i] = st->pending[--st->pending_count];
    return fd;
}

/* One error line per connection dropped, as main counts the receivers against its senders. */
static void drop_pending(struct receiver_state *st, int i, const char *why)
{
    char peer[64];
    const struct pending_conn *p = &st->pending[i];
    hb_socket_name(p->fd, 1, peer, sizeof(peer));
    hw_adderr(st->err, "receiver: dropped a connection without a valid hello (from %s: %zu of %d bytes%s)", peer,
              p->got, HB_HELLO_LEN, why);
    close(take_pending(st, i));
}

/* In a receiving process: the descriptors that belong to the parent, closed so that the parent
 * alone decides when a dropped connection or the control connection ends. */
static void close_parent_fds(const struct receiver_state *st)
{
    close(st->listen_fd);
    close(st->udp_fd);
    close(st->summary_pipe[0]);
    if (st->control_fd >= 0)
        close(st->control_fd);
    for (int i = 0; i < st->pending_count; i++)
        close(st->pending[i].fd);
}

static void serve_data(struct receiver_state *st, int fd, const struct hb_hello_msg *hello, int64_t waited_ns)
{
    if (st->child_count >= HB_MAX_PROCS) {
        close(fd);
        return;
    }
    set_blocking(fd); /* the receiving process reads until the sender closes */
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        close_parent_fds(st);
        _exit(receive_connection(st, fd, hello));
    }
    if (pid > 0) {
        st->children[st->child_count++] = pid;
        hb_say(st->cfg->log, "receiver: recv-%u (pid %d) serves the sender pid %u (hello %lld ms after its accept)",
               hello->index, (int)pid, hello->pid, (long long)(waited_ns / 1000000));
    } else {
        hw_adderr(st->err, "receiver: failed to fork the receiving process of send-%u: %s", hello->index,
                  strerror(errno));
    }
    close(fd);
}

/* A whole hello: the control connection (main's, the first) stays in this process; a data
 * connection gets its receiving process once the window is in, or when the run ends (until then
 * it stays in the table). */
static void take_hello(struct receiver_state *st, int i, int final)
{
    struct hb_hello_msg hello;
    if (hb_unpack_hello(st->pending[i].hello, &hello) != 0) {
        drop_pending(st, i, ", not a hello");
        return;
    }
    if (hello.kind == HB_CONN_CONTROL) {
        int fd = take_pending(st, i);
        if (st->control_fd >= 0) {
            close(fd);
            return;
        }
        set_blocking(fd); /* control messages are read whole */
        st->control_fd = fd;
        st->senders = hello.index; /* main announces its senders in the index */
        st->hello_timeout_ns = hello_timeout_ns(st->warmup_ns, st->senders);
        return;
    }
    if (!st->have_window && !final)
        return;
    int64_t waited = hw_mono_ns() - st->pending[i].accepted_ns;
    int fd = take_pending(st, i);
    serve_data(st, fd, &hello, waited);
}

/* Goes on with each pending connection whose socket polled ready (every one when final, as the
 * run ends: then what has not come is dropped). Entries are visited from the last, so that one
 * taken out, replaced by the last, shifts none of those still to visit against pfd. */
static void service_pending(struct receiver_state *st, const struct pollfd *pfd, int final)
{
    int64_t now = hw_mono_ns();
    for (int i = st->pending_count - 1; i >= 0; i--) {
        struct pending_conn *p = &st->pending[i];
        int whole = p->got == sizeof(p->hello);
        if (!whole && (final || (pfd && (pfd[i].revents & (POLLIN | POLLHUP | POLLERR))))) {
            int r = read_hello(p);
            if (r < 0) {
                char why[96];
                snprintf(why, sizeof(why), " before %s", r == -EPIPE ? "the peer closed" : strerror(-r));
                drop_pending(st, i, why);
                continue;
            }
            whole = r == 1;
        }
        if (whole)
            take_hello(st, i, final);
        else if (final)
            drop_pending(st, i, " when the run ended");
        else if (now - p->accepted_ns >= st->hello_timeout_ns) {
            char why[64];
            snprintf(why, sizeof(why), " in %.1f s", (double)(now - p->accepted_ns) / 1e9);
            drop_pending(st, i, why);
        }
    }
}

/* The poll set: listen (left out while the table is full), clock sync, control (-1: none yet,
 * which poll skips), then one entry per pending connection still reading its hello. Returns the
 * count of entries. */
static int fill_poll(const struct receiver_state *st, struct pollfd *pfd)
{
    pfd[0] = (struct pollfd){.fd = st->pending_count < PENDING_MAX ? st->listen_fd : -1, .events = POLLIN};
    pfd[1] = (struct pollfd){.fd = st->udp_fd, .events = POLLIN};
    pfd[2] = (struct pollfd){.fd = st->control_fd, .events = POLLIN};
    for (int i = 0; i < st->pending_count; i++) {
        const struct pending_conn *p = &st->pending[i];
        /* a whole hello waiting for the window: its data must not wake the loop */
        pfd[POLL_FIXED + i] = (struct pollfd){.fd = p->got < sizeof(p->hello) ? p->fd : -1, .events = POLLIN};
    }
    return POLL_FIXED + st->pending_count;
}

/* Milliseconds until the next hello deadline, at most 1000 (the 30 s control check). */
static int poll_timeout_ms(const struct receiver_state *st)
{
    int64_t wait = 1000000000LL, now = hw_mono_ns();
    for (int i = 0; i < st->pending_count; i++) {
        const struct pending_conn *p = &st->pending[i];
        int64_t left = p->accepted_ns + st->hello_timeout_ns - now;
        if (p->got < sizeof(p->hello) && left < wait)
            wait = left < 0 ? 0 : left;
    }
    return (int)((wait + 999999) / 1000000);
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
        st->warmup_ns = warmup_left_ns(&st->window);
        st->hello_timeout_ns = hello_timeout_ns(st->warmup_ns, st->senders);
        hb_say(st->cfg->log, "receiver: a hello may take %lld ms (warm-up %lld ms, %d senders)",
               (long long)(st->hello_timeout_ns / 1000000), (long long)(st->warmup_ns / 1000000), st->senders);
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
    struct receiver_state st = {.cfg = cfg, .control_fd = -1, .err = err, .hello_timeout_ns = hello_timeout_ns(0, 0)};
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
    st.listen_fd = listen_fd;
    st.udp_fd = udp_fd;
    /* accept_pending takes connections until the backlog is empty */
    fcntl(listen_fd, F_SETFL, fcntl(listen_fd, F_GETFL) | O_NONBLOCK);
    int64_t started = hw_mono_ns();
    while (!receiver_stop) {
        struct pollfd pfd[POLL_FIXED + PENDING_MAX];
        int ready = poll(pfd, (nfds_t)fill_poll(&st, pfd), poll_timeout_ms(&st));
        if (ready < 0 && errno != EINTR)
            break;
        if (st.control_fd < 0 && hw_mono_ns() - started > 30000000000LL) {
            hw_adderr(err, "receiver: no control connection from main within 30 s");
            break;
        }
        if (ready < 0)
            continue;
        if (pfd[1].revents & POLLIN)
            hb_sync_serve_one(udp_fd);
        /* The window before new connections: main sends it before any sender connects, so it is
         * queued by the time their hellos are, and a receiving process forked before reading it
         * would log nothing in the window (take_hello holds a data hello until it is in). */
        if ((pfd[2].revents & (POLLIN | POLLHUP | POLLERR)) && handle_control(&st))
            break;
        /* also with nothing ready: the deadlines of hellos that do not come */
        service_pending(&st, pfd + POLL_FIXED, 0);
        if (pfd[0].revents & POLLIN)
            accept_pending(&st);
    }
    /* The run is over (main's senders have all ended): what is left in the backlog and the table
     * is served when its hello is whole, and dropped, one error line each, when it is not. */
    accept_pending(&st);
    service_pending(&st, NULL, 1);
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
