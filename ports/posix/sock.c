/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ports/posix/sock.c - the stream layer's socket calls on POSIX systems
 * (see ports/sock.h).  The addresses are in ports/sockaddr.c, shared with
 * Windows.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* accept4(), SOCK_NONBLOCK, MSG_NOSIGNAL, sendfile */
#endif
#include "config.h"

#include "sock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/sendfile.h>
#endif

#ifdef MSG_NOSIGNAL
#define SEND_FLAGS MSG_NOSIGNAL
#else
#define SEND_FLAGS 0 /* SO_NOSIGPIPE is set on every socket instead */
#endif

/* ---- sockets --------------------------------------------------------------
 */

static int set_int(int fd, int level, int name, int value) {
  return setsockopt(fd, level, name, &value, sizeof value) == 0
             ? 0
             : taxi__last_error();
}

/* A non-blocking, close-on-exec stream socket of `family`. */
static int new_socket(int family, int *out) {
  int fd;
#if defined(SOCK_NONBLOCK) && defined(SOCK_CLOEXEC)
  fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd >= 0) {
    *out = fd;
    goto options;
  }
  if (errno != EINVAL) return taxi__last_error();
#endif
  fd = socket(family, SOCK_STREAM, 0);
  if (fd < 0) return taxi__last_error();
  int rc = taxi__set_cloexec(fd);
  if (rc == 0) rc = taxi__set_nonblocking(fd);
  if (rc < 0) {
    taxi__close(fd);
    return rc;
  }
  *out = fd;
#if defined(SOCK_NONBLOCK) && defined(SOCK_CLOEXEC)
options:
#endif
#if !defined(MSG_NOSIGNAL) && defined(SO_NOSIGPIPE)
  (void)set_int(*out, SOL_SOCKET, SO_NOSIGPIPE, 1);
#endif
  return 0;
}

int taxi__sock_open(const taxi_addr_t *a, taxi_handle_t *out) {
  int family = taxi__sockaddr_family(a);
  if (family < 0) return TAXI_EINVAL;
  return new_socket(family, out);
}

/*
 * Which option makes several sockets share a port with the kernel
 * balancing new connections among them:
 *  - FreeBSD 12 and later: SO_REUSEPORT_LB (plain SO_REUSEPORT there only
 *    lets them bind; connections then go to one of them);
 *  - Linux 3.9 and later: SO_REUSEPORT, which hashes connections over the
 *    sockets of the group;
 *  - elsewhere (macOS, OpenBSD, NetBSD): none balances, so
 *    TAXI_LISTEN_REUSEPORT is TAXI_ENOTSUP there.
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

static bool is_ip6_any(const taxi_addr_t *a) {
  const struct sockaddr_in6 *in =
      (const struct sockaddr_in6 *)(const void *)a->sa.bytes;
  return a->family == TAXI_ADDR_IPV6 &&
         memcmp(&in->sin6_addr, &in6addr_any, sizeof in6addr_any) == 0;
}

int taxi__sock_listen(const taxi_addr_t *a, int backlog, unsigned flags,
                      taxi_handle_t *out) {
  taxi_addr_t any4;
  int fd, family = taxi__sockaddr_family(a);
  if (family < 0) return TAXI_EINVAL;
  int rc = new_socket(family, &fd);
  if (rc < 0 && errno == EAFNOSUPPORT && is_ip6_any(a)) {
    /* No IPv6 here (EAFNOSUPPORT): every address means IPv4's. */
    taxi__sockaddr_ip(&any4, false, NULL, 0, taxi__sockaddr_port(a));
    a = &any4;
    family = AF_INET;
    rc = new_socket(family, &fd);
  }
  if (rc < 0) return rc;
  if (family != AF_UNIX && !(flags & TAXI_LISTEN_NO_REUSEADDR))
    rc = set_int(fd, SOL_SOCKET, SO_REUSEADDR, 1);
  if (rc == 0 && (flags & TAXI_LISTEN_REUSEPORT)) {
#ifdef BALANCING_OPTION
    rc = set_int(fd, SOL_SOCKET, BALANCING_OPTION, 1);
#else
    rc = TAXI_ENOTSUP;
#endif
  }
  if (rc == 0 && family == AF_INET6)
    rc = set_int(fd, IPPROTO_IPV6, IPV6_V6ONLY,
                 (flags & TAXI_LISTEN_V6ONLY) ? 1 : 0);
  if (rc == 0 && bind(fd, (const struct sockaddr *)(const void *)a->sa.bytes,
                      (socklen_t)a->len) != 0)
    rc = taxi__last_error();
  if (rc == 0 && listen(fd, backlog > 0 ? backlog : SOMAXCONN) != 0)
    rc = taxi__last_error();
  if (rc < 0) {
    taxi__close(fd);
    return rc;
  }
  *out = fd;
  return 0;
}

