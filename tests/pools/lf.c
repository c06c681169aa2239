/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/pools/lf.c - the Leader/Followers pool (taxi/lf.h): dispatch by
 * spawned and joined threads, join's time limit, the promotion orders,
 * one thread per handle at a time, multiple leaders, events taken from an
 * earlier wait, shutdown (busy, idle, from a hook), growing and shrinking,
 * removal during dispatch, the counters, allocations per event, and bad
 * input.
 *
 * Hooks that must stay in a thread block on a gate (pools_gate_t) that the
 * test opens; every wait is bounded (see suites.h).
 */
#define _GNU_SOURCE 1

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

static lf_test_t *lf_new(void) {
  lf_test_t *t = calloc(1, sizeof *t);
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  pools_gate_init(&t->gate);
  atomic_init(&t->next, 0);
  for (int i = 0; i < 8; i++) atomic_init(&t->order[i], -1);
  atomic_init(&t->seen, 0);
  atomic_init(&t->bad_thread, 0);
  atomic_init(&t->removed, 0);
  atomic_init(&t->rc_join, 1);
  atomic_init(&t->rc_destroy, 1);
  atomic_init(&t->rc_shrink, 1);
  atomic_init(&t->rc_shutdown, 1);
  atomic_init(&t->rc_stats, 1);
  atomic_init(&t->threads_after_shutdown, -1);
  atomic_init(&t->hook_calls, 0);
  t->r = pools_reactor();
  return t;
}

/* n handlers with ops, registered for READ. */
static void lf_conns(lf_test_t *t, int n, const taxi_handler_ops_t *ops) {
  CU_ASSERT_FATAL(n <= LF_MAX_CONNS);
  for (int i = 0; i < n; i++) {
    lf_conn_t *c = &t->conn[i];
    pools_pair(c->sv);
    c->t = t;
    c->index = i;
    atomic_init(&c->inputs, 0);
    atomic_init(&c->bytes, 0);
    atomic_init(&c->closes, 0);
    atomic_init(&c->busy, 0);
    atomic_init(&c->overlaps, 0);
    atomic_init(&c->hook_done, 0);
    atomic_init(&c->early_close, 0);
    CU_ASSERT_EQUAL_FATAL(taxi_handler_init(&c->h, ops), 0);
    CU_ASSERT_EQUAL_FATAL(
        taxi_reactor_register(t->r, c->sv[0], &c->h, TAXI_EV_READ), 0);
  }
  t->nconns = n;
}

static int lf_do_shutdown(void *p) { return taxi_lf_stop(p); }
static int lf_do_destroy(void *p) { return taxi_lf_destroy(p); }

/* Destroy the pool (bounded), the reactor, the pairs; t stays. */
static void lf_teardown(lf_test_t *t) {
  pools_gate_open(&t->gate);
  if (t->p) {
    CU_ASSERT_EQUAL(
        util_bounded(lf_do_destroy, t->p, POOLS_WAIT_MS, "taxi_lf_destroy"), 0);
    t->p = NULL;
  }
  for (int i = 0; i < t->next_thread; i++)
    util_thread_join(&t->th[i], POOLS_WAIT_MS, "a thread in taxi_lf_join");
  CU_ASSERT_EQUAL(taxi_reactor_destroy(t->r), 0);
  for (int i = 0; i < t->nconns; i++) pools_close_pair(t->conn[i].sv);
  CU_ASSERT_EQUAL(atomic_load(&t->gate.timeouts), 0);
}

static void lf_free(lf_test_t *t) {
  lf_teardown(t);
  free(t);
}

static void lf_create(lf_test_t *t, taxi_promotion_t promotion,
                      taxi_leaders_t leaders) {
  taxi_lf_options_t o = TAXI_LF_OPTIONS_INIT;
  o.promotion = promotion;
  o.leaders = leaders;
  int rc = taxi_lf_create(&t->p, t->r, &o);
  if (rc != 0) printf("\n    taxi_lf_create = %s\n", taxi_error_name(rc));
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  CU_ASSERT_PTR_NOT_NULL_FATAL(t->p);
}

/* An application thread: taxi_lf_join(p, join_ms[i], prio[i]). */
typedef struct lf_joiner {
  lf_test_t *t;
  int i;
} lf_joiner_t;

static lf_joiner_t lf_joiners[8];

static void lf_join_main(void *arg) {
  lf_joiner_t *j = arg;
  lf_test_t *t = j->t;
  t->join_rc[j->i] = taxi_lf_join(t->p, t->join_ms[j->i], t->prio[j->i]);
}

/* Start application thread number t->next_thread. */
static int lf_start_joiner(lf_test_t *t, int timeout_ms, int prio) {
  int i = t->next_thread++;
  CU_ASSERT_FATAL(i < 8);
  t->join_ms[i] = timeout_ms;
  t->prio[i] = prio;
  t->join_rc[i] = 1;
  lf_joiners[i].t = t;
  lf_joiners[i].i = i;
  CU_ASSERT_EQUAL_FATAL(
      util_thread_start(&t->th[i], lf_join_main, &lf_joiners[i]), 0);
  return i;
}

/* ---- stats predicates ---------------------------------------------------- */

/* -1: any value. */
typedef struct lf_shape {
  int threads, leaders, followers;
} lf_shape_t;

static int lf_pred_shape(const taxi_lf_stats_t *s, void *arg) {
  const lf_shape_t *w = arg;
  return (w->threads < 0 || s->threads == (unsigned)w->threads) &&
         (w->leaders < 0 || s->leaders == (unsigned)w->leaders) &&
         (w->followers < 0 || s->followers == (unsigned)w->followers);
}

static int lf_wait_shape(taxi_lf_pool_t *p, int threads, int leaders,
                         int followers) {
  lf_shape_t w = {threads, leaders, followers};
  taxi_lf_stats_t s;
  if (pools_lf_wait(p, lf_pred_shape, &w, POOLS_WAIT_MS, &s)) return 1;
  printf(
      "\n    stats never showed threads %d leaders %d followers %d: "
      "threads %u leaders %u followers %u\n",
      threads, leaders, followers, s.threads, s.leaders, s.followers);
  return 0;
}

/* Idle: n threads, each leading or following. */
static int lf_pred_idle(const taxi_lf_stats_t *s, void *arg) {
  unsigned n = *(const unsigned *)arg;
  return s->threads == n && s->leaders + s->followers == n;
}

static int lf_wait_idle(taxi_lf_pool_t *p, unsigned n) {
  taxi_lf_stats_t s;
  if (pools_lf_wait(p, lf_pred_idle, &n, POOLS_WAIT_MS, &s)) return 1;
  printf(
      "\n    pool never idle with %u threads: threads %u leaders %u "
      "followers %u\n",
      n, s.threads, s.leaders, s.followers);
  return 0;
}

static int lf_pred_leaders_ge(const taxi_lf_stats_t *s, void *arg) {
  return s->leaders >= *(const unsigned *)arg;
}

static taxi_lf_stats_t lf_stats(taxi_lf_pool_t *p) {
  taxi_lf_stats_t s;
  memset(&s, 0, sizeof s);
  CU_ASSERT_EQUAL(taxi_lf_stats(p, &s), 0);
  return s;
}

static long lf_total_bytes(lf_test_t *t) {
  long n = 0;
  for (int i = 0; i < t->nconns; i++) n += atomic_load(&t->conn[i].bytes);
  return n;
}

static int lf_total_inputs(lf_test_t *t) {
  int n = 0;
  for (int i = 0; i < t->nconns; i++) n += atomic_load(&t->conn[i].inputs);
  return n;
}

/* Wait until the hooks have read `goal` bytes in all. */
static int lf_wait_bytes(lf_test_t *t, long goal) {
  taxi_time_t start = taxi_now();
  while (lf_total_bytes(t) < goal) {
    if (util_elapsed_ms(start) > POOLS_WAIT_MS) {
      printf("\n    %ld of %ld bytes read by the hooks\n", lf_total_bytes(t),
             goal);
      return 0;
    }
    util_sleep_ms(1);
  }
  return 1;
}

/* ---- hooks --------------------------------------------------------------- */

static void lf_note_thread(lf_test_t *t) {
  int id = taxi_lf_current_thread(t->p);
  if (id < 0)
    atomic_fetch_add(&t->bad_thread, 1);
  else if (id < 64)
    atomic_fetch_or(&t->seen, 1ull << id);
}

static void lf_conn_close(taxi_handler_t *h, taxi_handle_t fd) {
  lf_conn_t *c = LF_CONN(h);
  (void)fd;
  if (atomic_load(&c->busy)) atomic_store(&c->early_close, 1);
  atomic_fetch_add(&c->closes, 1);
}

/* Count, note the pool thread, drain. */
static int lf_count_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  lf_conn_t *c = LF_CONN(h);
  (void)ev;
  lf_note_thread(c->t);
  atomic_fetch_add(&c->bytes, pools_drain(fd));
  atomic_fetch_add(&c->inputs, 1);
  return 0;
}

static const taxi_handler_ops_t lf_count_ops = {.input = lf_count_input,
                                                .close = lf_conn_close};

/* Record which pool thread takes the k-th event, then block. */
static int lf_order_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  lf_conn_t *c = LF_CONN(h);
  lf_test_t *t = c->t;
  (void)ev;
  int k = atomic_fetch_add(&t->next, 1);
  if (k < 8) atomic_store(&t->order[k], taxi_lf_current_thread(t->p));
  atomic_fetch_add(&c->bytes, pools_drain(fd));
  atomic_fetch_add(&c->inputs, 1);
  pools_gate_pass(&t->gate);
  return 0;
}

static const taxi_handler_ops_t lf_order_ops = {.input = lf_order_input,
                                                .close = lf_conn_close};

