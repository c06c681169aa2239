/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/pools/lf_pool.c - the Leader/Followers thread pool: the loop.
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
 * already hold it, and a second lock would only add ordering rules.
 *
 * This file holds the loop, the thread records and taking part for a
 * caller (core/pools/lf_bound.h).  The followers' queue and the promotion
 * orders are in lf_followers.c, the public calls in lf_control.c (see
 * core/pools/lf_impl.h).  Calls: lf_followers.c, and the source through
 * its table of steps (never a reactor or proactor function by name);
 * common and ports.
 */
#include "config.h"

#include "core/common/alloc.h"
#include "core/common/backoff.h"
#include "core/common/batch_clock.h"
#include "core/common/detail.h"
#include "core/pools/lf_bound.h"
#include "core/pools/lf_impl.h"
#include "core/common/time_math.h"

#include <limits.h>

/* The pool thread record of the calling thread, if it is in a pool. */
static _Thread_local taxi__lf_thread_t *current;

bool taxi__lf_in_pool(const taxi_lf_pool_t *p) {
  return current && current->pool == p && current->active;
}

void taxi__lf_wake_everyone_locked(taxi_lf_pool_t *p) {
  for (taxi__lf_thread_t *t = p->head; t; t = t->next)
    taxi__cond_signal(&t->cond);
  taxi__cond_broadcast(&p->shared);
  taxi__cond_broadcast(&p->pause);
  if (p->leaders) p->src.ops->wake_all_locked(p->src.self);
}

/* Make every thread leave as soon as it is not processing an event; does
 * not wait for them.  The source's waits return at once from now on. */
void taxi__lf_stop_locked(taxi_lf_pool_t *p) {
  p->shutdown = true;
  p->src.ops->set_sticky_locked(p->src.self, true);
  taxi__lf_wake_everyone_locked(p);
}

/* Tell the application of a failure, without the lock. */
void taxi__lf_report_locked(taxi_lf_pool_t *p, int code, const char *where,
                            unsigned attempt, bool fatal) {
  if (!p->opts.on_error) return;
  taxi__lf_thread_t *me = taxi__lf_in_pool(p) ? current : NULL;
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
  taxi__lf_stop_locked(p);
  taxi__lf_report_locked(p, code, "wait", attempt, true);
}

/* ---- the loop ------------------------------------------------------------ */

/* The events a thread about to run a draining hook keeps for itself
 * rather than wake a follower for them: it takes them next, a few
 * microseconds each, which costs less than a wake-up, a context switch and
 * the follower's going back to sleep. */
#define LF_SHARE 4

/* The least a message is taken to cost (about a system call), for a clock
 * too coarse to measure it. */
#define LF_MESSAGE_MIN_NS 500

/* The most one run's time per message adds to the average, in multiples
 * of options.handoff_ns.  The clock measures the time a thread was off
 * its CPU too: on a busy machine one run preempted for a few
 * milliseconds would lift the average above the handoff for the next few
 * dozen messages, each of which would then wake a follower that finds
 * nothing to do (at one peer of a datagram echo, a wake-up per datagram).
 * Capped, it takes five such runs in a row to lift an average of quick
 * messages there (at weight 1/8), and callbacks that take twice the
 * handoff or more still lift it within five messages (rather than one). */
#define LF_SAMPLE_CAP 2

/* Whether to promote a follower before processing ev: when work remains
 * for another thread.  For a hook that may block (the application's, a
 * timer's, a signal's, a notification) that is any pending event, and the
 * handle set, which someone must watch meanwhile.  The library's own
 * draining hooks (ev->drains) read and write without blocking, and this
 * thread leads again as soon as they return: a follower is woken only for
 * more events than this thread takes next itself, and only when they
 * would take it longer than options.handoff_ns (by default about what
 * waking a follower costs) - unless the callbacks they run have been
 * taking longer than that per message on average (event_ns: the
 * application's stream callbacks do real work, or block), when a
 * follower is promoted as for any hook that may block.  Per message, not
 * per event: a report that brought 200 datagrams is long because it
 * carried much, not because its callbacks are slow. */
