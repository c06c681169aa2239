/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/pools/lf_helpers.c - the Leader/Followers pool's test fixture:
 * a pool over connections, the threads that join it, the waits on its
 * counters, and the hooks several tests use (see lf_helpers.h).
 */
#define _GNU_SOURCE 1

#include "lf_helpers.h"

lf_test_t *lf_new(void) {
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
void lf_conns(lf_test_t *t, int n, const taxi_handler_ops_t *ops) {
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

int lf_do_shutdown(void *p) { return taxi_lf_stop(p); }
int lf_do_destroy(void *p) { return taxi_lf_destroy(p); }

/* Destroy the pool (bounded), the reactor, the pairs; t stays. */
void lf_teardown(lf_test_t *t) {
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

void lf_free(lf_test_t *t) {
  lf_teardown(t);
  free(t);
}

void lf_create(lf_test_t *t, taxi_promotion_t promotion,
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
int lf_start_joiner(lf_test_t *t, int timeout_ms, int prio) {
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

int lf_wait_shape(taxi_lf_pool_t *p, int threads, int leaders, int followers) {
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

int lf_wait_idle(taxi_lf_pool_t *p, unsigned n) {
  taxi_lf_stats_t s;
  if (pools_lf_wait(p, lf_pred_idle, &n, POOLS_WAIT_MS, &s)) return 1;
  printf(
      "\n    pool never idle with %u threads: threads %u leaders %u "
      "followers %u\n",
      n, s.threads, s.leaders, s.followers);
  return 0;
}

taxi_lf_stats_t lf_stats(taxi_lf_pool_t *p) {
  taxi_lf_stats_t s;
  memset(&s, 0, sizeof s);
  CU_ASSERT_EQUAL(taxi_lf_stats(p, &s), 0);
  return s;
}

long lf_total_bytes(lf_test_t *t) {
  long n = 0;
  for (int i = 0; i < t->nconns; i++) n += atomic_load(&t->conn[i].bytes);
  return n;
}

int lf_total_inputs(lf_test_t *t) {
  int n = 0;
  for (int i = 0; i < t->nconns; i++) n += atomic_load(&t->conn[i].inputs);
  return n;
}

/* Wait until the hooks have read `goal` bytes in all. */
int lf_wait_bytes(lf_test_t *t, long goal) {
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

void lf_note_thread(lf_test_t *t) {
  int id = taxi_lf_current_thread(t->p);
  if (id < 0)
    atomic_fetch_add(&t->bad_thread, 1);
  else if (id < 64)
    atomic_fetch_or(&t->seen, 1ull << id);
}

void lf_conn_close(taxi_handler_t *h, taxi_handle_t fd) {
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

const taxi_handler_ops_t lf_count_ops = {.input = lf_count_input,
                                         .close = lf_conn_close};

/* Record which pool thread takes the k-th event, then block. */
int lf_order_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
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

const taxi_handler_ops_t lf_block_ops = {.input = lf_block_input,
                                         .close = lf_conn_close};
