/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/fault/inproc_refusals.c - the Proactor when the kernel refuses its
 * submissions or its waits fail, with the fault-injection module:
 *   - uring: a wake-up reaches a thread blocked in the kernel while every
 *     io_uring_enter is refused (a wake-up must need no SQE);
 *   - uring: an operation whose submission another thread's wait cannot
 *     see, refused once, still completes;
 *   - uring: a refused submission in the dispatching thread is retried
 *     after a pause, counted and reported (not fatal); refused for good,
 *     run stops with the error and reports it as fatal; destroy waits
 *     refusals out rather than abandon what the kernel holds;
 *   - aio: a failing wait of the backend's internal reactor reaches the
 *     proactor at once, one report per failed call (not hidden behind
 *     pauses of its own).
 * Each case is skipped (passes, saying so) when its backend does not work
 * here.
 */
#define _GNU_SOURCE 1

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fault/fault.h"
#include "runner.h"
#include "taxi/taxi.h"
#include "util.h"

/* The bound of one hand-over (ms): a lost wake-up or submission fails the
 * test instead of hanging it. */
static int bound_ms(void) {
  const char *s = getenv("TAXI_TEST_TIMEOUT_SCALE");
  int scale = s && atoi(s) > 0 ? atoi(s) : 1;
  return 5000 * scale;
}

typedef struct reports {
  atomic_int transient, fatal;
} reports_t;

static void on_error(const taxi_error_report_t *r, void *arg) {
  reports_t *rep = arg;
  atomic_fetch_add(r->fatal ? &rep->fatal : &rep->transient, 1);
}

static taxi_proactor_t *make(const char *backend, reports_t *rep) {
  taxi_proactor_options_t o = TAXI_PROACTOR_OPTIONS_INIT;
  o.backend = backend;
  o.on_error = on_error;
  o.on_error_arg = rep;
  taxi_proactor_t *p = NULL;
  if (taxi_proactor_create(&p, &o) != 0) {
    printf("\n    backend %s does not work here: skipped ", backend);
    return NULL;
  }
  return p;
}

typedef struct runner {
  taxi_proactor_t *p;
  atomic_int done;
  int rc;
} runner_t;

static void run_main(void *arg) {
  runner_t *r = arg;
  r->rc = taxi_proactor_run(r->p);
  atomic_store(&r->done, 1);
}

/* Start taxi_proactor_run in a thread and give it time to block. */
static void start_runner(runner_t *r, util_thread_t *t, taxi_proactor_t *p) {
  r->p = p;
  atomic_init(&r->done, 0);
  r->rc = 1;
  CU_ASSERT_EQUAL_FATAL(util_thread_start(t, run_main, r), 0);
  util_sleep_ms(50);
}

/* Stop the runner; if it does not end, lift the faults and stop it again,
 * so that a failure is reported rather than hung.  1 if it ended before. */
static int stop_runner(runner_t *r, util_thread_t *t) {
  taxi_proactor_stop(r->p);
  int ok = util_wait_flag(&r->done, 1, bound_ms());
  if (!ok) {
    fault_arm("");
    taxi_proactor_stop(r->p);
  }
  util_thread_join(t, bound_ms(), "taxi_proactor_run");
  return ok;
}

typedef struct rd {
  atomic_int calls;
  int status;
  size_t bytes;
} rd_t;

static void on_read(taxi_op_t *op, int status, size_t bytes, void *act) {
  rd_t *d = act;
  (void)op;
  d->status = status;
  d->bytes = bytes;
  atomic_fetch_add(&d->calls, 1);
}

/* The peer's write goes to the kernel directly. */
static void peer_send(int fd, const char *s) {
  CU_ASSERT_EQUAL(syscall(SYS_sendto, fd, s, strlen(s), MSG_NOSIGNAL, NULL, 0),
                  (long)strlen(s));
}

