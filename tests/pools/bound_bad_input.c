/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/pools/bound_bad_input.c - the multiplexed connection given bad
 * input: NULLs, duplicate ids, calls that would wait for themselves, a
 * parse hook that refuses the bytes, the end of the stream, a reply longer
 * than its buffer, a destroy while threads wait.
 */
#define _GNU_SOURCE 1

#include "bound_fixture.h"
#include "../fault/fault.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int bd_noparse(void *arg, const void *data, size_t len,
                      taxi_lf_frame_t *f) {
  (void)arg;
  (void)data;
  (void)len;
  (void)f;
  return 0;
}

static void bd_nounknown(void *arg, uint64_t id, const void *body, size_t len) {
  (void)arg;
  (void)id;
  (void)body;
  (void)len;
}

/* NULLs and nonsense: TAXI_EINVAL, nothing registered. */
static void test_nulls(void) {
  bd_test_t *t = bd_new(1, 0, 1, 0);
  taxi_lf_expect_t e;
  char buf[8];
  CU_ASSERT_EQUAL(taxi_lf_expect_init(NULL, 1, buf, 8), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_expect_init(&e, 1, NULL, 8), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_expect_init(&e, 1, buf, (size_t)INT_MAX + 1),
                  TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_expect_init(&e, 1, NULL, 0), 0);
  CU_ASSERT_EQUAL(taxi_lf_mux_expect(NULL, &e), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_mux_expect(t->m, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_mux_await(NULL, &e, 0), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_mux_await(t->m, NULL, 0), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_mux_await(t->m, &e, 0), TAXI_ENOENT);
  CU_ASSERT_EQUAL(taxi_lf_mux_forget(NULL, &e), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_mux_forget(t->m, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_mux_forget(t->m, &e), TAXI_ENOENT);
  CU_ASSERT_EQUAL(taxi_lf_mux_send(NULL, "x", 1, 0), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_mux_send(t->m, NULL, 1, 0), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_mux_send(t->m, NULL, 0, 0), 0);
  CU_ASSERT_EQUAL(taxi_lf_mux_error(NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_mux_destroy(NULL), TAXI_EINVAL);
  taxi_lf_mux_options_init(NULL);

  /* Create: NULLs, missing hooks, a reactor that is not the pool's. */
  taxi_lf_mux_t *m = (taxi_lf_mux_t *)&e;
  taxi_lf_mux_options_t o = bd_options(t);
  int sv[2];
  pools_pair(sv);
  CU_ASSERT_EQUAL(taxi_lf_mux_create(NULL, t->p, t->r, sv[0], &o), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_mux_create(&m, NULL, t->r, sv[0], &o), TAXI_EINVAL);
  CU_ASSERT_PTR_NULL(m);
  CU_ASSERT_EQUAL(taxi_lf_mux_create(&m, t->p, NULL, sv[0], &o), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_mux_create(&m, t->p, t->r, sv[0], NULL), TAXI_EINVAL);
  taxi_lf_mux_options_t bad = o;
  bad.parse = NULL;
  CU_ASSERT_EQUAL(taxi_lf_mux_create(&m, t->p, t->r, sv[0], &bad), TAXI_EINVAL);
  bad = o;
  bad.unknown = NULL;
  CU_ASSERT_EQUAL(taxi_lf_mux_create(&m, t->p, t->r, sv[0], &bad), TAXI_EINVAL);
  bad = o;
  bad.size = 1;
  CU_ASSERT_EQUAL(taxi_lf_mux_create(&m, t->p, t->r, sv[0], &bad), TAXI_EINVAL);
  taxi_reactor_t *other = pools_reactor();
  CU_ASSERT_EQUAL(taxi_lf_mux_create(&m, t->p, other, sv[0], &o), TAXI_EINVAL);
  /* A pool that is gone. */
  taxi_lf_pool_t *gone = NULL;
  CU_ASSERT_EQUAL_FATAL(taxi_lf_create(&gone, other, NULL), 0);
  CU_ASSERT_EQUAL(taxi_lf_destroy(gone), 0);
  CU_ASSERT_EQUAL(taxi_lf_mux_create(&m, gone, other, sv[0], &o), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(other), 0);
  /* A handle the reactor has already. */
  CU_ASSERT_EQUAL(taxi_lf_mux_create(&m, t->p, t->r, t->sv[0], &o),
                  TAXI_EEXIST);
  CU_ASSERT_PTR_NULL(m);
  /* A good one, with hooks that never frame anything. */
  o.parse = bd_noparse;
  o.unknown = bd_nounknown;
  o.buckets = 3;
  CU_ASSERT_EQUAL(taxi_lf_mux_create(&m, t->p, t->r, sv[0], &o), 0);
  CU_ASSERT_EQUAL(taxi_lf_mux_destroy(m), 0); /* it closed sv[0] */
  close(sv[1]);
  bd_free(t);
}

/* One id at a time per connection; one registration at a time per record. */
static void test_duplicate_id(void) {
  bd_test_t *t = bd_new(1, 0, 1, 0);
  taxi_lf_expect_t a, b;
  taxi_lf_expect_init(&a, 5, NULL, 0);
  taxi_lf_expect_init(&b, 5, NULL, 0);
  CU_ASSERT_EQUAL(taxi_lf_mux_expect(t->m, &a), 0);
  CU_ASSERT_EQUAL(taxi_lf_mux_expect(t->m, &b), TAXI_EEXIST);
  CU_ASSERT_EQUAL(taxi_lf_mux_expect(t->m, &a), TAXI_EBUSY);
  /* b was never registered: it has nothing to give up or await. */
  CU_ASSERT_EQUAL(taxi_lf_mux_await(t->m, &b, 0), TAXI_ENOENT);
  CU_ASSERT_EQUAL(taxi_lf_mux_forget(t->m, &b), TAXI_ENOENT);
  CU_ASSERT_EQUAL(taxi_lf_mux_forget(t->m, &a), 0);
  CU_ASSERT_EQUAL(taxi_lf_mux_expect(t->m, &b), 0);
  CU_ASSERT_EQUAL(taxi_lf_mux_forget(t->m, &b), 0);
  bd_free(t);
}

/* From the connection's own hooks, await, send and destroy would wait
 * for the thread that runs them: TAXI_EBUSY, and the connection goes on. */
static void test_from_own_hooks(void) {
  bd_test_t *t = bd_new(1, 0, 1, 0);
  atomic_store(&t->in_parse.armed, 1);
  atomic_store(&t->in_unknown.armed, 1);
  CU_ASSERT_EQUAL(bd_write_frame(t->sv[1], 9, 0, "u", 1), 0);
  CU_ASSERT(bd_wait_unknown(t, 1));
  CU_ASSERT_EQUAL(atomic_load(&t->in_parse.await_rc), TAXI_EBUSY);
  CU_ASSERT_EQUAL(atomic_load(&t->in_parse.send_rc), TAXI_EBUSY);
  CU_ASSERT_EQUAL(atomic_load(&t->in_parse.destroy_rc), TAXI_EBUSY);
  CU_ASSERT_EQUAL(atomic_load(&t->in_unknown.await_rc), TAXI_EBUSY);
  CU_ASSERT_EQUAL(atomic_load(&t->in_unknown.send_rc), TAXI_EBUSY);
  CU_ASSERT_EQUAL(atomic_load(&t->in_unknown.destroy_rc), TAXI_EBUSY);
  /* Still usable. */
  taxi_lf_expect_t e;
  char buf[4];
  taxi_lf_expect_init(&e, 10, buf, sizeof buf);
  CU_ASSERT_EQUAL(taxi_lf_mux_expect(t->m, &e), 0);
  CU_ASSERT_EQUAL(bd_write_frame(t->sv[1], 10, 0, "ok", 2), 0);
  CU_ASSERT_EQUAL(taxi_lf_mux_await(t->m, &e, POOLS_WAIT_MS), 2);
  CU_ASSERT_EQUAL(taxi_lf_mux_error(t->m), 0);
  bd_free(t);
}

/* A thread outside the pool, with no pool thread at all: it awaits by
 * taking part in the pool itself, so its reply is read (by itself). */
static void test_await_without_pool_threads(void) {
  bd_test_t *t = bd_new(0, 0, 1, 0);
  taxi_lf_expect_t e;
  char buf[8];
  taxi_lf_expect_init(&e, 11, buf, sizeof buf);
  CU_ASSERT_EQUAL(taxi_lf_mux_expect(t->m, &e), 0);
  CU_ASSERT_EQUAL(bd_write_frame(t->sv[1], 11, 0, "self", 4), 0);
  CU_ASSERT_EQUAL(taxi_lf_mux_await(t->m, &e, POOLS_WAIT_MS), 4);
  CU_ASSERT_EQUAL(memcmp(buf, "self", 4), 0);
  taxi_lf_stats_t s;
  CU_ASSERT_EQUAL(taxi_lf_stats(t->p, &s), 0);
  CU_ASSERT_EQUAL(s.threads, 0); /* it has left again */
  CU_ASSERT(s.events >= 1);
  bd_free(t);
}

/* A reply longer than its buffer: TAXI_EMSGSIZE for its waiter, the
 * frame consumed whole, the next reply fine. */
static void test_reply_too_long(void) {
  bd_test_t *t = bd_new(1, 0, 1, 0);
  taxi_lf_expect_t e;
  char buf[4];
  taxi_lf_expect_init(&e, 12, buf, sizeof buf);
  CU_ASSERT_EQUAL(taxi_lf_mux_expect(t->m, &e), 0);
  CU_ASSERT_EQUAL(bd_write_frame(t->sv[1], 12, 0, "0123456789", 10), 0);
  CU_ASSERT_EQUAL(taxi_lf_mux_await(t->m, &e, POOLS_WAIT_MS), TAXI_EMSGSIZE);
  CU_ASSERT_EQUAL(e.length, 10);
  CU_ASSERT_EQUAL(memcmp(buf, "0123", 4), 0);
  CU_ASSERT_EQUAL(taxi_lf_mux_expect(t->m, &e), 0);
  CU_ASSERT_EQUAL(bd_write_frame(t->sv[1], 12, 0, "abc", 3), 0);
  CU_ASSERT_EQUAL(taxi_lf_mux_await(t->m, &e, POOLS_WAIT_MS), 3);
  CU_ASSERT_EQUAL(taxi_lf_mux_error(t->m), 0);
  CU_ASSERT_EQUAL(atomic_load(&t->unknown), 0);
  CU_ASSERT_STRING_EQUAL(taxi_error_name(TAXI_EMSGSIZE), "TAXI_EMSGSIZE");
  bd_free(t);
}

/* Threads awaiting ids 300.. on t's mux; each returns with its code. */
typedef struct bd_victims bd_victims_t;

typedef struct bd_victim {
  bd_victims_t *v;
  int i;
  int rc;
  atomic_int registered;
} bd_victim_t;

struct bd_victims {
  bd_test_t *t;
  util_thread_t th[3];
  bd_victim_t w[3];
};

static void bd_victim_main(void *arg) {
  bd_victim_t *w = arg;
  taxi_lf_expect_t e;
  char buf[8];
  taxi_lf_expect_init(&e, 300 + (uint64_t)w->i, buf, sizeof buf);
  w->rc = taxi_lf_mux_expect(w->v->t->m, &e);
  atomic_store(&w->registered, 1);
  if (w->rc == 0) w->rc = taxi_lf_mux_await(w->v->t->m, &e, -1);
}

static void bd_victims_start(bd_victims_t *v, bd_test_t *t) {
  memset(v, 0, sizeof *v);
  v->t = t;
  for (int i = 0; i < 3; i++) {
    v->w[i].v = v;
    v->w[i].i = i;
    CU_ASSERT_EQUAL_FATAL(
        util_thread_start(&v->th[i], bd_victim_main, &v->w[i]), 0);
  }
  for (int i = 0; i < 3; i++)
    CU_ASSERT(util_wait_flag(&v->w[i].registered, 1, POOLS_WAIT_MS));
}

static void bd_victims_check(bd_victims_t *v, int code) {
  for (int i = 0; i < 3; i++) {
    util_thread_join(&v->th[i], POOLS_WAIT_MS, "waiter on a closed mux");
    if (v->w[i].rc != code)
      printf("\n    waiter %d: %s, not %s\n", i, taxi_error_name(v->w[i].rc),
             taxi_error_name(code));
    CU_ASSERT_EQUAL(v->w[i].rc, code);
  }
}

/* The parse hook refuses the bytes: the connection closes, and every
 * waiter returns the hook's code; later calls say it too. */
static void test_parse_error_wakes_all(void) {
  bd_test_t *t = bd_new(2, 0, 1, 0);
  bd_victims_t v;
  bd_victims_start(&v, t);
  CU_ASSERT_EQUAL(bd_write_frame(t->sv[1], 1, BD_BAD, NULL, 0), 0);
  bd_victims_check(&v, TAXI_EPERM);
  CU_ASSERT_EQUAL(taxi_lf_mux_error(t->m), TAXI_EPERM);
  taxi_lf_expect_t e;
  taxi_lf_expect_init(&e, 1, NULL, 0);
  CU_ASSERT_EQUAL(taxi_lf_mux_expect(t->m, &e), TAXI_EPERM);
  CU_ASSERT_EQUAL(taxi_lf_mux_send(t->m, "x", 1, 0), TAXI_EPERM);
  /* Its handle was closed: the back end's end reads end of stream. */
  char c;
  for (int i = 0; i < 1000 && read(t->sv[1], &c, 1) != 0; i++) util_sleep_ms(5);
  CU_ASSERT_EQUAL(read(t->sv[1], &c, 1), 0);
  bd_free(t);
}

/* The peer closes: every waiter returns TAXI_EEOF. */
static void test_eof_wakes_all(void) {
  bd_test_t *t = bd_new(2, 0, 1, 0);
  bd_victims_t v;
  bd_victims_start(&v, t);
  close(t->sv[1]);
  t->sv[1] = -1;
  bd_victims_check(&v, TAXI_EEOF);
  CU_ASSERT_EQUAL(taxi_lf_mux_error(t->m), TAXI_EEOF);
  bd_free(t);
}

static int bd_four_threads(const taxi_lf_stats_t *s, void *arg) {
  (void)arg;
  return s->threads == 4;
}

/* Destroy while threads wait: they return TAXI_ECANCELED first. */
static void test_destroy_wakes_all(void) {
  bd_test_t *t = bd_new(1, 0, 1, 0);
  bd_victims_t v;
  bd_victims_start(&v, t);
  /* No call may start once destroy has: wait until all three await (a
   * thread from outside is in the pool only while it awaits). */
  CU_ASSERT(pools_lf_wait(t->p, bd_four_threads, NULL, POOLS_WAIT_MS, NULL));
  CU_ASSERT_EQUAL(taxi_lf_mux_destroy(t->m), 0);
  t->m = NULL;
  bd_victims_check(&v, TAXI_ECANCELED);
  bd_free(t);
}

/* A pool that stops ends the waits on it: TAXI_ESTOPPED. */
static void test_pool_stop_wakes_all(void) {
  bd_test_t *t = bd_new(2, 0, 1, 0);
  bd_victims_t v;
  bd_victims_start(&v, t);
  CU_ASSERT_EQUAL(taxi_lf_stop(t->p), 0);
  bd_victims_check(&v, TAXI_ESTOPPED);
  bd_free(t);
}

/* ---- sends that time out ------------------------------------------------- */

#define BD_HUGE (4 * 1024 * 1024) /* more than any socket buffer here */

typedef struct bd_hog {
  bd_test_t *t;
  int timeout_ms;
  atomic_int started;
  int rc;
} bd_hog_t;

/* Send one huge frame nobody reads yet: the write lock stays taken. */
static void bd_hog_main(void *arg) {
  bd_hog_t *h = arg;
  unsigned char *buf = calloc(1, BD_HUGE);
  if (!buf) {
    h->rc = TAXI_ENOMEM;
    atomic_store(&h->started, 1);
    return;
  }
  bd_header_t hd = {BD_HUGE, BD_NOREPLY, 1};
  memcpy(buf, &hd, BD_HEADER);
  atomic_store(&h->started, 1);
  h->rc = taxi_lf_mux_send(h->t->m, buf, BD_HUGE, h->timeout_ms);
  free(buf);
}

/* A sender that times out waiting for another's whole write leaves the
 * connection as it was; the other's write then completes. */
static void test_send_timeout_before_first_byte(void) {
  bd_test_t *t = bd_new(1, 0, 1, 0);
  bd_hog_t h = {t, 4 * POOLS_WAIT_MS, 0, 1};
  util_thread_t th;
  CU_ASSERT_EQUAL_FATAL(util_thread_start(&th, bd_hog_main, &h), 0);
  CU_ASSERT(util_wait_flag(&h.started, 1, POOLS_WAIT_MS));
  /* Until the hog holds the write lock, ours may go first: try until
   * ours has to wait for it. */
  int rc = 0;
  for (int i = 0; i < 1000 && rc == 0; i++) {
    rc = taxi_lf_mux_send(t->m, NULL, 0, 10);
    if (rc == 0) util_sleep_ms(1);
  }
  CU_ASSERT_EQUAL(rc, TAXI_ETIMEDOUT);
  CU_ASSERT_EQUAL(taxi_lf_mux_error(t->m), 0);
  /* Read everything: the hog's frame arrives whole. */
  long got = 0;
  taxi_time_t start = taxi_now();
  while (got < BD_HUGE && util_elapsed_ms(start) < 4 * POOLS_WAIT_MS) {
    long n = pools_drain(t->sv[1]);
    got += n;
    if (n == 0) util_sleep_ms(1);
  }
  CU_ASSERT_EQUAL(got, BD_HUGE);
  util_thread_join(&th, 4 * POOLS_WAIT_MS, "huge sender");
  CU_ASSERT_EQUAL(h.rc, 0);
  CU_ASSERT_EQUAL(taxi_lf_mux_error(t->m), 0);
  bd_free(t);
}

/* A send that times out in the middle of its data has cut the stream:
 * the connection closes with TAXI_ETIMEDOUT. */
static void test_send_timeout_midway(void) {
  bd_test_t *t = bd_new(1, 0, 1, 0);
  bd_hog_t h = {t, 50, 0, 1};
  util_thread_t th;
  CU_ASSERT_EQUAL_FATAL(util_thread_start(&th, bd_hog_main, &h), 0);
  util_thread_join(&th, 4 * POOLS_WAIT_MS, "huge sender");
  CU_ASSERT_EQUAL(h.rc, TAXI_ETIMEDOUT);
  CU_ASSERT_EQUAL(taxi_lf_mux_error(t->m), TAXI_ETIMEDOUT);
  CU_ASSERT_EQUAL(taxi_lf_mux_send(t->m, "x", 1, 0), TAXI_ETIMEDOUT);
  bd_free(t);
}

/* ---- from the pool's error callback -------------------------------------- */

static _Atomic(bd_test_t *) report_test;
static atomic_int report_rc;

/* A leader that tells of a failed wait keeps the leader's role meanwhile:
 * an await from there would follow a leader that is itself. */
static void bd_on_error(const taxi_error_report_t *r, void *arg) {
  (void)arg;
  /* Published after the mux was made: that is what orders the two. */
  bd_test_t *t = atomic_load(&report_test);
  if (!t || r->fatal || atomic_load(&report_rc) != 1) return;
  taxi_lf_expect_t e;
  taxi_lf_expect_init(&e, 0xabcull, NULL, 0);
  int rc = taxi_lf_mux_expect(t->m, &e);
  if (rc == 0) rc = taxi_lf_mux_await(t->m, &e, 1000);
  /* Refused, not given up: still registered. */
  if (taxi_lf_mux_forget(t->m, &e) != 0) rc = TAXI_ENOENT;
  atomic_store(&report_rc, rc);
}

static const char *bd_wait_call(void) {
  if (strcmp(pools_backend, "epoll") == 0) return "epoll_wait";
  if (strcmp(pools_backend, "poll") == 0) return "poll";
  if (strcmp(pools_backend, "select") == 0) return "select";
  return NULL;
}

static void test_from_error_callback(void) {
  const char *call = bd_wait_call();
  if (!fault_available() || !call) {
    printf(
        "\n    not run: needs the fault-injection module and epoll, poll "
        "or select ");
    return;
  }
  taxi_lf_options_t o = TAXI_LF_OPTIONS_INIT;
  o.on_error = bd_on_error;
  atomic_store(&report_rc, 1);
  bd_test_t *t = bd_new_with(1, 0, 1, 0, &o);
  atomic_store(&report_test, t);
  char spec[96];
  snprintf(spec, sizeof spec, "%s:1:ENOMEM:1:others", call);
  CU_ASSERT_EQUAL_FATAL(fault_arm(spec), 0);
  /* Wake the leader: its next wait is the one that fails. */
  CU_ASSERT_EQUAL(bd_write_frame(t->sv[1], 1, 0, "w", 1), 0);
  CU_ASSERT(bd_wait_unknown(t, 1));
  taxi_time_t start = taxi_now();
  while (atomic_load(&report_rc) == 1 && util_elapsed_ms(start) < POOLS_WAIT_MS)
    util_sleep_ms(1);
  CU_ASSERT_EQUAL(atomic_load(&report_rc), TAXI_EBUSY);
  fault_arm("");
  /* The pool goes on. */
  CU_ASSERT_EQUAL(bd_write_frame(t->sv[1], 2, 0, "w", 1), 0);
  CU_ASSERT(bd_wait_unknown(t, 2));
  bd_free(t);
  atomic_store(&report_test, NULL);
}

static CU_TestInfo bound_bad_input_tests[] = {
    {"NULLs and bad options: TAXI_EINVAL", test_nulls},
    {"a duplicate id: TAXI_EEXIST", test_duplicate_id},
    {"await, send, destroy from the connection's hooks: TAXI_EBUSY",
     test_from_own_hooks},
    {"await with no pool thread: the caller takes part",
     test_await_without_pool_threads},
    {"a reply longer than its buffer: TAXI_EMSGSIZE", test_reply_too_long},
    {"a parse error closes and wakes every waiter", test_parse_error_wakes_all},
    {"end of stream wakes every waiter", test_eof_wakes_all},
    {"destroy wakes every waiter", test_destroy_wakes_all},
    {"a pool stop wakes every waiter", test_pool_stop_wakes_all},
    {"a send timing out before its first byte changes nothing",
     test_send_timeout_before_first_byte},
    {"a send timing out midway closes the connection",
     test_send_timeout_midway},
    {"await from the pool's error callback: TAXI_EBUSY",
     test_from_error_callback},
    CU_TEST_INFO_NULL,
};
const taxi_test_suite_t pools_suite_bound_bad_input = {
    "bound bad input", bound_bad_input_tests, 120, NULL};
