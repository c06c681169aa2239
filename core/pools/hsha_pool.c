/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/pools/hsha_pool.c - the half-sync/half-async thread pool.
 *
 * The asynchronous half is one thread (the reactor thread) that takes
 * every ready event from the reactor - handle events, and also expired
 * timers, signals and notifications, so that all user code runs in the
 * synchronous half - and puts it in a bounded request queue.  The
 * synchronous half is N worker threads that take events from the queue and
 * run them with taxi__reactor_run_locked().  Taking an event deactivates
 * its handle (pool mode); running it reactivates the handle after its
 * hooks returned, so a handle is never processed by two threads at once,
 * however long its event waits in the queue.
 *
 * The queue is the paper's handle queue with its two conditions: workers
 * wait on not_empty, and the reactor thread waits on not_full once
 * `high_water` events are queued.  While it waits it takes nothing, so
 * readiness stays in the kernel and the peers are held back by their
 * socket buffers instead of by an unbounded queue.  With a priority
 * function the same array holds a binary heap instead of a ring.  Both are
 * allocated at create, as are the reactor thread's wait buffer and the
 * workers' scratch buffers: nothing is allocated per event, nor by a
 * thread of the pool once taxi_hsha_create has returned.
 *
 * One lock (the reactor's) guards the pool too: every dispatch step is
 * called with it held, and a second lock would only add ordering rules.
 * It is released while the reactor thread waits on the handle set, while
 * hooks run, and around the application's priority function.
 */
#include "config.h"

#include "taxi/hsha.h"
#include "core/common/alloc.h"
#include "core/common/batch_clock.h"
#include "core/common/backoff.h"
#include "core/common/detail.h"
#include "core/common/options.h"
#include "core/reactor/reactor_impl.h"
#include "core/reactor/reactor_take.h"
#include "core/common/registry.h"
#include "core/common/time_math.h"

#include <string.h>

/* A queued event and what orders it. */
typedef struct hsha_item {
  taxi__event_t ev;
  uint64_t seq; /* arrival order */
  int priority;
} hsha_item_t;

/* Whether a should leave the heap before b. */
typedef bool (*hsha_order_t)(const hsha_item_t *a, const hsha_item_t *b);

struct taxi_hsha_pool {
  taxi__registered_t reg;
  taxi_reactor_t *r;
  int (*priority)(taxi_handler_t *h, unsigned events, void *arg);
  void *priority_arg;
  taxi_error_fn on_error;
  void *on_error_arg;
  unsigned nworkers, capacity, high_water;
  bool reject; /* TAXI_HSHA_FULL_REJECT */
  taxi_hsha_busy_fn busy;
  void *busy_arg;

  /* The request queue: a ring (head, count) or, with a priority function,
   * a heap in items[0..count). */
  hsha_item_t *items;
  unsigned head, count;
  uint64_t seq;

  taxi__ready_t *wait_buf; /* the reactor thread's, r->max_events long */
  size_t wait_cap;

  taxi__cond_t not_empty; /* workers wait for events */
  taxi__cond_t not_full;  /* the reactor thread waits below high water */
  taxi__cond_t left;      /* broadcast whenever a thread leaves */
  unsigned idle;          /* workers waiting on not_empty */
  bool stalled;           /* the reactor thread waits on not_full */
  bool shutdown;
  int error;               /* the wait failure that stopped the pool, or 0 */
  taxi__backoff_t backoff; /* consecutive failed waits */

  taxi__thread_t *threads; /* [0] the reactor thread, then the workers */
  /* A buffer per worker (NULL: none, for want of memory), each taken by
   * the worker that claims it; made by taxi_hsha_create rather than by the
   * worker as it starts, which may be long after create returned: an
   * application counting its allocations would see them arrive at any
   * time during its first requests. */
  unsigned char **scratch;
  unsigned scratch_claimed;
  unsigned started; /* of threads[] */
  unsigned running; /* threads not yet out of their loops */
  unsigned workers_running;
  bool reactor_running;

  taxi_hsha_stats_t stats; /* queued and workers are filled in on copy */
};

/* The pool whose thread (reactor thread or worker) this is, so that a hook
 * calling shutdown does not wait for itself and destroy can refuse. */
static _Thread_local taxi_hsha_pool_t *current;
/* The pool this thread is giving queued events back for: close hooks may
 * run meanwhile, and destroy must refuse them too (it would wait for the
 * very call that runs them). */
static _Thread_local taxi_hsha_pool_t *stopping;

/* ---- the request queue ---------------------------------------------------
 */

/* Higher priority first; equal priorities in arrival order. */
static bool runs_before(const hsha_item_t *a, const hsha_item_t *b) {
  if (a->priority != b->priority) return a->priority > b->priority;
  return a->seq < b->seq;
}

/* The latest arrival first: the order in which shutdown gives events back,
 * so that notifications, each put back at the head of the reactor's queue,
 * end up in the order they were posted. */
static bool arrived_later(const hsha_item_t *a, const hsha_item_t *b) {
  return a->seq > b->seq;
}

static void sift_up(hsha_item_t *h, unsigned i, hsha_order_t before) {
  hsha_item_t x = h[i];
  while (i > 0) {
    unsigned parent = (i - 1) / 2;
    if (!before(&x, &h[parent])) break;
    h[i] = h[parent];
    i = parent;
  }
  h[i] = x;
}

static void sift_down(hsha_item_t *h, unsigned n, unsigned i,
                      hsha_order_t before) {
  hsha_item_t x = h[i];
  for (;;) {
    /* n <= TAXI_HSHA_MAX_QUEUE, so 2 * i + 2 cannot overflow. */
    unsigned child = 2 * i + 1;
    if (child >= n) break;
    if (child + 1 < n && before(&h[child + 1], &h[child])) child++;
    if (!before(&h[child], &x)) break;
    h[i] = h[child];
    i = child;
  }
  h[i] = x;
}

static void heap_pop(hsha_item_t *h, unsigned *n, hsha_order_t before,
                     taxi__event_t *ev) {
  *ev = h[0].ev;
  if (--*n > 0) {
    h[0] = h[*n];
    sift_down(h, *n, 0, before);
  }
}

/* The caller checked that there is room (count < high_water <= capacity). */
static void queue_push_locked(taxi_hsha_pool_t *p, const taxi__event_t *ev,
                              int priority) {
  hsha_item_t *it;
  if (p->priority) {
    it = &p->items[p->count];
  } else {
    it = &p->items[(p->head + p->count) % p->capacity];
  }
  it->ev = *ev;
  it->seq = p->seq++;
  it->priority = priority;
  p->count++;
  if (p->priority) sift_up(p->items, p->count - 1, runs_before);
  p->stats.enqueued++;
  if (p->count > p->stats.max_queued) p->stats.max_queued = p->count;
  if (p->idle) taxi__cond_signal(&p->not_empty);
}

/* The next event to run; the queue is not empty. */
static void queue_pop_locked(taxi_hsha_pool_t *p, taxi__event_t *ev) {
  if (p->priority) {
    heap_pop(p->items, &p->count, runs_before, ev);
    return;
  }
  *ev = p->items[p->head].ev;
  p->head = (p->head + 1) % p->capacity;
  p->count--;
}

/* ---- stopping ------------------------------------------------------------
 */

/* Stop the pool: every thread leaves its loop as soon as it is not running
 * hooks, and what is still queued goes back to the reactor unrun.  Does
 * not wait.  The lock may be released meanwhile (giving an event back can
 * run a close hook), but no thread touches the queue once `shutdown` is
 * set: workers check it before taking, and the reactor thread before
 * queueing. */
static void stop_locked(taxi_hsha_pool_t *p) {
  taxi_reactor_t *r = p->r;
  p->shutdown = true;
  /* Whatever the reactor thread is waiting in, make it return: the
   * channel stays readable until the last thread has left. */
  r->wake_sticky = true;
  taxi__reactor_wake_all_locked(r);
  taxi__cond_broadcast(&p->not_empty);
  taxi__cond_broadcast(&p->not_full);

  taxi__event_t ev;
  taxi_hsha_pool_t *outer = stopping;
  stopping = p;
  if (p->priority) {
    /* Reorder the heap by arrival, latest first. */
    for (unsigned i = p->count / 2; i-- > 0;)
      sift_down(p->items, p->count, i, arrived_later);
    while (p->count) {
      heap_pop(p->items, &p->count, arrived_later, &ev);
      taxi__reactor_untake_locked(r, &ev);
    }
  } else {
    while (p->count) {
      ev = p->items[(p->head + p->count - 1) % p->capacity].ev;
      p->count--;
      taxi__reactor_untake_locked(r, &ev);
    }
  }
  stopping = outer;
}

/* Wait until every thread of the pool but the caller has left its loop.
 * Each leaving thread broadcasts; the timeout is a safety net: should the
 * wake-up have been lost (the channel's write failed), it is repeated
 * until the reactor thread is out of the backend's wait. */
static void wait_left_locked(taxi_hsha_pool_t *p) {
  unsigned self = current == p ? 1 : 0;
  while (p->running > self) {
    int rc = taxi__cond_timedwait(&p->left, &p->r->lock,
                                  taxi_now() + 10 * TAXI_NSEC_PER_MSEC);
    if (rc == TAXI_ETIMEDOUT && p->reactor_running)
      taxi__reactor_wake_all_locked(p->r);
  }
}

/* A thread is out of its loop. */
static void leave_locked(taxi_hsha_pool_t *p, bool worker) {
  p->running--;
  if (worker)
    p->workers_running--;
  else
    p->reactor_running = false;
  /* Nobody waits on the handle set any more: stop passing the wake-up on.
   * The channel may stay readable; detaching the pool drains it. */
  if (p->running == 0) p->r->wake_sticky = false;
  taxi__cond_broadcast(&p->left);
}

/* ---- the two halves ------------------------------------------------------
 */

/* Tell the application of a failure, without the lock. */
static void report_locked(taxi_hsha_pool_t *p, int code, const char *where,
                          unsigned attempt, bool fatal) {
  if (!p->on_error) return;
  taxi__mutex_unlock(&p->r->lock);
  taxi__report_error(p->on_error, p->on_error_arg, code, where,
                     TAXI_INVALID_HANDLE, attempt, fatal);
  taxi__mutex_lock(&p->r->lock);
}

/* The reactor thread's wait failed with `code` (an interrupted wait
 * returns 0, so this is the backend failing).  Transient, within the
 * limit: report it and pause (a shutdown cuts the pause short; the workers
 * go on meanwhile); returns 0 to wait again.  Otherwise stop the pool as
 * shutdown would, keeping the failure as its error, and return it. */
static int wait_failed_locked(taxi_hsha_pool_t *p, int code) {
  taxi_time_t pause =
      taxi__error_transient(code) ? taxi__backoff_failed(&p->backoff) : -1;
  if (pause < 0) {
    if (!p->shutdown) {
      p->error = code;
      stop_locked(p);
      report_locked(p, code, "wait", p->backoff.failures + 1, true);
    }
    return code;
  }
  p->stats.transient_errors++;
  report_locked(p, code, "wait", p->backoff.failures, false);
  taxi_time_t until = taxi__time_add(taxi_now(), pause);
  while (!p->shutdown && taxi_now() < until)
    taxi__cond_timedwait(&p->not_full, &p->r->lock, until);
  return 0;
}

static void reactor_loop_locked(taxi_hsha_pool_t *p) {
  taxi_reactor_t *r = p->r;
  taxi__event_t ev;
  /* Events are taken with the time of the last wait, as the reactor's own
   * loop does, so that timers due since then wait for the next round
   * instead of overtaking what that wait reported. */
  taxi_time_t now = taxi_now();
  /* Rejecting, requests are taken at any depth (the busy hook answers
   * those beyond high water) and only a full queue stops the thread. */
  unsigned stop_at = p->reject ? p->capacity : p->high_water;
  while (!p->shutdown) {
    /* The reactor was stopped (perhaps from a signal handler, which
     * cannot call taxi_hsha_stop): the pool stops with it. */
    if (taxi_reactor_stopped(r)) {
      stop_locked(p);
      break;
    }
    if (p->count >= stop_at) {
      p->stats.full_stalls++;
      p->stalled = true;
      while (p->count >= stop_at && !p->shutdown)
        taxi__cond_wait(&p->not_full, &r->lock);
      p->stalled = false;
      continue;
    }
    if (taxi__reactor_take_locked(r, now, &ev)) {
      if (p->reject && p->count >= p->high_water && ev.kind == TAXI__EV_IO) {
        /* The busy path, here in the reactor thread; the handle is
         * re-armed after it as after any hook. */
        p->stats.rejected++;
        taxi__reactor_run_hook_locked(r, &ev, p->busy, p->busy_arg);
        continue;
      }
      int priority = 0;
      if (p->priority && ev.kind == TAXI__EV_IO) {
        /* Application code: never under the lock.  The handle stays
         * deactivated and the handler referenced meanwhile. */
        taxi__mutex_unlock(&r->lock);
        priority = p->priority(ev.handler, ev.events, p->priority_arg);
        taxi__mutex_lock(&r->lock);
        if (p->shutdown) {
          taxi__reactor_untake_locked(r, &ev);
          break;
        }
      }
      queue_push_locked(p, &ev, priority);
      continue;
    }
    /* The take may have drained the wake-up of a stop made since the
     * check above: look again before waiting. */
    if (taxi_reactor_stopped(r)) continue;
    /* The wait measures its timeout from `now`: it must be the time now,
     * not that of the last wait, or a timer that fell due meanwhile would
     * be waited for as if it were still ahead. */
    now = taxi_now();
    int rc =
        taxi__reactor_wait_locked(r, p->wait_buf, p->wait_cap, INT64_MAX, &now);
    p->stats.waits++;
    if (rc >= 0) {
      taxi__backoff_reset(&p->backoff);
    } else if (wait_failed_locked(p, rc) < 0) {
      break;
    }
  }
}

static void worker_loop_locked(taxi_hsha_pool_t *p) {
  taxi_reactor_t *r = p->r;
  taxi__event_t ev;
  for (;;) {
    while (p->count == 0 && !p->shutdown) {
      p->idle++;
      taxi__cond_wait(&p->not_empty, &r->lock);
      p->idle--;
    }
    if (p->shutdown) break;
    queue_pop_locked(p, &ev);
    if (p->stalled && p->count < (p->reject ? p->capacity : p->high_water))
      taxi__cond_signal(&p->not_full);
    p->stats.events += taxi__reactor_run_locked(r, &ev);
  }
}

static void *reactor_thread(void *arg) {
  taxi_hsha_pool_t *p = arg;
  current = p;
  taxi__mutex_lock(&p->r->lock);
  reactor_loop_locked(p);
  leave_locked(p, false);
  taxi__mutex_unlock(&p->r->lock);
  current = NULL;
  return NULL;
}

static void *worker_thread(void *arg) {
  taxi_hsha_pool_t *p = arg;
  current = p;
  taxi__mutex_lock(&p->r->lock);
  /* The buffer the worker lends to the events it runs
   * (taxi__batch_scratch); without it (no memory) streams read into their
   * own. */
  (void)taxi__batch_scratch_enter(p->scratch[p->scratch_claimed++]);
  worker_loop_locked(p);
  leave_locked(p, true);
  taxi__mutex_unlock(&p->r->lock);
  taxi__batch_scratch_leave(NULL);
  current = NULL;
  return NULL;
}

/* ---- creation and destruction --------------------------------------------
 */

static void free_pool(taxi_hsha_pool_t *p) {
  for (unsigned i = 0; p->scratch && i < p->nworkers; i++)
    taxi__free(p->scratch[i]);
  taxi__free(p->scratch);
  taxi__free(p->items);
  taxi__free(p->wait_buf);
  taxi__free(p->threads);
  taxi__free(p);
}

/* Join the started threads, give the reactor back, wait for the calls
 * still pinning p, free it.  The pool is unregistered and stopped. */
static void teardown(taxi_hsha_pool_t *p) {
  taxi_reactor_t *r = p->r;
  for (unsigned i = 0; i < p->started; i++) taxi__thread_join(p->threads[i]);
  taxi__mutex_lock(&r->lock);
  /* Calls that pinned p before it was unregistered find it stopped and
   * return soon; a shutdown may still be giving events back, so the
   * reactor leaves pool mode only after them. */
  while (atomic_load(&p->reg.pins) > 0)
    taxi__cond_timedwait(&p->left, &r->lock, taxi_now() + TAXI_NSEC_PER_MSEC);
  taxi__reactor_detach_pool_locked(r);
  taxi__mutex_unlock(&r->lock);
  taxi__cond_destroy(&p->not_empty);
  taxi__cond_destroy(&p->not_full);
  taxi__cond_destroy(&p->left);
  free_pool(p);
}

/* Start the reactor thread and the workers.  On failure the threads that
 * started are stopped (not joined) and the error returned. */
static int start_threads(taxi_hsha_pool_t *p) {
  taxi_reactor_t *r = p->r;
  for (unsigned i = 0; i <= p->nworkers; i++) {
    bool worker = i > 0;
    /* Counted before it starts, so that a shutdown right after create
     * waits for it. */
    taxi__mutex_lock(&r->lock);
    p->running++;
    if (worker)
      p->workers_running++;
    else
      p->reactor_running = true;
    taxi__mutex_unlock(&r->lock);
    int rc = taxi__thread_create(&p->threads[i],
                                 worker ? worker_thread : reactor_thread, p);
    if (rc < 0) {
      taxi__mutex_lock(&r->lock);
      p->running--;
      if (worker)
        p->workers_running--;
      else
        p->reactor_running = false;
      if (!p->shutdown) stop_locked(p);
      taxi__mutex_unlock(&r->lock);
      /* The OS error is recorded for taxi_last_os_error(); the contract
       * names only these codes (TAXI_EAGAIN: the OS is out of threads for
       * now, and the caller may try again later). */
      return rc == TAXI_ENOMEM || rc == TAXI_EAGAIN ? rc : TAXI_ESYS;
    }
    p->started++;
  }
  return 0;
}

void taxi_hsha_options_init(taxi_hsha_options_t *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->size = sizeof *o;
}

int taxi__hsha_options_check(taxi_hsha_options_t *o, const char *where) {
  if (o->workers > TAXI_HSHA_MAX_WORKERS)
    return taxi__refuse(TAXI_EINVAL,
                        "%s.workers: at most TAXI_HSHA_MAX_WORKERS (%u); got "
                        "%u",
                        where, TAXI_HSHA_MAX_WORKERS, o->workers);
  if (o->queue_capacity > TAXI_HSHA_MAX_QUEUE)
    return taxi__refuse(TAXI_EINVAL,
                        "%s.queue_capacity: at most TAXI_HSHA_MAX_QUEUE (%u); "
                        "got %u",
                        where, TAXI_HSHA_MAX_QUEUE, o->queue_capacity);
  if (o->workers == 0) o->workers = 4;
  if (o->queue_capacity == 0) o->queue_capacity = 1024;
  if (o->high_water > o->queue_capacity)
    return taxi__refuse(TAXI_EINVAL,
                        "%s.high_water: at most queue_capacity (%u); got %u",
                        where, o->queue_capacity, o->high_water);
  if (o->high_water == 0) o->high_water = o->queue_capacity;
  if ((unsigned)o->full > TAXI_HSHA_FULL_REJECT)
    return taxi__refuse(TAXI_EINVAL, "%s.full: not a taxi_hsha_full_t; got %d",
                        where, (int)o->full);
  if (o->full == TAXI_HSHA_FULL_REJECT && !o->busy)
    return taxi__refuse(TAXI_EINVAL,
                        "%s.busy: NULL, and TAXI_HSHA_FULL_REJECT needs it",
                        where);
  return 0;
}

int taxi_hsha_create(taxi_hsha_pool_t **out, taxi_reactor_t *r,
                     const taxi_hsha_options_t *opts) {
  if (!out) return taxi__refuse(TAXI_EINVAL, "taxi_hsha_create: out: NULL");
  *out = NULL;
  if (!r) return taxi__refuse(TAXI_EINVAL, "taxi_hsha_create: r: NULL");
  taxi_hsha_options_t o;
  taxi_hsha_options_init(&o);
  if (taxi__options_copy(&o, sizeof o, opts, sizeof o,
                         "taxi_hsha_create: options",
                         "taxi_hsha_options_init") < 0 ||
      taxi__hsha_options_check(&o, "taxi_hsha_create: options") < 0)
    return TAXI_EINVAL;

  taxi_hsha_pool_t *p = taxi__calloc(1, sizeof *p);
  if (!p) return TAXI_ENOMEM;
  p->r = r;
  p->priority = o.priority;
  p->priority_arg = o.priority_arg;
  p->on_error = o.on_error;
  p->on_error_arg = o.on_error_arg;
  p->nworkers = o.workers;
  p->capacity = o.queue_capacity;
  p->high_water = o.high_water;
  p->reject = o.full == TAXI_HSHA_FULL_REJECT;
  p->busy = o.busy;
  p->busy_arg = o.busy_arg;
  /* max_events is fixed when the reactor is created. */
  p->wait_cap = r->max_events;
  p->items = taxi__calloc(p->capacity, sizeof *p->items);
  p->wait_buf = taxi__calloc(p->wait_cap, sizeof *p->wait_buf);
  p->threads = taxi__calloc((size_t)p->nworkers + 1, sizeof *p->threads);
  p->scratch = taxi__calloc(p->nworkers, sizeof *p->scratch);
  if (!p->items || !p->wait_buf || !p->threads || !p->scratch) {
    free_pool(p);
    return TAXI_ENOMEM;
  }
  /* Without one (no memory), a worker's streams read into their own. */
  for (unsigned i = 0; i < p->nworkers; i++)
    p->scratch[i] = taxi__malloc(TAXI__SCRATCH_BYTES);
  int rc = taxi__cond_init(&p->not_empty);
  if (rc < 0) goto fail_free;
  rc = taxi__cond_init(&p->not_full);
  if (rc < 0) goto fail_not_empty;
  rc = taxi__cond_init(&p->left);
  if (rc < 0) goto fail_not_full;
  rc = taxi__registry_add(&p->reg, TAXI__KIND_HSHA);
  if (rc < 0) goto fail_left;

  taxi__mutex_lock(&r->lock);
  /* One waiter: only the reactor thread waits on the handle set. */
  rc = taxi__reactor_attach_pool_locked(r, p, 1, false, "taxi_hsha_create");
  taxi__mutex_unlock(&r->lock);
  if (rc < 0) {
    taxi__registry_remove(&p->reg, TAXI__KIND_HSHA);
    goto fail_left;
  }

  rc = start_threads(p);
  if (rc < 0) {
    taxi__registry_remove(&p->reg, TAXI__KIND_HSHA);
    teardown(p);
    return rc;
  }
  *out = p;
  return 0;

fail_left:
  taxi__cond_destroy(&p->left);
fail_not_full:
  taxi__cond_destroy(&p->not_full);
fail_not_empty:
  taxi__cond_destroy(&p->not_empty);
fail_free:
  free_pool(p);
  return rc;
}

int taxi_hsha_stop(taxi_hsha_pool_t *p) {
  if (!p || !taxi__registry_pin(&p->reg, TAXI__KIND_HSHA)) return TAXI_EINVAL;
  taxi__mutex_lock(&p->r->lock);
  int rc = TAXI_ESTOPPED;
  if (!p->shutdown) {
    stop_locked(p);
    rc = 0;
  }
  /* A pool that stopped by itself may still be being left. */
  wait_left_locked(p);
  if (p->error) rc = p->error;
  taxi__mutex_unlock(&p->r->lock);
  taxi__registry_unpin(&p->reg);
  return rc;
}

int taxi_hsha_wait(taxi_hsha_pool_t *p, int timeout_ms) {
  if (!p || !taxi__registry_pin(&p->reg, TAXI__KIND_HSHA)) return TAXI_EINVAL;
  if (current == p || stopping == p) {
    taxi__registry_unpin(&p->reg);
    return taxi__refuse(TAXI_EBUSY,
                        "taxi_hsha_wait: p: called from a thread of the pool "
                        "(a hook), which would wait for itself");
  }
  taxi_time_t deadline = taxi__deadline_after_ms(taxi_now(), timeout_ms);
  int rc = 0;
  taxi__mutex_lock(&p->r->lock);
  while (rc == 0 && !(p->shutdown && p->running == 0)) {
    /* Looked at every 10 ms: a stop of the reactor the reactor thread has
     * not seen yet, and a wake-up of a stopping pool that was lost, are
     * made good here as taxi_hsha_stop makes them good. */
    if (!p->shutdown && taxi_reactor_stopped(p->r)) stop_locked(p);
    if (p->shutdown && p->reactor_running) taxi__reactor_wake_all_locked(p->r);
    taxi_time_t slice = taxi__time_add(taxi_now(), 10 * TAXI_NSEC_PER_MSEC);
    taxi__cond_timedwait(&p->left, &p->r->lock,
                         slice < deadline ? slice : deadline);
    if (!(p->shutdown && p->running == 0) && taxi_now() >= deadline)
      rc = TAXI_ETIMEDOUT;
  }
  if (rc == 0) rc = p->error ? p->error : TAXI_ESTOPPED;
  taxi__mutex_unlock(&p->r->lock);
  taxi__registry_unpin(&p->reg);
  return rc;
}

int taxi_hsha_destroy(taxi_hsha_pool_t *p) {
  if (!p) return TAXI_EINVAL;
  /* Before unregistering: from its own threads, and from close hooks run
   * while its events are given back, the pool must survive. */
  if (current == p || stopping == p)
    return taxi__refuse(TAXI_EBUSY,
                        "taxi_hsha_destroy: p: called from a hook of the pool "
                        "(or a close hook run while it stops), which the "
                        "destroy would wait for");
  if (!taxi__registry_remove(&p->reg, TAXI__KIND_HSHA)) return TAXI_EINVAL;
  taxi__mutex_lock(&p->r->lock);
  if (!p->shutdown) stop_locked(p);
  taxi__mutex_unlock(&p->r->lock);
  teardown(p);
  return 0;
}

int taxi_hsha_stats(const taxi_hsha_pool_t *cp, taxi_hsha_stats_t *out) {
  /* Reading takes the reactor's lock and pins the pool: neither changes
   * what the pool is, so const is cast away for them alone. */
  taxi_hsha_pool_t *p = (taxi_hsha_pool_t *)(uintptr_t)cp;
  if (!p || !out) return TAXI_EINVAL;
  if (!taxi__registry_pin(&p->reg, TAXI__KIND_HSHA)) return TAXI_EINVAL;
  taxi__mutex_lock(&p->r->lock);
  *out = p->stats;
  out->error = p->error;
  out->queued = p->count;
  out->workers = p->workers_running;
  taxi__mutex_unlock(&p->r->lock);
  taxi__registry_unpin(&p->reg);
  return 0;
}