/* Drain, count, block until the gate opens, count the return. */
static int lf_block_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  lf_conn_t *c = LF_CONN(h);
  (void)ev;
  atomic_store(&c->busy, 1);
  atomic_fetch_add(&c->bytes, pools_drain(fd));
  atomic_fetch_add(&c->inputs, 1);
  pools_gate_pass(&c->t->gate);
  atomic_store(&c->busy, 0);
  atomic_fetch_add(&c->hook_done, 1);
  return 0;
}

static const taxi_handler_ops_t lf_block_ops = {.input = lf_block_input,
                                                .close = lf_conn_close};

/* ---- dispatch by spawned and joined threads ------------------------------ */

/* Three spawned threads and an application thread joined with a time limit,
 * at the same time: every event is dispatched, by pool threads only, and
 * the application thread's join returns 0 at shutdown. */
static void test_spawn_and_join(void) {
  enum { CONNS = 8, ROUNDS = 200 };
  lf_test_t *t = lf_new();
  lf_conns(t, CONNS, &lf_count_ops);
  lf_create(t, TAXI_PROMOTE_LIFO, TAXI_LEADERS_ONE);
  CU_ASSERT_EQUAL(taxi_lf_current_thread(t->p), -1);
  CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, 3), 0);
  int j = lf_start_joiner(t, LF_JOIN_MS, 0);
  CU_ASSERT(lf_wait_shape(t->p, 4, -1, -1));
  int ok = 1;
  for (int round = 0; round < ROUNDS && ok; round++) {
    for (int i = 0; i < CONNS; i++)
      CU_ASSERT_EQUAL(util_write_byte(t->conn[i].sv[1]), 1);
    ok = lf_wait_bytes(t, (long)CONNS * (round + 1));
  }
  CU_ASSERT(ok);
  CU_ASSERT_EQUAL(lf_total_bytes(t), (long)CONNS * ROUNDS);
  CU_ASSERT_EQUAL(atomic_load(&t->bad_thread), 0);
  CU_ASSERT_EQUAL(taxi_lf_current_thread(t->p), -1);

  taxi_lf_thread_stats_t ts[8];
  memset(ts, 0, sizeof ts);
  int n = taxi_lf_thread_stats(t->p, ts, 8);
  CU_ASSERT_EQUAL(n, 4);
  int spawned = 0, joined = 0;
  for (int i = 0; i < n && i < 8; i++) {
    CU_ASSERT_EQUAL(ts[i].id, (unsigned)i);
    CU_ASSERT_EQUAL(ts[i].active, 1);
    if (ts[i].spawned)
      spawned++;
    else
      joined++;
  }
  CU_ASSERT_EQUAL(spawned, 3);
  CU_ASSERT_EQUAL(joined, 1);
  /* Every hook ran in a pool thread, known by its id. */
  uint64_t seen = atomic_load(&t->seen);
  CU_ASSERT(seen != 0);
  CU_ASSERT_EQUAL(seen & ~0xfull, 0);

  CU_ASSERT_EQUAL(
      util_bounded(lf_do_shutdown, t->p, POOLS_WAIT_MS, "taxi_lf_stop"), 0);
  util_thread_join(&t->th[j], POOLS_WAIT_MS, "taxi_lf_join after shutdown");
  CU_ASSERT_EQUAL(t->join_rc[j], 0);
  CU_ASSERT_EQUAL(lf_stats(t->p).threads, 0);
  lf_free(t);
}

/* join with a time limit and nothing to do returns TAXI_ETIMEDOUT, as the
 * only thread (leading) and as a follower behind spawned threads; the
 * thread has left when it returns. */
static void test_join_timeout(void) {
  lf_test_t *t = lf_new();
  lf_conns(t, 1, &lf_count_ops);
  lf_create(t, TAXI_PROMOTE_LIFO, TAXI_LEADERS_ONE);
  int a = lf_start_joiner(t, 50, 0);
  util_thread_join(&t->th[a], POOLS_WAIT_MS, "taxi_lf_join(p, 50, 0)");
  CU_ASSERT_EQUAL(t->join_rc[a], TAXI_ETIMEDOUT);
  CU_ASSERT_EQUAL(lf_stats(t->p).threads, 0);

  CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, 2), 0);
  CU_ASSERT(lf_wait_idle(t->p, 2));
  int b = lf_start_joiner(t, 50, 0);
  util_thread_join(&t->th[b], POOLS_WAIT_MS, "taxi_lf_join(p, 50, 0)");
  CU_ASSERT_EQUAL(t->join_rc[b], TAXI_ETIMEDOUT);
  CU_ASSERT_EQUAL(lf_stats(t->p).threads, 2);

  /* The pool still works. */
  CU_ASSERT_EQUAL(util_write_byte(t->conn[0].sv[1]), 1);
  CU_ASSERT(lf_wait_bytes(t, 1));
  lf_free(t);
}

/* A leader whose time is up leaves, and the follower behind it goes on
 * dispatching. */
static void test_join_timeout_leader_hands_over(void) {
  lf_test_t *t = lf_new();
  lf_conns(t, 1, &lf_count_ops);
  lf_create(t, TAXI_PROMOTE_LIFO, TAXI_LEADERS_ONE);
  int a = lf_start_joiner(t, 500, 0);
  CU_ASSERT(lf_wait_shape(t->p, 1, 1, 0));
  int b = lf_start_joiner(t, LF_JOIN_MS, 0);
  util_thread_join(&t->th[a], POOLS_WAIT_MS, "taxi_lf_join(p, 500, 0)");
  CU_ASSERT_EQUAL(t->join_rc[a], TAXI_ETIMEDOUT);
  CU_ASSERT(lf_wait_shape(t->p, 1, 1, 0));
  CU_ASSERT_EQUAL(util_write_byte(t->conn[0].sv[1]), 1);
  CU_ASSERT(lf_wait_bytes(t, 1));
  /* Run by the second thread (id 1), the only one left. */
  CU_ASSERT_EQUAL(atomic_load(&t->seen), 1ull << 1);
  CU_ASSERT_EQUAL(
      util_bounded(lf_do_shutdown, t->p, POOLS_WAIT_MS, "taxi_lf_stop"), 0);
  util_thread_join(&t->th[b], POOLS_WAIT_MS, "taxi_lf_join after shutdown");
  CU_ASSERT_EQUAL(t->join_rc[b], 0);
  lf_free(t);
}

/* After shutdown, join, spawn and shrink give TAXI_ESTOPPED (join returns
 * at once, whatever its time limit); stats still answer. */
static void test_join_after_shutdown(void) {
  lf_test_t *t = lf_new();
  lf_create(t, TAXI_PROMOTE_LIFO, TAXI_LEADERS_ONE);
  CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, 1), 0);
  CU_ASSERT_EQUAL(
      util_bounded(lf_do_shutdown, t->p, POOLS_WAIT_MS, "taxi_lf_stop"), 0);
  int a = lf_start_joiner(t, 0, 0);
  int b = lf_start_joiner(t, -1, 0);
  util_thread_join(&t->th[a], POOLS_WAIT_MS, "taxi_lf_join after shutdown");
  util_thread_join(&t->th[b], POOLS_WAIT_MS,
                   "taxi_lf_join(p, -1, 0) after shutdown");
  CU_ASSERT_EQUAL(t->join_rc[a], TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(t->join_rc[b], TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, 1), TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(taxi_lf_shrink(t->p, 1), TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(lf_stats(t->p).threads, 0);
  lf_free(t);
}

/* ---- promotion order ----------------------------------------------------- */

/*
 * Application threads T0..T3 join one after another, each only once the
 * stats show the one before it waiting (T0 leading, then T1, T2, T3
 * following).  One event at a time: its hook records which pool thread runs
 * it and blocks, so a processing thread never rejoins during the test.  The
 * order in which the threads take the four events is the promotion order.
 */
static void lf_promotion_order(taxi_promotion_t promotion, const int prio[4],
                               const int expect[4]) {
  lf_test_t *t = lf_new();
  lf_conns(t, 4, &lf_order_ops);
  lf_create(t, promotion, TAXI_LEADERS_ONE);
  int ok = 1;
  lf_start_joiner(t, LF_JOIN_MS, prio[0]);
  ok = ok && lf_wait_shape(t->p, 1, 1, 0);
  for (int i = 1; i < 4 && ok; i++) {
    lf_start_joiner(t, LF_JOIN_MS, prio[i]);
    ok = lf_wait_shape(t->p, i + 1, 1, i);
  }
  CU_ASSERT(ok);
  uint64_t promotions = lf_stats(t->p).promotions;
  for (int k = 0; k < 4 && ok; k++) {
    CU_ASSERT_EQUAL(util_write_byte(t->conn[k].sv[1]), 1);
    ok = pools_wait_count(&t->gate.entered, k + 1, POOLS_WAIT_MS);
    if (!ok) printf("\n    event %d was not taken\n", k);
    /* A new leader is in place (and one follower fewer) before the next. */
    if (ok && k < 3) ok = lf_wait_shape(t->p, 4, 1, 2 - k);
  }
  CU_ASSERT(ok);
  int got[4];
  for (int k = 0; k < 4; k++) got[k] = atomic_load(&t->order[k]);
  printf("(order T%d T%d T%d T%d) ", got[0], got[1], got[2], got[3]);
  if (expect) {
    for (int k = 0; k < 4; k++) CU_ASSERT_EQUAL(got[k], expect[k]);
  } else {
    /* Any order, but each thread took exactly one event. */
    int mask = 0;
    for (int k = 0; k < 4; k++)
      if (got[k] >= 0 && got[k] < 4) mask |= 1 << got[k];
    CU_ASSERT_EQUAL(mask, 0xf);
  }
  for (int k = 0; k < 4; k++)
    CU_ASSERT_EQUAL(atomic_load(&t->conn[k].inputs), ok ? 1 : 0);
  CU_ASSERT(lf_stats(t->p).promotions >= promotions + 3);

  pools_gate_open(&t->gate);
  CU_ASSERT_EQUAL(
      util_bounded(lf_do_shutdown, t->p, POOLS_WAIT_MS, "taxi_lf_stop"), 0);
  for (int i = 0; i < t->next_thread; i++) {
    util_thread_join(&t->th[i], POOLS_WAIT_MS, "taxi_lf_join after shutdown");
    CU_ASSERT_EQUAL(t->join_rc[i], 0);
  }
  lf_free(t);
}

static void test_promote_lifo(void) {
  static const int prio[4] = {0, 0, 0, 0};
  static const int expect[4] = {0, 3, 2, 1};
  lf_promotion_order(TAXI_PROMOTE_LIFO, prio, expect);
}

static void test_promote_fifo(void) {
  static const int prio[4] = {0, 0, 0, 0};
  static const int expect[4] = {0, 1, 2, 3};
  lf_promotion_order(TAXI_PROMOTE_FIFO, prio, expect);
}

static void test_promote_priority(void) {
  static const int prio[4] = {0, 1, 5, 3};
  static const int expect[4] = {0, 2, 3, 1};
  lf_promotion_order(TAXI_PROMOTE_PRIORITY, prio, expect);
}

/* Equal priorities go in LIFO order. */
static void test_promote_priority_ties_lifo(void) {
  static const int prio[4] = {0, 2, 7, 2};
  static const int expect[4] = {0, 2, 3, 1};
  lf_promotion_order(TAXI_PROMOTE_PRIORITY, prio, expect);
}

static void test_promote_shared(void) {
  static const int prio[4] = {0, 0, 0, 0};
  lf_promotion_order(TAXI_PROMOTE_SHARED, prio, NULL);
}

/* ---- one thread per handle at a time ------------------------------------- */

/* Read in small chunks with yields in between, so that a second thread on
 * the same handle would very likely overlap. */
static int lf_serial_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  lf_conn_t *c = LF_CONN(h);
  (void)ev;
  if (atomic_exchange(&c->busy, 1) != 0) atomic_fetch_add(&c->overlaps, 1);
  char buf[16];
  for (int i = 0; i < 32; i++) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;
    atomic_fetch_add(&c->bytes, (long)n);
    if (i % 8 == 0) sched_yield();
  }
  for (int i = 0; i < 3; i++) sched_yield();
  atomic_fetch_add(&c->inputs, 1);
  atomic_store(&c->busy, 0);
  return 0;
}

