/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/conformance/lifetime.c - removal, the close hook, references,
 * stale events, destroy, dispatching from two threads, stop and restart.
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WAIT_MS 5000

static void close_pair(int sv[2]) {
  if (sv[0] >= 0) close(sv[0]);
  if (sv[1] >= 0) close(sv[1]);
}

/* A probe registered for READ on a fresh socketpair. */
static void probe_on_pair(taxi_reactor_t *r, conf_probe_t *p, int sv[2],
                          const taxi_handler_ops_t *ops) {
  CU_ASSERT_EQUAL_FATAL(util_socketpair(sv), 0);
  conf_probe_init(p, sv[0], ops);
  CU_ASSERT_EQUAL_FATAL(taxi_reactor_register(r, sv[0], &p->h, TAXI_EV_READ),
                        0);
}

/* ---- removal ------------------------------------------------------------ */

/* A hook returning a negative value removes its handler: the close hook runs
 * exactly once, and nothing is dispatched to it afterwards. */
static void test_negative_return_removes(void) {
  taxi_reactor_t *r = conf_reactor();
  conf_probe_t p;
  int sv[2];
  probe_on_pair(r, &p, sv, NULL);
  p.input_ret = -1;
  CU_ASSERT_EQUAL(util_write_byte(sv[1]), 1);
  CU_ASSERT_EQUAL(run_until(r, conf_pred_nonzero, &p.closes, WAIT_MS), 1);
  CU_ASSERT_EQUAL(atomic_load(&p.inputs), 1);
  CU_ASSERT_EQUAL(atomic_load(&p.closes), 1);

  CU_ASSERT_EQUAL(util_write_byte(sv[1]), 1);
  CU_ASSERT(run_for(r, 50) >= 0);
  CU_ASSERT_EQUAL(atomic_load(&p.inputs), 1);
  CU_ASSERT_EQUAL(taxi_reactor_remove(r, &p.h), TAXI_ENOENT);
  taxi_reactor_stats_t s;
  CU_ASSERT_EQUAL(taxi_reactor_stats(r, &s), 0);
  CU_ASSERT_EQUAL(s.handles, 0);

  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  CU_ASSERT_EQUAL(atomic_load(&p.closes), 1);
  close_pair(sv);
}

/* A handler removing itself from its own input hook: remove returns 0 and
 * the close hook runs once, only after the input hook has returned. */
typedef struct self_remover {
  conf_probe_t p;
  taxi_reactor_t *r;
  atomic_int in_hook;
  atomic_int remove_rc;
  atomic_int closes_seen_in_hook; /* closes counted right after remove */
  atomic_int close_while_in_hook;
} self_remover_t;

static int self_remove_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  self_remover_t *s = TAXI_CONTAINER_OF(h, self_remover_t, p.h);
  atomic_store(&s->in_hook, 1);
  conf_probe_input(h, fd, ev);
  atomic_store(&s->remove_rc, taxi_reactor_remove(s->r, h));
  atomic_store(&s->closes_seen_in_hook, atomic_load(&s->p.closes));
  atomic_store(&s->in_hook, 0);
  return 0;
}

static void self_remove_close(taxi_handler_t *h, taxi_handle_t fd) {
  self_remover_t *s = TAXI_CONTAINER_OF(h, self_remover_t, p.h);
  if (atomic_load(&s->in_hook)) atomic_store(&s->close_while_in_hook, 1);
  conf_probe_close(h, fd);
}

static const taxi_handler_ops_t self_remove_ops = {.input = self_remove_input,
                                                   .close = self_remove_close};

