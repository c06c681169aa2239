/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/reactor/reactor_table.c - the demultiplexing table: rows for
 * registered handles, what the backend is told to watch for each, and
 * removal (a handler detached: its handle, timers and signals let go).
 *
 * Each row is named to the backend by a token (row and generation, see
 * taxi__slot_t), so that a report about a removed handle is recognised
 * as stale.  Calls: handler.c (attachment, references), reactor_timers.c
 * and reactor_signal.c (a removal cancels them), the wake-up channel;
 * common.  Never the files that dispatch or register for the application
 * (reactor_register.c, _dispatch.c, _wait.c, _move.c, _closed.c): they
 * call this one.
 */
#include "config.h"

#include "core/reactor/reactor_impl.h"
#include "core/reactor/reactor_closing.h"
#include "core/common/alloc.h"

/* Backends without live update wait on a snapshot of their set: after a
 * change made by another thread, the waiter must look again. */
static void set_changed_locked(taxi_reactor_t *r) {
  if (!(r->ops->caps & TAXI_CAP_LIVE_UPDATE)) taxi__reactor_wake_locked(r);
}

static int slot_alloc_locked(taxi_reactor_t *r, uint32_t *row) {
  if (r->free_head != TAXI__ROW_NONE) {
    *row = r->free_head;
    r->free_head = r->slots[*row].next_free;
    return 0;
  }
  if (r->nslots == r->slots_cap) {
    if (r->slots_cap >= TAXI__ROW_NONE / 2) return TAXI_ETOOMANY;
    uint32_t ncap = r->slots_cap ? r->slots_cap * 2 : 64;
    taxi__slot_t *s = taxi__reallocarray(r->slots, ncap, sizeof *s);
    if (!s) return TAXI_ENOMEM;
    r->slots = s;
    r->slots_cap = ncap;
  }
  *row = r->nslots++;
  r->slots[*row].generation = 1;
  return 0;
}

static void slot_free_locked(taxi_reactor_t *r, uint32_t row) {
  taxi__slot_t *s = &r->slots[row];
  if (s->flags & TAXI__S_REARM) r->rearm_pending--;
  if (s->flags & TAXI__S_UNCHECKED) r->unchecked--;
  s->handler = NULL;
  s->handle = TAXI_INVALID_HANDLE;
  s->generation++; /* outstanding tokens for this row are now stale */
  s->flags = 0;
  s->interest = 0;
  s->move_to = NULL;
  s->next_free = r->free_head;
  r->free_head = row;
}

int taxi__reactor_register_locked(taxi_reactor_t *r, taxi_handle_t handle,
                                  taxi_handler_t *h, unsigned events,
                                  const taxi__reg_how_t *how) {
  uint32_t row;
  if (h->internal_.flags & TAXI__H_CLOSING) return TAXI_EBUSY;
  if ((h->internal_.flags & TAXI__H_ATTACHED) && h->internal_.reactor != r)
    return TAXI_EINVAL;
  if ((h->internal_.flags & TAXI__H_HAS_HANDLE) ||
      taxi__handle_map_get(&r->map, handle, &row) == 0)
    return TAXI_EEXIST;
  int rc = slot_alloc_locked(r, &row);
  if (rc < 0) return rc;

  rc = taxi__handle_map_put(&r->map, handle, row);
  if (rc < 0) {
    slot_free_locked(r, row);
    return rc;
  }
  taxi__slot_t *s = &r->slots[row];
  rc = r->ops->add(
      r->backend, handle, taxi__reactor_token(row, s->generation), events,
      taxi__reactor_arm_flags_for(r, how->slot_flags) | how->add_flags);
  if (rc < 0) {
    taxi__handle_map_del(&r->map, handle);
    slot_free_locked(r, row);
    return rc;
  }
  s->handler = h;
  s->handle = handle;
  s->interest = events;
  s->flags = TAXI__S_ARMED | how->slot_flags;
  s->move_to = NULL;
  s->error = 0;
  s->ident = how->ident;
  taxi__reactor_attach_locked(r, h); /* cannot fail: checked above */
  h->internal_.handle = handle;
  h->internal_.slot = row;
  h->internal_.flags |= TAXI__H_HAS_HANDLE;
  r->stats.handles++;
  set_changed_locked(r);
  return 0;
}

/* Tell the backend what s should report now.  In pool mode a handle whose
 * hooks are running stays deactivated: it is re-armed, with whatever its
 * state is then, when they return.  An edge-triggered one stays armed
 * meanwhile, so a change is made at once: the kernel must stop reporting
 * what is no longer wanted (the reports that come are set aside for the
 * thread running the hooks, TAXI__S_DRAINS). */
