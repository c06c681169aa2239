/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libuv_udp_echo.c - the datagram echo on libuv: one uv_udp_t receiving
 * with recvmmsg (UV_UDP_RECVMMSG: libuv cuts the buffer it is given into
 * 64 KiB slots, one datagram each), each datagram echoed at once with
 * uv_udp_try_send, which sends in place and allocates no request; an echo
 * the socket does not take is dropped (the client sends again).  One
 * buffer for the whole loop, so nothing is allocated per datagram.  One
 * thread, the default loop; SIGINT and SIGTERM stop it through uv_signal_t
 * handles.
 */
#if !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include <uv.h>

#include "peer.h"

/* 16 datagrams of the largest size per recvmmsg. */
#define BUFFER_SIZE (16 * 65536)

static struct peer_options o;
static unsigned long long echoed;
static uv_udp_t udp;
static uv_signal_t sigint, sigterm;
static char buffer[BUFFER_SIZE];

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)h;
  (void)suggested;
  *buf = uv_buf_init(buffer, sizeof buffer);
}

static void on_recv(uv_udp_t *u, ssize_t n, const uv_buf_t *buf,
                    const struct sockaddr *from, unsigned flags) {
  (void)flags;
  /* n 0 without a sender: nothing more this time, or the end of a
   * recvmmsg batch (UV_UDP_MMSG_FREE: the buffer is ours again). */
  if (n < 0 || from == NULL) return;
  uv_buf_t out = uv_buf_init(buf->base, (unsigned)n);
  if (uv_udp_try_send(u, &out, 1, from) >= 0) echoed++;
}

static void on_signal(uv_signal_t *h, int signo) {
  (void)signo;
  uv_stop(h->loop);
}

int main(int argc, char **argv) {
  uv_loop_t *loop = uv_default_loop();
  int rc;

  peer_parse(argc, argv, "libuv_udp_echo", 0, 0, &o);
  int fd = peer_udp_bind(&o);
  if ((rc = uv_signal_init(loop, &sigint)) < 0 ||
      (rc = uv_signal_start(&sigint, on_signal, SIGINT)) < 0 ||
      (rc = uv_signal_init(loop, &sigterm)) < 0 ||
      (rc = uv_signal_start(&sigterm, on_signal, SIGTERM)) < 0 ||
      (rc = uv_udp_init_ex(loop, &udp, AF_UNSPEC | UV_UDP_RECVMMSG)) < 0 ||
      (rc = uv_udp_open(&udp, fd)) < 0 ||
      (rc = uv_udp_recv_start(&udp, on_alloc, on_recv)) < 0) {
    fprintf(stderr, "%s: %s\n", o.name, uv_strerror(rc));
    return 1;
  }
  (void)uv_run(loop, UV_RUN_DEFAULT);
  printf("%s: stopped after %llu datagrams\n", o.name, echoed);
  fflush(stdout);
  return 0;
}