static const taxi_handler_ops_t lf_serial_ops = {.input = lf_serial_input,
                                                 .close = lf_conn_close};

typedef struct lf_writer {
  lf_test_t *t;
  int seed;
  int writes;
  long written[4];
  int stuck;
} lf_writer_t;

/* Write `writes` chunks of 1..32 bytes to random ones of the 4 peers. */
static void lf_writer_main(void *arg) {
  lf_writer_t *w = arg;
  uint64_t st = (uint64_t)w->seed * 7919u + 1;
  char buf[32];
  memset(buf, 'w', sizeof buf);
  for (int i = 0; i < w->writes; i++) {
    uint64_t x = pools_rand(&st);
    int c = (int)(x % 4);
    size_t len = 1 + (size_t)((x >> 8) % sizeof buf);
    taxi_time_t start = taxi_now();
    for (;;) {
      ssize_t n = write(w->t->conn[c].sv[1], buf, len);
      if (n > 0) {
        w->written[c] += n;
        break;
      }
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        w->stuck = 1;
        return;
      }
      if (util_elapsed_ms(start) > POOLS_WAIT_MS) {
        w->stuck = 1; /* nobody reads: the pool stopped dispatching */
        return;
      }
      sched_yield();
    }
  }
}

static void lf_serialised(taxi_leaders_t leaders) {
  enum { WRITERS = 4 };
  lf_test_t *t = lf_new();
  lf_conns(t, 4, &lf_serial_ops);
  if (leaders == TAXI_LEADERS_MANY && !pools_can_many_leaders(t->r)) {
    taxi_lf_options_t o = TAXI_LF_OPTIONS_INIT;
    o.leaders = TAXI_LEADERS_MANY;
    CU_ASSERT_EQUAL(taxi_lf_create(&t->p, t->r, &o), TAXI_ENOTSUP);
    t->p = NULL;
    printf("(not applicable: no TAXI_CAP_MULTI_WAIT|ONESHOT) ");
    lf_free(t);
    return;
  }
  lf_create(t, TAXI_PROMOTE_LIFO, leaders);
  CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, 8), 0);
  static lf_writer_t w[WRITERS];
  util_thread_t wt[WRITERS];
  int writes = pools_small() ? 3000 : 20000;
  for (int i = 0; i < WRITERS; i++) {
    memset(&w[i], 0, sizeof w[i]);
    w[i].t = t;
    w[i].seed = i + 1;
    w[i].writes = writes;
    CU_ASSERT_EQUAL_FATAL(util_thread_start(&wt[i], lf_writer_main, &w[i]), 0);
  }
  long total = 0;
  int stuck = 0;
  for (int i = 0; i < WRITERS; i++) {
    util_thread_join(&wt[i], 60000, "a writer thread");
    for (int c = 0; c < 4; c++) total += w[i].written[c];
    stuck += w[i].stuck;
  }
  CU_ASSERT_EQUAL(stuck, 0);
  CU_ASSERT(lf_wait_bytes(t, total));
  CU_ASSERT_EQUAL(lf_total_bytes(t), total);
  int overlaps = 0;
  for (int c = 0; c < 4; c++) overlaps += atomic_load(&t->conn[c].overlaps);
  printf("(%d hooks, %ld bytes, %d overlaps) ", lf_total_inputs(t), total,
         overlaps);
  CU_ASSERT_EQUAL(overlaps, 0);
  lf_free(t);
}

static void test_one_thread_per_handle(void) {
  lf_serialised(TAXI_LEADERS_ONE);
}

static void test_one_thread_per_handle_many_leaders(void) {
  lf_serialised(TAXI_LEADERS_MANY);
}

/* ---- multiple leaders ---------------------------------------------------- */

/* On a backend with TAXI_CAP_MULTI_WAIT and TAXI_CAP_ONESHOT, an idle pool
 * of 4 threads with TAXI_LEADERS_MANY has more than one leader; elsewhere
 * TAXI_LEADERS_MANY is refused with TAXI_ENOTSUP (and the reactor takes a
 * pool of one leader afterwards). */
static void test_multiple_leaders(void) {
  lf_test_t *t = lf_new();
  lf_conns(t, 4, &lf_count_ops);
  taxi_lf_options_t o = TAXI_LF_OPTIONS_INIT;
  o.leaders = TAXI_LEADERS_MANY;
  if (!pools_can_many_leaders(t->r)) {
    taxi_lf_pool_t *p = NULL;
    CU_ASSERT_EQUAL(taxi_lf_create(&p, t->r, &o), TAXI_ENOTSUP);
    printf("(caps %#x: ENOTSUP as documented) ", taxi_reactor_caps(t->r));
    lf_create(t, TAXI_PROMOTE_LIFO, TAXI_LEADERS_ONE);
    lf_free(t);
    return;
  }
  CU_ASSERT_EQUAL_FATAL(taxi_lf_create(&t->p, t->r, &o), 0);
  CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, 4), 0);
  unsigned two = 2;
  taxi_lf_stats_t s;
  int ok = pools_lf_wait(t->p, lf_pred_leaders_ge, &two, POOLS_WAIT_MS, &s);
  if (!ok)
    printf("\n    leaders never >= 2: threads %u leaders %u followers %u\n",
           s.threads, s.leaders, s.followers);
  CU_ASSERT(ok);
  CU_ASSERT(s.leaders <= s.threads);
  /* And they dispatch. */
  for (int i = 0; i < 4; i++)
    CU_ASSERT_EQUAL(util_write_byte(t->conn[i].sv[1]), 1);
  CU_ASSERT(lf_wait_bytes(t, 4));
  lf_free(t);
}

/* max_leaders bounds the threads waiting at once. */
static void test_max_leaders(void) {
  lf_test_t *t = lf_new();
  lf_conns(t, 4, &lf_count_ops);
  if (!pools_can_many_leaders(t->r)) {
    printf("(not applicable: no TAXI_CAP_MULTI_WAIT|ONESHOT) ");
    lf_free(t);
    return;
  }
  taxi_lf_options_t o = TAXI_LF_OPTIONS_INIT;
  o.leaders = TAXI_LEADERS_MANY;
  o.max_leaders = 2;
  CU_ASSERT_EQUAL_FATAL(taxi_lf_create(&t->p, t->r, &o), 0);
  CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, 5), 0);
  CU_ASSERT(lf_wait_idle(t->p, 5));
  unsigned max = 0;
  for (int round = 0; round < 50; round++) {
    for (int i = 0; i < 4; i++) util_write_byte(t->conn[i].sv[1]);
    for (int k = 0; k < 10; k++) {
      taxi_lf_stats_t s = lf_stats(t->p);
      if (s.leaders > max) max = s.leaders;
    }
  }
  CU_ASSERT(lf_wait_bytes(t, 200));
  /* Idle: two lead, three follow. */
  CU_ASSERT(lf_wait_shape(t->p, 5, 2, 3));
  printf("(most leaders seen %u) ", max);
  CU_ASSERT(max <= 2);
  lf_free(t);
}

/* ---- events from an earlier wait ----------------------------------------- */

/* 64 handles ready before the pool starts: one wait reports many, and the
 * threads take the rest without another system call. */
