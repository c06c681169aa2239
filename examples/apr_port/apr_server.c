/* SPDX-License-Identifier: Apache-2.0 */
/*
 * examples/apr_port/apr_server.c - the line-protocol server of common.h
 * written the way APR servers are written today: one thread waits in an
 * apr_pollset and hands each readable connection to apr-util's
 * apr_thread_pool (half-sync/half-async), whose worker reads the request,
 * answers it and gives the connection back.
 *
 *     apr_server --port P [--host H] [--threads N] [--backend METHOD] [--echo]
 *
 * METHOD is the pollset method: default, epoll, poll, select, kqueue, port.
 * It prints "apr_server: method=M threads=N listening on HOST:PORT" once
 * ready, serves until SIGINT or SIGTERM, then prints what it did.
 *
 * taxi_server.c is the same server ported to taxi's Leader/Followers pool;
 * `diff -u apr_server.c taxi_server.c` shows the port, README.md explains
 * it step by step.
 */
#include "common.h"

#include <apr_general.h>
#include <apr_poll.h>
#include <apr_signal.h>
#include <apr_thread_mutex.h>
#include <apr_thread_pool.h>

#include <signal.h>
#include <stdio.h>
#include <string.h>

struct server;

struct conn {
  apr_pool_t *pool; /* the connection's own: socket, this struct */
  apr_socket_t *sock;
  port_session_t session;
  struct server *srv;
  apr_pollfd_t pfd; /* how the pollset knows it */
  int closing;      /* set by the worker: EOF or an error */
  struct conn *next_back;
};

struct server {
  port_options_t o;
  apr_pool_t *root;
  apr_socket_t *listener;
  port_counters_t count;
  apr_pollset_t *pollset;
  apr_thread_pool_t *workers;
  apr_thread_mutex_t *lock; /* guards `back` */
  struct conn *back;        /* served connections to watch again */
};

static volatile sig_atomic_t stop_requested;

static void on_signal(int signo) {
  (void)signo;
  stop_requested = 1;
}

/* ---- one request: runs in a worker of the thread pool ----------------- */

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

/* The pollset is not thread-safe for every method (poll and select refuse
 * APR_POLLSET_THREADSAFE), so a worker does not add the connection back
 * itself: it queues it and wakes the polling thread. */
static void *APR_THREAD_FUNC serve_task(apr_thread_t *t, void *arg) {
  struct conn *c = arg;
  struct server *srv = c->srv;
  (void)t;
  c->closing = serve(c) < 0;
  apr_thread_mutex_lock(srv->lock);
  c->next_back = srv->back;
  srv->back = c;
  apr_thread_mutex_unlock(srv->lock);
  apr_pollset_wakeup(srv->pollset);
  return NULL;
}

/* ---- the polling thread --------------------------------------------- */

static void accept_all(struct server *srv) {
  for (;;) {
    apr_pool_t *pool;
    apr_socket_t *sock;
    struct conn *c;
    if (apr_pool_create(&pool, srv->root) != APR_SUCCESS) return;
    if (apr_socket_accept(&sock, srv->listener, pool) != APR_SUCCESS) {
      apr_pool_destroy(pool); /* EAGAIN: no more for now */
      return;
    }
    apr_socket_timeout_set(sock, 0);
    c = apr_pcalloc(pool, sizeof *c);
    c->pool = pool;
    c->sock = sock;
    c->srv = srv;
    port_session_init(&c->session, srv->o.echo);
    c->pfd.p = pool;
    c->pfd.desc_type = APR_POLL_SOCKET;
    c->pfd.reqevents = APR_POLLIN;
    c->pfd.desc.s = sock;
    c->pfd.client_data = c;
    if (apr_pollset_add(srv->pollset, &c->pfd) != APR_SUCCESS) {
      apr_pool_destroy(pool);
      continue;
    }
    atomic_fetch_add(&srv->count.connections, 1);
  }
}

/* Watch again what the workers served; close what they finished. */
static void take_back(struct server *srv) {
  struct conn *c;
  apr_thread_mutex_lock(srv->lock);
  c = srv->back;
  srv->back = NULL;
  apr_thread_mutex_unlock(srv->lock);
  while (c) {
    struct conn *next = c->next_back;
    if (c->closing || apr_pollset_add(srv->pollset, &c->pfd) != APR_SUCCESS)
      apr_pool_destroy(c->pool); /* closes the socket */
    c = next;
  }
}

