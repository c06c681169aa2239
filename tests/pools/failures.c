/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/pools/failures.c - what the pools do when the OS fails them: a wait
 * refused once is retried and the pool goes on; a wait that fails for good
 * stops the whole pool, which says why through join, wait, shutdown and
 * the error callback; a re-arm refused once is retried and the handle still
 * hears its events, one refused for good removes its handler, which is
 * told; several leaders with little room for events never spin.
 *
 * The failures are injected with the fault-injection module
 * (tests/fault/): the system call each backend waits and re-arms with is
 * made to fail.  Where the module is not loaded, or a backend waits or
 * re-arms without a system call the module can fail (poll and select keep
 * their sets in memory; APR's pollset re-arms by removal and addition),
 * the test says so and checks nothing.
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../fault/fault.h"

#define FAIL_CONNS 4

/* ---- what the backends call ---------------------------------------------- */

/* The system call pools_backend waits with, or NULL if the module cannot
 * fail it. */
static const char *wait_call(void) {
  if (strcmp(pools_backend, "epoll") == 0 || strcmp(pools_backend, "apr") == 0)
    return "epoll_wait";
  if (strcmp(pools_backend, "poll") == 0 ||
      strcmp(pools_backend, "apr:poll") == 0)
    return "poll";
  if (strcmp(pools_backend, "select") == 0 ||
      strcmp(pools_backend, "apr:select") == 0)
    return "select";
  if (strcmp(pools_backend, "wsapoll") == 0)
    return "WSAPoll"; /* tests/fault/iat_win32.c */
  return NULL;
}

/* The call that re-arms a one-shot handle, or NULL. */
static const char *rearm_call(void) {
  return strcmp(pools_backend, "epoll") == 0 ? "epoll_ctl" : NULL;
}

/* Whether the test can run; if not, say why. */
static int can_inject(const char *call, const char *what) {
  if (!fault_available()) {
    printf("\n    not run: %s\n", fault_unavailable_reason());
    return 0;
  }
  if (!call) {
    printf(
        "\n    not applicable: %s on %s is not a system call the "
        "fault-injection module can fail\n",
        what, pools_backend);
    return 0;
  }
  return 1;
}

/* Fail the next call(s) the pool's threads make to `call` (count 0: all of
 * them); the test thread's own calls (it polls its peers) do not count. */
static void inject(const char *call, const char *err, int count) {
  char spec[96];
  snprintf(spec, sizeof spec, "%s:1:%s:%d:others", call, err, count);
  CU_ASSERT_EQUAL_FATAL(fault_arm(spec), 0);
}

/* ---- an echo connection ---------------------------------------------------
 */

typedef struct fail_conn {
  taxi_handler_t h;
  int sv[2];
  atomic_int inputs; /* hook runs begun */
  atomic_int echoed;
  atomic_int errors; /* error hook calls */
  atomic_int error_code;
  atomic_int closes;
} fail_conn_t;

static int conn_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  fail_conn_t *c = TAXI_CONTAINER_OF(h, fail_conn_t, h);
  (void)ev;
  atomic_fetch_add(&c->inputs, 1);
  char b;
  ssize_t n;
  while ((n = read(fd, &b, 1)) == 1) {
    /* Counted before the echo, which the test may see at once. */
    atomic_fetch_add(&c->echoed, 1);
    if (write(fd, &b, 1) != 1) return -1;
  }
  return n == 0 ? -1 : 0;
}

static void conn_error(taxi_handler_t *h, taxi_handle_t fd, int code) {
  fail_conn_t *c = TAXI_CONTAINER_OF(h, fail_conn_t, h);
  (void)fd;
  atomic_store(&c->error_code, code);
  atomic_fetch_add(&c->errors, 1);
}

static void conn_close(taxi_handler_t *h, taxi_handle_t fd) {
  fail_conn_t *c = TAXI_CONTAINER_OF(h, fail_conn_t, h);
  (void)fd;
  atomic_fetch_add(&c->closes, 1);
}

static const taxi_handler_ops_t conn_ops = {
    .input = conn_input, .close = conn_close, .error = conn_error};