static void test_pending_taken_without_wait(void) {
  enum { N = 64 };
  lf_test_t *t = lf_new();
  lf_conns(t, N, &lf_count_ops);
  for (int i = 0; i < N; i++)
    CU_ASSERT_EQUAL(util_write_byte(t->conn[i].sv[1]), 1);
  lf_create(t, TAXI_PROMOTE_LIFO, TAXI_LEADERS_ONE);
  CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, 4), 0);
  CU_ASSERT(lf_wait_bytes(t, N));
  CU_ASSERT(lf_wait_idle(t->p, 4));
  for (int i = 0; i < N; i++)
    CU_ASSERT_EQUAL(atomic_load(&t->conn[i].inputs), 1);
  taxi_lf_stats_t s = lf_stats(t->p);
  printf("(%llu events, %llu waits, %llu from pending) ",
         (unsigned long long)s.events, (unsigned long long)s.waits,
         (unsigned long long)s.pending_taken);
  CU_ASSERT(s.pending_taken > 0);
  CU_ASSERT(s.waits < N);
  CU_ASSERT_EQUAL(s.events, N);
  lf_free(t);
}

/* Each hook's read ends in EAGAIN, and the pool re-arms the handle right
 * after, in the same thread: every re-arm succeeds the first time (no
 * transient error, nothing removed) and each round's data is delivered
 * (libkqueue copied that errno into the re-arm's receipt). */
static void test_rearm_after_eagain(void) {
  enum { N = 4, ROUNDS = 8 };
  lf_test_t *t = lf_new();
  lf_conns(t, N, &lf_count_ops);
  lf_create(t, TAXI_PROMOTE_LIFO, TAXI_LEADERS_ONE);
  CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, 2), 0);
  int ok = 1;
  for (int round = 0; round < ROUNDS && ok; round++) {
    for (int i = 0; i < N; i++)
      CU_ASSERT_EQUAL(util_write_byte(t->conn[i].sv[1]), 1);
    ok = lf_wait_bytes(t, (long)N * (round + 1));
  }
  CU_ASSERT(ok);
  taxi_reactor_stats_t s;
  CU_ASSERT_EQUAL(taxi_reactor_stats(t->r, &s), 0);
  CU_ASSERT_EQUAL(s.transient_errors, 0);
  CU_ASSERT_EQUAL(s.rearm_removed, 0);
  CU_ASSERT_EQUAL(s.handles, N);
  lf_free(t);
}

/* ---- growing and shrinking ----------------------------------------------- */

static void test_grow_and_shrink(void) {
  lf_test_t *t = lf_new();
  lf_conns(t, 4, &lf_count_ops);
  lf_create(t, TAXI_PROMOTE_LIFO, TAXI_LEADERS_ONE);
  CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, 2), 0);
  CU_ASSERT(lf_wait_shape(t->p, 2, -1, -1));
  for (int i = 0; i < 4; i++) util_write_byte(t->conn[i].sv[1]);
  CU_ASSERT(lf_wait_bytes(t, 4));
  CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, 3), 0);
  CU_ASSERT(lf_wait_shape(t->p, 5, -1, -1));
  for (int i = 0; i < 4; i++) util_write_byte(t->conn[i].sv[1]);
  CU_ASSERT(lf_wait_bytes(t, 8));
  CU_ASSERT_EQUAL(taxi_lf_shrink(t->p, 3), 0);
  /* shrink returns once they have left. */
  CU_ASSERT_EQUAL(lf_stats(t->p).threads, 2);
  for (int round = 0; round < 20; round++) {
    for (int i = 0; i < 4; i++) util_write_byte(t->conn[i].sv[1]);
    CU_ASSERT(lf_wait_bytes(t, 8 + 4 * (round + 1)));
  }
  CU_ASSERT_EQUAL(lf_stats(t->p).threads, 2);
  taxi_lf_thread_stats_t ts[8];
  CU_ASSERT_EQUAL(taxi_lf_thread_stats(t->p, ts, 8), 5);
  int active = 0;
  for (int i = 0; i < 5; i++) active += ts[i].active;
  CU_ASSERT_EQUAL(active, 2);
  /* Down to none, and up again. */
  CU_ASSERT_EQUAL(taxi_lf_shrink(t->p, 2), 0);
  CU_ASSERT_EQUAL(lf_stats(t->p).threads, 0);
  CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, 1), 0);
  for (int i = 0; i < 4; i++) util_write_byte(t->conn[i].sv[1]);
  CU_ASSERT(lf_wait_bytes(t, 8 + 80 + 4));
  lf_free(t);
}

/* The virtual memory of this process in kB, or -1 where it cannot be read
 * (only Linux's /proc/self/status is read). */
static long lf_vm_kb(void) {
  long kb = -1;
#ifdef __linux__
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "VmSize:", 7) == 0) kb = strtol(line + 7, NULL, 10);
  fclose(f);
#endif
  return kb;
}

/* Threads that shrink let go are gone for good: 200 spawn/shrink cycles on
 * a running pool do not pile up 200 finished but unjoined threads (each
 * holding its stack until taxi_lf_destroy).  Measured as the process's
 * virtual size, where the OS tells it. */
static void test_shrink_releases_threads(void) {
  enum { CYCLES = 200 };
  lf_test_t *t = lf_new();
  lf_conns(t, 1, &lf_count_ops);
  lf_create(t, TAXI_PROMOTE_LIFO, TAXI_LEADERS_ONE);
  CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, 1), 0);
  for (int i = 0; i < 10; i++) {
    CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, 1), 0);
    CU_ASSERT_EQUAL(taxi_lf_shrink(t->p, 1), 0);
  }
  long before = lf_vm_kb();
  int failed = 0;
  for (int i = 0; i < CYCLES && !failed; i++) {
    int a = taxi_lf_spawn(t->p, 1);
    int b = a == 0 ? taxi_lf_shrink(t->p, 1) : 0;
    if (a != 0 || b != 0) {
      printf("\n    cycle %d: spawn %s, shrink %s\n", i, taxi_error_name(a),
             taxi_error_name(b));
      failed = 1;
    }
  }
  long after = lf_vm_kb();
  CU_ASSERT_EQUAL(failed, 0);
  CU_ASSERT_EQUAL(lf_stats(t->p).threads, 1);
  /* Still dispatching. */
  util_write_byte(t->conn[0].sv[1]);
  CU_ASSERT(lf_wait_bytes(t, 1));
  if (before < 0 || after < 0) {
    printf("(virtual size not known here: only the calls were checked) ");
  } else {
    printf("(VmSize %ld kB before, %ld kB after %d spawn/shrink) ", before,
           after, CYCLES);
    /* One 8 MB stack per cycle would be 1.6 GB; allow the C library's
     * stack cache and the thread records (kept by contract). */
    CU_ASSERT(after - before < 256L * 1024);
  }
  lf_free(t);
}

/* ---- removal while dispatched -------------------------------------------- */

/* Block until the remover has called taxi_reactor_remove, linger a little,
 * then return t->hook_ret. */
static int lf_remove_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  lf_conn_t *c = LF_CONN(h);
  lf_test_t *t = c->t;
  (void)ev;
  atomic_store(&c->busy, 1);
  atomic_fetch_add(&c->bytes, pools_drain(fd));
  atomic_fetch_add(&c->inputs, 1);
  atomic_fetch_add(&t->gate.entered, 1);
  if (!util_wait_flag(&t->removed, 1, POOLS_WAIT_MS))
    atomic_fetch_add(&t->gate.timeouts, 1);
  util_sleep_ms(20); /* room for a close hook that would run too early */
  atomic_store(&c->hook_done, 1);
  atomic_store(&c->busy, 0);
  return t->hook_ret;
}

static const taxi_handler_ops_t lf_remove_ops = {.input = lf_remove_input,
                                                 .close = lf_conn_close};

static void lf_remove_during_dispatch(int hook_ret) {
  lf_test_t *t = lf_new();
  lf_conns(t, 2, &lf_remove_ops);
  t->hook_ret = hook_ret;
  lf_create(t, TAXI_PROMOTE_LIFO, TAXI_LEADERS_ONE);
  CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, 2), 0);
  lf_conn_t *c = &t->conn[0];
  CU_ASSERT_EQUAL(util_write_byte(c->sv[1]), 1);
  CU_ASSERT(pools_wait_count(&t->gate.entered, 1, POOLS_WAIT_MS));
  int rc = taxi_reactor_remove(t->r, &c->h);
  int closes_at_remove = atomic_load(&c->closes);
  atomic_store(&t->removed, 1);
  CU_ASSERT_EQUAL(rc, 0);
  /* The hook is still running: the close hook waits for it. */
  CU_ASSERT_EQUAL(closes_at_remove, 0);
  CU_ASSERT(pools_wait_count(&c->closes, 1, POOLS_WAIT_MS));
  CU_ASSERT_EQUAL(atomic_load(&c->hook_done), 1);
  CU_ASSERT_EQUAL(atomic_load(&c->early_close), 0);
  /* No hook after removal, the close hook once; the other handler works. */
  CU_ASSERT_EQUAL(util_write_byte(c->sv[1]), 1);
  CU_ASSERT_EQUAL(util_write_byte(t->conn[1].sv[1]), 1);
  CU_ASSERT(pools_wait_count(&t->conn[1].inputs, 1, POOLS_WAIT_MS));
  util_sleep_ms(20);
  CU_ASSERT_EQUAL(atomic_load(&c->inputs), 1);
  CU_ASSERT_EQUAL(taxi_reactor_remove(t->r, &c->h), TAXI_ENOENT);
  CU_ASSERT(lf_wait_idle(t->p, 2));
  CU_ASSERT_EQUAL(atomic_load(&c->closes), 1);
  lf_teardown(t);
  /* Destroying the reactor did not close it again. */
  CU_ASSERT_EQUAL(atomic_load(&c->closes), 1);
  free(t);
}

/* Removed from another thread while its hook runs in a pool thread: the
 * close hook runs exactly once, after the hook returned. */
static void test_remove_while_dispatched(void) { lf_remove_during_dispatch(0); }

/* The same while the hook, too, asks for removal (returns -1). */
static void test_remove_while_hook_removes(void) {
  lf_remove_during_dispatch(-1);
}

