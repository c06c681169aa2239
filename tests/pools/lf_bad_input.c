/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/pools/lf_bad_input.c - the Leader/Followers pool's bad input:
 * every misuse gets a clear TAXI_E* code.
 */
#define _GNU_SOURCE 1

#include "pool_fixture.h"

/* ---- bad input ----------------------------------------------------------- */

void test_lf_bad_counts(void) {
  pool_test_t *t = pool_new(&pool_row_lf);
  lf_create(t, TAXI_PROMOTE_LIFO, TAXI_LEADERS_ONE);
  CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, 0), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, TAXI_LF_MAX_THREADS + 1), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, 2), 0);
  /* 2 + MAX would exceed the limit: refused before starting any. */
  CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, TAXI_LF_MAX_THREADS - 1), TAXI_EINVAL);
  CU_ASSERT(lf_wait_shape(t->p, 2, -1, -1));
  CU_ASSERT_EQUAL(taxi_lf_shrink(t->p, 3), TAXI_EINVAL);
  CU_ASSERT_EQUAL(lf_stats(t->p).threads, 2);
  /* Joined threads are not the spawned ones shrink counts. */
  int j = lf_start_joiner(t, LF_JOIN_MS, 0);
  CU_ASSERT(lf_wait_shape(t->p, 3, -1, -1));
  CU_ASSERT_EQUAL(taxi_lf_shrink(t->p, 3), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_shrink(t->p, 2), 0);
  CU_ASSERT_EQUAL(lf_stats(t->p).threads, 1);
  CU_ASSERT_EQUAL(taxi_lf_shrink(t->p, 1), TAXI_EINVAL);
  CU_ASSERT_EQUAL(
      util_bounded(lf_do_shutdown, t->p, POOLS_WAIT_MS, "taxi_lf_stop"), 0);
  util_thread_join(&t->th[j], POOLS_WAIT_MS, "taxi_lf_join after shutdown");
  CU_ASSERT_EQUAL(t->join_rc[j], TAXI_ESTOPPED);
  pool_free(t);
}

void test_lf_bad_options(void) {
  pool_test_t *t = pool_new(&pool_row_lf);
  taxi_lf_pool_t *p = NULL;
  taxi_lf_options_t o = TAXI_LF_OPTIONS_INIT;
  o.promotion = (taxi_promotion_t)99;
  CU_ASSERT_EQUAL(taxi_lf_create(&p, t->r, &o), TAXI_EINVAL);
  o.promotion = (taxi_promotion_t)-1;
  CU_ASSERT_EQUAL(taxi_lf_create(&p, t->r, &o), TAXI_EINVAL);
  taxi_lf_options_init(&o);
  o.leaders = (taxi_leaders_t)99;
  CU_ASSERT_EQUAL(taxi_lf_create(&p, t->r, &o), TAXI_EINVAL);
  /* A mode the backend cannot do: decided by its caps. */
  taxi_lf_options_init(&o);
  o.leaders = TAXI_LEADERS_MANY;
  int rc = taxi_lf_create(&p, t->r, &o);
  if (pools_can_many_leaders(t->r)) {
    CU_ASSERT_EQUAL(rc, 0);
    if (rc == 0) CU_ASSERT_EQUAL(taxi_lf_destroy(p), 0);
  } else {
    CU_ASSERT_EQUAL(rc, TAXI_ENOTSUP);
  }
  /* None of the refusals left the reactor attached to a pool. */
  CU_ASSERT_EQUAL(taxi_reactor_handle_events(t->r, 0), 0);
  lf_create(t, TAXI_PROMOTE_LIFO, TAXI_LEADERS_ONE);
  pool_free(t);
}

/* A reactor being dispatched by a thread takes no pool. */
typedef struct lf_direct {
  taxi_reactor_t *r;
  int rc;
} lf_direct_t;

static void lf_direct_main(void *arg) {
  lf_direct_t *d = arg;
  d->rc = taxi_reactor_handle_events(d->r, POOLS_WAIT_MS);
}

void test_lf_bad_reactor_dispatched(void) {
  pool_test_t *t = pool_new(&pool_row_lf);
  pool_conns(t, 1, &pool_block_ops);
  util_write_byte(t->conn[0].sv[1]);
  static lf_direct_t d;
  d.r = t->r;
  d.rc = 0;
  util_thread_t dt;
  CU_ASSERT_EQUAL_FATAL(util_thread_start(&dt, lf_direct_main, &d), 0);
  CU_ASSERT(pools_wait_count(&t->gate.entered, 1, POOLS_WAIT_MS));
  taxi_lf_pool_t *p = NULL;
  CU_ASSERT_EQUAL(taxi_lf_create(&p, t->r, NULL), TAXI_EBUSY);
  pools_gate_open(&t->gate);
  util_thread_join(&dt, POOLS_WAIT_MS, "taxi_reactor_handle_events");
  CU_ASSERT_EQUAL(d.rc, 1);
  lf_create(t, TAXI_PROMOTE_LIFO, TAXI_LEADERS_ONE);
  pool_free(t);
}

/* From a hook of the pool: join, shrink and destroy are refused with
 * TAXI_EBUSY (each would wait for itself). */
static int lf_reenter_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  pool_conn_t *c = POOL_CONN(h);
  pool_test_t *t = c->t;
  (void)ev;
  pools_drain(fd);
  atomic_store(&t->rc_join, taxi_lf_join(t->p, 0, 0));
  atomic_store(&t->rc_shrink, taxi_lf_shrink(t->p, 1));
  atomic_store(&t->rc_destroy, taxi_lf_destroy(t->p));
  taxi_lf_stats_t s;
  atomic_store(&t->rc_stats, taxi_lf_stats(t->p, &s));
  atomic_fetch_add(&c->inputs, 1);
  return 0;
}

static const taxi_handler_ops_t lf_reenter_ops = {.input = lf_reenter_input,
                                                  .close = pool_conn_close};

void test_lf_bad_from_hook(void) {
  pool_test_t *t = pool_new(&pool_row_lf);
  pool_conns(t, 1, &lf_reenter_ops);
  lf_create(t, TAXI_PROMOTE_LIFO, TAXI_LEADERS_ONE);
  CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, 2), 0);
  util_write_byte(t->conn[0].sv[1]);
  CU_ASSERT(pools_wait_count(&t->conn[0].inputs, 1, POOLS_WAIT_MS));
  CU_ASSERT_EQUAL(atomic_load(&t->rc_join), TAXI_EBUSY);
  CU_ASSERT_EQUAL(atomic_load(&t->rc_shrink), TAXI_EBUSY);
  CU_ASSERT_EQUAL(atomic_load(&t->rc_destroy), TAXI_EBUSY);
  CU_ASSERT_EQUAL(atomic_load(&t->rc_stats), 0);
  /* The pool goes on. */
  CU_ASSERT(lf_wait_idle(t->p, 2));
  pool_free(t);
}
