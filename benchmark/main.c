/* hw-bench: the synthetic workload of hostwire. Thin command-line layer over the library parts. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bench.h"
#include "hwargs.h"
#include "hwclock.h"
#include "sieve.h"

#define TOOL "hw-bench"

static const char usage_top[] =
    "Usage: hw-bench COMMAND [OPTIONS]\n"
    "The synthetic workload of hostwire: N CPU-bound sieve processes and M TCP senders.\n\n"
    "Commands:\n"
    "  main       run the benchmark: receiver, clock sync, background and sending processes\n"
    "  receive    the remote receiver (started by main through --receiver-cmd)\n"
    "  sieve      run the background routine alone and time it (calibration)\n"
    "  pingpong   one-byte pipe round trips between two processes (probe-effect yardstick)\n"
    "  mkdata     make an ASCII data file with line feeds\n\n"
    "Run 'hw-bench COMMAND --help' for the options of a command.\n";

static const char usage_main[] =
    "Usage: hw-bench main -o DIR [OPTIONS]\n"
    "Starts the receiver, measures the clock offset, forks background and sending processes\n"
    "alternately, logs their events during the window and writes DIR/*.tsv and DIR/bench.json.\n\n"
    "  -o, --out DIR          directory for the logs (created if missing)\n"
    "  -M, --senders M        sending processes (default 2, 0..1000)\n"
    "  -N, --background N     background sieve processes (default 2, 0..1000)\n"
    "      --log2 L           background data set of 2^L bytes, 1..30 (default 20)\n"
    "      --code-copies K    background i runs sieve copy i mod K, 1..32 (default 1)\n"
    "      --read-size S      bytes per read() of the data file (default 8k)\n"
    "      --write-size S     bytes per write() to the socket (default: the read size)\n"
    "      --data FILE        data file to send (default: DIR/data.txt, made with --data-size)\n"
    "      --data-size S      size of the generated data file (default 8M)\n"
    "      --warmup T         time before the logging window (default 1s)\n"
    "      --duration T       length of the logging window (default 5s)\n"
    "      --quiet T          idle time after the window before logs are written (default 1s)\n"
    "      --connect ADDR     receiver's IPv4 address (default 127.0.0.1)\n"
    "      --receiver-cmd CMD shell command that starts 'hw-bench receive' (default: a local one\n"
    "                         listening on ADDR); it must print the receiver's port report on stdout\n"
    "      --log-capacity N   events kept per process in the window, 1..2^28 (default 262144)\n"
    "      --sync-samples N   clock exchanges at start and at end (default 16)\n"
    "  -v, --verbose          say what happens\n"
    "  -h, --help             this text\n\n"
    "Exit status: 0 all processes ok; 1 a process failed (named on stderr); 2 bad arguments.\n\n"
    "EXAMPLES\n"
    "  hw-bench main -o /var/tmp/run1 -M 2 -N 2 --warmup 1 --duration 2\n"
    "  hw-bench main -o out --connect 198.18.0.2 \\\n"
    "      --receiver-cmd 'ip netns exec hw1-rx hw-bench receive --listen 198.18.0.2 -o out'\n";

static const char usage_receive[] =
    "Usage: hw-bench receive [--listen ADDR] -o DIR [--log-capacity N (1..2^28)]\n"
    "Reserves a TCP and a UDP port on ADDR (default 127.0.0.1), reports them on stdout (binary,\n"
    "network byte order) and serves one run of 'hw-bench main'. Logs go to DIR/recv-<i>.tsv.\n\n"
    "EXAMPLES\n"
    "  ip netns exec hw1-rx hw-bench receive --listen 198.18.0.2 -o /var/tmp/run1\n";

static const char usage_sieve[] =
    "Usage: hw-bench sieve --log2 L [--rounds R] [--copy C]\n"
    "Runs the background routine alone over 2^L bytes (1..30) R times (default 3) and prints the\n"
    "number of primes below 2^L, the largest one and the time per round.\n\n"
    "EXAMPLES\n"
    "  hw-bench sieve --log2 20\n";

static const char usage_pingpong[] =
    "Usage: hw-bench pingpong --loops N [--cpu C]\n"
    "Two processes pass one byte through two pipes N times (lmbench lat_pipe) and print the\n"
    "microseconds per round trip. --cpu pins both to CPU C.\n\n"
    "EXAMPLES\n"
    "  hw-bench pingpong --loops 100000 --cpu 0\n";

static const char usage_mkdata[] =
    "Usage: hw-bench mkdata --size S [--seed X] FILE\n"
    "Writes S bytes of printable ASCII lines ending in LF to FILE (same seed, same file).\n\n"
    "EXAMPLES\n"
    "  hw-bench mkdata --size 8M data.txt\n";

static int usage_error(const char *command, const char *message)
{
    fprintf(stderr, "%s: %s%s%s (see 'hw-bench %s%s--help')\n", TOOL, command ? command : "",
            command ? ": " : "", message, command ? command : "", command ? " " : "");
    return 2;
}

/* getopt_long (with a leading ':' in its option string) returns ':' for a missing value and '?'
 * for an unknown option. */
