/* hw-bench main: starts the remote receiver, measures the clock offset, forks the background and
 * sending processes alternately, waits for them, stops the receiver and writes main.tsv and
 * bench.json. Exits non-zero, naming the process, when any child failed. */
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
#include "clocksync.h"
#include "child_common.h"
#include "hwclock.h"
#include "net.h"
#include "report.h"
#include "wire.h"

static volatile sig_atomic_t main_stop;
static void on_stop(int sig) { (void)sig; main_stop = 1; }

static int start_receiver(const struct hw_bench_config *cfg, pid_t *pid_out, struct hw_ports_msg *ports)
{
    int out[2];
    if (pipe2(out, O_CLOEXEC) < 0)
        return -errno;
    char capacity[32];
    snprintf(capacity, sizeof(capacity), "%lld", (long long)cfg->log_capacity);
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        dup2(out[1], STDOUT_FILENO);
        if (cfg->receiver_cmd)
            execl("/bin/sh", "sh", "-c", cfg->receiver_cmd, (char *)NULL);
        else
            execl("/proc/self/exe", "hw-bench", "receive", "--listen", cfg->connect_addr, "-o", cfg->out_dir,
                  "--log-capacity", capacity, (char *)NULL);
        fprintf(stderr, "hw-bench: failed to start the receiver: %s\n", strerror(errno));
        _exit(127);
    }
    close(out[1]);
    *pid_out = pid;
    uint8_t raw[HW_PORTS_LEN];
    size_t got = 0;
    int64_t deadline = hw_mono_ns() + 15000000000LL;
    int err = 0;
    while (got < sizeof(raw)) {
        int left_ms = (int)((deadline - hw_mono_ns()) / 1000000);
        struct pollfd pfd = {.fd = out[0], .events = POLLIN};
        if (left_ms <= 0 || poll(&pfd, 1, left_ms) == 0) {
            err = -ETIMEDOUT;
            break;
        }
        ssize_t n = read(out[0], raw + got, sizeof(raw) - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            err = n == 0 ? -EPIPE : -errno;
            break;
        }
        got += (size_t)n;
    }
    close(out[0]);
    if (!err && hw_unpack_ports(raw, ports) != 0)
        err = -EPROTO;
    return err;
}

static struct hw_proc_record *find_proc(struct hw_run_record *run, pid_t pid)
{
    for (int i = 0; i < run->proc_count; i++)
        if (run->procs[i].pid == pid)
            return &run->procs[i];
    return NULL;
}

static void read_reports(int fd, struct hw_run_record *run)
{
    struct hw_child_report rep;
    while (read(fd, &rep, sizeof(rep)) == (ssize_t)sizeof(rep)) {
        struct hw_proc_record *p = find_proc(run, rep.pid);
        if (p) {
            p->report = rep;
            p->have_report = 1;
        }
    }
}

/* Waits for every child, reading their reports as they come; forwards a stop to them. */
static void wait_children(int report_fd, struct hw_run_record *run)
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
            struct hw_proc_record *p = find_proc(run, pid);
            if (!p)
                continue;
            p->wstatus = wstatus;
            p->reaped = 1;
            alive--;
        }
    }
    read_reports(report_fd, run);
}