static void test_remove_inside_own_hook(void) {
  self_remover_t s;
  memset(&s, 0, sizeof s);
  s.r = conf_reactor();
  atomic_init(&s.remove_rc, 1);
  int sv[2];
  probe_on_pair(s.r, &s.p, sv, &self_remove_ops);
  CU_ASSERT_EQUAL(util_write_byte(sv[1]), 1);
  CU_ASSERT_EQUAL(run_until(s.r, conf_pred_nonzero, &s.p.inputs, WAIT_MS), 1);
  CU_ASSERT_EQUAL(atomic_load(&s.remove_rc), 0);
  CU_ASSERT_EQUAL(atomic_load(&s.closes_seen_in_hook), 0);
  CU_ASSERT_EQUAL(run_until(s.r, conf_pred_nonzero, &s.p.closes, WAIT_MS), 1);
  CU_ASSERT_EQUAL(atomic_load(&s.p.closes), 1);
  CU_ASSERT_EQUAL(atomic_load(&s.close_while_in_hook), 0);

  CU_ASSERT_EQUAL(util_write_byte(sv[1]), 1);
  CU_ASSERT(run_for(s.r, 30) >= 0);
  CU_ASSERT_EQUAL(atomic_load(&s.p.inputs), 1);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(s.r), 0);
  CU_ASSERT_EQUAL(atomic_load(&s.p.closes), 1);
  close_pair(sv);
}

/* Another thread removes the handler while its input hook runs in the
 * dispatching thread: remove returns at once, no further hook starts, and
 * the close hook runs exactly once, after the running hook returned. */
typedef struct blocker {
  conf_probe_t p;
  taxi_reactor_t *r;
  int peer_fd;
  atomic_int in_hook, entered, may_return;
  atomic_int close_while_in_hook, closes_at_return, hook_waited;
  atomic_int remove_rc, removed;
  pthread_t close_thread;
} blocker_t;

static int blocker_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  blocker_t *b = TAXI_CONTAINER_OF(h, blocker_t, p.h);
  atomic_store(&b->in_hook, 1);
  conf_probe_input(h, fd, ev);
  atomic_store(&b->entered, 1);
  atomic_store(&b->hook_waited, util_wait_flag(&b->may_return, 1, WAIT_MS));
  atomic_store(&b->closes_at_return, atomic_load(&b->p.closes));
  atomic_store(&b->in_hook, 0);
  return 0;
}

static void blocker_close(taxi_handler_t *h, taxi_handle_t fd) {
  blocker_t *b = TAXI_CONTAINER_OF(h, blocker_t, p.h);
  if (atomic_load(&b->in_hook)) atomic_store(&b->close_while_in_hook, 1);
  b->close_thread = pthread_self();
  conf_probe_close(h, fd);
}

static const taxi_handler_ops_t blocker_ops = {.input = blocker_input,
                                               .close = blocker_close};

static void *remover_thread(void *arg) {
  blocker_t *b = arg;
  if (util_wait_flag(&b->entered, 1, WAIT_MS)) {
    atomic_store(&b->remove_rc, taxi_reactor_remove(b->r, &b->p.h));
    atomic_store(&b->removed, 1);
    /* More data: must not reach the removed handler. */
    util_write_byte(b->peer_fd);
  }
  atomic_store(&b->may_return, 1);
  return NULL;
}

static void test_remove_from_other_thread_during_hook(void) {
  blocker_t b;
  memset(&b, 0, sizeof b);
  atomic_init(&b.remove_rc, 1);
  b.r = conf_reactor();
  int sv[2];
  probe_on_pair(b.r, &b.p, sv, &blocker_ops);
  b.peer_fd = sv[1];
  pthread_t t;
  CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, remover_thread, &b), 0);
  CU_ASSERT_EQUAL(util_write_byte(sv[1]), 1);
  CU_ASSERT_EQUAL(run_until(b.r, conf_pred_nonzero, &b.p.inputs, WAIT_MS), 1);
  pthread_join(t, NULL);
  CU_ASSERT_EQUAL(atomic_load(&b.hook_waited), 1);
  CU_ASSERT_EQUAL(atomic_load(&b.removed), 1);
  CU_ASSERT_EQUAL(atomic_load(&b.remove_rc), 0);
  CU_ASSERT_EQUAL(atomic_load(&b.closes_at_return), 0);
  CU_ASSERT_EQUAL(run_until(b.r, conf_pred_nonzero, &b.p.closes, WAIT_MS), 1);
  CU_ASSERT_EQUAL(atomic_load(&b.close_while_in_hook), 0);
  CU_ASSERT(run_for(b.r, 30) >= 0);
  CU_ASSERT_EQUAL(atomic_load(&b.p.closes), 1);
  CU_ASSERT_EQUAL(atomic_load(&b.p.inputs), 1);
  /* The hook's thread dropped the last reference, so it ran the close. */
  if (atomic_load(&b.p.closes) == 1)
    CU_ASSERT(pthread_equal(b.close_thread, pthread_self()));
  CU_ASSERT_EQUAL(taxi_reactor_remove(b.r, &b.p.h), TAXI_ENOENT);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(b.r), 0);
  CU_ASSERT_EQUAL(atomic_load(&b.p.closes), 1);
  close_pair(sv);
}

