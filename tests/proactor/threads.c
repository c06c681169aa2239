/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/proactor/threads.c - who dispatches completions.
 *
 * Suite "dispatch": handle_events by one thread at a time (another gets
 * TAXI_EBUSY), run in one thread stopped from another, stop before run,
 * restart, and what a completion handler may not do (dispatch or destroy
 * its own proactor).
 *
 * Suite "pool" (threads_echo.c, threads_pool.c): the Leader/Followers pool
 * over the completion queue.
 */
#define _GNU_SOURCE 1

#include "threads_helpers.h"

/* ---- dispatch ------------------------------------------------------------ */

typedef struct th_runner {
  taxi_proactor_t *p;
  atomic_int started;
  int rc;
  pthread_t thread;
} th_runner_t;

static void th_run(void *arg) {
  th_runner_t *r = arg;
  r->thread = pthread_self();
  atomic_store(&r->started, 1);
  r->rc = taxi_proactor_run(r->p);
}

/* Wait until the posted record has run in some thread. */
static int th_wait_done(pt_done_t *d, int n) {
  return util_wait_flag(&d->calls, n, pt_wait_ms());
}

/* taxi_proactor_run in one thread runs the completions of operations
 * started from another; taxi_proactor_stop from that other thread makes
 * it return 0.  While it runs, handle_events and run elsewhere get
 * TAXI_EBUSY, and destroy too. */
