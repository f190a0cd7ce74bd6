/* The capture loop: non-blocking libpcap handle polled with a short timeout, so a stop request or
 * the end of --duration is seen within 100 ms; packets go straight to pcap_dump. */
#include "wirecap.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <net/if.h>
#include <pcap/pcap.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hwclock.h"
#include "hwio.h"
#include "hwjson.h"
#include "hwsafe.h"

#define POLL_MS 100

void cap_wirecap_clock_pair(struct cap_wirecap_clock_pair *pair)
{
    int64_t r1 = hw_realtime_ns();
    int64_t m = hw_mono_ns();
    int64_t r2 = hw_realtime_ns();
    pair->realtime_ns = r1 + (r2 - r1) / 2;
    pair->monotonic_ns = m;
}

int cap_wirecap_enter_netns(const char *netns, struct hw_err *err)
{
    char path[4096];
    int fd, ret = -1;

    if (strchr(netns, '/'))
        snprintf(path, sizeof(path), "%s", netns);
    else
        snprintf(path, sizeof(path), "/run/netns/%s", netns);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        hw_seterr(err, "failed to open network namespace %s: %s", path, strerror(errno));
        return -1;
    }
    if (setns(fd, CLONE_NEWNET) < 0) {
        hw_seterr(err, "failed to enter network namespace %s: %s", path, strerror(errno));
        goto cleanup;
    }
    ret = 0;
cleanup:
    close(fd);
    return ret;
}

int cap_wirecap_list_tstamp_types(const struct cap_wirecap_opts *opts, FILE *out, struct hw_err *err)
{
    char errbuf[PCAP_ERRBUF_SIZE];
    int *types = NULL, n, ret = -1;
    pcap_t *p;

    p = pcap_create(opts->iface, errbuf);
    if (!p) {
        hw_seterr(err, "failed to open interface %s: %s", opts->iface, errbuf);
        return -1;
    }
    n = pcap_list_tstamp_types(p, &types);
    if (n < 0) {
        hw_seterr(err, "failed to list stamp types of %s: %s", opts->iface, pcap_geterr(p));
        goto cleanup;
    }
    if (n == 0)
        fprintf(out, "host\t%s (the only type %s offers)\n", pcap_tstamp_type_val_to_description(PCAP_TSTAMP_HOST),
                opts->iface);
    for (int i = 0; i < n; i++)
        fprintf(out, "%s\t%s\n", pcap_tstamp_type_val_to_name(types[i]), pcap_tstamp_type_val_to_description(types[i]));
    ret = 0;
cleanup:
    pcap_free_tstamp_types(types);
    pcap_close(p);
    return ret;
}

struct sink {
    pcap_dumper_t *dumper;
    uint64_t written;
};

static void on_packet(u_char *user, const struct pcap_pkthdr *h, const u_char *bytes)
{
    struct sink *s = (struct sink *)user;
    pcap_dump((u_char *)s->dumper, h, bytes);
    s->written++;
}

static pcap_t *open_handle(const struct cap_wirecap_opts *opts, struct hw_err *err)
{
    char errbuf[PCAP_ERRBUF_SIZE];
    pcap_t *p = pcap_create(opts->iface, errbuf);
    int rc;

    if (!p) {
        hw_seterr(err, "failed to open interface %s: %s", opts->iface, errbuf);
        return NULL;
    }
    if (pcap_set_snaplen(p, opts->snaplen) != 0 || pcap_set_buffer_size(p, opts->buffer_size) != 0 ||
        pcap_set_immediate_mode(p, opts->immediate) != 0) {
        hw_seterr(err, "failed to configure capture on %s", opts->iface);
        goto fail;
    }
    if (pcap_set_tstamp_precision(p, PCAP_TSTAMP_PRECISION_NANO) != 0) {
        hw_seterr(err, "failed to set nanosecond stamps on %s: not supported", opts->iface);
        goto fail;
    }
    if (opts->tstamp_type) {
        int type = pcap_tstamp_type_name_to_val(opts->tstamp_type);
        if (type < 0) {
            hw_seterr(err, "failed to set stamp type %s: unknown name (see --list-tstamp-types)",
                      opts->tstamp_type);
            goto fail;
        }
        rc = pcap_set_tstamp_type(p, type);
        if (rc != 0) {
            hw_seterr(err, "failed to set stamp type %s on %s: not supported (see --list-tstamp-types)",
                      opts->tstamp_type, opts->iface);
            goto fail;
        }
    }
    rc = pcap_activate(p);
    if (rc < 0) {
        hw_seterr(err, "failed to activate capture on %s: %s", opts->iface,
                  rc == PCAP_ERROR ? pcap_geterr(p) : pcap_statustostr(rc));
        goto fail;
    }
    if (rc > 0 && opts->log)
        fprintf(opts->log, "hw-wirecap: warning: %s: %s\n", opts->iface, pcap_statustostr(rc));
    if (opts->filter) {
        struct bpf_program prog;
        if (pcap_compile(p, &prog, opts->filter, 1, PCAP_NETMASK_UNKNOWN) != 0) {
            hw_seterr(err, "failed to compile filter '%s': %s", opts->filter, pcap_geterr(p));
            goto fail;
        }
        rc = pcap_setfilter(p, &prog);
        pcap_freecode(&prog);
        if (rc != 0) {
            hw_seterr(err, "failed to set filter '%s': %s", opts->filter, pcap_geterr(p));
            goto fail;
        }
    }
    if (pcap_setnonblock(p, 1, errbuf) != 0) {
        hw_seterr(err, "failed to set non-blocking mode on %s: %s", opts->iface, errbuf);
        goto fail;
    }
    return p;
fail:
    pcap_close(p);
    return NULL;
}

