/*
 * echo_server.c - a TCP echo server on the taxi Reactor, dispatched by one
 * thread or by a pool of them.
 *
 *     echo_server --port P [--host 127.0.0.1] [--backend NAME]
 *                 [--dispatcher reactor|lf|hsha|proactor] [--threads N]
 *                 [--promotion lifo|fifo|priority|shared] [--leaders one|many]
 *     echo_server --list-backends | --list-proactor-backends
 *
 * With --report it also prints, however it ends, one last line
 *
 *     echo_server: report: status=S connections=C bytes=B
 *
 * (S the exit status), so that a test can check what was echoed even when
 * the server stopped on an error.
 *
 * It prints one line once it is ready,
 *
 *     echo_server: backend=B dispatcher=D threads=N listening on HOST:PORT
 *
 * (say "backend=epoll dispatcher=lf threads=4 listening on 127.0.0.1:40123")
 * with the port actually bound (so --port 0 works), echoes whatever each
 * client sends until SIGINT or SIGTERM, and then prints how much it did.
 *
 * The program is in three layers, so that other ways of dispatching the same
 * events replace only the last one, and a completion-based dispatcher could
 * still reuse the first:
 *
 *   1. the echo session: a buffer and the read/write steps of the protocol,
 *      which say what they want next (to read, to write, to close) and know
 *      nothing about who waits for readiness on their behalf;
 *   2. the reactor glue: event handlers (acceptor, connection, stopper) that
 *      turn readiness events into session steps and the sessions' wishes
 *      into taxi_reactor_modify() calls;
 *   3. the dispatchers, which decide which threads run the hooks:
 *      - reactor: this thread runs the event loop (taxi_reactor_run);
 *      - lf: a Leader/Followers pool (taxi/lf.h) of N threads takes turns
 *        waiting for events and runs each event's hooks in the thread that
 *        detected it;
 *      - hsha: a half-sync/half-async pool (taxi/hsha.h) whose reactor
 *        thread queues events for N worker threads that run the hooks.
 *
 * The proactor dispatcher replaces layers 1 and 2 with completion handlers
 * (echo_proactor.c): the same protocol, written once for every completion
 * backend (--backend uring|aio|emulated|iocp) and any number of threads.
 *
 * Layers 1 and 2 are the same code whichever dispatcher runs them: that is
 * the point of the example.  What they need to be correct under a pool is
 * little, because the pools never run one handle's hooks in two threads at
 * once: a connection's state is touched only by its own hooks and needs no
 * lock; only what all connections share (the counters) is atomic.
 */
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <taxi/taxi.h>

#include "echo_common.h"
#include "echo_proactor.h"

/* Exit statuses: 2 is the customary one for a bad command line; 3 means the
 * library refused the configuration asked for (say, several leaders on a
 * backend that cannot have them), so scripts can tell it from a failure. */
#define EXIT_OK 0
#define EXIT_ERROR 1
#define EXIT_USAGE 2
#define EXIT_REFUSED 3

/* How much a connection reads at a time.  A connection does not read again
 * until it has written back everything it read, so this also bounds the
 * memory a client that sends without reading can make the server hold. */
#define ECHO_BUFFER_SIZE 16384

/* How long to stop accepting after running out of descriptors. */
#define ACCEPT_BACKOFF (100 * TAXI_NSEC_PER_MSEC)

/* Who runs the hooks. */
typedef enum dispatcher {
  DISPATCH_REACTOR, /* this thread, taxi_reactor_run() */
  DISPATCH_LF,      /* a Leader/Followers pool */
  DISPATCH_HSHA,    /* a half-sync/half-async pool */
  DISPATCH_PROACTOR /* completion handlers, an L/F pool over a proactor */
} dispatcher_t;

static const char *const dispatcher_names[] = {"reactor", "lf", "hsha",
                                               "proactor"};

/* Threads a pool gets when --threads is not given. */
#define DEFAULT_POOL_THREADS 4u

struct server_config {
  const char *host;
  unsigned port;
  const char *backend; /* NULL: the library's choice */
  dispatcher_t dispatcher;
  /* Threads running hooks: 1 for the reactor; the whole pool for lf (this
   * thread included); the workers for hsha (its reactor thread aside). */
  unsigned threads;
  taxi_lf_options_t lf; /* for DISPATCH_LF */
};

/* ---- 1. the echo session ------------------------------------------------- */

/* What serve() counted, kept for --report after its state is gone. */
static unsigned long long served_connections, served_bytes;

/*
 * What the server has done, for the report at exit.  Every connection adds
 * to the same counters, from whichever thread runs its hooks, so they are
 * atomic.  Nothing is ordered by them, hence relaxed updates; the final
 * read happens after every dispatching thread has been joined.
 */
struct echo_stats {
  atomic_ullong connections;
  atomic_ullong bytes;
};

static void stats_init(struct echo_stats *st) {
  atomic_init(&st->connections, 0);
  atomic_init(&st->bytes, 0);
}