static void test_uring_wake_while_refused(void) {
  reports_t rep = {0};
  taxi_proactor_t *p = make("uring", &rep);
  if (!p) return;
  runner_t r;
  util_thread_t t;
  start_runner(&r, &t, p);
  CU_ASSERT_EQUAL_FATAL(fault_arm("io_uring_enter:1:EAGAIN:0"), 0);
  int ok = stop_runner(&r, &t);
  fault_arm("");
  CU_ASSERT(ok);
  CU_ASSERT_EQUAL(r.rc, TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(taxi_proactor_destroy(p), 0);
}

static void test_uring_refused_beside_waiter(void) {
  reports_t rep = {0};
  taxi_proactor_t *p = make("uring", &rep);
  if (!p) return;
  int sv[2];
  CU_ASSERT_FATAL(util_socketpair(sv) == 0);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_attach(p, sv[0]), 0);
  runner_t r;
  util_thread_t t;
  start_runner(&r, &t, p);
  /* The next io_uring_enter is this thread's, handing the read to the
   * kernel beside the blocked waiter: refused once. */
  CU_ASSERT_EQUAL_FATAL(fault_arm("io_uring_enter:1:EAGAIN:1"), 0);
  char buf[8] = {0};
  taxi_op_t op;
  taxi_op_init(&op);
  rd_t d = {0};
  CU_ASSERT_EQUAL_FATAL(
      taxi_proactor_read(p, &op, sv[0], buf, 5, TAXI_READ_EXACT, on_read, &d),
      0);
  peer_send(sv[1], "hello");
  int done = util_wait_flag(&d.calls, 1, bound_ms());
  CU_ASSERT_EQUAL(fault_injected("io_uring_enter"), 1);
  CU_ASSERT(done);
  CU_ASSERT_EQUAL(d.status, 0);
  CU_ASSERT_EQUAL(memcmp(buf, "hello", 5), 0);
  CU_ASSERT(stop_runner(&r, &t));
  fault_arm("");
  CU_ASSERT_EQUAL(taxi_proactor_close(p, sv[0]), 0);
  close(sv[1]);
  CU_ASSERT_EQUAL(taxi_proactor_destroy(p), 0);
}

static void test_uring_refused_retried_reported(void) {
  reports_t rep = {0};
  taxi_proactor_t *p = make("uring", &rep);
  if (!p) return;
  int sv[2];
  CU_ASSERT_FATAL(util_socketpair(sv) == 0);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_attach(p, sv[0]), 0);
  char buf[8] = {0};
  taxi_op_t op;
  taxi_op_init(&op);
  rd_t d = {0};
  CU_ASSERT_EQUAL_FATAL(
      taxi_proactor_read(p, &op, sv[0], buf, 5, TAXI_READ_EXACT, on_read, &d),
      0);
  peer_send(sv[1], "hello");
  /* The wait that would submit the read is refused three times. */
  CU_ASSERT_EQUAL_FATAL(fault_arm("io_uring_enter:1:EAGAIN:3"), 0);
  taxi_time_t start = taxi_now();
  while (atomic_load(&d.calls) == 0 && util_elapsed_ms(start) < bound_ms())
    CU_ASSERT(taxi_proactor_handle_events(p, 100) >= 0);
  CU_ASSERT_EQUAL(fault_injected("io_uring_enter"), 3);
  fault_arm("");
  CU_ASSERT_EQUAL(atomic_load(&d.calls), 1);
  CU_ASSERT_EQUAL(d.status, 0);
  CU_ASSERT_EQUAL(memcmp(buf, "hello", 5), 0);
  taxi_proactor_stats_t st;
  CU_ASSERT_EQUAL(taxi_proactor_stats(p, &st), 0);
  CU_ASSERT(st.transient_errors >= 1);
  CU_ASSERT(atomic_load(&rep.transient) >= 1);
  CU_ASSERT_EQUAL(atomic_load(&rep.fatal), 0);
  CU_ASSERT_EQUAL(taxi_proactor_close(p, sv[0]), 0);
  close(sv[1]);
  CU_ASSERT_EQUAL(taxi_proactor_destroy(p), 0);
}

static void test_uring_refused_for_good(void) {
  reports_t rep = {0};
  taxi_proactor_t *p = make("uring", &rep);
  if (!p) return;
  CU_ASSERT_EQUAL_FATAL(fault_arm("io_uring_enter:1:ENOMEM:0"), 0);
  int rc = taxi_proactor_run(p);
  fault_arm("");
  CU_ASSERT_EQUAL(rc, TAXI_ENOMEM);
  CU_ASSERT_EQUAL(atomic_load(&rep.fatal), 1);
  CU_ASSERT(atomic_load(&rep.transient) >= 1);
  CU_ASSERT_EQUAL(taxi_proactor_destroy(p), 0);
}

/* destroy with a read in the kernel while the waits are refused a few
 * times: it waits them out (paused, reported, not fatal) and gets the
 * read's own cancellation, rather than abandoning a request the kernel
 * still holds. */
