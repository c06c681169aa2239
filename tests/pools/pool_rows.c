/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/pools/pool_rows.c - the table of pools: what the shared cases
 * need to know of the Leader/Followers pool and of the half-sync/half-async
 * pool, and the helpers of each that only its own tests use (see
 * pool_fixture.h).
 */
#define _GNU_SOURCE 1

#include "pool_fixture.h"

/* ---- Leader/Followers ---------------------------------------------------- */

int lf_do_shutdown(void *p) { return taxi_lf_stop(p); }
int lf_do_destroy(void *p) { return taxi_lf_destroy(p); }

/* A failed spawn destroys the pool again: the row leaves nothing behind. */
static int lf_row_create(taxi_reactor_t *r, const void *opts, unsigned threads,
                         void **out) {
  taxi_lf_pool_t *p = NULL;
  int rc = taxi_lf_create(out ? &p : NULL, r, opts);
  if (rc != 0) return rc;
  /* Known before its threads start: their hooks read it. */
  *out = p;
  if (threads > 0) rc = taxi_lf_spawn(p, threads);
  if (rc != 0) {
    *out = NULL;
    CU_ASSERT_EQUAL(taxi_lf_destroy(p), 0);
    return rc;
  }
  return 0;
}

static int lf_row_stats(void *p, void *out) { return taxi_lf_stats(p, out); }

/* Idle: n threads, each leading or following. */
static int lf_row_idle(const pool_counts_t *c, void *p, unsigned n) {
  taxi_lf_stats_t s;
  (void)c;
  memset(&s, 0, sizeof s);
  return taxi_lf_stats(p, &s) == 0 && s.threads == n &&
         s.leaders + s.followers == n;
}

static const void *lf_row_priority_options(pool_test_t *t) {
  static taxi_lf_options_t o;
  (void)t;
  taxi_lf_options_init(&o);
  o.promotion = TAXI_PROMOTE_PRIORITY;
  return &o;
}

static void lf_row_more_null(pool_test_t *t) {
  taxi_lf_pool_t *p = NULL;
  taxi_lf_thread_stats_t ts[2];
  taxi_lf_options_t o = TAXI_LF_OPTIONS_INIT;
  CU_ASSERT_EQUAL(taxi_lf_create(NULL, t->r, &o), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_create(&p, NULL, &o), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_spawn(NULL, 1), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_join(NULL, 0, 0), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_join(NULL, -1, 0), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_shrink(NULL, 1), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_thread_stats(NULL, ts, 2), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_current_thread(NULL), -1);
}

static void lf_row_more_destroyed(void *destroyed) {
  taxi_lf_pool_t *p = destroyed;
  taxi_lf_stats_t s;
  taxi_lf_thread_stats_t ts[2];
  CU_ASSERT_EQUAL(taxi_lf_join(p, 0, 0), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_spawn(p, 1), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_shrink(p, 1), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_thread_stats(p, ts, 2), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_current_thread(p), -1);
  /* Never created: the registry does not know it. */
  taxi_lf_pool_t *bogus = (taxi_lf_pool_t *)(void *)&s;
  CU_ASSERT_EQUAL(taxi_lf_join(bogus, 0, 0), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_destroy(bogus), TAXI_EINVAL);
}

void lf_create(pool_test_t *t, taxi_promotion_t promotion,
               taxi_leaders_t leaders) {
  taxi_lf_options_t o = TAXI_LF_OPTIONS_INIT;
  o.promotion = promotion;
  o.leaders = leaders;
  pool_start(t, &o, 0);
}

/* An application thread: taxi_lf_join(p, join_ms[i], prio[i]). */
typedef struct lf_joiner {
  pool_test_t *t;
  int i;
} lf_joiner_t;

static lf_joiner_t lf_joiners[POOL_MAX_APP_THREADS];

static void lf_join_main(void *arg) {
  lf_joiner_t *j = arg;
  pool_test_t *t = j->t;
  t->join_rc[j->i] = taxi_lf_join(t->p, t->join_ms[j->i], t->prio[j->i]);
}