static void stats_count_connection(struct echo_stats *st) {
  atomic_fetch_add_explicit(&st->connections, 1, memory_order_relaxed);
}

static void stats_count_bytes(struct echo_stats *st, size_t n) {
  atomic_fetch_add_explicit(&st->bytes, n, memory_order_relaxed);
}

/* What a session needs next from whoever dispatches its events. */
typedef enum echo_want {
  ECHO_WANT_READ,  /* wait until the socket is readable */
  ECHO_WANT_WRITE, /* wait until the socket is writable */
  ECHO_WANT_CLOSE  /* the conversation is over (EOF or error) */
} echo_want_t;

/* One client's conversation: bytes read but not yet echoed are
 * buf[pos .. len). */
struct echo_session {
  taxi_handle_t fd;
  unsigned long id; /* for messages */
  struct echo_stats *stats;
  size_t pos, len;
  unsigned char buf[ECHO_BUFFER_SIZE];
};

static void session_init(struct echo_session *s, taxi_handle_t fd,
                         unsigned long id, struct echo_stats *stats) {
  s->fd = fd;
  s->id = id;
  s->stats = stats;
  s->pos = s->len = 0;
}

/* Write back what is buffered, as far as the socket takes it. */
static echo_want_t session_flush(struct echo_session *s) {
  while (s->pos < s->len) {
    size_t n;
    switch (echo_send(s->fd, s->buf + s->pos, s->len - s->pos, &n)) {
      case ECHO_IO_OK:
        s->pos += n;
        stats_count_bytes(s->stats, n);
        break;
      case ECHO_IO_AGAIN:
        return ECHO_WANT_WRITE; /* the client is not reading fast enough */
      default:
        fprintf(stderr, "echo_server: connection %lu: %s\n", s->id,
                echo_last_error());
        return ECHO_WANT_CLOSE;
    }
  }
  s->pos = s->len = 0;
  return ECHO_WANT_READ;
}

/* The socket is readable: read once and echo it.  One read per event keeps
 * a busy client from starving the others; if more is waiting, the socket is
 * still readable and the dispatcher calls again. */
static echo_want_t session_on_readable(struct echo_session *s) {
  size_t n;
  switch (echo_recv(s->fd, s->buf, sizeof s->buf, &n)) {
    case ECHO_IO_OK:
      s->pos = 0;
      s->len = n;
      return session_flush(s);
    case ECHO_IO_AGAIN:
      return ECHO_WANT_READ; /* a spurious wake-up: nothing to do */
    case ECHO_IO_EOF:
      return ECHO_WANT_CLOSE; /* the client is done */
    default:
      fprintf(stderr, "echo_server: connection %lu: %s\n", s->id,
              echo_last_error());
      return ECHO_WANT_CLOSE;
  }
}

/* The socket is writable again: continue the interrupted echo. */
static echo_want_t session_on_writable(struct echo_session *s) {
  return session_flush(s);
}

/* ---- 2. the reactor glue ------------------------------------------------- */

/*
 * What the handlers share.  Their hooks may run in any thread of a pool, so
 * everything here is either set before the first hook can run and only read
 * afterwards (reactor, stop, dispatch), atomic (stats, failed), or
 * thread-safe by contract (every taxi_reactor_* call).
 */
struct server {
  taxi_reactor_t *reactor;
  struct echo_stats stats;
  atomic_int failed; /* a hook met an error that ends the server */
  /* How a hook ends the server: set by the dispatcher (layer 3), which is
   * the only one to know what stopping means for it.  Called from hooks,
   * possibly from several threads at once. */
  void (*stop)(struct server *srv);
  void *dispatch; /* the dispatcher's own state, for `stop` */
};

/* A hook met an error the server cannot carry on after. */
static void server_fail(struct server *srv) {
  atomic_store(&srv->failed, 1);
  srv->stop(srv);
}

/* A connection: a session plus what the reactor needs to drive it.  Only
 * its own hooks touch it, and never two at once, whatever the dispatcher:
 * no lock. */
struct connection {
  taxi_handler_t handler;
  struct server *server;
  unsigned interest; /* TAXI_EV_READ or TAXI_EV_WRITE: what is registered */
  struct echo_session session;
};

/* Make the registration match what the session wants next.  Returns what a
 * hook should return: negative to have the connection removed. */
static int connection_follow(struct connection *c, echo_want_t want) {
  unsigned interest;
  int rc;

  if (want == ECHO_WANT_CLOSE)
    return -1; /* taxi removes the handler, then calls its close hook */
  /* Watch one direction at a time: while output is pending, not reading
   * is what pushes back on a client that sends faster than it receives. */
  interest = want == ECHO_WANT_WRITE ? TAXI_EV_WRITE : TAXI_EV_READ;
  if (interest == c->interest)
    return 0; /* the common case: no system call needed */
  rc = taxi_reactor_modify(c->server->reactor, &c->handler, interest);
  if (rc < 0) {
    fprintf(stderr, "echo_server: connection %lu: taxi_reactor_modify: %s\n",
            c->session.id, taxi_strerror(rc));
    return -1;
  }
  c->interest = interest;
  return 0;
}

