/* SPDX-License-Identifier: Apache-2.0 */
/*
 * examples/jaws/jaws.h - what the parts of the JAWS-like static-file
 * server share: its configuration, the server object every strategy runs,
 * and the strategy interface.
 *
 * The HTTP logic (http_session.c) is written once; a strategy
 * (strategy_io.c over taxi's I/O context, strategy_threads.c over blocking
 * sockets, strategy_adaptive.c over two contexts) only moves bytes between
 * sockets and sessions.  A strategy is an object with one operation, run, so
 * adding one (an adaptive strategy choosing per connection) means adding a
 * table entry, not touching the sessions.
 */
#ifndef JAWS_H
#define JAWS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <taxi/taxi.h>

struct vfs;
struct access_log;

struct jaws_config {
  const char *root;
  const char *host;
  unsigned port;
  const char *strategy;
  /* --strategy was given: without it a host whose Proactor cannot start
   * at all serves with reactive instead of adaptive (jaws.c). */
  bool strategy_given;
  const char *backend; /* NULL: taxi's choice */
  unsigned threads;    /* 0: the strategy's default */
  unsigned max_connections;
  unsigned header_timeout_ms; /* first byte of a request to its empty line */
  unsigned idle_timeout_ms;   /* nothing moved on a connection */
  /* The blocking strategies: a send that takes nothing for this long
   * ends its connection (and frees its thread). */
  unsigned send_timeout_ms;
  bool dotfiles; /* serve names that start with '.' */
  size_t cache_bytes;
  /* The largest file held in memory and sent from there (vfs.h); larger
   * ones are sent from their handle (sendfile(2), transmit-file). */
  uint64_t memory_max;
  const char *access_log; /* NULL: none */
  /* adaptive: what is large; the policy (false: measure each state,
   * true: the threshold rule), and for the threshold rule the open
   * connections at which large responses go to the Proactor (high) and
   * below which they stop (low). */
  uint64_t adapt_large;
  bool adapt_threshold;
  unsigned adapt_high, adapt_low;
  /* adaptive, Linux: a connection reaches accept once its first bytes
   * have come, or this many seconds after its handshake (0: at once). */
  unsigned defer_accept_s;
  /* HTTPS (the strategies over taxi's stream layer): the certificate
   * chain and key files (both or neither), and where TLS is served: a
   * second listener on tls_port beside the plain one (tls_port_given),
   * or the one on port (tls_only). */
  const char *tls_cert, *tls_key;
  unsigned tls_port;
  bool tls_port_given;
  bool tls_only;
};

struct jaws_server {
  struct jaws_config cfg;
  struct vfs *vfs;
  struct access_log *log;  /* NULL without --access-log */
  atomic_ullong requests;  /* answered, whatever the status */
  atomic_uint connections; /* open and admitted */
  atomic_ullong refused;   /* turned away with 503 */
  atomic_int stopping;
  bool started; /* the listening line was printed */
  /* adaptive: no completion backend works here (the default one
   * included), so it could not start. */
  bool no_proactor;
  char stop_note[384]; /* the strategy's addition to the closing line */
  /* With --tls-cert: the context of the TLS listener as started (the
   * server's reference; a reload gives the listener a new one), the TLS
   * listener (a reload's target, set by the strategy), and the reloads
   * done. */
  taxi_tls_context_t *tls;
  taxi_listener_t *tls_listener;
  atomic_uint tls_reloads;
};

/* A way of moving bytes (the State of the design: one per strategy). */
struct jaws_strategy {
  const char *name;
  /* Listen, print the listening line, serve until stopped.  Returns the
   * exit status (0, or 1 after an error it reported). */
  int (*run)(struct jaws_server *srv, const struct jaws_strategy *self);
  /* For strategy_io.c: the taxi dispatcher; for the threads, the model. */
  int kind;
};

const struct jaws_strategy *jaws_strategy_find(const char *name);

/* The strategies (strategy_io.c and strategy_threads.c). */
int jaws_run_io(struct jaws_server *srv, const struct jaws_strategy *self);
int jaws_run_threads(struct jaws_server *srv, const struct jaws_strategy *self);
/* strategy_adaptive.c: the thread pool and the Proactor at once, chosen
 * per response. */
int jaws_run_adaptive(struct jaws_server *srv,
                      const struct jaws_strategy *self);

struct http_out;
/* strategy_threads.c: send response o on blocking socket fd (the head
 * and a cached body in one call, a file's range by sendfile where the
 * system has it); 0 or -1.  o's file reference stays the caller's. */
int jaws_send_blocking(taxi_handle_t fd, const struct http_out *o);
/* strategy_threads.c: accept one connection from listener l as a blocking
 * socket (jaws_sock_accept; `prepared` and wait_ms as there, sends giving
 * up after the idle timeout) and admit it: true with *fd and peer[cap]
 * set (the peer's address with an access log, else "-", cap 2 or more)
 * and the connection counted (jaws_leave undoes it); false if none
 * came, or it was refused (answered 503 and closed).  A failing accept
 * (out of descriptors) naps first, so that a thread retrying does not
 * spin. */
bool jaws_accept_blocking(struct jaws_server *srv, taxi_handle_t l,
                          bool prepared, taxi_handle_t *fd, char *peer,
                          size_t cap, int wait_ms);

/* Admission under --max-connections: true and counted, or false (answer
 * 503 and close).  jaws_leave undoes a successful jaws_admit. */
bool jaws_admit(struct jaws_server *srv);
void jaws_leave(struct jaws_server *srv);

/* The line scripts wait for: "... listening on BOUND" and, with TLS,
 * ", tls on TLS_BOUND" after it (tls_bound NULL: no second listener) or
 * " (tls)" (tls_only: BOUND is the TLS listener). */
void jaws_print_listening(struct jaws_server *srv, const char *backend,
                          unsigned threads, const char *bound,
                          const char *tls_bound);

/* The fixed 503 answer (a static string). */
extern const char jaws_busy_response[];

#endif /* JAWS_H */