static void test_run_stop_from_other_thread(void) {
  taxi_proactor_t *p = pt_proactor();
  static th_runner_t r;
  memset(&r, 0, sizeof r);
  r.p = p;
  r.rc = -100;
  pt_thread_t t;
  pt_thread_start(&t, th_run, &r);
  CU_ASSERT_FATAL(util_wait_flag(&r.started, 1, pt_wait_ms()));
  taxi_op_t op;
  taxi_op_init(&op);
  pt_done_t d;
  pt_done_init(&d);
  CU_ASSERT_EQUAL(taxi_proactor_post(p, &op, pt_on_done, &d), 0);
  CU_ASSERT(th_wait_done(&d, 1));
  CU_ASSERT(pthread_equal(d.thread, r.thread));
  /* The run thread is dispatching (or about to): one dispatcher only. */
  pt_sleep_ms(10);
  CU_ASSERT_EQUAL(taxi_proactor_handle_events(p, 0), TAXI_EBUSY);
  CU_ASSERT_EQUAL(taxi_proactor_run(p), TAXI_EBUSY);
  CU_ASSERT_EQUAL(taxi_proactor_destroy(p), TAXI_EBUSY);
  /* A timer started from here runs there. */
  pt_done_init(&d);
  CU_ASSERT_EQUAL(
      taxi_proactor_timer(p, &op, TAXI_NSEC_PER_MSEC, pt_on_done, &d), 0);
  CU_ASSERT(th_wait_done(&d, 1));
  CU_ASSERT(pthread_equal(d.thread, r.thread));
  CU_ASSERT_EQUAL(taxi_proactor_stop(p), 0);
  pt_thread_join(&t, 1, "taxi_proactor_run after taxi_proactor_stop");
  CU_ASSERT_EQUAL(r.rc, TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(taxi_proactor_restart(p), 0);
  pt_destroy(p);
}

/* Stopped before run: run returns TAXI_ESTOPPED at once, and so does
 * handle_events, without running a ready completion; after restart it
 * runs. */
static void test_stop_before_run(void) {
  if (pt_skip_one_thread()) return;
  taxi_proactor_t *p = pt_proactor();
  CU_ASSERT_EQUAL(taxi_proactor_stop(p), 0);
  static th_runner_t r;
  memset(&r, 0, sizeof r);
  r.p = p;
  r.rc = -100;
  pt_thread_t t;
  pt_thread_start(&t, th_run, &r);
  pt_thread_join(&t, 1, "taxi_proactor_run on a stopped proactor");
  CU_ASSERT_EQUAL(r.rc, TAXI_ESTOPPED);
  taxi_op_t op;
  taxi_op_init(&op);
  pt_done_t d;
  pt_done_init(&d);
  CU_ASSERT_EQUAL(taxi_proactor_post(p, &op, pt_on_done, &d), 0);
  CU_ASSERT_EQUAL(taxi_proactor_handle_events(p, 10), TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(atomic_load(&d.calls), 0);
  CU_ASSERT_EQUAL(taxi_proactor_restart(p), 0);
  CU_ASSERT(pt_run_done(p, &d, 1));
  CU_ASSERT_EQUAL(d.status, 0);
  pt_destroy(p);
}

/* A completion handler stops run; a handler may not dispatch or destroy
 * its own proactor (an error, not a recursion or a crash). */
typedef struct th_inner {
  taxi_proactor_t *p;
  int he_rc, destroy_rc, stop_rc;
  atomic_int calls;
} th_inner_t;

static void th_on_inner(taxi_op_t *op, int status, size_t bytes, void *act) {
  th_inner_t *x = act;
  (void)op;
  (void)status;
  (void)bytes;
  x->he_rc = taxi_proactor_handle_events(x->p, 0);
  x->destroy_rc = taxi_proactor_destroy(x->p);
  x->stop_rc = taxi_proactor_stop(x->p);
  atomic_fetch_add(&x->calls, 1);
}

static void test_handler_limits_and_stop(void) {
  taxi_proactor_t *p = pt_proactor();
  static th_inner_t x;
  memset(&x, 0, sizeof x);
  x.p = p;
  taxi_op_t op;
  taxi_op_init(&op);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_post(p, &op, th_on_inner, &x), 0);
  static th_runner_t r;
  memset(&r, 0, sizeof r);
  r.p = p;
  r.rc = -100;
  pt_thread_t t;
  pt_thread_start(&t, th_run, &r);
  pt_thread_join(&t, 1, "taxi_proactor_run stopped by its handler");
  CU_ASSERT_EQUAL(r.rc, TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(atomic_load(&x.calls), 1);
  CU_ASSERT(x.he_rc < 0);
  CU_ASSERT_EQUAL(x.destroy_rc, TAXI_EBUSY);
  CU_ASSERT_EQUAL(x.stop_rc, 0);
  CU_ASSERT_EQUAL(taxi_proactor_restart(p), 0);
  pt_destroy(p);
}

/* handle_events(p, 0) with nothing to do returns 0; with a ready
 * completion, the number of handlers run. */
static void test_handle_events_counts(void) {
  taxi_proactor_t *p = pt_proactor();
  CU_ASSERT_EQUAL(taxi_proactor_handle_events(p, 0), 0);
  enum { N = 5 };
  taxi_op_t ops[N];
  pt_done_t d[N];
  for (int i = 0; i < N; i++) {
    taxi_op_init(&ops[i]);
    pt_done_init(&d[i]);
    CU_ASSERT_EQUAL(taxi_proactor_post(p, &ops[i], pt_on_done, &d[i]), 0);
  }
  int ran = 0, rounds = 0;
  while (ran < N && rounds++ < 100) {
    int rc = taxi_proactor_handle_events(p, 100);
    CU_ASSERT(rc >= 0);
    if (rc < 0) break;
    ran += rc;
  }
  CU_ASSERT_EQUAL(ran, N);
  for (int i = 0; i < N; i++) CU_ASSERT_EQUAL(atomic_load(&d[i].calls), 1);
  CU_ASSERT_EQUAL(taxi_proactor_handle_events(p, 0), 0);
  taxi_proactor_stats_t s;
  CU_ASSERT_EQUAL(taxi_proactor_stats(p, &s), 0);
  CU_ASSERT(s.started >= N);
  CU_ASSERT(s.completed >= N);
  pt_destroy(p);
}

static CU_TestInfo dispatch_tests[] = {
    {"run in one thread, stop from another; one dispatcher at a time",
     test_run_stop_from_other_thread},
    {"stop before run; restart", test_stop_before_run},
    {"a handler stops run; may not dispatch or destroy",
     test_handler_limits_and_stop},
    {"handle_events returns the handlers run", test_handle_events_counts},
    CU_TEST_INFO_NULL,
};

const taxi_test_suite_t pt_suite_dispatch = {"dispatch", dispatch_tests, 60,
                                             NULL};