static int connection_input(taxi_handler_t *h, taxi_handle_t fd,
                            unsigned events) {
  struct connection *c = TAXI_CONTAINER_OF(h, struct connection, handler);
  (void)fd;
  (void)events; /* a hang-up or error shows up as EOF or error from recv */
  return connection_follow(c, session_on_readable(&c->session));
}

static int connection_output(taxi_handler_t *h, taxi_handle_t fd,
                             unsigned events) {
  struct connection *c = TAXI_CONTAINER_OF(h, struct connection, handler);
  echo_want_t want = session_on_writable(&c->session);
  (void)fd;
  /* While only WRITE is watched, hang-ups and errors come here.  If the
   * socket still cannot take our data, it never will: give up rather than
   * be woken for the same condition forever. */
  if (want == ECHO_WANT_WRITE && (events & (TAXI_EV_HUP | TAXI_EV_ERR)))
    want = ECHO_WANT_CLOSE;
  return connection_follow(c, want);
}

/* The only place a connection's socket is closed and its memory freed: taxi
 * calls this exactly once, after removal (a hook returning -1, or the
 * reactor being destroyed) and after the last hook has returned. */
static void connection_close(taxi_handler_t *h, taxi_handle_t fd) {
  struct connection *c = TAXI_CONTAINER_OF(h, struct connection, handler);
  (void)fd;
  echo_close(c->session.fd);
  free(c);
}

static const taxi_handler_ops_t connection_ops = {
    .input = connection_input,
    .output = connection_output,
    .close = connection_close,
};

/* Take ownership of an accepted socket and start echoing on it. */
static void connection_start(struct server *srv, taxi_handle_t fd,
                             unsigned long id) {
  struct connection *c = malloc(sizeof *c);
  int rc;

  if (c == NULL) {
    fprintf(stderr, "echo_server: out of memory: dropping a connection\n");
    echo_close(fd);
    return;
  }
  /* Everything is set up before registering: under a pool, another thread
   * may run the connection's hooks, and even close and free it, before
   * taxi_reactor_register() returns.  So `c` is not touched afterwards. */
  c->server = srv;
  c->interest = TAXI_EV_READ;
  session_init(&c->session, fd, id, &srv->stats);
  taxi_handler_init(&c->handler, &connection_ops);
  rc = taxi_reactor_register(srv->reactor, fd, &c->handler, TAXI_EV_READ);
  if (rc < 0) {
    /* Not attached, so no close hook will run: clean up here.  With select
     * this is where FD_SETSIZE shows (TAXI_ETOOMANY). */
    fprintf(stderr, "echo_server: dropping a connection: %s\n",
            taxi_strerror(rc));
    echo_close(fd);
    free(c);
    return;
  }
  stats_count_connection(&srv->stats);
}

/* The listening socket's handler.  Its input hook never runs in two threads
 * at once, so `accepted` needs no lock either. */
struct acceptor {
  taxi_handler_t handler;
  taxi_timer_t backoff; /* resumes accepting after a pause, see below */
  taxi_handle_t fd;
  unsigned long accepted; /* connections accepted, to number them */
  struct server *server;
};

static int acceptor_input(taxi_handler_t *h, taxi_handle_t fd,
                          unsigned events) {
  struct acceptor *a = TAXI_CONTAINER_OF(h, struct acceptor, handler);
  taxi_reactor_t *r = a->server->reactor;
  (void)events;

  /* Take every connection that is waiting: one readiness event may stand
   * for many of them.  Registering them from whichever thread runs this
   * hook is fine: registration is thread-safe. */
  for (;;) {
    taxi_handle_t conn;
    switch (echo_accept(fd, &conn)) {
      case ECHO_IO_OK:
        connection_start(a->server, conn, ++a->accepted);
        break;
      case ECHO_IO_AGAIN:
        return 0;
      default:
        /* Almost always EMFILE/ENFILE.  The pending connection stays queued
         * and the listener stays readable, so carrying on would spin: stop
         * watching it for a moment and let connections finish. */
        fprintf(stderr, "echo_server: %s; pausing accepts\n",
                echo_last_error());
        if (taxi_reactor_suspend(r, h) == 0 &&
            taxi_reactor_schedule(r, &a->backoff, h, ACCEPT_BACKOFF, 0, NULL) ==
                0)
          return 0;
        /* Cannot pause either: a server that no longer accepts is no use. */
        server_fail(a->server);
        return -1;
    }
  }
}

