/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/proactor/one_thread.c - TAXI_PROACTOR_ONE_THREAD: the first
 * dispatching thread keeps the proactor (on io_uring, the ring is its,
 * with SINGLE_ISSUER and DEFER_TASKRUN where the kernel has them), other
 * threads still start, cancel and close operations, and their requests
 * reach that thread; a destroy after that thread has gone completes what
 * it left.  Each test runs twice: with the kernel's best setup, and with
 * TAXI_PROACTOR_NO_DEFER_TASKRUN (the fallback older kernels get).
 */
#define _GNU_SOURCE 1

#include "helpers.h"
#include "suites.h"

#include <CUnit/CUnit.h>
#include <string.h>

static taxi_proactor_t *ot_proactor(unsigned flags) {
  taxi_proactor_options_t o = TAXI_PROACTOR_OPTIONS_INIT;
  o.backend = pt_backend;
  o.flags = flags;
  taxi_proactor_t *p = NULL;
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_create(&p, &o), 0);
  return p;
}

/* The dispatching thread: run until stopped. */
typedef struct ot_runner {
  taxi_proactor_t *p;
  pthread_t self;
  atomic_int started;
  int rc;
} ot_runner_t;

static void ot_run(void *arg) {
  ot_runner_t *r = arg;
  r->self = pthread_self();
  /* One dispatch first, so that this thread owns the proactor before
   * the test goes on. */
  int rc = taxi_proactor_handle_events(r->p, 0);
  atomic_store(&r->started, 1);
  r->rc = rc < 0 ? rc : taxi_proactor_run(r->p);
}

static void ot_start(ot_runner_t *r, pt_thread_t *t, taxi_proactor_t *p) {
  memset(r, 0, sizeof *r);
  r->p = p;
  r->rc = -100;
  pt_thread_start(t, ot_run, r);
  for (int i = 0; i < pt_wait_ms() && !atomic_load(&r->started); i++)
    pt_sleep_ms(1);
  CU_ASSERT_EQUAL_FATAL(atomic_load(&r->started), 1);
}

/* Wait, without dispatching, until d has been called n times. */
static int ot_wait(pt_done_t *d, int n) {
  for (int i = 0; i < pt_wait_ms(); i++) {
    if (atomic_load(&d->calls) >= n) return 1;
    pt_sleep_ms(1);
  }
  return atomic_load(&d->calls) >= n;
}

static void check_features(taxi_proactor_t *p, unsigned flags) {
  unsigned f = 0;
  CU_ASSERT_EQUAL(taxi_proactor_features(p, &f), 0);
  CU_ASSERT(f & TAXI_PFEAT_ONE_THREAD);
  /* DEFER_TASKRUN needs SINGLE_ISSUER; COOP_TASKRUN is the other's
   * fallback, never both. */
  if (f & TAXI_PFEAT_DEFER_TASKRUN) CU_ASSERT(f & TAXI_PFEAT_SINGLE_ISSUER);
  CU_ASSERT(!((f & TAXI_PFEAT_DEFER_TASKRUN) && (f & TAXI_PFEAT_COOP_TASKRUN)));
  if (flags & TAXI_PROACTOR_NO_DEFER_TASKRUN)
    CU_ASSERT_EQUAL(f & (TAXI_PFEAT_DEFER_TASKRUN | TAXI_PFEAT_SINGLE_ISSUER),
                    0);
  if (!pt_backend_is("uring"))
    CU_ASSERT_EQUAL(f & (TAXI_PFEAT_DEFER_TASKRUN | TAXI_PFEAT_SINGLE_ISSUER |
                         TAXI_PFEAT_COOP_TASKRUN | TAXI_PFEAT_SUBMIT_ALL),
                    0);
  printf("(features 0x%x) ", f);
}

static void ot_refusals(unsigned flags) {
  taxi_proactor_t *p = ot_proactor(flags);
  check_features(p, flags);
  /* A pool is refused before any dispatch, and after. */
  taxi_lf_pool_t *pool = NULL;
  CU_ASSERT_EQUAL(taxi_lf_create_proactor(&pool, p, NULL), TAXI_EBUSY);
  ot_runner_t r;
  pt_thread_t t;
  ot_start(&r, &t, p);
  CU_ASSERT_EQUAL(taxi_proactor_handle_events(p, 0), TAXI_EBUSY);
  CU_ASSERT_EQUAL(taxi_lf_create_proactor(&pool, p, NULL), TAXI_EBUSY);
  CU_ASSERT_EQUAL(taxi_proactor_stop(p), 0);
  pt_thread_join(&t, 1, "taxi_proactor_run of a ONE_THREAD proactor");
  CU_ASSERT_EQUAL(r.rc, TAXI_ESTOPPED);
  /* Stopped, still refused to another thread. */
  taxi_proactor_restart(p);
  CU_ASSERT_EQUAL(taxi_proactor_handle_events(p, 0), TAXI_EBUSY);
  pt_destroy(p);
}

static void test_refusals(void) { ot_refusals(TAXI_PROACTOR_ONE_THREAD); }
static void test_refusals_nodefer(void) {
  ot_refusals(TAXI_PROACTOR_ONE_THREAD | TAXI_PROACTOR_NO_DEFER_TASKRUN);
}

