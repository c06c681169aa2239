/* SPDX-License-Identifier: Apache-2.0 */
/*
 * examples/jaws/strategy_threads.c - the blocking strategies, on plain
 * sockets and POSIX threads as examples/quote/quote_plain.c writes them:
 *
 *   thread-per-connection  the main thread accepts; each connection gets a
 *                          thread for its lifetime;
 *   thread-per-request     the main thread polls the listener and every idle
 *                          connection; a connection with bytes to read gets
 *                          a new thread, which reads and answers its
 *                          request(s), then hands it back to the poller.
 *   thread-pool            the JAWS paper's synchronous Thread Pool
 *                          (its figure 2): --threads threads each accept a
 *                          connection and serve it to its end, so at most
 *                          that many are served at once (idle kept-alive
 *                          ones included: the model's known weakness).
 *
 * The sink sends synchronously.  Waits are at most WAIT_MS long, so every
 * thread sees the stop and its deadlines (header and idle timeouts)
 * without a timer; a send that takes nothing for --send-timeout
 * (SO_SNDTIMEO: each call waits that long at most for room) ends its
 * connection, so a client that stops reading holds its thread that long,
 * not the idle timeout's 30 s.
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../echo_common.h"
#include "../quote/quote_net.h"
#include "http_session.h"
#include "jaws.h"
#include "jaws_os.h"

#define WAIT_MS 200
#define ACCEPT_NAP_MS 10
#define MAX_CONNS 16384
#define STACK_SIZE (256 * 1024)
#define STOP_WAIT_MS 5000

enum model { PER_CONNECTION, PER_REQUEST, POOL };

#define POOL_THREADS 4 /* thread-pool without --threads */

struct tconn {
  taxi_handle_t fd;
  struct http_session *sess;
  int64_t last_ms; /* when bytes last moved */
};

static struct jaws_server *server;

/* Threads started and not yet finished. */
static pthread_mutex_t active_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t active_done = PTHREAD_COND_INITIALIZER;
static unsigned active;

int jaws_send_blocking(taxi_handle_t fd, const struct http_out *o) {
  /* The head and the body in one call: a small response is one segment. */
  if (o->file == NULL) return jaws_sock_send(fd, o->head, o->head_len);
  if (o->file->data)
    return jaws_sock_send2(fd, o->head, o->head_len, o->file->data + o->off,
                           (size_t)o->len);
  return jaws_sock_send_file(fd, o->head, o->head_len, o->file->fd, o->off,
                             o->len);
}

static int respond(void *sink, const struct http_out *o) {
  struct tconn *c = sink;
  int rc = jaws_send_blocking(c->fd, o);
  vfs_release(o->file);
  c->last_ms = jaws_now_ms();
  return rc == 0 ? 1 : -1;
}

static const struct http_sink_ops socket_sink = {respond};

static void conn_free(struct tconn *c) {
  echo_close(c->fd);
  http_session_free(c->sess);
  free(c);
  jaws_leave(server);
}

/* Serve c until it closes (per_request false) or until a request was
 * answered and nothing of the next one is buffered (true: hand it back).
 * Returns 1 to hand back, 0 when c should be closed. */
static int serve(struct tconn *c, bool per_request) {
  char buf[8192];
  unsigned long long before = atomic_load(&server->requests);
  for (;;) {
    int64_t now = jaws_now_ms(), left;
    if (atomic_load(&server->stopping)) return 0;
    if (http_session_partial(c->sess))
      left = (int64_t)server->cfg.header_timeout_ms -
             (now - c->last_ms); /* last_ms: the head's first byte or later */
    else
      left = (int64_t)server->cfg.idle_timeout_ms - (now - c->last_ms);
    if (http_session_expired(c->sess, now)) {
      http_session_timeout(c->sess);
      return 0;
    }
    if (left <= 0 && !http_session_partial(c->sess)) return 0; /* idle */
    long n = jaws_sock_recv_timed(
        c->fd, buf,
        sizeof buf < http_session_room(c->sess) ? sizeof buf
                                                : http_session_room(c->sess),
        left > WAIT_MS || left <= 0 ? WAIT_MS : (int)left);
    if (n == JAWS_SOCK_TIMEOUT) continue;
    if (n <= 0) return 0;
    if (!http_session_partial(c->sess)) c->last_ms = jaws_now_ms();
    if (http_session_feed(c->sess, buf, (size_t)n, jaws_now_ms()) == HTTP_CLOSE)
      return 0;
    if (per_request && !http_session_partial(c->sess) &&
        atomic_load(&server->requests) != before)
      return 1;
  }
}

static void active_exit(void) {
  pthread_mutex_lock(&active_lock);
  if (--active == 0) pthread_cond_broadcast(&active_done);
  pthread_mutex_unlock(&active_lock);
}

