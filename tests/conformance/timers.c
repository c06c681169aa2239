/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/conformance/timers.c - one-shot and periodic timers: order,
 * cancellation, rescheduling, removal.
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define WAIT_MS 5000
#define MS TAXI_NSEC_PER_MSEC

/* A handler with a set of timers that records the order they fire in. */
enum { MAX_TIMERS = 32 };
typedef struct recorder {
  taxi_handler_t h;
  taxi_timer_t t[MAX_TIMERS];
  int order[4 * MAX_TIMERS];
  atomic_int fired;
  atomic_int per_timer[MAX_TIMERS];
  atomic_int closes;
  int wrong_timer; /* the timer passed did not match act */
  taxi_reactor_t *r;
  int cancel_at; /* periodic: cancel itself on this firing (1-based) */
  atomic_int cancel_rc;
  int ret_negative_for; /* timer index whose hook returns -1, or -1 */
} recorder_t;

static int recorder_timeout(taxi_handler_t *h, taxi_timer_t *t, void *act) {
  recorder_t *rec = TAXI_CONTAINER_OF(h, recorder_t, h);
  int i = (int)(intptr_t)act;
  if (i < 0 || i >= MAX_TIMERS || t != &rec->t[i]) {
    rec->wrong_timer = 1;
    return 0;
  }
  int n = atomic_fetch_add(&rec->fired, 1);
  if (n < 4 * MAX_TIMERS) rec->order[n] = i;
  int k = atomic_fetch_add(&rec->per_timer[i], 1) + 1;
  if (rec->cancel_at && k == rec->cancel_at)
    atomic_store(&rec->cancel_rc, taxi_reactor_cancel(rec->r, t));
  if (i == rec->ret_negative_for) return -1;
  return 0;
}

static void recorder_close(taxi_handler_t *h, taxi_handle_t fd) {
  recorder_t *rec = TAXI_CONTAINER_OF(h, recorder_t, h);
  (void)fd;
  atomic_fetch_add(&rec->closes, 1);
}

static int recorder_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  (void)h;
  (void)ev;
  util_drain(fd);
  return 0;
}

static const taxi_handler_ops_t recorder_ops = {.input = recorder_input,
                                                .timeout = recorder_timeout,
                                                .close = recorder_close};

static void recorder_init(recorder_t *rec, taxi_reactor_t *r) {
  memset(rec, 0, sizeof *rec);
  rec->r = r;
  rec->ret_negative_for = -1;
  atomic_init(&rec->fired, 0);
  atomic_init(&rec->closes, 0);
  atomic_init(&rec->cancel_rc, 1);
  for (int i = 0; i < MAX_TIMERS; i++) {
    atomic_init(&rec->per_timer[i], 0);
    CU_ASSERT_EQUAL(taxi_timer_init(&rec->t[i]), 0);
  }
  CU_ASSERT_EQUAL(taxi_handler_init(&rec->h, &recorder_ops), 0);
}

static int schedule(recorder_t *rec, int i, taxi_time_t delay,
                    taxi_time_t period) {
  return taxi_reactor_schedule(rec->r, &rec->t[i], &rec->h, delay, period,
                               (void *)(intptr_t)i);
}

/* 20 one-shot timers, delays 1..20 ms scheduled in shuffled order, fire
 * in deadline order.  The deadline the library computed for timer i lies
 * within [before_i + d_i, after_i + d_i] (taxi_now() around the schedule
 * call); a timer must not fire before one whose deadline is surely
 * later. */
