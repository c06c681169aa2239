/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/pools/lf_shutdown.c - the Leader/Followers pool's shutdown: busy,
 * idle, from a hook, and destroy of a running pool.
 */
#define _GNU_SOURCE 1

#include "lf_helpers.h"

/* ---- shutdown ------------------------------------------------------------ */

typedef struct lf_shutter {
  taxi_lf_pool_t *p;
  lf_test_t *t;
  atomic_int returned;
  int rc;
  int hooks_done_then; /* hooks that had returned when shutdown returned */
  unsigned threads_then;
} lf_shutter_t;

static void lf_shutter_main(void *arg) {
  lf_shutter_t *s = arg;
  s->rc = taxi_lf_stop(s->p);
  int done = 0;
  for (int i = 0; i < s->t->nconns; i++)
    done += atomic_load(&s->t->conn[i].hook_done);
  s->hooks_done_then = done;
  taxi_lf_stats_t st;
  memset(&st, 0, sizeof st);
  taxi_lf_stats(s->p, &st);
  s->threads_then = st.threads;
  atomic_store(&s->returned, 1);
}

/* Every thread blocked in a hook: shutdown from another thread returns
 * only after the hooks were released and the threads left. */
static void test_shutdown_busy(void) {
  enum { N = 4 };
  lf_test_t *t = lf_new();
  lf_conns(t, N, &lf_block_ops);
  lf_create(t, TAXI_PROMOTE_LIFO, TAXI_LEADERS_ONE);
  CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, 3), 0);
  int j = lf_start_joiner(t, LF_JOIN_MS, 0);
  CU_ASSERT(lf_wait_shape(t->p, 4, -1, -1));
  for (int i = 0; i < N; i++) util_write_byte(t->conn[i].sv[1]);
  CU_ASSERT(pools_wait_count(&t->gate.entered, N, POOLS_WAIT_MS));
  static lf_shutter_t sh;
  memset(&sh, 0, sizeof sh);
  sh.p = t->p;
  sh.t = t;
  atomic_init(&sh.returned, 0);
  util_thread_t st;
  CU_ASSERT_EQUAL_FATAL(util_thread_start(&st, lf_shutter_main, &sh), 0);
  util_sleep_ms(100);
  int early = atomic_load(&sh.returned);
  pools_gate_open(&t->gate);
  util_thread_join(&st, POOLS_WAIT_MS, "taxi_lf_stop (busy pool)");
  CU_ASSERT_EQUAL(early, 0);
  CU_ASSERT_EQUAL(sh.rc, 0);
  CU_ASSERT_EQUAL(sh.hooks_done_then, N);
  CU_ASSERT_EQUAL(sh.threads_then, 0);
  util_thread_join(&t->th[j], POOLS_WAIT_MS, "taxi_lf_join after shutdown");
  CU_ASSERT_EQUAL(t->join_rc[j], TAXI_ESTOPPED);
  for (int i = 0; i < N; i++)
    CU_ASSERT_EQUAL(atomic_load(&t->conn[i].inputs), 1);
  lf_free(t);
}

/* Every thread leading or following: shutdown wakes them all. */
static void lf_shutdown_idle(taxi_promotion_t promotion,
                             taxi_leaders_t leaders) {
  lf_test_t *t = lf_new();
  lf_conns(t, 2, &lf_count_ops);
  if (leaders == TAXI_LEADERS_MANY && !pools_can_many_leaders(t->r)) {
    printf("(not applicable: no TAXI_CAP_MULTI_WAIT|ONESHOT) ");
    lf_free(t);
    return;
  }
  lf_create(t, promotion, leaders);
  CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, 4), 0);
  int j = lf_start_joiner(t, -1, 3);
  CU_ASSERT(lf_wait_idle(t->p, 5));
  CU_ASSERT_EQUAL(util_bounded(lf_do_shutdown, t->p, POOLS_WAIT_MS,
                               "taxi_lf_stop (idle pool)"),
                  0);
  taxi_lf_stats_t s = lf_stats(t->p);
  CU_ASSERT_EQUAL(s.threads, 0);
  CU_ASSERT_EQUAL(s.leaders, 0);
  CU_ASSERT_EQUAL(s.followers, 0);
  util_thread_join(&t->th[j], POOLS_WAIT_MS,
                   "taxi_lf_join(p, -1, 3) after shutdown");
  CU_ASSERT_EQUAL(t->join_rc[j], TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(taxi_lf_stop(t->p), TAXI_ESTOPPED);
  lf_free(t);
}

static void test_shutdown_idle(void) {
  lf_shutdown_idle(TAXI_PROMOTE_LIFO, TAXI_LEADERS_ONE);
}

static void test_shutdown_idle_every_order(void) {
  lf_shutdown_idle(TAXI_PROMOTE_FIFO, TAXI_LEADERS_ONE);
  lf_shutdown_idle(TAXI_PROMOTE_PRIORITY, TAXI_LEADERS_ONE);
  lf_shutdown_idle(TAXI_PROMOTE_SHARED, TAXI_LEADERS_ONE);
  lf_shutdown_idle(TAXI_PROMOTE_LIFO, TAXI_LEADERS_MANY);
}

/* Shut down from a hook: it returns 0 once every other thread has left;
 * the pool ends; destroy from the main thread works. */
