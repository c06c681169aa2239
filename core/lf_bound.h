/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/lf_bound.h - what the bound hand-off (core/lf_bound.c) needs of the
 * Leader/Followers pool (core/lf_pool.c): a thread that waits for its own
 * reply takes part in the pool meanwhile, and the thread that delivers the
 * reply wakes exactly that one.
 */
#ifndef TAXI_CORE_LF_BOUND_H
#define TAXI_CORE_LF_BOUND_H

#include "taxi/lf.h"
#include "ports/port.h"

#include <stdbool.h>

/* The pool's lock (its source's): it also guards what waits on it. */
taxi__mutex_t *taxi__lf_lock(taxi_lf_pool_t *p);

/* What the pool dispatches (a taxi_reactor_t *, or a proactor); NULL for
 * a pool that does not exist (destroyed). */
void *taxi__lf_source_self(taxi_lf_pool_t *p);

/* The pool is shutting down or stopped.  The lock held. */
bool taxi__lf_stopped_locked(const taxi_lf_pool_t *p);

/*
 * Take part in the pool (lead, process, follow) until until(arg) holds
 * (0), `deadline` passes (TAXI_ETIMEDOUT) or the pool stops (its failure,
 * or TAXI_ESTOPPED).  A thread of the pool does so where it is (from a
 * hook: nested); any other joins for the time being.  TAXI_EBUSY from the
 * pool's on_error callback run by a leader pausing after a failed wait
 * (it would wait for itself).  *slot names the
 * calling thread meanwhile (NULL before and after), for
 * taxi__lf_kick_locked.  until() is called with the lock held.
 */
int taxi__lf_participate_locked(taxi_lf_pool_t *p, bool (*until)(void *),
                                void *arg, taxi_time_t deadline, void **slot);

/* Make the thread `thread` (a *slot above; NULL: nothing) look at its
 * condition again: the specific notification of a bound hand-off. */
void taxi__lf_kick_locked(taxi_lf_pool_t *p, void *thread);

#endif /* TAXI_CORE_LF_BOUND_H */
