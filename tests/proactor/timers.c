/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/proactor/timers.c - timers and posts.
 *
 * Timers complete in order of deadline and never before it (a deadline is
 * a lower bound, so that is not a timing assertion); a cancelled timer
 * completes once with TAXI_ECANCELED; a post from another thread runs once
 * in the dispatching thread; a new earlier deadline or a post wakes a
 * dispatcher blocked without a time limit.
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct tm_timer {
  pt_done_t d;
  taxi_time_t started, armed, fired; /* armed: when the call returned */
  taxi_time_t delay;
} tm_timer_t;

static void tm_on_timer(taxi_op_t *op, int status, size_t bytes, void *act) {
  tm_timer_t *t = act;
  t->fired = taxi_now();
  pt_on_done(op, status, bytes, &t->d);
}

/* Timers started out of order complete in order of deadline, each with
 * status 0 and 0 bytes, none before its deadline. */
static void test_order_by_deadline(void) {
  taxi_proactor_t *p = pt_proactor();
  enum { N = 6 };
  static const int ms[N] = {50, 10, 30, 0, 20, 40};
  static taxi_op_t ops[N];
  static tm_timer_t t[N];
  for (int i = 0; i < N; i++) {
    taxi_op_init(&ops[i]);
    pt_done_init(&t[i].d);
    t[i].delay = ms[i] * TAXI_NSEC_PER_MSEC;
    t[i].started = taxi_now();
    CU_ASSERT_EQUAL_FATAL(
        taxi_proactor_timer(p, &ops[i], t[i].delay, tm_on_timer, &t[i]), 0);
    t[i].armed = taxi_now();
    CU_ASSERT_EQUAL(taxi_op_in_flight(&ops[i]), 1);
  }
  for (int i = 0; i < N; i++) CU_ASSERT(pt_run_done(p, &t[i].d, 1));
  pt_settle(p, 10);
  for (int i = 0; i < N; i++) {
    CU_ASSERT_EQUAL(atomic_load(&t[i].d.calls), 1);
    CU_ASSERT_EQUAL(t[i].d.status, 0);
    CU_ASSERT_EQUAL(t[i].d.bytes, 0);
    CU_ASSERT_EQUAL(t[i].d.kind, TAXI_OP_TIMER);
    CU_ASSERT_EQUAL(taxi_op_in_flight(&ops[i]), 0);
    CU_ASSERT(t[i].fired - t[i].started >= t[i].delay);
    /* In order of deadline.  Each deadline lies between the call's start
     * and its return plus the delay (a loaded machine may put more time
     * between two calls than between two delays): only deadlines that
     * are ordered whatever the clock read inside the call are compared. */
    for (int j = 0; j < N; j++)
      if (t[j].armed + t[j].delay < t[i].started + t[i].delay)
        CU_ASSERT(t[j].d.seq < t[i].d.seq);
  }
  pt_destroy(p);
}

/* A zero delay completes at the next dispatch. */
static void test_zero_delay(void) {
  taxi_proactor_t *p = pt_proactor();
  taxi_op_t op;
  taxi_op_init(&op);
  pt_done_t d;
  pt_done_init(&d);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_timer(p, &op, 0, pt_on_done, &d), 0);
  CU_ASSERT_EQUAL(atomic_load(&d.calls), 0); /* not inside the call */
  int rounds = 0;
  while (atomic_load(&d.calls) == 0 && rounds++ < 1000)
    CU_ASSERT(taxi_proactor_handle_events(p, 0) >= 0);
  CU_ASSERT_EQUAL(atomic_load(&d.calls), 1);
  CU_ASSERT_EQUAL(d.status, 0);
  CU_ASSERT_EQUAL(d.kind, TAXI_OP_TIMER);
  pt_settle(p, 10);
  CU_ASSERT_EQUAL(atomic_load(&d.calls), 1);
  pt_destroy(p);
}

/* A cancelled timer completes once with TAXI_ECANCELED; cancelling again is
 * TAXI_ENOENT; the other timers are unaffected. */