static void test_uring_destroy_waits_out_refusals(void) {
  reports_t rep = {0};
  taxi_proactor_t *p = make("uring", &rep);
  if (!p) return;
  int sv[2];
  CU_ASSERT_FATAL(util_socketpair(sv) == 0);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_attach(p, sv[0]), 0);
  char buf[8];
  taxi_op_t op;
  taxi_op_init(&op);
  rd_t d = {0};
  CU_ASSERT_EQUAL_FATAL(
      taxi_proactor_read(p, &op, sv[0], buf, sizeof buf, 0, on_read, &d), 0);
  taxi_proactor_handle_events(p, 10); /* the read is in the kernel */
  CU_ASSERT_EQUAL(atomic_load(&d.calls), 0);
  CU_ASSERT_EQUAL_FATAL(fault_arm("io_uring_enter:1:EAGAIN:3"), 0);
  CU_ASSERT_EQUAL(taxi_proactor_destroy(p), 0);
  CU_ASSERT_EQUAL(fault_injected("io_uring_enter"), 3);
  fault_arm("");
  CU_ASSERT_EQUAL(atomic_load(&d.calls), 1);
  CU_ASSERT_EQUAL(d.status, TAXI_ECANCELED);
  CU_ASSERT(atomic_load(&rep.transient) >= 1);
  CU_ASSERT_EQUAL(atomic_load(&rep.fatal), 0);
  close(sv[1]);
}

static void test_aio_reactor_wait_failure(void) {
  reports_t rep = {0};
  /* epoll named: the failures are injected into epoll_wait, and whatever
   * TAXI_BACKEND says, the internal reactor must be the one that calls it
   * (libkqueue calls epoll_wait too, from threads of its own). */
  taxi_proactor_t *p = make("aio:epoll", &rep);
  if (!p) return;
  CU_ASSERT_EQUAL_FATAL(fault_arm("epoll_wait:1:ENOMEM:0"), 0);
  taxi_time_t start = taxi_now();
  while (atomic_load(&rep.transient) < 3 && util_elapsed_ms(start) < 3000)
    taxi_proactor_handle_events(p, 50);
  unsigned long injected = fault_injected("epoll_wait");
  fault_arm("");
  int reports = atomic_load(&rep.transient) + atomic_load(&rep.fatal);
  /* Each failed call of the internal reactor is one failed wait of the
   * proactor: backed off, counted and reported once, by the proactor. */
  CU_ASSERT(reports >= 3);
  CU_ASSERT(injected <= (unsigned long)reports + 1);
  taxi_proactor_stats_t st;
  CU_ASSERT_EQUAL(taxi_proactor_stats(p, &st), 0);
  CU_ASSERT(st.transient_errors >= 3);
  CU_ASSERT_EQUAL(taxi_proactor_destroy(p), 0);
}

/* An aio proactor whose socket is readable ("hello" waits in it) and a
 * 5-byte read started on it while every aio_read is refused (EAGAIN);
 * NULL if the backend does not work here. */
static taxi_proactor_t *aio_refused_read(reports_t *rep, int sv[2], char *buf,
                                         taxi_op_t *op, rd_t *d) {
  taxi_proactor_t *p = make("aio", rep);
  if (!p) return NULL;
  CU_ASSERT_FATAL(util_socketpair(sv) == 0);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_attach(p, sv[0]), 0);
  peer_send(sv[1], "hello");
  taxi_op_init(op);
  CU_ASSERT_EQUAL_FATAL(fault_arm("aio_read:1:EAGAIN:0"), 0);
  CU_ASSERT_EQUAL_FATAL(
      taxi_proactor_read(p, op, sv[0], buf, 5, TAXI_READ_EXACT, on_read, d), 0);
  return p;
}

/* A socket read whose aio_read the system refuses (EAGAIN: no room for
 * the request) while the socket is readable: retrying at once, or on the
 * readiness that is already there, would spin.  The read waits instead,
 * the pauses between rounds doubling from 1 ms, so in 300 ms it is tried
 * some ten times at most (spinning: thousands); once aio_read works again
 * it completes with its bytes, and the refusals were reported. */