/* Start application thread number t->next_thread. */
int lf_start_joiner(pool_test_t *t, int timeout_ms, int prio) {
  int i = t->next_thread++;
  CU_ASSERT_FATAL(i < POOL_MAX_APP_THREADS);
  t->join_ms[i] = timeout_ms;
  t->prio[i] = prio;
  t->join_rc[i] = 1;
  lf_joiners[i].t = t;
  lf_joiners[i].i = i;
  CU_ASSERT_EQUAL_FATAL(
      util_thread_start(&t->th[i], lf_join_main, &lf_joiners[i]), 0);
  return i;
}

/* -1: any value. */
typedef struct lf_shape {
  int threads, leaders, followers;
} lf_shape_t;

static int lf_pred_shape(const taxi_lf_stats_t *s, void *arg) {
  const lf_shape_t *w = arg;
  return (w->threads < 0 || s->threads == (unsigned)w->threads) &&
         (w->leaders < 0 || s->leaders == (unsigned)w->leaders) &&
         (w->followers < 0 || s->followers == (unsigned)w->followers);
}

int lf_wait_shape(taxi_lf_pool_t *p, int threads, int leaders, int followers) {
  lf_shape_t w = {threads, leaders, followers};
  taxi_lf_stats_t s;
  if (pools_lf_wait(p, lf_pred_shape, &w, POOLS_WAIT_MS, &s)) return 1;
  printf(
      "\n    stats never showed threads %d leaders %d followers %d: "
      "threads %u leaders %u followers %u\n",
      threads, leaders, followers, s.threads, s.leaders, s.followers);
  return 0;
}

static int lf_pred_idle(const taxi_lf_stats_t *s, void *arg) {
  unsigned n = *(const unsigned *)arg;
  return s->threads == n && s->leaders + s->followers == n;
}

int lf_wait_idle(taxi_lf_pool_t *p, unsigned n) {
  taxi_lf_stats_t s;
  if (pools_lf_wait(p, lf_pred_idle, &n, POOLS_WAIT_MS, &s)) return 1;
  printf(
      "\n    pool never idle with %u threads: threads %u leaders %u "
      "followers %u\n",
      n, s.threads, s.leaders, s.followers);
  return 0;
}

taxi_lf_stats_t lf_stats(taxi_lf_pool_t *p) {
  taxi_lf_stats_t s;
  memset(&s, 0, sizeof s);
  CU_ASSERT_EQUAL(taxi_lf_stats(p, &s), 0);
  return s;
}

void lf_note_thread(pool_test_t *t) {
  int id = taxi_lf_current_thread(t->p);
  if (id < 0)
    atomic_fetch_add(&t->bad_thread, 1);
  else if (id < 64)
    atomic_fetch_or(&t->seen, 1ull << id);
}

/* Record which pool thread takes the k-th event, then block. */
int lf_order_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  pool_conn_t *c = POOL_CONN(h);
  pool_test_t *t = c->t;
  (void)ev;
  int k = atomic_fetch_add(&t->thread_next, 1);
  if (k < 8) atomic_store(&t->thread_order[k], taxi_lf_current_thread(t->p));
  atomic_fetch_add(&c->bytes, pools_drain(fd));
  atomic_fetch_add(&c->inputs, 1);
  pools_gate_pass(&t->gate);
  return 0;
}

const pool_row_t pool_row_lf = {
    .name = "lf",
    .create_name = "taxi_lf_create",
    .stop_name = "taxi_lf_stop",
    .destroy_name = "taxi_lf_destroy",
    .create = lf_row_create,
    .stop = lf_do_shutdown,
    .destroy = lf_do_destroy,
    .stats = lf_row_stats,
    .stats_size = sizeof(taxi_lf_stats_t),
    .threads_at = POOL_FIELD(taxi_lf_stats_t, threads, threads),
    .events_at = POOL_FIELD(taxi_lf_stats_t, events, events),
    .queued_at = POOL_NO_FIELD,
    .idle = lf_row_idle,
    .priority_options = lf_row_priority_options,
    .note_thread = lf_note_thread,
    .add_app_thread = lf_start_joiner,
    .more_null = lf_row_more_null,
    .more_destroyed = lf_row_more_destroyed,
};

/* ---- half-sync/half-async ------------------------------------------------ */

int hs_do_shutdown(void *p) { return taxi_hsha_stop(p); }
int hs_do_destroy(void *p) { return taxi_hsha_destroy(p); }

