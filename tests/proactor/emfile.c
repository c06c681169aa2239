/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/proactor/emfile.c - a multishot accept under pressure: out of
 * descriptors, and with a handler slower than the connections come.
 *
 * What must hold (taxi/proactor.h, TAXI_ACCEPT_MULTISHOT): when accepting
 * fails for lack of descriptors the multishot accept does not end (its
 * handler is never called with an error) and does not spin (the requests
 * it makes stay bounded by the connections and the pauses); each pause is
 * counted and reported through the error callback (where "accept", not
 * fatal); once descriptors are freed it accepts the connections left in
 * the listen backlog by itself.  A single accept completes with
 * TAXI_ETOOMANY.  The descriptor limit of the process is lowered for the
 * test (setrlimit), so that it holds on every backend, io_uring's
 * in-kernel accept included.
 *
 * A slow handler: connections accepted ahead of it wait, up to a bound;
 * past it the accepting stops (connections stay in the listen backlog)
 * and resumes by itself once the handler has caught up, every connection
 * delivered once.
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <stdio.h>
#include <string.h>

#if !defined(_WIN32)
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#define EM_CLIENTS 8
#define EM_ROOM 2 /* connections accepted before the limit is reached */

typedef struct em_run {
  taxi_proactor_t *p;
  atomic_int accepted, errors, ended;
  int fds[EM_CLIENTS];
  atomic_int reports, report_fatal, report_code, report_where_ok;
} em_run_t;

static void em_on_error(const taxi_error_report_t *r, void *arg) {
  em_run_t *run = arg;
  if (r->fatal) atomic_fetch_add(&run->report_fatal, 1);
  atomic_store(&run->report_code, r->code);
  if (r->where && strcmp(r->where, "accept") == 0)
    atomic_fetch_add(&run->report_where_ok, 1);
  atomic_fetch_add(&run->reports, 1);
}

static void em_on_accept(taxi_op_t *op, int status, size_t bytes, void *act) {
  em_run_t *run = act;
  (void)bytes;
  if (status != 0) {
    atomic_fetch_add(&run->errors, 1);
    if (!op->more) atomic_fetch_add(&run->ended, 1);
    return;
  }
  int n = atomic_load(&run->accepted);
  if (n < EM_CLIENTS) run->fds[n] = op->accepted;
  atomic_fetch_add(&run->accepted, 1);
  if (!op->more) atomic_fetch_add(&run->ended, 1);
}

/* Lower the descriptor limit of the process so that exactly `room` more
 * descriptors can be made: the free numbers below the highest one open are
 * taken by fillers (copies of `anchor`, a descriptor known to be open),
 * and the limit goes `room` above that highest one.  Holes or none below
 * it, stdin open or not, the room is the same.  em_limit_restore() gives
 * everything back. */
static int em_fill[4096];
static int em_nfill;
static struct rlimit em_saved;

static void em_limit(int anchor, int room) {
  int top = 0;
  for (int fd = 0; fd < 4096; fd++)
    if (fcntl(fd, F_GETFD) >= 0) top = fd + 1;
  CU_ASSERT_EQUAL_FATAL(getrlimit(RLIMIT_NOFILE, &em_saved), 0);
  struct rlimit low = em_saved;
  low.rlim_cur = (rlim_t)top;
  CU_ASSERT_EQUAL_FATAL(setrlimit(RLIMIT_NOFILE, &low), 0);
  em_nfill = 0;
  int fd;
  while (em_nfill < 4096 && (fd = fcntl(anchor, F_DUPFD_CLOEXEC, 0)) >= 0)
    em_fill[em_nfill++] = fd;
  low.rlim_cur = (rlim_t)(top + room);
  CU_ASSERT_EQUAL_FATAL(setrlimit(RLIMIT_NOFILE, &low), 0);
}

static void em_limit_restore(void) {
  while (em_nfill > 0) close(em_fill[--em_nfill]);
  CU_ASSERT_EQUAL(setrlimit(RLIMIT_NOFILE, &em_saved), 0);
}