/* ---- the close hook frees the object ------------------------------------ */

typedef struct heap_conn {
  taxi_handler_t h;
  int fd;
  char scratch[64];
} heap_conn_t;

static atomic_int heap_closes;

static int heap_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  heap_conn_t *c = TAXI_CONTAINER_OF(h, heap_conn_t, h);
  (void)ev;
  ssize_t n = read(fd, c->scratch, sizeof c->scratch);
  if (n == 0) return -1; /* EOF: remove me */
  return 0;
}

static void heap_close(taxi_handler_t *h, taxi_handle_t fd) {
  heap_conn_t *c = TAXI_CONTAINER_OF(h, heap_conn_t, h);
  CU_ASSERT_EQUAL(fd, c->fd);
  close(c->fd);
  memset(c, 0xdd, sizeof *c);
  free(c);
  atomic_fetch_add(&heap_closes, 1);
}

static const taxi_handler_ops_t heap_ops = {.input = heap_input,
                                            .close = heap_close};

/* Handlers freed by their close hook, removed three ways (negative return,
 * taxi_reactor_remove, destroy): the library must not touch them after
 * close (AddressSanitizer reports it if it does). */
static void test_close_hook_frees_object(void) {
  enum { N = 6 };
  atomic_store(&heap_closes, 0);
  taxi_reactor_t *r = conf_reactor();
  int peers[N];
  heap_conn_t *conns[N];
  for (int i = 0; i < N; i++) {
    int sv[2];
    CU_ASSERT_EQUAL_FATAL(util_socketpair(sv), 0);
    heap_conn_t *c = malloc(sizeof *c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    c->fd = sv[0];
    peers[i] = sv[1];
    conns[i] = c;
    CU_ASSERT_EQUAL_FATAL(taxi_handler_init(&c->h, &heap_ops), 0);
    CU_ASSERT_EQUAL_FATAL(taxi_reactor_register(r, sv[0], &c->h, TAXI_EV_READ),
                          0);
  }
  /* 0, 1: the peer closes, the hook returns -1. */
  util_write_byte(peers[0]);
  close(peers[0]);
  close(peers[1]);
  conf_count_goal_t g = {&heap_closes, 2};
  CU_ASSERT_EQUAL(run_until(r, conf_pred_reached, &g, WAIT_MS), 1);
  CU_ASSERT_EQUAL(atomic_load(&heap_closes), 2);
  /* 2, 3: removed by the application (the object is gone afterwards). */
  CU_ASSERT_EQUAL(taxi_reactor_remove(r, &conns[2]->h), 0);
  CU_ASSERT_EQUAL(taxi_reactor_remove(r, &conns[3]->h), 0);
  g.goal = 4;
  CU_ASSERT_EQUAL(run_until(r, conf_pred_reached, &g, WAIT_MS), 1);
  /* Keep the reactor busy a little with the survivors. */
  util_write_byte(peers[4]);
  util_write_byte(peers[5]);
  CU_ASSERT(run_for(r, 30) >= 0);
  CU_ASSERT_EQUAL(atomic_load(&heap_closes), 4);
  /* 4, 5: by destroy. */
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  CU_ASSERT_EQUAL(atomic_load(&heap_closes), N);
  for (int i = 2; i < N; i++) close(peers[i]);
}

/* ---- references --------------------------------------------------------- */

/* With nothing running and no reference, remove runs the close hook before
 * it returns; with a reference, close waits for the matching unref, which
 * runs it before returning.  While close is pending the handler cannot be
 * registered again (TAXI_EBUSY); after close it can be reused. */
static void test_ref_delays_close(void) {
  taxi_reactor_t *r = conf_reactor();
  conf_probe_t p;
  int sv[2];
  probe_on_pair(r, &p, sv, NULL);

  CU_ASSERT_EQUAL(taxi_handler_ref(&p.h), 0);
  CU_ASSERT_EQUAL(taxi_reactor_remove(r, &p.h), 0);
  CU_ASSERT_EQUAL(atomic_load(&p.closes), 0);
  CU_ASSERT_EQUAL(util_write_byte(sv[1]), 1);
  CU_ASSERT(run_for(r, 30) >= 0);
  CU_ASSERT_EQUAL(atomic_load(&p.closes), 0);
  CU_ASSERT_EQUAL(atomic_load(&p.inputs), 0);

  int sv2[2];
  CU_ASSERT_EQUAL_FATAL(util_socketpair(sv2), 0);
  CU_ASSERT_EQUAL(taxi_reactor_register(r, sv2[0], &p.h, TAXI_EV_READ),
                  TAXI_EBUSY);

  CU_ASSERT_EQUAL(taxi_handler_unref(&p.h), 0);
  CU_ASSERT_EQUAL(atomic_load(&p.closes), 1);
  CU_ASSERT_EQUAL(taxi_handler_unref(&p.h), TAXI_EINVAL);

  /* Reuse: initialise again and attach to another handle. */
  conf_probe_init(&p, sv2[0], NULL);
  CU_ASSERT_EQUAL(taxi_reactor_register(r, sv2[0], &p.h, TAXI_EV_READ), 0);
  CU_ASSERT_EQUAL(util_write_byte(sv2[1]), 1);
  CU_ASSERT_EQUAL(run_until(r, conf_pred_nonzero, &p.inputs, WAIT_MS), 1);
  CU_ASSERT_EQUAL(taxi_reactor_remove(r, &p.h), 0);
  CU_ASSERT_EQUAL(atomic_load(&p.closes), 1);

  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  CU_ASSERT_EQUAL(atomic_load(&p.closes), 1);
  close_pair(sv);
  close_pair(sv2);
}

/* ---- stale events ------------------------------------------------------- */

/* Two handles reported by one wait; the hook that runs first removes the
 * other handler and registers the same descriptor with a new handler.  The
 * event already reported for the old registration must not reach the old
 * handler; the new one gets the data. */
typedef struct swap_ctx {
  taxi_reactor_t *r;
  conf_probe_t old[2];
  conf_probe_t fresh;
  atomic_int first;
  atomic_int remove_rc, register_rc;
} swap_ctx_t;

static swap_ctx_t *g_swap;

static int swap_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  conf_probe_t *p = TAXI_CONTAINER_OF(h, conf_probe_t, h);
  int self = (p == &g_swap->old[0]) ? 0 : 1;
  int expected = -1;
  if (atomic_compare_exchange_strong(&g_swap->first, &expected, self)) {
    conf_probe_t *victim = &g_swap->old[1 - self];
    atomic_store(&g_swap->remove_rc,
                 taxi_reactor_remove(g_swap->r, &victim->h));
    conf_probe_init(&g_swap->fresh, victim->fd, NULL);
    atomic_store(&g_swap->register_rc,
                 taxi_reactor_register(g_swap->r, victim->fd, &g_swap->fresh.h,
                                       TAXI_EV_READ));
  }
  return conf_probe_input(h, fd, ev);
}

