/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/reactor/reactor_register.c - registering a handle and changing what
 * is watched for it: taxi_reactor_register (and the library's own
 * variants, core/reactor/reactor_closing.h), _modify, _suspend, _resume.
 *
 * Here the caller's arguments are checked and an application's handle
 * gets what it names recorded; a number still held by a handler whose
 * handle was closed under the reactor is taken back for the new one
 * (core/reactor/reactor_closed.c).  Calls: reactor_table.c,
 * reactor_closed.c; common and ports.
 */
#include "config.h"

#include "core/reactor/reactor_impl.h"
#include "core/reactor/reactor_closing.h"
#include "core/common/detail.h"

static bool valid_interest(unsigned events) {
  return events && !(events & ~TAXI_EV_INTEREST);
}

/* taxi_reactor_register; add_flags: TAXI__ARM_OPEN or 0; own: the library
 * serves the handle with hooks that never close it, and with `drains`
 * that read or accept until EAGAIN. */
static int register_handle(taxi_reactor_t *r, taxi_handle_t handle,
                           taxi_handler_t *h, unsigned events,
                           unsigned add_flags, bool own, bool drains) {
  if (!r || !h || !h->ops || !valid_interest(events)) return TAXI_EINVAL;
  if (handle == TAXI_INVALID_HANDLE) return TAXI_EBADF;
  int rc = 0;
  if ((events & TAXI_EV_EXCEPT) && !(r->ops->caps & TAXI_CAP_EXCEPT))
    rc = TAXI_ENOTSUP;
  taxi__reg_how_t how = {
      add_flags, (own ? TAXI__S_OWNED : 0) | (drains ? TAXI__S_DRAINS : 0), 0};
  if (rc == 0 && !own && taxi__closed_by_identity(r)) {
    /* What an application's handle names, to tell later whether it was
     * closed under the reactor (core/reactor/reactor_closed.c).  It proves the
     * handle open, so the backend's own check is skipped: no system call
     * more than before. */
    rc = taxi__handle_identity(handle, &how.ident);
    how.slot_flags |= TAXI__S_IDENT;
    how.add_flags |= TAXI__ARM_OPEN;
  }
  if (rc == 0) {
    taxi__mutex_lock(&r->lock);
    rc = taxi__reactor_register_locked(r, handle, h, events, &how);
    /* The number may be held by a handler whose handle was closed under
     * the reactor and not found out yet: then this one takes it. */
    while (rc == TAXI_EEXIST && taxi__closed_evict_locked(r, handle, h))
      rc = taxi__reactor_register_locked(r, handle, h, events, &how);
    taxi__mutex_unlock(&r->lock);
  }
  if (rc == TAXI_EBUSY)
    taxi__refuse(rc,
                 "taxi_reactor_register: h: closing (removed, its close hook "
                 "not yet run); wait for the close hook");
  /* A closed handle is TAXI_EBADF whatever else is wrong.  The check is
   * made only on failure: where it succeeds, every backend's add has
   * found the handle open (the kernel's epoll_ctl or kevent, or the
   * backend's own check where its mechanism would notice only later),
   * and a registration per connection need not cost a system call more. */
  if (rc < 0 && rc != TAXI_EBADF && taxi__handle_check(handle) < 0)
    rc = TAXI_EBADF;
  return rc;
}

int taxi_reactor_register(taxi_reactor_t *r, taxi_handle_t handle,
                          taxi_handler_t *h, unsigned events) {
  return register_handle(r, handle, h, events, 0, false, false);
}

int taxi__reactor_register_open(taxi_reactor_t *r, taxi_handle_t handle,
                                taxi_handler_t *h, unsigned events) {
  return register_handle(r, handle, h, events, TAXI__ARM_OPEN, true, false);
}

int taxi__reactor_register_own(taxi_reactor_t *r, taxi_handle_t handle,
                               taxi_handler_t *h, unsigned events) {
  return register_handle(r, handle, h, events, 0, true, false);
}

int taxi__reactor_register_drains(taxi_reactor_t *r, taxi_handle_t handle,
                                  taxi_handler_t *h, unsigned events,
                                  bool open) {
  return register_handle(r, handle, h, events, open ? TAXI__ARM_OPEN : 0, true,
                         true);
}

bool taxi__reactor_drains_edge(taxi_reactor_t *r) {
  /* Set only while a pool is attached (and cleared when it detaches). */
  return atomic_load_explicit(&r->edge, memory_order_relaxed);
}

int taxi_reactor_modify(taxi_reactor_t *r, taxi_handler_t *h, unsigned events) {
  if (!r || !h || !valid_interest(events)) return TAXI_EINVAL;
  if ((events & TAXI_EV_EXCEPT) && !(r->ops->caps & TAXI_CAP_EXCEPT))
    return TAXI_ENOTSUP;
  taxi__mutex_lock(&r->lock);
  int rc = TAXI_ENOENT;
  taxi__slot_t *s = taxi__reactor_slot_of(r, h);
  if (s) {
    uint32_t old = s->interest;
    s->interest = events;
    rc = taxi__reactor_arm_locked(r, s);
    if (rc < 0) s->interest = old;
  }
  taxi__mutex_unlock(&r->lock);
  return rc;
}

static int set_suspended(taxi_reactor_t *r, taxi_handler_t *h, bool on) {
  if (!r || !h) return TAXI_EINVAL;
  taxi__mutex_lock(&r->lock);
  int rc = TAXI_ENOENT;
  taxi__slot_t *s = taxi__reactor_slot_of(r, h);
  if (s) {
    rc = 0;
    if (!!(s->flags & TAXI__S_SUSPENDED) != on) {
      s->flags ^= TAXI__S_SUSPENDED;
      rc = taxi__reactor_arm_locked(r, s);
      if (rc < 0) s->flags ^= TAXI__S_SUSPENDED;
    }
  }
  taxi__mutex_unlock(&r->lock);
  return rc;
}

int taxi_reactor_suspend(taxi_reactor_t *r, taxi_handler_t *h) {
  return set_suspended(r, h, true);
}

int taxi_reactor_resume(taxi_reactor_t *r, taxi_handler_t *h) {
  return set_suspended(r, h, false);
}
