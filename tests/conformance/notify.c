/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/conformance/notify.c - cross-thread notification: exactly once, in
 * order per poster, from hooks, waking a blocked dispatcher, dropped at
 * destroy.
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define WAIT_MS 5000

/* ---- many threads ------------------------------------------------------- */

enum { POSTERS = 8, PER_POSTER = 10000 };
#define SEQ_BITS 20

typedef struct storm {
  taxi_reactor_t *r;
  atomic_int next_seq[POSTERS]; /* the sequence number expected next */
  atomic_int delivered;
  atomic_int out_of_order;
  atomic_int bad_arg;
  atomic_int post_errors;
  atomic_int last_error;
  pthread_t dispatcher;
  atomic_int wrong_thread;
  atomic_int go;
} storm_t;

static storm_t *g_storm;

typedef struct poster_arg {
  storm_t *s;
  int index;
} poster_arg_t;

static void storm_deliver(void *arg) {
  storm_t *s = g_storm;
  uintptr_t v = (uintptr_t)arg;
  int thread = (int)(v >> SEQ_BITS);
  int seq = (int)(v & ((1u << SEQ_BITS) - 1));
  if (!pthread_equal(pthread_self(), s->dispatcher))
    atomic_store(&s->wrong_thread, 1);
  if (thread < 0 || thread >= POSTERS) {
    atomic_fetch_add(&s->bad_arg, 1);
    return;
  }
  int expected = atomic_load(&s->next_seq[thread]);
  if (seq != expected) atomic_fetch_add(&s->out_of_order, 1);
  atomic_store(&s->next_seq[thread], seq + 1);
  atomic_fetch_add(&s->delivered, 1);
}

static void *poster(void *arg) {
  poster_arg_t *a = arg;
  storm_t *s = a->s;
  util_wait_flag(&s->go, 1, WAIT_MS);
  for (int i = 0; i < PER_POSTER; i++) {
    uintptr_t v = ((uintptr_t)a->index << SEQ_BITS) | (uintptr_t)i;
    int rc;
    /* A full queue (notify_capacity) refuses: the poster waits its turn,
     * as the contract asks of it. */
    while ((rc = taxi_reactor_notify(s->r, storm_deliver, (void *)v)) ==
           TAXI_EAGAIN)
      sched_yield();
    if (rc != 0) {
      atomic_fetch_add(&s->post_errors, 1);
      atomic_store(&s->last_error, rc);
    }
  }
  return NULL;
}

/* 8 threads post 10,000 notifications each, concurrently, while the main
 * thread dispatches: each is delivered exactly once, in the dispatching
 * thread, and each thread's are delivered in the order it posted them. */
static void test_many_threads_exactly_once_in_order(void) {
  static storm_t s;
  memset(&s, 0, sizeof s);
  g_storm = &s;
  s.r = conf_reactor();
  s.dispatcher = pthread_self();
  pthread_t t[POSTERS];
  poster_arg_t args[POSTERS];
  for (int i = 0; i < POSTERS; i++) {
    args[i].s = &s;
    args[i].index = i;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&t[i], NULL, poster, &args[i]), 0);
  }
  atomic_store(&s.go, 1);
  conf_count_goal_t g = {&s.delivered, POSTERS * PER_POSTER};
  CU_ASSERT_EQUAL(run_until(s.r, conf_pred_reached, &g, 30000), 1);
  for (int i = 0; i < POSTERS; i++) pthread_join(t[i], NULL);
  /* Anything late or duplicated would show up now. */
  CU_ASSERT(run_for(s.r, 20) >= 0);

  if (atomic_load(&s.post_errors))
    printf("\n    %d notify calls failed, last with %s\n",
           atomic_load(&s.post_errors),
           taxi_error_name(atomic_load(&s.last_error)));
  CU_ASSERT_EQUAL(atomic_load(&s.post_errors), 0);
  CU_ASSERT_EQUAL(atomic_load(&s.delivered), POSTERS * PER_POSTER);
  CU_ASSERT_EQUAL(atomic_load(&s.out_of_order), 0);
  CU_ASSERT_EQUAL(atomic_load(&s.bad_arg), 0);
  CU_ASSERT_EQUAL(atomic_load(&s.wrong_thread), 0);
  for (int i = 0; i < POSTERS; i++)
    CU_ASSERT_EQUAL(atomic_load(&s.next_seq[i]), PER_POSTER);
  taxi_reactor_stats_t st;
  CU_ASSERT_EQUAL(taxi_reactor_stats(s.r, &st), 0);
  CU_ASSERT(st.notifications >= (uint64_t)(POSTERS * PER_POSTER));
  CU_ASSERT_EQUAL(taxi_reactor_destroy(s.r), 0);
  g_storm = NULL;
}