static int acceptor_timeout(taxi_handler_t *h, taxi_timer_t *t, void *act) {
  struct acceptor *a = TAXI_CONTAINER_OF(h, struct acceptor, handler);
  int rc = taxi_reactor_resume(a->server->reactor, h);
  (void)t;
  (void)act;
  if (rc < 0) {
    fprintf(stderr, "echo_server: cannot resume accepting: %s\n",
            taxi_strerror(rc));
    server_fail(a->server);
  }
  return 0; /* a one-shot timer: nothing to cancel */
}

static void acceptor_close(taxi_handler_t *h, taxi_handle_t fd) {
  struct acceptor *a = TAXI_CONTAINER_OF(h, struct acceptor, handler);
  (void)fd;
  echo_close(a->fd);
  a->fd = TAXI_INVALID_HANDLE;
}

static const taxi_handler_ops_t acceptor_ops = {
    .input = acceptor_input,
    .timeout = acceptor_timeout,
    .close = acceptor_close,
};

/* Turns SIGINT and SIGTERM into an orderly stop.  The signal hook runs in a
 * dispatching thread like any other event, not in a signal handler, so it
 * may call anything, including the pools' shutdown calls. */
struct stopper {
  taxi_handler_t handler;
  struct server *server;
};

static int stopper_signal(taxi_handler_t *h, int signo) {
  struct stopper *s = TAXI_CONTAINER_OF(h, struct stopper, handler);
  (void)signo;
  s->server->stop(s->server);
  return 0;
}

static const taxi_handler_ops_t stopper_ops = {.signal = stopper_signal};

/* ---- 3. the dispatchers -------------------------------------------------- */

/* Print the backends that work here, best first, each followed by `sep`
 * except the last, which is followed by `end`. */
static void print_backends(FILE *out, const char *sep, const char *end) {
  const char *names[16]; /* far more than any platform has */
  int i, n = taxi_backend_names(names, sizeof names / sizeof names[0]);

  if (n > (int)(sizeof names / sizeof names[0]))
    n = (int)(sizeof names / sizeof names[0]);
  for (i = 0; i < n; i++) fprintf(out, "%s%s", names[i], i + 1 < n ? sep : end);
}

/* The same for the completion backends of the Proactor. */
static void print_proactor_backends(FILE *out, const char *sep,
                                    const char *end) {
  const char *const *names = taxi_proactor_backend_names();
  for (int i = 0; names[i] != NULL; i++)
    fprintf(out, "%s%s", names[i], names[i + 1] != NULL ? sep : end);
}

/* The line scripts wait for (they read the port from its end).  Flushed:
 * whoever started us may be waiting for it on a pipe. */
static void announce_backend(const char *backend,
                             const struct server_config *cfg,
                             const char *address) {
  printf("echo_server: backend=%s dispatcher=%s threads=%u listening on %s\n",
         backend, dispatcher_names[cfg->dispatcher], cfg->threads, address);
  fflush(stdout);
}

static void announce(const struct server *srv, const struct server_config *cfg,
                     const char *address) {
  announce_backend(taxi_reactor_backend(srv->reactor), cfg, address);
}

/* Report that creating a pool failed, and return the exit status: the
 * library refusing this configuration is not the same as a failure. */
static int pool_create_failed(const char *what, const struct server *srv,
                              int rc) {
  fprintf(stderr, "echo_server: %s on backend %s: %s\n", what,
          taxi_reactor_backend(srv->reactor), taxi_strerror(rc));
  return rc == TAXI_ENOTSUP || rc == TAXI_EINVAL ? EXIT_REFUSED : EXIT_ERROR;
}

/* -- reactor: one thread -- */

static void reactor_stop(struct server *srv) {
  taxi_reactor_stop(srv->reactor);
}

static int dispatch_with_reactor(struct server *srv,
                                 const struct server_config *cfg,
                                 const char *address) {
  int rc;

  srv->stop = reactor_stop;
  announce(srv, cfg, address);
  rc = taxi_reactor_run(srv->reactor); /* until reactor_stop() */
  if (rc < 0) {
    fprintf(stderr, "echo_server: event loop failed: %s\n", taxi_strerror(rc));
    return EXIT_ERROR;
  }
  return EXIT_OK;
}

/* -- lf: a Leader/Followers pool -- */

/* Runs in a pool thread.  From a hook, taxi_lf_shutdown() returns once every
 * other thread has left the pool (this thread leaves when the hook returns):
 * among them the main thread, whose taxi_lf_join() then returns. */
static void lf_stop(struct server *srv) {
  int rc = taxi_lf_shutdown((taxi_lf_pool_t *)srv->dispatch);
  /* TAXI_ESTOPPED: another hook (the other signal, say) got there first. */
  if (rc < 0 && rc != TAXI_ESTOPPED)
    fprintf(stderr, "echo_server: taxi_lf_shutdown: %s\n", taxi_strerror(rc));
}

static const char *const promotion_names[] = {"lifo", "fifo", "priority",
                                              "shared"};
static const char *const leaders_names[] = {"one", "many"};

