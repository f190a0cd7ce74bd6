/* hw-bench main: starts the remote receiver, measures the clock offset, forks the background and
 * sending processes alternately, waits for them, stops the receiver and writes main.tsv and
 * bench.json. Returns an error naming each process that failed. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "child_common.h"
#include "clocksync.h"
#include "hwclock.h"
#include "hwgate.h"
#include "hwio.h"
#include "net.h"
#include "report.h"
#include "wire.h"

static volatile sig_atomic_t main_stop;
static void on_stop(int sig) { (void)sig; main_stop = 1; }

static int stdout_to(void *fd)
{
    return dup2(*(const int *)fd, STDOUT_FILENO) < 0;
}

/* Starts the receiver with its stdout on a pipe and reads the ports it reports there. */
static int start_receiver(const struct hb_config *cfg, pid_t *pid_out, struct hb_ports_msg *ports,
                          struct hw_err *err)
{
    int out[2];
    if (pipe2(out, O_CLOEXEC) < 0)
        return hw_seterr(err, "failed to start the receiver: %s", strerror(errno)), -1;
    char capacity[32], exe[4096] = "/proc/self/exe";
    snprintf(capacity, sizeof(capacity), "%lld", (long long)cfg->log_capacity);
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n > 0)
        exe[n] = '\0';
    char *local[] = {exe, "receive", "--listen", (char *)cfg->connect_addr, "-o", (char *)cfg->out_dir,
                     "--log-capacity", capacity, NULL};
    char *shell[] = {"/bin/sh", "-c", (char *)cfg->receiver_cmd, NULL};
    struct hw_gate gate;
    if (hw_gate_start(&gate, HB_TOOL, cfg->receiver_cmd ? shell : local, stdout_to, &out[1], err) < 0 ||
        hw_gate_open(&gate, err) < 0) {
        close(out[0]);
        close(out[1]);
        return -1;
    }
    pid_t pid = gate.pid;
    close(out[1]);
    *pid_out = pid;
    uint8_t raw[HB_PORTS_LEN];
    size_t got = 0;
    int64_t deadline = hw_mono_ns() + 15000000000LL;
    int failed = 0;
    while (got < sizeof(raw)) {
        int left_ms = (int)((deadline - hw_mono_ns()) / 1000000);
        struct pollfd pfd = {.fd = out[0], .events = POLLIN};
        if (left_ms <= 0 || poll(&pfd, 1, left_ms) == 0) {
            failed = -ETIMEDOUT;
            break;
        }
        n = read(out[0], raw + got, sizeof(raw) - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            failed = n == 0 ? -EPIPE : -errno;
            break;
        }
        got += (size_t)n;
    }
    close(out[0]);
    if (!failed && hb_unpack_ports(raw, ports) != 0)
        failed = -EPROTO;
    if (failed)
        hw_seterr(err, "failed to start the receiver: %s",
                  failed == -EPIPE ? "it exited before reporting its ports" : strerror(-failed));
    return failed ? -1 : 0;
}

static struct hb_proc_record *find_proc(struct hb_run_record *run, pid_t pid)
{
    for (int i = 0; i < run->proc_count; i++)
        if (run->procs[i].pid == pid)
            return &run->procs[i];
    return NULL;
}

static void read_reports(int fd, struct hb_run_record *run)
{
    struct hb_child_report rep;
    while (read(fd, &rep, sizeof(rep)) == (ssize_t)sizeof(rep)) {
        struct hb_proc_record *p = find_proc(run, rep.pid);
        if (p) {
            p->report = rep;
            p->have_report = 1;
        }
    }
}

/* Waits for every child, reading their reports as they come; forwards a stop to them. */
static void wait_children(int report_fd, struct hb_run_record *run)
{
    int alive = run->proc_count;
    int forwarded = 0;
    while (alive > 0) {
        if (main_stop && !forwarded) {
            for (int i = 0; i < run->proc_count; i++)
                if (!run->procs[i].reaped)
                    kill(run->procs[i].pid, SIGTERM);
            forwarded = 1;
        }
        struct pollfd pfd = {.fd = report_fd, .events = POLLIN};
        if (poll(&pfd, 1, 100) > 0)
            read_reports(report_fd, run);
        int wstatus;
        pid_t pid;
        while ((pid = waitpid(-1, &wstatus, WNOHANG)) > 0) {
            struct hb_proc_record *p = find_proc(run, pid);
            if (!p)
                continue;
            p->wstatus = wstatus;
            p->reaped = 1;
            alive--;
        }
    }
    read_reports(report_fd, run);
}