static int write_json(const struct cap_wirecap_opts *opts, const char *json_path, const struct cap_wirecap_result *res,
                      const char *error)
{
    char dir[4096], base[4096];
    struct hw_safe_file sf;
    FILE *f;

    /* through a fresh temporary file in a folder not followed if it is a symbolic link */
    snprintf(dir, sizeof(dir), "%s", json_path);
    snprintf(base, sizeof(base), "%s", json_path);
    f = hw_safe_open(&sf, dirname(dir), basename(base));
    if (!f)
        return -1;
    fprintf(f, "{\n  \"format\": \"hostwire-wirecap 1\",\n  \"tool\": \"hw-wirecap\",\n  \"pcap\": ");
    hw_json_str(f, opts->output);
    fprintf(f, ",\n  \"interface\": ");
    hw_json_str(f, opts->iface);
    fprintf(f, ",\n  \"netns\": ");
    hw_json_str(f, opts->netns);
    fprintf(f, ",\n  \"snaplen\": %d,\n  \"buffer_size\": %d,\n  \"immediate\": %s,\n  \"filter\": ", opts->snaplen,
            opts->buffer_size, opts->immediate ? "true" : "false");
    hw_json_str(f, opts->filter);
    fprintf(f, ",\n  \"tstamp_type\": ");
    hw_json_str(f, opts->tstamp_type ? opts->tstamp_type : "host");
    fprintf(f, ",\n  \"tstamp_precision\": \"nano\",\n  \"tstamp_clock\": \"CLOCK_REALTIME\",\n");
    fprintf(f, "  \"ps_recv\": %llu,\n  \"ps_drop\": %llu,\n  \"ps_ifdrop\": %llu,\n  \"packets_written\": %llu,\n",
            (unsigned long long)res->ps_recv, (unsigned long long)res->ps_drop,
            (unsigned long long)res->ps_ifdrop, (unsigned long long)res->packets_written);
    fprintf(f, "  \"clock_pairs\": [\n    {\"realtime_ns\": %lld, \"monotonic_ns\": %lld},\n"
               "    {\"realtime_ns\": %lld, \"monotonic_ns\": %lld}\n  ],\n",
            (long long)res->start.realtime_ns, (long long)res->start.monotonic_ns,
            (long long)res->end.realtime_ns, (long long)res->end.monotonic_ns);
    fprintf(f, "  \"stop_reason\": \"%s\",\n  \"error\": ", res->stop_reason);
    hw_json_str(f, error);
    fputs("\n}\n", f);
    /* A half-written file (disk full) is removed, so nothing incomplete is left looking whole. */
    int rc = hw_safe_commit(&sf);
    if (rc < 0) {
        errno = -rc;
        return -1;
    }
    return 0;
}

int cap_wirecap_run(const struct cap_wirecap_opts *opts, volatile sig_atomic_t *stop, struct cap_wirecap_result *res,
                    struct hw_err *err)
{
    char json_path[4096], dir[4096];
    struct sink sink = {0};
    struct pcap_stat st;
    pcap_t *p = NULL;
    FILE *out = NULL;
    char *iobuf = NULL;
    int64_t deadline = 0;
    int ret = -1, fd, failed = 0, ready_fd = opts->ready_fd;

