/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ports/posix/dgram.c - datagram sockets on POSIX systems (see the
 * datagram part of ports/sock.h): batches of receives and sends with
 * recvmmsg and sendmmsg on Linux, one recvfrom or sendto per datagram
 * elsewhere; segments sent in one call (UDP_SEGMENT) and receives the
 * kernel coalesced (UDP_GRO) where Linux has them.  Multicast and
 * broadcast: ports/multicast.c.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* recvmmsg, sendmmsg, SOCK_NONBLOCK */
#endif
#include "config.h"

#include "sock.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>
#if defined(__linux__)
#include <netinet/udp.h> /* UDP_SEGMENT, UDP_GRO (where the headers know them) */
#endif
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

/* The most datagrams one recvmmsg or sendmmsg takes here (the callers'
 * batches are that small: the headers live on the stack). */
#define BATCH_MAX 64

static int set_int(int fd, int level, int name, int value) {
  return setsockopt(fd, level, name, &value, sizeof value) == 0
             ? 0
             : taxi__last_error();
}

int taxi__sock_dgram(const taxi_addr_t *local, unsigned flags,
                     taxi_handle_t *out) {
  int family = taxi__sockaddr_family(local);
  if (family != AF_INET && family != AF_INET6) return TAXI_EBADADDR;
  int fd;
#if defined(SOCK_NONBLOCK) && defined(SOCK_CLOEXEC)
  fd = socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0 && errno != EINVAL) return taxi__last_error();
  if (fd < 0)
#endif
  {
    fd = socket(family, SOCK_DGRAM, 0);
    if (fd < 0) return taxi__last_error();
    int rc = taxi__set_cloexec(fd);
    if (rc == 0) rc = taxi__set_nonblocking(fd);
    if (rc < 0) {
      taxi__close(fd);
      return rc;
    }
  }
  int rc = 0;
  if (family == AF_INET6)
    rc = set_int(fd, IPPROTO_IPV6, IPV6_V6ONLY,
                 (flags & TAXI__DG_V6ONLY) ? 1 : 0);
  if (rc == 0 && (flags & TAXI__DG_REUSEADDR))
    rc = set_int(fd, SOL_SOCKET, SO_REUSEADDR, 1);
  if (rc == 0 &&
      bind(fd, (const struct sockaddr *)local->sa.bytes, local->len) != 0)
    rc = taxi__last_error();
  if (rc < 0) {
    taxi__close(fd);
    return rc;
  }
  *out = fd;
  return 0;
}

#if defined(__linux__)

/* Room for one UDP_GRO control message (an int: the segment size). */
typedef union {
  char buf[CMSG_SPACE(sizeof(int))];
  struct cmsghdr align;
} gro_cmsg_t;

/* The segment size a UDP_GRO control message of h tells, 0 if none. */
static size_t gro_segment(struct msghdr *h) {
#ifdef UDP_GRO
  for (struct cmsghdr *c = CMSG_FIRSTHDR(h); c; c = CMSG_NXTHDR(h, c)) {
    if (c->cmsg_level == IPPROTO_UDP && c->cmsg_type == UDP_GRO &&
        c->cmsg_len >= CMSG_LEN(sizeof(int))) {
      int seg;
      memcpy(&seg, CMSG_DATA(c), sizeof seg);
      return seg > 0 ? (size_t)seg : 0;
    }
  }
#else
  (void)h;
#endif
  return 0;
}

/* Prepared headers: each one's variable fields (name and control lengths,
 * flags) are set again after the kernel wrote them, the rest stays. */
struct taxi__recv_prep {
  taxi__dgram_msg_t *m;
  unsigned n;
  struct mmsghdr h[BATCH_MAX];
  struct iovec iov[BATCH_MAX];
  /* Always offered: the kernel writes into it only on a socket with
   * UDP_GRO on, and only for a coalesced receive. */
  gro_cmsg_t ctl[BATCH_MAX];
};

static void rearm(struct taxi__recv_prep *p, unsigned i) {
  p->h[i].msg_hdr.msg_namelen = sizeof p->m[i].addr.sa.bytes;
  p->h[i].msg_hdr.msg_controllen = sizeof p->ctl[i].buf;
  p->h[i].msg_hdr.msg_flags = 0;
  p->h[i].msg_len = 0;
}

