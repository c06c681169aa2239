/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/pools/lf_pool.c - the Leader/Followers thread pool.
 *
 * Every thread runs one loop (pool_loop) with the source's lock held
 * except while it waits on the handle set or runs hooks:
 *
 *   - something ready without waiting (pending events from an earlier
 *     wait, notifications, due timers, signals)?  Take one (the reactor
 *     deactivates its handle), promote a follower if nobody leads or more
 *     work is pending, then process it as a processing thread;
 *   - else, if fewer than max_leaders threads lead and the source has room
 *     for what another wait may report, lead: wait on the handle set; what
 *     the wait reports goes to the pending ring, already deactivated, and
 *     the loop takes one of it next;
 *   - else follow: wait on this thread's synchronizer until promoted.
 *
 * A wait that fails is retried after a growing pause if the failure may
 * pass (core/common/backoff.h), the thread keeping the leader's role meanwhile;
 * otherwise the pool stops as a whole, keeping the failure as its error for
 * join, wait and shutdown to return (see taxi/lf.h, "Failures").
 *
 * The pool dispatches a source (core/pools/dispatch_source.h): a reactor, or a
 * proactor's completion queue, whose steps the words above describe for
 * the reactor.  One lock (the source's) guards the pool too: the steps
 * already hold it,
 * and a second lock would only add ordering rules.  Followers wait on a
 * condition variable of their own (LIFO, FIFO, priority) so that a
 * promotion wakes exactly the chosen thread, or on one shared condition
 * (TAXI_PROMOTE_SHARED) where the OS picks.
 */
#include "config.h"

#include "taxi/lf.h"
#include "core/common/alloc.h"
#include "core/common/backoff.h"
#include "core/common/detail.h"
#include "core/pools/dispatch_source.h"
#include "core/pools/lf_bound.h"
#include "core/common/options.h"
#include "core/common/registry.h"
#include "core/common/time_math.h"

#include <limits.h>
#include <string.h>

typedef struct lf_thread lf_thread_t;

/* One thread that is or was in the pool.  Records are kept until the pool
 * is destroyed, so their counters stay readable and an application thread
 * that joins again gets its old id. */
struct lf_thread {
  taxi_lf_pool_t *pool;
  unsigned id;
  bool spawned;
  bool active;             /* in the pool now */
  bool leave;              /* asked to leave by taxi_lf_shrink() */
  bool exited;             /* a spawned thread that has left for good */
  bool joined;             /* ... and was joined by taxi_lf_shrink() */
  taxi__thread_t thread;   /* spawned threads: to join them */
  taxi__thread_id_t owner; /* the OS thread this record belongs to */
  taxi__cond_t cond;       /* its synchronizer as a follower */
  bool promoted;
  bool following; /* in the followers list */
  int priority;
  lf_thread_t *prev, *next; /* in the followers list */
  void *buf;                /* where its waits put what they report */
  /* Taking part for a caller (taxi__lf_participate_locked): the loop
   * returns as soon as until(until_arg) holds. */
  bool (*until)(void *arg);
  void *until_arg;
  bool leading;   /* in a wait on the handle set */
  bool kicked;    /* a hand-off for it arrived: stop following or leading */
  bool reporting; /* in the on_error callback, counted as a leader */
  taxi_lf_thread_stats_t stats;
};

struct taxi_lf_pool {
  taxi__registered_t reg;
  taxi__source_t src; /* what it dispatches: a reactor or a proactor */
  taxi_lf_options_t opts;
  unsigned max_leaders;

  lf_thread_t **threads; /* every record, by id */
  unsigned nthreads, threads_cap;

  unsigned active, leaders, followers, spawned_active;
  /* Leaders taking part for a caller (an await): with several leaders on
   * one handle set, the wake-up that ends such a thread's wait could be
   * taken by another, so such a thread leads alone (see may_lead). */
  unsigned bound_leaders;
  lf_thread_t *head, *tail; /* followers, next to promote at head */
  taxi__cond_t shared;      /* TAXI_PROMOTE_SHARED followers wait here */
  unsigned shared_tokens;   /* promotions not yet claimed */
  taxi__cond_t left;        /* broadcast whenever a thread leaves */
  taxi__cond_t pause;       /* a leader pausing after a failed wait */
  bool shutdown;
  int error;               /* the failure that stopped the pool, or 0 */
  taxi__backoff_t backoff; /* consecutive failed waits */

  taxi_lf_stats_t stats;
};

/* The pool thread record of the calling thread, if it is in a pool. */
static _Thread_local lf_thread_t *current;

static bool in_pool(const taxi_lf_pool_t *p) {
  return current && current->pool == p && current->active;
}

/* ---- followers ------------------------------------------------------------
 */

/* Higher priority first; among equals the latest to arrive (LIFO). */
static bool ahead_of(const lf_thread_t *a, const lf_thread_t *b) {
  return a->priority >= b->priority;
}

static void follow_locked(taxi_lf_pool_t *p, lf_thread_t *t) {
  t->promoted = false;
  t->following = true;
  p->followers++;
  if (p->opts.promotion == TAXI_PROMOTE_SHARED) return;
  lf_thread_t *at = NULL; /* insert before this one; NULL: at the tail */
  switch (p->opts.promotion) {
    case TAXI_PROMOTE_LIFO:
      at = p->head;
      break;
    case TAXI_PROMOTE_FIFO:
      at = NULL;
      break;
    case TAXI_PROMOTE_PRIORITY:
      for (at = p->head; at && !ahead_of(t, at); at = at->next) {
      }
      break;
    case TAXI_PROMOTE_SHARED:
      break;
  }
  t->next = at;
  t->prev = at ? at->prev : p->tail;
  if (t->prev)
    t->prev->next = t;
  else
    p->head = t;
  if (at)
    at->prev = t;
  else
    p->tail = t;
}

static void unfollow_locked(taxi_lf_pool_t *p, lf_thread_t *t) {
  if (!t->following) return;
  t->following = false;
  p->followers--;
  if (p->opts.promotion == TAXI_PROMOTE_SHARED) return;
  if (t->prev)
    t->prev->next = t->next;
  else
    p->head = t->next;
  if (t->next)
    t->next->prev = t->prev;
  else
    p->tail = t->prev;
  t->prev = t->next = NULL;
}

/* Wake one follower to lead (or to take pending work). */
static void promote_locked(taxi_lf_pool_t *p) {
  if (p->opts.promotion == TAXI_PROMOTE_SHARED) {
    if (p->shared_tokens >= p->followers) return;
    p->shared_tokens++;
    p->stats.promotions++;
    taxi__cond_signal(&p->shared);
    return;
  }
  lf_thread_t *t = p->head;
  if (!t) return;
  unfollow_locked(p, t);
  t->promoted = true;
  p->stats.promotions++;
  taxi__cond_signal(&t->cond);
}

static void wake_everyone_locked(taxi_lf_pool_t *p) {
  for (lf_thread_t *t = p->head; t; t = t->next) taxi__cond_signal(&t->cond);
  taxi__cond_broadcast(&p->shared);
  taxi__cond_broadcast(&p->pause);
  if (p->leaders) p->src.ops->wake_all_locked(p->src.self);
}

/* Make every thread leave as soon as it is not processing an event; does
 * not wait for them.  The source's waits return at once from now on. */
static void stop_locked(taxi_lf_pool_t *p) {
  p->shutdown = true;
  p->src.ops->set_sticky_locked(p->src.self, true);
  wake_everyone_locked(p);
}

/* Tell the application of a failure, without the lock. */
static void report_locked(taxi_lf_pool_t *p, int code, const char *where,
                          unsigned attempt, bool fatal) {
  if (!p->opts.on_error) return;
  lf_thread_t *me = in_pool(p) ? current : NULL;
  if (me) me->reporting = true;
  taxi__mutex_unlock(p->src.lock);
  taxi__report_error(p->opts.on_error, p->opts.on_error_arg, code, where,
                     TAXI_INVALID_HANDLE, attempt, fatal);
  taxi__mutex_lock(p->src.lock);
  if (me) me->reporting = false;
}

/* A failure the pool cannot go on after: keep it as the pool's error (the
 * first only) and stop the pool.  One that arrives while the application
 * is shutting the pool down is a consequence of that, not a failure. */
static void fail_locked(taxi_lf_pool_t *p, int code, unsigned attempt) {
  if (p->shutdown) return;
  p->error = code;
  stop_locked(p);
  report_locked(p, code, "wait", attempt, true);
}

/* ---- time accounting ----------------------------------------------------- */

static void account(uint64_t *pool_ns, uint64_t *thread_ns, taxi_time_t since,
                    taxi_time_t now) {
  uint64_t d = now > since ? (uint64_t)(now - since) : 0;
  *pool_ns += d;
  *thread_ns += d;
}

/* ---- the loop ------------------------------------------------------------ */

/* Follow until promoted, told to leave, or `deadline`.  Returns
 * TAXI_ETIMEDOUT when the deadline passed first. */
static int follow(taxi_lf_pool_t *p, lf_thread_t *t, taxi_time_t deadline) {
  taxi_time_t since = taxi_now();
  int rc = 0;
  follow_locked(p, t);
  for (;;) {
    if (p->shutdown || (t->leave && !t->until) || t->kicked) break;
    if (p->opts.promotion == TAXI_PROMOTE_SHARED) {
      if (p->shared_tokens) {
        p->shared_tokens--;
        break;
      }
    } else if (t->promoted) {
      break;
    }
    taxi__cond_t *c =
        p->opts.promotion == TAXI_PROMOTE_SHARED ? &p->shared : &t->cond;
    if (deadline == INT64_MAX) {
      taxi__cond_wait(c, p->src.lock);
    } else if (taxi__cond_timedwait(c, p->src.lock, deadline) ==
               TAXI_ETIMEDOUT) {
      /* A promotion that raced with the timeout is still honoured. */
      if (p->opts.promotion == TAXI_PROMOTE_SHARED ? p->shared_tokens == 0
                                                   : !t->promoted) {
        rc = TAXI_ETIMEDOUT;
        break;
      }
    }
  }
  unfollow_locked(p, t);
  account(&p->stats.follower_ns, &t->stats.follower_ns, since, taxi_now());
  return rc;
}

/* Process one event taken from the source. */
static void process(taxi_lf_pool_t *p, lf_thread_t *t, taxi__event_t *ev,
                    taxi_time_t now) {
  /* Promote before processing: someone must watch the handle set while
   * this thread is busy, and pending events should not wait for it. */
  if (p->followers && (p->leaders < p->max_leaders ||
                       p->src.ops->has_work_locked(p->src.self, now)))
    promote_locked(p);
  unsigned ran = p->src.ops->run_locked(p->src.self, ev);
  taxi_time_t done = taxi_now();
  account(&p->stats.processing_ns, &t->stats.processing_ns, now, done);
  p->stats.events += ran;
  t->stats.events += ran;
}

/* Lead: wait on the handle set.  Returns what the wait returned. */
static int lead(taxi_lf_pool_t *p, lf_thread_t *t, taxi_time_t deadline,
                taxi_time_t *now) {
  taxi_time_t since = *now;
  /* With leaders without limit nobody follows, so events a wait reported
   * beyond the first would sit until this thread is done with its own
   * while the other leaders sleep: take one at a time and let the kernel
   * spread them over the waiting threads, as a concurrent handle set
   * does.  With a limit, followers are promoted to take the rest. */
  size_t cap = p->max_leaders == UINT_MAX ? 1 : p->src.max_events;
  p->leaders++;
  p->bound_leaders += t->until != NULL;
  t->leading = true;
  int n = p->src.ops->wait_locked(p->src.self, t->buf, cap, deadline, now);
  t->leading = false;
  p->bound_leaders -= t->until != NULL;
  p->leaders--;
  p->stats.waits++;
  account(&p->stats.leader_ns, &t->stats.leader_ns, since, *now);
  return n;
}

/* A wait of this thread failed with `code`.  Transient, within the limit:
 * report it, then pause, keeping the leader's role so that the other
 * threads do not fail in turn meanwhile; returns 0 to go on.  Otherwise
 * the pool fails (fail_locked) and the code is returned. */
static int wait_failed_locked(taxi_lf_pool_t *p, lf_thread_t *t, int code) {
  taxi_time_t pause =
      taxi__error_transient(code) ? taxi__backoff_failed(&p->backoff) : -1;
  if (pause < 0) {
    fail_locked(p, code, p->backoff.failures + 1);
    return code;
  }
  p->stats.transient_errors++;
  p->leaders++;
  report_locked(p, code, "wait", p->backoff.failures, false);
  taxi_time_t until = taxi__time_add(taxi_now(), pause);
  while (!p->shutdown && !t->leave && !t->kicked && taxi_now() < until)
    taxi__cond_timedwait(&p->pause, p->src.lock, until);
  p->leaders--;
  return 0;
}

/* Whether t may wait on the handle set now.  A thread waiting for its
 * reply is woken from the handle set through the source's wake-up, which
 * one waiter takes: with several leaders it could be another's.  So where
 * several may lead, such a thread leads only alone, and nobody joins it
 * (the others follow meanwhile, woken as usual). */
static bool may_lead(const taxi_lf_pool_t *p, const lf_thread_t *t) {
  if (p->leaders >= p->max_leaders || !p->src.ops->room_locked(p->src.self))
    return false;
  if (p->max_leaders == 1) return true;
  return t->until ? p->leaders == 0 : p->bound_leaders == 0;
}

/* The life of a thread in the pool: the source's lock held throughout, except
 * in the steps that release it. */
static int pool_loop(taxi_lf_pool_t *p, lf_thread_t *t, taxi_time_t deadline) {
  int rc = 0;
  bool fresh = false; /* the next take is from this thread's own wait */
  taxi__event_t ev;
  for (;;) {
    /* The reactor or proactor was stopped (perhaps from a signal handler,
     * which cannot call taxi_lf_stop): the pool stops with it. */
    if (!p->shutdown && p->src.ops->stop_asked(p->src.self)) stop_locked(p);
    /* A thread taking part for a caller (an await) returns once what it
     * waits for has come, and a shrink does not cut that short. */
    if (t->until && t->until(t->until_arg)) break;
    t->kicked = false;
    if (p->shutdown || (t->leave && !t->until)) break;
    taxi_time_t now = taxi_now();
    if (now >= deadline) {
      rc = TAXI_ETIMEDOUT;
      break;
    }
    if (p->src.ops->take_locked(p->src.self, now, &ev)) {
      bool waited_for =
          ev.kind == TAXI__EV_IO || ev.kind == TAXI__EV_COMPLETION;
      if (waited_for && !fresh) p->stats.pending_taken++;
      fresh = false;
      process(p, t, &ev, now);
      continue;
    }
    fresh = false;
    /* The take may have drained the wake-up of a stop of the source made
     * since the check above: look again before waiting. */
    if (!p->shutdown && p->src.ops->stop_asked(p->src.self)) continue;
    /* Without room for what a wait reports (the waits in progress have
     * taken it all), waiting now would return at once with nothing:
     * follow instead, until a thread that took events promotes us. */
    if (may_lead(p, t)) {
      int n = lead(p, t, deadline, &now);
      if (n < 0) {
        rc = wait_failed_locked(p, t, n);
        if (rc < 0) break;
        continue;
      }
      taxi__backoff_reset(&p->backoff);
      fresh = n > 0;
      continue;
    }
    rc = follow(p, t, deadline);
    if (rc < 0) break;
  }
  /* Leaving: if nobody leads now, hand the handle set to a follower. */
  if (!p->shutdown && p->leaders == 0) promote_locked(p);
  return rc;
}

/* ---- thread records --------------------------------------------------------
 */

static void record_free(lf_thread_t *t) {
  taxi__cond_destroy(&t->cond);
  taxi__free(t->buf);
  taxi__free(t);
}

/* A new record, registered under the next id.  the source's lock held. */
static int record_new_locked(taxi_lf_pool_t *p, bool spawned,
                             lf_thread_t **out) {
  if (p->nthreads == p->threads_cap) {
    unsigned ncap = p->threads_cap ? p->threads_cap * 2 : 8;
    lf_thread_t **n = taxi__reallocarray(p->threads, ncap, sizeof *n);
    if (!n) return TAXI_ENOMEM;
    p->threads = n;
    p->threads_cap = ncap;
  }
  lf_thread_t *t = taxi__calloc(1, sizeof *t);
  if (!t) return TAXI_ENOMEM;
  t->buf = taxi__calloc(p->src.max_events, p->src.buf_elem);
  int rc = t->buf ? taxi__cond_init(&t->cond) : TAXI_ENOMEM;
  if (rc < 0) {
    taxi__free(t->buf);
    taxi__free(t);
    return rc;
  }
  t->pool = p;
  t->id = p->nthreads;
  t->spawned = spawned;
  t->stats.id = t->id;
  t->stats.spawned = spawned;
  p->threads[p->nthreads++] = t;
  *out = t;
  return 0;
}

/* Count t in the pool.  A spawned thread is counted from its spawn on, so
 * that stats and shrink see it before it first runs.  the source's lock held.
 */
static void enter_locked(taxi_lf_pool_t *p, lf_thread_t *t) {
  t->active = true;
  t->stats.active = 1;
  p->active++;
  p->stats.threads = p->active;
}

/* Run in the pool with record t (entered already), then leave.  The source's
 * lock held. */
static int member_run_locked(taxi_lf_pool_t *p, lf_thread_t *t, int priority,
                             taxi_time_t deadline) {
  lf_thread_t *outer = current;
  current = t;
  t->owner = taxi__thread_self();
  t->priority = priority;
  int rc = pool_loop(p, t, deadline);
  p->active--;
  p->stats.threads = p->active;
  t->active = false;
  t->stats.active = 0;
  current = outer;
  taxi__cond_broadcast(&p->left);
  return rc;
}

static void *spawned_main(void *arg) {
  lf_thread_t *t = arg;
  taxi_lf_pool_t *p = t->pool;
  taxi__mutex_lock(p->src.lock);
  /* A spawned thread has no deadline, so it leaves only when asked to or
   * when the pool failed, and the loop has stopped the pool then. */
  member_run_locked(p, t, 0, INT64_MAX);
  t->exited = true;
  p->spawned_active--;
  taxi__cond_broadcast(&p->left);
  taxi__mutex_unlock(p->src.lock);
  return NULL;
}

/* ---- the public calls ------------------------------------------------------
 */

/* Pin p for the duration of a call; false if it is not a live pool. */
static bool pin(taxi_lf_pool_t *p) {
  return p && taxi__registry_pin(&p->reg, TAXI__KIND_LF);
}

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
  if (!pin(p)) return TAXI_EINVAL;
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
    lf_thread_t *t;
    rc = record_new_locked(p, true, &t);
    if (rc < 0) break;
    p->spawned_active++;
    enter_locked(p, t);
    rc = taxi__thread_create(&t->thread, spawned_main, t);
    if (rc < 0) {
      report_locked(p, rc, "thread", 1, false);
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

/* The record of the calling application thread: its old one if it joined
 * before, else a new one.  the source's lock held. */
static int app_record_locked(taxi_lf_pool_t *p, lf_thread_t **out) {
  taxi__thread_id_t self = taxi__thread_self();
  for (unsigned i = 0; i < p->nthreads; i++) {
    lf_thread_t *t = p->threads[i];
    if (!t->spawned && !t->active && !t->exited &&
        taxi__thread_equal(t->owner, self)) {
      *out = t;
      return 0;
    }
  }
  return record_new_locked(p, false, out);
}

int taxi_lf_join(taxi_lf_pool_t *p, int timeout_ms, int priority) {
  if (!pin(p)) return TAXI_EINVAL;
  taxi_time_t deadline = taxi__deadline_after_ms(taxi_now(), timeout_ms);
  lf_thread_t *t = NULL;
  int rc = 0;
  taxi__mutex_lock(p->src.lock);
  if (in_pool(p))
    rc = taxi__refuse(TAXI_EBUSY,
                      "taxi_lf_join: p: the calling thread is in the pool "
                      "already (a hook, or a spawned thread)");
  else if (p->shutdown)
    rc = p->error ? p->error : TAXI_ESTOPPED;
  else
    rc = app_record_locked(p, &t);
  if (rc == 0) {
    enter_locked(p, t);
    rc = member_run_locked(p, t, priority, deadline);
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
    wake_everyone_locked(p);
    taxi__cond_timedwait(&p->left, p->src.lock,
                         taxi_now() + 10 * TAXI_NSEC_PER_MSEC);
  }
}

static bool all_left(const taxi_lf_pool_t *p) {
  return p->active == (in_pool(p) ? 1u : 0u);
}

static bool leavers_left(const taxi_lf_pool_t *p) {
  for (unsigned i = 0; i < p->nthreads; i++)
    if (p->threads[i]->leave && p->threads[i]->active) return false;
  return true;
}

int taxi_lf_shrink(taxi_lf_pool_t *p, unsigned n) {
  if (!pin(p)) return TAXI_EINVAL;
  int rc = 0;
  taxi__mutex_lock(p->src.lock);
  unsigned running = 0;
  for (unsigned i = 0; i < p->nthreads; i++)
    if (p->threads[i]->spawned && !p->threads[i]->exited &&
        !p->threads[i]->leave)
      running++;
  if (in_pool(p))
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
      lf_thread_t *t = p->threads[i];
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
    lf_thread_t *t = p->threads[i];
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
  if (!already) stop_locked(p);
  wait_until_locked(p, all_left);
  if (p->active == 0) p->src.ops->set_sticky_locked(p->src.self, false);
  if (p->error) return p->error;
  return already ? TAXI_ESTOPPED : 0;
}

int taxi_lf_stop(taxi_lf_pool_t *p) {
  if (!pin(p)) return TAXI_EINVAL;
  taxi__mutex_lock(p->src.lock);
  int rc = shutdown_locked(p);
  taxi__mutex_unlock(p->src.lock);
  taxi__registry_unpin(&p->reg);
  return rc;
}

int taxi_lf_destroy(taxi_lf_pool_t *p) {
  if (!pin(p)) return TAXI_EINVAL;
  taxi__mutex_t *lock = p->src.lock;
  taxi__mutex_lock(lock);
  if (in_pool(p)) {
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
  for (unsigned i = 0; i < p->nthreads; i++) record_free(p->threads[i]);
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
  if (!pin(p)) return TAXI_EINVAL;
  taxi_time_t deadline = taxi__deadline_after_ms(taxi_now(), timeout_ms);
  int rc = 0;
  taxi__mutex_lock(p->src.lock);
  if (in_pool(p))
    rc = taxi__refuse(TAXI_EBUSY,
                      "taxi_lf_wait: p: called from a thread of the pool, "
                      "which would wait for itself");
  while (rc == 0 && !stopped_and_left(p)) {
    /* Looked at every 10 ms, not only when a thread leaves: a stop of the
     * source that no pool thread has seen yet, and the wake-ups of a
     * stopping pool, which a kevent with several waiters may lose
     * (libkqueue), are made good here as taxi_lf_stop makes them good. */
    if (!p->shutdown && p->src.ops->stop_asked(p->src.self)) stop_locked(p);
    if (p->shutdown) wake_everyone_locked(p);
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
  if (!out || !pin(p)) return TAXI_EINVAL;
  taxi__mutex_lock(p->src.lock);
  *out = p->stats;
  out->error = p->error;
  out->threads = p->active;
  out->leaders = p->leaders;
  out->followers = p->followers;
  taxi__mutex_unlock(p->src.lock);
  taxi__registry_unpin(&p->reg);
  return 0;
}

int taxi_lf_thread_stats(const taxi_lf_pool_t *cp, taxi_lf_thread_stats_t *out,
                         size_t cap) {
  taxi_lf_pool_t *p = (taxi_lf_pool_t *)(uintptr_t)cp; /* lock, pin */
  if ((!out && cap) || !pin(p)) return TAXI_EINVAL;
  taxi__mutex_lock(p->src.lock);
  unsigned n = p->nthreads;
  for (unsigned i = 0; i < n && i < cap; i++) out[i] = p->threads[i]->stats;
  taxi__mutex_unlock(p->src.lock);
  taxi__registry_unpin(&p->reg);
  return (int)n;
}

int taxi_lf_current_thread(taxi_lf_pool_t *p) {
  return current && current->pool == p && current->active ? (int)current->id
                                                          : -1;
}

/* ---- taking part for a caller (core/pools/lf_bound.h)
 * ----------------------------
 */

taxi__mutex_t *taxi__lf_lock(taxi_lf_pool_t *p) { return p->src.lock; }

void *taxi__lf_source_self(taxi_lf_pool_t *p) {
  if (!pin(p)) return NULL;
  void *self = p->src.self;
  taxi__registry_unpin(&p->reg);
  return self;
}

int taxi__lf_participate_locked(taxi_lf_pool_t *p, bool (*until)(void *),
                                void *arg, taxi_time_t deadline, void **slot,
                                const char *fn) {
  if (until(arg)) return 0;
  if (p->shutdown) return p->error ? p->error : TAXI_ESTOPPED;
  lf_thread_t *t;
  bool nested = in_pool(p);
  if (nested) {
    t = current;
    /* A leader telling of a failed wait still holds the leader's role:
     * taking part now, it would follow a leader that is itself. */
    if (t->reporting)
      return taxi__refuse(TAXI_EBUSY,
                          "%s: called from the pool's on_error callback, "
                          "in the leader telling of a failed wait, which "
                          "cannot take part in the pool meanwhile",
                          fn);
  } else {
    /* A thread from outside joins for as long as it waits: it cannot
     * count on the pool's threads, all of which may be waiting too. */
    int rc = app_record_locked(p, &t);
    if (rc < 0) return rc;
    enter_locked(p, t);
  }
  bool (*outer_until)(void *) = t->until;
  void *outer_arg = t->until_arg;
  t->until = until;
  t->until_arg = arg;
  *slot = t;
  int rc =
      nested ? pool_loop(p, t, deadline) : member_run_locked(p, t, 0, deadline);
  *slot = NULL;
  t->until = outer_until;
  t->until_arg = outer_arg;
  /* An outer wait's hand-off that arrived meanwhile is seen by its loop,
   * which looks at its own condition before it follows again. */
  if (until(arg)) return 0;
  if (rc == 0) rc = p->error ? p->error : TAXI_ESTOPPED;
  return rc;
}

void taxi__lf_kick_locked(taxi_lf_pool_t *p, void *thread) {
  lf_thread_t *t = thread;
  if (!t) return;
  t->kicked = true;
  if (t->following) {
    /* Out of the followers at once, so that no promotion is handed to a
     * thread that is about to return to its caller (it would be lost). */
    unfollow_locked(p, t);
    if (p->opts.promotion == TAXI_PROMOTE_SHARED)
      taxi__cond_broadcast(&p->shared);
    else
      taxi__cond_signal(&t->cond);
  } else if (t->leading) {
    p->src.ops->wake_all_locked(p->src.self);
  } else {
    taxi__cond_broadcast(&p->pause); /* pausing after a failed wait */
  }
}
