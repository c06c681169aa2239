/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/pools/hsha_shutdown.c - the half-sync/half-async pool's shutdown
 * (busy, with events queued, idle, from a hook), destroy of a running
 * pool, removal while it runs (tests of the "hsha" suite, in hsha.c).
 */
#define _GNU_SOURCE 1

#include "hsha_helpers.h"

static const taxi_handler_ops_t hs_block_ops = {.input = hs_block_input,
                                                .close = hs_conn_close};

/* ---- shutdown ------------------------------------------------------------ */

typedef struct hs_shutter {
  hs_test_t *t;
  atomic_int returned;
  int rc;
  int hooks_done_then;
  unsigned workers_then;
} hs_shutter_t;

static void hs_shutter_main(void *arg) {
  hs_shutter_t *s = arg;
  s->rc = taxi_hsha_stop(s->t->p);
  int done = 0;
  for (int i = 0; i < s->t->nconns; i++)
    done += atomic_load(&s->t->conn[i].hook_done);
  s->hooks_done_then = done;
  taxi_hsha_stats_t st;
  memset(&st, 0, sizeof st);
  taxi_hsha_stats(s->t->p, &st);
  s->workers_then = st.workers;
  atomic_store(&s->returned, 1);
}

/* Shutdown from another thread while workers are blocked in hooks: it
 * returns only after they were released; queued events are not run, their
 * handles are reactivated and reported when the reactor is dispatched
 * later. */
static void hs_shutdown_busy(int queued) {
  enum { W = 2 };
  hs_test_t *t = hs_new();
  hs_conns(t, W + 3, &hs_block_ops);
  taxi_hsha_options_t o = TAXI_HSHA_OPTIONS_INIT;
  o.workers = W;
  hs_create(t, &o);
  for (int i = 0; i < W; i++) util_write_byte(t->conn[i].sv[1]);
  CU_ASSERT(pools_wait_count(&t->gate.entered, W, POOLS_WAIT_MS));
  if (queued) {
    for (int i = W; i < W + 3; i++) util_write_byte(t->conn[i].sv[1]);
    CU_ASSERT(hs_wait_queued(t->p, 3));
  }
  static hs_shutter_t sh;
  memset(&sh, 0, sizeof sh);
  sh.t = t;
  atomic_init(&sh.returned, 0);
  util_thread_t st;
  CU_ASSERT_EQUAL_FATAL(util_thread_start(&st, hs_shutter_main, &sh), 0);
  util_sleep_ms(100);
  int early = atomic_load(&sh.returned);
  pools_gate_open(&t->gate);
  util_thread_join(&st, POOLS_WAIT_MS, "taxi_hsha_stop (busy pool)");
  CU_ASSERT_EQUAL(early, 0);
  CU_ASSERT_EQUAL(sh.rc, 0);
  CU_ASSERT_EQUAL(sh.hooks_done_then, W);
  CU_ASSERT_EQUAL(sh.workers_then, 0);
  CU_ASSERT_EQUAL(taxi_hsha_stop(t->p), TAXI_ESTOPPED);
  for (int i = 0; i < W; i++)
    CU_ASSERT_EQUAL(atomic_load(&t->conn[i].inputs), 1);
  if (queued) {
    for (int i = W; i < W + 3; i++)
      CU_ASSERT_EQUAL(atomic_load(&t->conn[i].inputs), 0);
    taxi_hsha_stats_t s = hs_stats(t->p);
    CU_ASSERT_EQUAL(s.events, (uint64_t)W);
    CU_ASSERT_EQUAL(
        util_bounded(hs_do_destroy, t->p, POOLS_WAIT_MS, "taxi_hsha_destroy"),
        0);
    t->p = NULL;
    /* Back with the reactor: reported again. */
    taxi_time_t start = taxi_now();
    while (hs_total_inputs(t) < W + 3 && util_elapsed_ms(start) < POOLS_WAIT_MS)
      CU_ASSERT(taxi_reactor_handle_events(t->r, 50) >= 0);
    for (int i = W; i < W + 3; i++)
      CU_ASSERT_EQUAL(atomic_load(&t->conn[i].inputs), 1);
  }
  hs_free(t);
}

void test_shutdown_busy(void) { hs_shutdown_busy(0); }

void test_shutdown_with_queued(void) { hs_shutdown_busy(1); }

void test_shutdown_idle(void) {
  hs_test_t *t = hs_new();
  hs_conns(t, 2, &hs_count_ops);
  taxi_hsha_options_t o = TAXI_HSHA_OPTIONS_INIT;
  o.workers = 6;
  hs_create(t, &o);
  CU_ASSERT(hs_wait_workers(t->p, 6));
  CU_ASSERT_EQUAL(util_bounded(hs_do_shutdown, t->p, POOLS_WAIT_MS,
                               "taxi_hsha_stop (idle pool)"),
                  0);
  CU_ASSERT_EQUAL(hs_stats(t->p).workers, 0);
  CU_ASSERT_EQUAL(taxi_hsha_stop(t->p), TAXI_ESTOPPED);
  hs_free(t);
}

