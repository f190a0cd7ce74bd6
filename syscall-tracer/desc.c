/* What an fd is: kind (tcp, udp, unix, file, pipe, other) and a description (4-tuple, path,
 * pipe:[inode]); an interning table so that records carry a small id. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "iotrace.h"

uint32_t iot_desc_intern(struct iot_desc_tab *t, int kind, const char *desc)
{
    for (uint32_t i = t->n; i >= 1; i--)  /* newest first: the fd just described is near the end */
        if (t->kind[i] == kind && !strcmp(t->desc[i], desc))
            return i;
    if (t->n + 1 >= t->cap) {
        uint32_t cap = t->cap ? t->cap * 2 : 64;
        char **d = realloc(t->desc, cap * sizeof(*d));
        if (!d)
            return 0;
        t->desc = d;
        uint8_t *k = realloc(t->kind, cap);
        if (!k)
            return 0;
        t->kind = k;
        if (!t->cap) {
            t->desc[0] = NULL;
            t->kind[0] = IOT_FD_UNKNOWN;
        }
        t->cap = cap;
    }
    char *copy = strdup(desc);
    if (!copy)
        return 0;
    t->n++;
    t->desc[t->n] = copy;
    t->kind[t->n] = (uint8_t)kind;
    return t->n;
}

void iot_desc_free(struct iot_desc_tab *t)
{
    for (uint32_t i = 1; i <= t->n; i++)
        free(t->desc[i]);
    free(t->desc);
    free(t->kind);
    memset(t, 0, sizeof(*t));
}

void iot_sockaddr_format(const void *sa, socklen_t salen, char *buf, size_t len)
{
    const struct sockaddr *s = sa;
    char addr[INET6_ADDRSTRLEN];
    buf[0] = '\0';
    if (salen >= sizeof(struct sockaddr_in) && s->sa_family == AF_INET) {
        const struct sockaddr_in *in = sa;
        inet_ntop(AF_INET, &in->sin_addr, addr, sizeof(addr));
        snprintf(buf, len, "%s:%u", addr, ntohs(in->sin_port));
    } else if (salen >= sizeof(struct sockaddr_in6) && s->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = sa;
        inet_ntop(AF_INET6, &in6->sin6_addr, addr, sizeof(addr));
        snprintf(buf, len, "[%s]:%u", addr, ntohs(in6->sin6_port));
    } else if (s->sa_family == AF_UNIX && salen > offsetof(struct sockaddr_un, sun_path)) {
        const struct sockaddr_un *un = sa;
        size_t n = salen - offsetof(struct sockaddr_un, sun_path);
        if (un->sun_path[0] == '\0' && n > 1)  /* abstract name */
            snprintf(buf, len, "@%.*s", (int)(n - 1), un->sun_path + 1);
        else
            snprintf(buf, len, "%.*s", (int)strnlen(un->sun_path, n), un->sun_path);
    }
}

static int inet_port(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET)
        return ntohs(((const struct sockaddr_in *)ss)->sin_port);
    if (ss->ss_family == AF_INET6)
        return ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
    return -1;
}

static int describe_socket(int fd, const char *linkname, char *desc, size_t len, int *complete)
{
    int domain = 0, type = 0;
    socklen_t ol = sizeof(int);
    if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &ol) < 0)
        domain = -1;
    ol = sizeof(int);
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &ol) < 0)
        type = -1;
    struct sockaddr_storage local, peer;
    socklen_t ll = sizeof(local), pl = sizeof(peer);
    memset(&local, 0, sizeof(local));
    memset(&peer, 0, sizeof(peer));
    int have_local = getsockname(fd, (struct sockaddr *)&local, &ll) == 0;
    int have_peer = getpeername(fd, (struct sockaddr *)&peer, &pl) == 0;
    char l[160] = "", r[160] = "*";
    if (have_local)
        iot_sockaddr_format(&local, ll, l, sizeof(l));
    if (have_peer)
        iot_sockaddr_format(&peer, pl, r, sizeof(r));
    if (domain == AF_INET || domain == AF_INET6) {
        int kind = type == SOCK_STREAM ? IOT_FD_TCP : type == SOCK_DGRAM ? IOT_FD_UDP : IOT_FD_OTHER;
        snprintf(desc, len, "%s>%s", l, r);
        if (!have_local || inet_port(&local) <= 0)
            *complete = 0;
        return kind;
    }
    if (domain == AF_UNIX) {
        /* a named end, else the inode ("socket:[1234]") */
        if (l[0])
            snprintf(desc, len, "%s", l);
        else if (have_peer && r[0] && strcmp(r, "*"))
            snprintf(desc, len, "%s", r);
        else
            snprintf(desc, len, "%s", linkname);
        return IOT_FD_UNIX;
    }
    snprintf(desc, len, "%s", linkname);
    return IOT_FD_OTHER;
}

int iot_fd_describe(int local_fd, const char *link, char *desc, size_t len, int *complete)
{
    char name[IOT_DESC_MAX];
    struct stat sb;
    *complete = 1;
    desc[0] = '\0';
    ssize_t n = readlink(link, name, sizeof(name) - 1);
    name[n > 0 ? n : 0] = '\0';
    if (local_fd < 0 || fstat(local_fd, &sb) < 0) {
        snprintf(desc, len, "%s", name);
        return IOT_FD_UNKNOWN;
    }
    if (S_ISSOCK(sb.st_mode))
        return describe_socket(local_fd, name, desc, len, complete);
    snprintf(desc, len, "%s", name);
    if (S_ISFIFO(sb.st_mode))
        return IOT_FD_PIPE;
    if (S_ISREG(sb.st_mode) || S_ISCHR(sb.st_mode) || S_ISBLK(sb.st_mode) || S_ISDIR(sb.st_mode))
        return IOT_FD_FILE;
    return IOT_FD_OTHER;
}