static int stop_receiver(int control_fd, pid_t receiver_pid, struct hb_run_record *run)
{
    uint8_t stop = HB_CTL_STOP;
    int err = hw_write_all(control_fd, &stop, 1);
    struct timeval tv = {.tv_sec = 30};
    setsockopt(control_fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    uint8_t count_raw[4];
    if (!err)
        err = hw_read_all(control_fd, count_raw, sizeof(count_raw));
    if (!err) {
        uint32_t count;
        memcpy(&count, count_raw, 4);
        count = ntohl(count);
        for (uint32_t i = 0; i < count && i < HB_MAX_PROCS && !err; i++) {
            uint8_t packed[HB_SUMMARY_LEN];
            err = hw_read_all(control_fd, packed, sizeof(packed));
            if (!err)
                hb_unpack_summary(packed, &run->receivers[run->receiver_count++]);
        }
    }
    /* The receiver exits once it has answered; give it ten seconds, then end it. */
    int64_t deadline = hw_mono_ns() + 10000000000LL;
    int wstatus = 0;
    for (;;) {
        pid_t r = waitpid(receiver_pid, &wstatus, WNOHANG);
        if (r == receiver_pid)
            break;
        if (r < 0 && errno != EINTR)
            break;
        if (hw_mono_ns() > deadline) {
            kill(receiver_pid, SIGKILL);
            waitpid(receiver_pid, &wstatus, 0);
            break;
        }
        usleep(10000);
    }
    run->receiver_wstatus = wstatus;
    return err;
}

/* Forks the background and sending processes alternately; stops forking on a signal or a failure. */
static void fork_children(const struct hb_config *cfg, struct hb_run_record *run, int control_fd, int sync_fd,
                          const int report_pipe[2], struct hw_err *err)
{
    int most = cfg->senders > cfg->background ? cfg->senders : cfg->background;
    for (int k = 0; k < most && !main_stop; k++) {
        for (int role = HB_ROLE_BG; role >= HB_ROLE_SEND; role--) {
            if ((role == HB_ROLE_BG && k >= cfg->background) || (role == HB_ROLE_SEND && k >= cfg->senders))
                continue;
            pid_t pid = fork();
            if (pid < 0) {
                hw_adderr(err, "failed to fork %s-%d: %s", role == HB_ROLE_BG ? "bg" : "send", k, strerror(errno));
                main_stop = 1;
                return;
            }
            if (pid == 0) {
                close(report_pipe[0]);
                close(control_fd);
                close(sync_fd);
                int rc = role == HB_ROLE_BG
                             ? hb_run_background(cfg, k, run->window_start_ns, run->window_end_ns,
                                                 run->quiet_end_ns, report_pipe[1])
                             : hb_run_sender(cfg, k, run->ports.tcp_port, run->window_start_ns,
                                             run->window_end_ns, run->quiet_end_ns, report_pipe[1]);
                _exit(rc);
            }
            struct hb_proc_record *p = &run->procs[run->proc_count++];
            p->role = role;
            p->index = k;
            p->pid = pid;
            hb_say(cfg->log, "started %s-%d (pid %d)", role == HB_ROLE_BG ? "bg" : "send", k, (int)pid);
        }
    }
}

int hb_run_main(const struct hb_config *cfg, struct hw_err *err)
{
    struct hb_run_record *run = calloc(1, sizeof(*run));
    pid_t receiver_pid = -1;
    int control_fd = -1, sync_fd = -1, report_pipe[2] = {-1, -1};
    int rc = -1, failed;

    if (!run) {
        hw_seterr(err, "failed to allocate the run record: %s", strerror(ENOMEM));
        return -1;
    }
    run->cfg = cfg;
    hb_catch_stop_signals(on_stop);

    if (mkdir(cfg->out_dir, 0755) < 0 && errno != EEXIST) {
        hw_seterr(err, "failed to create %s: %s", cfg->out_dir, strerror(errno));
        goto cleanup;
    }
    if (start_receiver(cfg, &receiver_pid, &run->ports, err) < 0)
        goto cleanup;
    hb_say(cfg->log, "receiver (pid %d) at %s, tcp port %u, udp port %u", (int)receiver_pid, cfg->connect_addr,
           run->ports.tcp_port, run->ports.udp_port);
    /* The control hello's index announces the senders: the receiver waits longer for their hellos
     * the more there are (a starved sender host). */
    control_fd = hb_connect_hello(cfg->connect_addr, run->ports.tcp_port, HB_CONN_CONTROL, (uint16_t)cfg->senders);
    sync_fd = hb_connect(cfg->connect_addr, run->ports.udp_port, SOCK_DGRAM);
    if (control_fd < 0 || sync_fd < 0) {
        hw_seterr(err, "failed to connect to the receiver at %s: %s", cfg->connect_addr,
                  strerror(-(control_fd < 0 ? control_fd : sync_fd)));
        goto cleanup;
    }
    run->sync_start_count = hb_sync_run(sync_fd, 0, cfg->sync_samples, run->sync_start);
    if (run->sync_start_count <= 0) {
        hw_seterr(err, "failed to exchange clock stamps with the receiver: no answer");
        goto cleanup;
    }
    run->est_start = hb_sync_estimate(run->sync_start, run->sync_start_count);
    hb_say(cfg->log, "clock offset %lld ns (round trip %lld ns, %d samples)", (long long)run->est_start.offset_ns,
           (long long)run->est_start.rtt_ns, run->sync_start_count);

    run->t0_ns = hw_mono_ns();
    run->window_start_ns = run->t0_ns + cfg->warmup_ns;
    run->window_end_ns = run->window_start_ns + cfg->duration_ns;
    run->quiet_end_ns = run->window_end_ns + cfg->quiet_ns;
    uint8_t wmsg[HB_WINDOW_LEN];
    struct hb_window_msg window = {run->est_start.offset_ns, run->window_start_ns, run->window_end_ns};
    hb_pack_window(wmsg, &window);
    if ((failed = hw_write_all(control_fd, wmsg, sizeof(wmsg))) != 0) {
        hw_seterr(err, "failed to send the window to the receiver: %s", strerror(-failed));
        goto cleanup;
    }

    if (pipe2(report_pipe, O_CLOEXEC) < 0) {
        hw_seterr(err, "failed to create a pipe: %s", strerror(errno));
        goto cleanup;
    }
    fcntl(report_pipe[0], F_SETFL, O_NONBLOCK);
    hb_say(cfg->log, "window from %lld to %lld ns (CLOCK_MONOTONIC)", (long long)run->window_start_ns,
           (long long)run->window_end_ns);
    fork_children(cfg, run, control_fd, sync_fd, report_pipe, err);
    close(report_pipe[1]);
    report_pipe[1] = -1;
    wait_children(report_pipe[0], run);
    hb_say(cfg->log, "all %d processes ended", run->proc_count);

    int64_t end_sync_began = hw_mono_ns();
    int64_t quiet_rtt = HB_SYNC_QUIET_FACTOR * run->est_start.rtt_ns + HB_SYNC_QUIET_SLACK_NS;
    run->sync_end_count = hb_sync_run_quiet(sync_fd, 1000, cfg->sync_samples, HB_SYNC_END_MAX, quiet_rtt,
                                            HB_SYNC_QUIET_WAIT_NS, run->sync_end, &run->sync_end_quiet);
    run->sync_end_wait_ns = hw_mono_ns() - end_sync_began;
    if (run->sync_end_count > 0 && !run->sync_end_quiet)
        hb_say(cfg->log, "the link did not quiet within %lld s after the run: the end clock exchange is biased",
               HB_SYNC_QUIET_WAIT_NS / 1000000000LL);
    if (run->sync_end_count > 0)
        run->est_end = hb_sync_estimate(run->sync_end, run->sync_end_count);
    if (stop_receiver(control_fd, receiver_pid, run) != 0)
        hw_adderr(err, "failed to collect the receiver's totals");
    receiver_pid = -1;
    run->interrupted = main_stop;
    rc = hb_report_failures(run) ? -1 : 0;
    if (run->failures[0])
        hw_adderr(err, "%s", run->failures);
    if (hb_write_main_log(run, err) != 0 || hb_write_bench_json(run, err) != 0)
        rc = -1;

cleanup:
    if (receiver_pid > 0) {
        kill(receiver_pid, SIGTERM);
        waitpid(receiver_pid, NULL, 0);
    }
    if (control_fd >= 0)
        close(control_fd);
    if (sync_fd >= 0)
        close(sync_fd);
    if (report_pipe[0] >= 0)
        close(report_pipe[0]);
    if (report_pipe[1] >= 0)
        close(report_pipe[1]);
    free(run);
    return rc;
}