static void test_multishot_pauses_and_resumes(void) {
  static em_run_t run;
  memset(&run, 0, sizeof run);
  taxi_proactor_options_t o = TAXI_PROACTOR_OPTIONS_INIT;
  o.backend = pt_backend;
  o.on_error = em_on_error;
  o.on_error_arg = &run;
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_create(&run.p, &o), 0);
  int port = 0;
  int lfd = util_tcp_listener(&port);
  CU_ASSERT_FATAL(lfd >= 0);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_attach(run.p, lfd), 0);
  /* The clients' sockets exist before the limit comes down. */
  int cfd[EM_CLIENTS];
  for (int i = 0; i < EM_CLIENTS; i++) {
    cfd[i] = util_tcp_connect_nb(port);
    CU_ASSERT_FATAL(cfd[i] >= 0);
  }
  taxi_op_t op;
  taxi_op_init(&op);
  CU_ASSERT_EQUAL_FATAL(
      taxi_proactor_accept(run.p, &op, lfd, TAXI_ACCEPT_MULTISHOT, em_on_accept,
                           &run),
      0);
  taxi_proactor_stats_t before;
  CU_ASSERT_EQUAL(taxi_proactor_stats(run.p, &before), 0);

  em_limit(lfd, EM_ROOM);

  /* Out of descriptors after EM_ROOM connections: paused, reported. */
  taxi_time_t start = taxi_now();
  while (atomic_load(&run.reports) == 0 &&
         util_elapsed_ms(start) < pt_wait_ms())
    taxi_proactor_handle_events(run.p, 20);
  pt_settle(run.p, 100);
  int first = atomic_load(&run.accepted);
  /* EM_ROOM, give or take a descriptor a backend freed meanwhile. */
  CU_ASSERT(first < EM_CLIENTS);
  CU_ASSERT(atomic_load(&run.reports) >= 1);
  CU_ASSERT_EQUAL(atomic_load(&run.report_code), TAXI_ETOOMANY);
  CU_ASSERT_EQUAL(atomic_load(&run.report_where_ok), atomic_load(&run.reports));
  CU_ASSERT_EQUAL(atomic_load(&run.report_fatal), 0);
  /* Not ended, no error delivered. */
  CU_ASSERT_EQUAL(atomic_load(&run.errors), 0);
  CU_ASSERT_EQUAL(atomic_load(&run.ended), 0);
  CU_ASSERT(taxi_op_in_flight(&op));

  /* Free descriptors as connections come: every one is accepted. */
  int closed = 0;
  start = taxi_now();
  while (atomic_load(&run.accepted) < EM_CLIENTS &&
         util_elapsed_ms(start) < pt_wait_ms()) {
    int n = atomic_load(&run.accepted);
    for (; closed < n; closed++)
      CU_ASSERT_EQUAL(taxi_proactor_close(run.p, run.fds[closed]), 0);
    taxi_proactor_handle_events(run.p, 20);
  }
  em_limit_restore();
  CU_ASSERT_EQUAL(atomic_load(&run.accepted), EM_CLIENTS);
  CU_ASSERT_EQUAL(atomic_load(&run.errors), 0);
  CU_ASSERT_EQUAL(atomic_load(&run.ended), 0);

  /* Counted, and bounded: one request per connection and per pause, and
   * a few more (a kernel multishot request ends on the failure). */
  taxi_proactor_stats_t after;
  CU_ASSERT_EQUAL(taxi_proactor_stats(run.p, &after), 0);
  uint64_t pauses = after.accept_pauses - before.accept_pauses;
  uint64_t subs = after.submissions - before.submissions;
  CU_ASSERT(pauses >= 1);
  CU_ASSERT(subs <= EM_CLIENTS + 2 * pauses + 4);
  if (subs > EM_CLIENTS + 2 * pauses + 4)
    printf("\n    %llu submissions for %d connections and %llu pauses\n",
           (unsigned long long)subs, EM_CLIENTS, (unsigned long long)pauses);

  int closed_all = closed;
  for (; closed_all < EM_CLIENTS; closed_all++)
    taxi_proactor_close(run.p, run.fds[closed_all]);
  CU_ASSERT_EQUAL(taxi_proactor_cancel(run.p, &op), 0);
  CU_ASSERT(pt_run_count(run.p, &run.ended, 1));
  for (int i = 0; i < EM_CLIENTS; i++) close(cfd[i]);
  CU_ASSERT_EQUAL(taxi_proactor_close(run.p, lfd), 0);
  pt_destroy(run.p);
}

/* Closing the listener of a pausing multishot accept ends it at once,
 * with TAXI_ECANCELED, once. */