/* Close hook that closes the handle: removal of many handlers from a test
 * thread while the pool dispatches them; each closes exactly once and no
 * hook runs on a closed handle. */
static int lf_busy_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  lf_conn_t *c = LF_CONN(h);
  (void)ev;
  if (atomic_exchange(&c->busy, 1) != 0) atomic_fetch_add(&c->overlaps, 1);
  char buf[64];
  ssize_t n = read(fd, buf, sizeof buf);
  if (n > 0) {
    atomic_fetch_add(&c->bytes, (long)n);
    /* Answer, so that the writer keeps going. */
    if (write(fd, buf, (size_t)n) < 0) {
    }
  } else if (n < 0 && errno == EBADF) {
    atomic_fetch_add(&c->t->bad_thread, 1); /* a hook on a closed handle */
  }
  sched_yield();
  atomic_fetch_add(&c->inputs, 1);
  atomic_store(&c->busy, 0);
  return 0;
}

static void lf_closing_close(taxi_handler_t *h, taxi_handle_t fd) {
  lf_conn_t *c = LF_CONN(h);
  if (atomic_load(&c->busy)) atomic_store(&c->early_close, 1);
  atomic_fetch_add(&c->closes, 1);
  close(fd);
  c->sv[0] = -1;
}

static const taxi_handler_ops_t lf_closing_ops = {.input = lf_busy_input,
                                                  .close = lf_closing_close};

typedef struct lf_pinger {
  lf_test_t *t;
  atomic_int stop;
} lf_pinger_t;

/* Keep writing to every peer whose handler was not removed yet. */
static void lf_pinger_main(void *arg) {
  lf_pinger_t *pg = arg;
  lf_test_t *t = pg->t;
  char buf[64];
  memset(buf, 'p', sizeof buf);
  while (!atomic_load(&pg->stop)) {
    for (int i = 0; i < t->nconns; i++) {
      if (write(t->conn[i].sv[1], buf, 1 + (size_t)(i % 60)) < 0) {
      }
      pools_drain(t->conn[i].sv[1]);
    }
    sched_yield();
  }
}

static void test_remove_many_while_busy(void) {
  enum { N = 48 };
  lf_test_t *t = lf_new();
  lf_conns(t, N, &lf_closing_ops);
  lf_create(t, TAXI_PROMOTE_LIFO, TAXI_LEADERS_ONE);
  CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, 4), 0);
  static lf_pinger_t pg;
  pg.t = t;
  atomic_init(&pg.stop, 0);
  util_thread_t pt;
  CU_ASSERT_EQUAL_FATAL(util_thread_start(&pt, lf_pinger_main, &pg), 0);
  /* Let traffic flow, then remove them one by one. */
  CU_ASSERT(pools_wait_count(&t->conn[N - 1].inputs, 1, POOLS_WAIT_MS));
  int bad_rc = 0;
  for (int i = 0; i < N; i++) {
    pools_wait_count(&t->conn[i].inputs, 1, 100);
    if (taxi_reactor_remove(t->r, &t->conn[i].h) != 0) bad_rc++;
    if (i % 4 == 0) util_sleep_ms(1);
  }
  int closes = 0, early = 0, overlaps = 0;
  taxi_time_t start = taxi_now();
  for (;;) {
    closes = 0;
    for (int i = 0; i < N; i++) closes += atomic_load(&t->conn[i].closes);
    if (closes >= N || util_elapsed_ms(start) > POOLS_WAIT_MS) break;
    util_sleep_ms(1);
  }
  atomic_store(&pg.stop, 1);
  util_thread_join(&pt, POOLS_WAIT_MS, "the writer thread");
  for (int i = 0; i < N; i++) {
    early += atomic_load(&t->conn[i].early_close);
    overlaps += atomic_load(&t->conn[i].overlaps);
  }
  CU_ASSERT_EQUAL(bad_rc, 0);
  CU_ASSERT_EQUAL(closes, N);
  CU_ASSERT_EQUAL(early, 0);
  CU_ASSERT_EQUAL(overlaps, 0);
  CU_ASSERT_EQUAL(atomic_load(&t->bad_thread), 0);
  lf_teardown(t);
  /* Destroying the reactor closed nothing twice. */
  for (int i = 0; i < N; i++)
    CU_ASSERT_EQUAL(atomic_load(&t->conn[i].closes), 1);
  free(t);
}

/* ---- timers and notifications -------------------------------------------- */

typedef struct lf_timed {
  taxi_handler_t h;
  taxi_timer_t timer;
  lf_test_t *t;
  atomic_int fires;
  atomic_int busy;
  atomic_int overlaps;
  atomic_int closes;
} lf_timed_t;

static int lf_timed_timeout(taxi_handler_t *h, taxi_timer_t *timer, void *act) {
  lf_timed_t *x = TAXI_CONTAINER_OF(h, lf_timed_t, h);
  (void)timer;
  (void)act;
  if (atomic_exchange(&x->busy, 1) != 0) atomic_fetch_add(&x->overlaps, 1);
  lf_note_thread(x->t);
  atomic_fetch_add(&x->fires, 1);
  util_sleep_ms(1); /* longer than the period */
  atomic_store(&x->busy, 0);
  return 0;
}

static void lf_timed_close(taxi_handler_t *h, taxi_handle_t fd) {
  (void)fd;
  atomic_fetch_add(&TAXI_CONTAINER_OF(h, lf_timed_t, h)->closes, 1);
}

static const taxi_handler_ops_t lf_timed_ops = {.timeout = lf_timed_timeout,
                                                .close = lf_timed_close};

static atomic_int lf_notes_run;
static atomic_int lf_note_count[1000];
static lf_test_t *lf_note_test;

static void lf_note_fn(void *arg) {
  int i = (int)(intptr_t)arg;
  lf_note_thread(lf_note_test);
  if (i >= 0 && i < 1000) atomic_fetch_add(&lf_note_count[i], 1);
  atomic_fetch_add(&lf_notes_run, 1);
}

/* The pool dispatches timers too: a periodic timer whose hook outlasts
 * its period fires in pool threads, never twice at once, and stops when
 * cancelled. */
static void test_timers_in_pool(void) {
  lf_test_t *t = lf_new();
  static lf_timed_t x;
  memset(&x, 0, sizeof x);
  x.t = t;
  atomic_init(&x.fires, 0);
  atomic_init(&x.busy, 0);
  atomic_init(&x.overlaps, 0);
  atomic_init(&x.closes, 0);
  CU_ASSERT_EQUAL_FATAL(taxi_handler_init(&x.h, &lf_timed_ops), 0);
  CU_ASSERT_EQUAL_FATAL(taxi_timer_init(&x.timer), 0);
  lf_create(t, TAXI_PROMOTE_LIFO, TAXI_LEADERS_ONE);
  CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, 4), 0);
  CU_ASSERT_EQUAL(taxi_reactor_schedule(t->r, &x.timer, &x.h, 0,
                                        TAXI_NSEC_PER_MSEC / 5, NULL),
                  0);
  CU_ASSERT(pools_wait_count(&x.fires, 30, POOLS_WAIT_MS));
  CU_ASSERT_EQUAL(taxi_reactor_cancel(t->r, &x.timer), 0);
  /* A hook running now completes, and one a pool thread had already taken
   * from the heap (its hook not yet entered) may still run: at most one
   * more, since the timer is re-armed only after its hook returns. */
  int at_cancel = atomic_load(&x.fires);
  /* Still attached (by its timer) until removed; then it closes once,
   * after every dispatch in flight: no hook can run after the close. */
  CU_ASSERT_EQUAL(taxi_reactor_remove(t->r, &x.h), 0);
  CU_ASSERT(pools_wait_count(&x.closes, 1, POOLS_WAIT_MS));
  int fires = atomic_load(&x.fires);
  CU_ASSERT(fires <= at_cancel + 1);
  util_sleep_ms(30);
  CU_ASSERT_EQUAL(atomic_load(&x.fires), fires);
  CU_ASSERT_EQUAL(atomic_load(&x.overlaps), 0);
  CU_ASSERT_EQUAL(atomic_load(&t->bad_thread), 0);
  lf_free(t);
  CU_ASSERT_EQUAL(atomic_load(&x.closes), 1);
}

/* Notifications posted from another thread run in pool threads, each
 * exactly once. */
static void test_notifications_in_pool(void) {
  enum { N = 1000 };
  lf_test_t *t = lf_new();
  lf_note_test = t;
  atomic_store(&lf_notes_run, 0);
  for (int i = 0; i < N; i++) atomic_store(&lf_note_count[i], 0);
  lf_create(t, TAXI_PROMOTE_LIFO, TAXI_LEADERS_ONE);
  CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, 3), 0);
  int post_failed = 0;
  for (int i = 0; i < N; i++)
    if (taxi_reactor_notify(t->r, lf_note_fn, (void *)(intptr_t)i) != 0)
      post_failed++;
  CU_ASSERT_EQUAL(post_failed, 0);
  CU_ASSERT(pools_wait_count(&lf_notes_run, N, POOLS_WAIT_MS));
  util_sleep_ms(10);
  int wrong = 0;
  for (int i = 0; i < N; i++)
    if (atomic_load(&lf_note_count[i]) != 1) wrong++;
  CU_ASSERT_EQUAL(wrong, 0);
  CU_ASSERT_EQUAL(atomic_load(&lf_notes_run), N);
  CU_ASSERT_EQUAL(atomic_load(&t->bad_thread), 0);
  CU_ASSERT(atomic_load(&t->seen) != 0);
  lf_free(t);
}

/* ---- counters ------------------------------------------------------------ */

/* For a workload of handle events only, the per-thread event counts add up
 * to the pool's, which equals the hooks run; time was accounted. */
