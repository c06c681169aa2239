/* SPDX-License-Identifier: Apache-2.0 */
/*
 * net.c - every socket and readiness call of the web load generator:
 * resolving the server, non-blocking connects, send/recv reporting errors
 * as -errno, the descriptor limit and an epoll set.  Kept in one file so
 * that a port to another system (kqueue, poll) replaces this file alone.
 */
#include "webstone.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <unistd.h>

#ifndef MSG_NOSIGNAL
#define MSG_NOSIGNAL 0 /* SIGPIPE is ignored as well, see main() */
#endif

int ws_net_resolve(const char *host, const char *port, struct ws_address *a) {
  struct addrinfo hints, *ai = NULL;
  int rc;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  rc = getaddrinfo(host, port, &hints, &ai);
  if (rc != 0) {
    fprintf(stderr, "webstone: %s port %s: %s\n", host, port, gai_strerror(rc));
    return -1;
  }
  memcpy(&a->addr, ai->ai_addr, ai->ai_addrlen);
  a->len = (socklen_t)ai->ai_addrlen;
  freeaddrinfo(ai);
  return 0;
}

int ws_net_connect(const struct ws_address *a, int *done) {
  int fd, one = 1, flags;
  *done = 0;
  fd = socket(a->addr.ss_family, SOCK_STREAM, 0);
  if (fd < 0) return -errno;
  flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    int err = errno;
    close(fd);
    return -err;
  }
  /* The request goes out in one segment; do not let Nagle hold it. */
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (connect(fd, (const struct sockaddr *)&a->addr, a->len) == 0) {
    *done = 1;
    return fd;
  }
  if (errno == EINPROGRESS || errno == EINTR) return fd;
  {
    int err = errno;
    close(fd);
    return -err;
  }
}

int ws_net_connect_result(int fd) {
  int err = 0;
  socklen_t len = sizeof err;
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return errno;
  return err;
}

ssize_t ws_net_send(int fd, const void *buf, size_t len) {
  for (;;) {
    ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
    if (n >= 0) return n;
    if (errno == EINTR) continue;
    if (errno == EWOULDBLOCK) return -EAGAIN;
    return -errno;
  }
}

ssize_t ws_net_recv(int fd, void *buf, size_t len) {
  for (;;) {
    ssize_t n = recv(fd, buf, len, 0);
    if (n >= 0) return n;
    if (errno == EINTR) continue;
    if (errno == EWOULDBLOCK) return -EAGAIN;
    return -errno;
  }
}

void ws_net_close(int fd) {
  if (fd >= 0) close(fd); /* which also takes it out of the epoll set */
}

/* Make room for `want` descriptors: raise the soft limit, up to the hard
 * one.  Returns -1 with a message if that is not enough. */
int ws_net_raise_fd_limit(long want) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return 0; /* try anyway */
  if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= (rlim_t)want) return 0;
  if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < (rlim_t)want) {
    fprintf(stderr,
            "webstone: %ld descriptors needed, the hard limit is %llu "
            "(ulimit -n)\n",
            want, (unsigned long long)rl.rlim_max);
    return -1;
  }
  rl.rlim_cur = (rlim_t)want;
  if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
    fprintf(stderr, "webstone: setrlimit(%ld): %s\n", want, strerror(errno));
    return -1;
  }
  return 0;
}

int ws_poller_open(void) { return epoll_create1(EPOLL_CLOEXEC); }

int ws_poller_watch(int poller, int fd, int add, int flags, uint32_t tag) {
  struct epoll_event ev;
  memset(&ev, 0, sizeof ev);
  ev.events = ((flags & WS_EV_IN) ? EPOLLIN : 0u) |
              ((flags & WS_EV_OUT) ? EPOLLOUT : 0u);
  ev.data.u32 = tag;
  return epoll_ctl(poller, add ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, fd, &ev) == 0
             ? 0
             : -errno;
}

int ws_poller_wait(int poller, struct ws_event *out, int max, int timeout_ms) {
  struct epoll_event ev[256];
  int n, i;
  if (max > 256) max = 256;
  n = epoll_wait(poller, ev, max, timeout_ms);
  if (n < 0) return errno == EINTR ? 0 : -errno;
  for (i = 0; i < n; i++) {
    out[i].tag = ev[i].data.u32;
    out[i].flags = ((ev[i].events & EPOLLIN) ? WS_EV_IN : 0) |
                   ((ev[i].events & EPOLLOUT) ? WS_EV_OUT : 0) |
                   ((ev[i].events & (EPOLLERR | EPOLLHUP)) ? WS_EV_ERR : 0);
  }
  return n;
}

void ws_poller_close(int poller) {
  if (poller >= 0) close(poller);
}