static void test_one_shot_deadline_order(void) {
  enum { N = 20 };
  taxi_reactor_t *r = conf_reactor();
  recorder_t rec;
  recorder_init(&rec, r);
  int delay_ms[N];
  for (int i = 0; i < N; i++) delay_ms[i] = i + 1;
  unsigned seed = 12345u;
  for (int i = N - 1; i > 0; i--) {
    seed = seed * 1103515245u + 12345u;
    int j = (int)((seed >> 16) % (unsigned)(i + 1));
    int tmp = delay_ms[i];
    delay_ms[i] = delay_ms[j];
    delay_ms[j] = tmp;
  }
  taxi_time_t lo[N], hi[N];
  for (int i = 0; i < N; i++) {
    taxi_time_t before = taxi_now();
    CU_ASSERT_EQUAL_FATAL(schedule(&rec, i, delay_ms[i] * MS, 0), 0);
    taxi_time_t after = taxi_now();
    lo[i] = before + delay_ms[i] * MS;
    hi[i] = after + delay_ms[i] * MS;
  }
  conf_count_goal_t g = {&rec.fired, N};
  CU_ASSERT_EQUAL(run_until(r, conf_pred_reached, &g, WAIT_MS), 1);
  CU_ASSERT(run_for(r, 30) >= 0);
  CU_ASSERT_EQUAL(atomic_load(&rec.fired), N);
  CU_ASSERT_EQUAL(rec.wrong_timer, 0);
  for (int i = 0; i < N; i++)
    CU_ASSERT_EQUAL(atomic_load(&rec.per_timer[i]), 1);
  int misordered = 0;
  for (int a = 0; a < N; a++)
    for (int b = a + 1; b < N; b++)
      if (hi[rec.order[b]] < lo[rec.order[a]]) misordered++;
  if (misordered) {
    printf("\n    fired (delay ms):");
    for (int i = 0; i < N; i++) printf(" %d", delay_ms[rec.order[i]]);
    printf("\n");
  }
  CU_ASSERT_EQUAL(misordered, 0);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  CU_ASSERT_EQUAL(atomic_load(&rec.closes), 1);
}

/* Timers with the same delay scheduled one after the other fire in the
 * order they were scheduled (equal deadlines: in scheduling order). */
static void test_equal_deadlines_fire_in_schedule_order(void) {
  enum { N = 16 };
  taxi_reactor_t *r = conf_reactor();
  recorder_t rec;
  recorder_init(&rec, r);
  for (int i = 0; i < N; i++)
    CU_ASSERT_EQUAL_FATAL(schedule(&rec, i, 5 * MS, 0), 0);
  conf_count_goal_t g = {&rec.fired, N};
  CU_ASSERT_EQUAL(run_until(r, conf_pred_reached, &g, WAIT_MS), 1);
  CU_ASSERT_EQUAL(atomic_load(&rec.fired), N);
  for (int i = 0; i < N; i++) CU_ASSERT_EQUAL(rec.order[i], i);
  /* Delay 0 too: due at once, still in order. */
  atomic_store(&rec.fired, 0);
  for (int i = 0; i < N; i++) CU_ASSERT_EQUAL_FATAL(schedule(&rec, i, 0, 0), 0);
  CU_ASSERT_EQUAL(run_until(r, conf_pred_reached, &g, WAIT_MS), 1);
  for (int i = 0; i < N; i++) CU_ASSERT_EQUAL(rec.order[i], i);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
}

/* A cancelled timer never fires; cancelling again gives TAXI_ENOENT, as
 * does cancelling a one-shot timer that already fired. */
static void test_cancel_before_firing(void) {
  taxi_reactor_t *r = conf_reactor();
  recorder_t rec;
  recorder_init(&rec, r);
  CU_ASSERT_EQUAL(schedule(&rec, 0, 20 * MS, 0), 0);
  CU_ASSERT_EQUAL(schedule(&rec, 1, 40 * MS, 0), 0);
  CU_ASSERT_EQUAL(taxi_reactor_cancel(r, &rec.t[0]), 0);
  CU_ASSERT_EQUAL(taxi_reactor_cancel(r, &rec.t[0]), TAXI_ENOENT);
  CU_ASSERT_EQUAL(run_until(r, conf_pred_nonzero, &rec.per_timer[1], WAIT_MS),
                  1);
  CU_ASSERT(run_for(r, 30) >= 0);
  CU_ASSERT_EQUAL(atomic_load(&rec.per_timer[0]), 0);
  CU_ASSERT_EQUAL(atomic_load(&rec.per_timer[1]), 1);
  CU_ASSERT_EQUAL(taxi_reactor_cancel(r, &rec.t[1]), TAXI_ENOENT);
  /* A cancelled timer may be scheduled again. */
  CU_ASSERT_EQUAL(schedule(&rec, 0, 1 * MS, 0), 0);
  CU_ASSERT_EQUAL(run_until(r, conf_pred_nonzero, &rec.per_timer[0], WAIT_MS),
                  1);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
}

/* A periodic timer fires repeatedly; cancelled from inside its own hook on
 * the 5th firing it stops (it is not rescheduled after the hook). */