static void test_counters(void) {
  enum { N = 16, ROUNDS = 100 };
  lf_test_t *t = lf_new();
  lf_conns(t, N, &lf_count_ops);
  lf_create(t, TAXI_PROMOTE_LIFO, TAXI_LEADERS_ONE);
  CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, 4), 0);
  for (int round = 0; round < ROUNDS; round++) {
    for (int i = 0; i < N; i++) util_write_byte(t->conn[i].sv[1]);
    CU_ASSERT(lf_wait_bytes(t, (long)N * (round + 1)));
  }
  CU_ASSERT(lf_wait_idle(t->p, 4));
  CU_ASSERT_EQUAL(
      util_bounded(lf_do_shutdown, t->p, POOLS_WAIT_MS, "taxi_lf_stop"), 0);
  taxi_lf_stats_t s = lf_stats(t->p);
  taxi_lf_thread_stats_t ts[8];
  memset(ts, 0, sizeof ts);
  int n = taxi_lf_thread_stats(t->p, ts, 8);
  CU_ASSERT_EQUAL(n, 4);
  uint64_t sum = 0, ns = 0;
  for (int i = 0; i < n && i < 8; i++) {
    sum += ts[i].events;
    ns += ts[i].leader_ns + ts[i].processing_ns + ts[i].follower_ns;
    CU_ASSERT_EQUAL(ts[i].id, (unsigned)i);
    CU_ASSERT_EQUAL(ts[i].spawned, 1);
    CU_ASSERT_EQUAL(ts[i].active, 0);
  }
  printf("(%llu events, %d hooks) ", (unsigned long long)s.events,
         lf_total_inputs(t));
  CU_ASSERT_EQUAL(sum, s.events);
  CU_ASSERT_EQUAL(s.events, (uint64_t)lf_total_inputs(t));
  CU_ASSERT(s.events >= N);
  CU_ASSERT(s.leader_ns + s.processing_ns + s.follower_ns > 0);
  CU_ASSERT(s.processing_ns > 0);
  CU_ASSERT(ns > 0);
  CU_ASSERT(s.waits > 0);
  CU_ASSERT_EQUAL(s.threads, 0);
  CU_ASSERT_EQUAL(s.leaders, 0);
  CU_ASSERT_EQUAL(s.followers, 0);
  /* Fewer slots than threads: the count is still the total. */
  CU_ASSERT_EQUAL(taxi_lf_thread_stats(t->p, ts, 2), 4);
  CU_ASSERT_EQUAL(taxi_lf_thread_stats(t->p, ts, 0), 4);
  lf_free(t);
}

/* ---- shutdown ------------------------------------------------------------ */

typedef struct lf_shutter {
  taxi_lf_pool_t *p;
  lf_test_t *t;
  atomic_int returned;
  int rc;
  int hooks_done_then; /* hooks that had returned when shutdown returned */
  unsigned threads_then;
} lf_shutter_t;

static void lf_shutter_main(void *arg) {
  lf_shutter_t *s = arg;
  s->rc = taxi_lf_stop(s->p);
  int done = 0;
  for (int i = 0; i < s->t->nconns; i++)
    done += atomic_load(&s->t->conn[i].hook_done);
  s->hooks_done_then = done;
  taxi_lf_stats_t st;
  memset(&st, 0, sizeof st);
  taxi_lf_stats(s->p, &st);
  s->threads_then = st.threads;
  atomic_store(&s->returned, 1);
}

/* Every thread blocked in a hook: shutdown from another thread returns
 * only after the hooks were released and the threads left. */
static void test_shutdown_busy(void) {
  enum { N = 4 };
  lf_test_t *t = lf_new();
  lf_conns(t, N, &lf_block_ops);
  lf_create(t, TAXI_PROMOTE_LIFO, TAXI_LEADERS_ONE);
  CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, 3), 0);
  int j = lf_start_joiner(t, LF_JOIN_MS, 0);
  CU_ASSERT(lf_wait_shape(t->p, 4, -1, -1));
  for (int i = 0; i < N; i++) util_write_byte(t->conn[i].sv[1]);
  CU_ASSERT(pools_wait_count(&t->gate.entered, N, POOLS_WAIT_MS));
  static lf_shutter_t sh;
  memset(&sh, 0, sizeof sh);
  sh.p = t->p;
  sh.t = t;
  atomic_init(&sh.returned, 0);
  util_thread_t st;
  CU_ASSERT_EQUAL_FATAL(util_thread_start(&st, lf_shutter_main, &sh), 0);
  util_sleep_ms(100);
  int early = atomic_load(&sh.returned);
  pools_gate_open(&t->gate);
  util_thread_join(&st, POOLS_WAIT_MS, "taxi_lf_stop (busy pool)");
  CU_ASSERT_EQUAL(early, 0);
  CU_ASSERT_EQUAL(sh.rc, 0);
  CU_ASSERT_EQUAL(sh.hooks_done_then, N);
  CU_ASSERT_EQUAL(sh.threads_then, 0);
  util_thread_join(&t->th[j], POOLS_WAIT_MS, "taxi_lf_join after shutdown");
  CU_ASSERT_EQUAL(t->join_rc[j], 0);
  for (int i = 0; i < N; i++)
    CU_ASSERT_EQUAL(atomic_load(&t->conn[i].inputs), 1);
  lf_free(t);
}

/* Every thread leading or following: shutdown wakes them all. */
static void lf_shutdown_idle(taxi_promotion_t promotion,
                             taxi_leaders_t leaders) {
  lf_test_t *t = lf_new();
  lf_conns(t, 2, &lf_count_ops);
  if (leaders == TAXI_LEADERS_MANY && !pools_can_many_leaders(t->r)) {
    printf("(not applicable: no TAXI_CAP_MULTI_WAIT|ONESHOT) ");
    lf_free(t);
    return;
  }
  lf_create(t, promotion, leaders);
  CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, 4), 0);
  int j = lf_start_joiner(t, -1, 3);
  CU_ASSERT(lf_wait_idle(t->p, 5));
  CU_ASSERT_EQUAL(util_bounded(lf_do_shutdown, t->p, POOLS_WAIT_MS,
                               "taxi_lf_stop (idle pool)"),
                  0);
  taxi_lf_stats_t s = lf_stats(t->p);
  CU_ASSERT_EQUAL(s.threads, 0);
  CU_ASSERT_EQUAL(s.leaders, 0);
  CU_ASSERT_EQUAL(s.followers, 0);
  util_thread_join(&t->th[j], POOLS_WAIT_MS,
                   "taxi_lf_join(p, -1, 3) after shutdown");
  CU_ASSERT_EQUAL(t->join_rc[j], 0);
  CU_ASSERT_EQUAL(taxi_lf_stop(t->p), TAXI_ESTOPPED);
  lf_free(t);
}

static void test_shutdown_idle(void) {
  lf_shutdown_idle(TAXI_PROMOTE_LIFO, TAXI_LEADERS_ONE);
}

static void test_shutdown_idle_every_order(void) {
  lf_shutdown_idle(TAXI_PROMOTE_FIFO, TAXI_LEADERS_ONE);
  lf_shutdown_idle(TAXI_PROMOTE_PRIORITY, TAXI_LEADERS_ONE);
  lf_shutdown_idle(TAXI_PROMOTE_SHARED, TAXI_LEADERS_ONE);
  lf_shutdown_idle(TAXI_PROMOTE_LIFO, TAXI_LEADERS_MANY);
}

/* Shut down from a hook: it returns 0 once every other thread has left;
 * the pool ends; destroy from the main thread works. */
static int lf_shutdown_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  lf_conn_t *c = LF_CONN(h);
  lf_test_t *t = c->t;
  (void)ev;
  pools_drain(fd);
  if (atomic_fetch_add(&t->hook_calls, 1) == 0) {
    atomic_store(&t->rc_shutdown, taxi_lf_stop(t->p));
    taxi_lf_stats_t s;
    memset(&s, 0, sizeof s);
    atomic_store(&t->rc_stats, taxi_lf_stats(t->p, &s));
    atomic_store(&t->threads_after_shutdown, (int)s.threads);
    atomic_store(&t->rc_join, taxi_lf_stop(t->p));
  }
  atomic_fetch_add(&c->inputs, 1);
  return 0;
}

static const taxi_handler_ops_t lf_shutdown_ops = {.input = lf_shutdown_input,
                                                   .close = lf_conn_close};

static void test_shutdown_from_hook(void) {
  lf_test_t *t = lf_new();
  lf_conns(t, 1, &lf_shutdown_ops);
  lf_create(t, TAXI_PROMOTE_LIFO, TAXI_LEADERS_ONE);
  CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, 3), 0);
  int j = lf_start_joiner(t, -1, 0);
  CU_ASSERT(lf_wait_idle(t->p, 4));
  CU_ASSERT_EQUAL(util_write_byte(t->conn[0].sv[1]), 1);
  CU_ASSERT(pools_wait_count(&t->conn[0].inputs, 1, POOLS_WAIT_MS));
  CU_ASSERT_EQUAL(atomic_load(&t->rc_shutdown), 0);
  CU_ASSERT_EQUAL(atomic_load(&t->rc_stats), 0);
  /* Only the calling thread was left. */
  CU_ASSERT_EQUAL(atomic_load(&t->threads_after_shutdown), 1);
  CU_ASSERT_EQUAL(atomic_load(&t->rc_join), TAXI_ESTOPPED);
  util_thread_join(&t->th[j], POOLS_WAIT_MS, "taxi_lf_join after shutdown");
  CU_ASSERT_EQUAL(t->join_rc[j], 0);
  taxi_lf_stats_t s;
  CU_ASSERT(lf_wait_shape(t->p, 0, 0, 0));
  s = lf_stats(t->p);
  CU_ASSERT_EQUAL(s.threads, 0);
  CU_ASSERT_EQUAL(taxi_lf_stop(t->p), TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(
      util_bounded(lf_do_destroy, t->p, POOLS_WAIT_MS, "taxi_lf_destroy"), 0);
  t->p = NULL;
  /* The reactor is given back to single-threaded dispatch. */
  CU_ASSERT(taxi_reactor_handle_events(t->r, 0) >= 0);
  lf_free(t);
}

