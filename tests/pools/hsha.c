/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/pools/hsha.c - the half-sync/half-async pool (taxi/hsha.h): hooks
 * run by workers (never the main thread, never the reactor thread), one
 * thread per handle at a time, flow control at high water, the priority
 * queue, the busy path of a full queue (reject), shutdown (busy, with
 * events queued, idle, from a hook), the
 * counters, allocations per event, and bad input.
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

#define HS_MAX_CONNS 80

typedef struct hs_test hs_test_t;

typedef struct hs_conn {
  taxi_handler_t h;
  int sv[2];
  hs_test_t *t;
  int index;
  int prio; /* what the priority callback returns for it */
  atomic_int inputs;
  atomic_long bytes;
  atomic_int closes;
  atomic_int busy;
  atomic_int overlaps;
  atomic_int hook_done;
  atomic_int rejected; /* calls of the busy hook */
} hs_conn_t;

struct hs_test {
  taxi_reactor_t *r;
  taxi_hsha_pool_t *p;
  pools_gate_t gate;
  hs_conn_t conn[HS_MAX_CONNS];
  int nconns;
  pthread_t main_tid;
  /* Threads seen in hooks and in the priority callback. */
  pthread_mutex_t mu;
  pthread_t workers[16];
  int nworkers_seen;
  pthread_t reactor_tid;
  int have_reactor_tid;
  atomic_int reactor_tids_differ; /* the callback ran in two threads */
  atomic_int on_main;             /* hooks run by the main thread */
  atomic_int on_reactor;          /* hooks run by the reactor thread */
  atomic_int prio_calls;
  /* Order in which the hooks ran (conn index). */
  atomic_int next;
  atomic_int order[HS_MAX_CONNS];
  /* From inside hooks. */
  atomic_int hook_calls;
  atomic_int rc_shutdown, rc_shutdown2, rc_destroy, rc_stats;
  atomic_int workers_after_shutdown;
};

#define HS_CONN(hp) TAXI_CONTAINER_OF(hp, hs_conn_t, h)

