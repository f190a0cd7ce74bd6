#include "report.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "evlog.h"
#include "hwjson.h"
#include "sieve.h"

static const char *role_name(int role) { return role == HB_ROLE_SEND ? "send" : "bg"; }

static void describe_exit(int wstatus, char *out, size_t len)
{
    if (WIFEXITED(wstatus))
        snprintf(out, len, WEXITSTATUS(wstatus) ? "exited with status %d" : "ok", WEXITSTATUS(wstatus));
    else if (WIFSIGNALED(wstatus))
        snprintf(out, len, "was killed by signal %d", WTERMSIG(wstatus));
    else
        snprintf(out, len, "ended in an unknown state");
}

static void add_failure(struct hb_run_record *run, const char *line)
{
    size_t used = strlen(run->failures);
    snprintf(run->failures + used, sizeof(run->failures) - used, "%s%s", used ? "\n" : "", line);
}

int hb_report_failures(struct hb_run_record *run)
{
    int failures = 0;
    char line[256], how[64];
    for (int i = 0; i < run->proc_count; i++) {
        const struct hb_proc_record *p = &run->procs[i];
        describe_exit(p->wstatus, how, sizeof(how));
        if (!p->reaped || strcmp(how, "ok") != 0) {
            snprintf(line, sizeof(line), "%s-%d (pid %d) %s", role_name(p->role), p->index, (int)p->pid, how);
            add_failure(run, line);
            failures++;
        } else if (p->report.check_failures) {
            snprintf(line, sizeof(line), "%s-%d (pid %d) failed %lld sieve checks", role_name(p->role),
                     p->index, (int)p->pid, (long long)p->report.check_failures);
            add_failure(run, line);
            failures++;
        }
    }
    for (int i = 0; i < run->receiver_count; i++) {
        const struct hb_recv_summary *r = &run->receivers[i];
        if (r->lf_count || r->exit_status) {
            snprintf(line, sizeof(line), "recv-%u (pid %u) %s", r->index, r->pid,
                     r->lf_count ? "received LF bytes" : "failed to receive or store its log");
            add_failure(run, line);
            failures++;
        }
    }
    if (run->receiver_count < run->cfg->senders) {
        snprintf(line, sizeof(line), "receiver reported %d of %d connections", run->receiver_count, run->cfg->senders);
        add_failure(run, line);
        failures++;
    }
    describe_exit(run->receiver_wstatus, how, sizeof(how));
    if (strcmp(how, "ok") != 0) {
        snprintf(line, sizeof(line), "receiver %s", how);
        add_failure(run, line);
        failures++;
    }
    if (run->interrupted) {
        add_failure(run, "interrupted by a signal: the logs hold what was recorded until then");
        failures++;
    }
    return failures;
}

/* Closes f; a file that could not be written whole is named in err. */
static int close_output(FILE *f, const char *path, struct hw_err *err)
{
    int failed = ferror(f);
    if (fclose(f) != 0 || failed) {
        hw_adderr(err, "failed to write %s: %s", path, strerror(errno ? errno : EIO));
        return -1;
    }
    return 0;
}

static FILE *open_output(const char *dir, const char *name, char *path, size_t len, struct hw_err *err)
{
    snprintf(path, len, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f)
        hw_adderr(err, "failed to write %s: %s", path, strerror(errno));
    return f;
}

int hb_write_main_log(const struct hb_run_record *run, struct hw_err *err)
{
    char path[4096];
    FILE *f = open_output(run->cfg->out_dir, "main.tsv", path, sizeof(path), err);
    if (!f)
        return -1;
    fprintf(f, "# format: hostwire-tsv 2\n# kind: bench-clock-sync\n# role: main\n# clock: CLOCK_MONOTONIC\n");
    fprintf(f, "# note: t1 and t4 are the sender's clock, t2 and t3 the receiver's\n");
    fprintf(f, "phase\tseq\tt1_ns\tt2_ns\tt3_ns\tt4_ns\n");
    for (int i = 0; i < run->sync_start_count; i++) {
        const struct hb_sync_sample *s = &run->sync_start[i];
        fprintf(f, "start\t%u\t%lld\t%lld\t%lld\t%lld\n", s->seq, (long long)s->t1, (long long)s->t2,
                (long long)s->t3, (long long)s->t4);
    }
    for (int i = 0; i < run->sync_end_count; i++) {
        const struct hb_sync_sample *s = &run->sync_end[i];
        fprintf(f, "end\t%u\t%lld\t%lld\t%lld\t%lld\n", s->seq, (long long)s->t1, (long long)s->t2,
                (long long)s->t3, (long long)s->t4);
    }
    int records = (run->sync_start_count > 0 ? run->sync_start_count : 0) +
                  (run->sync_end_count > 0 ? run->sync_end_count : 0);
    hb_tsv_put_trailer(f, records, -1);
    return close_output(f, path, err);
}

static void json_estimate(FILE *f, const char *name, const struct hb_sync_estimate *e, int count)
{
    fprintf(f, "    \"%s\": {\"samples\": %d, \"offset_ns\": %lld, \"rtt_ns\": %lld, \"t_ns\": %lld", name, count,
            (long long)e->offset_ns, (long long)e->rtt_ns, (long long)e->t_ns);
}

