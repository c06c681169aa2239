/* SPDX-License-Identifier: Apache-2.0 */
/*
 * udp_floor.c - the floor for a datagram echo on a readiness loop: one
 * thread, one UDP socket in a level-triggered epoll set; when it is
 * readable, one recvmmsg of up to 64 datagrams and one sendmmsg of all of
 * them back to their senders, until the socket has no more.  Nothing else
 * (no queue, no per-datagram state, no callbacks), so its CPU time per
 * datagram is the least a readiness dispatcher with batches can cost.
 * Echoes the socket does not take at once (not seen under ping-pong) are
 * dropped, as a full socket buffer drops them: the client sends again.
 */
#define _GNU_SOURCE 1 /* recvmmsg, sendmmsg */

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "peer.h"

#define BATCH 64
#define DGRAM_MAX 65536

static char bufs[BATCH][DGRAM_MAX];
static struct mmsghdr msgs[BATCH];
static struct iovec iovs[BATCH];
static struct sockaddr_storage from[BATCH];

/* Echo what waits, batch by batch; the count echoed, or -1 on an error
 * the socket will not get over. */
static long drain(const struct peer_options *o, int fd) {
  long echoed = 0;
  for (;;) {
    for (int i = 0; i < BATCH; i++) {
      iovs[i].iov_base = bufs[i];
      iovs[i].iov_len = DGRAM_MAX;
      msgs[i].msg_hdr.msg_iov = &iovs[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
      msgs[i].msg_hdr.msg_name = &from[i];
      msgs[i].msg_hdr.msg_namelen = sizeof from[i];
      msgs[i].msg_hdr.msg_control = NULL;
      msgs[i].msg_hdr.msg_controllen = 0;
      msgs[i].msg_hdr.msg_flags = 0;
    }
    int n = recvmmsg(fd, msgs, BATCH, MSG_DONTWAIT, NULL);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) return echoed;
      if (errno == ECONNREFUSED) continue; /* an ICMP error: go on */
      peer_error(o, "recvmmsg", errno);
      return -1;
    }
    /* The received lengths become the sent ones. */
    for (int i = 0; i < n; i++) iovs[i].iov_len = msgs[i].msg_len;
    int sent = 0;
    while (sent < n) {
      int k = sendmmsg(fd, msgs + sent, (unsigned)(n - sent), MSG_DONTWAIT);
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) {
        /* EAGAIN: dropped; an error of one datagram: skip it. */
        if (k < 0 && errno != EAGAIN)
          sent++;
        else
          break;
        continue;
      }
      sent += k;
    }
    echoed += n;
    if (n < BATCH) return echoed;
  }
}

int main(int argc, char **argv) {
  struct peer_options o;
  struct epoll_event ev = {EPOLLIN, {0}}, events[8];
  unsigned long long echoed = 0;
  sigset_t wait_mask;

  peer_parse(argc, argv, "udp_floor", 0, 0, &o);
  peer_catch_stop_signals(&wait_mask);
  int ep = epoll_create1(EPOLL_CLOEXEC);
  int fd = peer_udp_bind(&o);
  ev.data.fd = fd;
  if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
    peer_error(&o, "epoll", errno);
    return 1;
  }
  while (!peer_stopping) {
    int n = epoll_pwait(ep, events, 8, -1, &wait_mask);
    if (n < 0 && errno != EINTR) {
      peer_error(&o, "epoll_wait", errno);
      return 1;
    }
    for (int i = 0; i < n; i++) {
      long k = drain(&o, fd);
      if (k < 0) return 1;
      echoed += (unsigned long long)k;
    }
  }
  /* The harness reads "NAME: stopped"; the count is of datagrams here. */
  printf("%s: stopped after %llu datagrams\n", o.name, echoed);
  fflush(stdout);
  return 0;
}