static int hs_shutdown_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  hs_conn_t *c = HS_CONN(h);
  hs_test_t *t = c->t;
  (void)ev;
  pools_drain(fd);
  if (atomic_fetch_add(&t->hook_calls, 1) == 0) {
    atomic_store(&t->rc_shutdown, taxi_hsha_stop(t->p));
    taxi_hsha_stats_t s;
    memset(&s, 0, sizeof s);
    atomic_store(&t->rc_stats, taxi_hsha_stats(t->p, &s));
    atomic_store(&t->workers_after_shutdown, (int)s.workers);
    atomic_store(&t->rc_shutdown2, taxi_hsha_stop(t->p));
    atomic_store(&t->rc_destroy, taxi_hsha_destroy(t->p));
  }
  atomic_fetch_add(&c->inputs, 1);
  return 0;
}

static const taxi_handler_ops_t hs_shutdown_ops = {.input = hs_shutdown_input,
                                                   .close = hs_conn_close};

/* Shutdown from a hook returns 0 once every other thread has left; destroy
 * from a hook is refused; destroy from the main thread then works. */
void test_shutdown_from_hook(void) {
  hs_test_t *t = hs_new();
  hs_conns(t, 1, &hs_shutdown_ops);
  taxi_hsha_options_t o = TAXI_HSHA_OPTIONS_INIT;
  o.workers = 4;
  hs_create(t, &o);
  CU_ASSERT(hs_wait_workers(t->p, 4));
  util_write_byte(t->conn[0].sv[1]);
  CU_ASSERT(pools_wait_count(&t->conn[0].inputs, 1, POOLS_WAIT_MS));
  CU_ASSERT_EQUAL(atomic_load(&t->rc_shutdown), 0);
  CU_ASSERT_EQUAL(atomic_load(&t->rc_stats), 0);
  /* Only the calling worker is left. */
  CU_ASSERT_EQUAL(atomic_load(&t->workers_after_shutdown), 1);
  CU_ASSERT_EQUAL(atomic_load(&t->rc_shutdown2), TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(atomic_load(&t->rc_destroy), TAXI_EBUSY);
  CU_ASSERT(hs_wait_workers(t->p, 0));
  CU_ASSERT_EQUAL(
      util_bounded(hs_do_destroy, t->p, POOLS_WAIT_MS, "taxi_hsha_destroy"), 0);
  t->p = NULL;
  CU_ASSERT(taxi_reactor_handle_events(t->r, 0) >= 0);
  hs_free(t);
}

/* destroy while a worker is busy waits for its hook. */
typedef struct hs_destroyer {
  hs_test_t *t;
  atomic_int returned;
  int rc;
  int hook_done_then;
} hs_destroyer_t;

static void hs_destroyer_main(void *arg) {
  hs_destroyer_t *d = arg;
  d->rc = taxi_hsha_destroy(d->t->p);
  d->hook_done_then = atomic_load(&d->t->conn[0].hook_done);
  atomic_store(&d->returned, 1);
}

void test_destroy_running(void) {
  hs_test_t *t = hs_new();
  hs_conns(t, 1, &hs_block_ops);
  taxi_hsha_options_t o = TAXI_HSHA_OPTIONS_INIT;
  o.workers = 2;
  hs_create(t, &o);
  util_write_byte(t->conn[0].sv[1]);
  CU_ASSERT(pools_wait_count(&t->gate.entered, 1, POOLS_WAIT_MS));
  static hs_destroyer_t d;
  d.t = t;
  d.rc = 1;
  atomic_init(&d.returned, 0);
  util_thread_t dt;
  CU_ASSERT_EQUAL_FATAL(util_thread_start(&dt, hs_destroyer_main, &d), 0);
  util_sleep_ms(50);
  int early = atomic_load(&d.returned);
  pools_gate_open(&t->gate);
  util_thread_join(&dt, POOLS_WAIT_MS, "taxi_hsha_destroy (busy pool)");
  t->p = NULL;
  CU_ASSERT_EQUAL(early, 0);
  CU_ASSERT_EQUAL(d.rc, 0);
  CU_ASSERT_EQUAL(d.hook_done_then, 1);
  hs_free(t);
}

/* Removed from another thread while a worker runs its hook: the close hook
 * runs once, after the hook returned. */
void test_remove_while_running(void) {
  hs_test_t *t = hs_new();
  hs_conns(t, 1, &hs_block_ops);
  taxi_hsha_options_t o = TAXI_HSHA_OPTIONS_INIT;
  o.workers = 2;
  hs_create(t, &o);
  hs_conn_t *c = &t->conn[0];
  util_write_byte(c->sv[1]);
  CU_ASSERT(pools_wait_count(&t->gate.entered, 1, POOLS_WAIT_MS));
  CU_ASSERT_EQUAL(taxi_reactor_remove(t->r, &c->h), 0);
  CU_ASSERT_EQUAL(atomic_load(&c->closes), 0);
  pools_gate_open(&t->gate);
  CU_ASSERT(pools_wait_count(&c->closes, 1, POOLS_WAIT_MS));
  CU_ASSERT_EQUAL(atomic_load(&c->hook_done), 1);
  util_write_byte(c->sv[1]);
  util_sleep_ms(20);
  CU_ASSERT_EQUAL(atomic_load(&c->inputs), 1);
  hs_teardown(t);
  CU_ASSERT_EQUAL(atomic_load(&c->closes), 1);
  pthread_mutex_destroy(&t->mu);
  free(t);
}