static int option_error(const char *command, int c, const char *opt)
{
    char message[128];
    snprintf(message, sizeof(message), c == ':' ? "option '%s' needs a value" : "unknown option '%s'", opt);
    return usage_error(command, message);
}

static int check_extra_args(const char *command, int argc, char **argv)
{
    if (optind < argc) {
        char message[256];
        snprintf(message, sizeof(message), "unexpected argument '%s'", argv[optind]);
        return usage_error(command, message);
    }
    return 0;
}

enum { OPT_LOG2 = 256, OPT_COPIES, OPT_READ, OPT_WRITE, OPT_DATA, OPT_DATA_SIZE, OPT_WARMUP, OPT_DURATION,
       OPT_QUIET, OPT_CONNECT, OPT_RECV_CMD, OPT_CAPACITY, OPT_SYNC, OPT_LISTEN, OPT_ROUNDS, OPT_COPY,
       OPT_LOOPS, OPT_CPU, OPT_SIZE, OPT_SEED };

static int cmd_main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"out", required_argument, 0, 'o'}, {"senders", required_argument, 0, 'M'},
        {"background", required_argument, 0, 'N'}, {"log2", required_argument, 0, OPT_LOG2},
        {"code-copies", required_argument, 0, OPT_COPIES}, {"read-size", required_argument, 0, OPT_READ},
        {"write-size", required_argument, 0, OPT_WRITE}, {"data", required_argument, 0, OPT_DATA},
        {"data-size", required_argument, 0, OPT_DATA_SIZE}, {"warmup", required_argument, 0, OPT_WARMUP},
        {"duration", required_argument, 0, OPT_DURATION}, {"quiet", required_argument, 0, OPT_QUIET},
        {"connect", required_argument, 0, OPT_CONNECT}, {"receiver-cmd", required_argument, 0, OPT_RECV_CMD},
        {"log-capacity", required_argument, 0, OPT_CAPACITY}, {"sync-samples", required_argument, 0, OPT_SYNC},
        {"verbose", no_argument, 0, 'v'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    struct hw_bench_config cfg = {
        .senders = 2, .background = 2, .sieve_log2 = 20, .code_copies = 1, .read_size = 8192, .write_size = -1,
        .warmup_ns = 1000000000LL, .duration_ns = 5000000000LL, .quiet_ns = 1000000000LL,
        .log_capacity = 262144, .connect_addr = "127.0.0.1", .sync_samples = 16};
    int64_t v, data_size = 8 << 20;
    int c, bad = 0;
    opterr = 0;
    while (!bad && (c = getopt_long(argc, argv, ":o:M:N:vh", opts, NULL)) != -1) {
        const char *o = argv[optind - 1];
        switch (c) {
        case 'o': cfg.out_dir = optarg; break;
        case 'M': bad = hw_parse_i64(TOOL, "--senders", optarg, 0, 1000, &v); cfg.senders = (int)v; break;
        case 'N': bad = hw_parse_i64(TOOL, "--background", optarg, 0, 1000, &v); cfg.background = (int)v; break;
        case OPT_LOG2: bad = hw_parse_i64(TOOL, "--log2", optarg, HW_SIEVE_MIN_LOG2, HW_SIEVE_MAX_LOG2, &v);
            cfg.sieve_log2 = (int)v; break;
        case OPT_COPIES: bad = hw_parse_i64(TOOL, "--code-copies", optarg, 1, HW_SIEVE_COPIES, &v);
            cfg.code_copies = (int)v; break;
        case OPT_READ: bad = hw_parse_size(TOOL, "--read-size", optarg, 1, 64 << 20, &cfg.read_size); break;
        case OPT_WRITE: bad = hw_parse_size(TOOL, "--write-size", optarg, 1, 64 << 20, &cfg.write_size); break;
        case OPT_DATA: cfg.data_path = optarg; break;
        case OPT_DATA_SIZE: bad = hw_parse_size(TOOL, "--data-size", optarg, 1, 1LL << 34, &data_size); break;
        case OPT_WARMUP: bad = hw_parse_duration_ns(TOOL, "--warmup", optarg, &cfg.warmup_ns); break;
        case OPT_DURATION: bad = hw_parse_duration_ns(TOOL, "--duration", optarg, &cfg.duration_ns); break;
        case OPT_QUIET: bad = hw_parse_duration_ns(TOOL, "--quiet", optarg, &cfg.quiet_ns); break;
        case OPT_CONNECT: cfg.connect_addr = optarg; break;
        case OPT_RECV_CMD: cfg.receiver_cmd = optarg; break;
        case OPT_CAPACITY: bad = hw_parse_i64(TOOL, "--log-capacity", optarg, 1, HW_LOG_CAPACITY_MAX,
                                              &cfg.log_capacity); break;
        case OPT_SYNC: bad = hw_parse_i64(TOOL, "--sync-samples", optarg, 1, 256, &v); cfg.sync_samples = (int)v; break;
        case 'v': cfg.verbose = 1; break;
        case 'h': fputs(usage_main, stdout); return 0;
        default: return option_error("main", c, o);
        }
    }
    if (bad)
        return 2;
    if (check_extra_args("main", argc, argv))
        return 2;
    if (!cfg.out_dir)
        return usage_error("main", "-o DIR is required");
    if (cfg.senders + cfg.background > HW_MAX_PROCS)
        return usage_error("main", "at most 1024 processes in all");
    if (cfg.senders + cfg.background == 0)
        return usage_error("main", "-M 0 and -N 0: a run needs at least one process");
    if (cfg.duration_ns == 0)
        return usage_error("main", "--duration must be longer than 0");
    if (cfg.write_size < 0)
        cfg.write_size = cfg.read_size;
    char data_path[4096];
    if (!cfg.data_path) {
        if (mkdir(cfg.out_dir, 0755) < 0 && errno != EEXIST) {
            fprintf(stderr, "%s: failed to create %s: %s\n", TOOL, cfg.out_dir, strerror(errno));
            return 1;
        }
        snprintf(data_path, sizeof(data_path), "%s/data.txt", cfg.out_dir);
        int err = hw_make_data(data_path, data_size, 1997);
        if (err) {
            fprintf(stderr, "%s: failed to make %s: %s\n", TOOL, data_path, strerror(-err));
            return 1;
        }
        cfg.data_path = data_path;
    }
    return hw_run_main(&cfg);
}