size_t taxi__sock_recv_prep_size(unsigned n) {
  (void)n;
  return sizeof(struct taxi__recv_prep);
}

taxi__recv_prep_t *taxi__sock_recv_prepare(void *mem, taxi__dgram_msg_t *m,
                                           unsigned n) {
  struct taxi__recv_prep *p = mem;
  memset(p, 0, sizeof *p);
  p->m = m;
  p->n = n > BATCH_MAX ? BATCH_MAX : n;
  for (unsigned i = 0; i < p->n; i++) {
    p->iov[i].iov_base = m[i].buf;
    p->iov[i].iov_len = m[i].cap;
    p->h[i].msg_hdr.msg_iov = &p->iov[i];
    p->h[i].msg_hdr.msg_iovlen = 1;
    p->h[i].msg_hdr.msg_name = m[i].addr.sa.bytes;
    p->h[i].msg_hdr.msg_control = p->ctl[i].buf;
    rearm(p, i);
  }
  return p;
}

int taxi__sock_recv_prepared(taxi_handle_t s, taxi__recv_prep_t *p) {
  int got;
  do got = recvmmsg(s, p->h, p->n, MSG_DONTWAIT, NULL);
  while (got < 0 && errno == EINTR);
  if (got < 0) {
    int rc = taxi__last_error();
    rearm(p, 0); /* whatever a failed receive may have written */
    return rc;
  }
  if (got == 0) return TAXI_EAGAIN;
  for (int i = 0; i < got; i++) {
    taxi__dgram_msg_t *m = &p->m[i];
    struct msghdr *h = &p->h[i].msg_hdr;
    taxi__sockaddr_written(&m->addr, h->msg_namelen);
    m->truncated = (h->msg_flags & MSG_TRUNC) != 0;
    m->len = p->h[i].msg_len < m->cap ? p->h[i].msg_len : m->cap;
    m->seg = h->msg_controllen ? gro_segment(h) : 0;
    rearm(p, (unsigned)i);
  }
  return got;
}

int taxi__sock_send_batch(taxi_handle_t s, const taxi__dgram_msg_t *m,
                          unsigned n) {
  struct mmsghdr h[BATCH_MAX];
  struct iovec iov[BATCH_MAX];
  if (n > BATCH_MAX) n = BATCH_MAX;
  memset(h, 0, n * sizeof h[0]);
  for (unsigned i = 0; i < n; i++) {
    iov[i].iov_base = m[i].buf;
    iov[i].iov_len = m[i].len;
    h[i].msg_hdr.msg_iov = &iov[i];
    h[i].msg_hdr.msg_iovlen = 1;
    if (m[i].addr.family) {
      h[i].msg_hdr.msg_name = (void *)m[i].addr.sa.bytes;
      h[i].msg_hdr.msg_namelen = m[i].addr.len;
    }
  }
  int sent;
  do sent = sendmmsg(s, h, n, MSG_DONTWAIT | MSG_NOSIGNAL);
  while (sent < 0 && errno == EINTR);
  if (sent < 0) return taxi__last_error();
  return sent > 0 ? sent : TAXI_EAGAIN;
}

int taxi__sock_udp_gro(taxi_handle_t s, bool on) {
#ifdef UDP_GRO
  if (setsockopt(s, IPPROTO_UDP, UDP_GRO, &(int){on ? 1 : 0}, sizeof(int)) == 0)
    return 0;
  /* Kernels before 5.0 do not know the option. */
  return errno == ENOPROTOOPT ? TAXI_ENOTSUP : taxi__last_error();
#else
  (void)s;
  (void)on;
  return TAXI_ENOTSUP;
#endif
}

int taxi__sock_udp_gso(taxi_handle_t s) {
#ifdef UDP_SEGMENT
  /* Setting the socket's default segment size to 0 (none) changes nothing
   * and tells whether the kernel knows the option (4.18 on). */
  if (setsockopt(s, IPPROTO_UDP, UDP_SEGMENT, &(int){0}, sizeof(int)) == 0)
    return 0;
  return errno == ENOPROTOOPT ? TAXI_ENOTSUP : taxi__last_error();
#else
  (void)s;
  return TAXI_ENOTSUP;
#endif
}

