/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/stream/listener_impl.h - a listener's state and an application
 * timer's, as listener.c, io_timer.c, the drivers (io_reactive.c,
 * io_proactive.c) and the context's lists share them.  Included by
 * core/stream/io_impl.h, whose head says how the wing's files call one
 * another; include that one.
 */
#ifndef TAXI_CORE_LISTENER_IMPL_H
#define TAXI_CORE_LISTENER_IMPL_H

#include "core/stream/io_impl.h"

/* ---- listeners ------------------------------------------------------------
 */

/* A connection accepted while its listener was paused, not yet handed
 * over (Proactor driver). */
struct taxi__kept_conn {
  taxi_handle_t fd;
  taxi_addr_t peer;
};

struct taxi_listener {
  taxi_io_t *io;
  const taxi__listener_ops_t *ops;
  taxi_handle_t fd;
  taxi__mutex_t lock;
  taxi_listener_t *prev, *next; /* in io->listeners */
  taxi_accept_fn fn;
  void *arg;
  void (*on_close)(taxi_listener_t *l, void *arg);
  /* sopts.tls may change (taxi_listener_set_tls): under lock. */
  taxi_stream_options_t sopts;
  taxi_addr_t local;
  bool closing, released;
  bool keep_socket; /* adopted with TAXI_LISTEN_KEEP_SOCKET: not closed */
  bool held;        /* paused by the application (taxi_listener_pause) */
  /* A sharded listener (TAXI_LISTEN_SHARDED) is a chain of members, each
   * with its socket (sharing the address) and its driver state: the first
   * is the one the application has, whose callbacks, posts and on_close
   * serve all of them; the others point to it (lead) and are on no list
   * of the context.  The first is released once every member has been
   * (live counts them, under its lock; released_own: its own release
   * came).  Members never change once made. */
  taxi_listener_t *lead;        /* a member other than the first: the first */
  taxi_listener_t *next_member; /* the chain, from the first */
  unsigned live;
  bool released_own;
  bool sharded; /* its streams stay on the proactor that accepted them */
  /* taxi_listener_post: the functions not yet run, and whether the driver
   * was asked for a run (under lock); cb_lock is held while an accept
   * callback or a posted function runs, which serialises them (taken
   * before lock, never while it is held). */
  taxi__post_queue_t posts;
  bool post_kicked;
  taxi__mutex_t cb_lock;
  /* The next pause after an accept that found no descriptor, and the
   * consecutive failures of any other kind (core/common/backoff.h). */
  taxi_time_t backoff;
  taxi__backoff_t other;
  unsigned failures; /* consecutive failed accepts, of any kind */
  union {
    struct {
      taxi_handler_t h;
      taxi_timer_t timer;
      taxi_timer_t post; /* runs the posts */
      /* Edge-triggered: the next batch of accepts after a full one (no
       * report would come for the connections still queued). */
      taxi_timer_t more;
      bool paused;
    } r;
    struct {
      taxi_proactor_t *px; /* the proactor it accepts on */
      taxi_op_t aop, bop;
      taxi_op_t pop; /* runs the posts (counted in inflight) */
      unsigned inflight;
      bool attached;
      /* aop (the accept) and bop (the pause after a failure, or the
       * hand-over of kept connections) are in flight: each is cleared
       * under the lock by its last completion. */
      bool accepting, backing_off;
      /* Connections the accept delivered while the listener was paused,
       * kept for the callback until it resumes (see
       * core/stream/io_proactive.c); `kept` is allocated at the first pause.
       * handing: a thread is passing them to the callback. */
      struct taxi__kept_conn *kept;
      unsigned nkept;
      bool handing;
    } p;
  } d;
};

/* A connection was accepted on l: make its stream and hand it over. */
void taxi__listener_accepted(taxi_listener_t *l, taxi_handle_t fd,
                             const taxi_addr_t *peer, taxi_proactor_t *home);
/* Accepting failed with rc: count it; returns how long to pause. */
taxi_time_t taxi__listener_failed(taxi_listener_t *l, int rc);
/* Accepting worked again: the next pause starts short. */
void taxi__listener_recovered(taxi_listener_t *l);
/* Nothing of l can run any more: its posts cancelled, on_close, then
 * free. */
void taxi__listener_released(taxi_listener_t *l);
/* In a dispatching thread, as the driver's listener_post asked: run the
 * functions posted to l before this call, until l is closed
 * (core/stream/post.c). */
void taxi__listener_run_posts(taxi_listener_t *l);

/* ---- timers ---------------------------------------------------------------
 */

struct taxi_io_timer {
  taxi_io_t *io;
  const taxi__timer_ops_t *ops;
  taxi_io_timer_fn fn;
  void *arg;
  taxi__mutex_t lock;
  taxi_io_timer_t *prev, *next; /* in io->timers */
  bool destroying;
  bool internal; /* the library's own (the resolver's): not counted */
  union {
    struct {
      taxi_handler_t h;
      taxi_timer_t t;
      bool attached;
    } r;
    struct {
      taxi_op_t op;
      bool busy;    /* op in flight */
      bool armed;   /* should fire */
      bool running; /* fn running */
      bool restart; /* start op again when it completes */
      taxi_time_t deadline, period;
    } p;
  } d;
};

/* Run t's callback (counts it). */
void taxi__timer_fire(taxi_io_timer_t *t);
/* Unlink and free t (nothing of it runs any more). */
void taxi__timer_free(taxi_io_timer_t *t);

#endif /* TAXI_CORE_LISTENER_IMPL_H */
