/* Socket set-up shared by main, the senders and the receiver (IPv4, as the topology). */
#ifndef HB_NET_H
#define HB_NET_H
#include <stddef.h>
#include <stdint.h>

/* A connected socket of `type` (SOCK_STREAM or SOCK_DGRAM) to addr:port, or -errno. */
int hb_connect(const char *addr, uint16_t port, int type);
/* A TCP connection to the receiver that has sent its hello (kind, index, our pid), or -errno. */
int hb_connect_hello(const char *addr, uint16_t port, uint16_t kind, uint16_t index);
/* "ip:port" of the socket's local (peer = 0) or remote (peer = 1) end. */
void hb_socket_name(int fd, int peer, char *out, size_t len);
#endif
