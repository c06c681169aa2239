/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/proactor/proactor_group.c - a group of proactors, one per dispatching
 * thread (taxi/proactor_group.h): creating them, running each in a thread of
 * its own, stopping them together, and choosing one for a new handle.
 *
 * The array of proactors is fixed at creation and never changes until
 * destroy, so stop and next read it without a lock (stop must: it may run
 * in a signal handler).  `state` keeps run and destroy apart: each claims
 * the group by moving it from IDLE, and gives it back when done.
 *
 * Threads.  Each proactor is made with TAXI_PROACTOR_ONE_THREAD, so the
 * first thread that dispatches it keeps it (on io_uring the kernel ties
 * the ring to that thread, and only it may submit, wait, or cancel what
 * is left when the proactor is destroyed).  So each proactor gets a thread
 * of the group's own, made by the first run and parked between runs, that
 * dispatches it in every run and destroys it at the end; the caller of
 * taxi_proactor_group_run waits for them.  A group never run has no
 * threads, and its proactors are destroyed by the caller of destroy.
 *
 * Layer 5, above the core (see core/proactor/proactor_impl.h): it calls
 * the proactor's public API and taxi__proactor_in_handler of the loop.
 */
#include "config.h"

#include "taxi/proactor_group.h"
#include "core/common/alloc.h"
#include "core/common/detail.h"
#include "core/common/options.h"
#include "core/proactor/proactor_impl.h"
#include "ports/port.h"

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

/* The most proactors in a group (taxi_proactor_group_options_t.count). */
#define GROUP_MAX 1024u
/* The count when the options leave it 0. */
#define GROUP_DEFAULT 2u

enum { GROUP_IDLE, GROUP_RUNNING, GROUP_DESTROYING };

typedef struct group_slot {
  taxi_proactor_t *p;
  taxi__thread_t thread; /* dispatching p, once `started` */
  bool started;
  unsigned gen; /* the run it last joined (mu) */
  taxi_proactor_group_t *g;
} group_slot_t;

struct taxi_proactor_group {
  unsigned count;
  taxi_group_spread_t spread;
  atomic_uint turn;       /* round robin, and where ties start */
  atomic_int state;       /* GROUP_* */
  atomic_int first_error; /* of the current run: the first error, or 0 */
  /* Set by taxi_proactor_group_stop (lock-free: a signal handler may call
   * it), cleared when a run begins; for taxi_proactor_group_wait. */
  atomic_int stop_requested;
  /* The threads: a new `gen` starts a run, `running` counts those still
   * in it, `quit` sends them to destroy their proactors. */
  taxi__mutex_t mu;
  taxi__cond_t go, done;
  unsigned gen, running;
  bool quit;
  /* taxi_proactor_group_wait's view (mu): a run is in progress; a run has
   * ended since the last began, with `result`.  Waiters sleep on `done`. */
  bool in_run, run_ended;
  int result;
  group_slot_t slots[]; /* count of them */
};

void taxi_proactor_group_options_init(taxi_proactor_group_options_t *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->size = sizeof *o;
}

/* Destroy the first n proactors (created, never run). */
static void destroy_first(taxi_proactor_group_t *g, unsigned n) {
  for (unsigned i = 0; i < n; i++) taxi_proactor_destroy(g->slots[i].p);
}

