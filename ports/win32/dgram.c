/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ports/win32/dgram.c - datagram sockets over Winsock (see the datagram
 * part of ports/sock.h): one recvfrom or sendto per datagram (multicast and
 * broadcast: ports/multicast.c).
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
    m[got].seg = 0;
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

/* Winsock's UDP_SEND_MSG_SIZE and UDP_RECV_MAX_COALESCED_SIZE are not used
 * yet: segments and coalesced receives are Linux's here. */
int taxi__sock_udp_gro(taxi_handle_t h, bool on) {
  (void)h;
  (void)on;
  return TAXI_ENOTSUP;
}

int taxi__sock_udp_gso(taxi_handle_t h) {
  (void)h;
  return TAXI_ENOTSUP;
}

int taxi__sock_send_segments(taxi_handle_t h, const void *buf, size_t len,
                             size_t seg, const taxi_addr_t *to) {
  (void)h;
  (void)buf;
  (void)len;
  (void)seg;
  (void)to;
  return TAXI_ENOTSUP;
}