static int cmd_receive(int argc, char **argv)
{
    static const struct option opts[] = {{"listen", required_argument, 0, OPT_LISTEN},
                                         {"out", required_argument, 0, 'o'},
                                         {"log-capacity", required_argument, 0, OPT_CAPACITY},
                                         {"verbose", no_argument, 0, 'v'}, {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    struct hw_receiver_config cfg = {.listen_addr = "127.0.0.1", .log_capacity = 262144};
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":o:vh", opts, NULL)) != -1) {
        const char *o = argv[optind - 1];
        switch (c) {
        case OPT_LISTEN: cfg.listen_addr = optarg; break;
        case 'o': cfg.out_dir = optarg; break;
        case OPT_CAPACITY:
            if (hw_parse_i64(TOOL, "--log-capacity", optarg, 1, HW_LOG_CAPACITY_MAX, &cfg.log_capacity))
                return 2;
            break;
        case 'v': cfg.verbose = 1; break;
        case 'h': fputs(usage_receive, stdout); return 0;
        default: return option_error("receive", c, o);
        }
    }
    if (check_extra_args("receive", argc, argv))
        return 2;
    if (!cfg.out_dir)
        return usage_error("receive", "-o DIR is required");
    return hw_run_receiver(&cfg);
}

static int cmd_sieve(int argc, char **argv)
{
    static const struct option opts[] = {{"log2", required_argument, 0, OPT_LOG2},
                                         {"rounds", required_argument, 0, OPT_ROUNDS},
                                         {"copy", required_argument, 0, OPT_COPY},
                                         {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    int64_t log2 = -1, rounds = 3, copy = 0;
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        const char *o = argv[optind - 1];
        int bad = 0;
        switch (c) {
        case OPT_LOG2: bad = hw_parse_i64(TOOL, "--log2", optarg, HW_SIEVE_MIN_LOG2, HW_SIEVE_MAX_LOG2, &log2); break;
        case OPT_ROUNDS: bad = hw_parse_i64(TOOL, "--rounds", optarg, 1, 1000000, &rounds); break;
        case OPT_COPY: bad = hw_parse_i64(TOOL, "--copy", optarg, 0, HW_SIEVE_COPIES - 1, &copy); break;
        case 'h': fputs(usage_sieve, stdout); return 0;
        default: return option_error("sieve", c, o);
        }
        if (bad)
            return 2;
    }
    if (check_extra_args("sieve", argc, argv))
        return 2;
    if (log2 < 0)
        return usage_error("sieve", "--log2 L is required");
    uint8_t *data = malloc((size_t)1 << log2);
    if (!data) {
        fprintf(stderr, "%s: failed to allocate 2^%lld bytes\n", TOOL, (long long)log2);
        return 1;
    }
    struct hw_sieve_result want = hw_sieve_expected((int)log2), got = {0, 0};
    int64_t start = hw_mono_ns();
    int failures = 0;
    for (int64_t r = 0; r < rounds; r++) {
        got = hw_sieve_round((int)copy, data, (int)log2);
        failures += got.primes != want.primes || got.largest != want.largest;
    }
    double round_ms = (double)(hw_mono_ns() - start) / (double)rounds / 1e6;
    free(data);
    printf("sieve: log2=%lld primes=%lld largest=%lld rounds=%lld round_ms=%.3f check=%s\n", (long long)log2,
           (long long)got.primes, (long long)got.largest, (long long)rounds, round_ms, failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}

static int cmd_pingpong(int argc, char **argv)
{
    static const struct option opts[] = {{"loops", required_argument, 0, OPT_LOOPS},
                                         {"cpu", required_argument, 0, OPT_CPU},
                                         {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    int64_t loops = -1, cpu = -1;
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        const char *o = argv[optind - 1];
        int bad = 0;
        switch (c) {
        case OPT_LOOPS: bad = hw_parse_i64(TOOL, "--loops", optarg, 1, 1LL << 40, &loops); break;
        case OPT_CPU: bad = hw_parse_i64(TOOL, "--cpu", optarg, 0, 4095, &cpu); break;
        case 'h': fputs(usage_pingpong, stdout); return 0;
        default: return option_error("pingpong", c, o);
        }
        if (bad)
            return 2;
    }
    if (check_extra_args("pingpong", argc, argv))
        return 2;
    if (loops < 0)
        return usage_error("pingpong", "--loops N is required");
    double us = 0;
    int err = hw_run_pingpong(loops, (int)cpu, &us);
    if (err) {
        fprintf(stderr, "%s: failed to run the ping-pong: %s\n", TOOL, strerror(-err));
        return 1;
    }
    printf("pingpong: loops=%lld round_trip_us=%.3f\n", (long long)loops, us);
    return 0;
}

static int cmd_mkdata(int argc, char **argv)
{
    static const struct option opts[] = {{"size", required_argument, 0, OPT_SIZE},
                                         {"seed", required_argument, 0, OPT_SEED},
                                         {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    int64_t size = -1, seed = 1997;
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        const char *o = argv[optind - 1];
        int bad = 0;
        switch (c) {
        case OPT_SIZE: bad = hw_parse_size(TOOL, "--size", optarg, 1, 1LL << 40, &size); break;
        case OPT_SEED: bad = hw_parse_i64(TOOL, "--seed", optarg, 0, INT64_MAX, &seed); break;
        case 'h': fputs(usage_mkdata, stdout); return 0;
        default: return option_error("mkdata", c, o);
        }
        if (bad)
            return 2;
    }
    if (size < 0)
        return usage_error("mkdata", "--size S is required");
    if (optind + 1 != argc)
        return usage_error("mkdata", "expected exactly one FILE");
    int err = hw_make_data(argv[optind], size, (uint64_t)seed);
    if (err) {
        fprintf(stderr, "%s: failed to write %s: %s\n", TOOL, argv[optind], strerror(-err));
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    static const struct { const char *name; int (*run)(int, char **); } commands[] = {
        {"main", cmd_main}, {"receive", cmd_receive}, {"sieve", cmd_sieve},
        {"pingpong", cmd_pingpong}, {"mkdata", cmd_mkdata}};
    if (argc < 2)
        return fputs(usage_top, stderr), 2;
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)
        return fputs(usage_top, stdout), 0;
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    char m[128];
    snprintf(m, sizeof(m), "unknown command '%s'", argv[1]);
    return usage_error(NULL, m);
}