static int dispatch_with_lf(struct server *srv, const struct server_config *cfg,
                            const char *address) {
  taxi_lf_pool_t *pool;
  char what[96];
  int rc, status = EXIT_OK;

  rc = taxi_lf_create(&pool, srv->reactor, &cfg->lf);
  if (rc < 0) {
    snprintf(what, sizeof what,
             "cannot create a Leader/Followers pool (promotion=%s, leaders=%s)",
             promotion_names[cfg->lf.promotion],
             leaders_names[cfg->lf.leaders]);
    return pool_create_failed(what, srv, rc);
  }
  /* Both set before any pool thread exists, hence before any hook reads
   * them. */
  srv->dispatch = pool;
  srv->stop = lf_stop;

  /* Threads join a pool in two ways, both shown here: N-1 are spawned by
   * the pool, and this thread lends itself as the N-th with taxi_lf_join().
   * The spawned threads inherit this thread's signal mask: see serve(). */
  if (cfg->threads > 1) {
    rc = taxi_lf_spawn(pool, cfg->threads - 1);
    if (rc < 0) {
      fprintf(stderr, "echo_server: cannot start %u pool threads: %s\n",
              cfg->threads - 1, taxi_strerror(rc));
      status = EXIT_ERROR;
      goto out;
    }
  }
  announce(srv, cfg, address);
  rc = taxi_lf_join(pool, -1, 0); /* returns 0 after lf_stop() */
  if (rc < 0) {
    fprintf(stderr, "echo_server: taxi_lf_join: %s\n", taxi_strerror(rc));
    status = EXIT_ERROR;
  }

out:
  /* Shuts down if still needed, joins the spawned threads (the one that ran
   * lf_stop() may be finishing its hook) and gives the reactor back. */
  rc = taxi_lf_destroy(pool);
  if (rc < 0) {
    fprintf(stderr, "echo_server: taxi_lf_destroy: %s\n", taxi_strerror(rc));
    status = EXIT_ERROR;
  }
  return status;
}

/* -- hsha: a half-sync/half-async pool -- */

/*
 * The pool runs its own threads, so the main thread has nothing to do but
 * wait until a hook decides the server is done, then destroy the pool
 * (which no hook of the pool may do).  It waits in a second reactor with
 * nothing registered: taxi_reactor_run() blocks until taxi_reactor_stop(),
 * which any thread may call, and since "stopped" stays set a stop that
 * comes before the wait is not lost.  A mutex and condition variable would
 * do as well, but this keeps the example to portable C and taxi calls.
 */
struct hsha_dispatch {
  _Atomic(taxi_hsha_pool_t *) pool; /* NULL until taxi_hsha_create returns */
  taxi_reactor_t *done;             /* main waits in it; stopped when done */
};

/* Runs in a worker.  From a hook, taxi_hsha_shutdown() returns once every
 * other thread has left; then the main thread may proceed. */
static void hsha_stop(struct server *srv) {
  struct hsha_dispatch *d = srv->dispatch;
  /* The workers start inside taxi_hsha_create(), so a signal already
   * pending can reach this hook before the pool pointer is published; the
   * main thread's taxi_hsha_destroy() shuts the pool down then. */
  taxi_hsha_pool_t *pool = atomic_load(&d->pool);
  int rc = pool != NULL ? taxi_hsha_shutdown(pool) : 0;

  if (rc == TAXI_ESTOPPED)
    return; /* another hook got there first, and wakes the main thread */
  if (rc < 0)
    fprintf(stderr, "echo_server: taxi_hsha_shutdown: %s\n", taxi_strerror(rc));
  taxi_reactor_stop(d->done);
}

static int dispatch_with_hsha(struct server *srv,
                              const struct server_config *cfg,
                              const char *address) {
  struct hsha_dispatch d;
  taxi_hsha_options_t opts;
  taxi_hsha_pool_t *pool;
  int rc, status = EXIT_OK;

  rc = taxi_reactor_create(&d.done, taxi_reactor_backend(srv->reactor));
  if (rc < 0) {
    fprintf(stderr, "echo_server: cannot create a reactor to wait in: %s\n",
            taxi_strerror(rc));
    return EXIT_ERROR;
  }
  atomic_init(&d.pool, NULL);
  srv->dispatch = &d;
  srv->stop = hsha_stop;

  memset(&opts, 0, sizeof opts);
  opts.workers = cfg->threads;
  rc = taxi_hsha_create(&pool, srv->reactor, &opts); /* starts the threads */
  if (rc < 0) {
    status = pool_create_failed("cannot create a half-sync/half-async pool",
                                srv, rc);
    goto out;
  }
  atomic_store(&d.pool, pool);
  announce(srv, cfg, address);

  rc = taxi_reactor_run(d.done); /* returns 0 once hsha_stop() has run */
  if (rc < 0) {
    fprintf(stderr, "echo_server: cannot wait for the pool: %s\n",
            taxi_strerror(rc));
    status = EXIT_ERROR;
  }
  /* Joins the threads (the worker that ran hsha_stop() may be finishing its
   * hook) and gives the reactor back. */
  rc = taxi_hsha_destroy(pool);
  if (rc < 0) {
    fprintf(stderr, "echo_server: taxi_hsha_destroy: %s\n", taxi_strerror(rc));
    status = EXIT_ERROR;
  }

out:
  taxi_reactor_destroy(d.done);
  return status;
}

