/* hw-iotrace's records as syscalls.tsv lines and its header, through common/'s one writer. */
#include "hwsyscalls.h"
#include "iotrace.h"

const char *const iot_fd_kind_names[] = {
    [IOT_FD_UNKNOWN] = "unknown", [IOT_FD_TCP] = "tcp", [IOT_FD_UDP] = "udp", [IOT_FD_UNIX] = "unix",
    [IOT_FD_FILE] = "file", [IOT_FD_PIPE] = "pipe", [IOT_FD_OTHER] = "other",
};

int iot_tsv_header(char *buf, size_t len, const char *backend, uint32_t mask, const char *extra)
{
    char calls[512];
    return hw_sys_header(buf, len, backend, "hw-iotrace " IOT_VERSION, iot_calls_format(mask, calls, sizeof(calls)),
                         extra);
}

size_t iot_rec_format(char *buf, const struct iot_rec *r, int kind, const char *desc)
{
    struct hw_sys_line l = {
        .t_enter_ns = r->t_enter_ns, .t_exit_ns = r->t_exit_ns, .pid = r->pid, .tid = r->tid,
        .call = r->call < IOT_NCALLS ? iot_calls[r->call].name : "?", .fd = r->fd, .req_bytes = r->req_bytes,
        .result = r->result, .has_result = !r->unfinished, .unfinished = r->unfinished,
        .fd_kind = iot_fd_kind_names[kind >= 0 && kind <= IOT_FD_OTHER ? kind : IOT_FD_UNKNOWN], .fd_desc = desc,
    };
    return hw_sys_format(buf, &l);
}
