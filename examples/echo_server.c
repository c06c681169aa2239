/*
 * echo_server.c - a TCP echo server on the taxi Reactor.
 *
 *     echo_server --port P [--host 127.0.0.1] [--backend NAME]
 *     echo_server --list-backends
 *
 * It prints one line once it is ready,
 *
 *     echo_server: backend=epoll listening on 127.0.0.1:40123
 *
 * with the port actually bound (so --port 0 works), echoes whatever each
 * client sends until SIGINT or SIGTERM, and then prints how much it did.
 *
 * The program is in three layers, so that other ways of dispatching the same
 * events (say, a pool of threads sharing the reactor) replace only the last
 * one, and a completion-based dispatcher could still reuse the first:
 *
 *   1. the echo session: a buffer and the read/write steps of the protocol,
 *      which say what they want next (to read, to write, to close) and know
 *      nothing about who waits for readiness on their behalf;
 *   2. the reactor glue: event handlers (acceptor, connection, stopper) that
 *      turn readiness events into session steps and the sessions' wishes
 *      into taxi_reactor_modify() calls;
 *   3. the dispatcher: serve_with_reactor() creates the reactor, wires the
 *      handlers to it and runs the event loop in this thread.
 */
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <taxi/taxi.h>

#include "echo_common.h"

/* Exit statuses: 2 is the customary one for a bad command line. */
#define EXIT_OK 0
#define EXIT_ERROR 1
#define EXIT_USAGE 2

/* How much a connection reads at a time.  A connection does not read again
 * until it has written back everything it read, so this also bounds the
 * memory a client that sends without reading can make the server hold. */
#define ECHO_BUFFER_SIZE 16384

/* How long to stop accepting after running out of descriptors. */
#define ACCEPT_BACKOFF (100 * TAXI_NSEC_PER_MSEC)

struct server_config {
  const char *host;
  unsigned port;
  const char *backend; /* NULL: the library's choice */
};

/* ---- 1. the echo session ------------------------------------------------- */

/*
 * What the server has done, for the report at exit.  Every connection adds
 * to the same counters; with a dispatcher that runs hooks in several threads
 * these two functions are the place to make the updates atomic.
 */
struct echo_stats {
  unsigned long long connections;
  unsigned long long bytes;
};

static void stats_count_connection(struct echo_stats *st) { st->connections++; }

