/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/reactor/reactor_timers.c - timers: the heap's order, scheduling and
 * cancelling, taking a due timer for dispatch (or setting it aside while
 * its handler is claimed, core/reactor/reactor_serial.c), re-arming a
 * periodic timer after its hook, and giving back a firing never run.
 *
 * Calls: handler.c (a timer attaches its handler), reactor_serial.c, the
 * wake-up channel (an earlier deadline wakes a waiter); common's timer
 * heap.
 */
#include "config.h"

#include "core/reactor/reactor_impl.h"
#include "core/common/detail.h"
#include "core/common/time_math.h"

#include <inttypes.h>

/* The timer heap's view of taxi_timer_t: by deadline, then as scheduled. */
static bool timer_before(const void *a, const void *b) {
  const taxi_timer_t *x = a, *y = b;
  if (x->internal_.deadline != y->internal_.deadline)
    return x->internal_.deadline < y->internal_.deadline;
  return x->internal_.seq < y->internal_.seq;
}

static size_t *timer_index(void *t) {
  return &((taxi_timer_t *)t)->internal_.heap_index;
}

static const taxi__timer_heap_ops_t timer_heap_ops = {timer_before,
                                                      timer_index};

void taxi__timers_init(taxi_reactor_t *r) {
  taxi__timer_heap_init(&r->timers, &timer_heap_ops);
}

static void timer_link(taxi_handler_t *h, taxi_timer_t *t) {
  t->internal_.prev = NULL;
  t->internal_.next = h->internal_.timers;
  if (h->internal_.timers) h->internal_.timers->internal_.prev = t;
  h->internal_.timers = t;
}

static void timer_unlink(taxi_timer_t *t) {
  taxi_handler_t *h = t->internal_.handler;
  if (t->internal_.prev)
    t->internal_.prev->internal_.next = t->internal_.next;
  else
    h->internal_.timers = t->internal_.next;
  if (t->internal_.next) t->internal_.next->internal_.prev = t->internal_.prev;
  t->internal_.prev = t->internal_.next = NULL;
}

/* Disarm t: out of the heap and the handler's list.  A firing timer is only
 * marked, so that its hook's return does not re-arm it. */
void taxi__timer_cancel_locked(taxi_reactor_t *r, taxi_timer_t *t) {
  if (t->internal_.state == TAXI__T_ARMED)
    taxi__timer_heap_remove(&r->timers, t);
  if (t->internal_.state != TAXI__T_IDLE) timer_unlink(t);
  t->internal_.state = TAXI__T_IDLE;
}

static void timer_arm_locked(taxi_reactor_t *r, taxi_timer_t *t,
                             taxi_time_t deadline) {
  t->internal_.deadline = deadline;
  t->internal_.seq = r->timer_seq++;
  taxi__timer_heap_push(&r->timers, t);
  t->internal_.state = TAXI__T_ARMED;
  if (r->waiters && deadline < r->waiters_deadline)
    taxi__reactor_wake_locked(r);
}

int taxi_reactor_schedule(taxi_reactor_t *r, taxi_timer_t *t, taxi_handler_t *h,
                          taxi_time_t delay, taxi_time_t period, void *act) {
  if (!r || !t || !h || !h->ops || !h->ops->timeout)
    return taxi__refuse(TAXI_EINVAL, "taxi_reactor_schedule: %s: NULL",
                        !r   ? "r"
                        : !t ? "t"
                        : !h ? "h"
                             : "h->ops->timeout");
  if (delay < 0 || delay > TAXI_TIME_SPAN_MAX)
    return taxi__refuse(TAXI_EINVAL,
                        "taxi_reactor_schedule: delay: 0 to "
                        "TAXI_TIME_SPAN_MAX ns; got %" PRId64,
                        (int64_t)delay);
  if (period < 0 || period > TAXI_TIME_SPAN_MAX)
    return taxi__refuse(TAXI_EINVAL,
                        "taxi_reactor_schedule: period: 0 to "
                        "TAXI_TIME_SPAN_MAX ns; got %" PRId64,
                        (int64_t)period);
  taxi_time_t now = taxi_now();

  taxi__mutex_lock(&r->lock);
  int rc = 0;
  if (t->internal_.state != TAXI__T_IDLE && t->internal_.handler &&
      t->internal_.handler->internal_.reactor != r) {
    rc = taxi__refuse(TAXI_EINVAL,
                      "taxi_reactor_schedule: t: armed on another reactor");
    goto out;
  }
  if (t->internal_.state != TAXI__T_ARMED) {
    /* A firing timer's place in the heap may have been taken meanwhile. */
    rc = taxi__timer_heap_reserve(&r->timers);
    if (rc < 0) goto out;
  }
  rc = taxi__reactor_attach_locked(r, h);
  if (rc < 0) {
    taxi__refuse(rc, rc == TAXI_EBUSY
                         ? "taxi_reactor_schedule: h: closing (removed, its "
                           "close hook not yet run)"
                         : "taxi_reactor_schedule: h: attached to another "
                           "reactor");
    goto out;
  }
  /* Rescheduling moves the timer, possibly to another handler. */
  taxi__timer_cancel_locked(r, t);
  t->internal_.handler = h;
  t->internal_.act = act;
  t->internal_.period = period;
  timer_link(h, t);
  timer_arm_locked(r, t, taxi__time_add(now, delay));
out:
  taxi__mutex_unlock(&r->lock);
  return rc;
}