typedef struct lf_destroyer {
  taxi_lf_pool_t *p;
  lf_conn_t *c;
  atomic_int returned;
  int rc;
  int hook_done_then;
} lf_destroyer_t;

static void lf_destroyer_main(void *arg) {
  lf_destroyer_t *d = arg;
  d->rc = taxi_lf_destroy(d->p);
  d->hook_done_then = atomic_load(&d->c->hook_done);
  atomic_store(&d->returned, 1);
}

/* destroy on a running pool with a thread busy in a hook shuts it down,
 * waits for the hook, joins the spawned threads; an application thread's
 * join returns 0; events not dispatched stay with the reactor. */
static void test_destroy_running(void) {
  lf_test_t *t = lf_new();
  lf_conns(t, 2, &lf_block_ops);
  lf_create(t, TAXI_PROMOTE_LIFO, TAXI_LEADERS_ONE);
  CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, 3), 0);
  int j = lf_start_joiner(t, -1, 0);
  CU_ASSERT(lf_wait_idle(t->p, 4));
  util_write_byte(t->conn[0].sv[1]);
  CU_ASSERT(pools_wait_count(&t->gate.entered, 1, POOLS_WAIT_MS));
  static lf_destroyer_t d;
  d.p = t->p;
  d.c = &t->conn[0];
  d.rc = 1;
  atomic_init(&d.returned, 0);
  util_thread_t dt;
  CU_ASSERT_EQUAL_FATAL(util_thread_start(&dt, lf_destroyer_main, &d), 0);
  util_sleep_ms(50);
  int early = atomic_load(&d.returned);
  pools_gate_open(&t->gate);
  util_thread_join(&dt, POOLS_WAIT_MS, "taxi_lf_destroy (busy pool)");
  t->p = NULL;
  CU_ASSERT_EQUAL(early, 0);
  CU_ASSERT_EQUAL(d.rc, 0);
  CU_ASSERT_EQUAL(d.hook_done_then, 1);
  util_thread_join(&t->th[j], POOLS_WAIT_MS, "taxi_lf_join after destroy");
  CU_ASSERT_EQUAL(t->join_rc[j], 0);
  CU_ASSERT_EQUAL(atomic_load(&t->conn[0].hook_done), 1);
  /* The other handle's event is still there for the reactor. */
  util_write_byte(t->conn[1].sv[1]);
  CU_ASSERT(taxi_reactor_handle_events(t->r, POOLS_WAIT_MS) >= 1);
  CU_ASSERT_EQUAL(atomic_load(&t->conn[1].inputs), 1);
  lf_free(t);
}

/* ---- bad input ----------------------------------------------------------- */

static void test_bad_null(void) {
  lf_test_t *t = lf_new();
  taxi_lf_pool_t *p = NULL;
  taxi_lf_stats_t s;
  taxi_lf_thread_stats_t ts[2];
  taxi_lf_options_t o = TAXI_LF_OPTIONS_INIT;
  CU_ASSERT_EQUAL(taxi_lf_create(NULL, t->r, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_create(NULL, t->r, &o), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_create(&p, NULL, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_create(&p, NULL, &o), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_spawn(NULL, 1), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_join(NULL, 0, 0), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_join(NULL, -1, 0), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_shrink(NULL, 1), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_stop(NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_destroy(NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_stats(NULL, &s), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_thread_stats(NULL, ts, 2), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_current_thread(NULL), -1);
  /* A NULL options pointer means defaults. */
  CU_ASSERT_EQUAL_FATAL(taxi_lf_create(&p, t->r, NULL), 0);
  CU_ASSERT_EQUAL(taxi_lf_stats(p, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_destroy(p), 0);
  lf_free(t);
}

static void test_bad_counts(void) {
  lf_test_t *t = lf_new();
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
  CU_ASSERT_EQUAL(t->join_rc[j], 0);
  lf_free(t);
}

static void test_bad_options(void) {
  lf_test_t *t = lf_new();
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
  lf_free(t);
}

/* Calls given a destroyed pool are refused with TAXI_EINVAL. */
static void test_bad_destroyed(void) {
  lf_test_t *t = lf_new();
  taxi_lf_pool_t *p = NULL;
  CU_ASSERT_EQUAL_FATAL(taxi_lf_create(&p, t->r, NULL), 0);
  CU_ASSERT_EQUAL(taxi_lf_spawn(p, 2), 0);
  CU_ASSERT_EQUAL(
      util_bounded(lf_do_destroy, p, POOLS_WAIT_MS, "taxi_lf_destroy"), 0);
  taxi_lf_stats_t s;
  taxi_lf_thread_stats_t ts[2];
  CU_ASSERT_EQUAL(taxi_lf_join(p, 0, 0), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_spawn(p, 1), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_shrink(p, 1), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_stop(p), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_stats(p, &s), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_thread_stats(p, ts, 2), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_current_thread(p), -1);
  CU_ASSERT_EQUAL(taxi_lf_destroy(p), TAXI_EINVAL);
  /* Never created: the registry does not know it. */
  taxi_lf_pool_t *bogus = (taxi_lf_pool_t *)(void *)&s;
  CU_ASSERT_EQUAL(taxi_lf_join(bogus, 0, 0), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_destroy(bogus), TAXI_EINVAL);
  lf_free(t);
}

static void test_bad_shutdown_twice(void) {
  lf_test_t *t = lf_new();
  lf_create(t, TAXI_PROMOTE_LIFO, TAXI_LEADERS_ONE);
  CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, 2), 0);
  CU_ASSERT_EQUAL(
      util_bounded(lf_do_shutdown, t->p, POOLS_WAIT_MS, "taxi_lf_stop"), 0);
  CU_ASSERT_EQUAL(taxi_lf_stop(t->p), TAXI_ESTOPPED);
  lf_free(t);
}

static int lf_do_hsha_create(void *arg) {
  taxi_hsha_pool_t *hp = NULL;
  int rc = taxi_hsha_create(&hp, arg, NULL);
  if (rc == 0) taxi_hsha_destroy(hp);
  return rc;
}

/* One pool per reactor; a reactor with a pool is not dispatched directly. */
static void test_bad_second_pool(void) {
  lf_test_t *t = lf_new();
  lf_conns(t, 1, &lf_count_ops);
  lf_create(t, TAXI_PROMOTE_LIFO, TAXI_LEADERS_ONE);
  taxi_lf_pool_t *p2 = NULL;
  CU_ASSERT_EQUAL(taxi_lf_create(&p2, t->r, NULL), TAXI_EBUSY);
  CU_ASSERT_EQUAL(
      util_bounded(lf_do_hsha_create, t->r, POOLS_WAIT_MS, "taxi_hsha_create"),
      TAXI_EBUSY);
  CU_ASSERT_EQUAL(taxi_reactor_handle_events(t->r, 0), TAXI_EBUSY);
  CU_ASSERT_EQUAL(taxi_reactor_handle_one(t->r, 0), TAXI_EBUSY);
  CU_ASSERT_EQUAL(taxi_reactor_run(t->r), TAXI_EBUSY);
  /* Everything else about the reactor works, from any thread. */
  CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, 1), 0);
  util_write_byte(t->conn[0].sv[1]);
  CU_ASSERT(lf_wait_bytes(t, 1));
  CU_ASSERT_EQUAL(
      util_bounded(lf_do_destroy, t->p, POOLS_WAIT_MS, "taxi_lf_destroy"), 0);
  t->p = NULL;
  /* Given back: direct dispatch and a new pool work again. */
  util_write_byte(t->conn[0].sv[1]);
  CU_ASSERT(taxi_reactor_handle_events(t->r, POOLS_WAIT_MS) >= 1);
  CU_ASSERT_EQUAL(lf_total_bytes(t), 2);
  lf_create(t, TAXI_PROMOTE_FIFO, TAXI_LEADERS_ONE);
  lf_free(t);
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

static void test_bad_reactor_dispatched(void) {
  lf_test_t *t = lf_new();
  lf_conns(t, 1, &lf_block_ops);
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
  lf_free(t);
}

/* From a hook of the pool: join, shrink and destroy are refused with
 * TAXI_EBUSY (each would wait for itself). */
static int lf_reenter_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  lf_conn_t *c = LF_CONN(h);
  lf_test_t *t = c->t;
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
                                                  .close = lf_conn_close};

static void test_bad_from_hook(void) {
  lf_test_t *t = lf_new();
  lf_conns(t, 1, &lf_reenter_ops);
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
  lf_free(t);
}

/* ---- allocations --------------------------------------------------------- */

/* Echo what arrives. */
static int lf_echo_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  lf_conn_t *c = LF_CONN(h);
  char buf[64];
  (void)ev;
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;
    atomic_fetch_add(&c->bytes, (long)n);
    if (write(fd, buf, (size_t)n) != n) atomic_fetch_add(&c->overlaps, 1);
  }
  atomic_fetch_add(&c->inputs, 1);
  return 0;
}

static const taxi_handler_ops_t lf_echo_ops = {.input = lf_echo_input,
                                               .close = lf_conn_close};

/* One byte to each of the first n connections' peers, then wait for every
 * answer.  0 or -1. */
static int lf_ping_all(lf_test_t *t, int n) {
  int peers[LF_MAX_CONNS];
  for (int i = 0; i < n; i++) peers[i] = t->conn[i].sv[1];
  return pools_ping_all(peers, n);
}

/* Zero heap allocations per event in steady state: 4 threads, 32
 * connections, 50,000 ping-pong events after a warm-up. */