int taxi_proactor_group_create(taxi_proactor_group_t **out,
                               const taxi_proactor_group_options_t *opts) {
  if (!out)
    return taxi__refuse(TAXI_EINVAL, "taxi_proactor_group_create: out: NULL");
  *out = NULL;
  taxi_proactor_group_options_t o;
  taxi_proactor_group_options_init(&o);
  if (taxi__options_copy(&o, sizeof o, opts, sizeof o,
                         "taxi_proactor_group_create: options",
                         "taxi_proactor_group_options_init") < 0)
    return TAXI_EINVAL;
  if (o.count == 0) o.count = GROUP_DEFAULT;
  if (o.count > GROUP_MAX)
    return taxi__refuse(TAXI_EINVAL,
                        "taxi_proactor_group_create: options.count: at most "
                        "%u proactors; got %u",
                        GROUP_MAX, o.count);
  if (o.spread != TAXI_SPREAD_ROUND_ROBIN &&
      o.spread != TAXI_SPREAD_LEAST_LOADED)
    return taxi__refuse(TAXI_EINVAL,
                        "taxi_proactor_group_create: options.spread: not a "
                        "taxi_group_spread_t; got %d",
                        (int)o.spread);
  /* The proactors' options, read here as taxi_proactor_create reads them,
   * so that a bad size is refused before anything is made. */
  taxi_proactor_options_t po;
  taxi_proactor_options_init(&po);
  if (taxi__options_copy(&po, sizeof po, o.proactor, sizeof po,
                         "taxi_proactor_group_create: options.proactor",
                         "taxi_proactor_options_init") < 0)
    return TAXI_EINVAL;
  po.flags |= TAXI_PROACTOR_ONE_THREAD;

  taxi_proactor_group_t *g =
      taxi__calloc(1, sizeof *g + (size_t)o.count * sizeof g->slots[0]);
  if (!g) return TAXI_ENOMEM;
  g->count = o.count;
  g->spread = o.spread;
  atomic_init(&g->turn, 0);
  atomic_init(&g->state, GROUP_IDLE);
  atomic_init(&g->first_error, 0);
  atomic_init(&g->stop_requested, 0);
  int rc = taxi__mutex_init(&g->mu);
  if (rc < 0) {
    taxi__free(g);
    return rc;
  }
  rc = taxi__cond_init(&g->go);
  if (rc == 0) {
    rc = taxi__cond_init(&g->done);
    if (rc < 0) taxi__cond_destroy(&g->go);
  }
  if (rc < 0) {
    taxi__mutex_destroy(&g->mu);
    taxi__free(g);
    return rc;
  }
  for (unsigned i = 0; i < g->count; i++) {
    g->slots[i].g = g;
    unsigned mark = taxi__refusals();
    rc = taxi_proactor_create(&g->slots[i].p, &po);
    rc = taxi__refuse_within(rc, mark, "taxi_proactor_create: options",
                             "taxi_proactor_group_create: options.proactor");
    if (rc < 0) {
      destroy_first(g, i);
      taxi__cond_destroy(&g->done);
      taxi__cond_destroy(&g->go);
      taxi__mutex_destroy(&g->mu);
      taxi__free(g);
      return rc;
    }
  }
  *out = g;
  return 0;
}

unsigned taxi_proactor_group_count(const taxi_proactor_group_t *g) {
  return g ? g->count : 0;
}

taxi_proactor_t *taxi_proactor_group_at(const taxi_proactor_group_t *g,
                                        unsigned i) {
  return g && i < g->count ? g->slots[i].p : NULL;
}

taxi_proactor_t *taxi_proactor_group_next(taxi_proactor_group_t *g) {
  if (!g) return NULL;
  unsigned start =
      atomic_fetch_add_explicit(&g->turn, 1, memory_order_relaxed) % g->count;
  if (g->spread == TAXI_SPREAD_ROUND_ROBIN) return g->slots[start].p;
  /* The fewest handles; scanning from the turn's proactor and keeping the
   * first of equals sends ties round robin. */
  unsigned best = start;
  size_t best_handles = SIZE_MAX;
  for (unsigned k = 0; k < g->count; k++) {
    unsigned i = (start + k) % g->count;
    /* The attached handles alone (what stats.handles reports), without
     * copying every counter for each new connection. */
    taxi_proactor_t *p = g->slots[i].p;
    taxi__mutex_lock(&p->lock);
    size_t handles = p->map.count;
    taxi__mutex_unlock(&p->lock);
    if (handles < best_handles) {
      best_handles = handles;
      best = i;
    }
  }
  return g->slots[best].p;
}