/* No options and no thread count: NULL options, the defaults. */
static int hs_row_create(taxi_reactor_t *r, const void *opts, unsigned threads,
                         void **out) {
  taxi_hsha_options_t o = TAXI_HSHA_OPTIONS_INIT;
  if (opts) o = *(const taxi_hsha_options_t *)opts;
  if (threads > 0) o.workers = threads;
  const taxi_hsha_options_t *use = opts || threads > 0 ? &o : NULL;
  taxi_hsha_pool_t *p = NULL;
  int rc = taxi_hsha_create(out ? &p : NULL, r, use);
  if (rc == 0) *out = p;
  return rc;
}

static int hs_row_stats(void *p, void *out) { return taxi_hsha_stats(p, out); }

/* Workers wait for the queue whenever they are not in a hook. */
static int hs_row_idle(const pool_counts_t *c, void *p, unsigned n) {
  (void)p;
  return c->threads == n;
}

static const void *hs_row_priority_options(pool_test_t *t) {
  static taxi_hsha_options_t o;
  taxi_hsha_options_init(&o);
  o.priority = hs_priority;
  o.priority_arg = t;
  return &o;
}

/* An LF call given an HSHA pool pointer is not fooled either. */
static void hs_row_more_destroyed(void *destroyed) {
  CU_ASSERT_EQUAL(taxi_lf_join(destroyed, 0, 0), TAXI_EINVAL);
}

/* With o as given (NULL included): the workers o says. */
void hs_create(pool_test_t *t, const taxi_hsha_options_t *o) {
  pool_start(t, o, 0);
}

taxi_hsha_stats_t hs_stats(taxi_hsha_pool_t *p) {
  taxi_hsha_stats_t s;
  memset(&s, 0, sizeof s);
  CU_ASSERT_EQUAL(taxi_hsha_stats(p, &s), 0);
  return s;
}

/* Which thread runs this hook: not main, not the reactor thread. */
void hs_note_thread(pool_test_t *t) {
  pthread_t self = pthread_self();
  if (pthread_equal(self, t->main_tid)) atomic_fetch_add(&t->on_main, 1);
  pthread_mutex_lock(&t->mu);
  if (t->have_reactor_tid && pthread_equal(self, t->reactor_tid))
    atomic_fetch_add(&t->on_reactor, 1);
  int known = 0;
  for (int i = 0; i < t->nworkers_seen; i++)
    if (pthread_equal(t->workers[i], self)) known = 1;
  if (!known && t->nworkers_seen < 16) t->workers[t->nworkers_seen++] = self;
  pthread_mutex_unlock(&t->mu);
}

/* Handlers of either kind: conn 0 blocks, the others count. */
int hs_mixed_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  if (POOL_CONN(h)->index == 0) return pool_block_input(h, fd, ev);
  return pool_count_input(h, fd, ev);
}

int hs_priority(taxi_handler_t *h, unsigned events, void *arg) {
  pool_test_t *t = arg;
  pthread_t self = pthread_self();
  (void)events;
  atomic_fetch_add(&t->prio_calls, 1);
  pthread_mutex_lock(&t->mu);
  if (!t->have_reactor_tid) {
    t->reactor_tid = self;
    t->have_reactor_tid = 1;
  } else if (!pthread_equal(t->reactor_tid, self)) {
    atomic_fetch_add(&t->reactor_tids_differ, 1);
  }
  pthread_mutex_unlock(&t->mu);
  return POOL_CONN(h)->prio;
}

const pool_row_t pool_row_hsha = {
    .name = "hsha",
    .create_name = "taxi_hsha_create",
    .stop_name = "taxi_hsha_stop",
    .destroy_name = "taxi_hsha_destroy",
    .create = hs_row_create,
    .stop = hs_do_shutdown,
    .destroy = hs_do_destroy,
    .stats = hs_row_stats,
    .stats_size = sizeof(taxi_hsha_stats_t),
    .threads_at = POOL_FIELD(taxi_hsha_stats_t, workers, threads),
    .events_at = POOL_FIELD(taxi_hsha_stats_t, events, events),
    .queued_at = POOL_FIELD(taxi_hsha_stats_t, queued, queued),
    .idle = hs_row_idle,
    .priority_options = hs_row_priority_options,
    .note_thread = hs_note_thread,
    .add_app_thread = NULL,
    .more_null = NULL,
    .more_destroyed = hs_row_more_destroyed,
};

const pool_row_t *const pool_rows[POOL_N_ROWS] = {&pool_row_lf, &pool_row_hsha};