static void test_periodic_cancel_from_own_hook(void) {
  taxi_reactor_t *r = conf_reactor();
  recorder_t rec;
  recorder_init(&rec, r);
  rec.cancel_at = 5;
  CU_ASSERT_EQUAL(schedule(&rec, 0, 1 * MS, 2 * MS), 0);
  conf_count_goal_t g = {&rec.per_timer[0], 5};
  CU_ASSERT_EQUAL(run_until(r, conf_pred_reached, &g, WAIT_MS), 1);
  CU_ASSERT(run_for(r, 50) >= 0);
  CU_ASSERT_EQUAL(atomic_load(&rec.cancel_rc), 0);
  CU_ASSERT_EQUAL(atomic_load(&rec.per_timer[0]), 5);
  CU_ASSERT_EQUAL(taxi_reactor_cancel(r, &rec.t[0]), TAXI_ENOENT);
  CU_ASSERT_EQUAL(atomic_load(&rec.closes), 0);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  CU_ASSERT_EQUAL(atomic_load(&rec.closes), 1);
}

/* A periodic timer cancelled from outside after N firings stops. */
static void test_periodic_fires_repeatedly(void) {
  taxi_reactor_t *r = conf_reactor();
  recorder_t rec;
  recorder_init(&rec, r);
  CU_ASSERT_EQUAL(schedule(&rec, 0, 0, 1 * MS), 0);
  conf_count_goal_t g = {&rec.per_timer[0], 10};
  CU_ASSERT_EQUAL(run_until(r, conf_pred_reached, &g, WAIT_MS), 1);
  CU_ASSERT_EQUAL(taxi_reactor_cancel(r, &rec.t[0]), 0);
  int n = atomic_load(&rec.per_timer[0]);
  CU_ASSERT(run_for(r, 30) >= 0);
  CU_ASSERT_EQUAL(atomic_load(&rec.per_timer[0]), n);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
}

/* A timeout hook returning a negative value cancels that timer only: the
 * handler stays attached (its handle and other timers keep working, and
 * taxi_reactor_remove() afterwards returns 0). */
static void test_negative_timeout_cancels_timer_only(void) {
  taxi_reactor_t *r = conf_reactor();
  recorder_t rec;
  recorder_init(&rec, r);
  int sv[2];
  CU_ASSERT_EQUAL_FATAL(util_socketpair(sv), 0);
  rec.ret_negative_for = 0;
  CU_ASSERT_EQUAL(schedule(&rec, 0, 1 * MS, 1 * MS), 0);
  CU_ASSERT_EQUAL(schedule(&rec, 1, 1 * MS, 1 * MS), 0);
  conf_count_goal_t g = {&rec.per_timer[1], 10};
  CU_ASSERT_EQUAL(run_until(r, conf_pred_reached, &g, WAIT_MS), 1);
  CU_ASSERT_EQUAL(atomic_load(&rec.per_timer[0]), 1);
  CU_ASSERT_EQUAL(atomic_load(&rec.closes), 0);
  CU_ASSERT_EQUAL(taxi_reactor_cancel(r, &rec.t[0]), TAXI_ENOENT);
  CU_ASSERT_EQUAL(taxi_reactor_cancel(r, &rec.t[1]), 0);
  CU_ASSERT_EQUAL(taxi_reactor_remove(r, &rec.h), 0);
  CU_ASSERT_EQUAL(atomic_load(&rec.closes), 1);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  CU_ASSERT_EQUAL(atomic_load(&rec.closes), 1);
  close(sv[0]);
  close(sv[1]);
}

/* Removing a handler cancels its timers: they never fire, cancelling them
 * gives TAXI_ENOENT, and the close hook runs once. */
static void test_remove_cancels_timers(void) {
  taxi_reactor_t *r = conf_reactor();
  recorder_t rec;
  recorder_init(&rec, r);
  int sv[2];
  CU_ASSERT_EQUAL_FATAL(util_socketpair(sv), 0);
  CU_ASSERT_EQUAL(taxi_reactor_register(r, sv[0], &rec.h, TAXI_EV_READ), 0);
  CU_ASSERT_EQUAL(schedule(&rec, 0, 10 * MS, 0), 0);
  CU_ASSERT_EQUAL(schedule(&rec, 1, 20 * MS, 5 * MS), 0);
  CU_ASSERT_EQUAL(taxi_reactor_remove(r, &rec.h), 0);
  CU_ASSERT(run_for(r, 60) >= 0);
  CU_ASSERT_EQUAL(atomic_load(&rec.fired), 0);
  CU_ASSERT_EQUAL(atomic_load(&rec.closes), 1);
  CU_ASSERT_EQUAL(taxi_reactor_cancel(r, &rec.t[0]), TAXI_ENOENT);
  CU_ASSERT_EQUAL(taxi_reactor_cancel(r, &rec.t[1]), TAXI_ENOENT);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  CU_ASSERT_EQUAL(atomic_load(&rec.closes), 1);
  close(sv[0]);
  close(sv[1]);
}