static bool promote_for(taxi_lf_pool_t *p, const taxi__event_t *ev,
                        taxi_time_t now) {
  if (!p->followers) return false;
  uint64_t handoff = p->opts.handoff_ns;
  if (ev->drains && p->event_ns < handoff) {
    /* What this thread leaves for later is worth a wake-up only when it
     * would take longer than one: a few quick messages it takes next
     * itself.  A message costs a system call at least, whatever a coarse
     * clock measured. */
    uint64_t left = p->src.ops->backlog_locked(p->src.self);
    uint64_t per =
        p->event_ns > LF_MESSAGE_MIN_NS ? p->event_ns : LF_MESSAGE_MIN_NS;
    return left > LF_SHARE && left * per > handoff;
  }
  return p->leaders < p->max_leaders ||
         p->src.ops->has_work_locked(p->src.self, now);
}

/* Process one event taken from the source.  Returns the work it was, for
 * the time per message (processed): the events that ran, or the messages
 * their hooks delivered to the application where those were more (one
 * report of a handle the library drains may bring a batch of datagrams or
 * several reads, each a callback).  A handle the library drains that
 * delivered nothing (its bytes read already by the thread that ran it
 * last, or a write flushed) is no work: counted as a message, its few
 * microseconds would pull the average of slow callbacks under the
 * handoff. */
static unsigned process(taxi_lf_pool_t *p, taxi__lf_thread_t *t,
                        taxi__event_t *ev, taxi_time_t now) {
  if (promote_for(p, ev, now)) taxi__lf_promote_locked(p);
  /* Kept for a dispatch this one runs inside (a callback that awaits). */
  unsigned outer = taxi__batch_messages;
  bool drains = ev->drains;
  taxi__batch_messages = 0;
  unsigned ran = p->src.ops->run_locked(p->src.self, ev);
  unsigned messages = taxi__batch_messages;
  taxi__batch_messages = outer + messages;
  p->stats.events += ran;
  t->stats.events += ran;
  if (drains) return messages;
  return messages > ran ? messages : ran;
}

/* A run of events processed one after the other, begun at `since`, that
 * was `work` messages (process) is over: its time is accounted, the
 * average time per message follows it (weight 1/8, the run's share capped
 * at LF_SAMPLE_CAP handoffs), and the clock read then is returned. */
static taxi_time_t processed(taxi_lf_pool_t *p, taxi__lf_thread_t *t,
                             taxi_time_t since, unsigned work) {
  taxi_time_t done = taxi_now();
  taxi__lf_account(&p->stats.processing_ns, &t->stats.processing_ns, since,
                   done);
  if (work && done > since) {
    uint64_t per = (uint64_t)(done - since) / work;
    uint64_t cap = LF_SAMPLE_CAP * p->opts.handoff_ns;
    if (per > cap) per = cap;
    p->event_ns = p->event_ns - p->event_ns / 8 + per / 8;
  }
  return done;
}

/* Lead: wait on the handle set.  Returns what the wait returned. */
static int lead(taxi_lf_pool_t *p, taxi__lf_thread_t *t, taxi_time_t deadline,
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
  taxi__lf_account(&p->stats.leader_ns, &t->stats.leader_ns, since, *now);
  return n;
}

/* A wait of this thread failed with `code`.  Transient, within the limit:
 * report it, then pause, keeping the leader's role so that the other
 * threads do not fail in turn meanwhile; returns 0 to go on.  Otherwise
 * the pool fails (fail_locked) and the code is returned. */