    memset(res, 0, sizeof(*res));
    res->stop_reason = "signal";
    if (opts->json_path) {
        snprintf(json_path, sizeof(json_path), "%s", opts->json_path);
    } else {
        snprintf(dir, sizeof(dir), "%s", opts->output);
        snprintf(json_path, sizeof(json_path), "%s/wirecap.json", dirname(dir));
    }
    p = open_handle(opts, err);
    if (!p)
        goto cleanup;
    fd = open(opts->output, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0666);  /* a link is refused */
    out = fd < 0 ? NULL : fdopen(fd, "wb");
    if (!out) {
        if (fd >= 0)
            close(fd);
        hw_seterr(err, "failed to create %s: %s", opts->output, strerror(errno));
        goto cleanup;
    }
    iobuf = malloc(1 << 20);
    if (iobuf)
        setvbuf(out, iobuf, _IOFBF, 1 << 20);
    sink.dumper = pcap_dump_fopen(p, out);
    if (!sink.dumper) {
        hw_seterr(err, "failed to write %s: %s", opts->output, pcap_geterr(p));
        goto cleanup;
    }
    out = NULL;  /* pcap_dump_close closes it */
    /* the header goes out at once: a reader sees a valid (empty) capture from the start */
    pcap_dump_flush(sink.dumper);
    fd = pcap_get_selectable_fd(p);
    cap_wirecap_clock_pair(&res->start);
    if (opts->duration_ns > 0)
        deadline = res->start.monotonic_ns + opts->duration_ns;
    if (opts->log) {
        fprintf(opts->log, "hw-wirecap: capturing on %s%s%s, snaplen %d, stamps %s/nano\n", opts->iface,
                opts->netns ? " in " : "", opts->netns ? opts->netns : "", opts->snaplen,
                opts->tstamp_type ? opts->tstamp_type : "host");
        if (opts->verbose)
            fprintf(opts->log, "hw-wirecap: buffer %d KiB, %s, filter %s, pcap %s, metadata %s%s\n",
                    opts->buffer_size / 1024, opts->immediate ? "immediate mode" : "batched delivery",
                    opts->filter ? opts->filter : "none", opts->output, json_path,
                    opts->duration_ns > 0 ? ", stop by duration" : "");
        fflush(opts->log);
    }
    hw_ready_notify(&ready_fd);
    /* 0 for the pseudo-device "any", which cannot disappear */
    unsigned watched_ifindex = if_nametoindex(opts->iface);
    while (!*stop) {
        int timeout = POLL_MS;
        if (deadline) {
            int64_t left = deadline - hw_mono_ns();
            if (left <= 0) {
                res->stop_reason = "duration";
                break;
            }
            if (left / 1000000 < timeout)
                timeout = (int)(left / 1000000) + 1;
        }
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int rc = poll(&pfd, 1, timeout);
        if (rc < 0) {
            if (errno == EINTR)
                continue;
            hw_seterr(err, "failed to poll %s: %s", opts->iface, strerror(errno));
            goto cleanup;
        }
        if (rc == 0) {
            /* libpcap reports a deleted interface only when its read sees the socket error, and
               the kernel raises that error once, at the interface's "down", when the interface
               still exists: libpcap then waits for it to come back up, forever. */
            if (watched_ifindex && if_nametoindex(opts->iface) != watched_ifindex) {
                hw_seterr(err, "failed to read packets from %s: the interface disappeared", opts->iface);
                res->stop_reason = "error";
                failed = 1;
                break;
            }
            continue;
        }
        if (pcap_dispatch(p, -1, on_packet, (u_char *)&sink) < 0) {
            /* the interface went away (its namespace deleted?): keep what was captured */
            hw_seterr(err, "failed to read packets from %s: %s", opts->iface, pcap_geterr(p));
            res->stop_reason = "error";
            failed = 1;
            break;
        }
    }
    /* what the kernel holds already belongs to the capture */
    while (!failed && pcap_dispatch(p, -1, on_packet, (u_char *)&sink) > 0)
        ;
    if (pcap_stats(p, &st) == 0) {
        res->ps_recv = st.ps_recv;
        res->ps_drop = st.ps_drop;
        res->ps_ifdrop = st.ps_ifdrop;
    }
    cap_wirecap_clock_pair(&res->end);
    res->packets_written = sink.written;
    if (pcap_dump_flush(sink.dumper) != 0) {
        hw_seterr(err, "failed to write %s: %s", opts->output, strerror(errno));
        goto cleanup;
    }
    pcap_dump_close(sink.dumper);
    sink.dumper = NULL;
    if (write_json(opts, json_path, res, failed ? err->msg : NULL) < 0) {
        hw_seterr(err, "failed to write %s: %s", json_path, strerror(errno));
        goto cleanup;
    }
    if (opts->log && opts->verbose)
        fprintf(opts->log, "hw-wirecap: stopped (%s) after %.3f s; clock pairs: realtime - monotonic %lld ns at start, "
                "%lld ns at end\n", res->stop_reason, (double)(res->end.monotonic_ns - res->start.monotonic_ns) / 1e9,
                (long long)(res->start.realtime_ns - res->start.monotonic_ns),
                (long long)(res->end.realtime_ns - res->end.monotonic_ns));
    ret = failed ? -1 : 0;
cleanup:
    if (ready_fd >= 0)
        close(ready_fd);  /* never ready: the starter reads the end of the pipe */
    if (sink.dumper)
        pcap_dump_close(sink.dumper);
    if (out)
        fclose(out);
    free(iobuf);
    if (p)
        pcap_close(p);
    return ret;
}
