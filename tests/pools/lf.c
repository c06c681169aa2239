/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/pools/lf.c - the Leader/Followers pool (taxi/lf.h): dispatch by
 * spawned and joined threads, join's time limit, the promotion orders,
 * one thread per handle at a time, multiple leaders, events taken from an
 * earlier wait; and the "lf" suite, with the tests of lf_pool.c.
 *
 * The other themes: lf_pool.c, lf_bad_input.c; the cases both pools share
 * (shutdown, bad input, allocations, one thread per handle) are written
 * once over the table of pools (pool_fixture.h).
 * Hooks that must stay in a thread block on a gate (pools_gate_t) that the
 * test opens; every wait is bounded (see suites.h).
 */
#define _GNU_SOURCE 1

#include "pool_fixture.h"

static int lf_pred_leaders_ge(const taxi_lf_stats_t *s, void *arg) {
  return s->leaders >= *(const unsigned *)arg;
}

static const taxi_handler_ops_t lf_order_ops = {.input = lf_order_input,
                                                .close = pool_conn_close};

/* ---- dispatch by spawned and joined threads ------------------------------ */

/* Three spawned threads and an application thread joined with a time limit,
 * at the same time: every event is dispatched, by pool threads only, and
 * the application thread's join returns 0 at shutdown. */
static void test_spawn_and_join(void) {
  enum { CONNS = 8, ROUNDS = 200 };
  pool_test_t *t = pool_new(&pool_row_lf);
  pool_conns(t, CONNS, &pool_count_ops);
  lf_create(t, TAXI_PROMOTE_LIFO, TAXI_LEADERS_ONE);
  CU_ASSERT_EQUAL(taxi_lf_current_thread(t->p), -1);
  CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, 3), 0);
  int j = lf_start_joiner(t, LF_JOIN_MS, 0);
  CU_ASSERT(lf_wait_shape(t->p, 4, -1, -1));
  int ok = 1;
  for (int round = 0; round < ROUNDS && ok; round++) {
    for (int i = 0; i < CONNS; i++)
      CU_ASSERT_EQUAL(util_write_byte(t->conn[i].sv[1]), 1);
    ok = pool_wait_bytes(t, (long)CONNS * (round + 1));
  }
  CU_ASSERT(ok);
  CU_ASSERT_EQUAL(pool_total_bytes(t), (long)CONNS * ROUNDS);
  CU_ASSERT_EQUAL(atomic_load(&t->bad_thread), 0);
  CU_ASSERT_EQUAL(taxi_lf_current_thread(t->p), -1);

  taxi_lf_thread_stats_t ts[8];
  memset(ts, 0, sizeof ts);
  int n = taxi_lf_thread_stats(t->p, ts, 8);
  CU_ASSERT_EQUAL(n, 4);
  int spawned = 0, joined = 0;
  for (int i = 0; i < n && i < 8; i++) {
    CU_ASSERT_EQUAL(ts[i].id, (unsigned)i);
    CU_ASSERT_EQUAL(ts[i].active, 1);
    if (ts[i].spawned)
      spawned++;
    else
      joined++;
  }
  CU_ASSERT_EQUAL(spawned, 3);
  CU_ASSERT_EQUAL(joined, 1);
  /* Every hook ran in a pool thread, known by its id. */
  uint64_t seen = atomic_load(&t->seen);
  CU_ASSERT(seen != 0);
  CU_ASSERT_EQUAL(seen & ~0xfull, 0);

  CU_ASSERT_EQUAL(
      util_bounded(lf_do_shutdown, t->p, POOLS_WAIT_MS, "taxi_lf_stop"), 0);
  util_thread_join(&t->th[j], POOLS_WAIT_MS, "taxi_lf_join after shutdown");
  CU_ASSERT_EQUAL(t->join_rc[j], TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(lf_stats(t->p).threads, 0);
  pool_free(t);
}

/* join with a time limit and nothing to do returns TAXI_ETIMEDOUT, as the
 * only thread (leading) and as a follower behind spawned threads; the
 * thread has left when it returns. */