static int wait_failed_locked(taxi_lf_pool_t *p, taxi__lf_thread_t *t,
                              int code) {
  taxi_time_t pause =
      taxi__error_transient(code) ? taxi__backoff_failed(&p->backoff) : -1;
  if (pause < 0) {
    fail_locked(p, code, p->backoff.failures + 1);
    return code;
  }
  p->stats.transient_errors++;
  p->leaders++;
  taxi__lf_report_locked(p, code, "wait", p->backoff.failures, false);
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
static bool may_lead(const taxi_lf_pool_t *p, const taxi__lf_thread_t *t) {
  if (p->leaders >= p->max_leaders || !p->src.ops->room_locked(p->src.self))
    return false;
  if (p->max_leaders == 1) return true;
  return t->until ? p->leaders == 0 : p->bound_leaders == 0;
}

/* The life of a thread in the pool: the source's lock held throughout, except
 * in the steps that release it. */
static int pool_loop(taxi_lf_pool_t *p, taxi__lf_thread_t *t,
                     taxi_time_t deadline) {
  int rc = 0;
  bool fresh = false;    /* the next take is from this thread's own wait */
  bool promoted = false; /* the next take is this thread's first since */
  /* The clock is read once per batch, as the reactor's own loop reads it:
   * `now` is the time the last wait returned (or this thread last woke),
   * kept while the thread processes events one after the other (a run,
   * begun at run_since), and read again when the run is over, before the
   * thread leads or follows.  So a timer that falls due during a run waits
   * for the end of it, as under the reactor's own loop, and the next wait
   * is bounded by the real time. */
  bool running = false;
  taxi_time_t run_since = 0;
  unsigned run_work = 0;
  taxi_time_t now = taxi_now();
  taxi__event_t ev;
  unsigned char *outer_scratch =
      taxi__batch_scratch_enter(t->looping ? taxi__batch_scratch : t->scratch);
  bool outer_looping = t->looping;
  t->looping = true;
  for (;;) {
    /* The reactor or proactor was stopped (perhaps from a signal handler,
     * which cannot call taxi_lf_stop): the pool stops with it. */
    if (!p->shutdown && atomic_load(p->src.stop_flag)) taxi__lf_stop_locked(p);
    /* A thread taking part for a caller (an await) returns once what it
     * waits for has come, and a shrink does not cut that short. */
    if (t->until && t->until(t->until_arg)) break;
    t->kicked = false;
    if (p->shutdown || (t->leave && !t->until)) break;
    if (now >= deadline) {
      rc = TAXI_ETIMEDOUT;
      break;
    }
    ev.drains = false; /* only a reactor's take of such a handle sets it */
    if (p->src.ops->take_locked(p->src.self, now, &ev)) {
      bool waited_for =
          ev.kind == TAXI__EV_IO || ev.kind == TAXI__EV_COMPLETION;
      if (waited_for && !fresh) p->stats.pending_taken++;
      fresh = false;
      promoted = false;
      if (!running) {
        run_since = now;
        run_work = 0;
      }
      running = true;
      run_work += process(p, t, &ev, now);
      continue;
    }
    if (running) now = processed(p, t, run_since, run_work);
    running = false;
    fresh = false;
    /* The take may have drained the wake-up of a stop of the source made
     * since the check above: look again before waiting. */
    if (!p->shutdown && atomic_load(p->src.stop_flag)) continue;
    /* Without room for what a wait reports (the waits in progress have
     * taken it all), waiting now would return at once with nothing:
     * follow instead, until a thread that took events promotes us. */
    if (may_lead(p, t)) {
      int n = lead(p, t, deadline, &now); /* the wait reads the clock */
      if (n < 0) {
        rc = wait_failed_locked(p, t, n);
        now = taxi_now();
        if (rc < 0) break;
        continue;
      }
      taxi__backoff_reset(&p->backoff);
      fresh = n > 0;
      promoted = false;
      continue;
    }
    /* Promoted, and yet neither an event to take nor the lead: woken for
     * nothing (the work was taken by the time this thread ran). */
    if (promoted) p->stats.idle_wakeups++;
    rc = taxi__lf_follow(p, t, deadline);
    now = taxi_now();
    if (rc < 0) break;
    promoted = !t->kicked;
  }
  if (running) processed(p, t, run_since, run_work);
  t->looping = outer_looping;
  taxi__batch_scratch_leave(outer_scratch);
  /* Leaving: if nobody leads now, hand the handle set to a follower. */
  if (!p->shutdown && p->leaders == 0) taxi__lf_promote_locked(p);
  return rc;
}

/* ---- thread records ---------------------------------------------------- */

void taxi__lf_record_free(taxi__lf_thread_t *t) {
  taxi__cond_destroy(&t->cond);
  taxi__free(t->scratch);
  taxi__free(t->buf);
  taxi__free(t);
}

/* A new record, registered under the next id.  the source's lock held. */
int taxi__lf_record_new_locked(taxi_lf_pool_t *p, bool spawned,
                               taxi__lf_thread_t **out) {
  if (p->nthreads == p->threads_cap) {
    unsigned ncap = p->threads_cap ? p->threads_cap * 2 : 8;
    taxi__lf_thread_t **n = taxi__reallocarray(p->threads, ncap, sizeof *n);
    if (!n) return TAXI_ENOMEM;
    p->threads = n;
    p->threads_cap = ncap;
  }
  taxi__lf_thread_t *t = taxi__calloc(1, sizeof *t);
  if (!t) return TAXI_ENOMEM;
  t->buf = taxi__calloc(p->src.max_events, p->src.buf_elem);
  t->scratch = taxi__malloc(TAXI__SCRATCH_BYTES);
  int rc = t->buf && t->scratch ? taxi__cond_init(&t->cond) : TAXI_ENOMEM;
  if (rc < 0) {
    taxi__free(t->scratch);
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
void taxi__lf_enter_locked(taxi_lf_pool_t *p, taxi__lf_thread_t *t) {
  t->active = true;
  t->stats.active = 1;
  p->active++;
  p->stats.threads = p->active;
}

/* Run in the pool with record t (entered already), then leave.  The source's
 * lock held. */
int taxi__lf_member_run_locked(taxi_lf_pool_t *p, taxi__lf_thread_t *t,
                               int priority, taxi_time_t deadline) {
  taxi__lf_thread_t *outer = current;
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

void *taxi__lf_spawned_main(void *arg) {
  taxi__lf_thread_t *t = arg;
  taxi_lf_pool_t *p = t->pool;
  taxi__mutex_lock(p->src.lock);
  /* A spawned thread has no deadline, so it leaves only when asked to or
   * when the pool failed, and the loop has stopped the pool then. */
  taxi__lf_member_run_locked(p, t, 0, INT64_MAX);
  t->exited = true;
  p->spawned_active--;
  taxi__cond_broadcast(&p->left);
  taxi__mutex_unlock(p->src.lock);
  return NULL;
}

/* The record of the calling application thread: its old one if it joined
 * before, else a new one.  the source's lock held. */
int taxi__lf_app_record_locked(taxi_lf_pool_t *p, taxi__lf_thread_t **out) {
  taxi__thread_id_t self = taxi__thread_self();
  for (unsigned i = 0; i < p->nthreads; i++) {
    taxi__lf_thread_t *t = p->threads[i];
    if (!t->spawned && !t->active && !t->exited &&
        taxi__thread_equal(t->owner, self)) {
      *out = t;
      return 0;
    }
  }
  return taxi__lf_record_new_locked(p, false, out);
}

int taxi_lf_current_thread(taxi_lf_pool_t *p) {
  return current && current->pool == p && current->active ? (int)current->id
                                                          : -1;
}

/* ---- taking part for a caller (core/pools/lf_bound.h) ---------------- */

taxi__mutex_t *taxi__lf_lock(taxi_lf_pool_t *p) { return p->src.lock; }

void *taxi__lf_source_self(taxi_lf_pool_t *p) {
  if (!taxi__lf_pin(p)) return NULL;
  void *self = p->src.self;
  taxi__registry_unpin(&p->reg);
  return self;
}

int taxi__lf_participate_locked(taxi_lf_pool_t *p, bool (*until)(void *),
                                void *arg, taxi_time_t deadline, void **slot,
                                const char *fn) {
  if (until(arg)) return 0;
  if (p->shutdown) return p->error ? p->error : TAXI_ESTOPPED;
  taxi__lf_thread_t *t;
  bool nested = taxi__lf_in_pool(p);
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
    int rc = taxi__lf_app_record_locked(p, &t);
    if (rc < 0) return rc;
    taxi__lf_enter_locked(p, t);
  }
  bool (*outer_until)(void *) = t->until;
  void *outer_arg = t->until_arg;
  t->until = until;
  t->until_arg = arg;
  *slot = t;
  int rc = nested ? pool_loop(p, t, deadline)
                  : taxi__lf_member_run_locked(p, t, 0, deadline);
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
  taxi__lf_thread_t *t = thread;
  if (!t) return;
  t->kicked = true;
  if (t->following) {
    /* Out of the followers at once, so that no promotion is handed to a
     * thread that is about to return to its caller (it would be lost). */
    taxi__lf_unfollow_locked(p, t);
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