static void test_cancel_timers(void) {
  taxi_proactor_t *p = pt_proactor();
  enum { N = 10 };
  static taxi_op_t ops[N];
  static pt_done_t d[N];
  for (int i = 0; i < N; i++) {
    taxi_op_init(&ops[i]);
    pt_done_init(&d[i]);
    taxi_time_t delay = i % 3 == 0 ? 3600 * TAXI_NSEC_PER_SEC
                                   : (taxi_time_t)(i + 1) * TAXI_NSEC_PER_MSEC;
    CU_ASSERT_EQUAL_FATAL(
        taxi_proactor_timer(p, &ops[i], delay, pt_on_done, &d[i]), 0);
  }
  taxi_proactor_stats_t before;
  CU_ASSERT_EQUAL(taxi_proactor_stats(p, &before), 0);
  for (int i = 0; i < N; i += 3)
    CU_ASSERT_EQUAL(taxi_proactor_cancel(p, &ops[i]), 0);
  for (int i = 0; i < N; i++) CU_ASSERT(pt_run_done(p, &d[i], 1));
  pt_settle(p, 20);
  for (int i = 0; i < N; i++) {
    CU_ASSERT_EQUAL(atomic_load(&d[i].calls), 1);
    CU_ASSERT_EQUAL(d[i].status, i % 3 == 0 ? TAXI_ECANCELED : 0);
    if (i % 3 == 0)
      CU_ASSERT_EQUAL(taxi_proactor_cancel(p, &ops[i]), TAXI_ENOENT);
  }
  taxi_proactor_stats_t after;
  CU_ASSERT_EQUAL(taxi_proactor_stats(p, &after), 0);
  CU_ASSERT_EQUAL(after.cancelled - before.cancelled, 4);
  CU_ASSERT(after.completed - before.completed >= N);
  pt_destroy(p);
}

/* A handler restarts its own timer record 50 times. */
typedef struct tm_chain {
  taxi_proactor_t *p;
  atomic_int fired;
  int errors;
} tm_chain_t;

static void tm_on_chain(taxi_op_t *op, int status, size_t bytes, void *act) {
  tm_chain_t *c = act;
  (void)bytes;
  if (status != 0) c->errors++;
  if (atomic_fetch_add(&c->fired, 1) + 1 < 50 &&
      taxi_proactor_timer(c->p, op,
                          (atomic_load(&c->fired) % 2) * TAXI_NSEC_PER_MSEC,
                          tm_on_chain, c) != 0)
    c->errors++;
}

static void test_restart_from_handler(void) {
  taxi_proactor_t *p = pt_proactor();
  static tm_chain_t c;
  memset(&c, 0, sizeof c);
  c.p = p;
  taxi_op_t op;
  taxi_op_init(&op);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_timer(p, &op, 0, tm_on_chain, &c), 0);
  CU_ASSERT(pt_run_count(p, &c.fired, 50));
  pt_settle(p, 10);
  CU_ASSERT_EQUAL(atomic_load(&c.fired), 50);
  CU_ASSERT_EQUAL(c.errors, 0);
  CU_ASSERT_EQUAL(taxi_op_in_flight(&op), 0);
  pt_destroy(p);
}

/* Many timers with the same deadline all complete once. */
static void test_same_deadline(void) {
  taxi_proactor_t *p = pt_proactor();
  enum { N = 100 };
  static taxi_op_t ops[N];
  static pt_done_t d[N];
  for (int i = 0; i < N; i++) {
    taxi_op_init(&ops[i]);
    pt_done_init(&d[i]);
    CU_ASSERT_EQUAL_FATAL(
        taxi_proactor_timer(p, &ops[i], 5 * TAXI_NSEC_PER_MSEC, pt_on_done,
                            &d[i]),
        0);
  }
  for (int i = 0; i < N; i++) CU_ASSERT(pt_run_done(p, &d[i], 1));
  pt_settle(p, 10);
  for (int i = 0; i < N; i++) {
    CU_ASSERT_EQUAL(atomic_load(&d[i].calls), 1);
    CU_ASSERT_EQUAL(d[i].status, 0);
  }
  pt_destroy(p);
}

/* ---- posts and wake-ups ---------------------------------------------------
 */

enum { TM_POSTS = 1000 };
typedef struct tm_posts {
  taxi_proactor_t *p;
  taxi_op_t ops[TM_POSTS];
  pt_done_t d[TM_POSTS];
  atomic_int total;
  int rc_bad;
} tm_posts_t;

static void tm_on_post(taxi_op_t *op, int status, size_t bytes, void *act) {
  tm_posts_t *x = act;
  size_t i = (size_t)(op - x->ops);
  if (i < TM_POSTS) pt_on_done(op, status, bytes, &x->d[i]);
  atomic_fetch_add(&x->total, 1);
}

static void tm_poster(void *arg) {
  tm_posts_t *x = arg;
  for (int i = 0; i < TM_POSTS; i++) {
    if (taxi_proactor_post(x->p, &x->ops[i], tm_on_post, x) != 0) x->rc_bad++;
    if (i % 100 == 0) pt_sleep_ms(1);
  }
}

