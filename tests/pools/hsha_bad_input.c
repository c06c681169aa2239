/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/pools/hsha_bad_input.c - the half-sync/half-async pool's bad
 * input: every misuse gets a clear TAXI_E* code.
 */
#define _GNU_SOURCE 1

#include "hsha_helpers.h"

/* ---- bad input ----------------------------------------------------------- */

static void test_bad_null(void) {
  hs_test_t *t = hs_new();
  taxi_hsha_pool_t *p = NULL;
  taxi_hsha_stats_t s;
  taxi_hsha_options_t o = TAXI_HSHA_OPTIONS_INIT;
  CU_ASSERT_EQUAL(taxi_hsha_create(NULL, t->r, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_hsha_create(NULL, t->r, &o), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_hsha_create(&p, NULL, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_hsha_stop(NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_hsha_destroy(NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_hsha_stats(NULL, &s), TAXI_EINVAL);
  hs_create(t, NULL);
  CU_ASSERT_EQUAL(taxi_hsha_stats(t->p, NULL), TAXI_EINVAL);
  hs_free(t);
}

static void test_bad_limits(void) {
  hs_test_t *t = hs_new();
  taxi_hsha_pool_t *p = NULL;
  taxi_hsha_options_t o = TAXI_HSHA_OPTIONS_INIT;
  o.workers = TAXI_HSHA_MAX_WORKERS + 1;
  CU_ASSERT_EQUAL(taxi_hsha_create(&p, t->r, &o), TAXI_EINVAL);
  taxi_hsha_options_init(&o);
  o.queue_capacity = TAXI_HSHA_MAX_QUEUE + 1;
  CU_ASSERT_EQUAL(taxi_hsha_create(&p, t->r, &o), TAXI_EINVAL);
  taxi_hsha_options_init(&o);
  o.queue_capacity = 8;
  o.high_water = 9;
  CU_ASSERT_EQUAL(taxi_hsha_create(&p, t->r, &o), TAXI_EINVAL);
  /* With the default capacity (1024). */
  taxi_hsha_options_init(&o);
  o.high_water = 1025;
  CU_ASSERT_EQUAL(taxi_hsha_create(&p, t->r, &o), TAXI_EINVAL);
  /* A full-queue policy unknown, or rejecting with no busy path. */
  taxi_hsha_options_init(&o);
  o.full = (taxi_hsha_full_t)7;
  CU_ASSERT_EQUAL(taxi_hsha_create(&p, t->r, &o), TAXI_EINVAL);
  o.full = TAXI_HSHA_FULL_REJECT;
  CU_ASSERT_EQUAL(taxi_hsha_create(&p, t->r, &o), TAXI_EINVAL);
  CU_ASSERT_PTR_NULL(p);
  /* The refusals left the reactor free. */
  CU_ASSERT_EQUAL(taxi_reactor_handle_events(t->r, 0), 0);
  taxi_hsha_options_init(&o);
  o.queue_capacity = 8;
  o.high_water = 8;
  hs_create(t, &o);
  hs_free(t);
}

static void test_bad_destroyed(void) {
  hs_test_t *t = hs_new();
  taxi_hsha_pool_t *p = NULL;
  CU_ASSERT_EQUAL_FATAL(taxi_hsha_create(&p, t->r, NULL), 0);
  CU_ASSERT_EQUAL(
      util_bounded(hs_do_destroy, p, POOLS_WAIT_MS, "taxi_hsha_destroy"), 0);
  taxi_hsha_stats_t s;
  CU_ASSERT_EQUAL(taxi_hsha_stop(p), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_hsha_stats(p, &s), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_hsha_destroy(p), TAXI_EINVAL);
  /* An LF call given an HSHA pool pointer is not fooled either. */
  CU_ASSERT_EQUAL(taxi_lf_join((taxi_lf_pool_t *)(void *)p, 0, 0), TAXI_EINVAL);
  hs_free(t);
}

static void test_bad_shutdown_twice(void) {
  hs_test_t *t = hs_new();
  hs_create(t, NULL);
  CU_ASSERT_EQUAL(
      util_bounded(hs_do_shutdown, t->p, POOLS_WAIT_MS, "taxi_hsha_stop"), 0);
  CU_ASSERT_EQUAL(taxi_hsha_stop(t->p), TAXI_ESTOPPED);
  hs_free(t);
}

static void test_bad_second_pool(void) {
  hs_test_t *t = hs_new();
  hs_conns(t, 1, &hs_count_ops);
  hs_create(t, NULL);
  taxi_hsha_pool_t *p2 = NULL;
  taxi_lf_pool_t *lp = NULL;
  CU_ASSERT_EQUAL(taxi_hsha_create(&p2, t->r, NULL), TAXI_EBUSY);
  CU_ASSERT_EQUAL(taxi_lf_create(&lp, t->r, NULL), TAXI_EBUSY);
  CU_ASSERT_EQUAL(taxi_reactor_handle_events(t->r, 0), TAXI_EBUSY);
  CU_ASSERT_EQUAL(taxi_reactor_handle_one(t->r, 0), TAXI_EBUSY);
  CU_ASSERT_EQUAL(taxi_reactor_run(t->r), TAXI_EBUSY);
  util_write_byte(t->conn[0].sv[1]);
  CU_ASSERT(hs_wait_bytes(t, 1));
  CU_ASSERT_EQUAL(
      util_bounded(hs_do_destroy, t->p, POOLS_WAIT_MS, "taxi_hsha_destroy"), 0);
  t->p = NULL;
  /* Given back. */
  util_write_byte(t->conn[0].sv[1]);
  CU_ASSERT(taxi_reactor_handle_events(t->r, POOLS_WAIT_MS) >= 1);
  CU_ASSERT_EQUAL(hs_total_bytes(t), 2);
  /* An LF pool on it first, then an HSHA pool is refused. */
  CU_ASSERT_EQUAL_FATAL(taxi_lf_create(&lp, t->r, NULL), 0);
  CU_ASSERT_EQUAL(taxi_hsha_create(&p2, t->r, NULL), TAXI_EBUSY);
  CU_ASSERT_EQUAL(taxi_lf_destroy(lp), 0);
  hs_free(t);
}

static CU_TestInfo hs_bad_tests[] = {
    {"NULL: TAXI_EINVAL", test_bad_null},
    {"limits: TAXI_EINVAL", test_bad_limits},
    {"destroyed pool: TAXI_EINVAL", test_bad_destroyed},
    {"shutdown twice: TAXI_ESTOPPED", test_bad_shutdown_twice},
    {"second pool, direct dispatch: TAXI_EBUSY", test_bad_second_pool},
    CU_TEST_INFO_NULL,
};
const taxi_test_suite_t pools_suite_hsha_bad_input = {"hsha bad input",
                                                      hs_bad_tests, 60, NULL};