static int stop_receiver(int control_fd, pid_t receiver_pid, struct hw_run_record *run)
{
    uint8_t stop = HW_CTL_STOP;
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
        for (uint32_t i = 0; i < count && i < HW_MAX_PROCS && !err; i++) {
            uint8_t packed[HW_SUMMARY_LEN];
            err = hw_read_all(control_fd, packed, sizeof(packed));
            if (!err)
                hw_unpack_summary(packed, &run->receivers[run->receiver_count++]);
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

int hw_run_main(const struct hw_bench_config *cfg)
{
    struct hw_run_record *run = calloc(1, sizeof(*run));
    pid_t receiver_pid = -1;
    int control_fd = -1, sync_fd = -1, report_pipe[2] = {-1, -1};
    int status = 1, err;

    if (!run) {
        fprintf(stderr, "hw-bench: failed to allocate the run record\n");
        return 1;
    }
    run->cfg = cfg;
    hw_catch_stop_signals(on_stop);

    if (mkdir(cfg->out_dir, 0755) < 0 && errno != EEXIST) {
        fprintf(stderr, "hw-bench: failed to create %s: %s\n", cfg->out_dir, strerror(errno));
        goto cleanup;
    }
    err = start_receiver(cfg, &receiver_pid, &run->ports);
    if (err) {
        fprintf(stderr, "hw-bench: failed to start the receiver: %s\n",
                err == -EPIPE ? "it exited before reporting its ports" : strerror(-err));
        goto cleanup;
    }
    control_fd = hw_connect_hello(cfg->connect_addr, run->ports.tcp_port, HW_CONN_CONTROL, 0);
    sync_fd = hw_connect(cfg->connect_addr, run->ports.udp_port, SOCK_DGRAM);
    if (control_fd < 0 || sync_fd < 0) {
        fprintf(stderr, "hw-bench: failed to connect to the receiver at %s: %s\n", cfg->connect_addr,
                strerror(-(control_fd < 0 ? control_fd : sync_fd)));
        goto cleanup;
    }
    run->sync_start_count = hw_sync_run(sync_fd, 0, cfg->sync_samples, run->sync_start);
    if (run->sync_start_count <= 0) {
        fprintf(stderr, "hw-bench: failed to exchange clock stamps with the receiver: no answer\n");
        goto cleanup;
    }
    run->est_start = hw_sync_estimate(run->sync_start, run->sync_start_count);

    run->t0_ns = hw_mono_ns();
    run->window_start_ns = run->t0_ns + cfg->warmup_ns;
    run->window_end_ns = run->window_start_ns + cfg->duration_ns;
    run->quiet_end_ns = run->window_end_ns + cfg->quiet_ns;
    uint8_t wmsg[HW_WINDOW_LEN];
    struct hw_window_msg window = {run->est_start.offset_ns, run->window_start_ns, run->window_end_ns};
    hw_pack_window(wmsg, &window);
    if ((err = hw_write_all(control_fd, wmsg, sizeof(wmsg))) != 0) {
        fprintf(stderr, "hw-bench: failed to send the window to the receiver: %s\n", strerror(-err));
        goto cleanup;
    }

    if (pipe2(report_pipe, O_CLOEXEC) < 0) {
        fprintf(stderr, "hw-bench: failed to create a pipe: %s\n", strerror(errno));
        goto cleanup;
    }
    fcntl(report_pipe[0], F_SETFL, O_NONBLOCK);
    int most = cfg->senders > cfg->background ? cfg->senders : cfg->background;
    for (int k = 0; k < most && !main_stop; k++) {
        for (int role = HW_ROLE_BG; role >= HW_ROLE_SEND; role--) {
            if ((role == HW_ROLE_BG && k >= cfg->background) || (role == HW_ROLE_SEND && k >= cfg->senders))
                continue;
            pid_t pid = fork();
            if (pid < 0) {
                fprintf(stderr, "hw-bench: failed to fork %s-%d: %s\n", role == HW_ROLE_BG ? "bg" : "send", k,
                        strerror(errno));
                main_stop = 1;
                break;
            }
            if (pid == 0) {
                close(report_pipe[0]);
                close(control_fd);
                close(sync_fd);
                int rc = role == HW_ROLE_BG
                             ? hw_run_background(cfg, k, run->window_start_ns, run->window_end_ns,
                                                 run->quiet_end_ns, report_pipe[1])
                             : hw_run_sender(cfg, k, run->ports.tcp_port, run->window_start_ns,
                                             run->window_end_ns, run->quiet_end_ns, report_pipe[1]);
                _exit(rc);
            }
            struct hw_proc_record *p = &run->procs[run->proc_count++];
            p->role = role;
            p->index = k;
            p->pid = pid;
        }
    }
    close(report_pipe[1]);
    report_pipe[1] = -1;
    wait_children(report_pipe[0], run);

    run->sync_end_count = hw_sync_run(sync_fd, 1000, cfg->sync_samples, run->sync_end);
    if (run->sync_end_count > 0)
        run->est_end = hw_sync_estimate(run->sync_end, run->sync_end_count);
    if (stop_receiver(control_fd, receiver_pid, run) != 0)
        fprintf(stderr, "hw-bench: failed to collect the receiver's totals\n");
    receiver_pid = -1;
    run->interrupted = main_stop;
    status = hw_report_failures(run) ? 1 : 0;
    if (hw_write_main_log(run) != 0 || hw_write_bench_json(run) != 0)
        status = 1;

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
    return status;
}
