/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/proactor/group_api.c - the proactor group's own API
 * (taxi/proactor_group.h): bad input, least-loaded spread, run twice,
 * destroy while running, run again after return, waiting for a run to end,
 * a proactor's failing run ending the group's, a stop from a signal handler,
 * and allocation failures while creating a group (TAXI_ENOMEM, no leak).  The
 * echo over groups and the moves between proactors are in group.c.
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* ---- the group's API ---------------------------------------------------- */

static void test_bad_input(void) {
  taxi_proactor_group_options_init(NULL);
  taxi_proactor_group_options_t o = TAXI_PROACTOR_GROUP_OPTIONS_INIT, z;
  taxi_proactor_group_options_init(&z);
  CU_ASSERT_EQUAL(memcmp(&o, &z, sizeof o), 0);
  CU_ASSERT_EQUAL(o.size, sizeof o);
  CU_ASSERT_EQUAL(o.count, 0);
  CU_ASSERT_EQUAL(o.spread, TAXI_SPREAD_ROUND_ROBIN);

  taxi_proactor_group_t *g = (taxi_proactor_group_t *)&o;
  CU_ASSERT_EQUAL(taxi_proactor_group_create(NULL, &o), TAXI_EINVAL);
  o.size = 0;
  CU_ASSERT_EQUAL(taxi_proactor_group_create(&g, &o), TAXI_EINVAL);
  CU_ASSERT_PTR_NULL(g);
  o.size = sizeof o - 1;
  CU_ASSERT_EQUAL(taxi_proactor_group_create(&g, &o), TAXI_EINVAL);
  o.size = sizeof o;
  o.count = 1025;
  CU_ASSERT_EQUAL(taxi_proactor_group_create(&g, &o), TAXI_EINVAL);
  o.count = 100000;
  CU_ASSERT_EQUAL(taxi_proactor_group_create(&g, &o), TAXI_EINVAL);
  o.count = 2;
  o.spread = (taxi_group_spread_t)7;
  CU_ASSERT_EQUAL(taxi_proactor_group_create(&g, &o), TAXI_EINVAL);
  o.spread = TAXI_SPREAD_ROUND_ROBIN;
  taxi_proactor_options_t po = TAXI_PROACTOR_OPTIONS_INIT;
  po.size = 0;
  o.proactor = &po;
  CU_ASSERT_EQUAL(taxi_proactor_group_create(&g, &o), TAXI_EINVAL);
  taxi_proactor_options_init(&po);
  po.backend = "no such backend";
  CU_ASSERT_EQUAL(taxi_proactor_group_create(&g, &o), TAXI_ENOBACKEND);
  CU_ASSERT_PTR_NULL(g);

  CU_ASSERT_EQUAL(taxi_proactor_group_count(NULL), 0);
  CU_ASSERT_PTR_NULL(taxi_proactor_group_at(NULL, 0));
  CU_ASSERT_PTR_NULL(taxi_proactor_group_next(NULL));
  CU_ASSERT_EQUAL(taxi_proactor_group_run(NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_proactor_group_stop(NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_proactor_group_destroy(NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_proactor_group_wait(NULL, 0), TAXI_EINVAL);

  /* count 0: 2; the options may be NULL for every default. */
  po.backend = pt_backend;
  o.count = 0;
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_group_create(&g, &o), 0);
  CU_ASSERT_EQUAL(taxi_proactor_group_count(g), 2);
  CU_ASSERT_PTR_NOT_NULL(taxi_proactor_group_at(g, 1));
  CU_ASSERT_PTR_NULL(taxi_proactor_group_at(g, 2));
  CU_ASSERT_PTR_NULL(taxi_proactor_group_at(g, 1u << 31));
  CU_ASSERT(taxi_proactor_group_at(g, 0) != taxi_proactor_group_at(g, 1));
  /* Round robin: each in turn. */
  taxi_proactor_t *n0 = taxi_proactor_group_next(g);
  taxi_proactor_t *n1 = taxi_proactor_group_next(g);
  CU_ASSERT(n0 != n1);
  CU_ASSERT(taxi_proactor_group_next(g) == n0);
  CU_ASSERT_EQUAL(taxi_proactor_group_destroy(g), 0);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_group_create(&g, NULL), 0);
  CU_ASSERT_EQUAL(taxi_proactor_group_count(g), 2);
  CU_ASSERT_EQUAL(taxi_proactor_group_destroy(g), 0);
}

/* Least loaded: the proactor with the fewest handles; ties in turn. */
static void test_least_loaded(void) {
  taxi_proactor_group_t *g = gr_group(3, TAXI_SPREAD_LEAST_LOADED);
  taxi_proactor_t *p[3];
  for (unsigned i = 0; i < 3; i++) p[i] = taxi_proactor_group_at(g, i);
  /* All empty: a tie, so each in turn. */
  taxi_proactor_t *a = taxi_proactor_group_next(g);
  taxi_proactor_t *b = taxi_proactor_group_next(g);
  taxi_proactor_t *c = taxi_proactor_group_next(g);
  CU_ASSERT(a != b && b != c && a != c);
  int s0[2], s1[2], s2[2], s3[2];
  pt_pair(p[0], s0);
  pt_pair(p[0], s1);
  pt_pair(p[2], s2);
  /* 2, 0, 1: p1 alone is least (next() attaches nothing itself). */
  for (int i = 0; i < 4; i++) CU_ASSERT(taxi_proactor_group_next(g) == p[1]);
  pt_pair(p[1], s3);
  CU_ASSERT_EQUAL(taxi_proactor_close(p[0], s0[0]), 0);
  CU_ASSERT_EQUAL(taxi_proactor_close(p[0], s1[0]), 0);
  /* 0, 1, 1: p0 alone is least. */
  for (int i = 0; i < 3; i++) CU_ASSERT(taxi_proactor_group_next(g) == p[0]);
  /* 1, 1, 1: a tie again, so each in turn. */
  if (!pt_backend_is("iocp")) { /* a handle that moves away and back */
    CU_ASSERT_EQUAL(taxi_proactor_move(p[1], s3[0], p[0]), 0);
    CU_ASSERT_EQUAL(taxi_proactor_move(p[0], s3[0], p[1]), 0);
  }
  pt_close(&s0[1]);
  pt_pair(p[0], s0);
  a = taxi_proactor_group_next(g);
  b = taxi_proactor_group_next(g);
  c = taxi_proactor_group_next(g);
  CU_ASSERT(a != b && b != c && a != c);
  CU_ASSERT_EQUAL(taxi_proactor_group_destroy(g), 0);
  pt_close(&s0[1]);
  pt_close(&s1[1]);
  pt_close(&s2[1]);
  pt_close(&s3[1]);
}

typedef struct gr_busy {
  taxi_proactor_group_t *g;
  taxi_op_t post;
  atomic_int running;
  int run_rc;
} gr_busy_t;

static void gr_on_running(taxi_op_t *op, int status, size_t bytes, void *act) {
  gr_busy_t *b = act;
  (void)op;
  (void)status;
  (void)bytes;
  /* From a handler too: running, so refused. */
  CU_ASSERT_EQUAL(taxi_proactor_group_run(b->g), TAXI_EBUSY);
  CU_ASSERT_EQUAL(taxi_proactor_group_destroy(b->g), TAXI_EBUSY);
  /* Nor may it wait: its thread is one the run waits for. */
  CU_ASSERT_EQUAL(taxi_proactor_group_wait(b->g, 0), TAXI_EBUSY);
  atomic_store(&b->running, 1);
}

static void gr_busy_run(void *arg) {
  gr_busy_t *b = arg;
  b->run_rc = taxi_proactor_group_run(b->g);
}

/* Run twice at once and destroy while running: TAXI_EBUSY; stopped, it
 * runs again (each proactor restarted), and then destroys. */
static void test_busy_and_rerun(void) {
  static gr_busy_t b;
  memset(&b, 0, sizeof b);
  b.g = gr_group(2, TAXI_SPREAD_ROUND_ROBIN);
  for (int round = 0; round < 3; round++) {
    atomic_store(&b.running, 0);
    b.run_rc = 1;
    taxi_op_init(&b.post);
    CU_ASSERT_EQUAL_FATAL(taxi_proactor_post(taxi_proactor_group_at(b.g, 1),
                                             &b.post, gr_on_running, &b),
                          0);
    pt_thread_t t;
    pt_thread_start(&t, gr_busy_run, &b);
    CU_ASSERT(util_wait_flag(&b.running, 1, pt_wait_ms()));
    CU_ASSERT_EQUAL(taxi_proactor_group_run(b.g), TAXI_EBUSY);
    CU_ASSERT_EQUAL(taxi_proactor_group_destroy(b.g), TAXI_EBUSY);
    CU_ASSERT_EQUAL(taxi_proactor_group_stop(b.g), 0);
    pt_thread_join(&t, 1, "taxi_proactor_group_run after stop");
    CU_ASSERT_EQUAL(b.run_rc, TAXI_ESTOPPED);
  }
  /* Stopped before it runs: run returns at once (a stop is not lost). */
  CU_ASSERT_EQUAL(taxi_proactor_group_stop(b.g), 0);
  CU_ASSERT_EQUAL(gr_run(b.g), TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(taxi_proactor_group_destroy(b.g), 0);
}

/* taxi_proactor_group_wait, as taxi_lf_wait and taxi_io_wait: nothing to
 * wait for before a run or a stop; during a run, until it is stopped; after
 * it, at once, with what the run returned. */
typedef struct gr_waiter {
  taxi_proactor_group_t *g;
  atomic_int done;
  int rc;
} gr_waiter_t;

static void gr_wait_thread(void *arg) {
  gr_waiter_t *w = arg;
  w->rc = taxi_proactor_group_wait(w->g, -1);
  atomic_store(&w->done, 1);
}

static void test_wait(void) {
  CU_ASSERT_EQUAL(taxi_proactor_group_wait(NULL, 0), TAXI_EINVAL);
  static gr_busy_t b;
  memset(&b, 0, sizeof b);
  b.g = gr_group(2, TAXI_SPREAD_ROUND_ROBIN);
  CU_ASSERT_EQUAL(taxi_proactor_group_wait(b.g, 0), TAXI_ETIMEDOUT);
  CU_ASSERT_EQUAL(taxi_proactor_group_wait(b.g, 20), TAXI_ETIMEDOUT);

  b.run_rc = 1;
  taxi_op_init(&b.post);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_post(taxi_proactor_group_at(b.g, 1),
                                           &b.post, gr_on_running, &b),
                        0);
  pt_thread_t t, wt;
  pt_thread_start(&t, gr_busy_run, &b);
  CU_ASSERT(util_wait_flag(&b.running, 1, pt_wait_ms()));
  CU_ASSERT_EQUAL(taxi_proactor_group_wait(b.g, 10), TAXI_ETIMEDOUT);
  static gr_waiter_t w;
  memset(&w, 0, sizeof w);
  w.g = b.g;
  pt_thread_start(&wt, gr_wait_thread, &w);
  usleep(20000);
  CU_ASSERT_EQUAL(atomic_load(&w.done), 0); /* not stopped yet */
  CU_ASSERT_EQUAL(taxi_proactor_group_stop(b.g), 0);
  pt_thread_join(&wt, 1, "taxi_proactor_group_wait after stop");
  CU_ASSERT_EQUAL(w.rc, TAXI_ESTOPPED);
  pt_thread_join(&t, 1, "taxi_proactor_group_run after stop");
  CU_ASSERT_EQUAL(b.run_rc, TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(taxi_proactor_group_wait(b.g, 0), TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(taxi_proactor_group_wait(b.g, -1), TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(taxi_proactor_group_destroy(b.g), 0);

  /* Stopped before any run: nothing to wait for. */
  taxi_proactor_group_t *g = gr_group(2, TAXI_SPREAD_ROUND_ROBIN);
  CU_ASSERT_EQUAL(taxi_proactor_group_stop(g), 0);
  CU_ASSERT_EQUAL(taxi_proactor_group_wait(g, -1), TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(gr_run(g), TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(taxi_proactor_group_destroy(g), 0);
}

/* A proactor whose run fails ends the group's run with that error, the
 * others stopped and joined: here proactor 1 is dispatched already by
 * another thread, so its run is refused with TAXI_EBUSY. */
typedef struct gr_hold {
  taxi_proactor_t *p;
  atomic_int holding, release;
} gr_hold_t;

static void gr_on_hold(taxi_op_t *op, int status, size_t bytes, void *act) {
  gr_hold_t *h = act;
  (void)op;
  (void)status;
  (void)bytes;
  atomic_store(&h->holding, 1);
  util_wait_flag(&h->release, 1, pt_wait_ms() * 2);
}

static void gr_hold_run(void *arg) {
  gr_hold_t *h = arg;
  CU_ASSERT_EQUAL(taxi_proactor_handle_events(h->p, pt_wait_ms()), 1);
}

static void test_run_error(void) {
  taxi_proactor_group_t *g = gr_group(3, TAXI_SPREAD_ROUND_ROBIN);
  static gr_hold_t h;
  memset(&h, 0, sizeof h);
  h.p = taxi_proactor_group_at(g, 1);
  taxi_op_t post = TAXI_OP_INIT;
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_post(h.p, &post, gr_on_hold, &h), 0);
  pt_thread_t t;
  pt_thread_start(&t, gr_hold_run, &h);
  CU_ASSERT_FATAL(util_wait_flag(&h.holding, 1, pt_wait_ms()));
  CU_ASSERT_EQUAL(gr_run(g), TAXI_EBUSY);
  /* The waiter is told what ended the run. */
  CU_ASSERT_EQUAL(taxi_proactor_group_wait(g, 0), TAXI_EBUSY);
  atomic_store(&h.release, 1);
  pt_thread_join(&t, 2, "the thread holding proactor 1");
  CU_ASSERT_EQUAL(taxi_proactor_group_destroy(g), 0);
}

#if !defined(_WIN32)
/* taxi_proactor_group_stop from an OS signal handler (it takes no lock),
 * in the thread that dispatches proactor 0; sent until run returns, as
 * in signals.c, and after the bound the group is stopped all the same
 * (the test then fails). */
static taxi_proactor_group_t *gr_signal_target;
static void gr_stop_from_handler(int signo) {
  (void)signo;
  taxi_proactor_group_stop(gr_signal_target);
}

static void gr_stop_anyway(void *g) { taxi_proactor_group_stop(g); }

static void test_stop_from_signal_handler(void) {
  taxi_proactor_group_t *g = gr_group(3, TAXI_SPREAD_ROUND_ROBIN);
  gr_signal_target = g;
  util_signal_handle(SIGUSR1, gr_stop_from_handler);
  util_signaller_t x;
  CU_ASSERT_EQUAL_FATAL(
      util_signaller_start(&x, SIGUSR1, pt_wait_ms(), gr_stop_anyway, g), 0);
  int rc = taxi_proactor_group_run(g);
  util_signaller_finish(&x);
  util_signal_default(SIGUSR1);
  CU_ASSERT_EQUAL(rc, TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(atomic_load(&x.gave_up), 0);
  CU_ASSERT(atomic_load(&x.sent) >= 1);
  CU_ASSERT_EQUAL(taxi_proactor_group_destroy(g), 0);
}
#endif

/* ---- allocation failures ------------------------------------------------- */

static void test_enomem(void) {
  CU_ASSERT_EQUAL_FATAL(util_alloc_install(), 0);
  taxi_proactor_options_t po = TAXI_PROACTOR_OPTIONS_INIT;
  po.backend = pt_backend;
  taxi_proactor_group_options_t o = TAXI_PROACTOR_GROUP_OPTIONS_INIT;
  o.count = 3;
  o.proactor = &po;
  int created = 0, failed = 0;
  for (long n = 0; n < 2000 && !created; n++) {
    util_alloc_reset();
    util_alloc_fail_after(n);
    taxi_proactor_group_t *g = NULL;
    int rc = taxi_proactor_group_create(&g, &o);
    util_alloc_fail_after(-1);
    if (rc == 0) {
      created = 1;
      CU_ASSERT_EQUAL(taxi_proactor_group_count(g), 3);
      CU_ASSERT_EQUAL(taxi_proactor_group_destroy(g), 0);
    } else {
      failed++;
      CU_ASSERT_PTR_NULL(g);
      if (rc != TAXI_ENOMEM) {
        printf("\n    allocation %ld failing: create = %s\n", n,
               taxi_error_name(rc));
        CU_ASSERT_EQUAL(rc, TAXI_ENOMEM);
      }
    }
    util_alloc_counts_t c = util_alloc_counts();
    if (c.live != 0) {
      printf("\n    allocation %ld failing: %lld blocks left\n", n,
             (long long)c.live);
      CU_ASSERT_EQUAL(c.live, 0);
      break;
    }
  }
  printf("(%d failing allocations refused) ", failed);
  CU_ASSERT(created);
  CU_ASSERT(failed > 0);
  util_alloc_uninstall();
}

static CU_TestInfo group_api_tests[] = {
    {"group: bad input", test_bad_input},
    {"group: least loaded", test_least_loaded},
    {"group: busy, stop, run again", test_busy_and_rerun},
    {"group: wait for a run to end", test_wait},
    {"group: a failing run ends the others", test_run_error},
#if !defined(_WIN32)
    {"group: stopped from a signal handler", test_stop_from_signal_handler},
#endif
    {"group: allocation failures, no leak", test_enomem},
    CU_TEST_INFO_NULL,
};

const taxi_test_suite_t pt_suite_group_api = {"group api", group_api_tests, 120,
                                              NULL};
