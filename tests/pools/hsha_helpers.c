/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/pools/hsha_helpers.c - the half-sync/half-async pool's test
 * fixture: a pool over connections, the waits on its counters, and the
 * hooks several tests use (see hsha_helpers.h).
 */
#define _GNU_SOURCE 1

#include "hsha_helpers.h"

hs_test_t *hs_new(void) {
  hs_test_t *t = calloc(1, sizeof *t);
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  pools_gate_init(&t->gate);
  t->main_tid = pthread_self();
  pthread_mutex_init(&t->mu, NULL);
  atomic_init(&t->reactor_tids_differ, 0);
  atomic_init(&t->on_main, 0);
  atomic_init(&t->on_reactor, 0);
  atomic_init(&t->prio_calls, 0);
  atomic_init(&t->next, 0);
  for (int i = 0; i < HS_MAX_CONNS; i++) atomic_init(&t->order[i], -1);
  atomic_init(&t->hook_calls, 0);
  atomic_init(&t->rc_shutdown, 1);
  atomic_init(&t->rc_shutdown2, 1);
  atomic_init(&t->rc_destroy, 1);
  atomic_init(&t->rc_stats, 1);
  atomic_init(&t->workers_after_shutdown, -1);
  t->r = pools_reactor();
  return t;
}

void hs_conns(hs_test_t *t, int n, const taxi_handler_ops_t *ops) {
  CU_ASSERT_FATAL(n <= HS_MAX_CONNS);
  for (int i = 0; i < n; i++) {
    hs_conn_t *c = &t->conn[i];
    pools_pair(c->sv);
    c->t = t;
    c->index = i;
    atomic_init(&c->inputs, 0);
    atomic_init(&c->bytes, 0);
    atomic_init(&c->closes, 0);
    atomic_init(&c->busy, 0);
    atomic_init(&c->overlaps, 0);
    atomic_init(&c->hook_done, 0);
    atomic_init(&c->rejected, 0);
    CU_ASSERT_EQUAL_FATAL(taxi_handler_init(&c->h, ops), 0);
    CU_ASSERT_EQUAL_FATAL(
        taxi_reactor_register(t->r, c->sv[0], &c->h, TAXI_EV_READ), 0);
  }
  t->nconns = n;
}

int hs_do_shutdown(void *p) { return taxi_hsha_stop(p); }
int hs_do_destroy(void *p) { return taxi_hsha_destroy(p); }

void hs_teardown(hs_test_t *t) {
  pools_gate_open(&t->gate);
  if (t->p) {
    CU_ASSERT_EQUAL(
        util_bounded(hs_do_destroy, t->p, POOLS_WAIT_MS, "taxi_hsha_destroy"),
        0);
    t->p = NULL;
  }
  CU_ASSERT_EQUAL(taxi_reactor_destroy(t->r), 0);
  for (int i = 0; i < t->nconns; i++) pools_close_pair(t->conn[i].sv);
  CU_ASSERT_EQUAL(atomic_load(&t->gate.timeouts), 0);
}

void hs_free(hs_test_t *t) {
  hs_teardown(t);
  pthread_mutex_destroy(&t->mu);
  free(t);
}

void hs_create(hs_test_t *t, const taxi_hsha_options_t *o) {
  int rc = taxi_hsha_create(&t->p, t->r, o);
  if (rc != 0) printf("\n    taxi_hsha_create = %s\n", taxi_error_name(rc));
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  CU_ASSERT_PTR_NOT_NULL_FATAL(t->p);
}

taxi_hsha_stats_t hs_stats(taxi_hsha_pool_t *p) {
  taxi_hsha_stats_t s;
  memset(&s, 0, sizeof s);
  CU_ASSERT_EQUAL(taxi_hsha_stats(p, &s), 0);
  return s;
}

static int hs_pred_workers(const taxi_hsha_stats_t *s, void *arg) {
  return s->workers == *(const unsigned *)arg;
}

static int hs_pred_queued(const taxi_hsha_stats_t *s, void *arg) {
  return s->queued == *(const unsigned *)arg;
}