static void test_close_while_paused(void) {
  static em_run_t run;
  memset(&run, 0, sizeof run);
  taxi_proactor_options_t o = TAXI_PROACTOR_OPTIONS_INIT;
  o.backend = pt_backend;
  o.on_error = em_on_error;
  o.on_error_arg = &run;
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_create(&run.p, &o), 0);
  int port = 0;
  int lfd = util_tcp_listener(&port);
  CU_ASSERT_FATAL(lfd >= 0);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_attach(run.p, lfd), 0);
  int c = util_tcp_connect_nb(port);
  CU_ASSERT_FATAL(c >= 0);
  taxi_op_t op;
  taxi_op_init(&op);
  pt_done_t d;
  pt_done_init(&d);
  em_limit(lfd, 0);
  CU_ASSERT_EQUAL_FATAL(
      taxi_proactor_accept(run.p, &op, lfd, TAXI_ACCEPT_MULTISHOT, pt_on_done,
                           &d),
      0);
  taxi_time_t start = taxi_now();
  while (atomic_load(&run.reports) == 0 &&
         util_elapsed_ms(start) < pt_wait_ms())
    taxi_proactor_handle_events(run.p, 20);
  CU_ASSERT(atomic_load(&run.reports) >= 1);
  /* Nothing can be accepted while there is no room, and there is none
   * unless a descriptor is freed meanwhile (over libkqueue one is, after
   * the first failed accept): each connection that lets in is a delivery
   * (more set), never the end.  The end comes with the close, once. */
  int before = atomic_load(&d.calls);
  if (before > 0) {
    printf("(a descriptor freed meanwhile let %d in) ", before);
    CU_ASSERT_EQUAL(d.status, 0);
    CU_ASSERT_EQUAL(d.more, 1);
  }
  CU_ASSERT_EQUAL(taxi_proactor_close(run.p, lfd), 0);
  CU_ASSERT(pt_run_done(run.p, &d, before + 1));
  em_limit_restore();
  pt_settle(run.p, 20);
  CU_ASSERT_EQUAL(atomic_load(&d.calls), before + 1);
  CU_ASSERT_EQUAL(d.status, TAXI_ECANCELED);
  CU_ASSERT_EQUAL(d.more, 0);
  CU_ASSERT_EQUAL(taxi_op_in_flight(&op), 0);
  close(c);
  pt_destroy(run.p);
}

/* Connections waiting in the listen backlog of lfd (Linux: the accept
 * queue's length, from TCP_INFO), or -1 where that cannot be told. */
static int em_listen_queue(int lfd) {
#if defined(__linux__)
  struct tcp_info ti;
  socklen_t len = sizeof ti;
  if (getsockopt(lfd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0)
    return (int)ti.tcpi_unacked;
#else
  (void)lfd;
#endif
  return -1;
}

#define EM_BURST 100 /* more than the proactor keeps waiting for a handler */
#define EM_LATE 20   /* connected while the handler is behind */

static void test_slow_handler_throttles(void) {
  static em_run_t run;
  static int cfd[EM_BURST + EM_LATE];
  memset(&run, 0, sizeof run);
  run.p = pt_proactor();
  int port = 0;
  int lfd = util_tcp_listener(&port);
  CU_ASSERT_FATAL(lfd >= 0);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_attach(run.p, lfd), 0);
  taxi_op_t op;
  taxi_op_init(&op);
  CU_ASSERT_EQUAL_FATAL(
      taxi_proactor_accept(run.p, &op, lfd, TAXI_ACCEPT_MULTISHOT, em_on_accept,
                           &run),
      0);
  pt_settle(run.p, 10); /* the accept is armed */
  for (int i = 0; i < EM_BURST; i++) {
    cfd[i] = util_tcp_connect_nb(port);
    CU_ASSERT_FATAL(cfd[i] >= 0);
  }
  pt_sleep_ms(50);
  /* One dispatch call: the connections come in, one handler runs. */
  taxi_proactor_handle_events(run.p, 50);
  for (int i = EM_BURST; i < EM_BURST + EM_LATE; i++) {
    cfd[i] = util_tcp_connect_nb(port);
    CU_ASSERT_FATAL(cfd[i] >= 0);
  }
  pt_sleep_ms(50);
  taxi_proactor_stats_t st;
  CU_ASSERT_EQUAL(taxi_proactor_stats(run.p, &st), 0);
  int queued = em_listen_queue(lfd);
  if (pt_backend_is("uring")) {
    /* The kernel accepted the burst; the handler fell behind, so it
     * stopped: the late ones wait in the listen backlog. */
    CU_ASSERT(st.accept_throttles >= 1);
    if (queued >= 0) CU_ASSERT(queued >= EM_LATE);
  }
  /* Then every connection is delivered, once, and the queue empties. */
  taxi_time_t start = taxi_now();
  while (atomic_load(&run.accepted) < EM_BURST + EM_LATE &&
         util_elapsed_ms(start) < pt_wait_ms()) {
    taxi_proactor_handle_events(run.p, 20);
  }
  pt_settle(run.p, 50);
  CU_ASSERT_EQUAL(atomic_load(&run.accepted), EM_BURST + EM_LATE);
  CU_ASSERT_EQUAL(atomic_load(&run.errors), 0);
  CU_ASSERT_EQUAL(atomic_load(&run.ended), 0);
  CU_ASSERT(taxi_op_in_flight(&op));
  queued = em_listen_queue(lfd);
  if (queued >= 0) CU_ASSERT_EQUAL(queued, 0);
  CU_ASSERT_EQUAL(taxi_proactor_cancel(run.p, &op), 0);
  CU_ASSERT(pt_run_count(run.p, &run.ended, 1));
  for (int i = 0; i < EM_BURST + EM_LATE; i++) close(cfd[i]);
  CU_ASSERT_EQUAL(taxi_proactor_close(run.p, lfd), 0);
  pt_destroy(run.p); /* closes the accepted connections */
}

