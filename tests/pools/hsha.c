/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/pools/hsha.c - the half-sync/half-async pool (taxi/hsha.h): hooks
 * run by workers (never the main thread, never the reactor thread), one
 * thread per handle at a time, flow control at high water, the priority
 * queue, timers and notifications, removal while a hook runs, the
 * options' limits; and the "hsha" suite.  The cases both pools share
 * (shutdown, bad input, allocations, one thread per handle) are written
 * once over the table of pools (pool_fixture.h).
 */
#define _GNU_SOURCE 1

#include "pool_fixture.h"

static int hs_pred_events(const taxi_hsha_stats_t *s, void *arg) {
  return s->events >= *(const unsigned *)arg;
}

static int hs_pred_stalled(const taxi_hsha_stats_t *s, void *arg) {
  (void)arg;
  return s->full_stalls > 0;
}

static const taxi_handler_ops_t hs_mixed_ops = {.input = hs_mixed_input,
                                                .close = pool_conn_close};

/* ---- dispatch by workers ------------------------------------------------- */

/* Events are run by the workers: never by the main thread, by at most
 * `workers` distinct threads; the counters agree with the hooks. */
static void test_workers_dispatch(void) {
  enum { N = 8, ROUNDS = 200 };
  pool_test_t *t = pool_new(&pool_row_hsha);
  pool_conns(t, N, &pool_count_ops);
  taxi_hsha_options_t o = TAXI_HSHA_OPTIONS_INIT;
  o.workers = 3;
  hs_create(t, &o);
  CU_ASSERT(pool_wait_threads(t, 3));
  int ok = 1;
  for (int round = 0; round < ROUNDS && ok; round++) {
    for (int i = 0; i < N; i++)
      CU_ASSERT_EQUAL(util_write_byte(t->conn[i].sv[1]), 1);
    ok = pool_wait_bytes(t, (long)N * (round + 1));
  }
  CU_ASSERT(ok);
  CU_ASSERT_EQUAL(atomic_load(&t->on_main), 0);
  pthread_mutex_lock(&t->mu);
  int distinct = t->nworkers_seen;
  pthread_mutex_unlock(&t->mu);
  printf("(%d workers ran hooks) ", distinct);
  CU_ASSERT(distinct >= 1 && distinct <= 3);
  CU_ASSERT_EQUAL(
      util_bounded(hs_do_shutdown, t->p, POOLS_WAIT_MS, "taxi_hsha_stop"), 0);
  taxi_hsha_stats_t s = hs_stats(t->p);
  CU_ASSERT_EQUAL(s.events, (uint64_t)pool_total_inputs(t));
  CU_ASSERT_EQUAL(s.enqueued, s.events);
  CU_ASSERT(s.waits > 0);
  CU_ASSERT_EQUAL(s.queued, 0);
  CU_ASSERT(s.max_queued >= 1);
  CU_ASSERT_EQUAL(s.workers, 0);
  pool_free(t);
}

/* NULL options: 4 workers. */
static void test_defaults(void) {
  pool_test_t *t = pool_new(&pool_row_hsha);
  pool_conns(t, 2, &pool_count_ops);
  hs_create(t, NULL);
  CU_ASSERT(pool_wait_threads(t, 4));
  util_write_byte(t->conn[0].sv[1]);
  util_write_byte(t->conn[1].sv[1]);
  CU_ASSERT(pool_wait_bytes(t, 2));
  CU_ASSERT_EQUAL(atomic_load(&t->on_main), 0);
  pool_free(t);
}

/* ---- one thread per handle ----------------------------------------------- */

static void test_one_thread_per_handle(void) {
  pool_one_thread_per_handle(&pool_row_hsha, NULL);
}

/* ---- flow control -------------------------------------------------------- */

/* One worker blocked in a hook while 64 handles become ready: the queue
 * never holds more than high_water (4) events, the reactor thread stalls,
 * and once the worker is free everything runs exactly once. */
