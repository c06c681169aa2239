/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/reactor/reactor_run.c - who dispatches a reactor: its own loop
 * (taxi_reactor_run, _handle_events, _handle_one: wait, take, run, with
 * failed waits backed off), or a thread pool, which attaches itself
 * (pool mode: handles deactivated while their event is dispatched).
 *
 * Calls: reactor_dispatch.c, reactor_wait.c, reactor_table.c (re-arming
 * every handle for the mode), the wake-up channel; common.  Nothing in
 * the wing calls this file.
 */
#include "config.h"

#include "core/reactor/reactor_impl.h"
#include "core/reactor/reactor_take.h"
#include "backends/completion.h"
#include "core/common/alloc.h"
#include "core/common/batch_clock.h"
#include "core/common/detail.h"
#include "core/common/time_math.h"

/* The reactor's own wait failed with `code`: reported, and paused for if
 * it may pass (core/common/backoff.h).  Returns 0 to go on, or the code. */
static int wait_failed_locked(taxi_reactor_t *r, int code, taxi_time_t deadline,
                              taxi_time_t *now) {
  taxi__mutex_unlock(&r->lock);
  int rc =
      taxi__backoff_wait_failed(&r->wait_backoff, r->on_error, r->on_error_arg,
                                code, deadline, &r->stopped);
  taxi__mutex_lock(&r->lock);
  *now = taxi_now();
  if (rc == 0) r->stats.transient_errors++;
  return rc;
}

static int begin_dispatch_locked(taxi_reactor_t *r, const char *fn) {
  if (r->pool)
    return taxi__refuse(TAXI_EBUSY,
                        "%s: r: a thread pool dispatches it (taxi_lf_create, "
                        "taxi_hsha_create)",
                        fn);
  if (r->has_owner)
    return taxi__refuse(TAXI_EBUSY,
                        "%s: r: another thread is dispatching it (or this "
                        "is one of its hooks)",
                        fn);
  if (atomic_load(&r->stopped)) return TAXI_ESTOPPED;
  r->has_owner = true;
  r->owner = taxi__thread_self();
  return 0;
}

/* Dispatch at most `limit` events within timeout_ms.  Returns how many, or
 * a negative code.  `carry` (taxi_reactor_run's): the clock of the last
 * wait of the call before, taken as "now" instead of reading it again, and
 * given back updated; 0 at first, NULL for a call on its own. */
static int dispatch_loop(taxi_reactor_t *r, int timeout_ms, int limit,
                         const char *fn, taxi_time_t *carry) {
  if (!r) return taxi__refuse(TAXI_EINVAL, "%s: r: NULL", fn);
  taxi__mutex_lock(&r->lock);
  int rc = begin_dispatch_locked(r, fn);
  if (rc < 0) {
    taxi__mutex_unlock(&r->lock);
    return rc;
  }
  /* taxi_reactor_run comes back here after every batch: the time of the
   * wait before it is "now", so that a batch costs one clock read, the
   * wait's.  A timer due meanwhile is then taken, or waited for, late by
   * as long as that batch took, as the events of the batch are. */
  taxi_time_t now = carry && *carry > 0 ? *carry : taxi_now();
  taxi_time_t deadline = taxi__deadline_after_ms(now, timeout_ms);
  /* Made once; without it (no memory) streams read into their own. */
  if (!r->scratch) r->scratch = taxi__malloc(TAXI__SCRATCH_BYTES);
  unsigned char *outer_scratch = taxi__batch_scratch_enter(r->scratch);
  int dispatched = 0;
  bool waited = false;
  taxi__event_t ev;
  for (;;) {
    if (atomic_load(&r->stopped)) {
      rc = TAXI_ESTOPPED;
      break;
    }
    if (dispatched < limit && taxi__reactor_take_locked(r, now, &ev)) {
      /* Before this call's first wait, I/O can only come from an earlier
       * wait: that is an event taken without a system call. */
      if (!waited && ev.kind == TAXI__EV_IO) r->stats.pending_taken++;
      taxi__reactor_run_locked(r, &ev);
      dispatched++;
      continue;
    }
    if (dispatched > 0 || (waited && now >= deadline)) break;
    if (atomic_exchange(&r->interrupted, false)) break;
    /* The take may have drained the wake-up of a stop made since the
     * check above: look again, or the wait would sleep through it. */
    if (atomic_load(&r->stopped)) continue;
    rc = taxi__reactor_wait_locked(r, r->wait_buf, r->max_events, deadline,
                                   &now);
    waited = true;
    if (rc >= 0) {
      taxi__backoff_reset(&r->wait_backoff);
    } else if (r->wait_errors_out) {
      break;
    } else if ((rc = wait_failed_locked(r, rc, deadline, &now)) < 0) {
      break;
    }
  }
  r->has_owner = false;
  taxi__batch_scratch_leave(outer_scratch);
  if (carry) *carry = now;
  /* Stopped, whenever it was: one answer, whatever ran before. */
  if (rc >= 0 && atomic_load(&r->stopped)) rc = TAXI_ESTOPPED;
  taxi__mutex_unlock(&r->lock);
  return rc < 0 ? rc : dispatched;
}