static void test_join_timeout(void) {
  pool_test_t *t = pool_new(&pool_row_lf);
  pool_conns(t, 1, &pool_count_ops);
  lf_create(t, TAXI_PROMOTE_LIFO, TAXI_LEADERS_ONE);
  int a = lf_start_joiner(t, 50, 0);
  util_thread_join(&t->th[a], POOLS_WAIT_MS, "taxi_lf_join(p, 50, 0)");
  CU_ASSERT_EQUAL(t->join_rc[a], TAXI_ETIMEDOUT);
  CU_ASSERT_EQUAL(lf_stats(t->p).threads, 0);

  CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, 2), 0);
  CU_ASSERT(lf_wait_idle(t->p, 2));
  int b = lf_start_joiner(t, 50, 0);
  util_thread_join(&t->th[b], POOLS_WAIT_MS, "taxi_lf_join(p, 50, 0)");
  CU_ASSERT_EQUAL(t->join_rc[b], TAXI_ETIMEDOUT);
  CU_ASSERT_EQUAL(lf_stats(t->p).threads, 2);

  /* The pool still works. */
  CU_ASSERT_EQUAL(util_write_byte(t->conn[0].sv[1]), 1);
  CU_ASSERT(pool_wait_bytes(t, 1));
  pool_free(t);
}

/* A leader whose time is up leaves, and the follower behind it goes on
 * dispatching. */
static void test_join_timeout_leader_hands_over(void) {
  pool_test_t *t = pool_new(&pool_row_lf);
  pool_conns(t, 1, &pool_count_ops);
  lf_create(t, TAXI_PROMOTE_LIFO, TAXI_LEADERS_ONE);
  int a = lf_start_joiner(t, 500, 0);
  CU_ASSERT(lf_wait_shape(t->p, 1, 1, 0));
  int b = lf_start_joiner(t, LF_JOIN_MS, 0);
  util_thread_join(&t->th[a], POOLS_WAIT_MS, "taxi_lf_join(p, 500, 0)");
  CU_ASSERT_EQUAL(t->join_rc[a], TAXI_ETIMEDOUT);
  CU_ASSERT(lf_wait_shape(t->p, 1, 1, 0));
  CU_ASSERT_EQUAL(util_write_byte(t->conn[0].sv[1]), 1);
  CU_ASSERT(pool_wait_bytes(t, 1));
  /* Run by the second thread (id 1), the only one left. */
  CU_ASSERT_EQUAL(atomic_load(&t->seen), 1ull << 1);
  CU_ASSERT_EQUAL(
      util_bounded(lf_do_shutdown, t->p, POOLS_WAIT_MS, "taxi_lf_stop"), 0);
  util_thread_join(&t->th[b], POOLS_WAIT_MS, "taxi_lf_join after shutdown");
  CU_ASSERT_EQUAL(t->join_rc[b], TAXI_ESTOPPED);
  pool_free(t);
}

/* After shutdown, join, spawn and shrink give TAXI_ESTOPPED (join returns
 * at once, whatever its time limit); stats still answer. */
