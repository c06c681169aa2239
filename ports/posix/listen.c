/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ports/posix/listen.c - TCP listening sockets, and whether the kernel
 * spreads connections over several sockets bound to one port.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* getaddrinfo(), SOCK_NONBLOCK, SOCK_CLOEXEC */
#endif
#include "config.h"

#include "port.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/*
 * Which option makes several sockets share a port with the kernel
 * balancing new connections among them:
 *  - FreeBSD 12 and later: SO_REUSEPORT_LB (plain SO_REUSEPORT there only
 *    lets them bind; connections then go to one of them);
 *  - Linux 3.9 and later: SO_REUSEPORT, which hashes connections over the
 *    sockets of the group;
 *  - elsewhere (macOS, OpenBSD, NetBSD): none balances, so taxi uses a
 *    shared acceptor instead.
 */
#if defined(SO_REUSEPORT_LB)
#define BALANCING_OPTION SO_REUSEPORT_LB
#elif defined(__linux__) && defined(SO_REUSEPORT)
#define BALANCING_OPTION SO_REUSEPORT
#endif

bool taxi__reuseport_balances(void) {
#ifdef BALANCING_OPTION
  return true;
#else
  return false;
#endif
}

static int set_int_option(int fd, int level, int name) {
  int one = 1;
  return setsockopt(fd, level, name, &one, sizeof one) == 0
             ? 0
             : taxi__last_error();
}

static unsigned port_of(const struct sockaddr_storage *ss) {
  if (ss->ss_family == AF_INET)
    return ntohs(((const struct sockaddr_in *)ss)->sin_port);
  if (ss->ss_family == AF_INET6)
    return ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
  return 0;
}

/* One listening socket for one resolved address. */
static int listen_on(const struct addrinfo *ai, bool balanced,
                     taxi_handle_t *out, unsigned *bound_port) {
  int fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
  if (fd < 0) return taxi__last_error();
  int rc = taxi__set_cloexec(fd);
  if (rc == 0) rc = taxi__set_nonblocking(fd);
  if (rc == 0) rc = set_int_option(fd, SOL_SOCKET, SO_REUSEADDR);
#ifdef BALANCING_OPTION
  if (rc == 0 && balanced)
    rc = set_int_option(fd, SOL_SOCKET, BALANCING_OPTION);
#else
  if (balanced) rc = TAXI_ENOTSUP;
#endif
  if (rc == 0 && bind(fd, ai->ai_addr, ai->ai_addrlen) != 0)
    rc = taxi__last_error();
  if (rc == 0 && listen(fd, SOMAXCONN) != 0) rc = taxi__last_error();
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  if (rc == 0 && getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
    rc = taxi__last_error();
  if (rc < 0) {
    taxi__close(fd);
    return rc;
  }
  *out = fd;
  if (bound_port) *bound_port = port_of(&ss);
  return 0;
}

int taxi__tcp_listen(const char *host, unsigned port, bool balanced,
                     taxi_handle_t *out, unsigned *bound_port) {
  if (port > 65535) return TAXI_EINVAL;
  char service[8];
  snprintf(service, sizeof service, "%u", port);
  struct addrinfo hints, *list = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  int gai = getaddrinfo(host, service, &hints, &list);
  if (gai != 0) {
    taxi__set_os_error(gai == EAI_SYSTEM ? errno : EINVAL);
    return gai == EAI_MEMORY ? TAXI_ENOMEM : TAXI_EINVAL;
  }
  int rc = TAXI_EINVAL;
  for (struct addrinfo *ai = list; ai; ai = ai->ai_next) {
    rc = listen_on(ai, balanced, out, bound_port);
    if (rc == 0) break;
  }
  freeaddrinfo(list);
  return rc;
}

unsigned taxi__cpu_count(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (unsigned)n : 1u;
}
