/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libevent_echo.c - the echo server on libevent 2, written the way
 * libevent's own documentation writes servers: an evconnlistener accepts,
 * each connection is a bufferevent whose read callback moves its input
 * buffer to its output buffer (evbuffer_add_buffer, no copy), and the
 * bufferevent writes it.  One thread, one event_base; SIGINT and SIGTERM
 * end the loop through evsignal events.
 *
 * What this costs beyond the floor is libevent's: its evbuffer chains are
 * allocated as data arrives and freed when written, which the allocs/msg
 * column shows.
 */
#if !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "peer.h"

static struct peer_options o;
static unsigned long long connections;

static void on_read(struct bufferevent *bev, void *arg) {
  (void)arg;
  evbuffer_add_buffer(bufferevent_get_output(bev), bufferevent_get_input(bev));
}

static void on_event(struct bufferevent *bev, short what, void *arg) {
  (void)arg;
  if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
    bufferevent_free(bev); /* BEV_OPT_CLOSE_ON_FREE: closes the socket */
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd,
                      struct sockaddr *addr, int len, void *arg) {
  struct event_base *base = arg;
  struct bufferevent *bev;
  (void)l;
  (void)addr;
  (void)len;
  peer_nodelay(fd);
  bev = bufferevent_socket_new(base, fd, BEV_OPT_CLOSE_ON_FREE);
  if (bev == NULL) {
    evutil_closesocket(fd);
    return;
  }
  bufferevent_setcb(bev, on_read, NULL, on_event, NULL);
  if (bufferevent_enable(bev, EV_READ | EV_WRITE) < 0) {
    bufferevent_free(bev);
    return;
  }
  connections++;
}

static void on_accept_error(struct evconnlistener *l, void *arg) {
  int err = EVUTIL_SOCKET_ERROR();
  (void)arg;
  peer_error(&o, "accept", err);
  event_base_loopbreak(evconnlistener_get_base(l));
}

static void on_signal(evutil_socket_t signo, short what, void *arg) {
  (void)signo;
  (void)what;
  event_base_loopbreak(arg);
}

int main(int argc, char **argv) {
  struct event_base *base;
  struct evconnlistener *listener;
  struct event *sigint, *sigterm;
  int fd, rc;

  peer_parse(argc, argv, "libevent_echo", 0, 0, &o);
  peer_raise_fd_limit();
  signal(SIGPIPE, SIG_IGN);
  base = event_base_new();
  if (base == NULL) {
    fprintf(stderr, "%s: event_base_new failed\n", o.name);
    return 1;
  }
  sigint = evsignal_new(base, SIGINT, on_signal, base);
  sigterm = evsignal_new(base, SIGTERM, on_signal, base);
  if (sigint == NULL || sigterm == NULL || evsignal_add(sigint, NULL) < 0 ||
      evsignal_add(sigterm, NULL) < 0) {
    fprintf(stderr, "%s: cannot catch signals\n", o.name);
    return 1;
  }
  fd = peer_listen(&o);
  listener =
      evconnlistener_new(base, on_accept, base,
                         LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, -1, fd);
  if (listener == NULL) {
    fprintf(stderr, "%s: evconnlistener_new failed\n", o.name);
    return 1;
  }
  evconnlistener_set_error_cb(listener, on_accept_error);
  rc = event_base_dispatch(base);
  if (rc < 0) fprintf(stderr, "%s: event_base_dispatch failed\n", o.name);
  evconnlistener_free(listener);
  event_free(sigint);
  event_free(sigterm);
  /* The connections still open are left to the exit: freeing them one by
   * one would only measure teardown. */
  peer_report_stop(&o, connections);
  return rc < 0 ? 1 : 0;
}
