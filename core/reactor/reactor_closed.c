/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/reactor/reactor_closed.c - handles closed under the reactor: a hook that
 * closes its own handle by mistake and returns 0 (or another thread that
 * closes a registered handle).  Its handler is removed, its error hook
 * told TAXI_EBADF and its close hook given TAXI_INVALID_HANDLE, once
 * (taxi/handler.h).
 *
 * Nothing in the steady state costs a system call.  A closed handle is
 * found out in one of four ways, whichever comes first:
 *  - a wait reports it (TAXI__EV_CLOSED: poll's POLLNVAL, a select that
 *    failed for it): no call until then;
 *  - its re-arm after its hooks fails (pool mode over epoll, whose
 *    registrations die with the file: TAXI_EBADF, or TAXI_ENOENT when the
 *    number names another file now; TAXI_EBADF from any backend): the
 *    re-arm is made anyway;
 *  - another handler registers the number again: the handler holding it
 *    is checked then, instead of the registration being refused;
 *  - the periodic check: a handle whose application hooks ran is marked
 *    (a flag, under the lock held anyway) and checked at most once per
 *    CHECK_PERIOD, in the wait, with one system call - where nothing above
 *    would tell: the plain Reactor over epoll (no re-arm), a number reused
 *    at once under poll or select (no POLLNVAL: the number is open),
 *    kqueue and APR (whose re-arm makes a new registration for whatever
 *    the number names).
 * So a busy handle costs one call per CHECK_PERIOD however many events it
 * has, an idle one nothing; the library's own handles (streams,
 * listeners, wake-up channels: TAXI__S_OWNED), whose hooks never close
 * them, are never marked.
 *
 * Every finding is believed only for a handle still registered (the row
 * and its generation, under the lock) and seen closed or changed now: a
 * report may be about a number that was closed, opened again and
 * registered again by another handler since the wait's set was taken
 * (that registration has another generation, so the report is stale),
 * and a handler's own remove-then-close is not a handle closed under the
 * reactor (the removal frees the row before the close).
 *
 * How "closed or changed" is told: where the backend's modify tells it
 * (TAXI__EXT_MODIFY_TELLS_CLOSED), a modify that changes nothing; else
 * what the handle names (taxi__handle_identity: device and inode on
 * POSIX), recorded at registration - instead of the open-check poll and
 * select made there, so it costs no call more - and compared.  Windows
 * has no such identity: there a socket closed and its value taken at once
 * by another socket is not told apart (by a handle of another kind, it
 * is).
 */
#include "config.h"

#include "core/reactor/reactor_impl.h"
#include "core/common/time_math.h"

/* How long a marked handle may wait for its check. */
#define CHECK_PERIOD (100 * TAXI_NSEC_PER_MSEC)

bool taxi__closed_by_identity(const taxi_reactor_t *r) {
  return !(r->ops->ext & TAXI__EXT_MODIFY_TELLS_CLOSED);
}

/* Whether the re-arm after every hook tells already (see above). */
static bool rearm_tells(const taxi_reactor_t *r) {
  return !taxi__closed_by_identity(r) &&
         (taxi__reactor_arm_flags(r) & TAXI__ARM_ONESHOT);
}

bool taxi__closed_probe_locked(taxi_reactor_t *r, taxi__slot_t *s) {
  if (taxi__closed_by_identity(r)) {
    uint64_t id;
    if (taxi__handle_identity(s->handle, &id) < 0) return true;
    return (s->flags & TAXI__S_IDENT) && id != s->ident;
  }
  /* The arming it has now, so that nothing changes when the handle is
   * still there: deactivated (reported, suspended, or being dispatched in
   * pool mode) stays so. */
  uint32_t row = (uint32_t)(s - r->slots);
  unsigned events = (s->flags & TAXI__S_ARMED) ? s->interest : 0;
  int rc = r->ops->modify(r->backend, s->handle,
                          taxi__reactor_token(row, s->generation), events,
                          taxi__reactor_arm_flags_for(r, s->flags));
  return rc == TAXI_EBADF || rc == TAXI_ENOENT;
}

/* The steps that find a closed handle (taxi__closed_step_t), as the
 * error callback names them. */
static const char *const step_names[] = {"wait", "rearm", "register", "check"};

/* Tell h, removed because its handle (still in internal_.handle, for the
 * record) was closed, then drop the reference that kept its close hook
 * back: that hook gets no handle. */
static void tell_locked(taxi_reactor_t *r, taxi_handler_t *h,
                        taxi__closed_step_t step) {
  taxi_handle_t handle = h->internal_.handle;
  h->internal_.handle = TAXI_INVALID_HANDLE;
  taxi__mutex_unlock(&r->lock);
  if (h->ops->error) h->ops->error(h, handle, TAXI_EBADF);
  taxi__report_error(r->on_error, r->on_error_arg, TAXI_EBADF, step_names[step],
                     handle, 1, false);
  taxi__mutex_lock(&r->lock);
  taxi__handler_release_locked(r, h);
}

