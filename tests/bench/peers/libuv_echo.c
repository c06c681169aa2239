/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libuv_echo.c - the echo server on libuv: a uv_tcp_t listener, and per
 * connection a uv_tcp_t with its buffer and one write request allocated
 * with it.  Reading stops while the echo is being written and resumes when
 * the write completes (the back-pressure taxi's echo server applies too),
 * so one buffer and one request per connection suffice and nothing is
 * allocated per message; libuv tries each write at once before waiting.
 * One thread, the default loop; SIGINT and SIGTERM stop it through
 * uv_signal_t handles.
 */
#if !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include <uv.h>

#include "peer.h"

#define BUFFER_SIZE 16384

struct conn {
  uv_tcp_t tcp; /* first: the handle's address is the connection's */
  uv_write_t write;
  char buf[BUFFER_SIZE];
};

static struct peer_options o;
static unsigned long long connections;
static uv_tcp_t listener;
static uv_signal_t sigint, sigterm;

static void on_closed(uv_handle_t *h) { free(h); }

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  struct conn *c = (struct conn *)h;
  (void)suggested;
  *buf = uv_buf_init(c->buf, sizeof c->buf);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);

static void on_written(uv_write_t *w, int status) {
  struct conn *c = w->data;
  if (status < 0 ||
      uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) < 0)
    uv_close((uv_handle_t *)&c->tcp, on_closed);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  struct conn *c = (struct conn *)s;
  uv_buf_t out;
  if (n == 0) return; /* nothing this time (EAGAIN) */
  if (n < 0) {        /* UV_EOF or an error */
    uv_close((uv_handle_t *)s, on_closed);
    return;
  }
  uv_read_stop(s);
  out = uv_buf_init(buf->base, (unsigned)n);
  c->write.data = c;
  if (uv_write(&c->write, s, &out, 1, on_written) < 0)
    uv_close((uv_handle_t *)s, on_closed);
}

static void on_connection(uv_stream_t *server, int status) {
  struct conn *c;
  if (status < 0) {
    fprintf(stderr, "%s: accept: %s\n", o.name, uv_strerror(status));
    return;
  }
  c = malloc(sizeof *c);
  if (c == NULL || uv_tcp_init(server->loop, &c->tcp) < 0) {
    free(c);
    return;
  }
  if (uv_accept(server, (uv_stream_t *)&c->tcp) < 0 ||
      uv_tcp_nodelay(&c->tcp, 1) < 0 ||
      uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) < 0) {
    uv_close((uv_handle_t *)&c->tcp, on_closed);
    return;
  }
  connections++;
}

static void on_signal(uv_signal_t *h, int signo) {
  (void)signo;
  uv_stop(h->loop);
}

int main(int argc, char **argv) {
  uv_loop_t *loop = uv_default_loop();
  int rc;

  peer_parse(argc, argv, "libuv_echo", 0, 0, &o);
  peer_raise_fd_limit();
  signal(SIGPIPE, SIG_IGN);
  if ((rc = uv_signal_init(loop, &sigint)) < 0 ||
      (rc = uv_signal_start(&sigint, on_signal, SIGINT)) < 0 ||
      (rc = uv_signal_init(loop, &sigterm)) < 0 ||
      (rc = uv_signal_start(&sigterm, on_signal, SIGTERM)) < 0 ||
      (rc = uv_tcp_init(loop, &listener)) < 0 ||
      (rc = uv_tcp_open(&listener, peer_listen(&o))) < 0 ||
      (rc = uv_listen((uv_stream_t *)&listener, SOMAXCONN, on_connection)) <
          0) {
    fprintf(stderr, "%s: %s\n", o.name, uv_strerror(rc));
    return 1;
  }
  rc = uv_run(loop, UV_RUN_DEFAULT);
  /* Stopped by a signal; the connections still open are left to the exit:
   * closing them one by one would only measure teardown. */
  peer_report_stop(&o, connections);
  return 0;
}