static void test_join_after_shutdown(void) {
  pool_test_t *t = pool_new(&pool_row_lf);
  lf_create(t, TAXI_PROMOTE_LIFO, TAXI_LEADERS_ONE);
  CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, 1), 0);
  CU_ASSERT_EQUAL(
      util_bounded(lf_do_shutdown, t->p, POOLS_WAIT_MS, "taxi_lf_stop"), 0);
  int a = lf_start_joiner(t, 0, 0);
  int b = lf_start_joiner(t, -1, 0);
  util_thread_join(&t->th[a], POOLS_WAIT_MS, "taxi_lf_join after shutdown");
  util_thread_join(&t->th[b], POOLS_WAIT_MS,
                   "taxi_lf_join(p, -1, 0) after shutdown");
  CU_ASSERT_EQUAL(t->join_rc[a], TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(t->join_rc[b], TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, 1), TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(taxi_lf_shrink(t->p, 1), TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(lf_stats(t->p).threads, 0);
  pool_free(t);
}

/* ---- promotion order ----------------------------------------------------- */

/*
 * Application threads T0..T3 join one after another, each only once the
 * stats show the one before it waiting (T0 leading, then T1, T2, T3
 * following).  One event at a time: its hook records which pool thread runs
 * it and blocks, so a processing thread never rejoins during the test.  The
 * order in which the threads take the four events is the promotion order.
 */
static void lf_promotion_order(taxi_promotion_t promotion, const int prio[4],
                               const int expect[4]) {
  pool_test_t *t = pool_new(&pool_row_lf);
  pool_conns(t, 4, &lf_order_ops);
  lf_create(t, promotion, TAXI_LEADERS_ONE);
  int ok = 1;
  lf_start_joiner(t, LF_JOIN_MS, prio[0]);
  ok = ok && lf_wait_shape(t->p, 1, 1, 0);
  for (int i = 1; i < 4 && ok; i++) {
    lf_start_joiner(t, LF_JOIN_MS, prio[i]);
    ok = lf_wait_shape(t->p, i + 1, 1, i);
  }
  CU_ASSERT(ok);
  uint64_t promotions = lf_stats(t->p).promotions;
  for (int k = 0; k < 4 && ok; k++) {
    CU_ASSERT_EQUAL(util_write_byte(t->conn[k].sv[1]), 1);
    ok = pools_wait_count(&t->gate.entered, k + 1, POOLS_WAIT_MS);
    if (!ok) printf("\n    event %d was not taken\n", k);
    /* A new leader is in place (and one follower fewer) before the next. */
    if (ok && k < 3) ok = lf_wait_shape(t->p, 4, 1, 2 - k);
  }
  CU_ASSERT(ok);
  int got[4];
  for (int k = 0; k < 4; k++) got[k] = atomic_load(&t->thread_order[k]);
  printf("(order T%d T%d T%d T%d) ", got[0], got[1], got[2], got[3]);
  if (expect) {
    for (int k = 0; k < 4; k++) CU_ASSERT_EQUAL(got[k], expect[k]);
  } else {
    /* Any order, but each thread took exactly one event. */
    int mask = 0;
    for (int k = 0; k < 4; k++)
      if (got[k] >= 0 && got[k] < 4) mask |= 1 << got[k];
    CU_ASSERT_EQUAL(mask, 0xf);
  }
  for (int k = 0; k < 4; k++)
    CU_ASSERT_EQUAL(atomic_load(&t->conn[k].inputs), ok ? 1 : 0);
  CU_ASSERT(lf_stats(t->p).promotions >= promotions + 3);

  pools_gate_open(&t->gate);
  CU_ASSERT_EQUAL(
      util_bounded(lf_do_shutdown, t->p, POOLS_WAIT_MS, "taxi_lf_stop"), 0);
  for (int i = 0; i < t->next_thread; i++) {
    util_thread_join(&t->th[i], POOLS_WAIT_MS, "taxi_lf_join after shutdown");
    CU_ASSERT_EQUAL(t->join_rc[i], TAXI_ESTOPPED);
  }
  pool_free(t);
}

static void test_promote_lifo(void) {
  static const int prio[4] = {0, 0, 0, 0};
  static const int expect[4] = {0, 3, 2, 1};
  lf_promotion_order(TAXI_PROMOTE_LIFO, prio, expect);
}

static void test_promote_fifo(void) {
  static const int prio[4] = {0, 0, 0, 0};
  static const int expect[4] = {0, 1, 2, 3};
  lf_promotion_order(TAXI_PROMOTE_FIFO, prio, expect);
}

static void test_promote_priority(void) {
  static const int prio[4] = {0, 1, 5, 3};
  static const int expect[4] = {0, 2, 3, 1};
  lf_promotion_order(TAXI_PROMOTE_PRIORITY, prio, expect);
}

/* Equal priorities go in LIFO order. */
static void test_promote_priority_ties_lifo(void) {
  static const int prio[4] = {0, 2, 7, 2};
  static const int expect[4] = {0, 2, 3, 1};
  lf_promotion_order(TAXI_PROMOTE_PRIORITY, prio, expect);
}

static void test_promote_shared(void) {
  static const int prio[4] = {0, 0, 0, 0};
  lf_promotion_order(TAXI_PROMOTE_SHARED, prio, NULL);
}

/* ---- one thread per handle at a time ------------------------------------- */

static void test_one_thread_per_handle(void) {
  pool_one_thread_per_handle(&pool_row_lf, NULL);
}

static void test_one_thread_per_handle_many_leaders(void) {
  taxi_lf_options_t o = TAXI_LF_OPTIONS_INIT;
  o.leaders = TAXI_LEADERS_MANY;
  taxi_reactor_t *r = pools_reactor();
  if (!pools_can_many_leaders(r)) {
    taxi_lf_pool_t *p = NULL;
    CU_ASSERT_EQUAL(taxi_lf_create(&p, r, &o), TAXI_ENOTSUP);
    printf("(not applicable: no TAXI_CAP_MULTI_WAIT|ONESHOT) ");
    CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
    return;
  }
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  pool_one_thread_per_handle(&pool_row_lf, &o);
}

/* ---- multiple leaders ---------------------------------------------------- */

/* On a backend with TAXI_CAP_MULTI_WAIT and TAXI_CAP_ONESHOT, an idle pool
 * of 4 threads with TAXI_LEADERS_MANY has more than one leader; elsewhere
 * TAXI_LEADERS_MANY is refused with TAXI_ENOTSUP (and the reactor takes a
 * pool of one leader afterwards). */
static void test_multiple_leaders(void) {
  pool_test_t *t = pool_new(&pool_row_lf);
  pool_conns(t, 4, &pool_count_ops);
  taxi_lf_options_t o = TAXI_LF_OPTIONS_INIT;
  o.leaders = TAXI_LEADERS_MANY;
  if (!pools_can_many_leaders(t->r)) {
    taxi_lf_pool_t *p = NULL;
    CU_ASSERT_EQUAL(taxi_lf_create(&p, t->r, &o), TAXI_ENOTSUP);
    unsigned caps = 0;
    CU_ASSERT_EQUAL(taxi_reactor_caps(t->r, &caps), 0);
    printf("(caps %#x: ENOTSUP as documented) ", caps);
    lf_create(t, TAXI_PROMOTE_LIFO, TAXI_LEADERS_ONE);
    pool_free(t);
    return;
  }
  pool_start(t, &o, 4);
  unsigned two = 2;
  taxi_lf_stats_t s;
  int ok = pools_lf_wait(t->p, lf_pred_leaders_ge, &two, POOLS_WAIT_MS, &s);
  if (!ok)
    printf("\n    leaders never >= 2: threads %u leaders %u followers %u\n",
           s.threads, s.leaders, s.followers);
  CU_ASSERT(ok);
  CU_ASSERT(s.leaders <= s.threads);
  /* And they dispatch. */
  for (int i = 0; i < 4; i++)
    CU_ASSERT_EQUAL(util_write_byte(t->conn[i].sv[1]), 1);
  CU_ASSERT(pool_wait_bytes(t, 4));
  pool_free(t);
}

/* max_leaders bounds the threads waiting at once. */
static void test_max_leaders(void) {
  pool_test_t *t = pool_new(&pool_row_lf);
  pool_conns(t, 4, &pool_count_ops);
  if (!pools_can_many_leaders(t->r)) {
    printf("(not applicable: no TAXI_CAP_MULTI_WAIT|ONESHOT) ");
    pool_free(t);
    return;
  }
  taxi_lf_options_t o = TAXI_LF_OPTIONS_INIT;
  o.leaders = TAXI_LEADERS_MANY;
  o.max_leaders = 2;
  pool_start(t, &o, 5);
  CU_ASSERT(lf_wait_idle(t->p, 5));
  unsigned max = 0;
  for (int round = 0; round < 50; round++) {
    for (int i = 0; i < 4; i++) util_write_byte(t->conn[i].sv[1]);
    for (int k = 0; k < 10; k++) {
      taxi_lf_stats_t s = lf_stats(t->p);
      if (s.leaders > max) max = s.leaders;
    }
  }
  CU_ASSERT(pool_wait_bytes(t, 200));
  /* Idle: two lead, three follow. */
  CU_ASSERT(lf_wait_shape(t->p, 5, 2, 3));
  printf("(most leaders seen %u) ", max);
  CU_ASSERT(max <= 2);
  pool_free(t);
}

/* ---- events from an earlier wait ----------------------------------------- */

/* 64 handles ready before the pool starts: one wait reports many, and the
 * threads take the rest without another system call. */
static void test_pending_taken_without_wait(void) {
  enum { N = 64 };
  pool_test_t *t = pool_new(&pool_row_lf);
  pool_conns(t, N, &pool_count_ops);
  for (int i = 0; i < N; i++)
    CU_ASSERT_EQUAL(util_write_byte(t->conn[i].sv[1]), 1);
  lf_create(t, TAXI_PROMOTE_LIFO, TAXI_LEADERS_ONE);
  CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, 4), 0);
  CU_ASSERT(pool_wait_bytes(t, N));
  CU_ASSERT(lf_wait_idle(t->p, 4));
  for (int i = 0; i < N; i++)
    CU_ASSERT_EQUAL(atomic_load(&t->conn[i].inputs), 1);
  taxi_lf_stats_t s = lf_stats(t->p);
  printf("(%llu events, %llu waits, %llu from pending) ",
         (unsigned long long)s.events, (unsigned long long)s.waits,
         (unsigned long long)s.pending_taken);
  CU_ASSERT(s.pending_taken > 0);
  CU_ASSERT(s.waits < N);
  CU_ASSERT_EQUAL(s.events, N);
  pool_free(t);
}