/* Wait (bounded) for the threads to finish; false if some did not. */
static bool active_wait(void) {
  int64_t end = jaws_now_ms() + STOP_WAIT_MS;
  pthread_mutex_lock(&active_lock);
  while (active && jaws_now_ms() < end) {
    pthread_mutex_unlock(&active_lock);
    jaws_sock_wait(TAXI_INVALID_HANDLE, 50); /* a portable nap */
    pthread_mutex_lock(&active_lock);
  }
  bool done = active == 0;
  pthread_mutex_unlock(&active_lock);
  return done;
}

static int spawn(void *(*fn)(void *), void *arg) {
  pthread_attr_t attr;
  pthread_t t;
  int rc;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, STACK_SIZE);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_mutex_lock(&active_lock);
  active++;
  pthread_mutex_unlock(&active_lock);
  rc = pthread_create(&t, &attr, fn, arg);
  pthread_attr_destroy(&attr);
  if (rc != 0) active_exit();
  return rc == 0 ? 0 : -1;
}

/* The listener was set up by jaws_sock_accept_waits: accept() waits by
 * itself (at most WAIT_MS) and its connections inherit their options. */
static bool accept_waits;

bool jaws_accept_blocking(struct jaws_server *srv, taxi_handle_t l,
                          bool prepared, taxi_handle_t *fd, char *peer,
                          size_t cap, int wait_ms) {
  /* The peer's address is for the access log alone. */
  bool named = srv->log != NULL;
  int rc = jaws_sock_accept(l, prepared, fd, peer, named ? cap : 0,
                            srv->cfg.send_timeout_ms, wait_ms);
  if (!named && cap >= 2) memcpy(peer, "-", 2);
  if (rc < 0) jaws_sock_wait(TAXI_INVALID_HANDLE, ACCEPT_NAP_MS);
  if (rc != 1) return false;
  if (jaws_admit(srv)) return true;
  atomic_fetch_add(&srv->refused, 1);
  /* Into the new socket's empty buffer: it never waits. */
  (void)jaws_sock_send2_now(*fd, jaws_busy_response, strlen(jaws_busy_response),
                            NULL, 0);
  echo_close(*fd);
  return false;
}

/* Accept one connection: a new tconn, or NULL (none waiting, refused). */
static struct tconn *accept_one(taxi_handle_t listener) {
  taxi_handle_t fd;
  struct tconn *c;
  char peer[64];
  if (!jaws_accept_blocking(server, listener, accept_waits, &fd, peer,
                            sizeof peer, WAIT_MS))
    return NULL;
  c = calloc(1, sizeof *c);
  if (c) c->sess = http_session_new(server, &socket_sink, c, peer);
  if (c == NULL || c->sess == NULL) {
    free(c);
    echo_close(fd);
    jaws_leave(server);
    return NULL;
  }
  c->fd = fd;
  c->last_ms = jaws_now_ms();
  return c;
}

/* ---- thread-per-connection ---------------------------------------------- */

static void *connection_thread(void *arg) {
  struct tconn *c = arg;
  serve(c, false);
  conn_free(c);
  active_exit();
  return NULL;
}

static void run_per_connection(taxi_handle_t listener) {
  while (!atomic_load(&server->stopping)) {
    struct tconn *c;
    if (jaws_sock_wait(listener, WAIT_MS) != 1) continue;
    if ((c = accept_one(listener)) != NULL && spawn(connection_thread, c) != 0)
      conn_free(c);
  }
}

/* ---- thread-pool -------------------------------------------------------- */

/* Where accept() waits by itself, the threads block in it and the kernel
 * hands each connection to one of them; elsewhere they race for each
 * connection on the non-blocking listener: the losers' accepts find
 * nothing and they wait again. */
static void *pool_thread(void *arg) {
  taxi_handle_t listener = *(const taxi_handle_t *)arg;
  while (!atomic_load(&server->stopping)) {
    struct tconn *c;
    if (!accept_waits && jaws_sock_wait(listener, WAIT_MS) != 1) continue;
    if ((c = accept_one(listener)) == NULL) continue;
    serve(c, false);
    conn_free(c);
  }
  return NULL;
}

static int run_pool(taxi_handle_t listener, unsigned n) {
  pthread_t *threads = calloc(n, sizeof *threads);
  unsigned started = 0;
  accept_waits = jaws_sock_accept_waits(listener, server->cfg.send_timeout_ms,
                                        WAIT_MS) == 1;
  for (; threads && started < n; started++)
    if (pthread_create(&threads[started], NULL, pool_thread, &listener) != 0)
      break;
  if (started < n) {
    fprintf(stderr, "jaws: cannot start %u pool threads\n", n);
    atomic_store(&server->stopping, 1);
  }
  for (unsigned i = 0; i < started; i++) pthread_join(threads[i], NULL);
  free(threads);
  return started < n ? 1 : 0;
}

