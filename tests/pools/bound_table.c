/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/pools/bound_table.c - the table of expected replies without a
 * connection (taxi_lf_bound_t): replies delivered by the application's own
 * code, from another thread or from a proactor's completion handlers run
 * by a Leader/Followers pool over the proactor.
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TB_WAITERS 8

typedef struct tb_waiter {
  taxi_lf_bound_t *b;
  uint64_t id;
  atomic_int registered;
  int rc;
  char buf[16];
} tb_waiter_t;

static void tb_waiter_main(void *arg) {
  tb_waiter_t *w = arg;
  taxi_lf_expect_t e;
  taxi_lf_expect_init(&e, w->id, w->buf, sizeof w->buf);
  w->rc = taxi_lf_bound_expect(w->b, &e);
  atomic_store(&w->registered, 1);
  if (w->rc == 0) w->rc = taxi_lf_bound_await(w->b, &e, POOLS_WAIT_MS);
}

static void tb_start(tb_waiter_t *w, util_thread_t *th, taxi_lf_bound_t *b) {
  for (int i = 0; i < TB_WAITERS; i++) {
    memset(&w[i], 0, sizeof w[i]);
    w[i].b = b;
    w[i].id = 1000 + (uint64_t)i;
    CU_ASSERT_EQUAL_FATAL(util_thread_start(&th[i], tb_waiter_main, &w[i]), 0);
  }
  for (int i = 0; i < TB_WAITERS; i++)
    CU_ASSERT(util_wait_flag(&w[i].registered, 1, POOLS_WAIT_MS));
}

static void tb_join(util_thread_t *th) {
  for (int i = 0; i < TB_WAITERS; i++)
    util_thread_join(&th[i], POOLS_WAIT_MS, "table waiter");
}

/* Replies delivered from a thread outside the pool, in reverse order:
 * each reaches the thread that expects it; one nobody expects is
 * TAXI_ENOENT. */
static void test_deliver_from_outside(void) {
  taxi_reactor_t *r = pools_reactor();
  taxi_lf_pool_t *p = NULL;
  CU_ASSERT_EQUAL_FATAL(taxi_lf_create(&p, r, NULL), 0);
  CU_ASSERT_EQUAL(taxi_lf_spawn(p, 2), 0);
  taxi_lf_bound_t *b = NULL;
  taxi_lf_bound_options_t four = TAXI_LF_BOUND_OPTIONS_INIT;
  four.buckets = 4;
  CU_ASSERT_EQUAL_FATAL(taxi_lf_bound_create(&b, p, &four), 0);
  tb_waiter_t w[TB_WAITERS];
  util_thread_t th[TB_WAITERS];
  tb_start(w, th, b);
  for (int i = TB_WAITERS - 1; i >= 0; i--) {
    char body[8];
    int n = snprintf(body, sizeof body, "r%d", i);
    CU_ASSERT_EQUAL(
        taxi_lf_bound_deliver(b, 1000 + (uint64_t)i, body, (size_t)n), 0);
  }
  CU_ASSERT_EQUAL(taxi_lf_bound_deliver(b, 1000, "again", 5), TAXI_ENOENT);
  tb_join(th);
  for (int i = 0; i < TB_WAITERS; i++) {
    char want[8];
    int n = snprintf(want, sizeof want, "r%d", i);
    CU_ASSERT_EQUAL(w[i].rc, n);
    CU_ASSERT_EQUAL(memcmp(w[i].buf, want, (size_t)n), 0);
  }
  CU_ASSERT_EQUAL(taxi_lf_bound_destroy(b), 0);
  CU_ASSERT_EQUAL(taxi_lf_destroy(p), 0);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
}

/* A transport that can deliver no more: every waiter returns its code,
 * and so does every later expect; destroy then frees. */
static void test_fail_wakes_all(void) {
  taxi_reactor_t *r = pools_reactor();
  taxi_lf_pool_t *p = NULL;
  CU_ASSERT_EQUAL_FATAL(taxi_lf_create(&p, r, NULL), 0);
  taxi_lf_bound_t *b = NULL;
  CU_ASSERT_EQUAL_FATAL(taxi_lf_bound_create(&b, p, NULL), 0);
  tb_waiter_t w[TB_WAITERS];
  util_thread_t th[TB_WAITERS];
  tb_start(w, th, b); /* no pool thread: the waiters take part */
  CU_ASSERT_EQUAL(taxi_lf_bound_fail(b, TAXI_ECONNRESET), 0);
  CU_ASSERT_EQUAL(taxi_lf_bound_fail(b, TAXI_EPIPE), 0); /* the first stays */
  tb_join(th);
  for (int i = 0; i < TB_WAITERS; i++)
    CU_ASSERT_EQUAL(w[i].rc, TAXI_ECONNRESET);
  taxi_lf_expect_t e;
  taxi_lf_expect_init(&e, 1, NULL, 0);
  CU_ASSERT_EQUAL(taxi_lf_bound_expect(b, &e), TAXI_ECONNRESET);
  CU_ASSERT_EQUAL(taxi_lf_bound_destroy(b), 0);
  CU_ASSERT_EQUAL(taxi_lf_destroy(p), 0);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
}

