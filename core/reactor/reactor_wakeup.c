/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/reactor/reactor_wakeup.c - the reactor's wake-up channel: how another
 * thread makes a wait return (a change to watch, a notification, a stop).
 *
 * A backend with TAXI__EXT_WAKEUP has its own (kqueue: an EVFILT_USER
 * event, as libevent and libuv use where it exists); otherwise the port's
 * channel, an eventfd or a pipe, is registered with the backend like any
 * handle.  Both coalesce the same way: only the signal that finds nothing
 * pending reaches the OS, and the waiter that takes the report clears
 * pending afterwards (see taxi__wakeup_drain in ports/posix/wakeup.c for
 * why in that order; the backend's report has reset its event already).
 */
#include "config.h"

#include "core/reactor/reactor_impl.h"

int taxi__rwake_open(taxi_reactor_t *r, uint64_t token) {
  atomic_store(&r->wake_pending, 0);
  r->wake_in_backend = false;
  /* TAXI_WAKEUP_CHANNEL in the environment: the port's channel all the
   * same, so the tests can run both on a backend that has its own. */
  if ((r->ops->ext & TAXI__EXT_WAKEUP) &&
      taxi__secure_getenv("TAXI_WAKEUP_CHANNEL") == NULL &&
      r->ops->wakeup_open(r->backend, token) == 0) {
    r->wake_in_backend = true;
    return 0;
  }
  int rc = taxi__wakeup_open(&r->wakeup);
  if (rc < 0) return rc;
  rc = r->ops->add(r->backend, taxi__wakeup_handle(&r->wakeup), token,
                   TAXI_EV_READ, 0);
  if (rc < 0) taxi__wakeup_close(&r->wakeup);
  return rc;
}

void taxi__rwake_close(taxi_reactor_t *r) {
  /* The backend's event goes with the backend. */
  if (!r->wake_in_backend) taxi__wakeup_close(&r->wakeup);
  r->wake_in_backend = false;
}

int taxi__rwake_signal(taxi_reactor_t *r) {
  if (!r->wake_in_backend) return taxi__wakeup_signal(&r->wakeup);
  if (atomic_exchange(&r->wake_pending, 1) != 0) return 0;
  int rc = r->ops->wakeup_signal(r->backend);
  if (rc < 0) {
    /* Nothing was signalled: let the next call try again. */
    atomic_store(&r->wake_pending, 0);
    return rc;
  }
  return 1;
}

int taxi__rwake_force(taxi_reactor_t *r) {
  if (!r->wake_in_backend) return taxi__wakeup_force(&r->wakeup);
  atomic_store(&r->wake_pending, 1);
  int rc = r->ops->wakeup_signal(r->backend);
  return rc < 0 ? rc : 1;
}

void taxi__rwake_drain(taxi_reactor_t *r) {
  if (!r->wake_in_backend) {
    taxi__wakeup_drain(&r->wakeup);
    return;
  }
  atomic_store(&r->wake_pending, 0);
}

void taxi__reactor_wake_locked(taxi_reactor_t *r) {
  if (!r->waiters) return;
  if (taxi__rwake_signal(r) > 0) r->stats.wakeups++;
}

void taxi__reactor_wake_all_locked(taxi_reactor_t *r) {
  /* Each waiter that sees the channel while it is sticky passes the
   * wake-up on (take_io_locked), so one write reaches them all. */
  if (taxi__rwake_force(r) > 0) r->stats.wakeups++;
}