void taxi__reactor_pass_wait_errors(taxi_reactor_t *r) {
  taxi__mutex_lock(&r->lock);
  r->wait_errors_out = true;
  taxi__mutex_unlock(&r->lock);
}

int taxi_reactor_handle_events(taxi_reactor_t *r, int timeout_ms) {
  return dispatch_loop(r, timeout_ms, INT32_MAX, "taxi_reactor_handle_events",
                       NULL);
}

int taxi_reactor_handle_one(taxi_reactor_t *r, int timeout_ms) {
  return dispatch_loop(r, timeout_ms, 1, "taxi_reactor_handle_one", NULL);
}

int taxi_reactor_run(taxi_reactor_t *r) {
  if (!r) return taxi__refuse(TAXI_EINVAL, "taxi_reactor_run: r: NULL");
  taxi_time_t now = 0;
  for (;;) {
    int rc = dispatch_loop(r, -1, INT32_MAX, "taxi_reactor_run", &now);
    if (rc < 0) return rc; /* TAXI_ESTOPPED once stopped */
  }
}

/* ---- pool mode ----------------------------------------------------------- */

/* Re-arm every live handle for the current mode. */
static void rearm_all_locked(taxi_reactor_t *r) {
  for (uint32_t row = 0; row < r->nslots; row++) {
    taxi__slot_t *s = &r->slots[row];
    if (s->handler) taxi__reactor_arm_or_retry_locked(r, s);
  }
}

int taxi__reactor_attach_pool_locked(taxi_reactor_t *r, void *pool,
                                     size_t max_waiters, bool edge,
                                     const char *fn) {
  if (r->pool)
    return taxi__refuse(
        TAXI_EBUSY, "%s: r: another thread pool dispatches this reactor", fn);
  if (r->has_owner)
    return taxi__refuse(TAXI_EBUSY,
                        "%s: r: a thread is dispatching this reactor "
                        "(taxi_reactor_run, _handle_events, _handle_one)",
                        fn);
  if (max_waiters == 0) max_waiters = 1;
  size_t cap = r->max_events * max_waiters;
  if (cap > r->pending_cap) {
    /* Unwrap into a larger ring. */
    taxi__ready_t *ring = taxi__calloc(cap, sizeof *ring);
    if (!ring) return TAXI_ENOMEM;
    for (size_t i = 0; i < r->pending_count; i++)
      ring[i] = r->pending[(r->pending_head + i) % r->pending_cap];
    taxi__free(r->pending);
    r->pending = ring;
    r->pending_head = 0;
    r->pending_cap = cap;
  }
  r->pool = pool;
  atomic_store(&r->edge, edge && (r->ops->caps & TAXI_CAP_EDGE));
  rearm_all_locked(r);
  return 0;
}

void taxi__reactor_detach_pool_locked(taxi_reactor_t *r) {
  r->pool = NULL;
  atomic_store(&r->edge, false);
  r->wake_sticky = false;
  taxi__rwake_drain(r);
  rearm_all_locked(r);
}