/* NULLs, a gone pool, a bad code. */
static void test_table_bad_input(void) {
  taxi_reactor_t *r = pools_reactor();
  taxi_lf_pool_t *p = NULL;
  CU_ASSERT_EQUAL_FATAL(taxi_lf_create(&p, r, NULL), 0);
  taxi_lf_bound_t *b = NULL;
  taxi_lf_expect_t e;
  taxi_lf_expect_init(&e, 1, NULL, 0);
  CU_ASSERT_EQUAL(taxi_lf_bound_create(NULL, p, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_bound_create(&b, NULL, NULL), TAXI_EINVAL);
  taxi_lf_bound_options_t huge, unsized = {0};
  taxi_lf_bound_options_init(&huge);
  huge.buckets = (1u << 24) + 1;
  CU_ASSERT_EQUAL(taxi_lf_bound_create(&b, p, &huge), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_bound_create(&b, p, &unsized), TAXI_EINVAL);
  taxi_lf_bound_options_init(NULL);
  CU_ASSERT_PTR_NULL(b);
  CU_ASSERT_EQUAL(taxi_lf_bound_expect(NULL, &e), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_bound_await(NULL, &e, 0), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_bound_forget(NULL, &e), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_bound_deliver(NULL, 1, "x", 1), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_bound_fail(NULL, TAXI_EPIPE), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_bound_destroy(NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL_FATAL(taxi_lf_bound_create(&b, p, NULL), 0);
  CU_ASSERT_EQUAL(taxi_lf_bound_expect(b, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_bound_await(b, NULL, 0), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_bound_forget(b, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_bound_deliver(b, 1, NULL, 1), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_bound_fail(b, 0), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_bound_fail(b, 3), TAXI_EINVAL);
  /* A record of another table is not this one's. */
  taxi_lf_bound_t *other = NULL;
  CU_ASSERT_EQUAL_FATAL(taxi_lf_bound_create(&other, p, NULL), 0);
  CU_ASSERT_EQUAL(taxi_lf_bound_expect(other, &e), 0);
  CU_ASSERT_EQUAL(taxi_lf_bound_await(b, &e, 0), TAXI_ENOENT);
  CU_ASSERT_EQUAL(taxi_lf_bound_forget(b, &e), TAXI_ENOENT);
  CU_ASSERT_EQUAL(taxi_lf_bound_await(other, &e, 0), TAXI_ETIMEDOUT);
  CU_ASSERT_EQUAL(taxi_lf_bound_destroy(other), 0);
  CU_ASSERT_EQUAL(taxi_lf_bound_destroy(b), 0);
  CU_ASSERT_EQUAL(taxi_lf_destroy(p), 0);
  CU_ASSERT_EQUAL(taxi_lf_bound_create(&b, p, NULL), TAXI_EINVAL); /* gone */
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
}

/* ---- under a proactor's pool --------------------------------------------- */

typedef struct tb_post {
  taxi_op_t op;
  taxi_lf_bound_t *b;
  uint64_t id;
  atomic_int delivered; /* 1 delivered, -1 nobody expected it */
} tb_post_t;

static void tb_posted(taxi_op_t *op, int status, size_t bytes, void *act) {
  tb_post_t *t = act;
  (void)op;
  (void)status;
  (void)bytes;
  char body[8];
  int n = snprintf(body, sizeof body, "p%d", (int)(t->id - 1000));
  int rc = taxi_lf_bound_deliver(t->b, t->id, body, (size_t)n);
  atomic_store(&t->delivered, rc == 0 ? 1 : -1);
}

/* The waiters take part in a Leader/Followers pool over a proactor; the
 * replies come from completion handlers the pool runs. */
static void test_under_proactor_pool(void) {
  char name[64];
  snprintf(name, sizeof name, "emulated:%s", pools_backend);
  taxi_proactor_t *pr = NULL;
  if (util_proactor_create(&pr, name) != 0) {
    printf("\n    not run: no proactor \"%s\" ", name);
    return;
  }
  taxi_lf_pool_t *p = NULL;
  CU_ASSERT_EQUAL_FATAL(taxi_lf_create_proactor(&p, pr, NULL), 0);
  CU_ASSERT_EQUAL(taxi_lf_spawn(p, 1), 0);
  taxi_lf_bound_t *b = NULL;
  CU_ASSERT_EQUAL_FATAL(taxi_lf_bound_create(&b, p, NULL), 0);
  tb_waiter_t w[TB_WAITERS];
  util_thread_t th[TB_WAITERS];
  tb_start(w, th, b);
  static tb_post_t posts[TB_WAITERS];
  for (int i = 0; i < TB_WAITERS; i++) {
    memset(&posts[i], 0, sizeof posts[i]);
    taxi_op_init(&posts[i].op);
    posts[i].b = b;
    posts[i].id = 1000 + (uint64_t)(TB_WAITERS - 1 - i);
    CU_ASSERT_EQUAL(taxi_proactor_post(pr, &posts[i].op, tb_posted, &posts[i]),
                    0);
  }
  tb_join(th);
  for (int i = 0; i < TB_WAITERS; i++) {
    char want[8];
    int n = snprintf(want, sizeof want, "p%d", i);
    CU_ASSERT_EQUAL(w[i].rc, n);
    CU_ASSERT_EQUAL(memcmp(w[i].buf, want, (size_t)n), 0);
    CU_ASSERT(util_wait_flag(&posts[i].delivered, 1, POOLS_WAIT_MS));
  }
  CU_ASSERT_EQUAL(taxi_lf_bound_destroy(b), 0);
  CU_ASSERT_EQUAL(taxi_lf_destroy(p), 0);
  CU_ASSERT_EQUAL(taxi_proactor_destroy(pr), 0);
}

static CU_TestInfo bound_table_tests[] = {
    {"replies delivered from outside the pool", test_deliver_from_outside},
    {"a failed table wakes every waiter", test_fail_wakes_all},
    {"bad input: TAXI_EINVAL, TAXI_ENOENT", test_table_bad_input},
    {"waiters in a proactor's pool, replies from completions",
     test_under_proactor_pool},
    CU_TEST_INFO_NULL,
};
const taxi_test_suite_t pools_suite_bound_table = {
    "bound table", bound_table_tests, 120, NULL};
