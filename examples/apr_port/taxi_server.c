/* SPDX-License-Identifier: Apache-2.0 */
/*
 * examples/apr_port/taxi_server.c - apr_server.c ported to taxi: the same
 * protocol, the same APR sockets and pools, but no pollset loop and no
 * queue to a thread pool.  A taxi Leader/Followers pool dispatches the
 * reactor instead: the thread that sees a connection become readable
 * serves it itself, after promoting another thread to wait.
 *
 *     taxi_server --port P [--host H] [--threads N] [--backend NAME] [--echo]
 *
 * NAME is a taxi backend (default "apr": APR's own pollset, so the port
 * runs wherever the APR server ran; "epoll", "apr:poll", ...).  It prints
 * "taxi_server: backend=B threads=N listening on HOST:PORT" once ready,
 * serves until SIGINT or SIGTERM, then prints what it did.
 *
 * `diff -u apr_server.c taxi_server.c` shows the port, README.md explains
 * it step by step.
 */
#include "common.h"

#include <apr_general.h>
#include <taxi/apr.h>

#include <signal.h>
#include <stdio.h>
#include <string.h>

struct server;

struct conn {
  apr_pool_t *pool; /* the connection's own: socket, this struct */
  apr_socket_t *sock;
  port_session_t session;
  struct server *srv;
  taxi_handler_t handler; /* how the reactor knows it */
};

struct server {
  port_options_t o;
  apr_pool_t *root;
  apr_socket_t *listener;
  port_counters_t count;
  taxi_reactor_t *reactor;
  taxi_lf_pool_t *lf;
  taxi_handler_t acceptor;
  taxi_handler_t stopper;
};

/* ---- one request: runs in whichever thread of the pool saw it --------- */

/* Read what arrived and answer it; 0 to keep the connection. */
static int serve(struct conn *c) {
  char buf[4096];
  apr_size_t n = sizeof buf;
  apr_status_t st = apr_socket_recv(c->sock, buf, &n);
  if (n > 0) {
    atomic_fetch_add(&c->srv->count.bytes, n);
    if (port_session_feed(&c->session, buf, n, c->sock) != APR_SUCCESS)
      return -1;
  }
  if (st == APR_SUCCESS || APR_STATUS_IS_EAGAIN(st)) return 0;
  return -1; /* APR_EOF: the client is done; anything else: failed */
}

/* The pool deactivated the handle before running this and reactivates it
 * afterwards: no other thread serves this connection meanwhile, and
 * nothing needs to be handed back.  A negative return removes it. */
static int conn_input(taxi_handler_t *h, taxi_handle_t fd, unsigned events) {
  (void)fd;
  (void)events;
  return serve(TAXI_CONTAINER_OF(h, struct conn, handler));
}

/* Runs once, after the last dispatch of the connection. */
static void conn_close(taxi_handler_t *h, taxi_handle_t fd) {
  (void)fd;
  apr_pool_destroy(TAXI_CONTAINER_OF(h, struct conn, handler)->pool);
}

static const taxi_handler_ops_t conn_ops = {.input = conn_input,
                                            .close = conn_close};

/* ---- accepting: a handler like any other ------------------------------ */

static int accept_all(taxi_handler_t *h, taxi_handle_t fd, unsigned events) {
  struct server *srv = TAXI_CONTAINER_OF(h, struct server, acceptor);
  (void)fd;
  (void)events;
  for (;;) {
    apr_pool_t *pool;
    apr_socket_t *sock;
    struct conn *c;
    if (apr_pool_create(&pool, srv->root) != APR_SUCCESS) return 0;
    if (apr_socket_accept(&sock, srv->listener, pool) != APR_SUCCESS) {
      apr_pool_destroy(pool); /* EAGAIN: no more for now */
      return 0;
    }
    apr_socket_timeout_set(sock, 0);
    c = apr_pcalloc(pool, sizeof *c);
    c->pool = pool;
    c->sock = sock;
    c->srv = srv;
    port_session_init(&c->session, srv->o.echo);
    taxi_handler_init(&c->handler, &conn_ops);
    if (taxi_apr_register_socket(srv->reactor, sock, &c->handler,
                                 TAXI_EV_READ) < 0) {
      apr_pool_destroy(pool);
      continue;
    }
    atomic_fetch_add(&srv->count.connections, 1);
  }
}