static void test_flow_control(void) {
  enum { N = 65 };
  pool_test_t *t = pool_new(&pool_row_hsha);
  pool_conns(t, N, &hs_mixed_ops);
  taxi_hsha_options_t o = TAXI_HSHA_OPTIONS_INIT;
  o.workers = 1;
  o.queue_capacity = 8;
  o.high_water = 4;
  hs_create(t, &o);
  util_write_byte(t->conn[0].sv[1]);
  CU_ASSERT(pools_wait_count(&t->gate.entered, 1, POOLS_WAIT_MS));
  for (int i = 1; i < N; i++) util_write_byte(t->conn[i].sv[1]);
  CU_ASSERT(pool_wait_queued(t, 4));
  taxi_hsha_stats_t s;
  CU_ASSERT(pools_hsha_wait(t->p, hs_pred_stalled, NULL, POOLS_WAIT_MS, &s));
  unsigned most = 0;
  for (int i = 0; i < 200; i++) {
    s = hs_stats(t->p);
    if (s.queued > most) most = s.queued;
    if (i % 20 == 0) util_sleep_ms(1);
  }
  CU_ASSERT(most <= 4);
  CU_ASSERT_EQUAL(atomic_load(&t->next), 0); /* nothing else ran yet */
  pools_gate_open(&t->gate);
  CU_ASSERT(pool_wait_bytes(t, N));
  for (int i = 0; i < N; i++)
    CU_ASSERT_EQUAL(atomic_load(&t->conn[i].inputs), 1);
  /* Counted once the last hook has returned. */
  unsigned n = N;
  CU_ASSERT(pools_hsha_wait(t->p, hs_pred_events, &n, POOLS_WAIT_MS, &s));
  printf("(max_queued %u, full_stalls %llu) ", s.max_queued,
         (unsigned long long)s.full_stalls);
  CU_ASSERT(s.max_queued <= 4);
  CU_ASSERT_EQUAL(s.max_queued, 4);
  CU_ASSERT(s.full_stalls > 0);
  CU_ASSERT_EQUAL(s.events, N);
  CU_ASSERT_EQUAL(s.enqueued, N);
  pool_free(t);
}

/* TAXI_HSHA_FULL_REJECT: with the one worker blocked and the queue at high
 * water, each further request goes to the busy hook in the reactor thread
 * (never a worker, never the main thread), which answers at once; the
 * queued requests run when the worker is free, and a rejected connection
 * stays usable: its next request is served. */
static atomic_int busy_on_worker, busy_calls;
static int hs_busy(taxi_handler_t *h, taxi_handle_t fd, unsigned ev,
                   void *arg) {
  pool_conn_t *c = POOL_CONN(h);
  (void)ev;
  if (arg != c->t) return -1;
  pthread_mutex_lock(&c->t->mu);
  for (int i = 0; i < c->t->nworkers_seen; i++)
    if (pthread_equal(c->t->workers[i], pthread_self()))
      atomic_fetch_add(&busy_on_worker, 1);
  pthread_mutex_unlock(&c->t->mu);
  if (pthread_equal(pthread_self(), c->t->main_tid))
    atomic_fetch_add(&busy_on_worker, 1);
  pools_drain(fd);
  atomic_fetch_add(&c->rejected, 1);
  atomic_fetch_add(&busy_calls, 1);
  return util_write_byte(fd) == 1 ? 0 : -1; /* the answer: "busy" */
}