int taxi__sock_connect(taxi_handle_t s, const taxi_addr_t *a) {
  for (;;) {
    if (connect(s, (const struct sockaddr *)(const void *)a->sa.bytes,
                (socklen_t)a->len) == 0)
      return 0;
    if (errno == EINTR) continue; /* goes on in the background */
    if (errno == EINPROGRESS || errno == EALREADY) return TAXI_EAGAIN;
    /* A Unix-domain socket whose listener's backlog is full. */
    if (errno == EAGAIN) return TAXI_EAGAIN;
    return taxi__sock_connect_error(errno);
  }
}

int taxi__sock_accept(taxi_handle_t listener, taxi_handle_t *out,
                      taxi_addr_t *peer) {
  struct sockaddr_storage ss;
  int aborted = 0;
  for (;;) {
    socklen_t len = sizeof ss;
    int fd;
#if defined(HAVE_ACCEPT4) || defined(__linux__)
    fd = accept4(listener, (struct sockaddr *)&ss, &len,
                 SOCK_NONBLOCK | SOCK_CLOEXEC);
#else
    fd = accept(listener, (struct sockaddr *)&ss, &len);
#endif
    if (fd < 0) {
      switch (errno) {
        case EINTR:
          continue;
        /* The connection was aborted while queued, or (Linux, see
         * accept(2)) a network error of the new connection: either way it
         * concerns that one, not the listener, and the next may be there
         * (an edge-triggered listener would not be told of it again).
         * Bounded, for a listener whose every accept fails so. */
        case ECONNABORTED:
        case EPROTO:
          if (++aborted < 64) continue;
          return TAXI_EAGAIN;
        case EAGAIN:
#if defined(EWOULDBLOCK) && EWOULDBLOCK != EAGAIN
        case EWOULDBLOCK:
#endif
          return TAXI_EAGAIN;
        default:
          return taxi__last_error();
      }
    }
#if !(defined(HAVE_ACCEPT4) || defined(__linux__))
    int rc = taxi__set_cloexec(fd);
    if (rc == 0) rc = taxi__set_nonblocking(fd);
    if (rc < 0) {
      taxi__close(fd);
      return rc;
    }
#endif
#if !defined(MSG_NOSIGNAL) && defined(SO_NOSIGPIPE)
    (void)set_int(fd, SOL_SOCKET, SO_NOSIGPIPE, 1);
#endif
    taxi__sockaddr_set(peer, &ss, (unsigned)len);
    *out = fd;
    return 0;
  }
}

int taxi__sock_listening(taxi_handle_t s) {
  int on = 0;
  socklen_t len = sizeof on;
  if (s < 0) return TAXI_EBADF;
  if (getsockopt(s, SOL_SOCKET, SO_ACCEPTCONN, &on, &len) != 0) {
    int rc = taxi__last_error();
    /* ENOTSOCK: open, but not a socket. */
    if (errno == ENOTSOCK || errno == EBADF) rc = TAXI_EBADF;
    return rc;
  }
  return on ? 0 : TAXI_EINVAL;
}

/* ---- transfers ------------------------------------------------------------
 */

int64_t taxi__sock_recv(taxi_handle_t s, void *buf, size_t len) {
  for (;;) {
    ssize_t n = recv(s, buf, len, 0);
    if (n >= 0) return n;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return TAXI_EAGAIN;
    return taxi__last_error();
  }
}

int64_t taxi__sock_sendv(taxi_handle_t s, const taxi_buf_t *bufs, size_t n) {
  struct iovec iov[16];
  struct msghdr msg;
  if (n > 16) n = 16;
  /* One buffer, the usual case of a message, goes out with send(), which
   * spares the kernel copying in and checking a msghdr and its iovec
   * (about 2% of a small echo's whole cost on Linux): no need to build
   * them then. */
  if (n != 1) {
    for (size_t i = 0; i < n; i++) {
      iov[i].iov_base = bufs[i].base;
      iov[i].iov_len = bufs[i].len;
    }
    memset(&msg, 0, sizeof msg);
    msg.msg_iov = iov;
    msg.msg_iovlen = n;
  }
  for (;;) {
    ssize_t r = n == 1 ? send(s, bufs[0].base, bufs[0].len, SEND_FLAGS)
                       : sendmsg(s, &msg, SEND_FLAGS);
    if (r >= 0) return r;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS)
      return TAXI_EAGAIN;
    return taxi__last_error();
  }
}

