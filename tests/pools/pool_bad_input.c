/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/pools/pool_bad_input.c - bad input to each pool of the table:
 * every misuse gets a clear TAXI_E* code (the suites "lf bad input" and
 * "hsha bad input"; the Leader/Followers pool's own calls are tried in
 * lf_bad_input.c).
 */
#define _GNU_SOURCE 1

#include "pool_fixture.h"

static void bad_null(const pool_row_t *row) {
  pool_test_t *t = pool_new(row);
  void *p = NULL;
  pool_counts_t c;
  CU_ASSERT_EQUAL(row->create(t->r, NULL, 0, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(row->create(t->r, NULL, 2, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(row->create(NULL, NULL, 0, &p), TAXI_EINVAL);
  CU_ASSERT_EQUAL(row->stop(NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(row->destroy(NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(row->counts(NULL, &c), TAXI_EINVAL);
  if (row->more_null) row->more_null(t);
  /* NULL options mean defaults. */
  pool_start(t, NULL, 0);
  CU_ASSERT_EQUAL(row->counts(t->p, NULL), TAXI_EINVAL);
  pool_free(t);
}

/* Calls given a destroyed pool are refused with TAXI_EINVAL. */
static void bad_destroyed(const pool_row_t *row) {
  pool_test_t *t = pool_new(row);
  void *p = NULL;
  CU_ASSERT_EQUAL_FATAL(row->create(t->r, NULL, 2, &p), 0);
  CU_ASSERT_EQUAL(
      util_bounded(row->destroy, p, POOLS_WAIT_MS, row->destroy_name), 0);
  pool_counts_t c;
  CU_ASSERT_EQUAL(row->stop(p), TAXI_EINVAL);
  CU_ASSERT_EQUAL(row->counts(p, &c), TAXI_EINVAL);
  CU_ASSERT_EQUAL(row->destroy(p), TAXI_EINVAL);
  if (row->more_destroyed) row->more_destroyed(p);
  pool_free(t);
}

static void bad_shutdown_twice(const pool_row_t *row) {
  pool_test_t *t = pool_new(row);
  pool_start(t, NULL, 2);
  CU_ASSERT_EQUAL(pool_stop_bounded(t, row->stop_name), 0);
  CU_ASSERT_EQUAL(row->stop(t->p), TAXI_ESTOPPED);
  pool_free(t);
}

typedef struct pool_try {
  const pool_row_t *row;
  taxi_reactor_t *r;
} pool_try_t;

/* Create a pool of attempt->row on attempt->r (and destroy it): the result. */
static int pool_do_try_create(void *arg) {
  const pool_try_t *attempt = arg;
  void *p = NULL;
  int rc = attempt->row->create(attempt->r, NULL, 0, &p);
  if (rc == 0) attempt->row->destroy(p);
  return rc;
}

/* No pool of any kind is taken by a reactor that has one. */
static void pool_refused_all(taxi_reactor_t *r) {
  for (int k = 0; k < POOL_N_ROWS; k++) {
    pool_try_t attempt = {pool_rows[k], r};
    CU_ASSERT_EQUAL(util_bounded(pool_do_try_create, &attempt, POOLS_WAIT_MS,
                                 pool_rows[k]->create_name),
                    TAXI_EBUSY);
  }
}

/* One pool per reactor; a reactor with a pool is not dispatched directly;
 * once the pool is gone, direct dispatch and a pool of every kind work
 * again. */
static void bad_second_pool(const pool_row_t *row) {
  pool_test_t *t = pool_new(row);
  pool_conns(t, 1, &pool_count_ops);
  pool_start(t, NULL, 1);
  pool_refused_all(t->r);
  CU_ASSERT_EQUAL(taxi_reactor_handle_events(t->r, 0), TAXI_EBUSY);
  CU_ASSERT_EQUAL(taxi_reactor_handle_one(t->r, 0), TAXI_EBUSY);
  CU_ASSERT_EQUAL(taxi_reactor_run(t->r), TAXI_EBUSY);
  /* Everything else about the reactor works, from any thread. */
  util_write_byte(t->conn[0].sv[1]);
  CU_ASSERT(pool_wait_bytes(t, 1));
  CU_ASSERT_EQUAL(pool_destroy_bounded(t), 0);
  /* Given back. */
  util_write_byte(t->conn[0].sv[1]);
  CU_ASSERT(taxi_reactor_handle_events(t->r, POOLS_WAIT_MS) >= 1);
  CU_ASSERT_EQUAL(pool_total_bytes(t), 2);
  for (int k = 0; k < POOL_N_ROWS; k++) {
    void *p = NULL;
    CU_ASSERT_EQUAL_FATAL(pool_rows[k]->create(t->r, NULL, 0, &p), 0);
    pool_refused_all(t->r);
    CU_ASSERT_EQUAL(util_bounded(pool_rows[k]->destroy, p, POOLS_WAIT_MS,
                                 pool_rows[k]->destroy_name),
                    0);
  }
  pool_free(t);
}

POOL_CASE(lf, bad_null)
POOL_CASE(lf, bad_destroyed)
POOL_CASE(lf, bad_shutdown_twice)
POOL_CASE(lf, bad_second_pool)
POOL_CASE(hsha, bad_null)
POOL_CASE(hsha, bad_destroyed)
POOL_CASE(hsha, bad_shutdown_twice)
POOL_CASE(hsha, bad_second_pool)

static CU_TestInfo lf_bad_tests[] = {
    {"NULL: TAXI_EINVAL", lf_bad_null},
    {"thread counts: TAXI_EINVAL", test_lf_bad_counts},
    {"options: TAXI_EINVAL / TAXI_ENOTSUP", test_lf_bad_options},
    {"destroyed pool: TAXI_EINVAL", lf_bad_destroyed},
    {"shutdown twice: TAXI_ESTOPPED", lf_bad_shutdown_twice},
    {"second pool, direct dispatch: TAXI_EBUSY", lf_bad_second_pool},
    {"reactor being dispatched: TAXI_EBUSY", test_lf_bad_reactor_dispatched},
    {"join, shrink, destroy from a hook: TAXI_EBUSY", test_lf_bad_from_hook},
    CU_TEST_INFO_NULL,
};
const taxi_test_suite_t pools_suite_lf_bad_input = {"lf bad input",
                                                    lf_bad_tests, 60, NULL};

static CU_TestInfo hs_bad_tests[] = {
    {"NULL: TAXI_EINVAL", hsha_bad_null},
    {"limits: TAXI_EINVAL", test_hsha_bad_limits},
    {"destroyed pool: TAXI_EINVAL", hsha_bad_destroyed},
    {"shutdown twice: TAXI_ESTOPPED", hsha_bad_shutdown_twice},
    {"second pool, direct dispatch: TAXI_EBUSY", hsha_bad_second_pool},
    CU_TEST_INFO_NULL,
};
const taxi_test_suite_t pools_suite_hsha_bad_input = {"hsha bad input",
                                                      hs_bad_tests, 60, NULL};
