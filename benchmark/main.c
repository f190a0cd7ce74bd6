/* hw-bench: the synthetic workload of hostwire. Thin command-line layer over the library parts. */
#include <errno.h>
#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bench.h"
#include "hwargs.h"
#include "hwclock.h"
#include "sieve.h"
#include "usage.h"

enum { OPT_LOG2 = 256, OPT_COPIES, OPT_READ, OPT_WRITE, OPT_DATA, OPT_DATA_SIZE, OPT_WARMUP, OPT_QUIET,
       OPT_CONNECT, OPT_RECV_CMD, OPT_CAPACITY, OPT_SYNC, OPT_LISTEN, OPT_ROUNDS, OPT_COPY, OPT_LOOPS, OPT_CPU,
       OPT_SIZE, OPT_SEED, OPT_INJECT, OPT_CALLS, OPT_THINK, OPT_PAUSE_AT, OPT_PAUSE_FOR, OPT_RCVBUF };

/* One subcommand's options: `take` stores one option (common/hwargs.h). */
struct command {
    const char *help;
    const char *shorts;
    const struct option *longs;
    hw_take_fn take;
};

static int parse(const struct command *cmd, int argc, char **argv, void *values, struct hw_err *err)
{
    return hw_getopt(argc, argv, cmd->shorts, cmd->longs, cmd->help, cmd->take, values, err);
}

static int no_more_args(int argc, char **argv, struct hw_err *err)
{
    if (optind < argc) {
        hw_usage_err(err, "unexpected argument '%s'", argv[optind]);
        return -1;
    }
    return 0;
}

/* ---- main ---- */

struct main_values {
    struct hb_config cfg;
    int64_t data_size;
};

static int take_main(void *values, int c, const char *name, const char *arg, struct hw_err *err)
{
    struct main_values *m = values;
    struct hb_config *cfg = &m->cfg;
    switch (c) {
    case 'o': cfg->out_dir = arg; return 0;
    case 'M': return hw_parse_int(name, arg, 0, 1000, &cfg->senders, err);
    case 'N': return hw_parse_int(name, arg, 0, 1000, &cfg->background, err);
    case OPT_LOG2: return hw_parse_int(name, arg, HB_SIEVE_MIN_LOG2, HB_SIEVE_MAX_LOG2, &cfg->sieve_log2, err);
    case OPT_COPIES: return hw_parse_int(name, arg, 1, HB_SIEVE_COPIES, &cfg->code_copies, err);
    case OPT_READ: return hw_parse_size(name, arg, 1, 64 << 20, &cfg->read_size, err);
    case OPT_WRITE: return hw_parse_size(name, arg, 1, 64 << 20, &cfg->write_size, err);
    case OPT_DATA: cfg->data_path = arg; return 0;
    case OPT_DATA_SIZE: return hw_parse_size(name, arg, 1, 1LL << 34, &m->data_size, err);
    case OPT_WARMUP: return hw_parse_duration_ns(name, arg, 0, &cfg->warmup_ns, err);
    case 'd': return hw_parse_duration_ns(name, arg, 1, &cfg->duration_ns, err);
    case OPT_QUIET: return hw_parse_duration_ns(name, arg, 0, &cfg->quiet_ns, err);
    case OPT_THINK: return hw_parse_duration_ns(name, arg, 0, &cfg->think_ns, err);
    case OPT_CONNECT: cfg->connect_addr = arg; return 0;
    case OPT_RECV_CMD: cfg->receiver_cmd = arg; return 0;
    case OPT_CAPACITY: return hw_parse_i64(name, arg, 1, HB_LOG_CAPACITY_MAX, &cfg->log_capacity, err);
    case OPT_SYNC: return hw_parse_int(name, arg, 1, 256, &cfg->sync_samples, err);
    case 'v': cfg->log = stderr; return 0;
    }
    return 0;
}

