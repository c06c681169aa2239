/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/proactor/stop_result.c - one answer for "stopped" on the proactor
 * side: taxi_proactor_handle_events and taxi_proactor_run, taxi_lf_join
 * over a proactor, taxi_proactor_group_run and _wait return TAXI_ESTOPPED
 * (never 0) when they end because of a stop, whether it came before the
 * call, from a handler during it, or from another thread as it started.
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <stdio.h>
#include <string.h>

static int rounds(void) { return pt_small() ? 20 : 100; }

typedef struct stopper {
  taxi_proactor_t *p;
  atomic_int ran;
} stopper_t;

static void count_done(taxi_op_t *op, int status, size_t bytes, void *act) {
  (void)op;
  (void)status;
  (void)bytes;
  atomic_fetch_add(&((stopper_t *)act)->ran, 1);
}

static void stop_done(taxi_op_t *op, int status, size_t bytes, void *act) {
  stopper_t *s = act;
  (void)op;
  (void)status;
  (void)bytes;
  atomic_fetch_add(&s->ran, 1);
  taxi_proactor_stop(s->p);
}

/* Stopped before: both calls say so at once; a handler that stops the
 * proactor after another ran in the same call: TAXI_ESTOPPED too. */
static void test_handle_events(void) {
  taxi_proactor_t *p = pt_proactor();
  stopper_t s = {p, 0};
  CU_ASSERT_EQUAL(taxi_proactor_stop(p), 0);
  CU_ASSERT_EQUAL(taxi_proactor_handle_events(p, 0), TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(taxi_proactor_run(p), TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(taxi_proactor_restart(p), 0);
  CU_ASSERT_EQUAL(taxi_proactor_handle_events(p, 0), 0);

  taxi_op_t a, b;
  taxi_op_init(&a);
  taxi_op_init(&b);
  CU_ASSERT_EQUAL(taxi_proactor_post(p, &a, count_done, &s), 0);
  CU_ASSERT_EQUAL(taxi_proactor_post(p, &b, stop_done, &s), 0);
  int rc = 0;
  for (int i = 0; i < 100 && atomic_load(&s.ran) < 2 && rc >= 0; i++)
    rc = taxi_proactor_handle_events(p, pt_wait_ms() / 100);
  CU_ASSERT_EQUAL(rc, TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(atomic_load(&s.ran), 2);
  CU_ASSERT_EQUAL(taxi_proactor_restart(p), 0);

  /* run: stopped by its handler. */
  CU_ASSERT_EQUAL(taxi_proactor_post(p, &b, stop_done, &s), 0);
  CU_ASSERT_EQUAL(taxi_proactor_run(p), TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(atomic_load(&s.ran), 3);
  pt_destroy(p);
}

typedef struct runner {
  taxi_proactor_t *p;
  taxi_lf_pool_t *lf;
  taxi_proactor_group_t *g;
  atomic_int rc;
} runner_t;

static void run_proactor(void *arg) {
  runner_t *x = arg;
  atomic_store(&x->rc, taxi_proactor_run(x->p));
}

/* Another thread stops the proactor as soon as the dispatching thread
 * was started. */
static void test_run_stop_races(void) {
  if (pt_skip_one_thread()) return;
  taxi_proactor_t *p = pt_proactor();
  for (int i = 0; i < rounds(); i++) {
    runner_t x = {p, NULL, NULL, 1};
    pt_thread_t t;
    pt_thread_start(&t, run_proactor, &x);
    CU_ASSERT_EQUAL(taxi_proactor_stop(p), 0);
    pt_thread_join(&t, 1, "stop_result: taxi_proactor_run");
    int rc = atomic_load(&x.rc);
    if (rc != TAXI_ESTOPPED) {
      printf("\n    round %d: %s\n", i, taxi_error_name(rc));
      CU_FAIL("a stopped run did not say TAXI_ESTOPPED");
      break;
    }
    CU_ASSERT_EQUAL(taxi_proactor_restart(p), 0);
  }
  pt_destroy(p);
}

static void join_pool(void *arg) {
  runner_t *x = arg;
  atomic_store(&x->rc, taxi_lf_join(x->lf, -1, 0));
}

/* A Leader/Followers pool over the proactor: a join racing its stop (the
 * pool's, or the proactor's). */
static void test_lf_join_stop_races(void) {
  if (pt_skip_one_thread()) return;
  for (int i = 0; i < rounds() / 2; i++) {
    taxi_proactor_t *p = pt_proactor();
    taxi_lf_pool_t *pool = NULL;
    CU_ASSERT_EQUAL_FATAL(taxi_lf_create_proactor(&pool, p, NULL), 0);
    runner_t x = {p, pool, NULL, 1};
    pt_thread_t t;
    pt_thread_start(&t, join_pool, &x);
    int stop_rc = i % 2 ? taxi_lf_stop(pool) : taxi_proactor_stop(p);
    CU_ASSERT_EQUAL(stop_rc, 0);
    pt_thread_join(&t, 1, "stop_result: taxi_lf_join over a proactor");
    int rc = atomic_load(&x.rc);
    CU_ASSERT_EQUAL(rc, TAXI_ESTOPPED);
    CU_ASSERT_EQUAL(taxi_lf_wait(pool, pt_wait_ms()), TAXI_ESTOPPED);
    CU_ASSERT_EQUAL(taxi_lf_destroy(pool), 0);
    pt_destroy(p);
    if (rc != TAXI_ESTOPPED) break;
  }
}

static void run_group(void *arg) {
  runner_t *x = arg;
  atomic_store(&x->rc, taxi_proactor_group_run(x->g));
}

/* A group's run racing its stop; then its wait says the same. */
static void test_group_stop_races(void) {
  taxi_proactor_group_t *g = gr_group(2, TAXI_SPREAD_ROUND_ROBIN);
  for (int i = 0; i < rounds() / 4 + 1; i++) {
    runner_t x = {NULL, NULL, g, 1};
    pt_thread_t t;
    pt_thread_start(&t, run_group, &x);
    CU_ASSERT_EQUAL(taxi_proactor_group_stop(g), 0);
    pt_thread_join(&t, 1, "stop_result: taxi_proactor_group_run");
    CU_ASSERT_EQUAL(atomic_load(&x.rc), TAXI_ESTOPPED);
    CU_ASSERT_EQUAL(taxi_proactor_group_wait(g, pt_wait_ms()), TAXI_ESTOPPED);
  }
  CU_ASSERT_EQUAL(taxi_proactor_group_destroy(g), 0);
}

static CU_TestInfo stop_result_tests[] = {
    {"handle_events and run: stopped before, by a handler", test_handle_events},
    {"run racing a stop from another thread", test_run_stop_races},
    {"lf over a proactor: join racing the stop", test_lf_join_stop_races},
    {"group: run racing the stop, then wait", test_group_stop_races},
    CU_TEST_INFO_NULL,
};

const taxi_test_suite_t pt_suite_stop_result = {
    "one answer for stopped: TAXI_ESTOPPED", stop_result_tests, 180, NULL};