/* Each hook's read ends in EAGAIN, and the pool re-arms the handle right
 * after, in the same thread: every re-arm succeeds the first time (no
 * transient error, nothing removed) and each round's data is delivered
 * (libkqueue copied that errno into the re-arm's receipt). */
static void test_rearm_after_eagain(void) {
  enum { N = 4, ROUNDS = 8 };
  pool_test_t *t = pool_new(&pool_row_lf);
  pool_conns(t, N, &pool_count_ops);
  lf_create(t, TAXI_PROMOTE_LIFO, TAXI_LEADERS_ONE);
  CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, 2), 0);
  int ok = 1;
  for (int round = 0; round < ROUNDS && ok; round++) {
    for (int i = 0; i < N; i++)
      CU_ASSERT_EQUAL(util_write_byte(t->conn[i].sv[1]), 1);
    ok = pool_wait_bytes(t, (long)N * (round + 1));
  }
  CU_ASSERT(ok);
  taxi_reactor_stats_t s;
  CU_ASSERT_EQUAL(taxi_reactor_stats(t->r, &s), 0);
  CU_ASSERT_EQUAL(s.transient_errors, 0);
  CU_ASSERT_EQUAL(s.rearm_removed, 0);
  CU_ASSERT_EQUAL(s.handles, N);
  pool_free(t);
}

