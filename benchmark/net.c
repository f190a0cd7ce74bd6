#include "net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include "hwio.h"
#include "wire.h"

int hb_connect(const char *addr, uint16_t port, int type)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(port)};
    if (inet_pton(AF_INET, addr, &sin.sin_addr) != 1)
        return -EINVAL;
    int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    return fd;
}

int hb_connect_hello(const char *addr, uint16_t port, uint16_t kind, uint16_t index)
{
    int fd = hb_connect(addr, port, SOCK_STREAM);
    if (fd < 0)
        return fd;
    uint8_t hello[HB_HELLO_LEN];
    struct hb_hello_msg msg = {HB_MAGIC_HELLO, kind, index, (uint32_t)getpid()};
    hb_pack_hello(hello, &msg);
    int err = hw_write_all(fd, hello, sizeof(hello));
    if (err) {
        close(fd);
        return err;
    }
    return fd;
}

void hb_socket_name(int fd, int peer, char *out, size_t len)
{
    struct sockaddr_in sin;
    socklen_t sin_len = sizeof(sin);
    char ip[INET_ADDRSTRLEN] = "?";
    int rc = peer ? getpeername(fd, (struct sockaddr *)&sin, &sin_len)
                  : getsockname(fd, (struct sockaddr *)&sin, &sin_len);
    if (rc < 0 || !inet_ntop(AF_INET, &sin.sin_addr, ip, sizeof(ip))) {
        snprintf(out, len, "?");
        return;
    }
    snprintf(out, len, "%s:%u", ip, ntohs(sin.sin_port));
}