static const taxi_handler_ops_t swap_ops = {.input = swap_input,
                                            .close = conf_probe_close};

static void test_stale_event_not_dispatched_after_reregister(void) {
  swap_ctx_t ctx;
  memset(&ctx, 0, sizeof ctx);
  g_swap = &ctx;
  atomic_init(&ctx.first, -1);
  atomic_init(&ctx.remove_rc, 1);
  atomic_init(&ctx.register_rc, 1);
  ctx.r = conf_reactor();
  int sv[2][2];
  for (int i = 0; i < 2; i++)
    probe_on_pair(ctx.r, &ctx.old[i], sv[i], &swap_ops);
  conf_settle(ctx.r, 10);
  for (int i = 0; i < 2; i++) CU_ASSERT_EQUAL(util_write_byte(sv[i][1]), 1);

  CU_ASSERT_EQUAL(taxi_reactor_handle_one(ctx.r, WAIT_MS), 1);
  int first = atomic_load(&ctx.first);
  CU_ASSERT_FATAL(first == 0 || first == 1);
  int victim = 1 - first;
  CU_ASSERT_EQUAL(atomic_load(&ctx.remove_rc), 0);
  CU_ASSERT_EQUAL(atomic_load(&ctx.register_rc), 0);
  CU_ASSERT_EQUAL(atomic_load(&ctx.old[victim].closes), 1);

  CU_ASSERT_EQUAL(
      run_until(ctx.r, conf_pred_nonzero, &ctx.fresh.inputs, WAIT_MS), 1);
  CU_ASSERT(run_for(ctx.r, 30) >= 0);
  CU_ASSERT_EQUAL(atomic_load(&ctx.old[victim].inputs), 0);
  CU_ASSERT_EQUAL(atomic_load(&ctx.old[victim].closes), 1);
  CU_ASSERT_EQUAL(atomic_load(&ctx.fresh.bytes), 1);
  CU_ASSERT_EQUAL(atomic_load(&ctx.old[first].inputs), 1);

  CU_ASSERT_EQUAL(taxi_reactor_destroy(ctx.r), 0);
  CU_ASSERT_EQUAL(atomic_load(&ctx.fresh.closes), 1);
  CU_ASSERT_EQUAL(atomic_load(&ctx.old[first].closes), 1);
  for (int i = 0; i < 2; i++) close_pair(sv[i]);
  g_swap = NULL;
}