static void test_bad_flags(void) {
  taxi_proactor_options_t o = TAXI_PROACTOR_OPTIONS_INIT;
  o.backend = pt_backend;
  o.flags = 0x80000000u;
  taxi_proactor_t *p = NULL;
  CU_ASSERT_EQUAL(taxi_proactor_create(&p, &o), TAXI_EINVAL);
  CU_ASSERT_PTR_NULL(p);
  unsigned f;
  CU_ASSERT_EQUAL(taxi_proactor_features(NULL, &f), TAXI_EINVAL);
  p = ot_proactor(0);
  CU_ASSERT_EQUAL(taxi_proactor_features(p, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_proactor_features(p, &f), 0);
  CU_ASSERT_EQUAL(f & TAXI_PFEAT_ONE_THREAD, 0);
  pt_destroy(p);
}

/* Every kind of request from this thread, run by the dispatching one. */
static void ot_foreign(unsigned flags) {
  taxi_proactor_t *p = ot_proactor(flags);
  int sv[2];
  pt_pair(p, sv);
  ot_runner_t r;
  pt_thread_t t;
  ot_start(&r, &t, p);

  /* A read started here, its bytes written after it started. */
  char buf[16];
  taxi_op_t rop = TAXI_OP_INIT, wop = TAXI_OP_INIT, post = TAXI_OP_INIT,
            tim = TAXI_OP_INIT;
  pt_done_t dr, dw, dp, dt;
  pt_done_init(&dr);
  pt_done_init(&dw);
  pt_done_init(&dp);
  pt_done_init(&dt);
  CU_ASSERT_EQUAL(
      taxi_proactor_read(p, &rop, sv[0], buf, sizeof buf, 0, pt_on_done, &dr),
      0);
  pt_sleep_ms(5); /* most likely in the kernel by now; either way */
  CU_ASSERT_EQUAL(pt_peer_write(sv[1], "hello", 5), 0);
  CU_ASSERT(ot_wait(&dr, 1));
  CU_ASSERT_EQUAL(dr.status, 0);
  CU_ASSERT_EQUAL(dr.bytes, 5);
  CU_ASSERT(memcmp(buf, "hello", 5) == 0);
  CU_ASSERT(pthread_equal(dr.thread, r.self));

  /* A write, a post and a timer. */
  char world[] = "world";
  taxi_buf_t wb = {world, 5};
  CU_ASSERT_EQUAL(taxi_proactor_write(p, &wop, sv[0], &wb, 1, pt_on_done, &dw),
                  0);
  CU_ASSERT_EQUAL(taxi_proactor_post(p, &post, pt_on_done, &dp), 0);
  CU_ASSERT_EQUAL(
      taxi_proactor_timer(p, &tim, TAXI_NSEC_PER_MSEC, pt_on_done, &dt), 0);
  CU_ASSERT(ot_wait(&dw, 1) && ot_wait(&dp, 1) && ot_wait(&dt, 1));
  CU_ASSERT_EQUAL(dw.status, 0);
  CU_ASSERT(pthread_equal(dw.thread, r.self));
  CU_ASSERT(pthread_equal(dp.thread, r.self));
  CU_ASSERT(pthread_equal(dt.thread, r.self));
  char got[8];
  size_t n = 0;
  CU_ASSERT_EQUAL(pt_peer_read(sv[1], got, 5, &n), 0);
  CU_ASSERT(n == 5 && memcmp(got, "world", 5) == 0);

  /* A cancel from here. */
  pt_done_init(&dr);
  CU_ASSERT_EQUAL(
      taxi_proactor_read(p, &rop, sv[0], buf, sizeof buf, 0, pt_on_done, &dr),
      0);
  pt_sleep_ms(5);
  CU_ASSERT_EQUAL(taxi_proactor_cancel(p, &rop), 0);
  CU_ASSERT(ot_wait(&dr, 1));
  CU_ASSERT_EQUAL(dr.status, TAXI_ECANCELED);
  CU_ASSERT(pthread_equal(dr.thread, r.self));

  /* A read left pending when the dispatching thread ends: the destroy
   * made here completes it. */
  pt_done_init(&dr);
  CU_ASSERT_EQUAL(
      taxi_proactor_read(p, &rop, sv[0], buf, sizeof buf, 0, pt_on_done, &dr),
      0);
  pt_sleep_ms(5);
  CU_ASSERT_EQUAL(taxi_proactor_stop(p), 0);
  pt_thread_join(&t, 1, "taxi_proactor_run of a ONE_THREAD proactor");
  CU_ASSERT_EQUAL(r.rc, TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(atomic_load(&dr.calls), 0);
  pt_destroy(p);
  CU_ASSERT_EQUAL(atomic_load(&dr.calls), 1);
  CU_ASSERT_EQUAL(dr.status, TAXI_ECANCELED);
  pt_close(&sv[1]);
}

static void test_foreign(void) { ot_foreign(TAXI_PROACTOR_ONE_THREAD); }
static void test_foreign_nodefer(void) {
  ot_foreign(TAXI_PROACTOR_ONE_THREAD | TAXI_PROACTOR_NO_DEFER_TASKRUN);
}

static CU_TestInfo one_thread_tests[] = {
    {"features; a second dispatcher and a pool refused", test_refusals},
    {"the same without DEFER_TASKRUN", test_refusals_nodefer},
    {"unknown flags; features of NULL", test_bad_flags},
    {"requests from another thread run in the dispatching one", test_foreign},
    {"the same without DEFER_TASKRUN", test_foreign_nodefer},
    CU_TEST_INFO_NULL,
};
const taxi_test_suite_t pt_suite_one_thread = {"one thread", one_thread_tests,
                                               120, NULL};