/* Scheduling a scheduled timer moves it: later -> sooner fires once,
 * sooner -> later does not fire at the old time. */
static void test_reschedule_moves_timer(void) {
  taxi_reactor_t *r = conf_reactor();
  recorder_t rec;
  recorder_init(&rec, r);
  CU_ASSERT_EQUAL(schedule(&rec, 0, 60 * TAXI_NSEC_PER_SEC, 0), 0);
  CU_ASSERT_EQUAL(schedule(&rec, 0, 2 * MS, 0), 0);
  CU_ASSERT_EQUAL(run_until(r, conf_pred_nonzero, &rec.per_timer[0], WAIT_MS),
                  1);
  CU_ASSERT(run_for(r, 30) >= 0);
  CU_ASSERT_EQUAL(atomic_load(&rec.per_timer[0]), 1);
  CU_ASSERT_EQUAL(taxi_reactor_cancel(r, &rec.t[0]), TAXI_ENOENT);

  CU_ASSERT_EQUAL(schedule(&rec, 1, 2 * MS, 0), 0);
  CU_ASSERT_EQUAL(schedule(&rec, 1, 60 * TAXI_NSEC_PER_SEC, 0), 0);
  CU_ASSERT(run_for(r, 50) >= 0);
  CU_ASSERT_EQUAL(atomic_load(&rec.per_timer[1]), 0);
  CU_ASSERT_EQUAL(taxi_reactor_cancel(r, &rec.t[1]), 0);

  /* Scheduling twice at the same delay keeps one entry: it fires once. */
  CU_ASSERT_EQUAL(schedule(&rec, 2, 1 * MS, 0), 0);
  CU_ASSERT_EQUAL(schedule(&rec, 2, 1 * MS, 0), 0);
  CU_ASSERT_EQUAL(run_until(r, conf_pred_nonzero, &rec.per_timer[2], WAIT_MS),
                  1);
  CU_ASSERT(run_for(r, 20) >= 0);
  CU_ASSERT_EQUAL(atomic_load(&rec.per_timer[2]), 1);
  CU_ASSERT_EQUAL(rec.wrong_timer, 0);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
}

/* A handler with timers and no handle: the hook gets its timer and act;
 * the handler stays attached after a one-shot fired (remove returns 0 and
 * closes it). */
static void test_timer_on_handler_without_handle(void) {
  taxi_reactor_t *r = conf_reactor();
  conf_probe_t p;
  conf_probe_init(&p, -1, NULL);
  taxi_timer_t t;
  CU_ASSERT_EQUAL(taxi_timer_init(&t), 0);
  int marker = 0;
  CU_ASSERT_EQUAL(taxi_reactor_schedule(r, &t, &p.h, 1 * MS, 0, &marker), 0);
  CU_ASSERT_EQUAL(run_until(r, conf_pred_nonzero, &p.timeouts, WAIT_MS), 1);
  CU_ASSERT_PTR_EQUAL(p.last_act, &marker);
  CU_ASSERT_PTR_EQUAL(p.last_timer, &t);
  CU_ASSERT(run_for(r, 20) >= 0);
  CU_ASSERT_EQUAL(atomic_load(&p.timeouts), 1);
  taxi_reactor_stats_t s;
  CU_ASSERT_EQUAL(taxi_reactor_stats(r, &s), 0);
  CU_ASSERT(s.timers >= 1);
  CU_ASSERT_EQUAL(s.handles, 0);
  /* The timer record is reusable after it fired. */
  CU_ASSERT_EQUAL(taxi_reactor_schedule(r, &t, &p.h, 1 * MS, 0, NULL), 0);
  CU_ASSERT_EQUAL(taxi_reactor_remove(r, &p.h), 0);
  CU_ASSERT_EQUAL(atomic_load(&p.closes), 1);
  CU_ASSERT(run_for(r, 20) >= 0);
  CU_ASSERT_EQUAL(atomic_load(&p.timeouts), 1);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  CU_ASSERT_EQUAL(atomic_load(&p.closes), 1);
}

