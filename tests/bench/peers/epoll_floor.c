/* SPDX-License-Identifier: Apache-2.0 */
/*
 * epoll_floor.c - the floor for a readiness loop: one thread, one
 * level-triggered epoll set; accept, then for each readable connection one
 * recv and one send of what came.  Nothing else (no timers, no wake-ups,
 * no per-connection state, no re-arming), so its CPU time per message is
 * the least any epoll dispatcher can cost.  A send the socket does not
 * take whole (not seen under ping-pong) waits in poll() for the rest.
 */
#define _GNU_SOURCE 1 /* accept4 */

#include <errno.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "peer.h"

static char buf[16384]; /* one thread: one buffer for every connection */

static void echo(int fd) {
  ssize_t n = recv(fd, buf, sizeof buf, 0), off = 0;
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  while (off < n) {
    ssize_t w = send(fd, buf + off, (size_t)(n - off), MSG_NOSIGNAL);
    struct pollfd out = {fd, POLLOUT, 0};
    if (w > 0)
      off += w;
    else if (w < 0 && (errno == EAGAIN || errno == EINTR))
      (void)poll(&out, 1, -1);
    else
      break;
  }
  if (n <= 0 || off < n) close(fd); /* end or error; leaves the epoll set */
}

int main(int argc, char **argv) {
  struct peer_options o;
  struct epoll_event ev = {EPOLLIN, {0}}, events[256];
  unsigned long long connections = 0;
  sigset_t wait_mask;
  int ep, lfd, i, n;

  peer_parse(argc, argv, "epoll_floor", 0, 0, &o);
  peer_raise_fd_limit();
  peer_catch_stop_signals(&wait_mask);
  ep = epoll_create1(EPOLL_CLOEXEC);
  lfd = peer_listen(&o);
  ev.data.fd = lfd;
  if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev) < 0) {
    peer_error(&o, "epoll", errno);
    return 1;
  }
  while (!peer_stopping) {
    n = epoll_pwait(ep, events, 256, -1, &wait_mask);
    if (n < 0 && errno != EINTR) {
      peer_error(&o, "epoll_wait", errno);
      return 1;
    }
    for (i = 0; i < n; i++) {
      int fd = events[i].data.fd;
      if (fd != lfd) {
        echo(fd);
        continue;
      }
      while ((fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >=
             0) {
        peer_nodelay(fd);
        ev.data.fd = fd;
        if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0)
          connections++;
        else
          close(fd);
      }
      if (errno != EAGAIN && errno != ECONNABORTED && errno != EINTR) {
        peer_error(&o, "accept", errno); /* out of descriptors: say so, stop */
        return 1;
      }
    }
  }
  peer_report_stop(&o, connections);
  return 0;
}
