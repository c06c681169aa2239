/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ports/win32/dgram.c - datagram sockets over Winsock (see the datagram
 * part of ports/sock.h): one recvfrom or sendto per datagram, multicast
 * membership and broadcast.
 */
#include "config.h"

#include "win32_impl.h"

#include <mstcpip.h>
#include <ws2tcpip.h>

#include "ports/sock.h"

#include <string.h>

static int set_int(SOCKET s, int level, int name, int value) {
  return setsockopt(s, level, name, (const char *)&value, sizeof value) == 0
             ? 0
             : taxi__last_error();
}

int taxi__sock_dgram(const taxi_addr_t *local, unsigned flags,
                     taxi_handle_t *out) {
  int family = taxi__sockaddr_family(local);
  if (family != AF_INET && family != AF_INET6) return TAXI_EBADADDR;
  int rc = taxi__winsock_init();
  if (rc < 0) return rc;
  SOCKET s = WSASocketW(family, SOCK_DGRAM, IPPROTO_UDP, NULL, 0,
                        WSA_FLAG_OVERLAPPED | WSA_FLAG_NO_HANDLE_INHERIT);
  if (s == INVALID_SOCKET) return taxi__last_error();
  rc = taxi__set_nonblocking((taxi_handle_t)s);
  if (rc == 0 && family == AF_INET6)
    rc = set_int(s, IPPROTO_IPV6, IPV6_V6ONLY,
                 (flags & TAXI__DG_V6ONLY) ? 1 : 0);
  if (rc == 0 && (flags & TAXI__DG_REUSEADDR))
    rc = set_int(s, SOL_SOCKET, SO_REUSEADDR, 1);
  if (rc == 0 &&
      bind(s, (const struct sockaddr *)local->sa.bytes, (int)local->len) != 0)
    rc = taxi__last_error();
  if (rc < 0) {
    closesocket(s);
    return rc;
  }
  *out = (taxi_handle_t)s;
  return 0;
}

int taxi__sock_recv_batch(taxi_handle_t h, taxi__dgram_msg_t *m, unsigned n) {
  SOCKET s = (SOCKET)h;
  unsigned got = 0;
  while (got < n) {
    int alen = (int)sizeof m[got].addr.sa.bytes;
    int cap = m[got].cap > INT_MAX ? INT_MAX : (int)m[got].cap;
    int r = recvfrom(s, (char *)m[got].buf, cap, 0,
                     (struct sockaddr *)m[got].addr.sa.bytes, &alen);
    bool truncated = false;
    if (r == SOCKET_ERROR) {
      int e = WSAGetLastError();
      /* Windows says truncation with an error; the buffer is full. */
      if (e == WSAEMSGSIZE) {
        truncated = true;
        r = cap;
      } else {
        if (got > 0) return (int)got; /* the error again at the next call */
        /* A datagram socket's WSAECONNRESET is an ICMP port unreachable:
         * what POSIX systems call ECONNREFUSED. */
        if (e == WSAECONNRESET) {
          taxi__set_os_error(e);
          return TAXI_ECONNREFUSED;
        }
        return taxi__error_from_os(e);
      }
    }
    taxi_addr_t from = m[got].addr; /* the set clears its output first */
    taxi__sockaddr_set(&m[got].addr, from.sa.bytes, (unsigned)alen);
    m[got].truncated = truncated;
    m[got].len = (size_t)r;
    got++;
  }
  return (int)got;
}

int taxi__sock_send_batch(taxi_handle_t h, const taxi__dgram_msg_t *m,
                          unsigned n) {
  SOCKET s = (SOCKET)h;
  unsigned sent = 0;
  while (sent < n) {
    const taxi__dgram_msg_t *d = &m[sent];
    int r = sendto(
        s, (const char *)d->buf, (int)d->len, 0,
        d->addr.family ? (const struct sockaddr *)d->addr.sa.bytes : NULL,
        d->addr.family ? (int)d->addr.len : 0);
    if (r == SOCKET_ERROR) return sent > 0 ? (int)sent : taxi__last_error();
    sent++;
  }
  return (int)sent;
}

int taxi__sock_broadcast(taxi_handle_t h, bool on) {
  return set_int((SOCKET)h, SOL_SOCKET, SO_BROADCAST, on ? 1 : 0);
}

int taxi__sock_multicast(taxi_handle_t h, const taxi_addr_t *group,
                         const taxi_addr_t *iface, bool join) {
  SOCKET s = (SOCKET)h;
  int family = taxi__sockaddr_family(group);
  if (iface && taxi__sockaddr_family(iface) != family) return TAXI_EBADADDR;
  if (family == AF_INET) {
    struct sockaddr_in g;
    memcpy(&g, group->sa.bytes, sizeof g);
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
    return setsockopt(s, IPPROTO_IP,
                      join ? IP_ADD_MEMBERSHIP : IP_DROP_MEMBERSHIP,
                      (const char *)&mr, sizeof mr) == 0
               ? 0
               : taxi__last_error();
  }
  if (family == AF_INET6) {
    struct sockaddr_in6 g;
    memcpy(&g, group->sa.bytes, sizeof g);
    if (g.sin6_addr.s6_addr[0] != 0xff) return TAXI_EBADADDR;
    struct ipv6_mreq mr;
    memset(&mr, 0, sizeof mr);
    mr.ipv6mr_multiaddr = g.sin6_addr;
    mr.ipv6mr_interface = g.sin6_scope_id;
    return setsockopt(s, IPPROTO_IPV6,
                      join ? IPV6_ADD_MEMBERSHIP : IPV6_DROP_MEMBERSHIP,
                      (const char *)&mr, sizeof mr) == 0
               ? 0
               : taxi__last_error();
  }
  return TAXI_EBADADDR;
}
