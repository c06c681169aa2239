/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/pools/lf_bound.h - what the bound hand-off needs of the Leader/Followers
 * pool (core/pools/lf_pool.c): a thread that waits for its own reply takes part
 * in the pool meanwhile, and the thread that delivers the reply wakes
 * exactly that one; and the table of expected replies (core/pools/lf_bound.c)
 * that the multiplexed connection (core/pools/lf_mux.c) embeds.
 */
#ifndef TAXI_CORE_LF_BOUND_H
#define TAXI_CORE_LF_BOUND_H

#include "taxi/lf.h"
#include "taxi/lf_bound.h"
#include "ports/port.h"

#include <stdbool.h>

/* The pool's lock (its source's): it also guards what waits on it. */
taxi__mutex_t *taxi__lf_lock(taxi_lf_pool_t *p);

/* What the pool dispatches (a taxi_reactor_t *, or a proactor); NULL for
 * a pool that does not exist (destroyed). */
void *taxi__lf_source_self(taxi_lf_pool_t *p);

/*
 * Take part in the pool (lead, process, follow) until until(arg) holds
 * (0), `deadline` passes (TAXI_ETIMEDOUT) or the pool stops (its failure,
 * or TAXI_ESTOPPED).  A thread of the pool does so where it is (from a
 * hook: nested); any other joins for the time being.  TAXI_EBUSY from the
 * pool's on_error callback run by a leader pausing after a failed wait
 * (it would wait for itself), with a detail naming `fn`, the public
 * function that asked to take part.  *slot names the
 * calling thread meanwhile (NULL before and after), for
 * taxi__lf_kick_locked.  until() is called with the lock held.
 */
int taxi__lf_participate_locked(taxi_lf_pool_t *p, bool (*until)(void *),
                                void *arg, taxi_time_t deadline, void **slot,
                                const char *fn);

/* Make the thread `thread` (a *slot above; NULL: nothing) look at its
 * condition again: the specific notification of a bound hand-off. */
void taxi__lf_kick_locked(taxi_lf_pool_t *p, void *thread);

/* ---- the table of expected replies (core/pools/lf_bound.c)
 * ----------------------
 *
 * What taxi_lf_bound_t is, and what a multiplexed connection
 * (core/pools/lf_mux.c) embeds: records by id, under the pool's lock. */
struct taxi_lf_bound {
  taxi_lf_pool_t *pool;
  taxi__mutex_t *lock; /* the pool's */
  taxi_lf_expect_t **rows;
  size_t mask;
  int error;           /* what ended it (every waiter was told), or 0 */
  unsigned users;      /* calls in progress that may wait (awaits, sends) */
  taxi__cond_t change; /* broadcast when a user leaves, and by the mux */
};

/* 0, TAXI_EINVAL (buckets too many, p gone), TAXI_ENOMEM.  `fn`, here and
 * below, is the public function called (taxi_lf_bound_* or taxi_lf_mux_*),
 * which the details of the refusals name. */
int taxi__bound_init(taxi_lf_bound_t *b, taxi_lf_pool_t *p, unsigned buckets,
                     const char *fn);
void taxi__bound_fini(taxi_lf_bound_t *b);
/* End b with `code`: every record is finished with it and its waiter
 * woken; expect returns it from now on.  First code only.  Lock held. */
void taxi__bound_fail_locked(taxi_lf_bound_t *b, int code);
/* Copy a reply into the record expecting `id` and wake its waiter: 0, or
 * TAXI_ENOENT (nobody expects it).  Takes the lock. */
int taxi__bound_deliver(taxi_lf_bound_t *b, uint64_t id, const void *body,
                        size_t len);
int taxi__bound_expect(taxi_lf_bound_t *b, taxi_lf_expect_t *e, const char *fn);
int taxi__bound_await(taxi_lf_bound_t *b, taxi_lf_expect_t *e, int timeout_ms,
                      const char *fn);
int taxi__bound_forget(taxi_lf_bound_t *b, taxi_lf_expect_t *e, const char *fn);
/* One user less (the lock held): wakes whoever waits for them to go. */
void taxi__bound_leave_locked(taxi_lf_bound_t *b);

#endif /* TAXI_CORE_LF_BOUND_H */
