/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/pools/lf_control.c - the Leader/Followers pool's public calls:
 * create (over a reactor, or any source for core/pools/proactor_source.c),
 * spawn, join, shrink, stop, wait, destroy and the statistics.
 *
 * Calls: lf_pool.c (the thread records and the loop they run),
 * lf_options.c, reactor_source.c (a pool made over a reactor), the source
 * through its table of steps; common and ports.
 */
#include "config.h"

#include "taxi/lf.h"
#include "core/common/alloc.h"
#include "core/common/detail.h"
#include "core/pools/lf_impl.h"
#include "core/common/time_math.h"

#include <limits.h>

int taxi__lf_create_source(taxi_lf_pool_t **out, const taxi__source_t *src,
                           const taxi_lf_options_t *opts, const char *fn) {
  *out = NULL;
  taxi_lf_options_t o;
  int rc = taxi__lf_options_read(&o, opts, src->multi_wait, fn);
  if (rc < 0) return rc;

  taxi_lf_pool_t *p = taxi__calloc(1, sizeof *p);
  if (!p) return TAXI_ENOMEM;
  p->src = *src;
  p->opts = o;
  p->max_leaders = o.leaders == TAXI_LEADERS_ONE ? 1
                   : o.max_leaders               ? o.max_leaders
                                                 : UINT_MAX;
  rc = taxi__cond_init(&p->shared);
  if (rc < 0) goto fail_free;
  rc = taxi__cond_init(&p->left);
  if (rc < 0) goto fail_shared;
  rc = taxi__cond_init(&p->pause);
  if (rc < 0) goto fail_left;
  /* Room for what every leader's wait may report at once. */
  size_t waiters = o.leaders == TAXI_LEADERS_ONE ? 1
                   : o.max_leaders               ? o.max_leaders
                                                 : 4;
  taxi__mutex_lock(p->src.lock);
  rc = p->src.ops->attach_pool_locked(p->src.self, p, waiters);
  taxi__mutex_unlock(p->src.lock);
  if (rc < 0) goto fail_pause;
  rc = taxi__registry_add(&p->reg, TAXI__KIND_LF);
  if (rc < 0) goto fail_attach;
  *out = p;
  return 0;

fail_attach:
  taxi__mutex_lock(p->src.lock);
  p->src.ops->detach_pool_locked(p->src.self);
  taxi__mutex_unlock(p->src.lock);
fail_pause:
  taxi__cond_destroy(&p->pause);
fail_left:
  taxi__cond_destroy(&p->left);
fail_shared:
  taxi__cond_destroy(&p->shared);
fail_free:
  taxi__free(p);
  return rc;
}

int taxi_lf_create(taxi_lf_pool_t **out, taxi_reactor_t *r,
                   const taxi_lf_options_t *opts) {
  if (!out || !r)
    return taxi__refuse(TAXI_EINVAL, "taxi_lf_create: %s: NULL",
                        !out ? "out" : "r");
  taxi__source_t src;
  taxi__reactor_source(r, &src);
  return taxi__lf_create_source(out, &src, opts, "taxi_lf_create");
}

int taxi_lf_spawn(taxi_lf_pool_t *p, unsigned n) {
  if (!taxi__lf_pin(p)) return TAXI_EINVAL;
  int rc = 0;
  taxi__mutex_lock(p->src.lock);
  if (n == 0 || n > TAXI_LF_MAX_THREADS ||
      p->spawned_active + n > TAXI_LF_MAX_THREADS) {
    rc = taxi__refuse(TAXI_EINVAL,
                      "taxi_lf_spawn: n: 1 to TAXI_LF_MAX_THREADS (%u) "
                      "spawned threads in all, %u running; got %u",
                      TAXI_LF_MAX_THREADS, p->spawned_active, n);
  } else if (p->shutdown) {
    rc = TAXI_ESTOPPED;
  }
  for (unsigned i = 0; rc == 0 && i < n; i++) {
    taxi__lf_thread_t *t;
    rc = taxi__lf_record_new_locked(p, true, &t);
    if (rc < 0) break;
    p->spawned_active++;
    taxi__lf_enter_locked(p, t);
    rc = taxi__thread_create(&t->thread, taxi__lf_spawned_main, t);
    if (rc < 0) {
      taxi__lf_report_locked(p, rc, "thread", 1, false);
      /* The record stays (ids are never reused) but marks no thread. */
      p->spawned_active--;
      p->active--;
      p->stats.threads = p->active;
      t->active = false;
      t->stats.active = 0;
      t->exited = true;
      t->spawned = false;
    }
  }
  taxi__mutex_unlock(p->src.lock);
  taxi__registry_unpin(&p->reg);
  return rc;
}

