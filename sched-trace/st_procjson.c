/* sched.json of the proc backend: the format of the tracefs backend's (hostwire-sched 1), with
 * one buffer, the ring, whose losses stand where the analysis reads them (lost_events; the ring
 * has no per-CPU buffers, so cpus is empty). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "hwjson.h"
#include "st_internal.h"
#include "st_proc.h"

static void num(FILE *f, const char *key, long long v, const char *sep)
{
    if (v == ST_UNKNOWN)
        fprintf(f, "\"%s\": null%s", key, sep);
    else
        fprintf(f, "\"%s\": %lld%s", key, v, sep);
}

static void state(FILE *f, const char *key, const struct st_proc_header *h, const char *sep)
{
    if (!h) {
        fprintf(f, "\"%s\": null%s", key, sep);
        return;
    }
    fprintf(f, "\"%s\": {\"enabled\": %lld, \"size\": %lld, \"written\": %lld, \"lost\": %lld, \"pending\": %lld}%s",
            key, h->enabled, h->size, h->written, h->lost, h->pending, sep);
}

long long st_proc_lost(const struct st_proc_stats *st, const struct st_proc_run *run, long long *lost,
                       long long *unread)
{
    const struct st_proc_header *fin = run && run->have_control ? &run->control : st->have_header ? &st->last : NULL;
    *lost = *unread = ST_UNKNOWN;
    if (!fin)
        return ST_UNKNOWN;
    /* a clear or resize by someone else while recording: what it threw away is not counted */
    if (st->resets || (fin != &st->last && st->have_header &&
                       (fin->written < st->last.written || fin->lost < st->last.lost)))
        return ST_UNKNOWN;
    *lost = fin->lost;
    /* a stopped ring's written is final: each record went to this file, to another reader of
     * /proc/schedtrace (reads consume) or is still pending */
    if (!fin->enabled && !st->damaged && fin->written >= st->records)
        *unread = fin->written - st->records;
    return *unread == ST_UNKNOWN ? ST_UNKNOWN : *lost + *unread;
}

static void json_command(FILE *f, const struct st_proc_run *run)
{
    fprintf(f, "  \"command\": {\"argv\": [");
    for (char *const *a = run->command; *a; a++) {
        hw_json_str(f, *a);
        fputs(a[1] ? ", " : "", f);
    }
    fprintf(f, "], \"pid\": %d, ", run->child_pid);
    if (run->child_done)
        fprintf(f, "\"exit_status\": %d},\n", run->child_status);
    else
        fprintf(f, "\"exit_status\": null},\n");
}

static void json_buffer(FILE *f, const struct st_proc_stats *st, const struct st_proc_run *run)
{
    long long lost, unread, total = st_proc_lost(st, run, &lost, &unread);
    const struct st_proc_header *fin = run->have_control ? &run->control : st->have_header ? &st->last : NULL;
    fprintf(f, "    {\"name\": \"sched\", \"backend\": \"proc\", \"ring\": ");
    hw_json_str(f, run->ring);
    fprintf(f, ", \"trace\": \"" ST_PROC_RAW "\", \"tsv\": \"sched.tsv\", \"syscalls_tsv\": %s,\n",
            st->wrote_syscalls ? "\"syscalls.tsv\"" : "null");
    fprintf(f, "     \"events\": [\"switch\"%s], \"events_missing\": [], \"pids\": [",
            run->syscalls || st->wrote_syscalls ? ", \"sys_enter\", \"sys_exit\"" : "");
    for (int i = 0; i < run->npids; i++)
        fprintf(f, "%d%s", run->pids[i], i + 1 < run->npids ? ", " : "");
    fprintf(f, "],\n     ");
    num(f, "size", fin ? fin->size : ST_UNKNOWN, ", ");
    fprintf(f, "\"size_requested\": %lld, \"drain\": %s, ", run->size_requested, run->rt_prio >= 0 ? "true" : "false");
    num(f, "drain_rt_prio", run->rt_prio >= 0 ? run->rt_prio : ST_UNKNOWN, ", ");
    fprintf(f, "\"poll_ms\": 50,\n     \"records\": %lld, \"ring_records\": %lld, \"switch_records\": %lld, "
            "\"sys_enter_records\": %lld, \"sys_exit_records\": %lld,\n     \"syscall_records\": %lld, "
            "\"unfinished\": %lld, \"exits_without_enter\": %lld, \"headers\": %lld, \"resets\": %d,\n     ",
            st->switches, st->records, st->switches, st->sys_enter, st->sys_exit, st->syscalls, st->unfinished,
            st->exits_without_enter, st->headers, st->resets);
    state(f, "first_header", st->have_header ? &st->first : NULL, ", ");
    state(f, "last_header", st->have_header ? &st->last : NULL, ",\n     ");
    state(f, "control_at_stop", run->have_control ? &run->control : NULL, ",\n     ");
    num(f, "written", fin ? fin->written : ST_UNKNOWN, ", ");
    num(f, "lost", lost, ", ");
    num(f, "unread", unread, ", ");
    num(f, "lost_events", total, ", ");
    fprintf(f, "\"damaged\": ");
    if (st->damaged)
        hw_json_str(f, st->damage);
    else
        fputs("null", f);
    fprintf(f, ",\n     \"records_by_cpu\": {");
    const char *sep = "";
    for (int cpu = 0; cpu < ST_MAX_CPUS; cpu++)
        if (st->per_cpu[cpu]) {
            fprintf(f, "%s\"%d\": %lld", sep, cpu, st->per_cpu[cpu]);
            sep = ", ";
        }
    fprintf(f, "}, \"cpus\": []}");
}

int st_proc_write_json(const char *path, const struct st_proc_stats *st, const struct st_proc_run *run,
                       struct hw_err *err)
{
    struct st_convert_stats clock = { 0 };   /* only its marker stamps: the clock check */
    FILE *f = fopen(path, "w");
    if (!f) {
        hw_seterr(err, "failed to create %s: %s", path, strerror(errno));
        return -1;
    }
    fprintf(f, "{\n  \"format\": \"hostwire-sched 1\",\n  \"tool\": \"hw-schedtrace\",\n  \"backend\": \"proc\",\n"
            "  \"clock\": \"CLOCK_MONOTONIC\",\n  ");
    num(f, "start_mono_ns", run->start_mono_ns, ",\n  ");
    num(f, "stop_mono_ns", run->stop_mono_ns, ",\n");
    memcpy(clock.marker_trace_ns, st->marker_trace_ns, sizeof(clock.marker_trace_ns));
    memcpy(clock.marker_mono_ns, st->marker_mono_ns, sizeof(clock.marker_mono_ns));
    st_json_clock(f, &clock);
    if (run->command)
        json_command(f, run);
    fprintf(f, "  \"buffers\": [\n");
    json_buffer(f, st, run);
    fprintf(f, "\n  ]\n}\n");
    if ((ferror(f) | fclose(f)) != 0) {
        hw_seterr(err, "failed to write %s: %s", path, strerror(errno ? errno : EIO));
        return -1;
    }
    return 0;
}
