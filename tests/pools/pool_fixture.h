/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/pools/pool_fixture.h - what the tests of the two thread pools
 * share: the table of pools (one row each for Leader/Followers and
 * half-sync/half-async), the test fixture (a pool of either kind over
 * connections), its hooks, and the waits on the pool's counters.
 *
 * A case that applies to both pools is written once, as a function of a
 * row (pool_alloc.c, pool_shutdown.c, pool_bad_input.c, pool_serial.c),
 * and POOL_CASE makes the CUnit test of each row from it; what the pools
 * do differently (how they are created and stopped, what their counters
 * are called, what else a caller may get wrong) is in the row
 * (pool_rows.c).  What applies to one pool only stays in its own files
 * (lf.c, lf_pool.c, lf_bad_input.c; hsha.c).
 */
#ifndef TAXI_TESTS_POOLS_POOL_FIXTURE_H
#define TAXI_TESTS_POOLS_POOL_FIXTURE_H

#include "suites.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define POOL_MAX_CONNS 80
#define POOL_MAX_APP_THREADS 8
#define LF_JOIN_MS 60000 /* joins of test threads end by shutdown first */

typedef struct pool_test pool_test_t;

/* A handler on sv[0] of a socketpair; the test writes to sv[1]. */
typedef struct pool_conn {
  taxi_handler_t h;
  int sv[2];
  pool_test_t *t;
  int index;
  int prio; /* hsha: what the priority callback returns for it */
  atomic_int inputs;
  atomic_long bytes;
  atomic_int closes;
  atomic_int busy;        /* 1 while a hook runs */
  atomic_int overlaps;    /* hooks that found busy already 1 */
  atomic_int hook_done;   /* the blocking hook returned */
  atomic_int early_close; /* close hook ran while a hook was running */
  atomic_int rejected;    /* hsha: calls of the busy hook */
} pool_conn_t;

/* What both pools count, read through the row. */
typedef struct pool_counts {
  unsigned threads; /* lf: threads in the pool; hsha: workers */
  uint64_t events;  /* hooks run */
  unsigned queued;  /* hsha: events waiting for a worker; lf: 0 */
} pool_counts_t;

/* One pool of the table. */
typedef struct pool_row {
  const char *name; /* "lf", "hsha": the suites' names start with it */
  const char *create_name, *stop_name, *destroy_name; /* for messages */
  /* Create a pool on r with `opts` (the pool's own options type, NULL:
   * defaults) and `threads` threads dispatching (0: the pool's default,
   * lf none spawned, hsha NULL options); on failure nothing is left
   * behind and *out is untouched.  out, r NULL are passed on as NULL. */
  int (*create)(taxi_reactor_t *r, const void *opts, unsigned threads,
                void **out);
  int (*stop)(void *p);
  int (*destroy)(void *p);
  /* taxi_*_stats, translated; out NULL is passed on as NULL. */
  int (*counts)(void *p, pool_counts_t *out);
  /* 1 when the pool holds n threads, none of them in a hook. */
  int (*idle)(const pool_counts_t *c, void *p, unsigned n);
  /* Options (for create) with the pool's optional ordering in use: LF
   * priority promotion; HS/HA a priority callback (hs_priority, over t). */
  const void *(*priority_options)(pool_test_t *t);
  /* Called by the shared hooks: records which thread runs them. */
  void (*note_thread)(pool_test_t *t);
  /* NULL, or start an application thread that lends itself to the pool
   * (taxi_lf_join(p, timeout_ms, prio)); returns its slot in t->th. */
  int (*add_app_thread)(pool_test_t *t, int timeout_ms, int prio);
  /* The checks of the pool's own calls that the shared bad-input cases
   * do not know: on NULL, and on a pool already destroyed. */
  void (*more_null)(pool_test_t *t);
  void (*more_destroyed)(void *destroyed);
} pool_row_t;

extern const pool_row_t pool_row_lf;
extern const pool_row_t pool_row_hsha;
/* Both rows, for the cases that try every pool on one reactor. */
extern const pool_row_t *const pool_rows[];
#define POOL_N_ROWS 2

/* The CUnit test of `row` (lf or hsha) for case fn(const pool_row_t *). */
#define POOL_CASE(row, fn) \
  static void row##_##fn(void) { fn(&pool_row_##row); }