/* ---- destroy ------------------------------------------------------------ */

/* destroy runs the close hook of every attached handler exactly once: those
 * with a handle and one that only has a timer.  The timer never fires. */
static void test_destroy_closes_each_handler_once(void) {
  enum { N = 4 };
  taxi_reactor_t *r = conf_reactor();
  conf_probe_t p[N], tp;
  int sv[N][2];
  for (int i = 0; i < N; i++) probe_on_pair(r, &p[i], sv[i], NULL);
  conf_probe_init(&tp, -1, NULL);
  taxi_timer_t t;
  CU_ASSERT_EQUAL(taxi_timer_init(&t), 0);
  CU_ASSERT_EQUAL(
      taxi_reactor_schedule(r, &t, &tp.h, 10 * TAXI_NSEC_PER_SEC, 0, NULL), 0);
  util_write_byte(sv[0][1]);
  CU_ASSERT(run_for(r, 20) >= 0);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  for (int i = 0; i < N; i++) CU_ASSERT_EQUAL(atomic_load(&p[i].closes), 1);
  CU_ASSERT_EQUAL(atomic_load(&tp.closes), 1);
  CU_ASSERT_EQUAL(atomic_load(&tp.timeouts), 0);
  for (int i = 0; i < N; i++) close_pair(sv[i]);
}

/* destroy leaves the close of a still-referenced handler to the unref. */
static void test_destroy_defers_referenced_close(void) {
  taxi_reactor_t *r = conf_reactor();
  conf_probe_t p;
  int sv[2];
  probe_on_pair(r, &p, sv, NULL);
  CU_ASSERT_EQUAL(taxi_handler_ref(&p.h), 0);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  CU_ASSERT_EQUAL(atomic_load(&p.closes), 0);
  CU_ASSERT_EQUAL(taxi_handler_unref(&p.h), 0);
  CU_ASSERT_EQUAL(atomic_load(&p.closes), 1);
  close_pair(sv);
}

/* ---- one dispatcher at a time ------------------------------------------- */

/* A hook that blocks until told to return, and meanwhile lets another
 * thread try things on the reactor. */
typedef struct busy_ctx {
  conf_probe_t p;
  taxi_reactor_t *r;
  atomic_int entered, may_return;
  atomic_int nested_events, nested_one, nested_run; /* from inside the hook */
  atomic_int other_events, other_one, other_run, other_destroy;
  atomic_int hook_waited;
  int nested; /* the hook tries the calls itself */
} busy_ctx_t;

static int busy_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  busy_ctx_t *b = TAXI_CONTAINER_OF(h, busy_ctx_t, p.h);
  conf_probe_input(h, fd, ev);
  if (b->nested) {
    atomic_store(&b->nested_events, taxi_reactor_handle_events(b->r, 0));
    atomic_store(&b->nested_one, taxi_reactor_handle_one(b->r, 0));
    atomic_store(&b->nested_run, taxi_reactor_run(b->r));
    return 0;
  }
  atomic_store(&b->entered, 1);
  atomic_store(&b->hook_waited, util_wait_flag(&b->may_return, 1, WAIT_MS));
  return 0;
}

