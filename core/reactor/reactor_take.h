/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/reactor/reactor_take.h - the take of the next ready event as the
 * dispatch loops call it (the reactor's own, and its pools').
 *
 * Every loop asks once more after its last event, and the answer is
 * then nearly always that nothing is ready: inline, that answer costs a
 * few loads instead of a call into the take (reactor_dispatch.c), whose
 * entry and exit alone cost more.  A header of its own, so that the
 * files of the reactor that the take calls do not call it back.
 */
#ifndef TAXI_CORE_REACTOR_TAKE_H
#define TAXI_CORE_REACTOR_TAKE_H

#include "core/reactor/reactor_impl.h"

/* As taxi__reactor_take_any_locked (core/reactor/reactor_impl.h): no
 * notification, signal, due timer or reported event means false, as the
 * take would answer.  r->lock held. */
static inline bool taxi__reactor_take_locked(taxi_reactor_t *r, taxi_time_t now,
                                             taxi__event_t *ev) {
  if (!r->notes_budget && !r->sig_any_pending && !r->pending_count &&
      !taxi__timer_due_locked(r, now))
    return false;
  return taxi__reactor_take_any_locked(r, now, ev);
}

#endif /* TAXI_CORE_REACTOR_TAKE_H */