int taxi__sock_send_segments(taxi_handle_t s, const void *buf, size_t len,
                             size_t seg, const taxi_addr_t *to) {
#ifdef UDP_SEGMENT
  if (seg == 0 || seg > UINT16_MAX) return TAXI_ENOTSUP;
  union {
    char buf[CMSG_SPACE(sizeof(uint16_t))];
    struct cmsghdr align;
  } ctl;
  memset(&ctl, 0, sizeof ctl);
  struct iovec iov = {.iov_base = (void *)(uintptr_t)buf, .iov_len = len};
  struct msghdr h;
  memset(&h, 0, sizeof h);
  h.msg_iov = &iov;
  h.msg_iovlen = 1;
  if (to && to->family) {
    h.msg_name = (void *)(uintptr_t)to->sa.bytes;
    h.msg_namelen = to->len;
  }
  h.msg_control = ctl.buf;
  h.msg_controllen = sizeof ctl.buf;
  struct cmsghdr *c = CMSG_FIRSTHDR(&h);
  c->cmsg_level = IPPROTO_UDP;
  c->cmsg_type = UDP_SEGMENT;
  c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
  uint16_t size = (uint16_t)seg;
  memcpy(CMSG_DATA(c), &size, sizeof size);
  ssize_t r;
  do r = sendmsg(s, &h, MSG_DONTWAIT | MSG_NOSIGNAL);
  while (r < 0 && errno == EINTR);
  if (r >= 0) return 0; /* a datagram socket sends all or nothing */
  /* EINVAL: a segment above the path's MTU, or more segments than the
   * kernel takes; EIO: a device without checksum offload; ENOPROTOOPT:
   * no UDP_SEGMENT.  Each datagram may still go on its own. */
  if (errno == EINVAL || errno == EIO || errno == ENOPROTOOPT)
    return TAXI_ENOTSUP;
  return taxi__last_error();
#else
  (void)s;
  (void)buf;
  (void)len;
  (void)seg;
  (void)to;
  return TAXI_ENOTSUP;
#endif
}

#else /* one datagram per call */

int taxi__sock_recv_batch(taxi_handle_t s, taxi__dgram_msg_t *m, unsigned n) {
  unsigned got = 0;
  while (got < n) {
    struct iovec iov = {.iov_base = m[got].buf, .iov_len = m[got].cap};
    struct msghdr h;
    memset(&h, 0, sizeof h);
    h.msg_iov = &iov;
    h.msg_iovlen = 1;
    h.msg_name = m[got].addr.sa.bytes;
    h.msg_namelen = sizeof m[got].addr.sa.bytes;
    ssize_t r;
    do r = recvmsg(s, &h, MSG_DONTWAIT);
    while (r < 0 && errno == EINTR);
    if (r < 0) {
      if (got > 0) return (int)got; /* the error again at the next call */
      return taxi__last_error();
    }
    taxi_addr_t from = m[got].addr; /* the set clears its output first */
    taxi__sockaddr_set(&m[got].addr, from.sa.bytes, h.msg_namelen);
    m[got].truncated = (h.msg_flags & MSG_TRUNC) != 0;
    m[got].len = (size_t)r < m[got].cap ? (size_t)r : m[got].cap;
    m[got].seg = 0;
    got++;
  }
  return (int)got;
}

int taxi__sock_send_batch(taxi_handle_t s, const taxi__dgram_msg_t *m,
                          unsigned n) {
  unsigned sent = 0;
  while (sent < n) {
    const taxi__dgram_msg_t *d = &m[sent];
    ssize_t r;
    do
      r = sendto(
          s, d->buf, d->len, 0,
          d->addr.family ? (const struct sockaddr *)d->addr.sa.bytes : NULL,
          d->addr.family ? d->addr.len : 0);
    while (r < 0 && errno == EINTR);
    if (r < 0) return sent > 0 ? (int)sent : taxi__last_error();
    sent++;
  }
  return (int)sent;
}

int taxi__sock_udp_gro(taxi_handle_t s, bool on) {
  (void)s;
  (void)on;
  return TAXI_ENOTSUP;
}

int taxi__sock_udp_gso(taxi_handle_t s) {
  (void)s;
  return TAXI_ENOTSUP;
}

int taxi__sock_send_segments(taxi_handle_t s, const void *buf, size_t len,
                             size_t seg, const taxi_addr_t *to) {
  (void)s;
  (void)buf;
  (void)len;
  (void)seg;
  (void)to;
  return TAXI_ENOTSUP;
}

#endif
