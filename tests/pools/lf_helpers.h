/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/pools/lf_helpers.h - what the Leader/Followers pool's test files
 * share: the test fixture (a pool over connections), its hooks, the
 * waits on the pool's counters.
 */
#ifndef TAXI_TESTS_POOLS_LF_HELPERS_H
#define TAXI_TESTS_POOLS_LF_HELPERS_H

#include "suites.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LF_MAX_CONNS 64
#define LF_JOIN_MS 60000 /* joins of test threads end by shutdown first */

typedef struct lf_test lf_test_t;

/* A handler on sv[0] of a socketpair; the test writes to sv[1]. */
typedef struct lf_conn {
  taxi_handler_t h;
  int sv[2];
  lf_test_t *t;
  int index;
  atomic_int inputs;
  atomic_long bytes;
  atomic_int closes;
  atomic_int busy;        /* 1 while a hook runs */
  atomic_int overlaps;    /* hooks that found busy already 1 */
  atomic_int hook_done;   /* removal tests: the blocking hook returned */
  atomic_int early_close; /* close hook ran while a hook was running */
} lf_conn_t;

struct lf_test {
  taxi_reactor_t *r;
  taxi_lf_pool_t *p;
  pools_gate_t gate;
  lf_conn_t conn[LF_MAX_CONNS];
  int nconns;
  atomic_int next;     /* order tests: events taken so far */
  atomic_int order[8]; /* pool thread id that ran event k */
  atomic_ullong seen;  /* bit i: pool thread i ran a hook */
  atomic_int bad_thread;
  atomic_int removed; /* removal tests: the remover has called remove */
  int hook_ret;
  /* From inside hooks. */
  atomic_int rc_join, rc_destroy, rc_shrink, rc_shutdown, rc_stats;
  atomic_int threads_after_shutdown;
  atomic_int hook_calls;
  /* Application threads. */
  util_thread_t th[8];
  int join_rc[8];
  int prio[8];
  int join_ms[8];
  int next_thread;
};

#define LF_CONN(hp) TAXI_CONTAINER_OF(hp, lf_conn_t, h)

/* Defined in one of the files, used in others. */
lf_test_t *lf_new(void);
void lf_conns(lf_test_t *t, int n, const taxi_handler_ops_t *ops);
int lf_do_shutdown(void *p);
int lf_do_destroy(void *p);
void lf_teardown(lf_test_t *t);
void lf_free(lf_test_t *t);
void lf_create(lf_test_t *t, taxi_promotion_t promotion,
               taxi_leaders_t leaders);
int lf_start_joiner(lf_test_t *t, int timeout_ms, int prio);
int lf_wait_shape(taxi_lf_pool_t *p, int threads, int leaders, int followers);
int lf_wait_idle(taxi_lf_pool_t *p, unsigned n);
taxi_lf_stats_t lf_stats(taxi_lf_pool_t *p);
long lf_total_bytes(lf_test_t *t);
int lf_total_inputs(lf_test_t *t);
int lf_wait_bytes(lf_test_t *t, long goal);
void lf_note_thread(lf_test_t *t);
void lf_conn_close(taxi_handler_t *h, taxi_handle_t fd);
extern const taxi_handler_ops_t lf_count_ops;
int lf_order_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev);
extern const taxi_handler_ops_t lf_block_ops;
void test_grow_and_shrink(void);
void test_shrink_releases_threads(void);
void test_remove_while_dispatched(void);
void test_remove_while_hook_removes(void);
void test_remove_many_while_busy(void);
void test_timers_in_pool(void);
void test_notifications_in_pool(void);
void test_counters(void);

#endif /* TAXI_TESTS_POOLS_LF_HELPERS_H */