static void test_aio_refused_request_backs_off(void) {
  reports_t rep = {0};
  int sv[2];
  char buf[8] = {0};
  taxi_op_t op;
  rd_t d = {0};
  taxi_proactor_t *p = aio_refused_read(&rep, sv, buf, &op, &d);
  if (!p) return;
  taxi_time_t start = taxi_now();
  while (util_elapsed_ms(start) < 300) taxi_proactor_handle_events(p, 20);
  unsigned long refused = fault_injected("aio_read");
  fault_arm("");
  printf("\n    aio_read refused %lu times in 300 ms ", refused);
  CU_ASSERT(refused >= 1);
  /* Doubling pauses from 1 ms fit nine rounds in 300 ms; the doorbell's
   * own aio_read may add one or two. */
  CU_ASSERT(refused <= 12);
  CU_ASSERT_EQUAL(atomic_load(&d.calls), 0);
  start = taxi_now();
  while (atomic_load(&d.calls) == 0 && util_elapsed_ms(start) < bound_ms())
    taxi_proactor_handle_events(p, 50);
  CU_ASSERT_EQUAL(atomic_load(&d.calls), 1);
  CU_ASSERT_EQUAL(d.status, 0);
  CU_ASSERT_EQUAL(memcmp(buf, "hello", 5), 0);
  CU_ASSERT(atomic_load(&rep.transient) >= 1);
  CU_ASSERT_EQUAL(atomic_load(&rep.fatal), 0);
  CU_ASSERT_EQUAL(taxi_proactor_close(p, sv[0]), 0);
  close(sv[1]);
  CU_ASSERT_EQUAL(taxi_proactor_destroy(p), 0);
}

/* Refused for good: after the bounded series of pauses (about 2 s) the
 * read completes with the refusal, TAXI_EAGAIN, instead of waiting
 * forever; a read cancelled while it waits for the next round completes
 * with TAXI_ECANCELED, once. */
static void test_aio_refused_for_good(void) {
  reports_t rep = {0};
  int sv[2];
  char buf[8] = {0};
  taxi_op_t op;
  rd_t d = {0};
  taxi_proactor_t *p = aio_refused_read(&rep, sv, buf, &op, &d);
  if (!p) return;
  taxi_time_t start = taxi_now();
  while (atomic_load(&d.calls) == 0 && util_elapsed_ms(start) < bound_ms())
    taxi_proactor_handle_events(p, 50);
  unsigned long refused = fault_injected("aio_read");
  CU_ASSERT_EQUAL(atomic_load(&d.calls), 1);
  CU_ASSERT_EQUAL(d.status, TAXI_EAGAIN);
  CU_ASSERT(refused <= 24);
  CU_ASSERT(atomic_load(&rep.transient) >= 1);
  /* Another read, cancelled during its pause. */
  rd_t c = {0};
  CU_ASSERT_EQUAL_FATAL(
      taxi_proactor_read(p, &op, sv[0], buf, 5, TAXI_READ_EXACT, on_read, &c),
      0);
  taxi_proactor_handle_events(p, 0);
  CU_ASSERT_EQUAL(taxi_proactor_cancel(p, &op), 0);
  start = taxi_now();
  while (atomic_load(&c.calls) == 0 && util_elapsed_ms(start) < bound_ms())
    taxi_proactor_handle_events(p, 50);
  fault_arm("");
  taxi_proactor_handle_events(p, 50);
  CU_ASSERT_EQUAL(atomic_load(&c.calls), 1);
  CU_ASSERT_EQUAL(c.status, TAXI_ECANCELED);
  CU_ASSERT_EQUAL(taxi_proactor_close(p, sv[0]), 0);
  close(sv[1]);
  CU_ASSERT_EQUAL(taxi_proactor_destroy(p), 0);
}

static CU_TestInfo refusal_tests[] = {
    {"uring: a wake-up reaches the waiter while every submission is refused",
     test_uring_wake_while_refused},
    {"uring: a submission refused beside a blocked waiter is retried",
     test_uring_refused_beside_waiter},
    {"uring: a refused submission is retried after a pause, reported",
     test_uring_refused_retried_reported},
    {"uring: submissions refused for good stop run, reported as fatal",
     test_uring_refused_for_good},
    {"uring: destroy waits out refused waits, reporting them",
     test_uring_destroy_waits_out_refusals},
    {"aio: a failed wait of the internal reactor reaches the proactor",
     test_aio_reactor_wait_failure},
    {"aio: a refused aio_read waits growing pauses, then completes",
     test_aio_refused_request_backs_off},
    {"aio: aio_read refused for good: TAXI_EAGAIN; cancelled in a pause",
     test_aio_refused_for_good},
    CU_TEST_INFO_NULL,
};

const taxi_test_suite_t pr_suite_refusals = {
    "refused submissions and failed waits", refusal_tests, 300, NULL};
