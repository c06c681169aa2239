/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/pools/stop_result.c - one answer for "stopped": every call that
 * ends because its dispatcher was stopped, or finds it stopped already,
 * returns TAXI_ESTOPPED, never 0, however the stop and the call meet.
 *
 *   - the reactor's own dispatch: taxi_reactor_run, _handle_events and
 *     _handle_one stopped before the call, by a hook during it (after
 *     other hooks ran), and by another thread while waiting;
 *   - taxi_lf_join and taxi_lf_wait with the stop racing the join (the
 *     stop made at once, so that it lands before, during or after the
 *     join's entry), by taxi_lf_stop, by the reactor's stop and from a hook;
 *   - taxi_hsha_wait racing taxi_hsha_stop; taxi_lf_sets_wait after and
 *     racing taxi_lf_sets_stop.
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <stdio.h>
#include <string.h>

static int rounds(void) { return pools_small() ? 20 : 100; }

/* ---- the reactor's own dispatch --------------------------------------- */

typedef struct stopper {
  taxi_reactor_t *r;
  atomic_int ran;
} stopper_t;

static void count(void *arg) { atomic_fetch_add(&((stopper_t *)arg)->ran, 1); }

static void stop_it(void *arg) {
  stopper_t *s = arg;
  atomic_fetch_add(&s->ran, 1);
  taxi_reactor_stop(s->r);
}

static void test_reactor_stopped_before(void) {
  taxi_reactor_t *r = pools_reactor();
  CU_ASSERT_EQUAL(taxi_reactor_stop(r), 0);
  CU_ASSERT_EQUAL(taxi_reactor_run(r), TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(taxi_reactor_handle_events(r, 0), TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(taxi_reactor_handle_events(r, 10), TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(taxi_reactor_handle_one(r, 0), TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(taxi_reactor_restart(r), 0);
  CU_ASSERT_EQUAL(taxi_reactor_handle_events(r, 0), 0);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
}

/* A hook stops the reactor after others ran in the same call: the call
 * says TAXI_ESTOPPED, not how many ran. */
static void test_reactor_stopped_by_hook(void) {
  taxi_reactor_t *r = pools_reactor();
  stopper_t s = {r, 0};
  CU_ASSERT_EQUAL(taxi_reactor_notify(r, count, &s), 0);
  CU_ASSERT_EQUAL(taxi_reactor_notify(r, stop_it, &s), 0);
  CU_ASSERT_EQUAL(taxi_reactor_notify(r, count, &s), 0);
  CU_ASSERT_EQUAL(taxi_reactor_handle_events(r, 1000), TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(atomic_load(&s.ran), 2); /* the third waits */
  CU_ASSERT_EQUAL(taxi_reactor_restart(r), 0);
  CU_ASSERT_EQUAL(taxi_reactor_handle_events(r, 0), 1);
  CU_ASSERT_EQUAL(atomic_load(&s.ran), 3);

  /* handle_one: its one event stops the reactor. */
  CU_ASSERT_EQUAL(taxi_reactor_notify(r, stop_it, &s), 0);
  CU_ASSERT_EQUAL(taxi_reactor_handle_one(r, 1000), TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(atomic_load(&s.ran), 4);
  CU_ASSERT_EQUAL(taxi_reactor_restart(r), 0);

  /* run: a notification, then one that stops. */
  CU_ASSERT_EQUAL(taxi_reactor_notify(r, count, &s), 0);
  CU_ASSERT_EQUAL(taxi_reactor_notify(r, stop_it, &s), 0);
  CU_ASSERT_EQUAL(taxi_reactor_run(r), TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(atomic_load(&s.ran), 6);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
}

typedef struct runner {
  taxi_reactor_t *r;
  taxi_lf_pool_t *lf;
  atomic_int rc;
} runner_t;

static void run_reactor(void *arg) {
  runner_t *x = arg;
  atomic_store(&x->rc, taxi_reactor_run(x->r));
}

static void wait_reactor(void *arg) {
  runner_t *x = arg;
  atomic_store(&x->rc, taxi_reactor_handle_events(x->r, -1));
}

/* Another thread stops the reactor as soon as the dispatching thread was
 * started: before its call, during its entry, or in its wait. */
static void test_reactor_stop_races(void) {
  taxi_reactor_t *r = pools_reactor();
  for (int i = 0; i < rounds(); i++) {
    runner_t x = {r, NULL, 1};
    util_thread_t t;
    CU_ASSERT_EQUAL_FATAL(
        util_thread_start(&t, i % 2 ? run_reactor : wait_reactor, &x), 0);
    CU_ASSERT_EQUAL(taxi_reactor_stop(r), 0);
    util_thread_join(&t, POOLS_WAIT_MS, "stop_result: a stopped dispatch");
    if (atomic_load(&x.rc) != TAXI_ESTOPPED) {
      printf("\n    round %d: %s\n", i, taxi_error_name(atomic_load(&x.rc)));
      CU_FAIL("a stopped dispatch did not say TAXI_ESTOPPED");
      break;
    }
    CU_ASSERT_EQUAL(taxi_reactor_restart(r), 0);
  }
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
}

/* ---- Leader/Followers ------------------------------------------------- */

static void join_pool(void *arg) {
  runner_t *x = arg;
  atomic_store(&x->rc, taxi_lf_join(x->lf, -1, 0));
}

enum { BY_LF_STOP, BY_REACTOR_STOP, BY_HOOK };

static void lf_stop_from_hook(void *arg) { (void)taxi_lf_stop(arg); }

/* A thread joins, another stops the pool at once (by taxi_lf_stop, the
 * reactor's stop, or a hook the pool runs): the join returns
 * TAXI_ESTOPPED whether it came in before or after the stop, and so does
 * taxi_lf_wait. */
static void join_races(int how) {
  for (int i = 0; i < rounds(); i++) {
    taxi_reactor_t *r = pools_reactor();
    taxi_lf_pool_t *p = NULL;
    CU_ASSERT_EQUAL_FATAL(taxi_lf_create(&p, r, NULL), 0);
    if (i % 3 == 1) {
      CU_ASSERT_EQUAL(taxi_lf_spawn(p, 2), 0);
    }
    runner_t x = {r, p, 1};
    util_thread_t t;
    CU_ASSERT_EQUAL_FATAL(util_thread_start(&t, join_pool, &x), 0);
    int stop_rc = 0;
    switch (how) {
      case BY_LF_STOP:
        stop_rc = taxi_lf_stop(p);
        break;
      case BY_REACTOR_STOP:
        stop_rc = taxi_reactor_stop(r);
        break;
      case BY_HOOK:
        stop_rc = taxi_reactor_notify(r, lf_stop_from_hook, p);
        break;
    }
    CU_ASSERT_EQUAL(stop_rc, 0);
    util_thread_join(&t, POOLS_WAIT_MS, "stop_result: taxi_lf_join");
    int rc = atomic_load(&x.rc);
    if (rc != TAXI_ESTOPPED) {
      printf("\n    round %d: taxi_lf_join said %s\n", i, taxi_error_name(rc));
      CU_FAIL("a stopped join did not say TAXI_ESTOPPED");
    }
    CU_ASSERT_EQUAL(taxi_lf_wait(p, POOLS_WAIT_MS), TAXI_ESTOPPED);
    CU_ASSERT_EQUAL(taxi_lf_join(p, -1, 0), TAXI_ESTOPPED);
    CU_ASSERT_EQUAL(taxi_lf_join(p, 0, 0), TAXI_ESTOPPED);
    CU_ASSERT_EQUAL(taxi_lf_destroy(p), 0);
    CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
    if (rc != TAXI_ESTOPPED) break;
  }
}

static void test_lf_join_stop_races(void) { join_races(BY_LF_STOP); }
static void test_lf_join_reactor_stop(void) { join_races(BY_REACTOR_STOP); }
static void test_lf_join_hook_stop(void) { join_races(BY_HOOK); }

/* The stop comes once the joined thread is surely in the pool. */
static void test_lf_join_stopped_inside(void) {
  taxi_reactor_t *r = pools_reactor();
  taxi_lf_pool_t *p = NULL;
  CU_ASSERT_EQUAL_FATAL(taxi_lf_create(&p, r, NULL), 0);
  runner_t x = {r, p, 1};
  util_thread_t t;
  CU_ASSERT_EQUAL_FATAL(util_thread_start(&t, join_pool, &x), 0);
  taxi_lf_stats_t s;
  memset(&s, 0, sizeof s);
  for (int ms = 0; ms < POOLS_WAIT_MS && s.threads < 1; ms++) {
    CU_ASSERT_EQUAL(taxi_lf_stats(p, &s), 0);
    if (s.threads < 1) util_sleep_ms(1);
  }
  CU_ASSERT_EQUAL(s.threads, 1u);
  CU_ASSERT_EQUAL(taxi_lf_stop(p), 0);
  util_thread_join(&t, POOLS_WAIT_MS, "stop_result: taxi_lf_join");
  CU_ASSERT_EQUAL(atomic_load(&x.rc), TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(taxi_lf_wait(p, 0), TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(taxi_lf_stop(p), TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(taxi_lf_destroy(p), 0);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
}

/* ---- half-sync/half-async --------------------------------------------- */

typedef struct hwait {
  taxi_hsha_pool_t *p;
  atomic_int rc;
} hwait_t;

static void hsha_waiter(void *arg) {
  hwait_t *w = arg;
  atomic_store(&w->rc, taxi_hsha_wait(w->p, -1));
}

static void test_hsha_wait_stop_races(void) {
  for (int i = 0; i < rounds(); i++) {
    taxi_reactor_t *r = pools_reactor();
    taxi_hsha_options_t o = TAXI_HSHA_OPTIONS_INIT;
    o.workers = 2;
    taxi_hsha_pool_t *p = NULL;
    CU_ASSERT_EQUAL_FATAL(taxi_hsha_create(&p, r, &o), 0);
    hwait_t w = {p, 1};
    util_thread_t t;
    CU_ASSERT_EQUAL_FATAL(util_thread_start(&t, hsha_waiter, &w), 0);
    int stop_rc = i % 2 ? taxi_hsha_stop(p) : taxi_reactor_stop(r);
    CU_ASSERT_EQUAL(stop_rc, 0);
    util_thread_join(&t, POOLS_WAIT_MS, "stop_result: taxi_hsha_wait");
    int rc = atomic_load(&w.rc);
    CU_ASSERT_EQUAL(rc, TAXI_ESTOPPED);
    CU_ASSERT_EQUAL(taxi_hsha_wait(p, 0), TAXI_ESTOPPED);
    CU_ASSERT_EQUAL(taxi_hsha_destroy(p), 0);
    CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
    if (rc != TAXI_ESTOPPED) break;
  }
}

/* ---- Leader/Followers per handle set ---------------------------------- */

typedef struct swait {
  taxi_lf_sets_t *s;
  atomic_int rc;
} swait_t;

static void sets_waiter(void *arg) {
  swait_t *w = arg;
  atomic_store(&w->rc, taxi_lf_sets_wait(w->s, -1));
}

static void test_sets_wait(void) {
  for (int i = 0; i < rounds() / 4 + 1; i++) {
    taxi_lf_sets_options_t o = TAXI_LF_SETS_OPTIONS_INIT;
    o.sets = 2;
    o.threads_per_set = 1;
    o.backend = pools_backend;
    taxi_lf_sets_t *s = NULL;
    CU_ASSERT_EQUAL_FATAL(taxi_lf_sets_create(&s, &o), 0);
    swait_t w = {s, 1};
    util_thread_t t;
    CU_ASSERT_EQUAL_FATAL(util_thread_start(&t, sets_waiter, &w), 0);
    CU_ASSERT_EQUAL(taxi_lf_sets_stop(s), 0);
    util_thread_join(&t, POOLS_WAIT_MS, "stop_result: taxi_lf_sets_wait");
    CU_ASSERT_EQUAL(atomic_load(&w.rc), TAXI_ESTOPPED);
    CU_ASSERT_EQUAL(taxi_lf_sets_wait(s, 0), TAXI_ESTOPPED);
    CU_ASSERT_EQUAL(taxi_lf_sets_stop(s), TAXI_ESTOPPED);
    CU_ASSERT_EQUAL(taxi_lf_sets_destroy(s), 0);
  }
}

static CU_TestInfo stop_result_tests[] = {
    {"reactor: run, handle_events, handle_one when stopped before",
     test_reactor_stopped_before},
    {"reactor: stopped by a hook during the call",
     test_reactor_stopped_by_hook},
    {"reactor: stopped by another thread as the call starts",
     test_reactor_stop_races},
    {"lf: join racing taxi_lf_stop", test_lf_join_stop_races},
    {"lf: join racing the reactor's stop", test_lf_join_reactor_stop},
    {"lf: join racing a stop from a hook", test_lf_join_hook_stop},
    {"lf: join stopped once inside", test_lf_join_stopped_inside},
    {"hsha: wait racing the stop", test_hsha_wait_stop_races},
    {"lf_sets: wait racing the stop", test_sets_wait},
    CU_TEST_INFO_NULL,
};

const taxi_test_suite_t pools_suite_stop_result = {
    "one answer for stopped: TAXI_ESTOPPED", stop_result_tests, 180, NULL};