int hb_write_bench_json(const struct hb_run_record *run, struct hw_err *err)
{
    const struct hb_config *cfg = run->cfg;
    char path[4096], how[64];
    FILE *f = open_output(cfg->out_dir, "bench.json", path, sizeof(path), err);
    if (!f)
        return -1;
    fprintf(f, "{\n  \"format\": \"hostwire-bench 1\",\n  \"clock\": \"CLOCK_MONOTONIC\",\n");
    fprintf(f, "  \"config\": {\"senders\": %d, \"background\": %d, \"sieve_log2\": %d, \"code_copies\": %d, "
               "\"read_size\": %lld, \"write_size\": %lld, \"data\": ",
            cfg->senders, cfg->background, cfg->sieve_log2, cfg->code_copies, (long long)cfg->read_size,
            (long long)cfg->write_size);
    hw_json_str(f, cfg->data_path);
    fprintf(f, ", \"warmup_ns\": %lld, \"duration_ns\": %lld, \"quiet_ns\": %lld, \"log_capacity\": %lld, "
               "\"connect\": ",
            (long long)cfg->warmup_ns, (long long)cfg->duration_ns, (long long)cfg->quiet_ns,
            (long long)cfg->log_capacity);
    hw_json_str(f, cfg->connect_addr);
    fprintf(f, ", \"receiver_cmd\": ");
    hw_json_str(f, cfg->receiver_cmd ? cfg->receiver_cmd : "");
    fprintf(f, "},\n");
    fprintf(f, "  \"t0_ns\": %lld,\n  \"window_start_ns\": %lld,\n  \"window_end_ns\": %lld,\n"
               "  \"quiet_end_ns\": %lld,\n",
            (long long)run->t0_ns, (long long)run->window_start_ns, (long long)run->window_end_ns,
            (long long)run->quiet_end_ns);
    fprintf(f, "  \"receiver_ports\": {\"tcp\": %u, \"udp\": %u},\n", run->ports.tcp_port, run->ports.udp_port);
    fprintf(f, "  \"clock_sync\": {\n");
    json_estimate(f, "start", &run->est_start, run->sync_start_count);
    fprintf(f, "},\n");
    json_estimate(f, "end", &run->est_end, run->sync_end_count);
    /* whether the link had quieted after the run, and how long main waited for it */
    fprintf(f, ", \"quiet\": %s, \"wait_ns\": %lld}", run->sync_end_quiet ? "true" : "false",
            (long long)run->sync_end_wait_ns);
    fprintf(f, "\n  },\n  \"processes\": [\n");
    for (int i = 0; i < run->proc_count; i++) {
        const struct hb_proc_record *p = &run->procs[i];
        const struct hb_child_report *r = &p->report;
        describe_exit(p->wstatus, how, sizeof(how));
        fprintf(f, "    {\"role\": \"%s-%d\", \"kind\": \"%s\", \"index\": %d, \"pid\": %d, \"exit\": \"%s\", "
                   "\"reported\": %s, \"local_port\": %u, \"bytes_total\": %lld, \"bytes_window\": %lld, "
                   "\"calls_window\": %lld, \"rounds_total\": %lld, \"events\": %lld, \"overflow\": %lld, "
                   "\"check_failures\": %lld}%s\n",
                role_name(p->role), p->index, p->role == HB_ROLE_SEND ? "send" : "background", p->index,
                (int)p->pid, how, p->have_report ? "true" : "false", r->local_port, (long long)r->bytes_total,
                (long long)r->bytes_window, (long long)r->calls_window, (long long)r->rounds_total,
                (long long)r->events, (long long)r->overflow, (long long)r->check_failures,
                i + 1 < run->proc_count ? "," : "");
    }
    fprintf(f, "  ],\n  \"receivers\": [\n");
    for (int i = 0; i < run->receiver_count; i++) {
        const struct hb_recv_summary *r = &run->receivers[i];
        fprintf(f, "    {\"role\": \"recv-%u\", \"index\": %u, \"pid\": %u, \"exit_status\": %d, \"bytes_total\": %lld, "
                   "\"bytes_window\": %lld, \"lf_received\": %lld, \"events\": %lld, \"overflow\": %lld}%s\n",
                r->index, r->index, r->pid, r->exit_status, (long long)r->bytes_total, (long long)r->bytes_window,
                (long long)r->lf_count, (long long)r->events, (long long)r->overflow,
                i + 1 < run->receiver_count ? "," : "");
    }
    int64_t overflow = 0, check_failures = 0;
    for (int i = 0; i < run->proc_count; i++) {
        overflow += run->procs[i].report.overflow;
        check_failures += run->procs[i].report.check_failures;
    }
    for (int i = 0; i < run->receiver_count; i++)
        overflow += run->receivers[i].overflow;
    describe_exit(run->receiver_wstatus, how, sizeof(how));
    fprintf(f, "  ],\n  \"receiver_exit\": \"%s\",\n", how);
    fprintf(f, "  \"losses\": {\"log_overflow\": %lld, \"sieve_check_failures\": %lld},\n", (long long)overflow,
            (long long)check_failures);
    fprintf(f, "  \"status\": \"%s\",\n  \"failures\": [", run->failures[0] ? "failed" : "ok");
    char lines[sizeof(run->failures)];
    memcpy(lines, run->failures, sizeof(lines));
    char *save = NULL;
    int first = 1;
    for (char *line = strtok_r(lines, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        fputs(first ? "" : ", ", f);
        hw_json_str(f, line);
        first = 0;
    }
    fprintf(f, "]\n}\n");
    return close_output(f, path, err);
}
