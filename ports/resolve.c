/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ports/resolve.c - host names into addresses with getaddrinfo (see
 * taxi__sock_resolve in ports/sock.h).  One file for every system: POSIX's
 * getaddrinfo(3) and Winsock's (ws2tcpip.h) take the same call; only some
 * of their error codes differ.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* EAI_NODATA, EAI_ADDRFAMILY in glibc */
#endif
#include "config.h"

#if defined(_WIN32)
#include "win32/win32_impl.h"
#else
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/types.h>
#endif

#include "sock.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* getaddrinfo's EAI_* codes as TAXI_E* ones (on Windows, WSA errors under
 * EAI_* names). */
static int from_eai(int eai) {
  switch (eai) {
    case EAI_NONAME:
      return TAXI_ENONAME;
    case EAI_AGAIN:
      return TAXI_ETRYAGAIN;
#if defined(_WIN32)
#if defined(WSANO_DATA) && WSANO_DATA != EAI_NONAME
    case WSANO_DATA: /* the name exists, with no address */
      return TAXI_ENOADDR;
#endif
#else
#ifdef EAI_NODATA
    case EAI_NODATA: /* the name exists, with no address */
      return TAXI_ENOADDR;
#endif
#if defined(EAI_ADDRFAMILY) && \
    (!defined(EAI_NODATA) || EAI_ADDRFAMILY != EAI_NODATA)
    case EAI_ADDRFAMILY:
      return TAXI_ENOADDR;
#endif
    case EAI_SYSTEM:
      return errno ? taxi__error_from_os(errno) : TAXI_ESYS;
#endif
    case EAI_MEMORY:
      return TAXI_ENOMEM;
    case EAI_FAMILY:
      return TAXI_ENOTSUP;
    default:
#if defined(_WIN32)
      return taxi__error_from_os(eai); /* WSA errors under EAI_* names */
#else
      return TAXI_ESYS;
#endif
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
  /* No AI_ADDRCONFIG: with only loopback interfaces up (a machine off
   * the network, a container) it hides "localhost"'s addresses too. */
  hints.ai_flags = AI_NUMERICSERV;
  (void)snprintf(service, sizeof service, "%u", port);
  errno = 0;
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