/* Posts from another thread: each runs once, in the dispatching thread,
 * with status 0 and 0 bytes. */
static void test_post_from_thread(void) {
  static tm_posts_t x;
  memset(&x, 0, sizeof x);
  x.p = pt_proactor();
  for (int i = 0; i < TM_POSTS; i++) {
    taxi_op_init(&x.ops[i]);
    pt_done_init(&x.d[i]);
  }
  pt_thread_t t;
  pt_thread_start(&t, tm_poster, &x);
  CU_ASSERT(pt_run_count(x.p, &x.total, TM_POSTS));
  pt_thread_join(&t, 1, "the posting thread");
  pt_settle(x.p, 20);
  CU_ASSERT_EQUAL(x.rc_bad, 0);
  CU_ASSERT_EQUAL(atomic_load(&x.total), TM_POSTS);
  int bad = 0;
  for (int i = 0; i < TM_POSTS; i++) {
    if (atomic_load(&x.d[i].calls) != 1 || x.d[i].status != 0 ||
        x.d[i].bytes != 0 || x.d[i].kind != TAXI_OP_POST ||
        !pthread_equal(x.d[i].thread, pthread_self()))
      bad++;
  }
  CU_ASSERT_EQUAL(bad, 0);
  pt_destroy(x.p);
}

/* A thread blocked in handle_events without a time limit is woken by a
 * timer with an earlier deadline started from another thread, and by a
 * post. */
typedef struct tm_blocked {
  taxi_proactor_t *p;
  int rc;
} tm_blocked_t;

static void tm_block_thread(void *arg) {
  tm_blocked_t *b = arg;
  b->rc = taxi_proactor_handle_events(b->p, -1);
}

static void test_wake_blocked_dispatcher(void) {
  if (pt_skip_one_thread()) return;
  taxi_proactor_t *p = pt_proactor();
  /* A far deadline, so the dispatcher's wait has one. */
  taxi_op_t far, near, post;
  taxi_op_init(&far);
  taxi_op_init(&near);
  taxi_op_init(&post);
  pt_done_t df, dn, dp;
  pt_done_init(&df);
  pt_done_init(&dn);
  pt_done_init(&dp);
  CU_ASSERT_EQUAL_FATAL(
      taxi_proactor_timer(p, &far, 3600 * TAXI_NSEC_PER_SEC, pt_on_done, &df),
      0);
  for (int round = 0; round < 2; round++) {
    tm_blocked_t b = {p, -100};
    pt_thread_t t;
    pt_thread_start(&t, tm_block_thread, &b);
    pt_sleep_ms(20); /* most likely blocked by now; either way must work */
    int rc = round == 0 ? taxi_proactor_timer(p, &near, 0, pt_on_done, &dn)
                        : taxi_proactor_post(p, &post, pt_on_done, &dp);
    CU_ASSERT_EQUAL(rc, 0);
    pt_thread_join(&t, 1, "handle_events(-1) after a new deadline / post");
    CU_ASSERT(b.rc >= 0);
    CU_ASSERT(pt_run_done(p, round == 0 ? &dn : &dp, 1));
  }
  CU_ASSERT_EQUAL(atomic_load(&dn.calls), 1);
  CU_ASSERT_EQUAL(atomic_load(&dp.calls), 1);
  CU_ASSERT_EQUAL(atomic_load(&df.calls), 0);
  CU_ASSERT_EQUAL(taxi_proactor_cancel(p, &far), 0);
  CU_ASSERT(pt_run_done(p, &df, 1));
  CU_ASSERT_EQUAL(df.status, TAXI_ECANCELED);
  pt_destroy(p);
}

static CU_TestInfo timer_tests[] = {
    {"timers complete in order of deadline, never early",
     test_order_by_deadline},
    {"zero delay completes at the next dispatch", test_zero_delay},
    {"cancel timers: TAXI_ECANCELED once, others unaffected",
     test_cancel_timers},
    {"handler restarts its timer record", test_restart_from_handler},
    {"many timers with one deadline", test_same_deadline},
    {"posts from another thread run once in the dispatcher",
     test_post_from_thread},
    {"a new deadline or a post wakes handle_events(-1)",
     test_wake_blocked_dispatcher},
    CU_TEST_INFO_NULL,
};

const taxi_test_suite_t pt_suite_timers = {"timers", timer_tests, 60, NULL};
