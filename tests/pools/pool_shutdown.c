/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/pools/pool_shutdown.c - the shutdown of each pool of the table
 * (busy, with events queued, idle, from a hook) and destroy of a running
 * pool; the suite "lf shutdown" (the HS/HA cases are tests of the "hsha"
 * suite, in hsha.c).
 */
#define _GNU_SOURCE 1

#include "pool_fixture.h"

typedef struct pool_shutter {
  pool_test_t *t;
  atomic_int returned;
  int rc;
  int hooks_done_then; /* hooks that had returned when stop returned */
  unsigned threads_then;
} pool_shutter_t;

static void pool_shutter_main(void *arg) {
  pool_shutter_t *s = arg;
  s->rc = s->t->row->stop(s->t->p);
  int done = 0;
  for (int i = 0; i < s->t->nconns; i++)
    done += atomic_load(&s->t->conn[i].hook_done);
  s->hooks_done_then = done;
  pool_counts_t c;
  memset(&c, 0, sizeof c);
  s->t->row->counts(s->t->p, &c);
  s->threads_then = c.threads;
  atomic_store(&s->returned, 1);
}

/* Every thread blocked in a hook: stop from another thread returns only
 * after the hooks were released and the threads left.  With `queued`
 * (HS/HA), events wait in the queue meanwhile: they are not run, their
 * handles are reactivated and reported when the reactor is dispatched
 * later. */
void pool_shutdown_busy(const pool_row_t *row, int queued) {
  enum { SPAWNED = 3, Q = 3 };
  pool_test_t *t = pool_new(row);
  pool_conns(t, SPAWNED + 1 + Q, &pool_block_ops);
  pool_start(t, NULL, SPAWNED);
  int j = row->add_app_thread ? row->add_app_thread(t, LF_JOIN_MS, 0) : -1;
  int n = j >= 0 ? SPAWNED + 1 : SPAWNED;
  CU_ASSERT(pool_wait_threads(t, (unsigned)n));
  for (int i = 0; i < n; i++) util_write_byte(t->conn[i].sv[1]);
  CU_ASSERT(pools_wait_count(&t->gate.entered, n, POOLS_WAIT_MS));
  if (queued) {
    for (int i = n; i < n + Q; i++) util_write_byte(t->conn[i].sv[1]);
    CU_ASSERT(pool_wait_queued(t, Q));
  }
  static pool_shutter_t sh;
  memset(&sh, 0, sizeof sh);
  sh.t = t;
  atomic_init(&sh.returned, 0);
  util_thread_t st;
  CU_ASSERT_EQUAL_FATAL(util_thread_start(&st, pool_shutter_main, &sh), 0);
  util_sleep_ms(100);
  int early = atomic_load(&sh.returned);
  pools_gate_open(&t->gate);
  util_thread_join(&st, POOLS_WAIT_MS, "stop (busy pool)");
  CU_ASSERT_EQUAL(early, 0);
  CU_ASSERT_EQUAL(sh.rc, 0);
  CU_ASSERT_EQUAL(sh.hooks_done_then, n);
  CU_ASSERT_EQUAL(sh.threads_then, 0);
  CU_ASSERT_EQUAL(row->stop(t->p), TAXI_ESTOPPED);
  if (j >= 0) {
    util_thread_join(&t->th[j], POOLS_WAIT_MS, "taxi_lf_join after shutdown");
    CU_ASSERT_EQUAL(t->join_rc[j], TAXI_ESTOPPED);
  }
  for (int i = 0; i < n; i++)
    CU_ASSERT_EQUAL(atomic_load(&t->conn[i].inputs), 1);
  if (queued) {
    for (int i = n; i < n + Q; i++)
      CU_ASSERT_EQUAL(atomic_load(&t->conn[i].inputs), 0);
    CU_ASSERT_EQUAL(pool_counts(t).events, (uint64_t)n);
    CU_ASSERT_EQUAL(pool_destroy_bounded(t), 0);
    /* Back with the reactor: reported again. */
    taxi_time_t start = taxi_now();
    while (pool_total_inputs(t) < n + Q &&
           util_elapsed_ms(start) < POOLS_WAIT_MS)
      CU_ASSERT(taxi_reactor_handle_events(t->r, 50) >= 0);
    for (int i = n; i < n + Q; i++)
      CU_ASSERT_EQUAL(atomic_load(&t->conn[i].inputs), 1);
  }
  pool_free(t);
}