static const taxi_handler_ops_t busy_ops = {.input = busy_input,
                                            .close = conf_probe_close};

static void busy_init(busy_ctx_t *b, int sv[2], int nested) {
  memset(b, 0, sizeof *b);
  b->r = conf_reactor();
  b->nested = nested;
  atomic_init(&b->nested_events, 1);
  atomic_init(&b->nested_one, 1);
  atomic_init(&b->nested_run, 1);
  atomic_init(&b->other_events, 1);
  atomic_init(&b->other_one, 1);
  atomic_init(&b->other_run, 1);
  atomic_init(&b->other_destroy, 1);
  probe_on_pair(b->r, &b->p, sv, &busy_ops);
}

/* Dispatching from inside a hook of the same reactor: TAXI_EBUSY. */
static void test_dispatch_from_hook_is_ebusy(void) {
  busy_ctx_t b;
  int sv[2];
  busy_init(&b, sv, 1);
  CU_ASSERT_EQUAL(util_write_byte(sv[1]), 1);
  CU_ASSERT_EQUAL(run_until(b.r, conf_pred_nonzero, &b.p.inputs, WAIT_MS), 1);
  CU_ASSERT_EQUAL(atomic_load(&b.nested_events), TAXI_EBUSY);
  CU_ASSERT_EQUAL(atomic_load(&b.nested_one), TAXI_EBUSY);
  CU_ASSERT_EQUAL(atomic_load(&b.nested_run), TAXI_EBUSY);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(b.r), 0);
  close_pair(sv);
}

static void *other_dispatcher(void *arg) {
  busy_ctx_t *b = arg;
  if (util_wait_flag(&b->entered, 1, WAIT_MS)) {
    atomic_store(&b->other_events, taxi_reactor_handle_events(b->r, 0));
    atomic_store(&b->other_one, taxi_reactor_handle_one(b->r, 0));
    atomic_store(&b->other_run, taxi_reactor_run(b->r));
    atomic_store(&b->other_destroy, taxi_reactor_destroy(b->r));
  }
  atomic_store(&b->may_return, 1);
  return NULL;
}

/* While one thread runs a hook, another thread's handle_events, handle_one,
 * run and destroy get TAXI_EBUSY. */
static void test_second_dispatcher_during_hook_is_ebusy(void) {
  busy_ctx_t b;
  int sv[2];
  busy_init(&b, sv, 0);
  pthread_t t;
  CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, other_dispatcher, &b), 0);
  CU_ASSERT_EQUAL(util_write_byte(sv[1]), 1);
  CU_ASSERT_EQUAL(run_until(b.r, conf_pred_nonzero, &b.p.inputs, WAIT_MS), 1);
  pthread_join(t, NULL);
  CU_ASSERT_EQUAL(atomic_load(&b.hook_waited), 1);
  CU_ASSERT_EQUAL(atomic_load(&b.other_events), TAXI_EBUSY);
  CU_ASSERT_EQUAL(atomic_load(&b.other_one), TAXI_EBUSY);
  CU_ASSERT_EQUAL(atomic_load(&b.other_run), TAXI_EBUSY);
  CU_ASSERT_EQUAL(atomic_load(&b.other_destroy), TAXI_EBUSY);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(b.r), 0);
  close_pair(sv);
}

/* While one thread is blocked waiting in handle_events, another thread's
 * handle_events gets TAXI_EBUSY. */
typedef struct waiter_ctx {
  taxi_reactor_t *r;
  atomic_int got_ebusy, attempts, done, notified;
} waiter_ctx_t;

static void note_notified(void *arg) {
  atomic_fetch_add(&((waiter_ctx_t *)arg)->notified, 1);
}

static void *try_dispatch_while_waiting(void *arg) {
  waiter_ctx_t *w = arg;
  for (int i = 0; i < 200 && !atomic_load(&w->got_ebusy); i++) {
    util_sleep_ms(10);
    atomic_fetch_add(&w->attempts, 1);
    int rc = taxi_reactor_handle_events(w->r, 0);
    if (rc == TAXI_EBUSY) atomic_store(&w->got_ebusy, 1);
  }
  atomic_store(&w->done, 1);
  taxi_reactor_notify(w->r, note_notified, w); /* wake the main thread */
  return NULL;
}