int64_t taxi__sock_sendfile(taxi_handle_t s, taxi_handle_t file, int64_t offset,
                            size_t len) {
#if defined(__linux__)
  for (;;) {
    off_t off = (off_t)offset;
    ssize_t n = sendfile(s, file, &off, len);
    if (n > 0) return n;
    if (n == 0) return TAXI_EEOF;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return TAXI_EAGAIN;
    /* Some file systems cannot be sent from: copy instead, below. */
    if (errno != EINVAL && errno != ENOSYS) return taxi__last_error();
    break;
  }
#endif
  char chunk[16384];
  if (len > sizeof chunk) len = sizeof chunk;
  ssize_t got;
  do got = pread(file, chunk, len, (off_t)offset);
  while (got < 0 && errno == EINTR);
  if (got < 0) return taxi__last_error();
  if (got == 0) return TAXI_EEOF;
  taxi_buf_t b = {chunk, (size_t)got};
  return taxi__sock_sendv(s, &b, 1);
}

int taxi__sock_shutdown_write(taxi_handle_t s) {
  if (shutdown(s, SHUT_WR) == 0) return 0;
  /* The peer went away first: nothing to shut. */
  if (errno == ENOTCONN) return 0;
  return taxi__last_error();
}

int taxi__sock_poke(taxi_handle_t s) {
  /* send() is async-signal-safe; errno is kept for the code interrupted.
   * No taxi__error_from_os(): it records the error in a thread-local,
   * which is not for signal handlers (see ports/posix/error.c). */
  int saved = errno, rc = 0, tries = 0;
  char one = 1;
  while (send(s, &one, 1, SEND_FLAGS | MSG_DONTWAIT) < 0) {
    if (errno == EINTR) continue;
    /* A lost wake-up may be a lost stop (this is how taxi_io_stop reaches
     * the dispatcher, from a signal handler too, where nothing can wait):
     * a refusal is tried again a few times at once, whatever it was.
     * Then a full socket is fine - it holds bytes the reader has yet to
     * see, so it will wake - and anything else is returned. */
    if (++tries < 4) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK)
      rc = errno == ENOBUFS || errno == ENOMEM ? TAXI_ENOMEM : TAXI_ESYS;
    break;
  }
  errno = saved;
  return rc;
}

void taxi__sock_drain(taxi_handle_t s) {
  char buf[64];
  while (recv(s, buf, sizeof buf, MSG_DONTWAIT) > 0) {
  }
}

/* ---- options --------------------------------------------------------------
 */

int taxi__sock_nodelay(taxi_handle_t s, bool on) {
  return set_int(s, IPPROTO_TCP, TCP_NODELAY, on ? 1 : 0);
}

int taxi__sock_defer_accept(taxi_handle_t s, int seconds) {
#if defined(TCP_DEFER_ACCEPT)
  int rc = set_int(s, IPPROTO_TCP, TCP_DEFER_ACCEPT, seconds);
  /* A Unix-domain socket has no TCP level. */
  if (rc < 0 && (errno == EOPNOTSUPP || errno == ENOPROTOOPT))
    return TAXI_ENOTSUP;
  return rc;
#else
  /* FreeBSD's accept filters (SO_ACCEPTFILTER, "dataready") do the like,
   * but need a kernel module loaded: not taken on its behalf. */
  (void)s;
  (void)seconds;
  return TAXI_ENOTSUP;
#endif
}

int taxi__sock_cork(taxi_handle_t s, bool on) {
#if defined(TCP_CORK)
  return set_int(s, IPPROTO_TCP, TCP_CORK, on ? 1 : 0);
#else
  (void)s;
  (void)on;
  return TAXI_ENOTSUP;
#endif
}

int taxi__sock_keepalive(taxi_handle_t s, bool on, unsigned idle_s,
                         unsigned interval_s, unsigned count) {
  int rc = set_int(s, SOL_SOCKET, SO_KEEPALIVE, on ? 1 : 0);
  if (rc < 0 || !on) return rc;
#if defined(TCP_KEEPIDLE)
  if (idle_s && (rc = set_int(s, IPPROTO_TCP, TCP_KEEPIDLE, (int)idle_s)) < 0)
    return rc;
#elif defined(TCP_KEEPALIVE) /* macOS */
  if (idle_s && (rc = set_int(s, IPPROTO_TCP, TCP_KEEPALIVE, (int)idle_s)) < 0)
    return rc;
#endif
#if defined(TCP_KEEPINTVL)
  if (interval_s &&
      (rc = set_int(s, IPPROTO_TCP, TCP_KEEPINTVL, (int)interval_s)) < 0)
    return rc;
#endif
#if defined(TCP_KEEPCNT)
  if (count && (rc = set_int(s, IPPROTO_TCP, TCP_KEEPCNT, (int)count)) < 0)
    return rc;
#endif
  (void)idle_s;
  (void)interval_s;
  (void)count;
  return 0;
}
