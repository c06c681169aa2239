/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/reactor/reactor_notify.c - how other threads reach a reactor's
 * dispatching threads: notifications (a function run by the dispatcher),
 * stop and restart, and the interrupt of the completion backends built
 * over a reactor (core/reactor/reactor_interrupt.h).
 *
 * Stop and interrupt take no lock, so a signal handler may call them.
 * Calls: the wake-up channel; common's notification queue.
 */
#include "config.h"

#include "core/reactor/reactor_impl.h"

int taxi_reactor_notify(taxi_reactor_t *r, void (*fn)(void *), void *arg) {
  if (!r || !fn) return TAXI_EINVAL;
  taxi__notification_t n = {fn, arg};
  taxi__mutex_lock(&r->lock);
  /* Those popped and still running count too: their room stays taken. */
  int rc = r->notes.count + r->notes.taken >= r->notes_limit
               ? TAXI_EAGAIN
               : taxi__notify_queue_push(&r->notes, n);
  if (rc == 0) taxi__reactor_wake_locked(r);
  taxi__mutex_unlock(&r->lock);
  return rc;
}

int taxi_reactor_stop(taxi_reactor_t *r) {
  if (!r) return TAXI_EINVAL;
  /* No lock, only atomics and one write: callable from a signal handler.
   * The channel is written whether or not a thread waits now, and even if
   * a wake-up seems pending already (it may be one a waiter is taking):
   * a thread about to wait then returns at once and sees the stop; if none
   * comes, the next wait drains a stale wake-up and goes on. */
  atomic_store(&r->stopped, true);
  int rc = taxi__rwake_force(r);
  return rc < 0 ? rc : 0;
}

int taxi__reactor_interrupt(taxi_reactor_t *r) {
  atomic_store(&r->interrupted, true);
  int rc = taxi__rwake_signal(r);
  return rc < 0 ? rc : 0;
}

int taxi_reactor_restart(taxi_reactor_t *r) {
  if (!r) return TAXI_EINVAL;
  atomic_store(&r->stopped, false);
  return 0;
}

int taxi_reactor_stopped(const taxi_reactor_t *r) {
  return r ? atomic_load(&((taxi_reactor_t *)r)->stopped) : 0;
}