static void test_second_dispatcher_during_wait_is_ebusy(void) {
  waiter_ctx_t w;
  memset(&w, 0, sizeof w);
  w.r = conf_reactor();
  pthread_t t;
  CU_ASSERT_EQUAL_FATAL(
      pthread_create(&t, NULL, try_dispatch_while_waiting, &w), 0);
  taxi_time_t start = taxi_now();
  while (!atomic_load(&w.done) && util_elapsed_ms(start) < 3 * WAIT_MS) {
    int rc = taxi_reactor_handle_events(w.r, 1000);
    CU_ASSERT(rc >= 0);
    if (rc < 0) break;
  }
  pthread_join(t, NULL);
  CU_ASSERT_EQUAL(atomic_load(&w.got_ebusy), 1);
  CU_ASSERT(run_for(w.r, 10) >= 0);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(w.r), 0);
}

/* ---- stop and restart ---------------------------------------------------- */

typedef struct runner_ctx {
  taxi_reactor_t *r;
  atomic_int rc, done;
} runner_ctx_t;

static void *run_reactor(void *arg) {
  runner_ctx_t *c = arg;
  atomic_store(&c->rc, taxi_reactor_run(c->r));
  atomic_store(&c->done, 1);
  return NULL;
}

/* taxi_reactor_stop() from another thread makes run() return
 * TAXI_ESTOPPED. */
static void test_stop_from_other_thread(void) {
  runner_ctx_t c;
  memset(&c, 0, sizeof c);
  atomic_init(&c.rc, 1);
  c.r = conf_reactor();
  pthread_t t;
  CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, run_reactor, &c), 0);
  util_sleep_ms(
      30); /* let it block in its wait; correctness does not depend on it */
  CU_ASSERT_EQUAL(taxi_reactor_stop(c.r), 0);
  if (!util_wait_flag(&c.done, 1, WAIT_MS)) {
    pthread_detach(t);
    CU_FAIL_FATAL(
        "taxi_reactor_run() did not return after taxi_reactor_stop()");
  }
  pthread_join(t, NULL);
  CU_ASSERT_EQUAL(atomic_load(&c.rc), TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(taxi_reactor_stopped(c.r), 1);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(c.r), 0);
}

static void count_call(void *arg) { atomic_fetch_add((atomic_int *)arg, 1); }

/* A stopped reactor: handle_events, handle_one and run() give
 * TAXI_ESTOPPED at once; restart clears it. */
static void test_stopped_state_and_restart(void) {
  taxi_reactor_t *r = conf_reactor();
  atomic_int calls;
  atomic_init(&calls, 0);
  CU_ASSERT_EQUAL(taxi_reactor_stopped(r), 0);
  CU_ASSERT_EQUAL(taxi_reactor_stop(r), 0);
  CU_ASSERT_EQUAL(taxi_reactor_stopped(r), 1);
  CU_ASSERT_EQUAL(taxi_reactor_stop(r), 0);
  CU_ASSERT_EQUAL(taxi_reactor_notify(r, count_call, &calls), 0);
  CU_ASSERT_EQUAL(taxi_reactor_handle_events(r, 0), TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(taxi_reactor_handle_events(r, 100), TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(taxi_reactor_handle_one(r, 0), TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(atomic_load(&calls), 0);

  runner_ctx_t c;
  memset(&c, 0, sizeof c);
  atomic_init(&c.rc, 1);
  c.r = r;
  pthread_t t;
  CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, run_reactor, &c), 0);
  if (!util_wait_flag(&c.done, 1, WAIT_MS)) {
    taxi_reactor_stop(r); /* in case run cleared the state */
    if (!util_wait_flag(&c.done, 1, WAIT_MS)) {
      pthread_detach(t);
      CU_FAIL_FATAL("taxi_reactor_run() on a stopped reactor did not return");
    }
    CU_FAIL("taxi_reactor_run() on a stopped reactor did not return at once");
  }
  pthread_join(t, NULL);
  CU_ASSERT_EQUAL(atomic_load(&c.rc), TAXI_ESTOPPED);

  CU_ASSERT_EQUAL(taxi_reactor_restart(r), 0);
  CU_ASSERT_EQUAL(taxi_reactor_stopped(r), 0);
  CU_ASSERT_EQUAL(run_until(r, conf_pred_nonzero, &calls, WAIT_MS), 1);
  CU_ASSERT_EQUAL(atomic_load(&calls), 1);
  CU_ASSERT_EQUAL(taxi_reactor_handle_events(r, 0), 0);
  CU_ASSERT_EQUAL(taxi_reactor_restart(r), 0); /* restarting a running one */
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
}

/* stop() inside a hook: that handle_events call returns TAXI_ESTOPPED once
 * the hook returns, without dispatching the rest of the batch; after
 * restart the rest is dispatched. */
typedef struct stopper_ctx {
  taxi_reactor_t *r;
  conf_probe_t p[2];
} stopper_ctx_t;

static stopper_ctx_t *g_stopper;

static int stopper_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  taxi_reactor_stop(g_stopper->r);
  return conf_probe_input(h, fd, ev);
}

