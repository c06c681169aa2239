/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ports/win32/resolve.c - host names into addresses with Winsock's
 * getaddrinfo (ws2tcpip.h; see taxi__sock_resolve in ports/sock.h), and
 * the port of an address.
 */
#include "config.h"

#include "win32_impl.h"

#include "ports/sock.h"

#include <stdio.h>
#include <string.h>

void taxi__sockaddr_set_port(taxi_addr_t *a, unsigned port) {
  if (a->family == TAXI_ADDR_IPV4)
    ((struct sockaddr_in *)(void *)a->sa.bytes)->sin_port =
        htons((u_short)port);
  else if (a->family == TAXI_ADDR_IPV6)
    ((struct sockaddr_in6 *)(void *)a->sa.bytes)->sin6_port =
        htons((u_short)port);
}

/* getaddrinfo's codes (WSA errors under EAI_* names) as TAXI_E* ones. */
static int from_eai(int eai) {
  switch (eai) {
    case EAI_NONAME:
      return TAXI_ENONAME;
    case EAI_AGAIN:
      return TAXI_ETRYAGAIN;
#if defined(WSANO_DATA) && WSANO_DATA != EAI_NONAME
    case WSANO_DATA: /* the name exists, with no address */
      return TAXI_ENOADDR;
#endif
    case EAI_MEMORY:
      return TAXI_ENOMEM;
    case EAI_FAMILY:
      return TAXI_ENOTSUP;
    default:
      return taxi__error_from_os(eai);
  }
}

int taxi__sock_resolve(const char *host, unsigned port, int family,
                       taxi_addr_t *out, size_t max) {
  struct addrinfo hints, *res = NULL;
  char service[8];
  memset(&hints, 0, sizeof hints);
  hints.ai_family = family == TAXI_ADDR_IPV4   ? AF_INET
                    : family == TAXI_ADDR_IPV6 ? AF_INET6
                                               : AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  (void)snprintf(service, sizeof service, "%u", port);
  int eai = getaddrinfo(host, service, &hints, &res);
  if (eai != 0) return from_eai(eai);
  size_t n = 0;
  for (const struct addrinfo *ai = res; ai && n < max; ai = ai->ai_next) {
    if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6) continue;
    taxi__sockaddr_set(&out[n], ai->ai_addr, (unsigned)ai->ai_addrlen);
    n++;
  }
  freeaddrinfo(res);
  return n > 0 ? (int)n : TAXI_ENOADDR;
}