/* Until the non-blocking connect of c is over (bounded): then its
 * connection waits in the listen queue, and an accept tries it at once. */
static void em_connected(int c) {
  struct pollfd pfd = {.fd = c, .events = POLLOUT};
  (void)poll(&pfd, 1, 5000);
}

/* A single accept out of descriptors completes with TAXI_ETOOMANY.  Over
 * libkqueue a descriptor of the backend's may be freed meanwhile and let
 * one connection in: that one is kept (it fills the room), and the accept
 * tried again on the next connection, a bounded number of times. */
static void test_single_accept_completes(void) {
  static em_run_t run;
  enum { TRIES = 3 };
  memset(&run, 0, sizeof run);
  run.p = pt_proactor();
  int port = 0;
  int lfd = util_tcp_listener(&port);
  CU_ASSERT_FATAL(lfd >= 0);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_attach(run.p, lfd), 0);
  int c[TRIES];
  for (int i = 0; i < TRIES; i++) {
    c[i] = util_tcp_connect_nb(port);
    CU_ASSERT_FATAL(c[i] >= 0);
    em_connected(c[i]);
  }
  int kept[TRIES], nkept = 0, status = 0;
  em_limit(lfd, 0);
  for (int i = 0; i < TRIES; i++) {
    taxi_op_t op;
    taxi_op_init(&op);
    pt_done_t d;
    pt_done_init(&d);
    CU_ASSERT_EQUAL(taxi_proactor_accept(run.p, &op, lfd, 0, pt_on_done, &d),
                    0);
    CU_ASSERT(pt_run_done(run.p, &d, 1));
    status = d.status;
    if (status != 0) break;
    kept[nkept++] = d.accepted; /* a freed descriptor let it in */
  }
  em_limit_restore();
  if (nkept > 0) printf("(a descriptor freed meanwhile let %d in) ", nkept);
  CU_ASSERT_EQUAL(status, TAXI_ETOOMANY);
  for (int i = 0; i < nkept; i++) taxi_proactor_close(run.p, kept[i]);
  for (int i = 0; i < TRIES; i++) close(c[i]);
  CU_ASSERT_EQUAL(taxi_proactor_close(run.p, lfd), 0);
  pt_destroy(run.p);
}
#endif

static CU_TestInfo emfile_tests[] = {
    {"a multishot accept out of descriptors pauses, reports, resumes",
     TAXI_TEST_POSIX_ONLY(test_multishot_pauses_and_resumes)},
    {"a single accept out of descriptors completes with TAXI_ETOOMANY",
     TAXI_TEST_POSIX_ONLY(test_single_accept_completes)},
    {"closing the listener of a pausing accept ends it, once",
     TAXI_TEST_POSIX_ONLY(test_close_while_paused)},
    {"a slow handler stops the accepting until it caught up",
     TAXI_TEST_POSIX_ONLY(test_slow_handler_throttles)},
    CU_TEST_INFO_NULL,
};

const taxi_test_suite_t pt_suite_emfile = {
    "accept under pressure", emfile_tests, 120,
#if defined(_WIN32)
    "the descriptor limit (setrlimit) is POSIX"
#else
    NULL
#endif
};