int taxi_reactor_cancel(taxi_reactor_t *r, taxi_timer_t *t) {
  if (!r || !t) return TAXI_EINVAL;
  taxi__mutex_lock(&r->lock);
  int rc = TAXI_ENOENT;
  if (t->internal_.state != TAXI__T_IDLE &&
      t->internal_.handler->internal_.reactor == r) {
    taxi__timer_cancel_locked(r, t);
    rc = 0;
  }
  taxi__mutex_unlock(&r->lock);
  return rc;
}

/* After a timer hook returned: re-arm a periodic timer unless the hook (or
 * another thread) cancelled or rescheduled it meanwhile. */
void taxi__timer_fired_locked(taxi_reactor_t *r, taxi_timer_t *t, uint64_t seq,
                              int rc) {
  if (!taxi__timer_firing(t, seq)) return;
  if (rc < 0 || t->internal_.period == 0 ||
      taxi__timer_heap_reserve(&r->timers) < 0) {
    taxi__timer_cancel_locked(r, t);
    return;
  }
  /* Keep the original cadence; skip periods missed while we were late
   * rather than firing them in a burst. */
  taxi_time_t period = t->internal_.period;
  taxi_time_t next = taxi__time_add(t->internal_.deadline, period);
  taxi_time_t now = taxi_now();
  if (next <= now) {
    /* Both spans are at most TAXI_TIME_SPAN_MAX, so the product fits. */
    taxi_time_t missed = (now - next) / period + 1;
    next = taxi__time_add(next, missed * period);
  }
  timer_arm_locked(r, t, next);
}

bool taxi__timer_take_locked(taxi_reactor_t *r, taxi_time_t now,
                             taxi__event_t *ev) {
  taxi_timer_t *t;
  for (;;) {
    t = taxi__timer_heap_top(&r->timers);
    if (!t || t->internal_.deadline > now) return false;
    taxi__timer_heap_remove(&r->timers, t);
    if (taxi__serial_claim_locked(t->internal_.handler)) break;
    /* Another hook of its handler runs: its thread runs this one next. */
    taxi__serial_defer_timer_locked(t);
  }
  t->internal_.state = TAXI__T_FIRING;
  ev->kind = TAXI__EV_TIMER;
  ev->timer = t;
  ev->timer_seq = t->internal_.seq;
  ev->act = t->internal_.act;
  ev->handler = t->internal_.handler;
  ev->handler->internal_.refs++;
  /* A timer of a handler whose handle the library drains edge-triggered
   * runs the same non-blocking hooks (a datagram endpoint's next rounds,
   * a stream's timeouts): a pool need not hand over the handle set for it
   * either. */
  taxi__slot_t *s = taxi__reactor_slot_of(r, ev->handler);
  ev->drains = s && taxi__reactor_edge_flags(r, s->flags);
  return true;
}

void taxi__timer_untake_locked(taxi_reactor_t *r, const taxi__event_t *ev) {
  /* Its heap room was reserved when it was armed and freed when taken;
   * if another timer took that room meanwhile, drop this firing. */
  if (taxi__timer_firing(ev->timer, ev->timer_seq)) {
    if (taxi__timer_heap_reserve(&r->timers) == 0)
      timer_arm_locked(r, ev->timer, ev->timer->internal_.deadline);
    else
      taxi__timer_cancel_locked(r, ev->timer);
  }
}
