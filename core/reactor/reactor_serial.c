/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/reactor/reactor_serial.c - one hook of a handler at a time.
 *
 * A handler's hooks may touch its state without a lock of their own,
 * whichever dispatcher runs them: its handle's hooks, its timers' and its
 * signals' never overlap.  A handle is deactivated from the moment its
 * event is taken until its hooks have returned (pool mode), which keeps
 * two threads out of the same handle's hooks; this file does the same for
 * the handler as a whole.
 *
 * Taking an event claims its handler (TAXI__SER_OWNED, under the reactor's
 * lock).  An event of a handler already claimed - its timer fell due, or
 * its handle or one of its signals was reported, while one of its hooks
 * runs in another thread or its event waits in a half-sync/half-async
 * queue - is not taken but set aside: the timer leaves the heap
 * (TAXI__T_DEFERRED), the signal is marked (TAXI__SIG_DEFERRED), the
 * handle stays deactivated with its events kept (TAXI__S_DEFERRED).  The
 * thread that holds the claim runs them, one after the other, the kinds
 * (signal, timer, handle) taking turns, once its own event is done, and
 * only then releases the claim.  So an event set
 * aside is neither dropped nor run twice, it costs no wake-up, no
 * allocation and no system call, and nothing set aside is visible to the
 * waits (no thread spins on work it may not take).  Removing the handler,
 * cancelling the timer or removing the signal meanwhile forgets what was
 * set aside, as it would forget an event not yet taken.
 *
 * The reactor's own dispatch (one thread) never finds a handler claimed;
 * the pools do, and pay for it only then.
 */
#include "config.h"

#include "core/reactor/reactor_impl.h"

void taxi__serial_defer_timer_locked(taxi_timer_t *t) {
  t->internal_.state = TAXI__T_DEFERRED;
  t->internal_.handler->internal_.serial |= TAXI__SER_DEFERRED;
}

void taxi__serial_defer_io_locked(taxi__slot_t *s, uint32_t events) {
  /* An edge-triggered handle may be reported again while set aside: the
   * reports add up, to be run once. */
  s->deferred = (s->flags & TAXI__S_DEFERRED) ? s->deferred | events : events;
  s->flags |= TAXI__S_BUSY | TAXI__S_DEFERRED;
  s->handler->internal_.serial |= TAXI__SER_DEFERRED;
}

/* A signal of h set aside: taken into *ev. */
static bool next_signal_locked(taxi_reactor_t *r, taxi_handler_t *h,
                               taxi__event_t *ev) {
  if (!h->internal_.signals) return false;
  for (int s = 1; s < r->sig_limit; s++) {
    if (r->sig_handlers[s] != h || r->sig_pending[s] != TAXI__SIG_DEFERRED)
      continue;
    r->sig_pending[s] = 0;
    ev->kind = TAXI__EV_SIGNAL;
    ev->signo = s;
    return true;
  }
  return false;
}

/* The timer of h set aside that fell due first: taken into *ev. */
static bool next_timer_locked(taxi_handler_t *h, taxi__event_t *ev) {
  taxi_timer_t *first = NULL;
  for (taxi_timer_t *t = h->internal_.timers; t; t = t->internal_.next) {
    if (t->internal_.state != TAXI__T_DEFERRED) continue;
    if (!first || t->internal_.deadline < first->internal_.deadline ||
        (t->internal_.deadline == first->internal_.deadline &&
         t->internal_.seq < first->internal_.seq))
      first = t;
  }
  if (!first) return false;
  first->internal_.state = TAXI__T_FIRING;
  ev->kind = TAXI__EV_TIMER;
  ev->timer = first;
  ev->timer_seq = first->internal_.seq;
  ev->act = first->internal_.act;
  return true;
}

/* The events of h's handle set aside: taken into *ev (the handle stays
 * deactivated, as for any event taken). */
static bool next_io_locked(taxi_reactor_t *r, taxi_handler_t *h,
                           taxi__event_t *ev) {
  if (!(h->internal_.flags & TAXI__H_HAS_HANDLE)) return false;
  taxi__slot_t *s = &r->slots[h->internal_.slot];
  if (!(s->flags & TAXI__S_DEFERRED)) return false;
  s->flags &= ~TAXI__S_DEFERRED;
  ev->kind = TAXI__EV_IO;
  ev->handle = s->handle;
  ev->events = s->deferred;
  ev->interest = s->interest;
  ev->row = h->internal_.slot;
  ev->generation = s->generation;
  ev->drains = false;
  return true;
}

/* The kinds of events set aside, in the order they take turns. */
enum { SERIAL_SIGNAL, SERIAL_TIMER, SERIAL_IO, SERIAL_KINDS };

static bool next_of_kind_locked(taxi_reactor_t *r, taxi_handler_t *h, int kind,
                                taxi__event_t *ev) {
  switch (kind) {
    case SERIAL_SIGNAL:
      return next_signal_locked(r, h, ev);
    case SERIAL_TIMER:
      return next_timer_locked(h, ev);
    default:
      return next_io_locked(r, h, ev);
  }
}

bool taxi__serial_next_deferred_locked(taxi_reactor_t *r, taxi_handler_t *h,
                                       int done, taxi__event_t *ev) {
  /* The kinds take turns, starting after the one just done: a signal sent
   * again from each of its hooks (or a handle that is always readable)
   * is set aside again during each, and if its kind always came first,
   * the handler's other events would wait for ever behind it. */
  int first = done == TAXI__EV_SIGNAL  ? SERIAL_TIMER
              : done == TAXI__EV_TIMER ? SERIAL_IO
                                       : SERIAL_SIGNAL;
  for (int i = 0; i < SERIAL_KINDS; i++)
    if (next_of_kind_locked(r, h, (first + i) % SERIAL_KINDS, ev)) {
      ev->handler = h;
      h->internal_.refs++;
      return true;
    }
  h->internal_.serial = 0;
  return false;
}