static const taxi_handler_ops_t stopper_ops = {.input = stopper_input,
                                               .close = conf_probe_close};

static void test_stop_inside_hook(void) {
  stopper_ctx_t ctx;
  memset(&ctx, 0, sizeof ctx);
  g_stopper = &ctx;
  ctx.r = conf_reactor();
  int sv[2][2];
  for (int i = 0; i < 2; i++)
    probe_on_pair(ctx.r, &ctx.p[i], sv[i], &stopper_ops);
  conf_settle(ctx.r, 10);
  for (int i = 0; i < 2; i++) CU_ASSERT_EQUAL(util_write_byte(sv[i][1]), 1);

  CU_ASSERT_EQUAL(taxi_reactor_handle_events(ctx.r, WAIT_MS), TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(atomic_load(&ctx.p[0].inputs) + atomic_load(&ctx.p[1].inputs),
                  1);
  CU_ASSERT_EQUAL(taxi_reactor_stopped(ctx.r), 1);

  CU_ASSERT_EQUAL(taxi_reactor_restart(ctx.r), 0);
  /* The other handle's hook stops the reactor too. */
  CU_ASSERT_EQUAL(taxi_reactor_handle_events(ctx.r, WAIT_MS), TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(atomic_load(&ctx.p[0].inputs), 1);
  CU_ASSERT_EQUAL(atomic_load(&ctx.p[1].inputs), 1);

  /* run() returns 0 when a hook stops it. */
  CU_ASSERT_EQUAL(taxi_reactor_restart(ctx.r), 0);
  CU_ASSERT_EQUAL(util_write_byte(sv[0][1]), 1);
  CU_ASSERT_EQUAL(taxi_reactor_run(ctx.r), TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(atomic_load(&ctx.p[0].inputs), 2);

  CU_ASSERT_EQUAL(taxi_reactor_destroy(ctx.r), 0);
  for (int i = 0; i < 2; i++) close_pair(sv[i]);
  g_stopper = NULL;
}

static CU_TestInfo lifetime_tests[] = {
    {"negative return removes; close once", test_negative_return_removes},
    {"remove inside own hook; close after", test_remove_inside_own_hook},
    {"remove from another thread during hook",
     test_remove_from_other_thread_during_hook},
    {"close hook frees the object", test_close_hook_frees_object},
    {"ref delays close until unref", test_ref_delays_close},
    {"stale event after re-register",
     test_stale_event_not_dispatched_after_reregister},
    {"destroy closes each handler once", test_destroy_closes_each_handler_once},
    {"destroy defers a referenced close", test_destroy_defers_referenced_close},
    {"dispatch from a hook: EBUSY", test_dispatch_from_hook_is_ebusy},
    {"second dispatcher during a hook: EBUSY",
     test_second_dispatcher_during_hook_is_ebusy},
    {"second dispatcher during a wait: EBUSY",
     test_second_dispatcher_during_wait_is_ebusy},
    {"stop from another thread ends run()", test_stop_from_other_thread},
    {"stopped: ESTOPPED until restart", test_stopped_state_and_restart},
    {"stop inside a hook", test_stop_inside_hook},
    CU_TEST_INFO_NULL,
};

const taxi_test_suite_t conf_suite_lifetime = {"lifetime", lifetime_tests, 60,
                                               NULL};