static void test_reject_when_full(void) {
  enum { N = 12, HIGH = 2 };
  atomic_store(&busy_on_worker, 0);
  atomic_store(&busy_calls, 0);
  pool_test_t *t = pool_new(&pool_row_hsha);
  pool_conns(t, N, &hs_mixed_ops);
  taxi_hsha_options_t o = TAXI_HSHA_OPTIONS_INIT;
  o.workers = 1;
  o.queue_capacity = 8;
  o.high_water = HIGH;
  o.full = TAXI_HSHA_FULL_REJECT;
  o.busy = hs_busy;
  o.busy_arg = t;
  hs_create(t, &o);
  util_write_byte(t->conn[0].sv[1]);
  CU_ASSERT(pools_wait_count(&t->gate.entered, 1, POOLS_WAIT_MS));
  for (int i = 1; i < N; i++) util_write_byte(t->conn[i].sv[1]);
  CU_ASSERT(pools_wait_count(&busy_calls, N - 1 - HIGH, POOLS_WAIT_MS));
  taxi_hsha_stats_t s = hs_stats(t->p);
  CU_ASSERT_EQUAL(s.rejected, (uint64_t)(N - 1 - HIGH));
  CU_ASSERT_EQUAL(s.queued, (unsigned)HIGH);
  CU_ASSERT_EQUAL(s.full_stalls, 0u); /* rejecting, it never stopped */
  CU_ASSERT_EQUAL(atomic_load(&busy_on_worker), 0);
  /* Each rejected peer got its answer; nobody else did. */
  for (int i = 1; i < N; i++) {
    int rejected = atomic_load(&t->conn[i].rejected);
    CU_ASSERT(rejected == 0 || rejected == 1);
    if (rejected) CU_ASSERT_EQUAL(util_read_byte(t->conn[i].sv[1]), 1);
  }
  pools_gate_open(&t->gate);
  CU_ASSERT(pool_wait_bytes(t, 1 + HIGH));
  /* The rejected connections still work: their next request is served
   * (one at a time, so that the queue does not fill again). */
  long served = 1 + HIGH;
  for (int i = 1; i < N; i++) {
    if (!atomic_load(&t->conn[i].rejected)) continue;
    util_write_byte(t->conn[i].sv[1]);
    CU_ASSERT(pool_wait_bytes(t, ++served));
  }
  CU_ASSERT_EQUAL(served, N);
  for (int i = 0; i < N; i++)
    CU_ASSERT_EQUAL(atomic_load(&t->conn[i].inputs), 1);
  CU_ASSERT_EQUAL(atomic_load(&busy_calls), N - 1 - HIGH);
  pool_free(t);
}

/* ---- priority ------------------------------------------------------------ */

/* One worker blocked; handles with priorities 1, 5, 3, 1 become ready one
 * after another and are queued; released, they run 5, 3, then the two 1s
 * in arrival order.  The priority callback runs in one thread (the reactor
 * thread), which never runs hooks. */
static void test_priority_order(void) {
  pool_test_t *t = pool_new(&pool_row_hsha);
  pool_conns(t, 5, &hs_mixed_ops);
  static const int prio[5] = {0, 1, 5, 3, 1};
  for (int i = 0; i < 5; i++) t->conn[i].prio = prio[i];
  taxi_hsha_options_t o = TAXI_HSHA_OPTIONS_INIT;
  o.workers = 1;
  o.priority = hs_priority;
  o.priority_arg = t;
  hs_create(t, &o);
  util_write_byte(t->conn[0].sv[1]);
  CU_ASSERT(pools_wait_count(&t->gate.entered, 1, POOLS_WAIT_MS));
  int ok = 1;
  for (int i = 1; i < 5 && ok; i++) {
    util_write_byte(t->conn[i].sv[1]);
    ok = pool_wait_queued(t, (unsigned)i);
  }
  CU_ASSERT(ok);
  pools_gate_open(&t->gate);
  CU_ASSERT(pool_wait_bytes(t, 5));
  int got[4];
  for (int k = 0; k < 4; k++) got[k] = atomic_load(&t->order[k]);
  printf("(order %d %d %d %d) ", got[0], got[1], got[2], got[3]);
  static const int expect[4] = {2, 3, 1, 4};
  for (int k = 0; k < 4; k++) CU_ASSERT_EQUAL(got[k], expect[k]);
  CU_ASSERT(atomic_load(&t->prio_calls) >= 5);
  CU_ASSERT_EQUAL(atomic_load(&t->reactor_tids_differ), 0);
  CU_ASSERT_EQUAL(atomic_load(&t->on_reactor), 0);
  CU_ASSERT_EQUAL(atomic_load(&t->on_main), 0);
  pool_free(t);
}

/* ---- timers and notifications -------------------------------------------- */

static atomic_int hs_notes_run;
static atomic_int hs_note_count[1000];
static pool_test_t *hs_note_test;