static int run(struct server *srv) {
  apr_pollfd_t lfd = {0};
  lfd.p = srv->root;
  lfd.desc_type = APR_POLL_SOCKET;
  lfd.reqevents = APR_POLLIN;
  lfd.desc.s = srv->listener;
  lfd.client_data = NULL; /* the listener; connections carry their conn */
  if (apr_pollset_add(srv->pollset, &lfd) != APR_SUCCESS) return -1;

  while (!stop_requested) {
    const apr_pollfd_t *ready;
    apr_int32_t n = 0;
    /* A signal may land in any thread; look at the flag 5 times a second. */
    apr_status_t st =
        apr_pollset_poll(srv->pollset, apr_time_from_msec(200), &n, &ready);
    if (st != APR_SUCCESS && !APR_STATUS_IS_EINTR(st) &&
        !APR_STATUS_IS_TIMEUP(st))
      return -1;
    for (apr_int32_t i = 0; i < n; i++) {
      struct conn *c = ready[i].client_data;
      if (!c) {
        accept_all(srv);
        continue;
      }
      /* Out of the set while a worker has it, so that it is not handed
       * out twice. */
      apr_pollset_remove(srv->pollset, &c->pfd);
      if (apr_thread_pool_push(srv->workers, serve_task, c,
                               APR_THREAD_TASK_PRIORITY_NORMAL,
                               NULL) != APR_SUCCESS)
        apr_pool_destroy(c->pool);
    }
    take_back(srv);
  }
  return 0;
}

static apr_pollset_method_e method_of(const char *name, int *ok) {
  static const struct {
    const char *name;
    apr_pollset_method_e m;
  } methods[] = {
      {"default", APR_POLLSET_DEFAULT}, {"epoll", APR_POLLSET_EPOLL},
      {"poll", APR_POLLSET_POLL},       {"select", APR_POLLSET_SELECT},
      {"kqueue", APR_POLLSET_KQUEUE},   {"port", APR_POLLSET_PORT}};
  *ok = 1;
  if (!name) return APR_POLLSET_DEFAULT;
  for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
    if (strcmp(methods[i].name, name) == 0) return methods[i].m;
  *ok = 0;
  return APR_POLLSET_DEFAULT;
}

int main(int argc, char **argv) {
  struct server srv;
  apr_port_t port;
  apr_status_t st;
  char err[120];
  int ok, rc = 1;

  memset(&srv, 0, sizeof srv);
  srv.o.prog = "apr_server";
  if (port_parse(&srv.o, argc, argv) != 0) return 2;
  apr_pollset_method_e method = method_of(srv.o.backend, &ok);
  if (!ok) {
    fprintf(stderr, "apr_server: unknown pollset method %s\n", srv.o.backend);
    return 2;
  }
  if (apr_initialize() != APR_SUCCESS) return 1;
  apr_pool_create(&srv.root, NULL);
  apr_signal(SIGINT, on_signal);
  apr_signal(SIGTERM, on_signal);

  if ((st = port_listen(&srv.listener, &port, &srv.o, srv.root)) ||
      (st = apr_pollset_create_ex(
           &srv.pollset, 1000, srv.root,
           APR_POLLSET_WAKEABLE | (srv.o.backend ? APR_POLLSET_NODEFAULT : 0),
           method)) ||
      (st = apr_thread_mutex_create(&srv.lock, APR_THREAD_MUTEX_DEFAULT,
                                    srv.root)) ||
      (st = apr_thread_pool_create(&srv.workers, srv.o.threads, srv.o.threads,
                                   srv.root))) {
    fprintf(stderr, "apr_server: %s\n", apr_strerror(st, err, sizeof err));
    goto out;
  }
  printf("apr_server: method=%s threads=%u listening on %s:%u\n",
         apr_pollset_method_name(srv.pollset), srv.o.threads, srv.o.host,
         (unsigned)port);
  fflush(stdout);

  if (run(&srv) == 0) {
    printf("apr_server: stopped after %lu connections, %lu bytes\n",
           atomic_load(&srv.count.connections), atomic_load(&srv.count.bytes));
    rc = 0;
  }
  /* Waits for the tasks that run; then the pool closes every socket. */
  apr_thread_pool_destroy(srv.workers);
out:
  apr_pool_destroy(srv.root);
  apr_terminate();
  return rc;
}