struct pool_test {
  const pool_row_t *row;
  taxi_reactor_t *r;
  void *p; /* taxi_lf_pool_t or taxi_hsha_pool_t, as row says */
  pools_gate_t gate;
  pool_conn_t conn[POOL_MAX_CONNS];
  int nconns;
  int torn_down;
  /* Order in which the counting hook ran (conn index). */
  atomic_int next;
  atomic_int order[POOL_MAX_CONNS];
  /* From inside hooks. */
  atomic_int hook_calls;
  atomic_int rc_join, rc_destroy, rc_shrink, rc_shutdown, rc_shutdown2,
      rc_stats;
  atomic_int threads_after_stop;
  /* lf: pool thread ids. */
  atomic_int thread_next;     /* order tests: events taken so far */
  atomic_int thread_order[8]; /* pool thread id that ran event k */
  atomic_ullong seen;         /* bit i: pool thread i ran a hook */
  atomic_int bad_thread;
  atomic_int removed; /* removal tests: the remover has called remove */
  int hook_ret;
  /* lf: application threads in taxi_lf_join. */
  util_thread_t th[POOL_MAX_APP_THREADS];
  int join_rc[POOL_MAX_APP_THREADS];
  int prio[POOL_MAX_APP_THREADS];
  int join_ms[POOL_MAX_APP_THREADS];
  int next_thread;
  /* hsha: threads seen in hooks and in the priority callback. */
  pthread_t main_tid;
  pthread_mutex_t mu;
  pthread_t workers[16];
  int nworkers_seen;
  pthread_t reactor_tid;
  int have_reactor_tid;
  atomic_int reactor_tids_differ; /* the callback ran in two threads */
  atomic_int on_main;             /* hooks run by the main thread */
  atomic_int on_reactor;          /* hooks run by the reactor thread */
  atomic_int prio_calls;
};

#define POOL_CONN(hp) TAXI_CONTAINER_OF(hp, pool_conn_t, h)

/* ---- the fixture (pool_fixture.c) ---------------------------------------- */

pool_test_t *pool_new(const pool_row_t *row);
/* n handlers with ops, registered for READ. */
void pool_conns(pool_test_t *t, int n, const taxi_handler_ops_t *ops);
/* row->create into t->p; CU_FAIL_FATAL when it fails. */
void pool_start(pool_test_t *t, const void *opts, unsigned threads);
/* Join the application threads (bounded) and forget them. */
void pool_join_app_threads(pool_test_t *t, const char *what);
/* Destroy the pool (bounded), join the application threads, destroy the
 * reactor, close the pairs; t stays.  Once. */
void pool_teardown(pool_test_t *t);
/* pool_teardown if not done yet, then free t. */
void pool_free(pool_test_t *t);
/* Bounded stop and destroy of t->p; destroy sets t->p to NULL. */
int pool_stop_bounded(pool_test_t *t, const char *what);
int pool_destroy_bounded(pool_test_t *t);
pool_counts_t pool_counts(pool_test_t *t);
int pool_wait_threads(pool_test_t *t, unsigned n);
int pool_wait_idle(pool_test_t *t, unsigned n);
int pool_wait_queued(pool_test_t *t, unsigned n);
long pool_total_bytes(pool_test_t *t);
int pool_total_inputs(pool_test_t *t);
int pool_wait_bytes(pool_test_t *t, long goal);

/* Hooks: close counts; count notes the thread, records the order, drains;
 * block drains, counts and waits for the gate. */
void pool_conn_close(taxi_handler_t *h, taxi_handle_t fd);
extern const taxi_handler_ops_t pool_count_ops;
extern const taxi_handler_ops_t pool_block_ops;
int pool_count_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev);
int pool_block_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev);

/* ---- Leader/Followers (pool_rows.c) -------------------------------------- */

int lf_do_shutdown(void *p);
int lf_do_destroy(void *p);
void lf_create(pool_test_t *t, taxi_promotion_t promotion,
               taxi_leaders_t leaders);
int lf_start_joiner(pool_test_t *t, int timeout_ms, int prio);
int lf_wait_shape(taxi_lf_pool_t *p, int threads, int leaders, int followers);
int lf_wait_idle(taxi_lf_pool_t *p, unsigned n);
taxi_lf_stats_t lf_stats(taxi_lf_pool_t *p);
void lf_note_thread(pool_test_t *t);
int lf_order_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev);

/* ---- half-sync/half-async (pool_rows.c) ---------------------------------- */

int hs_do_shutdown(void *p);
int hs_do_destroy(void *p);
void hs_create(pool_test_t *t, const taxi_hsha_options_t *o);
taxi_hsha_stats_t hs_stats(taxi_hsha_pool_t *p);
void hs_note_thread(pool_test_t *t);
int hs_mixed_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev);
int hs_priority(taxi_handler_t *h, unsigned events, void *arg);

/* ---- tests of one pool that live in another file ------------------------- */

void test_grow_and_shrink(void);
void test_shrink_releases_threads(void);
void test_remove_while_dispatched(void);
void test_remove_while_hook_removes(void);
void test_remove_many_while_busy(void);
void test_timers_in_pool(void);
void test_notifications_in_pool(void);
void test_counters(void);

/* lf_bad_input.c: the Leader/Followers pool's own calls; hsha.c: the
 * HS/HA options (tests of the "... bad input" suites). */
void test_lf_bad_counts(void);
void test_lf_bad_options(void);
void test_lf_bad_reactor_dispatched(void);
void test_lf_bad_from_hook(void);
void test_hsha_bad_limits(void);

/* The shared cases of one row, in the order of the suites' tables. */
void pool_one_thread_per_handle(const pool_row_t *row, const void *opts);
void pool_shutdown_busy(const pool_row_t *row, int queued);
void pool_shutdown_idle(const pool_row_t *row, const void *opts);
void pool_shutdown_from_hook(const pool_row_t *row);
void pool_destroy_running(const pool_row_t *row);

#endif /* TAXI_TESTS_POOLS_POOL_FIXTURE_H */