static void test_zero_alloc_per_event(void) {
  enum { N = 32, WARMUP = 100 };
  const int events = 50000;
  CU_ASSERT_EQUAL_FATAL(util_alloc_install(), 0);
  util_alloc_reset();
  lf_test_t *t = lf_new();
  CU_ASSERT(util_alloc_counts().mallocs > 0); /* the hook is used */
  lf_conns(t, N, &lf_echo_ops);
  lf_create(t, TAXI_PROMOTE_LIFO, TAXI_LEADERS_ONE);
  CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, 4), 0);
  int failed = 0;
  for (int i = 0; i < WARMUP && !failed; i++)
    if (lf_ping_all(t, N) != 0) failed = 1;
  CU_ASSERT_EQUAL(failed, 0);
  taxi_lf_stats_t s0 = lf_stats(t->p);
  util_alloc_counts_t before = util_alloc_counts();
  int rounds = (events + N - 1) / N;
  for (int i = 0; i < rounds && !failed; i++)
    if (lf_ping_all(t, N) != 0) failed = 2;
  util_alloc_counts_t after = util_alloc_counts();
  taxi_lf_stats_t s1 = lf_stats(t->p);
  CU_ASSERT_EQUAL(failed, 0);
  uint64_t mallocs = after.mallocs - before.mallocs;
  uint64_t reallocs = after.reallocs - before.reallocs;
  printf("(%d round trips, %llu events, %llu malloc, %llu realloc) ",
         rounds * N, (unsigned long long)(s1.events - s0.events),
         (unsigned long long)mallocs, (unsigned long long)reallocs);
  /* A hook may take the next round's byte with this one's: count the
   * round trips, not the events. */
  CU_ASSERT(s1.events - s0.events > 0);
  CU_ASSERT(rounds * N >= events);
  CU_ASSERT_EQUAL(mallocs, 0);
  CU_ASSERT_EQUAL(reallocs, 0);
  lf_free(t);
  CU_ASSERT_EQUAL(util_alloc_counts().live, 0);
  CU_ASSERT_EQUAL(util_alloc_uninstall(), 0);
}

/* Everything a pool allocated is freed by destroy (through the hook): pool
 * lifetimes on one reactor leave nothing behind, and destroying the
 * reactor then frees everything.  (The reactor may keep buffers it grew
 * for the first pool, for the next: the baseline is taken after one.) */
static void test_destroy_frees_everything(void) {
  CU_ASSERT_EQUAL_FATAL(util_alloc_install(), 0);
  util_alloc_reset();
  lf_test_t *t = lf_new();
  lf_conns(t, 8, &lf_count_ops);
  int64_t live[3];
  for (int cycle = 0; cycle < 3; cycle++) {
    int64_t before = util_alloc_counts().live;
    lf_create(t, TAXI_PROMOTE_PRIORITY, TAXI_LEADERS_ONE);
    CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, 3), 0);
    int j = lf_start_joiner(t, LF_JOIN_MS, 4);
    for (int i = 0; i < 8; i++) util_write_byte(t->conn[i].sv[1]);
    CU_ASSERT(lf_wait_bytes(t, 8L * (cycle + 1)));
    CU_ASSERT(util_alloc_counts().live > before);
    CU_ASSERT_EQUAL(
        util_bounded(lf_do_destroy, t->p, POOLS_WAIT_MS, "taxi_lf_destroy"), 0);
    t->p = NULL;
    util_thread_join(&t->th[j], POOLS_WAIT_MS, "taxi_lf_join after destroy");
    live[cycle] = util_alloc_counts().live;
  }
  if (live[1] != live[0] || live[2] != live[0])
    printf(
        "\n    blocks allocated after each pool's destroy: %lld %lld "
        "%lld\n",
        (long long)live[0], (long long)live[1], (long long)live[2]);
  CU_ASSERT_EQUAL(live[1], live[0]);
  CU_ASSERT_EQUAL(live[2], live[0]);
  lf_free(t);
  CU_ASSERT_EQUAL(util_alloc_counts().live, 0);
  CU_ASSERT_EQUAL(util_alloc_uninstall(), 0);
}

/* Each allocation create and spawn make, failed in turn: TAXI_ENOMEM,
 * nothing leaked, the reactor left usable. */
static void test_allocation_failures(void) {
  CU_ASSERT_EQUAL_FATAL(util_alloc_install(), 0);
  util_alloc_reset();
  lf_test_t *t = lf_new();
  /* One pool first, so that what the reactor grows for a pool is there. */
  lf_create(t, TAXI_PROMOTE_LIFO, TAXI_LEADERS_ONE);
  CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, 2), 0);
  CU_ASSERT_EQUAL(
      util_bounded(lf_do_destroy, t->p, POOLS_WAIT_MS, "taxi_lf_destroy"), 0);
  t->p = NULL;
  int64_t base = util_alloc_counts().live;
  int succeeded = 0, wrong = 0, leaked = 0;
  /* Only this thread's allocations are failed: a pool's own threads may
   * grow the backend's buffers meanwhile, and a failure there is a
   * retried wait, not what this test counts. */
  for (long n = 0; n < 200 && !succeeded; n++) {
    util_alloc_fail_after_here(n);
    taxi_lf_pool_t *p = NULL;
    int created = taxi_lf_create(&p, t->r, NULL);
    int rc = created;
    if (rc == 0) rc = taxi_lf_spawn(p, 2);
    util_alloc_fail_after_here(-1);
    if (rc == 0) succeeded = 1;
    if (rc != 0 && rc != TAXI_ENOMEM) {
      if (!wrong)
        printf("\n    failing allocation #%ld: %s\n", n, taxi_error_name(rc));
      wrong++;
    }
    if (created == 0) CU_ASSERT_EQUAL(taxi_lf_destroy(p), 0);
    if (util_alloc_counts().live != base) {
      if (!leaked)
        printf("\n    failing allocation #%ld: %lld blocks leaked\n", n,
               (long long)(util_alloc_counts().live - base));
      leaked++;
    }
  }
  CU_ASSERT_EQUAL(succeeded, 1);
  CU_ASSERT_EQUAL(wrong, 0);
  CU_ASSERT_EQUAL(leaked, 0);
  lf_free(t);
  CU_ASSERT_EQUAL(util_alloc_uninstall(), 0);
}

/* ---- suites -------------------------------------------------------------- */

static CU_TestInfo lf_tests[] = {
    {"spawned and joined threads dispatch", test_spawn_and_join},
    {"join times out: TAXI_ETIMEDOUT", test_join_timeout},
    {"a leader timing out hands over", test_join_timeout_leader_hands_over},
    {"join after shutdown: TAXI_ESTOPPED", test_join_after_shutdown},
    {"promotion LIFO: T0 T3 T2 T1", test_promote_lifo},
    {"promotion FIFO: T0 T1 T2 T3", test_promote_fifo},
    {"promotion priority: T0 T2 T3 T1", test_promote_priority},
    {"promotion priority: ties in LIFO order", test_promote_priority_ties_lifo},
    {"promotion shared: each thread once", test_promote_shared},
    {"one thread per handle at a time", test_one_thread_per_handle},
    {"one thread per handle, many leaders",
     test_one_thread_per_handle_many_leaders},
    {"multiple leaders (or ENOTSUP by caps)", test_multiple_leaders},
    {"max_leaders bounds the leaders", test_max_leaders},
    {"pending events taken without a wait", test_pending_taken_without_wait},
    {"re-arm after a read ended in EAGAIN: every round delivered",
     test_rearm_after_eagain},
    {"grow and shrink while running", test_grow_and_shrink},
    {"shrink lets its threads go", test_shrink_releases_threads},
    {"remove while dispatched: close after hook", test_remove_while_dispatched},
    {"remove while the hook removes too", test_remove_while_hook_removes},
    {"remove many while busy: close once each", test_remove_many_while_busy},
    {"timers run in pool threads", test_timers_in_pool},
    {"notifications run in pool threads", test_notifications_in_pool},
    {"counters add up", test_counters},
    CU_TEST_INFO_NULL,
};

static CU_TestInfo lf_shutdown_tests[] = {
    {"shutdown while every thread is busy", test_shutdown_busy},
    {"shutdown of an idle pool", test_shutdown_idle},
    {"shutdown of an idle pool, every order", test_shutdown_idle_every_order},
    {"shutdown from a hook", test_shutdown_from_hook},
    {"destroy of a running pool", test_destroy_running},
    CU_TEST_INFO_NULL,
};

static CU_TestInfo lf_bad_tests[] = {
    {"NULL: TAXI_EINVAL", test_bad_null},
    {"thread counts: TAXI_EINVAL", test_bad_counts},
    {"options: TAXI_EINVAL / TAXI_ENOTSUP", test_bad_options},
    {"destroyed pool: TAXI_EINVAL", test_bad_destroyed},
    {"shutdown twice: TAXI_ESTOPPED", test_bad_shutdown_twice},
    {"second pool, direct dispatch: TAXI_EBUSY", test_bad_second_pool},
    {"reactor being dispatched: TAXI_EBUSY", test_bad_reactor_dispatched},
    {"join, shrink, destroy from a hook: TAXI_EBUSY", test_bad_from_hook},
    CU_TEST_INFO_NULL,
};

static CU_TestInfo lf_alloc_tests[] = {
    {"destroy frees everything", test_destroy_frees_everything},
    {"allocation failures: TAXI_ENOMEM, no leak", test_allocation_failures},
    {"zero allocations per event", test_zero_alloc_per_event},
    CU_TEST_INFO_NULL,
};

const taxi_test_suite_t pools_suite_lf = {"lf", lf_tests, 180, NULL};
const taxi_test_suite_t pools_suite_lf_shutdown = {"lf shutdown",
                                                   lf_shutdown_tests, 60, NULL};
const taxi_test_suite_t pools_suite_lf_bad_input = {"lf bad input",
                                                    lf_bad_tests, 60, NULL};
const taxi_test_suite_t pools_suite_lf_alloc = {"lf alloc", lf_alloc_tests, 120,
                                                NULL};
