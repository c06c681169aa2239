/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/reactor/reactor_wait.c - waiting on the backend: the deadline (the
 * next timer, the next check or retry), the wait with the lock released,
 * and the reported events appended to the pending ring; before it, the
 * re-arms that failed are retried and a handler whose handle can never be
 * re-armed is removed.
 *
 * Calls: reactor_table.c, reactor_closed.c, handler.c; common.
 */
#include "config.h"

#include "core/reactor/reactor_impl.h"
#include "core/common/time_math.h"

/* Append what a wait reported to the pending ring.  In pool mode a handle
 * must not be reported to another waiter before its event is dispatched:
 * one-shot backends deactivated it already; the others are told now.  An
 * edge-triggered handle stays armed: a report of it while its event is
 * dispatched is set aside for the thread that dispatches it
 * (take_io_locked in reactor_dispatch.c). */
static void push_ready_locked(taxi_reactor_t *r, const taxi__ready_t *rd) {
  if (r->pool) {
    taxi__slot_t *s = taxi__reactor_slot_for_token(r, rd->token);
    if (s && (s->flags & TAXI__S_ARMED) &&
        !taxi__reactor_edge_flags(r, s->flags)) {
      /* If the backend refuses, the handle stays armed (and says so): its
       * events are dropped as stale while its hooks run (TAXI__S_BUSY),
       * and the re-arm after them is then a no-op. */
      if ((r->ops->caps & TAXI_CAP_ONESHOT) ||
          r->ops->modify(r->backend, s->handle, rd->token, 0, 0) == 0)
        s->flags &= ~TAXI__S_ARMED;
      else
        r->stats.transient_errors++;
    }
  }
  size_t tail = (r->pending_head + r->pending_count) % r->pending_cap;
  r->pending[tail] = *rd;
  r->pending_count++;
}

/* Remove the handler of s, whose handle cannot be re-armed (`code`): it
 * would never hear of its handle again.  It is told through its error hook,
 * then the reactor's error callback, and closed when the last of its
 * dispatches is over.  The lock is released around the application's
 * code. */
static void remove_deaf_locked(taxi_reactor_t *r, taxi__slot_t *s, int code,
                               unsigned attempt) {
  taxi_handler_t *h = s->handler;
  taxi_handle_t handle = s->handle;
  r->stats.rearm_removed++;
  h->internal_.refs++; /* keeps h, and its close hook, for after the calls */
  taxi__reactor_detach_locked(r, h);
  taxi__mutex_unlock(&r->lock);
  if (h->ops->error) h->ops->error(h, handle, code);
  taxi__report_error(r->on_error, r->on_error_arg, code, "rearm", handle,
                     attempt, false);
  taxi__mutex_lock(&r->lock);
  taxi__handler_release_locked(r, h);
}

/* Retry the re-arms that failed (rearm_later_locked) once they are due.
 * A failure that is not transient, or transient failures that go on past
 * the back-off's limit, remove the handler (remove_deaf_locked); the others
 * are retried after the next pause. */
static void retry_rearms_locked(taxi_reactor_t *r, taxi_time_t now) {
  if (!r->rearm_pending || now < r->rearm_due) return;
  int still = 0; /* the code of a re-arm still failing, 0 if none */
  /* Rows are looked up again after each removal: the lock was released. */
  for (uint32_t row = 0; row < r->nslots && r->rearm_pending; row++) {
    taxi__slot_t *s = &r->slots[row];
    if (!s->handler || !(s->flags & TAXI__S_REARM)) continue;
    int rc = taxi__reactor_arm_locked(r, s);
    if (rc == 0) continue;
    /* Refused twice, after its hooks or a change of mode: an application's
     * handle closed under the reactor (a number not open; or another
     * file's now, where the backend can tell) is that, not a handle the
     * backend will not watch. */
    if (!(s->flags & TAXI__S_OWNED) &&
        (rc == TAXI_EBADF ||
         (rc == TAXI_ENOENT && !taxi__closed_by_identity(r)))) {
      taxi__closed_remove_locked(r, s, TAXI__FOUND_BY_REARM);
      continue;
    }
    if (!taxi__error_transient(rc))
      remove_deaf_locked(r, s, rc, r->rearm_backoff.failures + 1);
    else
      still = rc;
  }
  if (!still) {
    taxi__backoff_reset(&r->rearm_backoff);
    return;
  }
  taxi_time_t pause = taxi__backoff_failed(&r->rearm_backoff);
  if (pause >= 0) {
    r->rearm_due = taxi__time_add(now, pause);
    unsigned attempt = r->rearm_backoff.failures;
    taxi__mutex_unlock(&r->lock);
    taxi__report_error(r->on_error, r->on_error_arg, still, "rearm",
                       TAXI_INVALID_HANDLE, attempt, false);
    taxi__mutex_lock(&r->lock);
    return;
  }
  /* The failures went on too long: those handlers are deaf for good. */
  for (uint32_t row = 0; row < r->nslots && r->rearm_pending; row++) {
    taxi__slot_t *s = &r->slots[row];
    if (s->handler && (s->flags & TAXI__S_REARM))
      remove_deaf_locked(r, s, still, r->rearm_backoff.failures);
  }
  taxi__backoff_reset(&r->rearm_backoff);
}

int taxi__reactor_wait_locked(taxi_reactor_t *r, taxi__ready_t *buf, size_t cap,
                              taxi_time_t deadline, taxi_time_t *now) {
  retry_rearms_locked(r, *now);
  if (r->rearm_pending && r->rearm_due < deadline) deadline = r->rearm_due;
  taxi_time_t check_due = taxi__closed_check_locked(r, *now);
  if (check_due < deadline) deadline = check_due;
  taxi_timer_t *t = taxi__timer_heap_top(&r->timers);
  if (t && t->internal_.deadline < deadline) deadline = t->internal_.deadline;
  if (r->notes.count || r->sig_any_pending) deadline = *now;
  /* Never ask for more than the ring can take once waits in progress have
   * appended what they were promised. */
  size_t room = r->pending_cap - r->pending_count - r->pending_reserved;
  if (cap > room) cap = room;
  if (cap == 0) return 0;
  r->pending_reserved += cap;
  if (r->waiters++ == 0 || deadline > r->waiters_deadline)
    r->waiters_deadline = deadline;
  taxi__mutex_unlock(&r->lock);

  int n = r->ops->wait(r->backend, buf, cap, taxi__deadline_ms(*now, deadline));

  taxi__mutex_lock(&r->lock);
  r->waiters--;
  r->pending_reserved -= cap;
  r->stats.waits++;
  *now = taxi_now();
  r->batch_now = *now;
  if (n < 0) return n;
  for (int i = 0; i < n; i++) push_ready_locked(r, &buf[i]);
  r->notes_budget = r->notes.count;
  return n;
}
