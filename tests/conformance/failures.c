/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/conformance/failures.c - the reactor's own dispatch when the OS
 * fails it, and the limits that keep a misbehaving caller from making it
 * loop or grow for ever: a wait refused once is retried and reported, one
 * failed for good is returned; a periodic timer with an enormous period
 * fires once, not billions of times; delays beyond TAXI_TIME_SPAN_MAX are
 * refused; the notification queue is bounded; references taken while the
 * handler moves between reactors are never lost.
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../fault/fault.h"

/* The system call the backend waits with, or NULL if the module cannot
 * fail it. */
static const char *wait_call(void) {
  const char *b = taxi_test_backend;
  if (strcmp(b, "epoll") == 0 || strcmp(b, "apr") == 0) return "epoll_wait";
  if (strcmp(b, "poll") == 0 || strcmp(b, "apr:poll") == 0) return "poll";
  if (strcmp(b, "select") == 0 || strcmp(b, "apr:select") == 0) return "select";
  if (strcmp(b, "wsapoll") == 0) return "WSAPoll"; /* tests/fault/iat_win32.c */
  return NULL;
}

static int can_inject(const char *call) {
  if (!fault_available()) {
    printf("\n    not run: %s\n", fault_unavailable_reason());
    return 0;
  }
  if (!call) {
    printf(
        "\n    not applicable: %s waits with no system call the "
        "fault-injection module can fail\n",
        taxi_test_backend);
    return 0;
  }
  return 1;
}

static atomic_int heard_transient, heard_fatal, heard_code;

static void on_error(const taxi_error_report_t *r, void *arg) {
  (void)arg;
  atomic_store(&heard_code, r->code);
  atomic_fetch_add(r->fatal ? &heard_fatal : &heard_transient, 1);
}

static taxi_reactor_t *reactor_reporting(void) {
  atomic_store(&heard_transient, 0);
  atomic_store(&heard_fatal, 0);
  atomic_store(&heard_code, 0);
  taxi_reactor_options_t o = {.size = sizeof(taxi_reactor_options_t),
                              .backend = taxi_test_backend,
                              .on_error = on_error};
  taxi_reactor_t *r = NULL;
  CU_ASSERT_EQUAL_FATAL(taxi_reactor_create(&r, &o), 0);
  return r;
}

/* A wait refused for want of memory is retried after a pause: the event
 * that was ready is dispatched by the same call, and the failure was
 * counted and reported as transient. */
static void test_wait_refused_once(void) {
  if (!can_inject(wait_call())) return;
  taxi_reactor_t *r = reactor_reporting();
  int sv[2];
  CU_ASSERT_EQUAL_FATAL(util_socketpair(sv), 0);
  conf_probe_t p;
  conf_probe_init(&p, sv[0], NULL);
  CU_ASSERT_EQUAL_FATAL(taxi_reactor_register(r, sv[0], &p.h, TAXI_EV_READ), 0);
  CU_ASSERT_EQUAL(util_write_byte(sv[1]), 1);
  char spec[64];
  snprintf(spec, sizeof spec, "%s:1:ENOMEM", wait_call());
  CU_ASSERT_EQUAL_FATAL(fault_arm(spec), 0);
  CU_ASSERT_EQUAL(taxi_reactor_handle_events(r, 5000), 1);
  fault_arm("");
  CU_ASSERT_EQUAL(atomic_load(&p.inputs), 1);
  CU_ASSERT_EQUAL(atomic_load(&heard_transient), 1);
  CU_ASSERT_EQUAL(atomic_load(&heard_fatal), 0);
  CU_ASSERT_EQUAL(atomic_load(&heard_code), TAXI_ENOMEM);
  taxi_reactor_stats_t s;
  CU_ASSERT_EQUAL(taxi_reactor_stats(r, &s), 0);
  CU_ASSERT_EQUAL(s.transient_errors, 1);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  close(sv[1]);
}

/* A wait that fails with an error that does not pass is returned by run
 * and reported as fatal; the reactor can be destroyed. */