/* ---- from inside the reactor -------------------------------------------- */

typedef struct chain {
  taxi_reactor_t *r;
  int log[16];
  atomic_int n;
  atomic_int rc_b, rc_c;
} chain_t;

static chain_t *g_chain;

static void chain_log(int v) {
  int i = atomic_fetch_add(&g_chain->n, 1);
  if (i < 16) g_chain->log[i] = v;
}
static void chain_b(void *arg) {
  (void)arg;
  chain_log(2);
}
static void chain_c(void *arg) {
  (void)arg;
  chain_log(3);
}
static void chain_a(void *arg) {
  (void)arg;
  chain_log(1);
  atomic_store(&g_chain->rc_b, taxi_reactor_notify(g_chain->r, chain_b, NULL));
  atomic_store(&g_chain->rc_c, taxi_reactor_notify(g_chain->r, chain_c, NULL));
}

/* A notification posting more notifications: they run, in posting order. */
static void test_notify_from_notification(void) {
  chain_t c;
  memset(&c, 0, sizeof c);
  g_chain = &c;
  c.r = conf_reactor();
  atomic_init(&c.rc_b, 1);
  atomic_init(&c.rc_c, 1);
  CU_ASSERT_EQUAL(taxi_reactor_notify(c.r, chain_a, NULL), 0);
  conf_count_goal_t g = {&c.n, 3};
  CU_ASSERT_EQUAL(run_until(c.r, conf_pred_reached, &g, WAIT_MS), 1);
  CU_ASSERT(run_for(c.r, 10) >= 0);
  CU_ASSERT_EQUAL(atomic_load(&c.n), 3);
  CU_ASSERT_EQUAL(atomic_load(&c.rc_b), 0);
  CU_ASSERT_EQUAL(atomic_load(&c.rc_c), 0);
  CU_ASSERT_EQUAL(c.log[0], 1);
  CU_ASSERT_EQUAL(c.log[1], 2);
  CU_ASSERT_EQUAL(c.log[2], 3);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(c.r), 0);
  g_chain = NULL;
}

typedef struct hook_notifier {
  conf_probe_t p;
  taxi_reactor_t *r;
  atomic_int notify_rc;
  atomic_int ran;
  pthread_t ran_in;
} hook_notifier_t;

static void mark_ran(void *arg) {
  hook_notifier_t *hn = arg;
  hn->ran_in = pthread_self();
  atomic_fetch_add(&hn->ran, 1);
}

static int notifying_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  hook_notifier_t *hn = TAXI_CONTAINER_OF(h, hook_notifier_t, p.h);
  atomic_store(&hn->notify_rc, taxi_reactor_notify(hn->r, mark_ran, hn));
  return conf_probe_input(h, fd, ev);
}

static const taxi_handler_ops_t notifying_ops = {.input = notifying_input,
                                                 .close = conf_probe_close};

/* taxi_reactor_notify() from inside an input hook: the notification runs
 * in the dispatching thread. */
static void test_notify_from_hook(void) {
  hook_notifier_t hn;
  memset(&hn, 0, sizeof hn);
  atomic_init(&hn.notify_rc, 1);
  hn.r = conf_reactor();
  int sv[2];
  CU_ASSERT_EQUAL_FATAL(util_socketpair(sv), 0);
  conf_probe_init(&hn.p, sv[0], &notifying_ops);
  CU_ASSERT_EQUAL_FATAL(
      taxi_reactor_register(hn.r, sv[0], &hn.p.h, TAXI_EV_READ), 0);
  CU_ASSERT_EQUAL(util_write_byte(sv[1]), 1);
  CU_ASSERT_EQUAL(run_until(hn.r, conf_pred_nonzero, &hn.ran, WAIT_MS), 1);
  CU_ASSERT_EQUAL(atomic_load(&hn.notify_rc), 0);
  CU_ASSERT_EQUAL(atomic_load(&hn.ran), 1);
  if (atomic_load(&hn.ran)) CU_ASSERT(pthread_equal(hn.ran_in, pthread_self()));
  CU_ASSERT_EQUAL(taxi_reactor_destroy(hn.r), 0);
  close(sv[0]);
  close(sv[1]);
}

