/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/reactor/handler.c - initialising handlers and timers, and the references
 * that delay a removed handler's close hook.
 */
#include "config.h"

#include "core/reactor/reactor_impl.h"
#include "core/common/detail.h"

#include <string.h>

/*
 * Whether h is attached to a reactor, or removed from one and its close
 * hook still to come: then initialising it would wipe what the reactor
 * keeps of it (its place in the reactor's list, its references), and the
 * reactor's destroy would never see it leave.  h may be memory never
 * initialised, so nothing of it is trusted until the reactor it names is
 * found among the live ones (the registry), and then only under that
 * reactor's lock, where h is looked for in its list of attached handlers.
 */
static bool handler_in_use(const taxi_handler_t *h) {
  if (!(h->internal_.flags & (TAXI__H_ATTACHED | TAXI__H_CLOSING)))
    return false;
  taxi_reactor_t *r = taxi__handler_reactor(h);
  /* reg is the reactor's first member: no arithmetic on a stray pointer. */
  if (!r ||
      !taxi__registry_pin((taxi__registered_t *)(void *)r, TAXI__KIND_REACTOR))
    return false;
  bool busy = false;
  taxi__mutex_lock(&r->lock);
  if (taxi__handler_reactor(h) == r) {
    busy = (h->internal_.flags & TAXI__H_CLOSING) != 0;
    for (const taxi_handler_t *a = r->attached; a && !busy;
         a = a->internal_.next)
      busy = a == h;
  }
  taxi__mutex_unlock(&r->lock);
  taxi__registry_unpin(&r->reg);
  return busy;
}

int taxi_handler_init(taxi_handler_t *h, const taxi_handler_ops_t *ops) {
  if (!h || !ops) return TAXI_EINVAL;
  if (handler_in_use(h))
    return taxi__refuse(TAXI_EBUSY,
                        "taxi_handler_init: h: attached to a reactor "
                        "(registered, or with timers or signals) or "
                        "closing: re-initialising it would lose that "
                        "state; remove it and wait for its close hook");
  memset(&h->internal_, 0, sizeof h->internal_);
  h->ops = ops;
  h->internal_.handle = TAXI_INVALID_HANDLE;
  return 0;
}

int taxi_timer_init(taxi_timer_t *t) {
  if (!t) return TAXI_EINVAL;
  memset(&t->internal_, 0, sizeof t->internal_);
  t->internal_.heap_index = TAXI__NOT_IN_HEAP;
  t->internal_.state = TAXI__T_IDLE;
  return 0;
}

/*
 * A handler's counter is guarded by the lock of the reactor it is attached
 * to.  Which reactor that is can change under us (taxi_reactor_move, a
 * removal that closes it), so the reactor is read without a lock, locked,
 * and read again: if it is still the same, the handler cannot leave it
 * while we hold its lock.  A handler that is not attached, or whose
 * reactor was destroyed while it was still referenced, belongs to the
 * application alone, which must not race on it (documented in
 * taxi/handler.h and taxi/reactor.h).
 */

/* Lock the reactor h is attached to and return it, or NULL if none. */
static taxi_reactor_t *lock_owner(taxi_handler_t *h) {
  for (;;) {
    taxi_reactor_t *r = taxi__handler_reactor(h);
    if (!r) return NULL;
    taxi__mutex_lock(&r->lock);
    if (taxi__handler_reactor(h) == r) return r;
    taxi__mutex_unlock(&r->lock);
  }
}

int taxi_handler_ref(taxi_handler_t *h) {
  if (!h) return TAXI_EINVAL;
  taxi_reactor_t *r = lock_owner(h);
  h->internal_.refs++;
  if (r) taxi__mutex_unlock(&r->lock);
  return 0;
}

/* The last reference of a removed handler whose reactor is gone. */
static void release_orphan(taxi_handler_t *h) {
  if (--h->internal_.refs > 0 || !(h->internal_.flags & TAXI__H_CLOSING))
    return;
  taxi_handle_t handle = h->internal_.handle;
  h->internal_.flags = 0;
  h->internal_.handle = TAXI_INVALID_HANDLE;
  if (h->ops->close) h->ops->close(h, handle);
}

int taxi_handler_unref(taxi_handler_t *h) {
  if (!h) return TAXI_EINVAL;
  taxi_reactor_t *r = lock_owner(h);
  if (!r) {
    if (h->internal_.refs == 0) return TAXI_EINVAL;
    release_orphan(h);
    return 0;
  }
  /* An attached handler holds one reference for its attachment. */
  uint32_t floor = (h->internal_.flags & TAXI__H_CLOSING) ? 0 : 1;
  int rc = TAXI_EINVAL;
  if (h->internal_.refs > floor) {
    taxi__handler_release_locked(r, h);
    rc = 0;
  }
  taxi__mutex_unlock(&r->lock);
  return rc;
}
void taxi__reactor_link_locked(taxi_reactor_t *r, taxi_handler_t *h) {
  h->internal_.prev = NULL;
  h->internal_.next = r->attached;
  if (r->attached) r->attached->internal_.prev = h;
  r->attached = h;
}

int taxi__reactor_attach_locked(taxi_reactor_t *r, taxi_handler_t *h) {
  if (h->internal_.flags & TAXI__H_CLOSING) return TAXI_EBUSY;
  if (h->internal_.flags & TAXI__H_ATTACHED)
    return h->internal_.reactor == r ? 0 : TAXI_EINVAL;
  taxi__handler_set_reactor(h, r);
  h->internal_.flags |= TAXI__H_ATTACHED;
  h->internal_.refs++;
  taxi__reactor_link_locked(r, h);
  return 0;
}

void taxi__reactor_unlink_locked(taxi_reactor_t *r, taxi_handler_t *h) {
  if (h->internal_.prev)
    h->internal_.prev->internal_.next = h->internal_.next;
  else
    r->attached = h->internal_.next;
  if (h->internal_.next) h->internal_.next->internal_.prev = h->internal_.prev;
  h->internal_.prev = h->internal_.next = NULL;
}

void taxi__handler_release_locked(taxi_reactor_t *r, taxi_handler_t *h) {
  if (--h->internal_.refs > 0 || !(h->internal_.flags & TAXI__H_CLOSING))
    return;
  /* Last reference of a removed handler: forget it, then close.  After the
   * close hook taxi must not touch h: it may be freed or attached again. */
  void (*close_hook)(taxi_handler_t *, taxi_handle_t) = h->ops->close;
  taxi_handle_t handle = h->internal_.handle;
  taxi__handler_set_reactor(h, NULL);
  h->internal_.flags = 0;
  h->internal_.handle = TAXI_INVALID_HANDLE;
  if (close_hook) {
    taxi__mutex_unlock(&r->lock);
    close_hook(h, handle);
    taxi__mutex_lock(&r->lock);
  }
}