int taxi_lf_join(taxi_lf_pool_t *p, int timeout_ms, int priority) {
  if (!taxi__lf_pin(p)) return TAXI_EINVAL;
  taxi_time_t deadline = taxi__deadline_after_ms(taxi_now(), timeout_ms);
  taxi__lf_thread_t *t = NULL;
  int rc = 0;
  taxi__mutex_lock(p->src.lock);
  if (taxi__lf_in_pool(p))
    rc = taxi__refuse(TAXI_EBUSY,
                      "taxi_lf_join: p: the calling thread is in the pool "
                      "already (a hook, or a spawned thread)");
  else if (p->shutdown)
    rc = p->error ? p->error : TAXI_ESTOPPED;
  else
    rc = taxi__lf_app_record_locked(p, &t);
  if (rc == 0) {
    taxi__lf_enter_locked(p, t);
    rc = taxi__lf_member_run_locked(p, t, priority, deadline);
    /* Left because the pool stopped: say why, if it failed. */
    if (rc == 0) rc = p->error ? p->error : TAXI_ESTOPPED;
  }
  taxi__mutex_unlock(p->src.lock);
  taxi__registry_unpin(&p->reg);
  return rc;
}

/* Wait until `done` holds, waking pool threads as needed.  the source's lock
 * held. Timed waits: a leader blocked in the backend is woken through the
 * reactor, whose wake-up may be consumed by another thread first. */
static void wait_until_locked(taxi_lf_pool_t *p,
                              bool (*done)(const taxi_lf_pool_t *)) {
  while (!done(p)) {
    taxi__lf_wake_everyone_locked(p);
    taxi__cond_timedwait(&p->left, p->src.lock,
                         taxi_now() + 10 * TAXI_NSEC_PER_MSEC);
  }
}

static bool all_left(const taxi_lf_pool_t *p) {
  return p->active == (taxi__lf_in_pool(p) ? 1u : 0u);
}

static bool leavers_left(const taxi_lf_pool_t *p) {
  for (unsigned i = 0; i < p->nthreads; i++)
    if (p->threads[i]->leave && p->threads[i]->active) return false;
  return true;
}

int taxi_lf_shrink(taxi_lf_pool_t *p, unsigned n) {
  if (!taxi__lf_pin(p)) return TAXI_EINVAL;
  int rc = 0;
  taxi__mutex_lock(p->src.lock);
  unsigned running = 0;
  for (unsigned i = 0; i < p->nthreads; i++)
    if (p->threads[i]->spawned && !p->threads[i]->exited &&
        !p->threads[i]->leave)
      running++;
  if (taxi__lf_in_pool(p))
    rc = taxi__refuse(TAXI_EBUSY,
                      "taxi_lf_shrink: p: called from a thread of the pool, "
                      "which would wait for the threads it asks to leave");
  else if (p->shutdown)
    rc = TAXI_ESTOPPED;
  else if (n == 0 || n > running)
    rc = taxi__refuse(TAXI_EINVAL,
                      "taxi_lf_shrink: n: 1 to the %u spawned threads still "
                      "running; got %u",
                      running, n);
  /* Followers first: they are idle, so they leave at once. */
  for (int pass = 0; rc == 0 && pass < 2 && n > 0; pass++) {
    for (unsigned i = 0; i < p->nthreads && n > 0; i++) {
      taxi__lf_thread_t *t = p->threads[i];
      if (!t->spawned || t->exited || t->leave) continue;
      if (pass == 0 && !t->following) continue;
      t->leave = true;
      n--;
    }
  }
  if (rc == 0) wait_until_locked(p, leavers_left);
  /* Join them now, so a pool that grows and shrinks for ever does not
   * keep a finished thread's stack per cycle.  We hold the lock, so each
   * has already unlocked for the last time: only its return is left, and
   * joining under the lock cannot deadlock. */
  for (unsigned i = 0; rc == 0 && i < p->nthreads; i++) {
    taxi__lf_thread_t *t = p->threads[i];
    if (!t->spawned || !t->leave || t->joined) continue;
    taxi__thread_join(t->thread);
    t->joined = true;
  }
  taxi__mutex_unlock(p->src.lock);
  taxi__registry_unpin(&p->reg);
  return rc;
}

/* Shut down, or wait for a pool that stopped by itself to be left.  The
 * source's lock held. */
static int shutdown_locked(taxi_lf_pool_t *p) {
  bool already = p->shutdown;
  if (!already) taxi__lf_stop_locked(p);
  wait_until_locked(p, all_left);
  if (p->active == 0) p->src.ops->set_sticky_locked(p->src.self, false);
  if (p->error) return p->error;
  return already ? TAXI_ESTOPPED : 0;
}

int taxi_lf_stop(taxi_lf_pool_t *p) {
  if (!taxi__lf_pin(p)) return TAXI_EINVAL;
  taxi__mutex_lock(p->src.lock);
  int rc = shutdown_locked(p);
  taxi__mutex_unlock(p->src.lock);
  taxi__registry_unpin(&p->reg);
  return rc;
}