void taxi__closed_remove_locked(taxi_reactor_t *r, taxi__slot_t *s,
                                taxi__closed_step_t step) {
  taxi_handler_t *h = s->handler;
  r->stats.rearm_removed++;
  /* Keeps the close hook back until the error hook has run. */
  h->internal_.refs++;
  /* The number is given up now: another handler may register it.  The
   * handler's record of it stays, for its error hook. */
  taxi__reactor_detach_locked(r, h);
  if (h->internal_.serial & TAXI__SER_OWNED) {
    /* One of its hooks runs, or is about to: the error hook comes after
     * them, never beside them. */
    h->internal_.flags |=
        TAXI__H_LOST | ((unsigned)step << TAXI__H_LOST_STEP_SHIFT);
    return;
  }
  tell_locked(r, h, step);
}

void taxi__closed_claim_end_locked(taxi_reactor_t *r, taxi_handler_t *h) {
  if (!(h->internal_.flags & TAXI__H_LOST)) return;
  unsigned step =
      (h->internal_.flags & TAXI__H_LOST_STEP) >> TAXI__H_LOST_STEP_SHIFT;
  h->internal_.flags &= ~(TAXI__H_LOST | TAXI__H_LOST_STEP);
  tell_locked(r, h, (taxi__closed_step_t)step);
}

void taxi__closed_hooks_ran_locked(taxi_reactor_t *r, const taxi__event_t *ev) {
  taxi__slot_t *s = &r->slots[ev->row];
  if (s->handler != ev->handler || s->generation != ev->generation) return;
  if (s->flags & (TAXI__S_OWNED | TAXI__S_UNCHECKED)) return;
  if (rearm_tells(r)) return;
  s->flags |= TAXI__S_UNCHECKED;
  if (r->unchecked++ > 0) return;
  r->check_due = taxi__time_add(taxi_now(), CHECK_PERIOD);
  /* A thread may be waiting past it (a pool's: the hooks ran in another
   * thread). */
  if (r->waiters && r->check_due < r->waiters_deadline)
    taxi__reactor_wake_locked(r);
}

taxi_time_t taxi__closed_check_locked(taxi_reactor_t *r, taxi_time_t now) {
  if (!r->unchecked) return INT64_MAX;
  if (now < r->check_due) return r->check_due;
  /* Rows are looked at again after each removal: the lock was released. */
  for (uint32_t row = 0; row < r->nslots && r->unchecked; row++) {
    taxi__slot_t *s = &r->slots[row];
    /* Retried re-arms have their own way (retry_rearms_locked in
     * reactor_wait.c).  One being dispatched is checked all the same: a number
     * taken by a busy stranger keeps it dispatched most of the time. */
    if (!s->handler || !(s->flags & TAXI__S_UNCHECKED) ||
        (s->flags & TAXI__S_REARM))
      continue;
    s->flags &= ~TAXI__S_UNCHECKED;
    r->unchecked--;
    /* Marked before the reactor entered pool mode over epoll: its re-arms
     * tell from now on. */
    if (rearm_tells(r)) continue;
    if (taxi__closed_probe_locked(r, s))
      taxi__closed_remove_locked(r, s, TAXI__FOUND_BY_CHECK);
  }
  if (!r->unchecked) return INT64_MAX;
  r->check_due = taxi__time_add(now, CHECK_PERIOD);
  return r->check_due;
}

bool taxi__closed_reported_locked(taxi_reactor_t *r, taxi__slot_t *s,
                                  taxi__event_t *ev, bool *consumed) {
  *consumed = false;
  /* The library's own handles get the report as an error, as ever; one
   * being dispatched is reported again once re-armed after its hooks. */
  if (s->flags & (TAXI__S_OWNED | TAXI__S_BUSY)) return false;
  if (!taxi__closed_probe_locked(r, s)) return false;
  *consumed = true;
  taxi_handler_t *h = s->handler;
  /* Claimed already (a timer or signal hook of it runs): told when that
   * claim ends. */
  bool taken = taxi__serial_claim_locked(h);
  if (taken) {
    /* Taken as an event of the handle, whose dispatch - where and when
     * the dispatcher runs hooks: a pool's thread, after those queued
     * before it - finds the handler removed and ends the claim, which
     * calls its error hook; none runs while events are taken. */
    ev->kind = TAXI__EV_IO;
    ev->handler = h;
    ev->handle = s->handle;
    ev->events = TAXI_EV_ERR;
    ev->interest = s->interest;
    ev->row = (uint32_t)(s - r->slots);
    ev->generation = s->generation;
    h->internal_.refs++;
  }
  taxi__closed_remove_locked(r, s, TAXI__FOUND_BY_WAIT);
  return taken;
}

bool taxi__closed_evict_locked(taxi_reactor_t *r, taxi_handle_t handle,
                               const taxi_handler_t *h) {
  uint32_t row;
  if (taxi__handle_map_get(&r->map, handle, &row) != 0) return false;
  taxi__slot_t *s = &r->slots[row];
  /* A handler registering its own handle again, or the library's: as
   * ever, TAXI_EEXIST. */
  if (!s->handler || s->handler == h || (s->flags & TAXI__S_OWNED))
    return false;
  if (!taxi__closed_probe_locked(r, s)) return false;
  taxi__closed_remove_locked(r, s, TAXI__FOUND_BY_REGISTER);
  return true;
}