/* What the error callbacks heard. */
typedef struct heard {
  atomic_int transient, fatal;
  atomic_int last_code;
  atomic_int rearm; /* reports from the re-arm step */
} heard_t;

static heard_t heard;

static void on_error(const taxi_error_report_t *r, void *arg) {
  (void)arg;
  atomic_store(&heard.last_code, r->code);
  if (strcmp(r->where, "rearm") == 0) atomic_fetch_add(&heard.rearm, 1);
  if (r->fatal)
    atomic_fetch_add(&heard.fatal, 1);
  else
    atomic_fetch_add(&heard.transient, 1);
}

typedef struct fail_test {
  taxi_reactor_t *r;
  fail_conn_t conn[FAIL_CONNS];
  int peers[FAIL_CONNS];
} fail_test_t;

static fail_test_t *fail_new(void) {
  memset(&heard, 0, sizeof heard);
  fail_test_t *t = calloc(1, sizeof *t);
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  taxi_reactor_options_t o = {.size = sizeof(taxi_reactor_options_t),
                              .backend = pools_backend,
                              .on_error = on_error};
  CU_ASSERT_EQUAL_FATAL(taxi_reactor_create(&t->r, &o), 0);
  for (int i = 0; i < FAIL_CONNS; i++) {
    fail_conn_t *c = &t->conn[i];
    pools_pair(c->sv);
    t->peers[i] = c->sv[1];
    taxi_handler_init(&c->h, &conn_ops);
    CU_ASSERT_EQUAL_FATAL(
        taxi_reactor_register(t->r, c->sv[0], &c->h, TAXI_EV_READ), 0);
  }
  return t;
}

static void fail_free(fail_test_t *t) {
  fault_arm("");
  CU_ASSERT_EQUAL(taxi_reactor_destroy(t->r), 0);
  for (int i = 0; i < FAIL_CONNS; i++) pools_close_pair(t->conn[i].sv);
  free(t);
}

/* Every connection echoes a byte: the pool serves. */
static int serves(fail_test_t *t) {
  return pools_ping_all(t->peers, FAIL_CONNS) == 0;
}

/* Wait until every hook begun has returned and its handle was re-armed:
 * the reactor counts a handle event once its hooks returned, in the same
 * critical section as the re-arm.  Without this, a re-arm of the last
 * round could meet a fault meant for the next one. */
static void quiesce(taxi_reactor_t *r, fail_conn_t *conn, int n) {
  taxi_time_t start = taxi_now();
  for (;;) {
    long begun = 0;
    for (int i = 0; i < n; i++) begun += atomic_load(&conn[i].inputs);
    taxi_reactor_stats_t s;
    CU_ASSERT_EQUAL_FATAL(taxi_reactor_stats(r, &s), 0);
    if ((long)s.events >= begun) return;
    if (util_elapsed_ms(start) > POOLS_WAIT_MS) {
      CU_FAIL("hooks did not return");
      return;
    }
    util_sleep_ms(1);
  }
}

/* ---- waits ----------------------------------------------------------------
 */

static taxi_lf_pool_t *lf_start(fail_test_t *t, unsigned threads) {
  taxi_lf_options_t o = {.size = sizeof(taxi_lf_options_t),
                         .on_error = on_error};
  taxi_lf_pool_t *p = NULL;
  CU_ASSERT_EQUAL_FATAL(taxi_lf_create(&p, t->r, &o), 0);
  CU_ASSERT_EQUAL_FATAL(taxi_lf_spawn(p, threads), 0);
  return p;
}

/* One refused wait: retried after a pause, counted, reported as
 * transient; the pool keeps all its threads and serves. */