static void hs_note_fn(void *arg) {
  int i = (int)(intptr_t)arg;
  hs_note_thread(hs_note_test);
  if (i >= 0 && i < 1000) atomic_fetch_add(&hs_note_count[i], 1);
  atomic_fetch_add(&hs_notes_run, 1);
}

typedef struct hs_timed {
  taxi_handler_t h;
  taxi_timer_t timer;
  pool_test_t *t;
  atomic_int fires;
} hs_timed_t;

static int hs_timed_timeout(taxi_handler_t *h, taxi_timer_t *timer, void *act) {
  hs_timed_t *x = TAXI_CONTAINER_OF(h, hs_timed_t, h);
  (void)timer;
  (void)act;
  hs_note_thread(x->t);
  atomic_fetch_add(&x->fires, 1);
  return 0;
}

static const taxi_handler_ops_t hs_timed_ops = {.timeout = hs_timed_timeout};

/* Notifications and timers are run by workers too (not by the main thread,
 * not by the reactor thread, which calls the priority function), each
 * notification exactly once. */
static void test_timers_and_notifications(void) {
  enum { N = 1000 };
  pool_test_t *t = pool_new(&pool_row_hsha);
  pool_conns(t, 1, &pool_count_ops);
  hs_note_test = t;
  atomic_store(&hs_notes_run, 0);
  for (int i = 0; i < N; i++) atomic_store(&hs_note_count[i], 0);
  static hs_timed_t x;
  memset(&x, 0, sizeof x);
  x.t = t;
  atomic_init(&x.fires, 0);
  CU_ASSERT_EQUAL_FATAL(taxi_handler_init(&x.h, &hs_timed_ops), 0);
  CU_ASSERT_EQUAL_FATAL(taxi_timer_init(&x.timer), 0);
  taxi_hsha_options_t o = TAXI_HSHA_OPTIONS_INIT;
  o.workers = 3;
  o.priority = hs_priority; /* learns the reactor thread */
  o.priority_arg = t;
  hs_create(t, &o);
  util_write_byte(t->conn[0].sv[1]);
  CU_ASSERT(pool_wait_bytes(t, 1));
  int post_failed = 0;
  for (int i = 0; i < N; i++)
    if (taxi_reactor_notify(t->r, hs_note_fn, (void *)(intptr_t)i) != 0)
      post_failed++;
  CU_ASSERT_EQUAL(post_failed, 0);
  CU_ASSERT_EQUAL(taxi_reactor_schedule(t->r, &x.timer, &x.h, 0,
                                        TAXI_NSEC_PER_MSEC / 2, NULL),
                  0);
  CU_ASSERT(pools_wait_count(&hs_notes_run, N, POOLS_WAIT_MS));
  CU_ASSERT(pools_wait_count(&x.fires, 10, POOLS_WAIT_MS));
  CU_ASSERT_EQUAL(taxi_reactor_cancel(t->r, &x.timer), 0);
  util_sleep_ms(10);
  int wrong = 0;
  for (int i = 0; i < N; i++)
    if (atomic_load(&hs_note_count[i]) != 1) wrong++;
  CU_ASSERT_EQUAL(wrong, 0);
  CU_ASSERT_EQUAL(atomic_load(&hs_notes_run), N);
  CU_ASSERT_EQUAL(atomic_load(&t->on_main), 0);
  CU_ASSERT_EQUAL(atomic_load(&t->on_reactor), 0);
  pthread_mutex_lock(&t->mu);
  CU_ASSERT_EQUAL(t->have_reactor_tid, 1);
  pthread_mutex_unlock(&t->mu);
  pool_free(t);
}

/* ---- a timer scheduled again while its hook runs --------------------------
 */

typedef struct hs_again {
  taxi_handler_t h;
  taxi_timer_t timer;
  pools_gate_t gate;
  atomic_int fires;
} hs_again_t;

/* The first firing waits at the gate; the next ones pass. */
static int hs_again_timeout(taxi_handler_t *h, taxi_timer_t *timer, void *act) {
  hs_again_t *x = TAXI_CONTAINER_OF(h, hs_again_t, h);
  (void)timer;
  (void)act;
  if (atomic_fetch_add(&x->fires, 1) == 0) pools_gate_pass(&x->gate);
  return 0;
}