/* Every thread waiting for events: stop wakes them all. */
void pool_shutdown_idle(const pool_row_t *row, const void *opts) {
  pool_test_t *t = pool_new(row);
  pool_conns(t, 2, &pool_count_ops);
  pool_start(t, opts, 4);
  int j = row->add_app_thread ? row->add_app_thread(t, -1, 3) : -1;
  CU_ASSERT(pool_wait_idle(t, j >= 0 ? 5 : 4));
  CU_ASSERT_EQUAL(pool_stop_bounded(t, "stop (idle pool)"), 0);
  pool_counts_t c = pool_counts(t);
  CU_ASSERT_EQUAL(c.threads, 0);
  CU_ASSERT(row->idle(&c, t->p, 0)); /* LF: no leader, no follower */
  if (j >= 0) {
    util_thread_join(&t->th[j], POOLS_WAIT_MS,
                     "taxi_lf_join(p, -1, 3) after shutdown");
    CU_ASSERT_EQUAL(t->join_rc[j], TAXI_ESTOPPED);
  }
  CU_ASSERT_EQUAL(row->stop(t->p), TAXI_ESTOPPED);
  pool_free(t);
}

/* From a hook: stop returns 0 once every other thread has left, a second
 * stop TAXI_ESTOPPED, destroy is refused (it would wait for itself). */
static int pool_shutdown_input(taxi_handler_t *h, taxi_handle_t fd,
                               unsigned ev) {
  pool_conn_t *c = POOL_CONN(h);
  pool_test_t *t = c->t;
  (void)ev;
  pools_drain(fd);
  if (atomic_fetch_add(&t->hook_calls, 1) == 0) {
    atomic_store(&t->rc_shutdown, t->row->stop(t->p));
    pool_counts_t s;
    memset(&s, 0, sizeof s);
    atomic_store(&t->rc_stats, t->row->counts(t->p, &s));
    atomic_store(&t->threads_after_stop, (int)s.threads);
    atomic_store(&t->rc_shutdown2, t->row->stop(t->p));
    atomic_store(&t->rc_destroy, t->row->destroy(t->p));
  }
  atomic_fetch_add(&c->inputs, 1);
  return 0;
}

static const taxi_handler_ops_t pool_shutdown_ops = {
    .input = pool_shutdown_input, .close = pool_conn_close};

/* The pool ends; destroy from the main thread then works and gives the
 * reactor back to single-threaded dispatch. */