/* -- proactor: completion handlers, dispatched by an L/F pool -- */

/* What echo_proactor_serve() calls back into: the announcement, and the
 * main thread's wait for a stop signal, which runs the reactor that only
 * watches SIGINT and SIGTERM (its stopper hook calls reactor_stop). */
struct proactor_dispatch {
  struct server *srv;
  const struct server_config *cfg;
  const char *address;
};

static void proactor_announce(const char *backend, void *arg) {
  struct proactor_dispatch *d = arg;
  announce_backend(backend, d->cfg, d->address);
}

static int proactor_wait_for_stop(void *arg) {
  struct proactor_dispatch *d = arg;
  int rc = taxi_reactor_run(d->srv->reactor);
  if (rc < 0)
    fprintf(stderr, "echo_server: waiting for signals: %s\n",
            taxi_strerror(rc));
  return rc < 0 ? -1 : 0;
}

static int dispatch_with_proactor(struct server *srv,
                                  const struct server_config *cfg,
                                  const char *address, taxi_handle_t listener) {
  struct proactor_dispatch d = {srv, cfg, address};
  struct echo_proactor_config pc;
  pc.backend = cfg->backend;
  pc.threads = cfg->threads;
  pc.announce = proactor_announce;
  pc.announce_arg = &d;
  pc.wait_for_stop = proactor_wait_for_stop;
  pc.stop_arg = &d;
  pc.connections = &srv->stats.connections;
  pc.bytes = &srv->stats.bytes;
  srv->stop = reactor_stop;
  return echo_proactor_serve(&pc, listener);
}

/* -- what every dispatcher shares: set up, dispatch, tear down -- */

static int serve(const struct server_config *cfg) {
  static const int stop_signals[] = {SIGINT, SIGTERM};
  struct server srv;
  struct acceptor acceptor;
  struct stopper stopper;
  char address[80];
  unsigned bound_port;
  size_t i;
  int rc, status = EXIT_OK;

  srv.reactor = NULL;
  stats_init(&srv.stats);
  atomic_init(&srv.failed, 0);
  srv.stop = reactor_stop; /* each dispatcher sets its own */
  srv.dispatch = NULL;
  /* The proactor dispatcher uses the reactor for signals only, and
   * --backend names its completion backend instead. */
  rc = taxi_reactor_create(
      &srv.reactor, cfg->dispatcher == DISPATCH_PROACTOR ? NULL : cfg->backend);
  if (rc == TAXI_ENOBACKEND && cfg->backend != NULL) {
    fprintf(stderr,
            "echo_server: backend '%s' is not available here; "
            "available: ",
            cfg->backend);
    print_backends(stderr, ", ", "\n");
    return EXIT_USAGE;
  }
  if (rc < 0) {
    fprintf(stderr, "echo_server: cannot create the reactor: %s\n",
            taxi_strerror(rc));
    return EXIT_ERROR;
  }

  /* From here on, every handler attached to the reactor is cleaned up by
   * taxi_reactor_destroy() through its close hook, however we leave. */
  acceptor.server = &srv;
  acceptor.accepted = 0;
  if (echo_listen(cfg->host, cfg->port, &acceptor.fd, address, sizeof address,
                  &bound_port) != 0) {
    fprintf(stderr, "echo_server: %s\n", echo_last_error());
    status = EXIT_ERROR;
    goto out;
  }
  taxi_handler_init(&acceptor.handler, &acceptor_ops);
  taxi_timer_init(&acceptor.backoff);
  rc = cfg->dispatcher == DISPATCH_PROACTOR
           ? 0 /* the proactor accepts instead */
           : taxi_reactor_register(srv.reactor, acceptor.fd, &acceptor.handler,
                                   TAXI_EV_READ);
  if (rc < 0) {
    fprintf(stderr, "echo_server: cannot watch the listening socket: %s\n",
            taxi_strerror(rc));
    echo_close(acceptor.fd); /* not attached: its close hook will not run */
    status = EXIT_ERROR;
    goto out;
  }

  /*
   * Signals go to the same reactor, so their hook runs in whichever thread
   * dispatches it.  This must come BEFORE any pool thread is created: on
   * Linux the reactor reads signals from a signalfd, which works only while
   * the signal is blocked in every thread of the process.  add_signal
   * blocks it in this thread, and threads created afterwards inherit this
   * thread's mask; a thread created earlier would still have it unblocked,
   * and a SIGINT delivered to that thread would kill the process.
   */
  stopper.server = &srv;
  taxi_handler_init(&stopper.handler, &stopper_ops);
  for (i = 0; i < sizeof stop_signals / sizeof stop_signals[0]; i++) {
    rc =
        taxi_reactor_add_signal(srv.reactor, stop_signals[i], &stopper.handler);
    if (rc == TAXI_ENOTSUP) {
      /* No signal support on this platform: Ctrl-C simply ends the process
       * (the OS reclaims everything), we just skip the report. */
      fprintf(stderr, "echo_server: note: %s; no orderly stop on signals\n",
              taxi_strerror(rc));
      break;
    }
    if (rc < 0) {
      fprintf(stderr, "echo_server: cannot handle signal %d: %s\n",
              stop_signals[i], taxi_strerror(rc));
      status = EXIT_ERROR;
      goto out;
    }
  }

  /* Each returns once the server was stopped and its threads are gone. */
  switch (cfg->dispatcher) {
    case DISPATCH_LF:
      status = dispatch_with_lf(&srv, cfg, address);
      break;
    case DISPATCH_HSHA:
      status = dispatch_with_hsha(&srv, cfg, address);
      break;
    case DISPATCH_PROACTOR:
      /* Takes the listener, and closes it. */
      status = dispatch_with_proactor(&srv, cfg, address, acceptor.fd);
      break;
    default:
      status = dispatch_with_reactor(&srv, cfg, address);
      break;
  }
  if (status == EXIT_OK && atomic_load(&srv.failed)) status = EXIT_ERROR;

out:
  /* Closes the listener and every open connection via their close hooks. */
  rc = taxi_reactor_destroy(srv.reactor);
  if (rc < 0) {
    fprintf(stderr, "echo_server: cannot destroy the reactor: %s\n",
            taxi_strerror(rc));
    if (status == EXIT_OK) status = EXIT_ERROR;
  }
  served_connections = atomic_load(&srv.stats.connections);
  served_bytes = atomic_load(&srv.stats.bytes);
  if (status == EXIT_OK) {
    printf("echo_server: stopped after %llu connections, %llu bytes echoed\n",
           atomic_load(&srv.stats.connections), atomic_load(&srv.stats.bytes));
    fflush(stdout);
  }
  return status;
}