int taxi__reactor_arm_locked(taxi_reactor_t *r, taxi__slot_t *s) {
  bool edge = taxi__reactor_edge_flags(r, s->flags);
  if (r->pool && (s->flags & TAXI__S_BUSY) && !edge) return 0;
  unsigned events = (s->flags & TAXI__S_SUSPENDED) ? 0 : s->interest;
  uint32_t row = (uint32_t)(s - r->slots);
  int rc = r->ops->modify(r->backend, s->handle,
                          taxi__reactor_token(row, s->generation), events,
                          edge ? TAXI__ARM_EDGE : taxi__reactor_arm_flags(r));
  if (rc < 0) return rc;
  if (events)
    s->flags |= TAXI__S_ARMED;
  else
    s->flags &= ~TAXI__S_ARMED;
  if (s->flags & TAXI__S_REARM) {
    s->flags &= ~TAXI__S_REARM;
    r->rearm_pending--;
  }
  set_changed_locked(r);
  return 0;
}

/* The backend would not re-arm s (after a hook, or when the pool took the
 * reactor over).  Nothing may be done about it here: the callers hold
 * state the application's hooks must not see half-changed, so the slot is
 * flagged and the next wait retries it (retry_rearms_locked), with a pause
 * that grows while the failures go on, and removes the handler if they
 * never stop.  Waiters come back to take the retry into account. */
static void rearm_later_locked(taxi_reactor_t *r, taxi__slot_t *s) {
  r->stats.transient_errors++;
  if (s->flags & TAXI__S_REARM) return;
  s->flags |= TAXI__S_REARM;
  if (r->rearm_pending++ == 0) r->rearm_due = taxi_now();
  taxi__reactor_wake_locked(r);
}

/* taxi__reactor_arm_locked, for the callers that cannot give the failure back.
 */
void taxi__reactor_arm_or_retry_locked(taxi_reactor_t *r, taxi__slot_t *s) {
  if (taxi__reactor_arm_locked(r, s) < 0) rearm_later_locked(r, s);
}

/* Whether the close of a handle, which its owner vouches is the last
 * descriptor of its socket, deregisters it so that del may be skipped.
 * The backend's registrations must die with the socket (epoll's do: they
 * belong to the open file description, epoll(7)), and the handle must be
 * armed one-shot or edge-triggered (pool mode), because until the close -
 * after the hooks running in other threads return - and in a copy that
 * fork(2) made meanwhile, the registration lives on: one-shot, it is
 * reported at most once, edge-triggered once per change of the socket,
 * with a token whose row's generation has moved on, dropped as stale like
 * a report another thread collected before the removal (never a
 * level-triggered handle, reported by every wait). */
static bool close_ends_registration(const taxi_reactor_t *r,
                                    const taxi__slot_t *s) {
  return (r->ops->ext & TAXI__EXT_CLOSE_DEREGISTERS) &&
         taxi__reactor_arm_flags_for(r, s->flags) &&
         !(s->flags & TAXI__S_REARM);
}

/* Stop watching h's handle and free its row; `closing`: the caller closes
 * the handle next, see taxi__reactor_remove_closing. */
void taxi__reactor_deregister_locked(taxi_reactor_t *r, taxi_handler_t *h,
                                     bool closing) {
  if (!(h->internal_.flags & TAXI__H_HAS_HANDLE)) return;
  if (!closing || !close_ends_registration(r, &r->slots[h->internal_.slot]))
    r->ops->del(r->backend, h->internal_.handle);
  taxi__handle_map_del(&r->map, h->internal_.handle);
  slot_free_locked(r, h->internal_.slot);
  r->stats.handles--;
  h->internal_.flags &= ~TAXI__H_HAS_HANDLE;
  set_changed_locked(r);
}

static int detach_locked(taxi_reactor_t *r, taxi_handler_t *h, bool closing) {
  if (!taxi__reactor_attached_here(r, h)) return TAXI_ENOENT;
  taxi__reactor_deregister_locked(r, h, closing);
  while (h->internal_.timers) taxi__timer_cancel_locked(r, h->internal_.timers);
  if (h->internal_.signals) taxi__signals_detach_handler_locked(r, h);
  taxi__reactor_unlink_locked(r, h);
  h->internal_.flags |= TAXI__H_CLOSING;
  taxi__handler_release_locked(r, h);
  return 0;
}

int taxi__reactor_detach_locked(taxi_reactor_t *r, taxi_handler_t *h) {
  return detach_locked(r, h, false);
}

int taxi_reactor_remove(taxi_reactor_t *r, taxi_handler_t *h) {
  if (!r || !h) return TAXI_EINVAL;
  taxi__mutex_lock(&r->lock);
  int rc = taxi__reactor_detach_locked(r, h);
  taxi__mutex_unlock(&r->lock);
  return rc;
}

int taxi__reactor_remove_closing(taxi_reactor_t *r, taxi_handler_t *h) {
  taxi__mutex_lock(&r->lock);
  int rc = detach_locked(r, h, true);
  taxi__mutex_unlock(&r->lock);
  return rc;
}