/* A handler attached through a timer stays attached once its timers are
 * done (fired or cancelled): remove returns 0 and runs the close hook; a
 * handler whose timers are done is closed by destroy. */
static void test_handler_attached_after_timers_done(void) {
  taxi_reactor_t *r = conf_reactor();
  conf_probe_t fired, cancelled, left;
  taxi_timer_t t1, t2, t3;
  conf_probe_init(&fired, -1, NULL);
  conf_probe_init(&cancelled, -1, NULL);
  conf_probe_init(&left, -1, NULL);
  CU_ASSERT_EQUAL(taxi_timer_init(&t1), 0);
  CU_ASSERT_EQUAL(taxi_timer_init(&t2), 0);
  CU_ASSERT_EQUAL(taxi_timer_init(&t3), 0);
  CU_ASSERT_EQUAL(taxi_reactor_schedule(r, &t1, &fired.h, 0, 0, NULL), 0);
  CU_ASSERT_EQUAL(taxi_reactor_schedule(r, &t2, &cancelled.h,
                                        60 * TAXI_NSEC_PER_SEC, 0, NULL),
                  0);
  CU_ASSERT_EQUAL(taxi_reactor_schedule(r, &t3, &left.h, 0, 0, NULL), 0);
  CU_ASSERT_EQUAL(taxi_reactor_cancel(r, &t2), 0);
  CU_ASSERT_EQUAL(run_until(r, conf_pred_nonzero, &fired.timeouts, WAIT_MS), 1);
  CU_ASSERT_EQUAL(run_until(r, conf_pred_nonzero, &left.timeouts, WAIT_MS), 1);

  CU_ASSERT_EQUAL(taxi_reactor_remove(r, &fired.h), 0);
  CU_ASSERT_EQUAL(atomic_load(&fired.closes), 1);
  CU_ASSERT_EQUAL(taxi_reactor_remove(r, &cancelled.h), 0);
  CU_ASSERT_EQUAL(atomic_load(&cancelled.closes), 1);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  CU_ASSERT_EQUAL(atomic_load(&left.closes), 1);
}

/* A timer due while the dispatcher is blocked wakes it (no handle is
 * registered at all). */
static void test_timer_wakes_blocked_wait(void) {
  taxi_reactor_t *r = conf_reactor();
  conf_probe_t p;
  conf_probe_init(&p, -1, NULL);
  taxi_timer_t t;
  CU_ASSERT_EQUAL(taxi_timer_init(&t), 0);
  taxi_time_t start = taxi_now();
  CU_ASSERT_EQUAL(taxi_reactor_schedule(r, &t, &p.h, 20 * MS, 0, NULL), 0);
  /* One call with a long limit must return once the timer ran. */
  CU_ASSERT_EQUAL(taxi_reactor_handle_events(r, 10000), 1);
  CU_ASSERT_EQUAL(atomic_load(&p.timeouts), 1);
  /* It did not fire early. */
  CU_ASSERT(taxi_now() - start >= 20 * MS);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
}

static CU_TestInfo timer_tests[] = {
    {"one-shot timers fire in deadline order", test_one_shot_deadline_order},
    {"equal deadlines fire in schedule order",
     test_equal_deadlines_fire_in_schedule_order},
    {"cancel before firing", test_cancel_before_firing},
    {"periodic timer fires repeatedly", test_periodic_fires_repeatedly},
    {"periodic cancelled from its own hook",
     test_periodic_cancel_from_own_hook},
    {"negative timeout return cancels that timer only",
     test_negative_timeout_cancels_timer_only},
    {"remove cancels the handler's timers", test_remove_cancels_timers},
    {"rescheduling moves a timer", test_reschedule_moves_timer},
    {"timer on a handler without a handle",
     test_timer_on_handler_without_handle},
    {"handler attached after its timers are done",
     test_handler_attached_after_timers_done},
    {"timer wakes a blocked wait", test_timer_wakes_blocked_wait},
    CU_TEST_INFO_NULL,
};

const taxi_test_suite_t conf_suite_timers = {"timers", timer_tests, 60, NULL};
