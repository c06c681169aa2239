/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ports/multicast.c - a datagram socket's broadcast permission and its
 * multicast memberships (see the datagram part of ports/sock.h).  One file
 * for every system: the options (SO_BROADCAST, IP_ADD_MEMBERSHIP,
 * IPV6_JOIN_GROUP and their structures) are the same in POSIX and Winsock;
 * Winsock only wants the option's value as a char pointer, which POSIX
 * takes too.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* struct ip_mreq under -std=c11 */
#endif
#include "config.h"

#if defined(_WIN32)
#include "win32/win32_impl.h"

#include <ws2tcpip.h>
#define OS_SOCKET(h) ((SOCKET)(h))
#else
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/types.h>
#define OS_SOCKET(h) (h)
#endif

#include "sock.h"

#include <string.h>

int taxi__sock_broadcast(taxi_handle_t s, bool on) {
  int v = on ? 1 : 0;
  return setsockopt(OS_SOCKET(s), SOL_SOCKET, SO_BROADCAST, (const char *)&v,
                    sizeof v) == 0
             ? 0
             : taxi__last_error();
}

int taxi__sock_multicast(taxi_handle_t s, const taxi_addr_t *group,
                         const taxi_addr_t *iface, bool join) {
  int family = taxi__sockaddr_family(group);
  if (iface && taxi__sockaddr_family(iface) != family) return TAXI_EBADADDR;
  if (family == AF_INET) {
    struct sockaddr_in g;
    memcpy(&g, group->sa.bytes, sizeof g);
    /* 224.0.0.0/4 (RFC 5771). */
    if ((ntohl(g.sin_addr.s_addr) & 0xf0000000u) != 0xe0000000u)
      return TAXI_EBADADDR;
    struct ip_mreq mr;
    memset(&mr, 0, sizeof mr);
    mr.imr_multiaddr = g.sin_addr;
    mr.imr_interface.s_addr = htonl(INADDR_ANY);
    if (iface) {
      struct sockaddr_in i;
      memcpy(&i, iface->sa.bytes, sizeof i);
      mr.imr_interface = i.sin_addr;
    }
    return setsockopt(OS_SOCKET(s), IPPROTO_IP,
                      join ? IP_ADD_MEMBERSHIP : IP_DROP_MEMBERSHIP,
                      (const char *)&mr, sizeof mr) == 0
               ? 0
               : taxi__last_error();
  }
  if (family == AF_INET6) {
    struct sockaddr_in6 g;
    memcpy(&g, group->sa.bytes, sizeof g);
    if (g.sin6_addr.s6_addr[0] != 0xff) return TAXI_EBADADDR; /* ff00::/8 */
    struct ipv6_mreq mr;
    memset(&mr, 0, sizeof mr);
    mr.ipv6mr_multiaddr = g.sin6_addr;
    /* The interface of an IPv6 membership is an index: the scope of the
     * group's address names it, else the system chooses. */
    mr.ipv6mr_interface = g.sin6_scope_id;
#ifdef IPV6_ADD_MEMBERSHIP
    int opt = join ? IPV6_ADD_MEMBERSHIP : IPV6_DROP_MEMBERSHIP;
#else
    int opt = join ? IPV6_JOIN_GROUP : IPV6_LEAVE_GROUP;
#endif
    return setsockopt(OS_SOCKET(s), IPPROTO_IPV6, opt, (const char *)&mr,
                      sizeof mr) == 0
               ? 0
               : taxi__last_error();
  }
  return TAXI_EBADADDR;
}