int hs_wait_workers(taxi_hsha_pool_t *p, unsigned n) {
  taxi_hsha_stats_t s;
  if (pools_hsha_wait(p, hs_pred_workers, &n, POOLS_WAIT_MS, &s)) return 1;
  printf("\n    workers never %u: %u\n", n, s.workers);
  return 0;
}

int hs_wait_queued(taxi_hsha_pool_t *p, unsigned n) {
  taxi_hsha_stats_t s;
  if (pools_hsha_wait(p, hs_pred_queued, &n, POOLS_WAIT_MS, &s)) return 1;
  printf("\n    queued never %u: %u\n", n, s.queued);
  return 0;
}

long hs_total_bytes(hs_test_t *t) {
  long n = 0;
  for (int i = 0; i < t->nconns; i++) n += atomic_load(&t->conn[i].bytes);
  return n;
}

int hs_total_inputs(hs_test_t *t) {
  int n = 0;
  for (int i = 0; i < t->nconns; i++) n += atomic_load(&t->conn[i].inputs);
  return n;
}

int hs_wait_bytes(hs_test_t *t, long goal) {
  taxi_time_t start = taxi_now();
  while (hs_total_bytes(t) < goal) {
    if (util_elapsed_ms(start) > POOLS_WAIT_MS) {
      printf("\n    %ld of %ld bytes read by the hooks\n", hs_total_bytes(t),
             goal);
      return 0;
    }
    util_sleep_ms(1);
  }
  return 1;
}

/* ---- hooks --------------------------------------------------------------- */

/* Which thread runs this hook: not main, not the reactor thread. */
void hs_note_thread(hs_test_t *t) {
  pthread_t self = pthread_self();
  if (pthread_equal(self, t->main_tid)) atomic_fetch_add(&t->on_main, 1);
  pthread_mutex_lock(&t->mu);
  if (t->have_reactor_tid && pthread_equal(self, t->reactor_tid))
    atomic_fetch_add(&t->on_reactor, 1);
  int known = 0;
  for (int i = 0; i < t->nworkers_seen; i++)
    if (pthread_equal(t->workers[i], self)) known = 1;
  if (!known && t->nworkers_seen < 16) t->workers[t->nworkers_seen++] = self;
  pthread_mutex_unlock(&t->mu);
}

void hs_conn_close(taxi_handler_t *h, taxi_handle_t fd) {
  (void)fd;
  atomic_fetch_add(&HS_CONN(h)->closes, 1);
}

static int hs_count_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  hs_conn_t *c = HS_CONN(h);
  (void)ev;
  hs_note_thread(c->t);
  int k = atomic_fetch_add(&c->t->next, 1);
  if (k < HS_MAX_CONNS) atomic_store(&c->t->order[k], c->index);
  atomic_fetch_add(&c->bytes, pools_drain(fd));
  atomic_fetch_add(&c->inputs, 1);
  return 0;
}

const taxi_handler_ops_t hs_count_ops = {.input = hs_count_input,
                                         .close = hs_conn_close};

int hs_block_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  hs_conn_t *c = HS_CONN(h);
  (void)ev;
  hs_note_thread(c->t);
  atomic_store(&c->busy, 1);
  atomic_fetch_add(&c->bytes, pools_drain(fd));
  atomic_fetch_add(&c->inputs, 1);
  pools_gate_pass(&c->t->gate);
  atomic_store(&c->busy, 0);
  atomic_fetch_add(&c->hook_done, 1);
  return 0;
}

/* Handlers of either kind: conn 0 blocks, the others count. */
int hs_mixed_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  if (HS_CONN(h)->index == 0) return hs_block_input(h, fd, ev);
  return hs_count_input(h, fd, ev);
}

int hs_priority(taxi_handler_t *h, unsigned events, void *arg) {
  hs_test_t *t = arg;
  pthread_t self = pthread_self();
  (void)events;
  atomic_fetch_add(&t->prio_calls, 1);
  pthread_mutex_lock(&t->mu);
  if (!t->have_reactor_tid) {
    t->reactor_tid = self;
    t->have_reactor_tid = 1;
  } else if (!pthread_equal(t->reactor_tid, self)) {
    atomic_fetch_add(&t->reactor_tids_differ, 1);
  }
  pthread_mutex_unlock(&t->mu);
  return HS_CONN(h)->prio;
}