static int lf_shutdown_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  lf_conn_t *c = LF_CONN(h);
  lf_test_t *t = c->t;
  (void)ev;
  pools_drain(fd);
  if (atomic_fetch_add(&t->hook_calls, 1) == 0) {
    atomic_store(&t->rc_shutdown, taxi_lf_stop(t->p));
    taxi_lf_stats_t s;
    memset(&s, 0, sizeof s);
    atomic_store(&t->rc_stats, taxi_lf_stats(t->p, &s));
    atomic_store(&t->threads_after_shutdown, (int)s.threads);
    atomic_store(&t->rc_join, taxi_lf_stop(t->p));
  }
  atomic_fetch_add(&c->inputs, 1);
  return 0;
}

static const taxi_handler_ops_t lf_shutdown_ops = {.input = lf_shutdown_input,
                                                   .close = lf_conn_close};

static void test_shutdown_from_hook(void) {
  lf_test_t *t = lf_new();
  lf_conns(t, 1, &lf_shutdown_ops);
  lf_create(t, TAXI_PROMOTE_LIFO, TAXI_LEADERS_ONE);
  CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, 3), 0);
  int j = lf_start_joiner(t, -1, 0);
  CU_ASSERT(lf_wait_idle(t->p, 4));
  CU_ASSERT_EQUAL(util_write_byte(t->conn[0].sv[1]), 1);
  CU_ASSERT(pools_wait_count(&t->conn[0].inputs, 1, POOLS_WAIT_MS));
  CU_ASSERT_EQUAL(atomic_load(&t->rc_shutdown), 0);
  CU_ASSERT_EQUAL(atomic_load(&t->rc_stats), 0);
  /* Only the calling thread was left. */
  CU_ASSERT_EQUAL(atomic_load(&t->threads_after_shutdown), 1);
  CU_ASSERT_EQUAL(atomic_load(&t->rc_join), TAXI_ESTOPPED);
  util_thread_join(&t->th[j], POOLS_WAIT_MS, "taxi_lf_join after shutdown");
  CU_ASSERT_EQUAL(t->join_rc[j], TAXI_ESTOPPED);
  taxi_lf_stats_t s;
  CU_ASSERT(lf_wait_shape(t->p, 0, 0, 0));
  s = lf_stats(t->p);
  CU_ASSERT_EQUAL(s.threads, 0);
  CU_ASSERT_EQUAL(taxi_lf_stop(t->p), TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(
      util_bounded(lf_do_destroy, t->p, POOLS_WAIT_MS, "taxi_lf_destroy"), 0);
  t->p = NULL;
  /* The reactor is given back to single-threaded dispatch. */
  CU_ASSERT(taxi_reactor_handle_events(t->r, 0) >= 0);
  lf_free(t);
}

typedef struct lf_destroyer {
  taxi_lf_pool_t *p;
  lf_conn_t *c;
  atomic_int returned;
  int rc;
  int hook_done_then;
} lf_destroyer_t;

static void lf_destroyer_main(void *arg) {
  lf_destroyer_t *d = arg;
  d->rc = taxi_lf_destroy(d->p);
  d->hook_done_then = atomic_load(&d->c->hook_done);
  atomic_store(&d->returned, 1);
}

/* destroy on a running pool with a thread busy in a hook shuts it down,
 * waits for the hook, joins the spawned threads; an application thread's
 * join returns 0; events not dispatched stay with the reactor. */
static void test_destroy_running(void) {
  lf_test_t *t = lf_new();
  lf_conns(t, 2, &lf_block_ops);
  lf_create(t, TAXI_PROMOTE_LIFO, TAXI_LEADERS_ONE);
  CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, 3), 0);
  int j = lf_start_joiner(t, -1, 0);
  CU_ASSERT(lf_wait_idle(t->p, 4));
  util_write_byte(t->conn[0].sv[1]);
  CU_ASSERT(pools_wait_count(&t->gate.entered, 1, POOLS_WAIT_MS));
  static lf_destroyer_t d;
  d.p = t->p;
  d.c = &t->conn[0];
  d.rc = 1;
  atomic_init(&d.returned, 0);
  util_thread_t dt;
  CU_ASSERT_EQUAL_FATAL(util_thread_start(&dt, lf_destroyer_main, &d), 0);
  util_sleep_ms(50);
  int early = atomic_load(&d.returned);
  pools_gate_open(&t->gate);
  util_thread_join(&dt, POOLS_WAIT_MS, "taxi_lf_destroy (busy pool)");
  t->p = NULL;
  CU_ASSERT_EQUAL(early, 0);
  CU_ASSERT_EQUAL(d.rc, 0);
  CU_ASSERT_EQUAL(d.hook_done_then, 1);
  util_thread_join(&t->th[j], POOLS_WAIT_MS, "taxi_lf_join after destroy");
  CU_ASSERT_EQUAL(t->join_rc[j], TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(atomic_load(&t->conn[0].hook_done), 1);
  /* The other handle's event is still there for the reactor. */
  util_write_byte(t->conn[1].sv[1]);
  CU_ASSERT(taxi_reactor_handle_events(t->r, POOLS_WAIT_MS) >= 1);
  CU_ASSERT_EQUAL(atomic_load(&t->conn[1].inputs), 1);
  lf_free(t);
}

static CU_TestInfo lf_shutdown_tests[] = {
    {"shutdown while every thread is busy", test_shutdown_busy},
    {"shutdown of an idle pool", test_shutdown_idle},
    {"shutdown of an idle pool, every order", test_shutdown_idle_every_order},
    {"shutdown from a hook", test_shutdown_from_hook},
    {"destroy of a running pool", test_destroy_running},
    CU_TEST_INFO_NULL,
};
const taxi_test_suite_t pools_suite_lf_shutdown = {"lf shutdown",
                                                   lf_shutdown_tests, 60, NULL};