int taxi_proactor_group_stop(taxi_proactor_group_t *g) {
  if (!g) return TAXI_EINVAL;
  /* Each stop is an atomic store and a wake-up: no lock, no allocation. */
  atomic_store(&g->stop_requested, 1);
  for (unsigned i = 0; i < g->count; i++) taxi_proactor_stop(g->slots[i].p);
  return 0;
}

/* A proactor's run ended with rc: the first error of the run is kept, and
 * ends the others' runs (no thread outlives taxi_proactor_group_run). */
static void run_ended(taxi_proactor_group_t *g, int rc) {
  if (rc >= 0 || rc == TAXI_ESTOPPED) return;
  int none = 0;
  atomic_compare_exchange_strong(&g->first_error, &none, rc);
  taxi_proactor_group_stop(g);
}

/* A slot's thread: dispatch its proactor in each run; at the end destroy
 * it, from the thread that owns it. */
static void *slot_main(void *arg) {
  group_slot_t *s = arg;
  taxi_proactor_group_t *g = s->g;
  taxi__mutex_lock(&g->mu);
  for (;;) {
    while (s->gen == g->gen && !g->quit) taxi__cond_wait(&g->go, &g->mu);
    if (g->quit) break;
    s->gen = g->gen;
    taxi__mutex_unlock(&g->mu);
    run_ended(g, taxi_proactor_run(s->p));
    taxi__mutex_lock(&g->mu);
    if (--g->running == 0) taxi__cond_broadcast(&g->done);
  }
  taxi__mutex_unlock(&g->mu);
  /* Cannot be refused: the group is being destroyed, idle (checked). */
  (void)taxi_proactor_destroy(s->p);
  s->p = NULL;
  return NULL;
}

int taxi_proactor_group_run(taxi_proactor_group_t *g) {
  if (!g) return TAXI_EINVAL;
  int idle = GROUP_IDLE;
  if (!atomic_compare_exchange_strong(&g->state, &idle, GROUP_RUNNING))
    return taxi__refuse(TAXI_EBUSY, "taxi_proactor_group_run: g: %s",
                        idle == GROUP_RUNNING
                            ? "another thread runs it already"
                            : "another thread is destroying it");
  atomic_store(&g->first_error, 0);
  int rc = 0;
  taxi__mutex_lock(&g->mu);
  g->in_run = true;
  g->run_ended = false;
  /* A stop that came before this run still stops it (the proactors keep
   * it); waiters are held by in_run meanwhile. */
  atomic_store(&g->stop_requested, 0);
  /* Threads made by an earlier run stay; those missing are made now
   * (they see the current generation and wait for the next). */
  for (unsigned i = 0; i < g->count && rc == 0; i++) {
    group_slot_t *s = &g->slots[i];
    if (s->started) continue;
    s->gen = g->gen;
    rc = taxi__thread_create(&s->thread, slot_main, s);
    s->started = rc == 0;
  }
  if (rc == 0) {
    g->gen++;
    g->running = g->count;
    taxi__cond_broadcast(&g->go);
    while (g->running > 0) taxi__cond_wait(&g->done, &g->mu);
  }
  taxi__mutex_unlock(&g->mu);
  if (rc < 0) run_ended(g, rc);
  /* Stopped proactors stay stopped until restarted: restarting them here,
   * not when the next run begins, keeps a stop that comes just before a
   * run (from a signal handler, say) from being lost. */
  for (unsigned i = 0; i < g->count; i++) taxi_proactor_restart(g->slots[i].p);
  /* A run ends when its proactors are stopped, or by an error. */
  rc = atomic_load(&g->first_error);
  if (rc == 0) rc = TAXI_ESTOPPED;
  taxi__mutex_lock(&g->mu);
  g->in_run = false;
  g->run_ended = true;
  g->result = rc;
  taxi__cond_broadcast(&g->done);
  taxi__mutex_unlock(&g->mu);
  atomic_store(&g->state, GROUP_IDLE);
  return rc;
}