static int cmd_main(int argc, char **argv, struct hw_err *err)
{
    static const struct option opts[] = {
        {"output", required_argument, 0, 'o'}, {"out", required_argument, 0, 'o'} /* old spelling */,
        {"senders", required_argument, 0, 'M'}, {"background", required_argument, 0, 'N'},
        {"log2", required_argument, 0, OPT_LOG2}, {"code-copies", required_argument, 0, OPT_COPIES},
        {"read-size", required_argument, 0, OPT_READ}, {"write-size", required_argument, 0, OPT_WRITE},
        {"data", required_argument, 0, OPT_DATA}, {"data-size", required_argument, 0, OPT_DATA_SIZE},
        {"warmup", required_argument, 0, OPT_WARMUP}, {"duration", required_argument, 0, 'd'},
        {"quiet", required_argument, 0, OPT_QUIET}, {"connect", required_argument, 0, OPT_CONNECT},
        {"think", required_argument, 0, OPT_THINK},
        {"receiver-cmd", required_argument, 0, OPT_RECV_CMD}, {"log-capacity", required_argument, 0, OPT_CAPACITY},
        {"sync-samples", required_argument, 0, OPT_SYNC}, {"verbose", no_argument, 0, 'v'},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    static const struct command cmd = {hb_usage_main, ":o:M:N:d:vh", opts, take_main};
    struct main_values m = {
        .cfg = {.senders = 2, .background = 2, .sieve_log2 = 20, .code_copies = 1, .read_size = 8192,
                .write_size = -1, .warmup_ns = 1000000000LL, .duration_ns = 5000000000LL,
                .quiet_ns = 1000000000LL, .log_capacity = 262144, .connect_addr = "127.0.0.1", .sync_samples = 16},
        .data_size = 8 << 20};
    struct hb_config *cfg = &m.cfg;
    int rc = parse(&cmd, argc, argv, &m, err);
    if (rc)
        return rc;
    if (no_more_args(argc, argv, err) < 0)
        return -1;
    if (!cfg->out_dir)
        return hw_usage_err(err, "-o DIR is required"), -1;
    if (cfg->senders + cfg->background > HB_MAX_PROCS)
        return hw_usage_err(err, "at most 1024 processes in all"), -1;
    if (cfg->senders + cfg->background == 0)
        return hw_usage_err(err, "-M 0 and -N 0: a run needs at least one process"), -1;
    if (cfg->write_size < 0)
        cfg->write_size = cfg->read_size;
    char data_path[4096];
    if (!cfg->data_path) {
        if (mkdir(cfg->out_dir, 0755) < 0 && errno != EEXIST)
            return hw_seterr(err, "failed to create %s: %s", cfg->out_dir, strerror(errno)), -1;
        snprintf(data_path, sizeof(data_path), "%s/data.txt", cfg->out_dir);
        int failed = hb_make_data(data_path, m.data_size, 1997);
        if (failed)
            return hw_seterr(err, "failed to make %s: %s", data_path, strerror(-failed)), -1;
        cfg->data_path = data_path;
    }
    return hb_run_main(cfg, err);
}

/* ---- receive ---- */

static int take_receive(void *values, int c, const char *name, const char *arg, struct hw_err *err)
{
    struct hb_receiver_config *cfg = values;
    switch (c) {
    case OPT_LISTEN: cfg->listen_addr = arg; return 0;
    case 'o': cfg->out_dir = arg; return 0;
    case OPT_CAPACITY: return hw_parse_i64(name, arg, 1, HB_LOG_CAPACITY_MAX, &cfg->log_capacity, err);
    case OPT_PAUSE_AT: return hw_parse_duration_ns(name, arg, 0, &cfg->pause_at_ns, err);
    case OPT_PAUSE_FOR: return hw_parse_duration_ns(name, arg, 0, &cfg->pause_ns, err);
    case OPT_RCVBUF: return hw_parse_size(name, arg, 1024, 1 << 30, &cfg->rcvbuf, err);
    case 'v': cfg->log = stderr; return 0;
    }
    return 0;
}

static int cmd_receive(int argc, char **argv, struct hw_err *err)
{
    static const struct option opts[] = {
        {"listen", required_argument, 0, OPT_LISTEN}, {"output", required_argument, 0, 'o'},
        {"out", required_argument, 0, 'o'} /* old spelling */, {"log-capacity", required_argument, 0, OPT_CAPACITY},
        {"pause-at", required_argument, 0, OPT_PAUSE_AT}, {"pause-for", required_argument, 0, OPT_PAUSE_FOR},
        {"rcvbuf", required_argument, 0, OPT_RCVBUF},
        {"verbose", no_argument, 0, 'v'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    static const struct command cmd = {hb_usage_receive, ":o:vh", opts, take_receive};
    struct hb_receiver_config cfg = {.listen_addr = "127.0.0.1", .log_capacity = 262144, .pause_at_ns = -1};
    int rc = parse(&cmd, argc, argv, &cfg, err);
    if (rc)
        return rc;
    if (no_more_args(argc, argv, err) < 0)
        return -1;
    if (!cfg.out_dir)
        return hw_usage_err(err, "-o DIR is required"), -1;
    return hb_run_receiver(&cfg, err);
}

/* ---- sieve, pingpong, mkdata ---- */

struct small_values {
    int64_t log2, rounds, copy, loops, cpu, size, seed, inject_ns, calls;
    FILE *log;
};

static int take_small(void *values, int c, const char *name, const char *arg, struct hw_err *err)
{
    struct small_values *v = values;
    switch (c) {
    case OPT_LOG2: return hw_parse_i64(name, arg, HB_SIEVE_MIN_LOG2, HB_SIEVE_MAX_LOG2, &v->log2, err);
    case OPT_ROUNDS: return hw_parse_i64(name, arg, 1, 1000000, &v->rounds, err);
    case OPT_COPY: return hw_parse_i64(name, arg, 0, HB_SIEVE_COPIES - 1, &v->copy, err);
    case OPT_LOOPS: return hw_parse_i64(name, arg, 1, 1LL << 40, &v->loops, err);
    case OPT_CPU: return hw_parse_i64(name, arg, 0, 4095, &v->cpu, err);
    case OPT_SIZE: return hw_parse_size(name, arg, 1, 1LL << 40, &v->size, err);
    case OPT_SEED: return hw_parse_i64(name, arg, 0, INT64_MAX, &v->seed, err);
    case OPT_INJECT: return hw_parse_i64(name, arg, 0, 1000000000, &v->inject_ns, err);
    case OPT_CALLS: return hw_parse_i64(name, arg, 1, 1LL << 32, &v->calls, err);
    case 'v': v->log = stderr; return 0;
    }
    return 0;
}

/* Parses a small command: then its required value (*need >= 0) and `operands` operands. */
static int parse_small(const struct command *cmd, int argc, char **argv, struct small_values *v, const int64_t *need,
                       const char *need_what, int operands, struct hw_err *err)
{
    int rc = parse(cmd, argc, argv, v, err);
    if (rc)
        return rc;
    if (*need < 0)
        return hw_usage_err(err, "%s is required", need_what), -1;
    if (operands == 0)
        return no_more_args(argc, argv, err);
    if (optind + operands != argc)
        return hw_usage_err(err, "expected exactly one FILE"), -1;
    return 0;
}

/* Each small command's work, once its options are parsed (operands: what follows them). */
static int run_sieve(const struct small_values *v, char **operands, struct hw_err *err)
{
    (void)operands;
    uint8_t *data = malloc((size_t)1 << v->log2);
    if (!data)
        return hw_seterr(err, "failed to allocate 2^%lld bytes", (long long)v->log2), -1;
    struct hb_sieve_result want = hb_sieve_expected((int)v->log2), got = {0, 0};
    int64_t start = hw_mono_ns();
    int failures = 0;
    for (int64_t r = 0; r < v->rounds; r++) {
        int64_t t = hw_mono_ns();
        got = hb_sieve_round((int)v->copy, data, (int)v->log2);
        failures += got.primes != want.primes || got.largest != want.largest;
        if (v->log)
            fprintf(v->log, "hw-bench: sieve: round %lld of copy %lld: %.3f ms\n", (long long)r + 1,
                    (long long)v->copy, (double)(hw_mono_ns() - t) / 1e6);
    }
    double round_ms = (double)(hw_mono_ns() - start) / (double)v->rounds / 1e6;
    free(data);
    printf("sieve: log2=%lld primes=%lld largest=%lld rounds=%lld round_ms=%.3f check=%s\n", (long long)v->log2,
           (long long)got.primes, (long long)got.largest, (long long)v->rounds, round_ms, failures ? "FAILED" : "ok");
    if (failures)
        return hw_seterr(err, "sieve: %d of %lld rounds gave a wrong answer", failures, (long long)v->rounds), -1;
    return 0;
}

static int run_pingpong(const struct small_values *v, char **operands, struct hw_err *err)
{
    (void)operands;
    double us = 0;
    int64_t start = hw_mono_ns();
    int failed = hb_run_pingpong(v->loops, (int)v->cpu, v->inject_ns, &us);
    if (failed)
        return hw_seterr(err, "failed to run the ping-pong: %s", strerror(-failed)), -1;
    if (v->log) {
        char where[32] = "any CPU";
        if (v->cpu >= 0)
            snprintf(where, sizeof(where), "CPU %lld", (long long)v->cpu);
        fprintf(v->log, "hw-bench: pingpong: %lld round trips on %s in %.3f s (injected %lld ns per round trip)\n",
                (long long)v->loops, where, (double)(hw_mono_ns() - start) / 1e9, (long long)v->inject_ns);
    }
    if (v->inject_ns > 0)
        printf("pingpong: loops=%lld inject_ns=%lld round_trip_us=%.3f\n", (long long)v->loops,
               (long long)v->inject_ns, us);
    else
        printf("pingpong: loops=%lld round_trip_us=%.3f\n", (long long)v->loops, us);
    return 0;
}

static int run_probes(const struct small_values *v, char **operands, struct hw_err *err)
{
    (void)operands;
    struct hb_probe_result res[16];
    int64_t start = hw_mono_ns();
    int n = hb_run_probes(v->calls, res, (int)(sizeof(res) / sizeof(res[0])));
    if (v->log)
        fprintf(v->log, "hw-bench: probes: %d probes of %lld calls each in %.3f s\n", n, (long long)v->calls,
                (double)(hw_mono_ns() - start) / 1e9);
    for (int i = 0; i < n; i++) {
        if (res[i].ns >= 0)
            printf("probe: name=%s calls=%lld ns_per_call=%.2f\n", res[i].name, (long long)v->calls, res[i].ns);
        else
            printf("probe: name=%s unavailable=%s\n", res[i].name, res[i].why);
    }
    (void)err;
    return 0;
}

static int run_mkdata(const struct small_values *v, char **operands, struct hw_err *err)
{
    int64_t start = hw_mono_ns();
    int failed = hb_make_data(operands[0], v->size, (uint64_t)v->seed);
    if (failed)
        return hw_seterr(err, "failed to write %s: %s", operands[0], strerror(-failed)), -1;
    if (v->log)
        fprintf(v->log, "hw-bench: mkdata: %lld bytes (seed %lld) to %s in %.3f s\n", (long long)v->size,
                (long long)v->seed, operands[0], (double)(hw_mono_ns() - start) / 1e9);
    return 0;
}

struct small_command {
    struct command cmd;
    struct small_values defaults;
    size_t need;             /* offsetof the required value in struct small_values */
    const char *need_what;
    int operands;
    int (*run)(const struct small_values *v, char **operands, struct hw_err *err);
};

static const struct option sieve_opts[] = {
    {"log2", required_argument, 0, OPT_LOG2}, {"rounds", required_argument, 0, OPT_ROUNDS},
    {"copy", required_argument, 0, OPT_COPY}, {"verbose", no_argument, 0, 'v'}, {"help", no_argument, 0, 'h'},
    {0, 0, 0, 0}};
static const struct option pingpong_opts[] = {
    {"loops", required_argument, 0, OPT_LOOPS}, {"cpu", required_argument, 0, OPT_CPU},
    {"inject-ns", required_argument, 0, OPT_INJECT}, {"verbose", no_argument, 0, 'v'}, {"help", no_argument, 0, 'h'},
    {0, 0, 0, 0}};
static const struct option probes_opts[] = {
    {"calls", required_argument, 0, OPT_CALLS}, {"verbose", no_argument, 0, 'v'}, {"help", no_argument, 0, 'h'},
    {0, 0, 0, 0}};
static const struct option mkdata_opts[] = {
    {"size", required_argument, 0, OPT_SIZE}, {"seed", required_argument, 0, OPT_SEED},
    {"verbose", no_argument, 0, 'v'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};

static const struct small_command small_commands[] = {
    {{hb_usage_sieve, ":vh", sieve_opts, take_small}, {.log2 = -1, .rounds = 3},
     offsetof(struct small_values, log2), "--log2 L", 0, run_sieve},
    {{hb_usage_pingpong, ":vh", pingpong_opts, take_small}, {.loops = -1, .cpu = -1},
     offsetof(struct small_values, loops), "--loops N", 0, run_pingpong},
    {{hb_usage_mkdata, ":vh", mkdata_opts, take_small}, {.size = -1, .seed = 1997},
     offsetof(struct small_values, size), "--size S", 1, run_mkdata},
    {{hb_usage_probes, ":vh", probes_opts, take_small}, {.calls = 1000000},
     offsetof(struct small_values, calls), "--calls N", 0, run_probes},
};

static int small(const struct small_command *sc, int argc, char **argv, struct hw_err *err)
{
    struct small_values v = sc->defaults;
    int rc = parse_small(&sc->cmd, argc, argv, &v, (const int64_t *)((const char *)&v + sc->need), sc->need_what,
                         sc->operands, err);
    return rc ? rc : sc->run(&v, argv + optind, err);
}

static int cmd_sieve(int argc, char **argv, struct hw_err *err)
{
    return small(&small_commands[0], argc, argv, err);
}

static int cmd_pingpong(int argc, char **argv, struct hw_err *err)
{
    return small(&small_commands[1], argc, argv, err);
}

static int cmd_mkdata(int argc, char **argv, struct hw_err *err)
{
    return small(&small_commands[2], argc, argv, err);
}

static int cmd_probes(int argc, char **argv, struct hw_err *err)
{
    return small(&small_commands[3], argc, argv, err);
}


int main(int argc, char **argv)
{
    static const struct { const char *name; int (*run)(int, char **, struct hw_err *); } commands[] = {
        {"main", cmd_main}, {"receive", cmd_receive}, {"sieve", cmd_sieve},
        {"pingpong", cmd_pingpong}, {"mkdata", cmd_mkdata}, {"probes", cmd_probes}};
    static struct hw_err err;
    if (argc < 2)
        return hw_usage_exit(HB_TOOL, NULL, "expected a command: main, receive, sieve, pingpong, mkdata or probes");
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)
        return fputs(hb_usage_top, stdout), 0;
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
        if (strcmp(argv[1], commands[i].name) != 0)
            continue;
        int rc = commands[i].run(argc - 1, argv + 1, &err);
        if (rc < 0)
            return hw_err_exit(HB_TOOL, commands[i].name, &err);
        if (err.msg[0])  /* warnings of a run that went through */
            hw_err_exit(HB_TOOL, commands[i].name, &err);
        return HW_EXIT_OK;
    }
    if (argv[1][0] == '-')
        return hw_usage_exit(HB_TOOL, NULL, "unknown option '%s'", argv[1]);
    return hw_usage_exit(HB_TOOL, NULL, "unknown command '%s'", argv[1]);
}