/* ---- waking and dropping ---------------------------------------------- */

typedef struct waker {
  taxi_reactor_t *r;
  atomic_int ran;
  atomic_int rc;
} waker_t;

static void waker_fn(void *arg) { atomic_fetch_add(&((waker_t *)arg)->ran, 1); }

static void *post_later(void *arg) {
  waker_t *w = arg;
  util_sleep_ms(30); /* let the main thread block; not needed for correctness */
  atomic_store(&w->rc, taxi_reactor_notify(w->r, waker_fn, w));
  return NULL;
}

/* A notification from another thread wakes a dispatcher blocked in a long
 * wait: that very handle_events call runs it and returns 1. */
static void test_notify_wakes_blocked_dispatcher(void) {
  waker_t w;
  memset(&w, 0, sizeof w);
  atomic_init(&w.rc, 1);
  w.r = conf_reactor();
  conf_settle(w.r, 10);
  pthread_t t;
  CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, post_later, &w), 0);
  int rc = taxi_reactor_handle_events(w.r, 20000);
  pthread_join(t, NULL);
  CU_ASSERT_EQUAL(atomic_load(&w.rc), 0);
  CU_ASSERT_EQUAL(rc, 1);
  CU_ASSERT_EQUAL(atomic_load(&w.ran), 1);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(w.r), 0);
}

static atomic_int dropped_calls;
static void must_not_run(void *arg) {
  (void)arg;
  atomic_fetch_add(&dropped_calls, 1);
}

/* Notifications still queued when the reactor is destroyed are dropped:
 * fn is never called (and nothing leaks: see the sanitizer builds). */
static void test_pending_dropped_at_destroy(void) {
  atomic_store(&dropped_calls, 0);
  taxi_reactor_t *r = conf_reactor();
  for (int i = 0; i < 1000; i++)
    CU_ASSERT_EQUAL(taxi_reactor_notify(r, must_not_run, NULL), 0);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  CU_ASSERT_EQUAL(atomic_load(&dropped_calls), 0);
}

/* A single thread posting 100 then dispatching: all run, in order, and
 * handle_events counts them. */
static int seq_log[100];
static atomic_int seq_n;
static void seq_fn(void *arg) {
  int i = atomic_fetch_add(&seq_n, 1);
  if (i < 100) seq_log[i] = (int)(intptr_t)arg;
}

static void test_same_thread_order_and_count(void) {
  atomic_store(&seq_n, 0);
  taxi_reactor_t *r = conf_reactor();
  conf_settle(r, 10);
  for (int i = 0; i < 100; i++)
    CU_ASSERT_EQUAL(taxi_reactor_notify(r, seq_fn, (void *)(intptr_t)i), 0);
  int total = 0;
  for (int k = 0; k < 1000 && total < 100; k++) {
    int rc = taxi_reactor_handle_events(r, 1000);
    CU_ASSERT(rc >= 0);
    if (rc < 0) break;
    total += rc;
  }
  CU_ASSERT_EQUAL(total, 100);
  CU_ASSERT_EQUAL(atomic_load(&seq_n), 100);
  for (int i = 0; i < 100; i++) CU_ASSERT_EQUAL(seq_log[i], i);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
}

static CU_TestInfo notify_tests[] = {
    {"8 threads x 10,000: exactly once, in order",
     test_many_threads_exactly_once_in_order},
    {"notify from a notification", test_notify_from_notification},
    {"notify from an input hook", test_notify_from_hook},
    {"notify wakes a blocked dispatcher", test_notify_wakes_blocked_dispatcher},
    {"pending notifications dropped at destroy",
     test_pending_dropped_at_destroy},
    {"same-thread order and count", test_same_thread_order_and_count},
    CU_TEST_INFO_NULL,
};

const taxi_test_suite_t conf_suite_notify = {"notify", notify_tests, 60, NULL};