static const taxi_handler_ops_t acceptor_ops = {.input = accept_all};

/* SIGINT and SIGTERM arrive as events too, in a thread of the pool. */
static int stop(taxi_handler_t *h, int signo) {
  (void)signo;
  taxi_lf_stop(TAXI_CONTAINER_OF(h, struct server, stopper)->lf);
  return 0;
}

static const taxi_handler_ops_t stopper_ops = {.signal = stop};

static int run(struct server *srv) {
  int rc;
  taxi_handler_init(&srv->acceptor, &acceptor_ops);
  taxi_handler_init(&srv->stopper, &stopper_ops);
  /* Before any thread starts: the signals are then blocked in all. */
  if (taxi_reactor_add_signal(srv->reactor, SIGINT, &srv->stopper) < 0 ||
      taxi_reactor_add_signal(srv->reactor, SIGTERM, &srv->stopper) < 0 ||
      taxi_apr_register_socket(srv->reactor, srv->listener, &srv->acceptor,
                               TAXI_EV_READ) < 0)
    return -1;
  /* N threads in all: N - 1 of the pool's own, and this one. */
  if (srv->o.threads > 1 && taxi_lf_spawn(srv->lf, srv->o.threads - 1) < 0)
    return -1;
  rc = taxi_lf_join(srv->lf, -1, 0);
  return rc == TAXI_ESTOPPED ? 0 : -1; /* shut down, or failed */
}

int main(int argc, char **argv) {
  struct server srv;
  apr_port_t port;
  apr_status_t st;
  char err[120];
  int rc = 1;

  memset(&srv, 0, sizeof srv);
  srv.o.prog = "taxi_server";
  if (port_parse(&srv.o, argc, argv) != 0) return 2;
  if (apr_initialize() != APR_SUCCESS) return 1;
  apr_pool_create(&srv.root, NULL);

  if ((st = port_listen(&srv.listener, &port, &srv.o, srv.root))) {
    fprintf(stderr, "taxi_server: %s\n", apr_strerror(st, err, sizeof err));
    goto out;
  }
  /* The reactor and its pool of threads live as long as the root pool:
   * the reactor is bound first, so that the pool is destroyed before it. */
  taxi_reactor_options_t ro = TAXI_REACTOR_OPTIONS_INIT;
  ro.backend = srv.o.backend ? srv.o.backend : "apr";
  if ((rc = taxi_reactor_create(&srv.reactor, &ro)) < 0 ||
      (rc = taxi_apr_reactor_bind(srv.reactor, srv.root)) < 0 ||
      (rc = taxi_lf_create(&srv.lf, srv.reactor, NULL)) < 0 ||
      (rc = taxi_apr_lf_bind(srv.lf, srv.root)) < 0) {
    fprintf(stderr, "taxi_server: %s\n", taxi_strerror(rc));
    rc = rc == TAXI_ENOBACKEND || rc == TAXI_ENOTSUP ? 3 : 1;
    goto out;
  }
  rc = 1;
  printf("taxi_server: backend=%s threads=%u listening on %s:%u\n",
         taxi_reactor_backend(srv.reactor), srv.o.threads, srv.o.host,
         (unsigned)port);
  fflush(stdout);

  if (run(&srv) == 0) {
    printf("taxi_server: stopped after %lu connections, %lu bytes\n",
           atomic_load(&srv.count.connections), atomic_load(&srv.count.bytes));
    rc = 0;
  }
out:
  /* Destroys the L/F pool (joining its threads), then the reactor, whose
   * close hooks destroy the connections' pools; then every socket. */
  apr_pool_destroy(srv.root);
  apr_terminate();
  return rc;
}
