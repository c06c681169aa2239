/* SPDX-License-Identifier: Apache-2.0 */
/*
 * examples/jaws/adaptive.h - what the parts of the adaptive strategy share
 * (see strategy_adaptive.c for what it does): its tunings, a connection,
 * the server's state.
 *
 *   strategy_adaptive.c  the State decision, the start and the stop
 *   adaptive_sync.c      SYNC: the pool's threads and a connection's moves
 *   adaptive_async.c     ASYNC: the Proactor's callbacks
 */
#ifndef JAWS_ADAPTIVE_H
#define JAWS_ADAPTIVE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pthread.h>

#include "../echo_common.h"
#include "../quote/quote_net.h"
#include "adapt_policy.h"
#include "http_session.h"
#include "jaws.h"
#include "jaws_os.h"
#include "jaws_tls.h"
#include "stream_common.h"

#define SWEEP_BATCH 256
#define ADAPT_PERIOD_MS 100u
#define ADAPT_PERIOD ((taxi_time_t)ADAPT_PERIOD_MS * TAXI_NSEC_PER_MSEC)
/* The open connections are sampled this often: a server ends a
 * connection once its last bytes are in the socket's buffer, so one
 * sample a period swings between none and all the clients. */
#define COUNT_PERIOD (10 * TAXI_NSEC_PER_MSEC)
/* How long a connection waits among its pool thread's pending ones for
 * its request (after its accept, or its last answer) before the Proactor
 * waits for it instead.  A client's request follows its connect, and a
 * kept-alive client's next request its last response, well within it on
 * a local network. */
#define HANDOFF_MS 5
/* A pool thread with nothing pending looks at the stop flag this often. */
#define WAIT_MS 200
/* A pool thread's connections waiting for their bytes at most (struct
 * pending), connections it accepts before it looks at them again, and
 * reads of one connection in a turn. */
#define PENDING_MAX 64
#define ACCEPT_BATCH 16
#define TURN_READS 16
/* The share of responses (smoothed) that are large for HYBRID to move
 * connections at their accept. */
#define ALL_LARGE_RATIO 0.9

enum { SYNC, ASYNC };
/* Why a connection moved: a large response, waiting for bytes, its socket
 * full, or at its accept (where nearly every response is large). */
enum { FOR_LARGE, FOR_WAITING, FOR_FULL, AT_ACCEPT, MOVE_REASONS };

struct adaptive;

/* A response kept while its connection moves, or what is left of it. */
struct kept {
  char *head; /* NULL when none is left */
  size_t head_len;
  struct vfs_file *file;
  uint64_t off, len;
  uint64_t body; /* the whole body's bytes, counted once it is sent */
  bool close;
};

struct conn {
  pthread_mutex_t lock;
  atomic_uint refs;           /* the connection's (until it is gone), sweeps' */
  int where;                  /* SYNC or ASYNC */
  taxi_handle_t fd;           /* SYNC: the blocking socket */
  struct jaws_stream_conn sc; /* ASYNC: the stream serving it */
  struct adaptive *ad;
  bool moving;
  unsigned long long answered; /* responses the session handed the sink */
  struct kept kept[HTTP_SESSION_INFLIGHT];
  unsigned nkept;
  struct conn *prev, *next; /* every connection in ASYNC, for the sweep */
};

struct adaptive {
  struct jaws_server *srv;
  taxi_io_t *io; /* ASYNC */
  taxi_stream_options_t so;
  /* The listening socket the pool accepts from; TAXI_INVALID_HANDLE
   * with --tls-only (no pool then: every connection is TLS). */
  taxi_handle_t listener;
  /* With TLS: the streams' options with the server context, and the
   * Proactor's TLS listener.  A TLS connection is served by the Proactor
   * from its accept: the pool's threads send with plain system calls. */
  taxi_stream_options_t tls_so;
  taxi_listener_t *tls_listener;
  atomic_ullong tls_accepted;
  /* The Proactor's listener on the same socket, paused unless
   * proactor_accepts; NULL where it could not be made (the pool then
   * accepts every connection and hands over those that move at once). */
  taxi_listener_t *acceptor;
  bool prepared; /* accepted sockets inherit jaws_sock_accept_waits' options */
  /* Guards alive: a pool thread opens a stream in ASYNC only while the
   * context is not being destroyed. */
  pthread_mutex_t ctx_lock;
  bool alive;
  pthread_mutex_t list_lock;
  struct conn *list;
  atomic_int state;
  /* Responses with a body answered since the last look, their body
   * bytes, and those of large ones. */
  atomic_ullong responses, bytes, large_bytes, large_responses;
  /* Responses written whole since the last look, and their body bytes. */
  atomic_ullong served, served_bytes;
  atomic_ullong moves[MOVE_REASONS];
  /* HYBRID where nearly every response is large: a new connection moves
   * at its accept (see on_adapt). */
  atomic_bool move_at_accept;
  /* move_at_accept, and the acceptor resumed: the pool threads wait on
   * pool_cond (under pool_lock) until it is false or the server stops. */
  atomic_bool proactor_accepts;
  atomic_ullong accepted; /* connections the Proactor accepted */
  pthread_mutex_t pool_lock;
  pthread_cond_t pool_cond;
  double large_ratio; /* the timer's: large responses / responses,
                         smoothed */
  atomic_ullong changes;
  /* The timer's: the decisions, when it last looked, the moves then. */
  struct adapt_policy policy;
  atomic_ullong conn_sum; /* the samples of the open connections */
  atomic_uint conn_samples;
  int64_t last_ms;
  unsigned long long last_moves;
};

struct sending {
  struct conn *c;
  struct vfs_file *file;
  uint64_t len; /* of the body */
};

/* adaptive_async.c: a stream's read callback in ASYNC; a connection the
 * Proactor accepted; the header-timeout sweep of the connections in ASYNC
 * (a timer's callback, arg the struct adaptive). */
void adaptive_on_read(taxi_stream_t *s, int status, const void *data,
                      size_t len);
void adaptive_on_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg);
void adaptive_on_sweep(taxi_io_timer_t *t, void *arg);

/* adaptive_sync.c: a new connection from `peer` (NULL when out of
 * memory); one reference fewer (freed at the last); move it to ASYNC on
 * stream s (under its lock); a pool thread's body (arg the struct
 * adaptive). */
struct conn *adaptive_conn_new(struct adaptive *ad, const char *peer);
void adaptive_conn_unref(struct conn *c);
void adaptive_become_async(struct conn *c, taxi_stream_t *s);
void *adaptive_pool_thread(void *arg);

#endif /* JAWS_ADAPTIVE_H */
