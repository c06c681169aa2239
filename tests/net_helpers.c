/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/net_helpers.c - see net_helpers.h.
 */
#include "net_helpers.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#ifndef MSG_NOSIGNAL
#define MSG_NOSIGNAL 0
#endif

int net_send_all(int fd, const void *buf, size_t n) {
  const char *p = buf;
  while (n) {
    ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return -1;
    p += k;
    n -= (size_t)k;
  }
  return 0;
}

int net_recv_all(int fd, void *buf, size_t n) {
  char *p = buf;
  while (n) {
    ssize_t k = recv(fd, p, n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return -1;
    p += k;
    n -= (size_t)k;
  }
  return 0;
}

/* The options are hints: a socket without them still connects, and what
 * a test measures with them it checks itself. */
int net_connect_loopback(int port, int rcvbuf, int timeout_s, int nodelay) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (rcvbuf)
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  struct timeval tv = {timeout_s, 0};
  (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    /* Interrupted, the handshake goes on: wait for its end. */
    int err = errno;
    struct pollfd p = {fd, POLLOUT, 0};
    socklen_t len = sizeof err;
    if (err != EINTR || poll(&p, 1, timeout_s * 1000) != 1 ||
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
      close(fd);
      errno = err;
      return -1;
    }
  }
  if (nodelay) {
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  return fd;
}

int net_refusing_port(int family, int *port) {
  struct sockaddr_storage ss;
  socklen_t len = family == AF_INET ? sizeof(struct sockaddr_in)
                                    : sizeof(struct sockaddr_in6);
  memset(&ss, 0, sizeof ss);
  ss.ss_family = family; /* sa_family_t, or Windows' ADDRESS_FAMILY */
  if (family == AF_INET)
    ((struct sockaddr_in *)&ss)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  else
    ((struct sockaddr_in6 *)&ss)->sin6_addr = in6addr_loopback;
  int fd = socket(family, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  /* No SO_REUSEADDR: nothing else may bind the port while fd holds it. */
  if (bind(fd, (struct sockaddr *)&ss, len) != 0 ||
      getsockname(fd, (struct sockaddr *)&ss, &len) != 0) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  *port = ntohs(family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
                                  : ((struct sockaddr_in6 *)&ss)->sin6_port);
  return fd;
}

/* Whether 127.0.0.1:port can be bound for UDP now. */
static int udp_port_free(unsigned port, unsigned *bound) {
  struct sockaddr_in a;
  socklen_t len = sizeof a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons((unsigned short)port);
  int fd = (int)socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0) return 0;
  int ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
           getsockname(fd, (struct sockaddr *)&a, &len) == 0;
  if (ok) *bound = ntohs(a.sin_port);
  close(fd);
  return ok;
}

unsigned net_quiet_udp_port(void) {
  static unsigned calls;
  unsigned lo = 32768, bound = 0;
  FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
  if (f) {
    unsigned a, b;
    if (fscanf(f, "%u %u", &a, &b) == 2 && a > 2048) lo = a;
    fclose(f);
  }
  unsigned span = lo - 1024;
  unsigned at = ((unsigned)getpid() * 7919u + calls++ * 104729u) % span;
  for (unsigned i = 0; i < 64; i++) {
    unsigned port = 1024 + (at + i * 997u) % span;
    if (udp_port_free(port, &bound)) return port;
  }
  /* None free below the range (unlikely): one of the range's. */
  return udp_port_free(0, &bound) && bound ? bound : 9;
}