static void test_wait_failed_for_good(void) {
  if (!can_inject(wait_call())) return;
  taxi_reactor_t *r = reactor_reporting();
  char spec[64];
  snprintf(spec, sizeof spec, "%s:1:EINVAL:0", wait_call());
  CU_ASSERT_EQUAL_FATAL(fault_arm(spec), 0);
  CU_ASSERT_EQUAL(taxi_reactor_run(r), TAXI_EINVAL);
  fault_arm("");
  CU_ASSERT_EQUAL(atomic_load(&heard_fatal), 1);
  CU_ASSERT_EQUAL(atomic_load(&heard_code), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
}

/* With no timeout left, a refused wait is counted and the call returns
 * (no pause beyond the timeout); refusals that go on become persistent
 * across calls, and are then returned. */
static void test_refusals_add_up_across_calls(void) {
  if (!can_inject(wait_call())) return;
  taxi_reactor_t *r = reactor_reporting();
  char spec[64];
  snprintf(spec, sizeof spec, "%s:1:ENOMEM:0", wait_call());
  CU_ASSERT_EQUAL_FATAL(fault_arm(spec), 0);
  int rc = 0, calls = 0;
  while (calls < 100 && (rc = taxi_reactor_handle_events(r, 0)) == 0) calls++;
  fault_arm("");
  CU_ASSERT_EQUAL(rc, TAXI_ENOMEM);
  CU_ASSERT(calls >= 15 && calls <= 17);
  CU_ASSERT_EQUAL(atomic_load(&heard_fatal), 1);
  /* Once the OS gives memory again, the reactor works. */
  CU_ASSERT_EQUAL(taxi_reactor_handle_events(r, 0), 0);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
}

/* ---- time -------------------------------------------------------------------
 */

/* A 1 ms timer with a period of TAXI_TIME_SPAN_MAX: its next deadline is
 * beyond anything, not wrapped round to the past.  It used to take
 * INT64_MAX, overflow deadline + period, and fire 2^31 - 1 times in one
 * call. */
static void test_huge_period_fires_once(void) {
  taxi_reactor_t *r = conf_reactor();
  conf_probe_t p;
  conf_probe_init(&p, -1, NULL);
  taxi_timer_t t;
  taxi_timer_init(&t);
  CU_ASSERT_EQUAL(
      taxi_reactor_schedule(r, &t, &p.h, TAXI_NSEC_PER_MSEC, INT64_MAX, NULL),
      TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_reactor_schedule(r, &t, &p.h, INT64_MAX, 0, NULL),
                  TAXI_EINVAL);
  CU_ASSERT_EQUAL(
      taxi_reactor_schedule(r, &t, &p.h, TAXI_TIME_SPAN_MAX + 1, 0, NULL),
      TAXI_EINVAL);
  CU_ASSERT_EQUAL_FATAL(taxi_reactor_schedule(r, &t, &p.h, TAXI_NSEC_PER_MSEC,
                                              TAXI_TIME_SPAN_MAX, NULL),
                        0);
  CU_ASSERT(run_for(r, 50) >= 1);
  CU_ASSERT_EQUAL(atomic_load(&p.timeouts), 1);
  CU_ASSERT(run_for(r, 20) >= 0);
  CU_ASSERT_EQUAL(atomic_load(&p.timeouts), 1);
  CU_ASSERT_EQUAL(taxi_reactor_cancel(r, &t), 0);
  /* The longest delay is accepted and simply never comes. */
  CU_ASSERT_EQUAL(
      taxi_reactor_schedule(r, &t, &p.h, TAXI_TIME_SPAN_MAX, 0, NULL), 0);
  CU_ASSERT_EQUAL(taxi_reactor_handle_events(r, 0), 0);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
}

/* ---- notifications ---------------------------------------------------------
 */

static atomic_int notes_run;

static void count_note(void *arg) {
  (void)arg;
  atomic_fetch_add(&notes_run, 1);
}

/* Posting beyond notify_capacity is refused (TAXI_EAGAIN) rather than
 * growing the queue for ever; once run, there is room again. */
static void test_notify_bounded(void) {
  taxi_reactor_options_t o = {.size = sizeof(taxi_reactor_options_t),
                              .backend = taxi_test_backend,
                              .notify_capacity = 4};
  taxi_reactor_t *r;
  CU_ASSERT_EQUAL_FATAL(taxi_reactor_create(&r, &o), 0);
  atomic_store(&notes_run, 0);
  for (int i = 0; i < 4; i++)
    CU_ASSERT_EQUAL(taxi_reactor_notify(r, count_note, NULL), 0);
  CU_ASSERT_EQUAL(taxi_reactor_notify(r, count_note, NULL), TAXI_EAGAIN);
  CU_ASSERT_EQUAL(taxi_reactor_handle_events(r, 0), 4);
  CU_ASSERT_EQUAL(atomic_load(&notes_run), 4);
  CU_ASSERT_EQUAL(taxi_reactor_notify(r, count_note, NULL), 0);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  o.notify_capacity = TAXI_NOTIFY_MAX_CAPACITY + 1;
  CU_ASSERT_EQUAL(taxi_reactor_create(&r, &o), TAXI_EINVAL);
}

/* ---- references while moving
 * ---------------------------------------------------
 */

typedef struct mover {
  taxi_reactor_t *a, *b;
  taxi_handler_t *h;
  atomic_int stop;
  atomic_int moves;
} mover_t;

static void mover_main(void *arg) {
  mover_t *m = arg;
  while (!atomic_load(&m->stop)) {
    if (taxi_reactor_move(m->a, m->h, m->b) == 0)
      atomic_fetch_add(&m->moves, 1);
    if (taxi_reactor_move(m->b, m->h, m->a) == 0)
      atomic_fetch_add(&m->moves, 1);
  }
}

/* taxi_handler_ref/unref find the lock of the reactor the handler is with
 * now: a handler moving between two reactors meanwhile loses no
 * reference (each was counted under the right lock), so it closes exactly
 * once, after the last unref. */
static void test_refs_while_moving(void) {
  taxi_reactor_t *a = conf_reactor(), *b = conf_reactor();
  int sv[2];
  CU_ASSERT_EQUAL_FATAL(util_socketpair(sv), 0);
  conf_probe_t p;
  conf_probe_init(&p, sv[0], NULL);
  CU_ASSERT_EQUAL_FATAL(taxi_reactor_register(a, sv[0], &p.h, TAXI_EV_READ), 0);
  mover_t m = {a, b, &p.h, 0, 0};
  util_thread_t th;
  CU_ASSERT_EQUAL_FATAL(util_thread_start(&th, mover_main, &m), 0);
  /* Go on until the mover has moved the handler many times (bounded). */
  int goal = util_test_small() ? 200 : 2000, n = 0;
  taxi_time_t start = taxi_now();
  while ((atomic_load(&m.moves) < goal || n < goal) &&
         util_elapsed_ms(start) < 10000) {
    int ok = taxi_handler_ref(&p.h) == 0;
    ok &= taxi_handler_ref(&p.h) == 0;
    ok &= taxi_handler_unref(&p.h) == 0;
    if (!ok) CU_FAIL("ref/unref failed");
    n++;
  }
  atomic_store(&m.stop, 1);
  util_thread_join(&th, 10000, "the mover");
  CU_ASSERT(atomic_load(&m.moves) >= goal);
  /* n references remain: removal leaves the handler open until the last. */
  taxi_reactor_t *owner = taxi_reactor_remove(a, &p.h) == 0 ? a : b;
  if (owner == b) CU_ASSERT_EQUAL(taxi_reactor_remove(b, &p.h), 0);
  for (int i = 0; i < n - 1; i++) CU_ASSERT_EQUAL(taxi_handler_unref(&p.h), 0);
  CU_ASSERT_EQUAL(atomic_load(&p.closes), 0);
  CU_ASSERT_EQUAL(taxi_handler_unref(&p.h), 0);
  CU_ASSERT_EQUAL(atomic_load(&p.closes), 1);
  CU_ASSERT_EQUAL(taxi_handler_unref(&p.h), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(a), 0);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(b), 0);
  close(sv[0]);
  close(sv[1]);
}

static CU_TestInfo failures_tests[] = {
    {"a wait refused once is retried and reported", test_wait_refused_once},
    {"a wait failed for good is returned and reported",
     test_wait_failed_for_good},
    {"refusals add up across calls, then are returned",
     test_refusals_add_up_across_calls},
    {"a periodic timer with a huge period fires once",
     test_huge_period_fires_once},
    {"the notification queue is bounded", test_notify_bounded},
    {"references taken while the handler moves are kept",
     test_refs_while_moving},
    CU_TEST_INFO_NULL,
};

const taxi_test_suite_t conf_suite_failures = {"failures", failures_tests, 60,
                                               NULL};