static hs_test_t *hs_new(void) {
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

static void hs_conns(hs_test_t *t, int n, const taxi_handler_ops_t *ops) {
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

static int hs_do_shutdown(void *p) { return taxi_hsha_stop(p); }
static int hs_do_destroy(void *p) { return taxi_hsha_destroy(p); }

static void hs_teardown(hs_test_t *t) {
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

static void hs_free(hs_test_t *t) {
  hs_teardown(t);
  pthread_mutex_destroy(&t->mu);
  free(t);
}

static void hs_create(hs_test_t *t, const taxi_hsha_options_t *o) {
  int rc = taxi_hsha_create(&t->p, t->r, o);
  if (rc != 0) printf("\n    taxi_hsha_create = %s\n", taxi_error_name(rc));
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  CU_ASSERT_PTR_NOT_NULL_FATAL(t->p);
}

static taxi_hsha_stats_t hs_stats(taxi_hsha_pool_t *p) {
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

static int hs_pred_events(const taxi_hsha_stats_t *s, void *arg) {
  return s->events >= *(const unsigned *)arg;
}

static int hs_pred_stalled(const taxi_hsha_stats_t *s, void *arg) {
  (void)arg;
  return s->full_stalls > 0;
}

static int hs_wait_workers(taxi_hsha_pool_t *p, unsigned n) {
  taxi_hsha_stats_t s;
  if (pools_hsha_wait(p, hs_pred_workers, &n, POOLS_WAIT_MS, &s)) return 1;
  printf("\n    workers never %u: %u\n", n, s.workers);
  return 0;
}

static int hs_wait_queued(taxi_hsha_pool_t *p, unsigned n) {
  taxi_hsha_stats_t s;
  if (pools_hsha_wait(p, hs_pred_queued, &n, POOLS_WAIT_MS, &s)) return 1;
  printf("\n    queued never %u: %u\n", n, s.queued);
  return 0;
}

static long hs_total_bytes(hs_test_t *t) {
  long n = 0;
  for (int i = 0; i < t->nconns; i++) n += atomic_load(&t->conn[i].bytes);
  return n;
}

static int hs_total_inputs(hs_test_t *t) {
  int n = 0;
  for (int i = 0; i < t->nconns; i++) n += atomic_load(&t->conn[i].inputs);
  return n;
}

static int hs_wait_bytes(hs_test_t *t, long goal) {
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
static void hs_note_thread(hs_test_t *t) {
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

static void hs_conn_close(taxi_handler_t *h, taxi_handle_t fd) {
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

static const taxi_handler_ops_t hs_count_ops = {.input = hs_count_input,
                                                .close = hs_conn_close};

static int hs_block_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
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

static const taxi_handler_ops_t hs_block_ops = {.input = hs_block_input,
                                                .close = hs_conn_close};

/* Handlers of either kind: conn 0 blocks, the others count. */
static int hs_mixed_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  if (HS_CONN(h)->index == 0) return hs_block_input(h, fd, ev);
  return hs_count_input(h, fd, ev);
}

static const taxi_handler_ops_t hs_mixed_ops = {.input = hs_mixed_input,
                                                .close = hs_conn_close};

static int hs_priority(taxi_handler_t *h, unsigned events, void *arg) {
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

/* ---- dispatch by workers ------------------------------------------------- */

/* Events are run by the workers: never by the main thread, by at most
 * `workers` distinct threads; the counters agree with the hooks. */
static void test_workers_dispatch(void) {
  enum { N = 8, ROUNDS = 200 };
  hs_test_t *t = hs_new();
  hs_conns(t, N, &hs_count_ops);
  taxi_hsha_options_t o = TAXI_HSHA_OPTIONS_INIT;
  o.workers = 3;
  hs_create(t, &o);
  CU_ASSERT(hs_wait_workers(t->p, 3));
  int ok = 1;
  for (int round = 0; round < ROUNDS && ok; round++) {
    for (int i = 0; i < N; i++)
      CU_ASSERT_EQUAL(util_write_byte(t->conn[i].sv[1]), 1);
    ok = hs_wait_bytes(t, (long)N * (round + 1));
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
  CU_ASSERT_EQUAL(s.events, (uint64_t)hs_total_inputs(t));
  CU_ASSERT_EQUAL(s.enqueued, s.events);
  CU_ASSERT(s.waits > 0);
  CU_ASSERT_EQUAL(s.queued, 0);
  CU_ASSERT(s.max_queued >= 1);
  CU_ASSERT_EQUAL(s.workers, 0);
  hs_free(t);
}

/* NULL options: 4 workers. */
static void test_defaults(void) {
  hs_test_t *t = hs_new();
  hs_conns(t, 2, &hs_count_ops);
  hs_create(t, NULL);
  CU_ASSERT(hs_wait_workers(t->p, 4));
  util_write_byte(t->conn[0].sv[1]);
  util_write_byte(t->conn[1].sv[1]);
  CU_ASSERT(hs_wait_bytes(t, 2));
  CU_ASSERT_EQUAL(atomic_load(&t->on_main), 0);
  hs_free(t);
}

/* ---- one thread per handle ----------------------------------------------- */

static int hs_serial_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  hs_conn_t *c = HS_CONN(h);
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

static const taxi_handler_ops_t hs_serial_ops = {.input = hs_serial_input,
                                                 .close = hs_conn_close};

typedef struct hs_writer {
  hs_test_t *t;
  int seed;
  int writes;
  long written;
  int stuck;
} hs_writer_t;

static void hs_writer_main(void *arg) {
  hs_writer_t *w = arg;
  uint64_t st = (uint64_t)w->seed * 104729u + 7;
  char buf[32];
  memset(buf, 'h', sizeof buf);
  for (int i = 0; i < w->writes; i++) {
    uint64_t x = pools_rand(&st);
    int c = (int)(x % 4);
    size_t len = 1 + (size_t)((x >> 8) % sizeof buf);
    taxi_time_t start = taxi_now();
    for (;;) {
      ssize_t n = write(w->t->conn[c].sv[1], buf, len);
      if (n > 0) {
        w->written += n;
        break;
      }
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        w->stuck = 1;
        return;
      }
      if (util_elapsed_ms(start) > POOLS_WAIT_MS) {
        w->stuck = 1;
        return;
      }
      sched_yield();
    }
  }
}

/* 8 workers, 4 writer threads hammering the same 4 sockets: no hook ever
 * finds another running for its handle. */
static void test_one_thread_per_handle(void) {
  enum { WRITERS = 4 };
  hs_test_t *t = hs_new();
  hs_conns(t, 4, &hs_serial_ops);
  taxi_hsha_options_t o = TAXI_HSHA_OPTIONS_INIT;
  o.workers = 8;
  hs_create(t, &o);
  static hs_writer_t w[WRITERS];
  util_thread_t wt[WRITERS];
  int writes = pools_small() ? 3000 : 20000;
  for (int i = 0; i < WRITERS; i++) {
    memset(&w[i], 0, sizeof w[i]);
    w[i].t = t;
    w[i].seed = i + 1;
    w[i].writes = writes;
    CU_ASSERT_EQUAL_FATAL(util_thread_start(&wt[i], hs_writer_main, &w[i]), 0);
  }
  long total = 0;
  int stuck = 0;
  for (int i = 0; i < WRITERS; i++) {
    util_thread_join(&wt[i], 60000, "a writer thread");
    total += w[i].written;
    stuck += w[i].stuck;
  }
  CU_ASSERT_EQUAL(stuck, 0);
  CU_ASSERT(hs_wait_bytes(t, total));
  int overlaps = 0;
  for (int c = 0; c < 4; c++) overlaps += atomic_load(&t->conn[c].overlaps);
  printf("(%d hooks, %ld bytes, %d overlaps) ", hs_total_inputs(t), total,
         overlaps);
  CU_ASSERT_EQUAL(overlaps, 0);
  hs_free(t);
}

/* ---- flow control -------------------------------------------------------- */

/* One worker blocked in a hook while 64 handles become ready: the queue
 * never holds more than high_water (4) events, the reactor thread stalls,
 * and once the worker is free everything runs exactly once. */
static void test_flow_control(void) {
  enum { N = 65 };
  hs_test_t *t = hs_new();
  hs_conns(t, N, &hs_mixed_ops);
  taxi_hsha_options_t o = TAXI_HSHA_OPTIONS_INIT;
  o.workers = 1;
  o.queue_capacity = 8;
  o.high_water = 4;
  hs_create(t, &o);
  util_write_byte(t->conn[0].sv[1]);
  CU_ASSERT(pools_wait_count(&t->gate.entered, 1, POOLS_WAIT_MS));
  for (int i = 1; i < N; i++) util_write_byte(t->conn[i].sv[1]);
  CU_ASSERT(hs_wait_queued(t->p, 4));
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
  CU_ASSERT(hs_wait_bytes(t, N));
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
  hs_free(t);
}

/* TAXI_HSHA_FULL_REJECT: with the one worker blocked and the queue at high
 * water, each further request goes to the busy hook in the reactor thread
 * (never a worker, never the main thread), which answers at once; the
 * queued requests run when the worker is free, and a rejected connection
 * stays usable: its next request is served. */
static atomic_int busy_on_worker, busy_calls;
static int hs_busy(taxi_handler_t *h, taxi_handle_t fd, unsigned ev,
                   void *arg) {
  hs_conn_t *c = HS_CONN(h);
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
  hs_test_t *t = hs_new();
  hs_conns(t, N, &hs_mixed_ops);
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
  CU_ASSERT(hs_wait_bytes(t, 1 + HIGH));
  /* The rejected connections still work: their next request is served
   * (one at a time, so that the queue does not fill again). */
  long served = 1 + HIGH;
  for (int i = 1; i < N; i++) {
    if (!atomic_load(&t->conn[i].rejected)) continue;
    util_write_byte(t->conn[i].sv[1]);
    CU_ASSERT(hs_wait_bytes(t, ++served));
  }
  CU_ASSERT_EQUAL(served, N);
  for (int i = 0; i < N; i++)
    CU_ASSERT_EQUAL(atomic_load(&t->conn[i].inputs), 1);
  CU_ASSERT_EQUAL(atomic_load(&busy_calls), N - 1 - HIGH);
  hs_free(t);
}

/* ---- priority ------------------------------------------------------------ */

/* One worker blocked; handles with priorities 1, 5, 3, 1 become ready one
 * after another and are queued; released, they run 5, 3, then the two 1s
 * in arrival order.  The priority callback runs in one thread (the reactor
 * thread), which never runs hooks. */
static void test_priority_order(void) {
  hs_test_t *t = hs_new();
  hs_conns(t, 5, &hs_mixed_ops);
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
    ok = hs_wait_queued(t->p, (unsigned)i);
  }
  CU_ASSERT(ok);
  pools_gate_open(&t->gate);
  CU_ASSERT(hs_wait_bytes(t, 5));
  int got[4];
  for (int k = 0; k < 4; k++) got[k] = atomic_load(&t->order[k]);
  printf("(order %d %d %d %d) ", got[0], got[1], got[2], got[3]);
  static const int expect[4] = {2, 3, 1, 4};
  for (int k = 0; k < 4; k++) CU_ASSERT_EQUAL(got[k], expect[k]);
  CU_ASSERT(atomic_load(&t->prio_calls) >= 5);
  CU_ASSERT_EQUAL(atomic_load(&t->reactor_tids_differ), 0);
  CU_ASSERT_EQUAL(atomic_load(&t->on_reactor), 0);
  CU_ASSERT_EQUAL(atomic_load(&t->on_main), 0);
  hs_free(t);
}

/* ---- timers and notifications -------------------------------------------- */

static atomic_int hs_notes_run;
static atomic_int hs_note_count[1000];
static hs_test_t *hs_note_test;

static void hs_note_fn(void *arg) {
  int i = (int)(intptr_t)arg;
  hs_note_thread(hs_note_test);
  if (i >= 0 && i < 1000) atomic_fetch_add(&hs_note_count[i], 1);
  atomic_fetch_add(&hs_notes_run, 1);
}

typedef struct hs_timed {
  taxi_handler_t h;
  taxi_timer_t timer;
  hs_test_t *t;
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
  hs_test_t *t = hs_new();
  hs_conns(t, 1, &hs_count_ops);
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
  CU_ASSERT(hs_wait_bytes(t, 1));
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
  hs_free(t);
}

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

static void test_shutdown_busy(void) { hs_shutdown_busy(0); }

static void test_shutdown_with_queued(void) { hs_shutdown_busy(1); }

static void test_shutdown_idle(void) {
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
static void test_shutdown_from_hook(void) {
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

static void test_destroy_running(void) {
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
static void test_remove_while_running(void) {
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

/* ---- bad input ----------------------------------------------------------- */

static void test_bad_null(void) {
  hs_test_t *t = hs_new();
  taxi_hsha_pool_t *p = NULL;
  taxi_hsha_stats_t s;
  taxi_hsha_options_t o = TAXI_HSHA_OPTIONS_INIT;
  CU_ASSERT_EQUAL(taxi_hsha_create(NULL, t->r, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_hsha_create(NULL, t->r, &o), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_hsha_create(&p, NULL, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_hsha_stop(NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_hsha_destroy(NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_hsha_stats(NULL, &s), TAXI_EINVAL);
  hs_create(t, NULL);
  CU_ASSERT_EQUAL(taxi_hsha_stats(t->p, NULL), TAXI_EINVAL);
  hs_free(t);
}

static void test_bad_limits(void) {
  hs_test_t *t = hs_new();
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
  hs_free(t);
}

static void test_bad_destroyed(void) {
  hs_test_t *t = hs_new();
  taxi_hsha_pool_t *p = NULL;
  CU_ASSERT_EQUAL_FATAL(taxi_hsha_create(&p, t->r, NULL), 0);
  CU_ASSERT_EQUAL(
      util_bounded(hs_do_destroy, p, POOLS_WAIT_MS, "taxi_hsha_destroy"), 0);
  taxi_hsha_stats_t s;
  CU_ASSERT_EQUAL(taxi_hsha_stop(p), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_hsha_stats(p, &s), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_hsha_destroy(p), TAXI_EINVAL);
  /* An LF call given an HSHA pool pointer is not fooled either. */
  CU_ASSERT_EQUAL(taxi_lf_join((taxi_lf_pool_t *)(void *)p, 0, 0), TAXI_EINVAL);
  hs_free(t);
}

static void test_bad_shutdown_twice(void) {
  hs_test_t *t = hs_new();
  hs_create(t, NULL);
  CU_ASSERT_EQUAL(
      util_bounded(hs_do_shutdown, t->p, POOLS_WAIT_MS, "taxi_hsha_stop"), 0);
  CU_ASSERT_EQUAL(taxi_hsha_stop(t->p), TAXI_ESTOPPED);
  hs_free(t);
}

static void test_bad_second_pool(void) {
  hs_test_t *t = hs_new();
  hs_conns(t, 1, &hs_count_ops);
  hs_create(t, NULL);
  taxi_hsha_pool_t *p2 = NULL;
  taxi_lf_pool_t *lp = NULL;
  CU_ASSERT_EQUAL(taxi_hsha_create(&p2, t->r, NULL), TAXI_EBUSY);
  CU_ASSERT_EQUAL(taxi_lf_create(&lp, t->r, NULL), TAXI_EBUSY);
  CU_ASSERT_EQUAL(taxi_reactor_handle_events(t->r, 0), TAXI_EBUSY);
  CU_ASSERT_EQUAL(taxi_reactor_handle_one(t->r, 0), TAXI_EBUSY);
  CU_ASSERT_EQUAL(taxi_reactor_run(t->r), TAXI_EBUSY);
  util_write_byte(t->conn[0].sv[1]);
  CU_ASSERT(hs_wait_bytes(t, 1));
  CU_ASSERT_EQUAL(
      util_bounded(hs_do_destroy, t->p, POOLS_WAIT_MS, "taxi_hsha_destroy"), 0);
  t->p = NULL;
  /* Given back. */
  util_write_byte(t->conn[0].sv[1]);
  CU_ASSERT(taxi_reactor_handle_events(t->r, POOLS_WAIT_MS) >= 1);
  CU_ASSERT_EQUAL(hs_total_bytes(t), 2);
  /* An LF pool on it first, then an HSHA pool is refused. */
  CU_ASSERT_EQUAL_FATAL(taxi_lf_create(&lp, t->r, NULL), 0);
  CU_ASSERT_EQUAL(taxi_hsha_create(&p2, t->r, NULL), TAXI_EBUSY);
  CU_ASSERT_EQUAL(taxi_lf_destroy(lp), 0);
  hs_free(t);
}

/* ---- allocations --------------------------------------------------------- */

static int hs_echo_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  hs_conn_t *c = HS_CONN(h);
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

static const taxi_handler_ops_t hs_echo_ops = {.input = hs_echo_input,
                                               .close = hs_conn_close};

static int hs_ping_all(hs_test_t *t, int n) {
  int peers[HS_MAX_CONNS];
  for (int i = 0; i < n; i++) peers[i] = t->conn[i].sv[1];
  return pools_ping_all(peers, n);
}

static void test_zero_alloc_per_event(void) {
  enum { N = 32, WARMUP = 100 };
  const int events = 50000;
  CU_ASSERT_EQUAL_FATAL(util_alloc_install(), 0);
  util_alloc_reset();
  hs_test_t *t = hs_new();
  CU_ASSERT(util_alloc_counts().mallocs > 0);
  hs_conns(t, N, &hs_echo_ops);
  taxi_hsha_options_t o = TAXI_HSHA_OPTIONS_INIT;
  o.workers = 4;
  hs_create(t, &o);
  int failed = 0;
  for (int i = 0; i < WARMUP && !failed; i++)
    if (hs_ping_all(t, N) != 0) failed = 1;
  CU_ASSERT_EQUAL(failed, 0);
  taxi_hsha_stats_t s0 = hs_stats(t->p);
  util_alloc_counts_t before = util_alloc_counts();
  int rounds = (events + N - 1) / N;
  for (int i = 0; i < rounds && !failed; i++)
    if (hs_ping_all(t, N) != 0) failed = 2;
  util_alloc_counts_t after = util_alloc_counts();
  taxi_hsha_stats_t s1 = hs_stats(t->p);
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
  hs_free(t);
  CU_ASSERT_EQUAL(util_alloc_counts().live, 0);
  CU_ASSERT_EQUAL(util_alloc_uninstall(), 0);
}

/* Pool lifetimes on one reactor leave nothing allocated behind (after the
 * first: the reactor may keep what it grew for a pool), and destroying
 * the reactor then frees everything. */
static void test_destroy_frees_everything(void) {
  CU_ASSERT_EQUAL_FATAL(util_alloc_install(), 0);
  util_alloc_reset();
  hs_test_t *t = hs_new();
  hs_conns(t, 8, &hs_count_ops);
  int64_t live[3];
  for (int cycle = 0; cycle < 3; cycle++) {
    int64_t before = util_alloc_counts().live;
    taxi_hsha_options_t o = TAXI_HSHA_OPTIONS_INIT;
    o.workers = 3;
    o.priority = hs_priority;
    o.priority_arg = t;
    hs_create(t, &o);
    for (int i = 0; i < 8; i++) util_write_byte(t->conn[i].sv[1]);
    CU_ASSERT(hs_wait_bytes(t, 8L * (cycle + 1)));
    CU_ASSERT(util_alloc_counts().live > before);
    CU_ASSERT_EQUAL(
        util_bounded(hs_do_destroy, t->p, POOLS_WAIT_MS, "taxi_hsha_destroy"),
        0);
    t->p = NULL;
    live[cycle] = util_alloc_counts().live;
  }
  if (live[1] != live[0] || live[2] != live[0])
    printf(
        "\n    blocks allocated after each pool's destroy: %lld %lld "
        "%lld\n",
        (long long)live[0], (long long)live[1], (long long)live[2]);
  CU_ASSERT_EQUAL(live[1], live[0]);
  CU_ASSERT_EQUAL(live[2], live[0]);
  hs_free(t);
  CU_ASSERT_EQUAL(util_alloc_counts().live, 0);
  CU_ASSERT_EQUAL(util_alloc_uninstall(), 0);
}

static void test_allocation_failures(void) {
  CU_ASSERT_EQUAL_FATAL(util_alloc_install(), 0);
  util_alloc_reset();
  hs_test_t *t = hs_new();
  /* One pool first, so that what the reactor grows for a pool is there. */
  hs_create(t, NULL);
  CU_ASSERT_EQUAL(
      util_bounded(hs_do_destroy, t->p, POOLS_WAIT_MS, "taxi_hsha_destroy"), 0);
  t->p = NULL;
  int64_t base = util_alloc_counts().live;
  int succeeded = 0, wrong = 0, leaked = 0;
  /* Only this thread's allocations are failed: a pool's own threads may
   * grow the backend's buffers meanwhile, and a failure there is a
   * retried wait, not what this test counts. */
  for (long n = 0; n < 200 && !succeeded; n++) {
    util_alloc_fail_after_here(n);
    taxi_hsha_pool_t *p = NULL;
    taxi_hsha_options_t o = TAXI_HSHA_OPTIONS_INIT;
    o.workers = 2;
    int rc = taxi_hsha_create(&p, t->r, &o);
    util_alloc_fail_after_here(-1);
    if (rc == 0) {
      succeeded = 1;
      CU_ASSERT_EQUAL(taxi_hsha_destroy(p), 0);
    } else if (rc != TAXI_ENOMEM) {
      if (!wrong)
        printf("\n    failing allocation #%ld: %s\n", n, taxi_error_name(rc));
      wrong++;
    }
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
  /* The reactor was left free. */
  CU_ASSERT_EQUAL(taxi_reactor_handle_events(t->r, 0), 0);
  hs_free(t);
  CU_ASSERT_EQUAL(util_alloc_uninstall(), 0);
}

/* ---- suites -------------------------------------------------------------- */

static CU_TestInfo hs_tests[] = {
    {"workers run the hooks", test_workers_dispatch},
    {"defaults: 4 workers", test_defaults},
    {"one thread per handle at a time", test_one_thread_per_handle},
    {"flow control: high water", test_flow_control},
    {"full queue: reject, the busy path", test_reject_when_full},
    {"priority queue order", test_priority_order},
    {"timers and notifications run by workers", test_timers_and_notifications},
    {"shutdown while every worker is busy", test_shutdown_busy},
    {"shutdown with events queued", test_shutdown_with_queued},
    {"shutdown of an idle pool", test_shutdown_idle},
    {"shutdown from a hook", test_shutdown_from_hook},
    {"destroy of a running pool", test_destroy_running},
    {"remove while running: close after hook", test_remove_while_running},
    CU_TEST_INFO_NULL,
};

static CU_TestInfo hs_bad_tests[] = {
    {"NULL: TAXI_EINVAL", test_bad_null},
    {"limits: TAXI_EINVAL", test_bad_limits},
    {"destroyed pool: TAXI_EINVAL", test_bad_destroyed},
    {"shutdown twice: TAXI_ESTOPPED", test_bad_shutdown_twice},
    {"second pool, direct dispatch: TAXI_EBUSY", test_bad_second_pool},
    CU_TEST_INFO_NULL,
};

static CU_TestInfo hs_alloc_tests[] = {
    {"destroy frees everything", test_destroy_frees_everything},
    {"allocation failures: TAXI_ENOMEM, no leak", test_allocation_failures},
    {"zero allocations per event", test_zero_alloc_per_event},
    CU_TEST_INFO_NULL,
};

const taxi_test_suite_t pools_suite_hsha = {"hsha", hs_tests, 120, NULL};
const taxi_test_suite_t pools_suite_hsha_bad_input = {"hsha bad input",
                                                      hs_bad_tests, 60, NULL};
const taxi_test_suite_t pools_suite_hsha_alloc = {"hsha alloc", hs_alloc_tests,
                                                  120, NULL};
