/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/reactor/reactor_move.c - moving a handler and its handle to another
 * reactor (taxi_reactor_move), at once or, when an event of it is being
 * dispatched, when that dispatch ends (core/reactor/reactor_dispatch.c
 * calls taxi__reactor_move_locked then).
 *
 * Both reactors' locks are taken in address order, so that two moves in
 * opposite directions cannot deadlock.  Calls: reactor_table.c,
 * handler.c, reactor_closed.c (whether `to` records identities); common
 * and ports.
 */
#include "config.h"

#include "core/reactor/reactor_impl.h"
#include "core/common/detail.h"

/* Both locks, always in the same (address) order, so that two moves in
 * opposite directions cannot deadlock. */
static void lock_pair(taxi_reactor_t *a, taxi_reactor_t *b) {
  bool a_first = (uintptr_t)a < (uintptr_t)b;
  taxi__mutex_lock(a_first ? &a->lock : &b->lock);
  taxi__mutex_lock(a_first ? &b->lock : &a->lock);
}

/* Move h from r to `to`, consuming a reference to h the caller holds (it
 * keeps h alive while no lock is held).  r->lock held on entry and on
 * return; both locks are held while h changes hands, so that a call on
 * either reactor sees h on one side or the other, never half-way. */
int taxi__reactor_move_locked(taxi_reactor_t *r, taxi_handler_t *h,
                              taxi_reactor_t *to) {
  taxi__mutex_unlock(&r->lock);
  lock_pair(r, to);
  /* Things may have changed while no lock was held. */
  taxi__slot_t *s = taxi__reactor_slot_of(r, h);
  int rc = TAXI_ENOENT;
  if (s) rc = h->internal_.timers || h->internal_.signals ? TAXI_EBUSY : 0;
  bool moving = rc == 0;
  if (moving &&
      ((s->flags & TAXI__S_BUSY) || (h->internal_.serial & TAXI__SER_OWNED))) {
    /* Another thread took an event of h meanwhile: the move waits for the
     * end of that dispatch instead. */
    s->move_to = to;
    moving = false;
  }
  if (moving) {
    taxi_handle_t handle = h->internal_.handle;
    unsigned interest = s->interest;
    bool suspended = s->flags & TAXI__S_SUSPENDED;
    /* The same handle: the library's stays so, an application's keeps
     * what it named at registration (taken now if `to` needs it and r did
     * not; a closed one is then refused by the backend's own check). */
    taxi__reg_how_t how = {
        0, s->flags & (TAXI__S_OWNED | TAXI__S_IDENT | TAXI__S_DRAINS),
        s->ident};
    if (!how.slot_flags && taxi__closed_by_identity(to) &&
        taxi__handle_identity(handle, &how.ident) == 0)
      how.slot_flags = TAXI__S_IDENT;
    taxi__reactor_deregister_locked(r, h, false);
    taxi__reactor_unlink_locked(r, h);
    /* Its references, the attachment's included, carry over as they are. */
    taxi__handler_set_reactor(h, to);
    taxi__reactor_link_locked(to, h);
    rc = taxi__reactor_register_locked(to, handle, h, interest, &how);
    if (rc == 0 && suspended) {
      taxi__slot_t *ns = &to->slots[h->internal_.slot];
      ns->flags |= TAXI__S_SUSPENDED;
      rc = taxi__reactor_arm_locked(to, ns);
    }
    /* The handle cannot be watched where it was sent: rather than leave a
     * handler nobody watches, remove it. */
    if (rc < 0) taxi__reactor_detach_locked(to, h);
  }
  /* Release our reference under the lock of the reactor h is with now
   * (a close hook may run, with only that reactor's lock dropped). */
  taxi_reactor_t *owner = h->internal_.reactor == to ? to : r;
  taxi__mutex_unlock(owner == to ? &r->lock : &to->lock);
  taxi__handler_release_locked(owner, h);
  if (owner == to) {
    taxi__mutex_unlock(&to->lock);
    taxi__mutex_lock(&r->lock);
  }
  return rc;
}

int taxi_reactor_move(taxi_reactor_t *from, taxi_handler_t *h,
                      taxi_reactor_t *to) {
  if (!from || !h || !to || from == to) return TAXI_EINVAL;
  taxi__mutex_lock(&from->lock);
  int rc = TAXI_ENOENT;
  taxi__slot_t *s = taxi__reactor_slot_of(from, h);
  if (!s) goto out;
  rc = TAXI_EBUSY;
  if (s->move_to || h->internal_.timers || h->internal_.signals) {
    taxi__refuse(rc, s->move_to
                         ? "taxi_reactor_move: h: a move of it is pending "
                           "already (an event of it is being dispatched)"
                         : "taxi_reactor_move: h: has timers or signals, "
                           "which cannot move with it (cancel them first)");
    goto out;
  }
  rc = TAXI_ENOTSUP;
  if ((s->interest & TAXI_EV_EXCEPT) && !(to->ops->caps & TAXI_CAP_EXCEPT)) {
    taxi__refuse(rc,
                 "taxi_reactor_move: to: its backend (%s) cannot watch "
                 "TAXI_EV_EXCEPT, which h asks for",
                 to->ops->name);
    goto out;
  }
  if ((s->flags & TAXI__S_BUSY) || (h->internal_.serial & TAXI__SER_OWNED)) {
    /* An event of h was taken (its hooks run, maybe this is one, or it
     * waits in a pool's queue): move when that dispatch is over. */
    s->move_to = to;
    rc = 0;
    goto out;
  }
  h->internal_.refs++;
  rc = taxi__reactor_move_locked(from, h, to);
  if (rc == TAXI_EBUSY) /* given timers or signals while no lock was held */
    taxi__refuse(rc,
                 "taxi_reactor_move: h: has timers or signals, which cannot "
                 "move with it (cancel them first)");
out:
  taxi__mutex_unlock(&from->lock);
  return rc;
}