/* ---- command line -------------------------------------------------------- */

static void usage(FILE *out) {
  fprintf(
      out,
      "usage: echo_server --port P [--host ADDR] [--backend NAME]\n"
      "                   [--dispatcher reactor|lf|hsha|proactor]\n"
      "                   [--threads N]\n"
      "                   [--promotion lifo|fifo|priority|shared]\n"
      "                   [--leaders one|many]\n"
      "       echo_server --list-backends | --list-proactor-backends\n"
      "  --port P         TCP port to listen on (0: any free port)\n"
      "  --host ADDR      address to listen on (default 127.0.0.1)\n"
      "  --backend NAME   event backend (default: the best available);\n"
      "                   with --dispatcher proactor, the completion\n"
      "                   backend (uring, aio, emulated, iocp, ...)\n"
      "  --dispatcher D   who runs the handlers: reactor (this thread,\n"
      "                   the default), lf (a Leader/Followers pool) or\n"
      "                   hsha (a half-sync/half-async pool) or\n"
      "                   proactor (completion handlers, run by a\n"
      "                   Leader/Followers pool)\n"
      "  --threads N      threads running handlers (default 4 for lf and\n"
      "                   hsha; reactor: 1 only).  lf: the whole pool,\n"
      "                   main thread included; hsha: the workers, besides\n"
      "                   the pool's reactor thread; proactor: the pool\n"
      "  --promotion P    lf: which follower leads next (default lifo)\n"
      "  --leaders L      lf: one thread waits for events at a time, or\n"
      "                   many at once (epoll, kqueue; default one)\n"
      "  --list-backends  print the backends that work here, one a line\n"
      "  --list-proactor-backends  the same for completion backends\n"
      "  --report         print a last line with the exit status and what\n"
      "                   was echoed, however the server ends\n"
      "exit status: 0 stopped by SIGINT/SIGTERM, 1 failure, 2 bad usage,\n"
      "             3 configuration refused by the library\n");
}

/* The index of `value` in names[0 .. n), or -1 after a message. */
static int parse_choice(const char *option, const char *value,
                        const char *const *names, int n) {
  int i;
  for (i = 0; i < n; i++)
    if (strcmp(value, names[i]) == 0) return i;
  fprintf(stderr, "echo_server: invalid %s '%s'; one of:", option, value);
  for (i = 0; i < n; i++) fprintf(stderr, " %s", names[i]);
  fprintf(stderr, "\n");
  return -1;
}

#define COUNT_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

static void print_report(int status) {
  fflush(stdout);
  fprintf(stderr,
          "echo_server: report: status=%d connections=%llu bytes=%llu\n",
          status, served_connections, served_bytes);
}