int taxi_lf_destroy(taxi_lf_pool_t *p) {
  if (!taxi__lf_pin(p)) return TAXI_EINVAL;
  taxi__mutex_t *lock = p->src.lock;
  taxi__mutex_lock(lock);
  if (taxi__lf_in_pool(p)) {
    taxi__mutex_unlock(lock);
    taxi__registry_unpin(&p->reg);
    return taxi__refuse(TAXI_EBUSY,
                        "taxi_lf_destroy: p: called from a thread of the "
                        "pool (a hook), which the destroy would wait for");
  }
  taxi__mutex_unlock(lock);
  if (!taxi__registry_remove(&p->reg, TAXI__KIND_LF)) {
    taxi__registry_unpin(&p->reg);
    return TAXI_EINVAL; /* another thread destroyed it meanwhile */
  }
  taxi__registry_unpin(&p->reg);

  taxi__mutex_lock(lock);
  shutdown_locked(p); /* also waits for the threads of a pool that failed */
  /* Calls that pinned the pool before it was unregistered (a join that
   * has just returned, say) finish first. */
  while (atomic_load(&p->reg.pins) != 0)
    taxi__cond_timedwait(&p->left, lock, taxi_now() + TAXI_NSEC_PER_MSEC);
  taxi__mutex_unlock(lock);

  for (unsigned i = 0; i < p->nthreads; i++)
    if (p->threads[i]->spawned && !p->threads[i]->joined)
      taxi__thread_join(p->threads[i]->thread);

  taxi__mutex_lock(lock);
  p->src.ops->detach_pool_locked(p->src.self);
  taxi__mutex_unlock(lock);
  for (unsigned i = 0; i < p->nthreads; i++)
    taxi__lf_record_free(p->threads[i]);
  taxi__free(p->threads);
  taxi__cond_destroy(&p->pause);
  taxi__cond_destroy(&p->left);
  taxi__cond_destroy(&p->shared);
  taxi__free(p);
  return 0;
}

static bool stopped_and_left(const taxi_lf_pool_t *p) {
  return p->shutdown && all_left(p);
}

int taxi_lf_wait(taxi_lf_pool_t *p, int timeout_ms) {
  if (!taxi__lf_pin(p)) return TAXI_EINVAL;
  taxi_time_t deadline = taxi__deadline_after_ms(taxi_now(), timeout_ms);
  int rc = 0;
  taxi__mutex_lock(p->src.lock);
  if (taxi__lf_in_pool(p))
    rc = taxi__refuse(TAXI_EBUSY,
                      "taxi_lf_wait: p: called from a thread of the pool, "
                      "which would wait for itself");
  while (rc == 0 && !stopped_and_left(p)) {
    /* Looked at every 10 ms, not only when a thread leaves: a stop of the
     * source that no pool thread has seen yet, and the wake-ups of a
     * stopping pool, which a kevent with several waiters may lose
     * (libkqueue), are made good here as taxi_lf_stop makes them good. */
    if (!p->shutdown && atomic_load(p->src.stop_flag)) taxi__lf_stop_locked(p);
    if (p->shutdown) taxi__lf_wake_everyone_locked(p);
    taxi_time_t slice = taxi__time_add(taxi_now(), 10 * TAXI_NSEC_PER_MSEC);
    taxi__cond_timedwait(&p->left, p->src.lock,
                         slice < deadline ? slice : deadline);
    if (!stopped_and_left(p) && taxi_now() >= deadline) rc = TAXI_ETIMEDOUT;
  }
  if (rc == 0) rc = p->error ? p->error : TAXI_ESTOPPED;
  taxi__mutex_unlock(p->src.lock);
  taxi__registry_unpin(&p->reg);
  return rc;
}

int taxi_lf_stats(const taxi_lf_pool_t *cp, taxi_lf_stats_t *out) {
  /* Reading takes the pool's lock and pins it: neither changes what the
   * pool is, so const is cast away for them alone. */
  taxi_lf_pool_t *p = (taxi_lf_pool_t *)(uintptr_t)cp;
  if (!out || !taxi__lf_pin(p)) return TAXI_EINVAL;
  taxi__mutex_lock(p->src.lock);
  *out = p->stats;
  out->error = p->error;
  out->threads = p->active;
  out->leaders = p->leaders;
  out->followers = p->followers;
  out->message_ns = p->event_ns;
  taxi__mutex_unlock(p->src.lock);
  taxi__registry_unpin(&p->reg);
  return 0;
}

int taxi_lf_thread_stats(const taxi_lf_pool_t *cp, taxi_lf_thread_stats_t *out,
                         size_t cap) {
  taxi_lf_pool_t *p = (taxi_lf_pool_t *)(uintptr_t)cp; /* lock, pin */
  if ((!out && cap) || !taxi__lf_pin(p)) return TAXI_EINVAL;
  taxi__mutex_lock(p->src.lock);
  unsigned n = p->nthreads;
  for (unsigned i = 0; i < n && i < cap; i++) out[i] = p->threads[i]->stats;
  taxi__mutex_unlock(p->src.lock);
  taxi__registry_unpin(&p->reg);
  return (int)n;
}
