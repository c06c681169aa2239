/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/pools/dispatch_source.h - the pools wing: the thread pools that
 * dispatch a reactor or a proactor, and what they dispatch, the steps of
 * an event source as a small table.
 *
 * The Leader/Followers pool is written once against this table and runs
 * over two sources: a reactor (ready handles, timers, signals,
 * notifications) and a proactor (completions).  Each step has the meaning
 * of the reactor's taxi__reactor_*_locked function of the same name
 * (core/reactor/reactor_impl.h); the source's lock is held on entry and on
 * return.
 *
 * The files:
 *   reactor_source.c   the reactor as a source
 *   proactor_source.c  the proactor as a source, and taxi_lf_create_proactor
 *   lf_control.c       the L/F pool's public calls (create, spawn, join,
 *                      shrink, stop, wait, destroy, statistics)
 *   lf_pool.c          the L/F loop, its thread records, taking part for
 *                      a caller (lf_bound.h)
 *   lf_followers.c     the followers' queue and the promotion orders
 *   lf_options.c       reading the L/F options
 *   lf_impl.h          the L/F pool's private state
 *   lf_bound.c         the table of expected replies (bound hand-off)
 *   lf_mux.c           the multiplexed connection over it
 *   lf_sets.c          several L/F pools over reactors of their own
 *   hsha_pool.c        the half-sync/half-async pool (over a reactor)
 * Calls between them point one way: lf_sets.c calls lf_control.c and
 * lf_pool.c; lf_mux.c calls lf_bound.c, which calls lf_pool.c;
 * proactor_source.c calls lf_control.c, which calls lf_options.c,
 * reactor_source.c and lf_pool.c, which calls lf_followers.c.  hsha_pool.c
 * calls none of them.
 *
 * The wing calls core/reactor/ (reactor_impl.h, the public reactor API),
 * core/proactor/ only from proactor_source.c, through the proactor's pool
 * entry points (taxi__proactor_*_locked in core/proactor/proactor_impl.h),
 * and core/common/ and ports/.  Nothing below calls the wing by name: a
 * source learns of its pool only as the `void *pool` it is given.
 */
#ifndef TAXI_CORE_DISPATCH_SOURCE_H
#define TAXI_CORE_DISPATCH_SOURCE_H

#include "core/reactor/reactor_impl.h"
#include "taxi/lf.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct taxi__source_ops {
  /* Take the next thing ready without waiting; false if none. */
  bool (*take_locked)(void *self, taxi_time_t now, taxi__event_t *ev);
  /* Run it (the lock is released meanwhile), and what of the same
   * handler came meanwhile; how many ran (0: it was dropped). */
  unsigned (*run_locked)(void *self, taxi__event_t *ev);
  /* Give back something taken and never run. */
  void (*untake_locked)(void *self, taxi__event_t *ev);
  /* Wait until deadline (lock released meanwhile) into buf, whose room is
   * `cap` elements of the source's buf_elem size; what arrived becomes
   * takeable.  Returns how many, or a negative TAXI_E* code. */
  int (*wait_locked)(void *self, void *buf, size_t cap, taxi_time_t deadline,
                     taxi_time_t *now);
  bool (*has_work_locked)(const void *self, taxi_time_t now);
  /* How many results a wait started now could keep: 0 when the waits in
   * progress have taken all the room (a reactor's shared ring of reported
   * events), and a thread must follow instead of waiting. */
  size_t (*room_locked)(const void *self);
  int (*attach_pool_locked)(void *self, void *pool, size_t max_waiters);
  void (*detach_pool_locked)(void *self);
  /* Make every waiter return. */
  void (*wake_all_locked)(void *self);
  /* While sticky, a waiter returns at once (a pool shutting down); turning
   * it off consumes the wake-ups left over. */
  void (*set_sticky_locked)(void *self, bool sticky);
  /* How many events the waits reported that are not taken yet: what a
   * thread about to run a draining hook (taxi__event_t.drains) leaves for
   * the others.  Only a source whose takes set `drains` need count. */
  size_t (*backlog_locked)(const void *self);
} taxi__source_ops_t;

typedef struct taxi__source {
  const taxi__source_ops_t *ops;
  void *self;
  taxi__mutex_t *lock;
  size_t max_events; /* the room a wait may fill */
  size_t buf_elem;   /* bytes per element of a wait's buffer */
  bool multi_wait;   /* several threads may wait at once */
  /* Set once the source itself was asked to stop (taxi_reactor_stop,
   * taxi_proactor_stop: atomics only, so a signal handler may ask): the
   * pool over it stops as its own stop would.  The flag rather than a
   * step, since the pool looks at it around every event it takes. */
  const atomic_bool *stop_flag;
} taxi__source_t;

/* The reactor as a source (core/pools/reactor_source.c).  multi_wait is true
 * only where the backend has TAXI_CAP_MULTI_WAIT and TAXI_CAP_ONESHOT. */
void taxi__reactor_source(taxi_reactor_t *r, taxi__source_t *out);

/* A Leader/Followers pool over any source (core/pools/lf_control.c), made
 * for the public function `fn`, which the details of its refusals name. */
int taxi__lf_create_source(taxi_lf_pool_t **out, const taxi__source_t *src,
                           const taxi_lf_options_t *opts, const char *fn);

/* The caller's options `in` (NULL: the defaults) read into *o as `fn`
 * reads them (core/pools/lf_options.c): 0, or TAXI_EINVAL (size, an unknown
 * promotion or leaders), TAXI_ENOTSUP (TAXI_LEADERS_MANY where the source
 * is not multi_wait), each with its detail. */
int taxi__lf_options_read(taxi_lf_options_t *o, const taxi_lf_options_t *in,
                          bool multi_wait, const char *fn);

#endif /* TAXI_CORE_DISPATCH_SOURCE_H */