static void stats_count_bytes(struct echo_stats *st, size_t n) {
  st->bytes += n;
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

/* Recover the object a taxi_handler_t is embedded in. */

struct server {
  taxi_reactor_t *reactor;
  struct echo_stats stats;
  int failed; /* a hook met an error that ends the server */
};

/* A connection: a session plus what the reactor needs to drive it. */
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
static void connection_start(struct server *srv, taxi_handle_t fd) {
  struct connection *c = malloc(sizeof *c);
  int rc;

  if (c == NULL) {
    fprintf(stderr, "echo_server: out of memory: dropping a connection\n");
    echo_close(fd);
    return;
  }
  c->server = srv;
  c->interest = TAXI_EV_READ;
  session_init(&c->session, fd, (unsigned long)srv->stats.connections + 1,
               &srv->stats);
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

/* The listening socket's handler. */
struct acceptor {
  taxi_handler_t handler;
  taxi_timer_t backoff; /* resumes accepting after a pause, see below */
  taxi_handle_t fd;
  struct server *server;
};

static int acceptor_input(taxi_handler_t *h, taxi_handle_t fd,
                          unsigned events) {
  struct acceptor *a = TAXI_CONTAINER_OF(h, struct acceptor, handler);
  taxi_reactor_t *r = a->server->reactor;
  (void)events;

  /* Take every connection that is waiting: one readiness event may stand
   * for many of them. */
  for (;;) {
    taxi_handle_t conn;
    switch (echo_accept(fd, &conn)) {
      case ECHO_IO_OK:
        connection_start(a->server, conn);
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
        a->server->failed = 1;
        taxi_reactor_stop(r);
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
    a->server->failed = 1;
    taxi_reactor_stop(a->server->reactor);
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

/* Turns SIGINT and SIGTERM into an orderly stop.  The signal hook runs in
 * the dispatching thread like any other event, not in a signal handler, so
 * it may call anything. */
struct stopper {
  taxi_handler_t handler;
  taxi_reactor_t *reactor;
};

static int stopper_signal(taxi_handler_t *h, int signo) {
  struct stopper *s = TAXI_CONTAINER_OF(h, struct stopper, handler);
  (void)signo;
  taxi_reactor_stop(s->reactor);
  return 0;
}

static const taxi_handler_ops_t stopper_ops = {.signal = stopper_signal};

/* ---- 3. the dispatcher --------------------------------------------------- */

/* Print the backends that work here, best first, each followed by `sep`
 * except the last, which is followed by `end`. */
static void print_backends(FILE *out, const char *sep, const char *end) {
  const char *names[16]; /* far more than any platform has */
  int i, n = taxi_backend_names(names, sizeof names / sizeof names[0]);

  if (n > (int)(sizeof names / sizeof names[0]))
    n = (int)(sizeof names / sizeof names[0]);
  for (i = 0; i < n; i++) fprintf(out, "%s%s", names[i], i + 1 < n ? sep : end);
}

static int serve_with_reactor(const struct server_config *cfg) {
  static const int stop_signals[] = {SIGINT, SIGTERM};
  struct server srv;
  struct acceptor acceptor;
  struct stopper stopper;
  char address[80];
  unsigned bound_port;
  size_t i;
  int rc, status = EXIT_OK;

  memset(&srv, 0, sizeof srv);
  rc = taxi_reactor_create(&srv.reactor, cfg->backend);
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
  if (echo_listen(cfg->host, cfg->port, &acceptor.fd, address, sizeof address,
                  &bound_port) != 0) {
    fprintf(stderr, "echo_server: %s\n", echo_last_error());
    status = EXIT_ERROR;
    goto out;
  }
  taxi_handler_init(&acceptor.handler, &acceptor_ops);
  taxi_timer_init(&acceptor.backoff);
  rc = taxi_reactor_register(srv.reactor, acceptor.fd, &acceptor.handler,
                             TAXI_EV_READ);
  if (rc < 0) {
    fprintf(stderr, "echo_server: cannot watch the listening socket: %s\n",
            taxi_strerror(rc));
    echo_close(acceptor.fd); /* not attached: its close hook will not run */
    status = EXIT_ERROR;
    goto out;
  }

  stopper.reactor = srv.reactor;
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

  /* Flush: whoever started us may be waiting for this line on a pipe. */
  printf("echo_server: backend=%s listening on %s\n",
         taxi_reactor_backend(srv.reactor), address);
  fflush(stdout);

  rc = taxi_reactor_run(srv.reactor);
  if (rc < 0) {
    fprintf(stderr, "echo_server: event loop failed: %s\n", taxi_strerror(rc));
    status = EXIT_ERROR;
  } else if (srv.failed) {
    status = EXIT_ERROR;
  }

out:
  /* Closes the listener and every open connection via their close hooks. */
  rc = taxi_reactor_destroy(srv.reactor);
  if (rc < 0) {
    fprintf(stderr, "echo_server: cannot destroy the reactor: %s\n",
            taxi_strerror(rc));
    status = EXIT_ERROR;
  }
  if (status == EXIT_OK) {
    printf("echo_server: stopped after %llu connections, %llu bytes echoed\n",
           srv.stats.connections, srv.stats.bytes);
    fflush(stdout);
  }
  return status;
}

/* ---- command line -------------------------------------------------------- */

static void usage(FILE *out) {
  fprintf(out,
          "usage: echo_server --port P [--host ADDR] [--backend NAME]\n"
          "       echo_server --list-backends\n"
          "  --port P         TCP port to listen on (0: any free port)\n"
          "  --host ADDR      address to listen on (default 127.0.0.1)\n"
          "  --backend NAME   event backend (default: the best available)\n"
          "  --list-backends  print the backends that work here, one a line\n");
}

int main(int argc, char **argv) {
  struct server_config cfg = {"127.0.0.1", 0, NULL};
  int have_port = 0, status, i = 1;

  while (i < argc) {
    const char *value;
    int m;
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      return EXIT_OK;
    }
    if (strcmp(argv[i], "--list-backends") == 0) {
      print_backends(stdout, "\n", "\n");
      return EXIT_OK;
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

  if (echo_net_init() != 0) {
    fprintf(stderr, "echo_server: %s\n", echo_last_error());
    return EXIT_ERROR;
  }
  status = serve_with_reactor(&cfg);
  echo_net_cleanup();
  return status;
}