/* ---- thread-per-request ------------------------------------------------- */

static struct {
  pthread_mutex_t lock;
  struct tconn *conn[MAX_CONNS];
  size_t count;
  taxi_handle_t wake[2];
} back = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void *request_thread(void *arg) {
  struct tconn *c = arg;
  if (serve(c, true)) {
    size_t n;
    pthread_mutex_lock(&back.lock);
    back.conn[back.count++] = c; /* room: every connection fits */
    pthread_mutex_unlock(&back.lock);
    (void)echo_send(back.wake[1], "", 1, &n);
  } else {
    conn_free(c);
  }
  active_exit();
  return NULL;
}

/* [0] the wake-up socket, [1] the listener, then the idle connections. */
static taxi_handle_t fds[MAX_CONNS + 2];
static unsigned char ready[MAX_CONNS + 2];
static struct tconn *idle[MAX_CONNS + 2];

static int run_per_request(taxi_handle_t listener) {
  struct quote_poll *p = quote_poll_new(MAX_CONNS + 2);
  const char *what = "out of memory";
  size_t n = 2;
  int status = 0;
  if (p == NULL || quote_pair(back.wake) != 0) {
    fprintf(stderr, "jaws: cannot start the poller\n");
    quote_poll_free(p);
    return 1;
  }
  fds[0] = back.wake[0];
  fds[1] = listener;
  while (!atomic_load(&server->stopping)) {
    size_t keep = 2, count;
    char drain[256];
    int64_t now;
    if (quote_poll_wait(p, fds, n, WAIT_MS, ready, &what) < 0) {
      fprintf(stderr, "jaws: %s\n", what);
      status = 1;
      break;
    }
    now = jaws_now_ms();
    for (size_t i = 2; i < n; i++) {
      if (ready[i]) {
        if (spawn(request_thread, idle[i]) != 0) conn_free(idle[i]);
      } else if (now - idle[i]->last_ms >=
                 (int64_t)server->cfg.idle_timeout_ms) {
        conn_free(idle[i]);
      } else {
        fds[keep] = fds[i];
        idle[keep++] = idle[i];
      }
    }
    n = keep;
    if (ready[0])
      while (echo_recv(back.wake[0], drain, sizeof drain, &count) ==
             ECHO_IO_OK) {
      }
    pthread_mutex_lock(&back.lock);
    for (size_t i = 0; i < back.count; i++) {
      fds[n] = back.conn[i]->fd;
      idle[n++] = back.conn[i];
    }
    back.count = 0;
    pthread_mutex_unlock(&back.lock);
    if (ready[1] && n < MAX_CONNS + 2) {
      struct tconn *c = accept_one(listener);
      if (c) {
        fds[n] = c->fd;
        idle[n++] = c;
      }
    }
  }
  bool done = active_wait();
  for (size_t i = 2; i < n; i++) conn_free(idle[i]);
  if (done) {
    for (size_t i = 0; i < back.count; i++) conn_free(back.conn[i]);
    back.count = 0;
    echo_close(back.wake[0]);
    echo_close(back.wake[1]);
  }
  quote_poll_free(p);
  return status;
}

static void on_stop(void) { atomic_store(&server->stopping, 1); }

int jaws_run_threads(struct jaws_server *srv,
                     const struct jaws_strategy *self) {
  taxi_handle_t listener;
  char bound[64];
  unsigned port;
  int status = 0;
  server = srv;
  if (srv->cfg.max_connections > MAX_CONNS)
    srv->cfg.max_connections = MAX_CONNS;
  if (echo_listen(srv->cfg.host, srv->cfg.port, &listener, bound, sizeof bound,
                  &port) != 0) {
    fprintf(stderr, "jaws: %s\n", echo_last_error());
    return 1;
  }
  if (quote_on_stop(on_stop) != 0)
    fprintf(stderr, "jaws: no orderly stop on SIGINT/SIGTERM\n");
  unsigned pool = srv->cfg.threads ? srv->cfg.threads : POOL_THREADS;
  jaws_print_listening(srv, "blocking", self->kind == POOL ? pool : 0, bound,
                       NULL);
  if (self->kind == POOL) {
    status = run_pool(listener, pool);
  } else if (self->kind == PER_CONNECTION) {
    run_per_connection(listener);
    if (!active_wait())
      fprintf(stderr, "jaws: connection threads still busy at exit\n");
  } else {
    status = run_per_request(listener);
  }
  echo_close(listener);
  return status;
}