static const taxi_handler_ops_t hs_again_ops = {.timeout = hs_again_timeout};

/* A marker's timer: its firing queued shows that the reactor thread has
 * taken every timer due before it. */
static atomic_int hs_marker_fires;
static int hs_marker_timeout(taxi_handler_t *h, taxi_timer_t *timer,
                             void *act) {
  (void)h;
  (void)timer;
  (void)act;
  atomic_fetch_add(&hs_marker_fires, 1);
  return 0;
}

static const taxi_handler_ops_t hs_marker_ops = {.timeout = hs_marker_timeout};

/* A one-shot timer scheduled again by another thread while its hook runs
 * fires again (one worker): the end of the first firing must not cancel
 * the second.  The second is taken while the first's hook runs - a marker
 * timer due after it is queued meanwhile - and set aside for the worker
 * that runs the first, since one handler's hooks never overlap
 * (core/reactor/reactor_serial.c): it runs right after the first returns.  How
 * a stream's hand-off from another thread (its kick timer) reaches a worker. */
static void test_timer_rescheduled_during_hook(void) {
  pool_test_t *t = pool_new(&pool_row_hsha);
  static hs_again_t x;
  static taxi_handler_t marker;
  static taxi_timer_t marker_timer;
  memset(&x, 0, sizeof x);
  pools_gate_init(&x.gate);
  atomic_init(&x.fires, 0);
  atomic_init(&hs_marker_fires, 0);
  CU_ASSERT_EQUAL_FATAL(taxi_handler_init(&x.h, &hs_again_ops), 0);
  CU_ASSERT_EQUAL_FATAL(taxi_timer_init(&x.timer), 0);
  CU_ASSERT_EQUAL_FATAL(taxi_handler_init(&marker, &hs_marker_ops), 0);
  CU_ASSERT_EQUAL_FATAL(taxi_timer_init(&marker_timer), 0);
  taxi_hsha_options_t o = TAXI_HSHA_OPTIONS_INIT;
  o.workers = 1;
  hs_create(t, &o);
  CU_ASSERT_EQUAL(taxi_reactor_schedule(t->r, &x.timer, &x.h, 0, 0, NULL), 0);
  /* The only worker is in the first firing's hook. */
  CU_ASSERT(pools_wait_count(&x.gate.entered, 1, POOLS_WAIT_MS));
  CU_ASSERT_EQUAL(taxi_reactor_schedule(t->r, &x.timer, &x.h, 0, 0, NULL), 0);
  CU_ASSERT_EQUAL(taxi_reactor_schedule(t->r, &marker_timer, &marker,
                                        TAXI_NSEC_PER_MSEC, 0, NULL),
                  0);
  /* The marker waits in the queue: the second firing was taken before. */
  CU_ASSERT(pool_wait_queued(t, 1));
  CU_ASSERT_EQUAL(atomic_load(&x.fires), 1);
  pools_gate_open(&x.gate);
  CU_ASSERT(pools_wait_count(&x.fires, 2, POOLS_WAIT_MS));
  CU_ASSERT(pools_wait_count(&hs_marker_fires, 1, POOLS_WAIT_MS));
  CU_ASSERT_EQUAL(atomic_load(&x.gate.timeouts), 0);
  /* Fired and not periodic: nothing to cancel any more. */
  CU_ASSERT_EQUAL(taxi_reactor_cancel(t->r, &x.timer), TAXI_ENOENT);
  CU_ASSERT_EQUAL(taxi_reactor_remove(t->r, &marker), 0);
  pool_free(t);
  CU_ASSERT_EQUAL(atomic_load(&x.fires), 2);
}

/* ---- suites -------------------------------------------------------------- */

/* ---- shutdown and removal ------------------------------------------------ */

static void test_shutdown_busy(void) { pool_shutdown_busy(&pool_row_hsha, 0); }

static void test_shutdown_with_queued(void) {
  pool_shutdown_busy(&pool_row_hsha, 1);
}