int taxi_proactor_group_wait(taxi_proactor_group_t *g, int timeout_ms) {
  if (!g) return TAXI_EINVAL;
  /* A completion handler of the group runs in one of the group's threads,
   * which the run it would wait for waits for in turn. */
  for (unsigned i = 0; i < g->count; i++)
    if (taxi__proactor_in_handler(g->slots[i].p))
      return taxi__refuse(TAXI_EBUSY,
                          "taxi_proactor_group_wait: g: called from a "
                          "completion handler of proactor %u of the group, "
                          "whose run waits for this thread",
                          i);
  taxi_time_t deadline = timeout_ms < 0 ? INT64_MAX
                                        : taxi_now() + (taxi_time_t)timeout_ms *
                                                           TAXI_NSEC_PER_MSEC;
  int rc = 0;
  taxi__mutex_lock(&g->mu);
  /* No run in progress, and one has ended or a stop was asked for. */
  while (g->in_run || !(g->run_ended || atomic_load(&g->stop_requested))) {
    if (deadline == INT64_MAX) {
      taxi__cond_wait(&g->done, &g->mu);
    } else if (taxi__cond_timedwait(&g->done, &g->mu, deadline) ==
               TAXI_ETIMEDOUT) {
      rc = TAXI_ETIMEDOUT;
      break;
    }
  }
  if (rc == 0) rc = g->run_ended ? g->result : TAXI_ESTOPPED;
  taxi__mutex_unlock(&g->mu);
  return rc;
}

/* Whether taxi_proactor_destroy would refuse p now: dispatched (by a
 * thread of the application's own), under a pool, or called from one of
 * its handlers. */
static bool proactor_busy(taxi_proactor_t *p) {
  taxi__mutex_lock(&p->lock);
  bool busy = p->has_owner || p->pool || p->destroying;
  taxi__mutex_unlock(&p->lock);
  return busy || taxi__proactor_in_handler(p);
}

int taxi_proactor_group_destroy(taxi_proactor_group_t *g) {
  if (!g) return TAXI_EINVAL;
  int idle = GROUP_IDLE;
  if (!atomic_compare_exchange_strong(&g->state, &idle, GROUP_DESTROYING))
    return taxi__refuse(TAXI_EBUSY, "taxi_proactor_group_destroy: g: %s",
                        idle == GROUP_RUNNING
                            ? "running: stop it and let taxi_proactor_group_"
                              "run return first"
                            : "another thread is destroying it");
  /* All or nothing: every proactor is checked before the first goes. */
  for (unsigned i = 0; i < g->count; i++) {
    if (proactor_busy(g->slots[i].p)) {
      atomic_store(&g->state, GROUP_IDLE);
      return taxi__refuse(TAXI_EBUSY,
                          "taxi_proactor_group_destroy: g: proactor %u is "
                          "busy (dispatched by a thread of the application, "
                          "or this is one of its completion handlers)",
                          i);
    }
  }
  /* Cannot fail now: run is excluded by the state, and only a thread of
   * the application dispatching a proactor of the group by itself, which
   * the header forbids, could start between the check and here.  Each
   * thread destroys its own proactor; those never run go here. */
  taxi__mutex_lock(&g->mu);
  g->quit = true;
  taxi__cond_broadcast(&g->go);
  taxi__mutex_unlock(&g->mu);
  for (unsigned i = 0; i < g->count; i++) {
    group_slot_t *s = &g->slots[i];
    if (s->started)
      taxi__thread_join(s->thread);
    else
      taxi_proactor_destroy(s->p);
  }
  taxi__cond_destroy(&g->done);
  taxi__cond_destroy(&g->go);
  taxi__mutex_destroy(&g->mu);
  taxi__free(g);
  return 0;
}
