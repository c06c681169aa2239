/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/pools/pool_fixture.c - the test fixture of both thread pools: a
 * pool (of the row's kind) over connections, the waits on its counters,
 * and the hooks several tests use (see pool_fixture.h).
 */
#define _GNU_SOURCE 1

#include "pool_fixture.h"

pool_test_t *pool_new(const pool_row_t *row) {
  pool_test_t *t = calloc(1, sizeof *t);
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  t->row = row;
  pools_gate_init(&t->gate);
  atomic_init(&t->next, 0);
  for (int i = 0; i < POOL_MAX_CONNS; i++) atomic_init(&t->order[i], -1);
  atomic_init(&t->hook_calls, 0);
  atomic_init(&t->rc_join, 1);
  atomic_init(&t->rc_destroy, 1);
  atomic_init(&t->rc_shrink, 1);
  atomic_init(&t->rc_shutdown, 1);
  atomic_init(&t->rc_shutdown2, 1);
  atomic_init(&t->rc_stats, 1);
  atomic_init(&t->threads_after_stop, -1);
  atomic_init(&t->thread_next, 0);
  for (int i = 0; i < 8; i++) atomic_init(&t->thread_order[i], -1);
  atomic_init(&t->seen, 0);
  atomic_init(&t->bad_thread, 0);
  atomic_init(&t->removed, 0);
  t->main_tid = pthread_self();
  CU_ASSERT_EQUAL_FATAL(pthread_mutex_init(&t->mu, NULL), 0);
  atomic_init(&t->reactor_tids_differ, 0);
  atomic_init(&t->on_main, 0);
  atomic_init(&t->on_reactor, 0);
  atomic_init(&t->prio_calls, 0);
  t->r = pools_reactor();
  return t;
}

void pool_conns(pool_test_t *t, int n, const taxi_handler_ops_t *ops) {
  CU_ASSERT_FATAL(n <= POOL_MAX_CONNS);
  for (int i = 0; i < n; i++) {
    pool_conn_t *c = &t->conn[i];
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
    atomic_init(&c->rejected, 0);
    CU_ASSERT_EQUAL_FATAL(taxi_handler_init(&c->h, ops), 0);
    CU_ASSERT_EQUAL_FATAL(
        taxi_reactor_register(t->r, c->sv[0], &c->h, TAXI_EV_READ), 0);
  }
  t->nconns = n;
}

void pool_start(pool_test_t *t, const void *opts, unsigned threads) {
  int rc = t->row->create(t->r, opts, threads, &t->p);
  if (rc != 0)
    printf("\n    %s = %s\n", t->row->create_name, taxi_error_name(rc));
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  CU_ASSERT_PTR_NOT_NULL_FATAL(t->p);
}

void pool_join_app_threads(pool_test_t *t, const char *what) {
  for (int i = 0; i < t->next_thread; i++)
    util_thread_join(&t->th[i], POOLS_WAIT_MS, what);
  t->next_thread = 0;
}

int pool_stop_bounded(pool_test_t *t, const char *what) {
  return util_bounded(t->row->stop, t->p, POOLS_WAIT_MS, what);
}

int pool_destroy_bounded(pool_test_t *t) {
  int rc =
      util_bounded(t->row->destroy, t->p, POOLS_WAIT_MS, t->row->destroy_name);
  t->p = NULL;
  return rc;
}

void pool_teardown(pool_test_t *t) {
  if (t->torn_down) return;
  t->torn_down = 1;
  pools_gate_open(&t->gate);
  if (t->p) CU_ASSERT_EQUAL(pool_destroy_bounded(t), 0);
  pool_join_app_threads(t, "a thread in taxi_lf_join");
  CU_ASSERT_EQUAL(taxi_reactor_destroy(t->r), 0);
  for (int i = 0; i < t->nconns; i++) pools_close_pair(t->conn[i].sv);
  CU_ASSERT_EQUAL(atomic_load(&t->gate.timeouts), 0);
}

void pool_free(pool_test_t *t) {
  pool_teardown(t);
  pthread_mutex_destroy(&t->mu);
  free(t);
}

/* ---- counters ------------------------------------------------------------ */

pool_counts_t pool_counts(pool_test_t *t) {
  pool_counts_t c;
  memset(&c, 0, sizeof c);
  CU_ASSERT_EQUAL(t->row->counts(t->p, &c), 0);
  return c;
}

/* Poll the pool's counters until pred holds (bounded); the last read
 * are left in *last.  1 when pred held. */
static int pool_wait_for(pool_test_t *t,
                         int (*pred)(pool_test_t *t, const pool_counts_t *c,
                                     unsigned n),
                         unsigned n, pool_counts_t *last) {
  taxi_time_t start = taxi_now();
  for (;;) {
    memset(last, 0, sizeof *last);
    int rc = t->row->counts(t->p, last);
    if (rc == 0 && pred(t, last, n)) return 1;
    if (util_elapsed_ms(start) > POOLS_WAIT_MS) return 0;
    util_sleep_ms(1);
  }
}

static int pool_pred_threads(pool_test_t *t, const pool_counts_t *c,
                             unsigned n) {
  (void)t;
  return c->threads == n;
}

static int pool_pred_idle(pool_test_t *t, const pool_counts_t *c, unsigned n) {
  return t->row->idle(c, t->p, n);
}

static int pool_pred_queued(pool_test_t *t, const pool_counts_t *c,
                            unsigned n) {
  (void)t;
  return c->queued == n;
}

int pool_wait_threads(pool_test_t *t, unsigned n) {
  pool_counts_t c;
  if (pool_wait_for(t, pool_pred_threads, n, &c)) return 1;
  printf("\n    %s threads never %u: %u\n", t->row->name, n, c.threads);
  return 0;
}

int pool_wait_idle(pool_test_t *t, unsigned n) {
  pool_counts_t c;
  if (pool_wait_for(t, pool_pred_idle, n, &c)) return 1;
  printf("\n    %s pool never idle with %u threads: %u\n", t->row->name, n,
         c.threads);
  return 0;
}

int pool_wait_queued(pool_test_t *t, unsigned n) {
  pool_counts_t c;
  if (pool_wait_for(t, pool_pred_queued, n, &c)) return 1;
  printf("\n    queued never %u: %u\n", n, c.queued);
  return 0;
}

long pool_total_bytes(pool_test_t *t) {
  long n = 0;
  for (int i = 0; i < t->nconns; i++) n += atomic_load(&t->conn[i].bytes);
  return n;
}

int pool_total_inputs(pool_test_t *t) {
  int n = 0;
  for (int i = 0; i < t->nconns; i++) n += atomic_load(&t->conn[i].inputs);
  return n;
}

/* Wait until the hooks have read `goal` bytes in all. */
int pool_wait_bytes(pool_test_t *t, long goal) {
  taxi_time_t start = taxi_now();
  while (pool_total_bytes(t) < goal) {
    if (util_elapsed_ms(start) > POOLS_WAIT_MS) {
      printf("\n    %ld of %ld bytes read by the hooks\n", pool_total_bytes(t),
             goal);
      return 0;
    }
    util_sleep_ms(1);
  }
  return 1;
}

/* ---- hooks --------------------------------------------------------------- */

void pool_conn_close(taxi_handler_t *h, taxi_handle_t fd) {
  pool_conn_t *c = POOL_CONN(h);
  (void)fd;
  if (atomic_load(&c->busy)) atomic_store(&c->early_close, 1);
  atomic_fetch_add(&c->closes, 1);
}

/* Note the thread, record the order, drain, count. */
int pool_count_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  pool_conn_t *c = POOL_CONN(h);
  (void)ev;
  c->t->row->note_thread(c->t);
  int k = atomic_fetch_add(&c->t->next, 1);
  if (k < POOL_MAX_CONNS) atomic_store(&c->t->order[k], c->index);
  atomic_fetch_add(&c->bytes, pools_drain(fd));
  atomic_fetch_add(&c->inputs, 1);
  return 0;
}

const taxi_handler_ops_t pool_count_ops = {.input = pool_count_input,
                                           .close = pool_conn_close};

/* Drain, count, block until the gate opens, count the return. */
int pool_block_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  pool_conn_t *c = POOL_CONN(h);
  (void)ev;
  atomic_store(&c->busy, 1);
  c->t->row->note_thread(c->t);
  atomic_fetch_add(&c->bytes, pools_drain(fd));
  atomic_fetch_add(&c->inputs, 1);
  pools_gate_pass(&c->t->gate);
  atomic_store(&c->busy, 0);
  atomic_fetch_add(&c->hook_done, 1);
  return 0;
}

const taxi_handler_ops_t pool_block_ops = {.input = pool_block_input,
                                           .close = pool_conn_close};