static void test_shutdown_idle(void) {
  pool_shutdown_idle(&pool_row_hsha, NULL);
}

static void test_shutdown_from_hook(void) {
  pool_shutdown_from_hook(&pool_row_hsha);
}

static void test_destroy_running(void) { pool_destroy_running(&pool_row_hsha); }

/* Removed from another thread while a worker runs its hook: the close hook
 * runs once, after the hook returned. */
static void test_remove_while_running(void) {
  pool_test_t *t = pool_new(&pool_row_hsha);
  pool_conns(t, 1, &pool_block_ops);
  taxi_hsha_options_t o = TAXI_HSHA_OPTIONS_INIT;
  o.workers = 2;
  hs_create(t, &o);
  pool_conn_t *c = &t->conn[0];
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
  pool_teardown(t);
  CU_ASSERT_EQUAL(atomic_load(&c->closes), 1);
  pool_free(t);
}

/* ---- bad options (the suite "hsha bad input", in pool_bad_input.c) ------ */

/* Limits out of range, a full-queue policy unknown or without its busy
 * path: TAXI_EINVAL. */
void test_hsha_bad_limits(void) {
  pool_test_t *t = pool_new(&pool_row_hsha);
  taxi_hsha_pool_t *p = NULL;
  taxi_hsha_options_t o = TAXI_HSHA_OPTIONS_INIT;
  o.workers = TAXI_HSHA_MAX_WORKERS + 1;
  CU_ASSERT_EQUAL(taxi_hsha_create(&p, t->r, &o), TAXI_EINVAL);
  taxi_hsha_options_init(&o);
  o.queue_capacity = TAXI_HSHA_MAX_QUEUE + 1;
  CU_ASSERT_EQUAL(taxi_hsha_create(&p, t->r, &o), TAXI_EINVAL);
  taxi_hsha_options_init(&o);
  o.queue_capacity = 8;
  o.high_water = 9;
  CU_ASSERT_EQUAL(taxi_hsha_create(&p, t->r, &o), TAXI_EINVAL);
  /* With the default capacity (1024). */
  taxi_hsha_options_init(&o);
  o.high_water = 1025;
  CU_ASSERT_EQUAL(taxi_hsha_create(&p, t->r, &o), TAXI_EINVAL);
  /* A full-queue policy unknown, or rejecting with no busy path. */
  taxi_hsha_options_init(&o);
  o.full = (taxi_hsha_full_t)7;
  CU_ASSERT_EQUAL(taxi_hsha_create(&p, t->r, &o), TAXI_EINVAL);
  o.full = TAXI_HSHA_FULL_REJECT;
  CU_ASSERT_EQUAL(taxi_hsha_create(&p, t->r, &o), TAXI_EINVAL);
  CU_ASSERT_PTR_NULL(p);
  /* The refusals left the reactor free. */
  CU_ASSERT_EQUAL(taxi_reactor_handle_events(t->r, 0), 0);
  taxi_hsha_options_init(&o);
  o.queue_capacity = 8;
  o.high_water = 8;
  hs_create(t, &o);
  pool_free(t);
}

static CU_TestInfo hs_tests[] = {
    {"workers run the hooks", test_workers_dispatch},
    {"defaults: 4 workers", test_defaults},
    {"one thread per handle at a time", test_one_thread_per_handle},
    {"flow control: high water", test_flow_control},
    {"full queue: reject, the busy path", test_reject_when_full},
    {"priority queue order", test_priority_order},
    {"timers and notifications run by workers", test_timers_and_notifications},
    {"a timer scheduled again while its hook runs fires again",
     test_timer_rescheduled_during_hook},
    {"shutdown while every worker is busy", test_shutdown_busy},
    {"shutdown with events queued", test_shutdown_with_queued},
    {"shutdown of an idle pool", test_shutdown_idle},
    {"shutdown from a hook", test_shutdown_from_hook},
    {"destroy of a running pool", test_destroy_running},
    {"remove while running: close after hook", test_remove_while_running},
    CU_TEST_INFO_NULL,
};

const taxi_test_suite_t pools_suite_hsha = {"hsha", hs_tests, 120, NULL};