/* ---- suites -------------------------------------------------------------- */

static CU_TestInfo lf_tests[] = {
    {"spawned and joined threads dispatch", test_spawn_and_join},
    {"join times out: TAXI_ETIMEDOUT", test_join_timeout},
    {"a leader timing out hands over", test_join_timeout_leader_hands_over},
    {"join after shutdown: TAXI_ESTOPPED", test_join_after_shutdown},
    {"promotion LIFO: T0 T3 T2 T1", test_promote_lifo},
    {"promotion FIFO: T0 T1 T2 T3", test_promote_fifo},
    {"promotion priority: T0 T2 T3 T1", test_promote_priority},
    {"promotion priority: ties in LIFO order", test_promote_priority_ties_lifo},
    {"promotion shared: each thread once", test_promote_shared},
    {"one thread per handle at a time", test_one_thread_per_handle},
    {"one thread per handle, many leaders",
     test_one_thread_per_handle_many_leaders},
    {"multiple leaders (or ENOTSUP by caps)", test_multiple_leaders},
    {"max_leaders bounds the leaders", test_max_leaders},
    {"pending events taken without a wait", test_pending_taken_without_wait},
    {"re-arm after a read ended in EAGAIN: every round delivered",
     test_rearm_after_eagain},
    {"grow and shrink while running", test_grow_and_shrink},
    {"shrink lets its threads go", test_shrink_releases_threads},
    {"remove while dispatched: close after hook", test_remove_while_dispatched},
    {"remove while the hook removes too", test_remove_while_hook_removes},
    {"remove many while busy: close once each", test_remove_many_while_busy},
    {"timers run in pool threads", test_timers_in_pool},
    {"notifications run in pool threads", test_notifications_in_pool},
    {"counters add up", test_counters},
    CU_TEST_INFO_NULL,
};

const taxi_test_suite_t pools_suite_lf = {"lf", lf_tests, 180, NULL};