static void test_lf_wait_transient(void) {
  const char *call = wait_call();
  if (!can_inject(call, "waiting")) return;
  fail_test_t *t = fail_new();
  taxi_lf_pool_t *p = lf_start(t, 3);
  CU_ASSERT(serves(t));
  quiesce(t->r, t->conn, FAIL_CONNS);
  inject(call, "ENOMEM", 1);
  /* The leader is in a wait counted before the rule; this wakes it, and
   * its next wait is the one that fails. */
  CU_ASSERT(serves(t));
  CU_ASSERT(serves(t));
  CU_ASSERT_EQUAL(fault_injected(call), 1);
  taxi_lf_stats_t s;
  CU_ASSERT_EQUAL(taxi_lf_stats(p, &s), 0);
  CU_ASSERT_EQUAL(s.transient_errors, 1);
  CU_ASSERT_EQUAL(s.error, 0);
  CU_ASSERT_EQUAL(s.threads, 3);
  CU_ASSERT_EQUAL(atomic_load(&heard.transient), 1);
  CU_ASSERT_EQUAL(atomic_load(&heard.fatal), 0);
  CU_ASSERT_EQUAL(atomic_load(&heard.last_code), TAXI_ENOMEM);
  CU_ASSERT_EQUAL(taxi_lf_wait(p, 0), TAXI_ETIMEDOUT); /* still running */
  CU_ASSERT_EQUAL(taxi_lf_stop(p), 0);
  CU_ASSERT_EQUAL(taxi_lf_wait(p, POOLS_WAIT_MS), TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(taxi_lf_destroy(p), 0);
  fail_free(t);
}

typedef struct joiner {
  taxi_lf_pool_t *p;
  atomic_int rc;
} joiner_t;

static void join_main(void *arg) {
  joiner_t *j = arg;
  atomic_store(&j->rc, taxi_lf_join(j->p, -1, 0));
}

/* Common to the persistent failures: the whole pool stops - spawned and
 * lent threads alike - and every call that reports on it says why. */
static void lf_check_failed(taxi_lf_pool_t *p, joiner_t *j, util_thread_t *th,
                            int code) {
  CU_ASSERT_EQUAL(taxi_lf_wait(p, POOLS_WAIT_MS), code);
  util_thread_join(th, POOLS_WAIT_MS, "a lent thread of a failed pool");
  CU_ASSERT_EQUAL(atomic_load(&j->rc), code);
  taxi_lf_stats_t s;
  CU_ASSERT_EQUAL(taxi_lf_stats(p, &s), 0);
  CU_ASSERT_EQUAL(s.threads, 0);
  CU_ASSERT_EQUAL(s.error, code);
  CU_ASSERT_EQUAL(atomic_load(&heard.fatal), 1);
  CU_ASSERT_EQUAL(atomic_load(&heard.last_code), code);
  CU_ASSERT_EQUAL(taxi_lf_stop(p), code);
  CU_ASSERT_EQUAL(taxi_lf_join(p, 0, 0), code);
  CU_ASSERT_EQUAL(taxi_lf_spawn(p, 1), TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(taxi_lf_destroy(p), 0);
}

/* A wait that fails with an error that does not pass stops the
 * pool at once (EINVAL: select takes EBADF for a closed descriptor to look
 * for). */
static void test_lf_wait_persistent(void) {
  const char *call = wait_call();
  if (!can_inject(call, "waiting")) return;
  fail_test_t *t = fail_new();
  taxi_lf_pool_t *p = lf_start(t, 2);
  joiner_t j = {p, 1};
  util_thread_t th;
  CU_ASSERT_EQUAL_FATAL(util_thread_start(&th, join_main, &j), 0);
  CU_ASSERT(serves(t));
  quiesce(t->r, t->conn, FAIL_CONNS);
  inject(call, "EINVAL", 0);
  (void)pools_ping_all(t->peers, 1); /* wakes the leader */
  lf_check_failed(p, &j, &th, TAXI_EINVAL);
  CU_ASSERT_EQUAL(atomic_load(&heard.transient), 0);
  fail_free(t);
}

/* Transient failures that never stop become persistent after the
 * back-off's limit: the pool stops with TAXI_ENOMEM, having reported each
 * retry; a dispatching thread paused all along, never spun. */
static void test_lf_wait_transient_forever(void) {
  const char *call = wait_call();
  if (!can_inject(call, "waiting")) return;
  fail_test_t *t = fail_new();
  taxi_lf_pool_t *p = lf_start(t, 2);
  joiner_t j = {p, 1};
  util_thread_t th;
  CU_ASSERT_EQUAL_FATAL(util_thread_start(&th, join_main, &j), 0);
  CU_ASSERT(serves(t));
  quiesce(t->r, t->conn, FAIL_CONNS);
  inject(call, "ENOMEM", 0);
  (void)pools_ping_all(t->peers, 1);
  lf_check_failed(p, &j, &th, TAXI_ENOMEM);
  /* One report per failed wait: the limit, then the fatal one. */
  CU_ASSERT(atomic_load(&heard.transient) >= 15);
  CU_ASSERT(atomic_load(&heard.transient) <= 17);
  CU_ASSERT(fault_injected(call) <= 20);
  fail_free(t);
}

static taxi_hsha_pool_t *hsha_start(fail_test_t *t) {
  taxi_hsha_options_t o = {
      .size = sizeof(taxi_hsha_options_t), .workers = 2, .on_error = on_error};
  taxi_hsha_pool_t *p = NULL;
  CU_ASSERT_EQUAL_FATAL(taxi_hsha_create(&p, t->r, &o), 0);
  return p;
}

static void test_hsha_wait_transient(void) {
  const char *call = wait_call();
  if (!can_inject(call, "waiting")) return;
  fail_test_t *t = fail_new();
  taxi_hsha_pool_t *p = hsha_start(t);
  CU_ASSERT(serves(t));
  quiesce(t->r, t->conn, FAIL_CONNS);
  inject(call, "ENOMEM", 1);
  CU_ASSERT(serves(t));
  CU_ASSERT(serves(t));
  CU_ASSERT_EQUAL(fault_injected(call), 1);
  taxi_hsha_stats_t s;
  CU_ASSERT_EQUAL(taxi_hsha_stats(p, &s), 0);
  CU_ASSERT_EQUAL(s.transient_errors, 1);
  CU_ASSERT_EQUAL(s.error, 0);
  CU_ASSERT_EQUAL(s.workers, 2);
  CU_ASSERT_EQUAL(atomic_load(&heard.transient), 1);
  CU_ASSERT_EQUAL(atomic_load(&heard.fatal), 0);
  CU_ASSERT_EQUAL(taxi_hsha_wait(p, 0), TAXI_ETIMEDOUT);
  CU_ASSERT_EQUAL(taxi_hsha_stop(p), 0);
  CU_ASSERT_EQUAL(taxi_hsha_wait(p, POOLS_WAIT_MS), TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(taxi_hsha_destroy(p), 0);
  fail_free(t);
}

/* The half-sync/half-async pool's reactor thread meets a failure for good:
 * every thread leaves and the failure comes back from wait and shutdown
 * (it used to be written down and never read). */
static void test_hsha_wait_persistent(void) {
  const char *call = wait_call();
  if (!can_inject(call, "waiting")) return;
  fail_test_t *t = fail_new();
  taxi_hsha_pool_t *p = hsha_start(t);
  CU_ASSERT(serves(t));
  quiesce(t->r, t->conn, FAIL_CONNS);
  inject(call, "EINVAL", 0);
  (void)pools_ping_all(t->peers, 1);
  CU_ASSERT_EQUAL(taxi_hsha_wait(p, POOLS_WAIT_MS), TAXI_EINVAL);
  taxi_hsha_stats_t s;
  CU_ASSERT_EQUAL(taxi_hsha_stats(p, &s), 0);
  CU_ASSERT_EQUAL(s.workers, 0);
  CU_ASSERT_EQUAL(s.error, TAXI_EINVAL);
  CU_ASSERT_EQUAL(atomic_load(&heard.fatal), 1);
  CU_ASSERT_EQUAL(taxi_hsha_stop(p), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_hsha_destroy(p), 0);
  fail_free(t);
}

/* ---- several leaders, little room ------------------------------------------
 */

/* With TAXI_LEADERS_MANY every idle thread leads, and each wait reserves
 * room in the reactor's shared ring of reported events.  Threads beyond
 * that room used to spin on a wait that returned at once, holding the lock
 * (no event was ever dispatched, and destroy hung).  They must follow. */
static void many_leaders_little_room(unsigned threads, unsigned max_events) {
  taxi_reactor_options_t ro = {.size = sizeof(taxi_reactor_options_t),
                               .backend = pools_backend,
                               .max_events = max_events};
  taxi_reactor_t *r;
  CU_ASSERT_EQUAL_FATAL(taxi_reactor_create(&r, &ro), 0);
  if (!pools_can_many_leaders(r)) {
    printf("\n    not applicable: %s cannot have several leaders\n",
           pools_backend);
    CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
    return;
  }
  memset(&heard, 0, sizeof heard);
  fail_conn_t conn[FAIL_CONNS];
  int peers[FAIL_CONNS];
  memset(conn, 0, sizeof conn);
  for (int i = 0; i < FAIL_CONNS; i++) {
    pools_pair(conn[i].sv);
    peers[i] = conn[i].sv[1];
    taxi_handler_init(&conn[i].h, &conn_ops);
    CU_ASSERT_EQUAL_FATAL(
        taxi_reactor_register(r, conn[i].sv[0], &conn[i].h, TAXI_EV_READ), 0);
  }
  taxi_lf_options_t o = {.size = sizeof(taxi_lf_options_t),
                         .leaders = TAXI_LEADERS_MANY};
  taxi_lf_pool_t *p;
  CU_ASSERT_EQUAL_FATAL(taxi_lf_create(&p, r, &o), 0);
  CU_ASSERT_EQUAL_FATAL(taxi_lf_spawn(p, threads), 0);
  for (int round = 0; round < 20; round++)
    CU_ASSERT_EQUAL(pools_ping_all(peers, FAIL_CONNS), 0);
  long echoed = 0;
  for (int i = 0; i < FAIL_CONNS; i++) echoed += atomic_load(&conn[i].echoed);
  CU_ASSERT_EQUAL(echoed, 20 * FAIL_CONNS);
  /* Idle now: a spinning thread would count waits by the million. */
  taxi_lf_stats_t before, after;
  CU_ASSERT_EQUAL(taxi_lf_stats(p, &before), 0);
  util_sleep_ms(200);
  CU_ASSERT_EQUAL(taxi_lf_stats(p, &after), 0);
  CU_ASSERT(after.waits - before.waits < 100);
  CU_ASSERT_EQUAL(after.threads, threads);
  CU_ASSERT_EQUAL(taxi_lf_destroy(p), 0);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  for (int i = 0; i < FAIL_CONNS; i++) pools_close_pair(conn[i].sv);
}

static void test_many_leaders_one_event(void) {
  many_leaders_little_room(5, 1);
}

static void test_many_leaders_more_threads(void) {
  many_leaders_little_room(9, 2);
  many_leaders_little_room(16, 1);
}

/* ---- re-arming -------------------------------------------------------------
 */

/* The re-arm after a hook refused once: retried, the handle still hears. */
static void rearm_transient(int hsha) {
  const char *call = rearm_call();
  if (!can_inject(call, "re-arming")) return;
  fail_test_t *t = fail_new();
  taxi_lf_pool_t *lf = hsha ? NULL : lf_start(t, 2);
  taxi_hsha_pool_t *hs = hsha ? hsha_start(t) : NULL;
  CU_ASSERT(serves(t));
  quiesce(t->r, t->conn, FAIL_CONNS);
  inject(call, "ENOMEM", 1);
  CU_ASSERT(serves(t)); /* some hook's re-arm fails here */
  for (int i = 0; i < 5; i++) CU_ASSERT(serves(t));
  CU_ASSERT_EQUAL(fault_injected(call), 1);
  taxi_reactor_stats_t rs;
  CU_ASSERT_EQUAL(taxi_reactor_stats(t->r, &rs), 0);
  CU_ASSERT(rs.transient_errors >= 1);
  CU_ASSERT_EQUAL(rs.rearm_removed, 0);
  for (int i = 0; i < FAIL_CONNS; i++) {
    CU_ASSERT_EQUAL(atomic_load(&t->conn[i].errors), 0);
    CU_ASSERT_EQUAL(atomic_load(&t->conn[i].closes), 0);
  }
  if (lf) CU_ASSERT_EQUAL(taxi_lf_destroy(lf), 0);
  if (hs) CU_ASSERT_EQUAL(taxi_hsha_destroy(hs), 0);
  fail_free(t);
}

static void test_lf_rearm_transient(void) { rearm_transient(0); }
static void test_hsha_rearm_transient(void) { rearm_transient(1); }

/* A re-arm that can never succeed: the handler is removed, its error hook
 * told the code before its close hook ran, the error callback named the
 * re-arm; the other connections are served on. */
static void rearm_persistent(int hsha, const char *err, int code) {
  const char *call = rearm_call();
  if (!can_inject(call, "re-arming")) return;
  fail_test_t *t = fail_new();
  taxi_lf_pool_t *lf = hsha ? NULL : lf_start(t, 2);
  taxi_hsha_pool_t *hs = hsha ? hsha_start(t) : NULL;
  CU_ASSERT(serves(t));
  quiesce(t->r, t->conn, FAIL_CONNS);
  inject(call, err, 0);
  /* Only connection 0 is dispatched while the re-arms fail. */
  CU_ASSERT_EQUAL(pools_ping_all(t->peers, 1), 0);
  CU_ASSERT(pools_wait_count(&t->conn[0].closes, 1, POOLS_WAIT_MS));
  fault_arm("");
  CU_ASSERT_EQUAL(atomic_load(&t->conn[0].errors), 1);
  CU_ASSERT_EQUAL(atomic_load(&t->conn[0].error_code), code);
  CU_ASSERT_EQUAL(atomic_load(&t->conn[0].closes), 1);
  CU_ASSERT(atomic_load(&heard.rearm) >= 1);
  CU_ASSERT_EQUAL(pools_ping_all(t->peers + 1, FAIL_CONNS - 1), 0);
  taxi_reactor_stats_t rs;
  CU_ASSERT_EQUAL(taxi_reactor_stats(t->r, &rs), 0);
  CU_ASSERT_EQUAL(rs.rearm_removed, 1);
  CU_ASSERT_EQUAL(rs.handles, FAIL_CONNS - 1);
  for (int i = 1; i < FAIL_CONNS; i++)
    CU_ASSERT_EQUAL(atomic_load(&t->conn[i].errors), 0);
  if (lf) CU_ASSERT_EQUAL(taxi_lf_destroy(lf), 0);
  if (hs) CU_ASSERT_EQUAL(taxi_hsha_destroy(hs), 0);
  fail_free(t);
}

static void test_lf_rearm_refused(void) {
  rearm_persistent(0, "EBADF", TAXI_EBADF);
}
static void test_hsha_rearm_refused(void) {
  rearm_persistent(1, "EBADF", TAXI_EBADF);
}
static void test_lf_rearm_transient_forever(void) {
  rearm_persistent(0, "ENOMEM", TAXI_ENOMEM);
}

static CU_TestInfo failures_tests[] = {
    {"L/F: a refused wait is retried", test_lf_wait_transient},
    {"L/F: a failed wait stops the whole pool", test_lf_wait_persistent},
    {"L/F: endless transient failures stop it after the limit",
     test_lf_wait_transient_forever},
    {"HS/HA: a refused wait is retried", test_hsha_wait_transient},
    {"HS/HA: a failed wait stops the pool and is returned",
     test_hsha_wait_persistent},
    {"many leaders, one event of room: no spin", test_many_leaders_one_event},
    {"many leaders, more threads than room: no spin",
     test_many_leaders_more_threads},
    {"L/F: a refused re-arm is retried", test_lf_rearm_transient},
    {"HS/HA: a refused re-arm is retried", test_hsha_rearm_transient},
    {"L/F: a re-arm refused for good removes the handler, told why",
     test_lf_rearm_refused},
    {"HS/HA: a re-arm refused for good removes the handler, told why",
     test_hsha_rearm_refused},
    {"L/F: endless transient re-arm failures remove the handler",
     test_lf_rearm_transient_forever},
    CU_TEST_INFO_NULL,
};

const taxi_test_suite_t pools_suite_failures = {"failures", failures_tests, 120,
                                                NULL};