int main(int argc, char **argv) {
  struct server_config cfg;
  const char *lf_option = NULL; /* an lf-only option given, for a message */
  int have_port = 0, have_threads = 0, report = 0, status, i = 1;

  memset(&cfg, 0, sizeof cfg);
  cfg.host = "127.0.0.1";
  cfg.dispatcher = DISPATCH_REACTOR;
  cfg.lf.promotion = TAXI_PROMOTE_LIFO;
  cfg.lf.leaders = TAXI_LEADERS_ONE;

  while (i < argc) {
    const char *value;
    int m, k;
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      return EXIT_OK;
    }
    if (strcmp(argv[i], "--list-backends") == 0) {
      print_backends(stdout, "\n", "\n");
      return EXIT_OK;
    }
    if (strcmp(argv[i], "--list-proactor-backends") == 0) {
      print_proactor_backends(stdout, "\n", "\n");
      return EXIT_OK;
    }
    if (strcmp(argv[i], "--report") == 0) {
      report = 1;
      i++;
      continue;
    }
    if ((m = echo_option(argc, argv, &i, "--port", &value)) > 0) {
      if (echo_parse_port(value, &cfg.port) != 0) {
        fprintf(stderr, "echo_server: invalid port '%s'\n", value);
        return EXIT_USAGE;
      }
      have_port = 1;
    } else if (m == 0 &&
               (m = echo_option(argc, argv, &i, "--host", &value)) > 0) {
      cfg.host = value;
    } else if (m == 0 &&
               (m = echo_option(argc, argv, &i, "--backend", &value)) > 0) {
      cfg.backend = value;
    } else if (m == 0 &&
               (m = echo_option(argc, argv, &i, "--dispatcher", &value)) > 0) {
      k = parse_choice("dispatcher", value, dispatcher_names,
                       COUNT_OF(dispatcher_names));
      if (k < 0) return EXIT_USAGE;
      cfg.dispatcher = (dispatcher_t)k;
    } else if (m == 0 &&
               (m = echo_option(argc, argv, &i, "--threads", &value)) > 0) {
      unsigned long n;
      if (echo_parse_count(value, 1, TAXI_LF_MAX_THREADS, &n) != 0) {
        fprintf(stderr, "echo_server: invalid thread count '%s' (1 to %u)\n",
                value, TAXI_LF_MAX_THREADS);
        return EXIT_USAGE;
      }
      cfg.threads = (unsigned)n;
      have_threads = 1;
    } else if (m == 0 &&
               (m = echo_option(argc, argv, &i, "--promotion", &value)) > 0) {
      k = parse_choice("promotion", value, promotion_names,
                       COUNT_OF(promotion_names));
      if (k < 0) return EXIT_USAGE;
      cfg.lf.promotion = (taxi_promotion_t)k;
      lf_option = "--promotion";
    } else if (m == 0 &&
               (m = echo_option(argc, argv, &i, "--leaders", &value)) > 0) {
      k = parse_choice("leaders", value, leaders_names,
                       COUNT_OF(leaders_names));
      if (k < 0) return EXIT_USAGE;
      cfg.lf.leaders = (taxi_leaders_t)k;
      lf_option = "--leaders";
    } else {
      if (m == 0)
        fprintf(stderr, "echo_server: unknown argument '%s'\n", argv[i]);
      usage(stderr);
      return EXIT_USAGE;
    }
  }
  if (!have_port) {
    fprintf(stderr, "echo_server: --port is required\n");
    usage(stderr);
    return EXIT_USAGE;
  }
  if (cfg.dispatcher == DISPATCH_REACTOR && have_threads && cfg.threads != 1) {
    fprintf(stderr,
            "echo_server: --dispatcher reactor runs the handlers in one "
            "thread; --threads must be 1 (use --dispatcher lf or hsha for "
            "more)\n");
    return EXIT_USAGE;
  }
  if (cfg.dispatcher == DISPATCH_HSHA && cfg.threads > TAXI_HSHA_MAX_WORKERS) {
    fprintf(stderr, "echo_server: --dispatcher hsha takes at most %u threads\n",
            TAXI_HSHA_MAX_WORKERS);
    return EXIT_USAGE;
  }
  if (cfg.dispatcher != DISPATCH_LF && lf_option != NULL) {
    fprintf(stderr, "echo_server: %s applies to --dispatcher lf only\n",
            lf_option);
    return EXIT_USAGE;
  }
  if (!have_threads)
    cfg.threads = cfg.dispatcher == DISPATCH_REACTOR ? 1 : DEFAULT_POOL_THREADS;

  if (echo_net_init() != 0) {
    fprintf(stderr, "echo_server: %s\n", echo_last_error());
    return EXIT_ERROR;
  }
  status = serve(&cfg);
  if (report) print_report(status);
  echo_net_cleanup();
  return status;
}