void pool_shutdown_from_hook(const pool_row_t *row) {
  pool_test_t *t = pool_new(row);
  pool_conns(t, 1, &pool_shutdown_ops);
  pool_start(t, NULL, 3);
  int j = row->add_app_thread ? row->add_app_thread(t, -1, 0) : -1;
  CU_ASSERT(pool_wait_idle(t, j >= 0 ? 4 : 3));
  CU_ASSERT_EQUAL(util_write_byte(t->conn[0].sv[1]), 1);
  CU_ASSERT(pools_wait_count(&t->conn[0].inputs, 1, POOLS_WAIT_MS));
  CU_ASSERT_EQUAL(atomic_load(&t->rc_shutdown), 0);
  CU_ASSERT_EQUAL(atomic_load(&t->rc_stats), 0);
  /* Only the calling thread was left. */
  CU_ASSERT_EQUAL(atomic_load(&t->threads_after_stop), 1);
  CU_ASSERT_EQUAL(atomic_load(&t->rc_shutdown2), TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(atomic_load(&t->rc_destroy), TAXI_EBUSY);
  if (j >= 0) {
    util_thread_join(&t->th[j], POOLS_WAIT_MS, "taxi_lf_join after shutdown");
    CU_ASSERT_EQUAL(t->join_rc[j], TAXI_ESTOPPED);
  }
  CU_ASSERT(pool_wait_threads(t, 0));
  CU_ASSERT_EQUAL(row->stop(t->p), TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(pool_destroy_bounded(t), 0);
  CU_ASSERT(taxi_reactor_handle_events(t->r, 0) >= 0);
  pool_free(t);
}

typedef struct pool_destroyer {
  pool_test_t *t;
  void *p;
  atomic_int returned;
  int rc;
  int hook_done_then;
} pool_destroyer_t;

static void pool_destroyer_main(void *arg) {
  pool_destroyer_t *d = arg;
  d->rc = d->t->row->destroy(d->p);
  d->hook_done_then = atomic_load(&d->t->conn[0].hook_done);
  atomic_store(&d->returned, 1);
}

/* destroy on a running pool with a thread busy in a hook stops it, waits
 * for the hook, joins the pool's threads (an application thread's join
 * returns); events not dispatched stay with the reactor. */
void pool_destroy_running(const pool_row_t *row) {
  pool_test_t *t = pool_new(row);
  pool_conns(t, 2, &pool_block_ops);
  pool_start(t, NULL, 3);
  int j = row->add_app_thread ? row->add_app_thread(t, -1, 0) : -1;
  CU_ASSERT(pool_wait_idle(t, j >= 0 ? 4 : 3));
  util_write_byte(t->conn[0].sv[1]);
  CU_ASSERT(pools_wait_count(&t->gate.entered, 1, POOLS_WAIT_MS));
  static pool_destroyer_t d;
  d.t = t;
  d.p = t->p;
  d.rc = 1;
  atomic_init(&d.returned, 0);
  util_thread_t dt;
  CU_ASSERT_EQUAL_FATAL(util_thread_start(&dt, pool_destroyer_main, &d), 0);
  util_sleep_ms(50);
  int early = atomic_load(&d.returned);
  pools_gate_open(&t->gate);
  util_thread_join(&dt, POOLS_WAIT_MS, "destroy (busy pool)");
  t->p = NULL;
  CU_ASSERT_EQUAL(early, 0);
  CU_ASSERT_EQUAL(d.rc, 0);
  CU_ASSERT_EQUAL(d.hook_done_then, 1);
  if (j >= 0) {
    util_thread_join(&t->th[j], POOLS_WAIT_MS, "taxi_lf_join after destroy");
    CU_ASSERT_EQUAL(t->join_rc[j], TAXI_ESTOPPED);
  }
  CU_ASSERT_EQUAL(atomic_load(&t->conn[0].hook_done), 1);
  /* The other handle's event is still there for the reactor. */
  util_write_byte(t->conn[1].sv[1]);
  CU_ASSERT(taxi_reactor_handle_events(t->r, POOLS_WAIT_MS) >= 1);
  CU_ASSERT_EQUAL(atomic_load(&t->conn[1].inputs), 1);
  pool_free(t);
}

/* ---- the Leader/Followers suite ------------------------------------------ */

static void test_lf_shutdown_busy(void) { pool_shutdown_busy(&pool_row_lf, 0); }

static void test_lf_shutdown_idle(void) {
  pool_shutdown_idle(&pool_row_lf, NULL);
}

/* Every promotion order, and many leaders where the backend can. */
static void test_lf_shutdown_idle_every_order(void) {
  static const struct {
    taxi_promotion_t promotion;
    taxi_leaders_t leaders;
  } orders[] = {
      {TAXI_PROMOTE_FIFO, TAXI_LEADERS_ONE},
      {TAXI_PROMOTE_PRIORITY, TAXI_LEADERS_ONE},
      {TAXI_PROMOTE_SHARED, TAXI_LEADERS_ONE},
      {TAXI_PROMOTE_LIFO, TAXI_LEADERS_MANY},
  };
  for (size_t i = 0; i < sizeof orders / sizeof orders[0]; i++) {
    if (orders[i].leaders == TAXI_LEADERS_MANY) {
      taxi_reactor_t *r = pools_reactor();
      int many = pools_can_many_leaders(r);
      CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
      if (!many) {
        printf("(not applicable: no TAXI_CAP_MULTI_WAIT|ONESHOT) ");
        continue;
      }
    }
    taxi_lf_options_t o = TAXI_LF_OPTIONS_INIT;
    o.promotion = orders[i].promotion;
    o.leaders = orders[i].leaders;
    pool_shutdown_idle(&pool_row_lf, &o);
  }
}

static void test_lf_shutdown_from_hook(void) {
  pool_shutdown_from_hook(&pool_row_lf);
}

static void test_lf_destroy_running(void) {
  pool_destroy_running(&pool_row_lf);
}

static CU_TestInfo lf_shutdown_tests[] = {
    {"shutdown while every thread is busy", test_lf_shutdown_busy},
    {"shutdown of an idle pool", test_lf_shutdown_idle},
    {"shutdown of an idle pool, every order",
     test_lf_shutdown_idle_every_order},
    {"shutdown from a hook", test_lf_shutdown_from_hook},
    {"destroy of a running pool", test_lf_destroy_running},
    CU_TEST_INFO_NULL,
};
const taxi_test_suite_t pools_suite_lf_shutdown = {"lf shutdown",
                                                   lf_shutdown_tests, 60, NULL};
