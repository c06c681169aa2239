/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ports/win32/listen.c - TCP listening sockets.
 *
 * SO_EXCLUSIVEADDRUSE instead of SO_REUSEADDR: on Windows SO_REUSEADDR
 * lets another socket bind the same port while ours listens (and take
 * connections from it), which is not what the POSIX option means.  A
 * socket in TIME_WAIT does not block a new listener on Windows anyway.
 * No option spreads connections over several listeners of one port, so
 * balanced listening is TAXI_ENOTSUP and taxi uses a shared acceptor.
 */
#include "config.h"

#include "win32_impl.h"

#include <stdio.h>
#include <string.h>

bool taxi__reuseport_balances(void) { return false; }

static unsigned port_of(const struct sockaddr_storage *ss) {
  if (ss->ss_family == AF_INET)
    return ntohs(((const struct sockaddr_in *)ss)->sin_port);
  if (ss->ss_family == AF_INET6)
    return ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
  return 0;
}

static int listen_on(const struct addrinfo *ai, taxi_handle_t *out,
                     unsigned *bound_port) {
  SOCKET s = WSASocketW(ai->ai_family, ai->ai_socktype, ai->ai_protocol, NULL,
                        0, WSA_FLAG_OVERLAPPED | WSA_FLAG_NO_HANDLE_INHERIT);
  struct sockaddr_storage ss;
  int len = sizeof ss, rc = 0;
  BOOL one = TRUE;

  if (s == INVALID_SOCKET) return taxi__last_error();
  if (ai->ai_family == AF_INET6) {
    /* Windows makes IPv6 sockets v6-only by default, Linux does not: a
     * listener on "::" (host NULL) takes IPv4 clients too, as on Linux. */
    DWORD off = 0;
    (void)setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, (char *)&off, sizeof off);
  }
  if (setsockopt(s, SOL_SOCKET, SO_EXCLUSIVEADDRUSE, (char *)&one,
                 sizeof one) != 0 ||
      bind(s, ai->ai_addr, (int)ai->ai_addrlen) != 0 ||
      listen(s, SOMAXCONN) != 0 ||
      getsockname(s, (struct sockaddr *)&ss, &len) != 0)
    rc = taxi__last_error();
  if (rc == 0) rc = taxi__set_nonblocking((taxi_handle_t)s);
  if (rc < 0) {
    closesocket(s);
    return rc;
  }
  *out = (taxi_handle_t)s;
  if (bound_port) *bound_port = port_of(&ss);
  return 0;
}

int taxi__tcp_listen(const char *host, unsigned port, bool balanced,
                     taxi_handle_t *out, unsigned *bound_port) {
  char service[8];
  struct addrinfo hints, *list = NULL;
  int rc;

  if (port > 65535) return TAXI_EINVAL;
  if (balanced) return TAXI_ENOTSUP;
  rc = taxi__winsock_init();
  if (rc < 0) return rc;
  snprintf(service, sizeof service, "%u", port);
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_protocol = IPPROTO_TCP;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  rc = getaddrinfo(host, service, &hints, &list);
  if (rc != 0) {
    taxi__set_os_error(rc);
    return rc == EAI_MEMORY ? TAXI_ENOMEM : TAXI_EINVAL;
  }
  rc = TAXI_EINVAL;
  for (struct addrinfo *ai = list; ai; ai = ai->ai_next) {
    rc = listen_on(ai, out, bound_port);
    if (rc == 0) break;
  }
  freeaddrinfo(list);
  return rc;
}
