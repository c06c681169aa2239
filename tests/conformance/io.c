/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/conformance/io.c - readiness: read, write, accept, connect, hang-up,
 * reset, changing interest, suspend/resume, handle_one, batches.
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define WAIT_MS 5000

static void close_pair(int sv[2]) {
  if (sv[0] >= 0) close(sv[0]);
  if (sv[1] >= 0) close(sv[1]);
}

static int total_inputs(conf_probe_t *p, int n) {
  int sum = 0;
  for (int i = 0; i < n; i++) sum += atomic_load(&p[i].inputs);
  return sum;
}

/* A probe on a socketpair, watched for one event, made ready: the hook of
 * that event runs with it, the other hook is not called, and nothing is
 * dispatched before the handle is ready.  The cases differ in the event
 * and in when the peer's byte comes. */
typedef struct ready_case {
  unsigned watch;  /* TAXI_EV_READ or TAXI_EV_WRITE */
  int byte_before; /* the peer writes before the register (level) */
  int byte_after;  /* the peer writes once nothing was dispatched */
} ready_case_t;

static const ready_case_t ready_cases[] = {
    {TAXI_EV_READ, 0, 1},  /* data written to the peer */
    {TAXI_EV_READ, 1, 0},  /* data there before the register: level */
    {TAXI_EV_WRITE, 0, 0}, /* an empty send buffer */
};

static void readiness(const ready_case_t *k) {
  taxi_reactor_t *r = conf_reactor();
  int sv[2];
  CU_ASSERT_EQUAL_FATAL(util_socketpair(sv), 0);
  if (k->byte_before) CU_ASSERT_EQUAL(util_write_byte(sv[1]), 1);
  conf_probe_t p;
  conf_probe_init(&p, sv[0], NULL);
  CU_ASSERT_EQUAL_FATAL(taxi_reactor_register(r, sv[0], &p.h, k->watch), 0);
  if (k->byte_after) {
    conf_settle(r, 10);
    CU_ASSERT_EQUAL(atomic_load(&p.inputs), 0);
    CU_ASSERT_EQUAL(util_write_byte(sv[1]), 1);
  }
  int reading = k->watch == TAXI_EV_READ;
  atomic_int *ran = reading ? &p.inputs : &p.outputs;
  atomic_int *other = reading ? &p.outputs : &p.inputs;
  CU_ASSERT_EQUAL(run_until(r, conf_pred_nonzero, ran, WAIT_MS), 1);
  unsigned ev = reading ? atomic_load(&p.last_in_events)
                        : atomic_load(&p.last_out_events);
  CU_ASSERT(ev & k->watch);
  if (reading) CU_ASSERT_EQUAL(atomic_load(&p.bytes), 1);
  /* Only one event was asked for: a (writable) socket's output hook is
   * not called for READ, nor the input hook for WRITE. */
  CU_ASSERT_EQUAL(atomic_load(other), 0);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  CU_ASSERT_EQUAL(atomic_load(&p.closes), 1);
  close_pair(sv);
}

static void test_read_readiness(void) { readiness(&ready_cases[0]); }
static void test_readable_before_register(void) { readiness(&ready_cases[1]); }
static void test_write_readiness(void) { readiness(&ready_cases[2]); }

/* ---- accept ------------------------------------------------------------- */

typedef struct acceptor {
  taxi_handler_t h;
  atomic_int calls;
  atomic_int accepted_fd;
  atomic_int accept_errno;
} acceptor_t;

static int acceptor_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  acceptor_t *a = TAXI_CONTAINER_OF(h, acceptor_t, h);
  (void)ev;
  atomic_fetch_add(&a->calls, 1);
  int c = accept(fd, NULL, NULL);
  if (c >= 0) {
    if (atomic_load(&a->accepted_fd) < 0)
      atomic_store(&a->accepted_fd, c);
    else
      close(c);
  } else {
    atomic_store(&a->accept_errno, errno);
  }
  return 0;
}

static const taxi_handler_ops_t acceptor_ops = {.input = acceptor_input};

static int acceptor_done(void *arg) {
  acceptor_t *a = arg;
  return atomic_load(&a->accepted_fd) >= 0 || atomic_load(&a->accept_errno);
}

/* A listener becomes readable when a client connects, and accept() in the
 * input hook succeeds. */
static void test_tcp_accept(void) {
  taxi_reactor_t *r = conf_reactor();
  int port = 0;
  int lfd = util_tcp_listener(&port);
  CU_ASSERT_FATAL(lfd >= 0);
  acceptor_t a;
  memset(&a, 0, sizeof a);
  atomic_init(&a.calls, 0);
  atomic_init(&a.accepted_fd, -1);
  atomic_init(&a.accept_errno, 0);
  CU_ASSERT_EQUAL_FATAL(taxi_handler_init(&a.h, &acceptor_ops), 0);
  CU_ASSERT_EQUAL_FATAL(taxi_reactor_register(r, lfd, &a.h, TAXI_EV_READ), 0);

  conf_settle(r, 10);
  CU_ASSERT_EQUAL(atomic_load(&a.calls), 0);

  int cfd = util_tcp_connect_nb(port);
  CU_ASSERT_FATAL(cfd >= 0);
  CU_ASSERT_EQUAL(run_until(r, acceptor_done, &a, WAIT_MS), 1);
  CU_ASSERT(atomic_load(&a.accepted_fd) >= 0);
  CU_ASSERT_EQUAL(atomic_load(&a.accept_errno), 0);

  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  if (atomic_load(&a.accepted_fd) >= 0) close(atomic_load(&a.accepted_fd));
  close(cfd);
  close(lfd);
}

/* A non-blocking connect reports completion as write readiness, with no
 * error pending on the socket. */
static void test_tcp_connect_completes(void) {
  taxi_reactor_t *r = conf_reactor();
  int port = 0;
  int lfd = util_tcp_listener(&port);
  CU_ASSERT_FATAL(lfd >= 0);
  int cfd = util_tcp_connect_nb(port);
  CU_ASSERT_FATAL(cfd >= 0);
  conf_probe_t p;
  conf_probe_init(&p, cfd, NULL);
  CU_ASSERT_EQUAL_FATAL(taxi_reactor_register(r, cfd, &p.h, TAXI_EV_WRITE), 0);
  CU_ASSERT_EQUAL(run_until(r, conf_pred_nonzero, &p.outputs, WAIT_MS), 1);
  CU_ASSERT(atomic_load(&p.last_out_events) & TAXI_EV_WRITE);

  int soerr = -1;
  socklen_t len = sizeof soerr;
  CU_ASSERT_EQUAL(getsockopt(cfd, SOL_SOCKET, SO_ERROR, &soerr, &len), 0);
  CU_ASSERT_EQUAL(soerr, 0);
  struct sockaddr_storage peer;
  socklen_t plen = sizeof peer;
  CU_ASSERT_EQUAL(getpeername(cfd, (struct sockaddr *)&peer, &plen), 0);

  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  close(cfd);
  close(lfd);
}

/* ---- hang-up and reset -------------------------------------------------- */

static int probe_saw_end(void *arg) {
  conf_probe_t *p = arg;
  return atomic_load(&p->eof) || atomic_load(&p->read_errno);
}

/* The peer closes: the input hook runs with TAXI_EV_READ and read() returns
 * 0.  (Whether TAXI_EV_HUP is also set depends on the backend.) */
static void test_peer_close_hangup(void) {
  taxi_reactor_t *r = conf_reactor();
  int sv[2];
  CU_ASSERT_EQUAL_FATAL(util_socketpair(sv), 0);
  conf_probe_t p;
  conf_probe_init(&p, sv[0], NULL);
  CU_ASSERT_EQUAL_FATAL(taxi_reactor_register(r, sv[0], &p.h, TAXI_EV_READ), 0);
  conf_settle(r, 10);
  close(sv[1]);
  sv[1] = -1;
  CU_ASSERT_EQUAL(run_until(r, probe_saw_end, &p, WAIT_MS), 1);
  CU_ASSERT(atomic_load(&p.inputs) >= 1);
  CU_ASSERT(atomic_load(&p.in_events) & TAXI_EV_READ);
  CU_ASSERT_EQUAL(atomic_load(&p.eof), 1);
  CU_ASSERT_EQUAL(atomic_load(&p.read_errno), 0);
  CU_ASSERT_EQUAL(atomic_load(&p.outputs), 0);
  printf("(HUP %s) ", (atomic_load(&p.in_events) & TAXI_EV_HUP)
                          ? "reported"
                          : "not reported");
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  close_pair(sv);
}

/* The peer resets the connection (SO_LINGER {1, 0}, close): the input hook
 * runs and read() fails with ECONNRESET (or returns 0). */
static void test_peer_reset(void) {
  taxi_reactor_t *r = conf_reactor();
  int fds[2];
  CU_ASSERT_EQUAL_FATAL(util_tcp_pair(fds), 0);
  conf_probe_t p;
  conf_probe_init(&p, fds[0], NULL);
  CU_ASSERT_EQUAL_FATAL(taxi_reactor_register(r, fds[0], &p.h, TAXI_EV_READ),
                        0);
  conf_settle(r, 10);
  CU_ASSERT_EQUAL(atomic_load(&p.inputs), 0);

  struct linger lg = {1, 0};
  CU_ASSERT_EQUAL(setsockopt(fds[1], SOL_SOCKET, SO_LINGER, &lg, sizeof lg), 0);
  close(fds[1]);
  CU_ASSERT_EQUAL(run_until(r, probe_saw_end, &p, WAIT_MS), 1);
  CU_ASSERT(atomic_load(&p.inputs) >= 1);
  int e = atomic_load(&p.read_errno);
  CU_ASSERT(e == ECONNRESET || (e == 0 && atomic_load(&p.eof)));
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  close(fds[0]);
}

/* ---- the error reported with an event, re-arming after EAGAIN ---------- */

/* A probe whose hooks first ask the reactor for the handle's pending
 * error (once), then do what the probe does; its input hook may re-arm
 * the handle right after its read ended in EAGAIN. */
typedef struct err_probe {
  conf_probe_t p; /* first: the probe's hooks find it from the handler */
  taxi_reactor_t *r;
  atomic_int asked, asked_rc, pending;
  int rearm;             /* input: taxi_reactor_modify(READ) after draining */
  atomic_int rearm_rc;   /* its result (1: not yet) */
  atomic_int rearm_errs; /* errno was EAGAIN right before it */
} err_probe_t;

static void err_ask(taxi_handler_t *h) {
  err_probe_t *ep = TAXI_CONTAINER_OF(h, err_probe_t, p.h);
  if (atomic_load(&ep->asked)) return;
  int e = 0;
  atomic_store(&ep->asked_rc, taxi_reactor_pending_error(ep->r, h, &e));
  atomic_store(&ep->pending, e);
  atomic_store(&ep->asked, 1);
}

static int err_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  err_probe_t *ep = TAXI_CONTAINER_OF(h, err_probe_t, p.h);
  if (!ep->rearm) err_ask(h);
  int rc = conf_probe_input(h, fd, ev);
  if (ep->rearm) {
    /* The drain's last read failed with EAGAIN: errno still says so. */
    if (errno == EAGAIN || errno == EWOULDBLOCK)
      atomic_fetch_add(&ep->rearm_errs, 1);
    atomic_store(&ep->rearm_rc, taxi_reactor_modify(ep->r, h, TAXI_EV_READ));
  }
  return rc;
}

static int err_output(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  err_ask(h);
  return conf_probe_output(h, fd, ev);
}

static const taxi_handler_ops_t err_ops = {
    .input = err_input, .output = err_output, .close = conf_probe_close};

static void err_probe_init(err_probe_t *ep, taxi_reactor_t *r, int fd) {
  memset(ep, 0, sizeof *ep);
  conf_probe_init(&ep->p, fd, &err_ops);
  ep->r = r;
  atomic_init(&ep->asked, 0);
  atomic_init(&ep->asked_rc, 1);
  atomic_init(&ep->pending, 0);
  atomic_init(&ep->rearm_rc, 1);
  atomic_init(&ep->rearm_errs, 0);
}

static int err_asked(void *arg) {
  return atomic_load(&((err_probe_t *)arg)->asked);
}

/* A peer reset is TAXI_ECONNRESET to the handler, not the end of the
 * stream: taxi_reactor_pending_error() tells, also where reporting the
 * event cleared the error from the socket (libkqueue). */
static void test_peer_reset_pending_error(void) {
  taxi_reactor_t *r = conf_reactor();
  int fds[2];
  CU_ASSERT_EQUAL_FATAL(util_tcp_pair(fds), 0);
  err_probe_t ep;
  err_probe_init(&ep, r, fds[0]);
  CU_ASSERT_EQUAL_FATAL(taxi_reactor_register(r, fds[0], &ep.p.h, TAXI_EV_READ),
                        0);
  conf_settle(r, 10);
  struct linger lg = {1, 0};
  CU_ASSERT_EQUAL(setsockopt(fds[1], SOL_SOCKET, SO_LINGER, &lg, sizeof lg), 0);
  close(fds[1]);
  CU_ASSERT_EQUAL(run_until(r, err_asked, &ep, WAIT_MS), 1);
  CU_ASSERT_EQUAL(atomic_load(&ep.asked_rc), 0);
#if defined(_WIN32)
  /* Winsock (as wine runs it) keeps a reset for the next receive, which
   * reports it (the test above): SO_ERROR, where the reactor reads the
   * pending error, may still say 0 when the event comes. */
  int pending = atomic_load(&ep.pending);
  CU_ASSERT(pending == TAXI_ECONNRESET || pending == 0);
  if (pending == 0)
    printf("\n    Winsock: no pending error after a reset (SO_ERROR 0)\n");
#else
  CU_ASSERT_EQUAL(atomic_load(&ep.pending), TAXI_ECONNRESET);
#endif
  /* Asked again: consumed. */
  int e = 1;
  CU_ASSERT_EQUAL(taxi_reactor_pending_error(r, &ep.p.h, &e), 0);
  CU_ASSERT_EQUAL(e, 0);
  CU_ASSERT_EQUAL(taxi_reactor_pending_error(r, NULL, &e), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_reactor_pending_error(r, &ep.p.h, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  close(fds[0]);
}

/* A non-blocking connect to a port nobody listens on: the output hook
 * runs and the pending error is TAXI_ECONNREFUSED. */
static void test_connect_refused_pending_error(void) {
  taxi_reactor_t *r = conf_reactor();
  int port = 0;
  int lfd = util_tcp_listener(&port);
  CU_ASSERT_FATAL(lfd >= 0);
  close(lfd); /* the port is closed now */
  int fd = util_tcp_connect_nb(port);
  if (fd < 0) {
    /* Refused at once: nothing for the reactor to report. */
    CU_ASSERT_EQUAL(errno, ECONNREFUSED);
    printf("(refused at once) ");
    CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
    return;
  }
  err_probe_t ep;
  err_probe_init(&ep, r, fd);
  CU_ASSERT_EQUAL_FATAL(taxi_reactor_register(r, fd, &ep.p.h, TAXI_EV_WRITE),
                        0);
  CU_ASSERT_EQUAL(run_until(r, err_asked, &ep, WAIT_MS), 1);
  CU_ASSERT_EQUAL(atomic_load(&ep.asked_rc), 0);
  CU_ASSERT_EQUAL(atomic_load(&ep.pending), TAXI_ECONNREFUSED);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  close(fd);
}

static int inputs_at_least(err_probe_t *ep, int n) {
  return atomic_load(&ep->p.inputs) >= n;
}
static int two_inputs(void *arg) { return inputs_at_least(arg, 2); }
static int three_inputs(void *arg) { return inputs_at_least(arg, 3); }

/* A handler whose read ended in EAGAIN re-arms its handle (modify in its
 * hook; suspend and resume from outside): each succeeds and the next data
 * is reported.  errno still holding that EAGAIN must not read as the
 * re-arm's failure (libkqueue reports errno in the receipt of a re-added
 * knote). */
static void test_rearm_after_eagain(void) {
  taxi_reactor_t *r = conf_reactor();
  int sv[2];
  CU_ASSERT_EQUAL_FATAL(util_socketpair(sv), 0);
  err_probe_t ep;
  err_probe_init(&ep, r, sv[0]);
  ep.rearm = 1;
  CU_ASSERT_EQUAL_FATAL(taxi_reactor_register(r, sv[0], &ep.p.h, TAXI_EV_READ),
                        0);
  CU_ASSERT_EQUAL(util_write_byte(sv[1]), 1);
  CU_ASSERT_EQUAL(run_until(r, conf_pred_nonzero, &ep.p.inputs, WAIT_MS), 1);
  CU_ASSERT_EQUAL(atomic_load(&ep.rearm_rc), 0);
  CU_ASSERT_EQUAL(atomic_load(&ep.rearm_errs), 1);
  CU_ASSERT_EQUAL(util_write_byte(sv[1]), 1);
  CU_ASSERT_EQUAL(run_until(r, two_inputs, &ep, WAIT_MS), 1);
  CU_ASSERT_EQUAL(atomic_load(&ep.rearm_rc), 0);

  /* Suspend, then resume right after a read that failed with EAGAIN. */
  ep.rearm = 0;
  CU_ASSERT_EQUAL(taxi_reactor_suspend(r, &ep.p.h), 0);
  char c;
  CU_ASSERT_EQUAL(read(sv[0], &c, 1), -1);
  CU_ASSERT(errno == EAGAIN || errno == EWOULDBLOCK);
  CU_ASSERT_EQUAL(taxi_reactor_resume(r, &ep.p.h), 0);
  CU_ASSERT_EQUAL(util_write_byte(sv[1]), 1);
  CU_ASSERT_EQUAL(run_until(r, three_inputs, &ep, WAIT_MS), 1);
  CU_ASSERT_EQUAL(atomic_load(&ep.p.bytes), 3);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  close_pair(sv);
}

/* ---- changing what is watched ------------------------------------------- */

/* After modify(READ -> WRITE) the output hook runs and the input hook no
 * longer does, although data is waiting. */
static void test_modify_read_to_write(void) {
  taxi_reactor_t *r = conf_reactor();
  int sv[2];
  CU_ASSERT_EQUAL_FATAL(util_socketpair(sv), 0);
  conf_probe_t p;
  conf_probe_init(&p, sv[0], NULL);
  p.drain = 0; /* leave the data there: it stays readable */
  CU_ASSERT_EQUAL_FATAL(taxi_reactor_register(r, sv[0], &p.h, TAXI_EV_READ), 0);
  conf_settle(r, 10);
  CU_ASSERT_EQUAL(atomic_load(&p.outputs), 0);

  CU_ASSERT_EQUAL(taxi_reactor_modify(r, &p.h, TAXI_EV_WRITE), 0);
  CU_ASSERT_EQUAL(util_write_byte(sv[1]), 1);
  CU_ASSERT_EQUAL(run_until(r, conf_pred_nonzero, &p.outputs, WAIT_MS), 1);
  CU_ASSERT(run_for(r, 30) >= 0);
  CU_ASSERT_EQUAL(atomic_load(&p.inputs), 0);

  /* And back: READ only, the waiting byte is reported. */
  CU_ASSERT_EQUAL(taxi_reactor_modify(r, &p.h, TAXI_EV_READ), 0);
  int outs = atomic_load(&p.outputs);
  p.drain = 1;
  CU_ASSERT_EQUAL(run_until(r, conf_pred_nonzero, &p.inputs, WAIT_MS), 1);
  CU_ASSERT(atomic_load(&p.last_in_events) & TAXI_EV_READ);
  CU_ASSERT(run_for(r, 30) >= 0);
  CU_ASSERT_EQUAL(atomic_load(&p.outputs), outs);

  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  close_pair(sv);
}

/* While suspended nothing is dispatched; resume reports what arrived. */
static void test_suspend_resume(void) {
  taxi_reactor_t *r = conf_reactor();
  int sv[2];
  CU_ASSERT_EQUAL_FATAL(util_socketpair(sv), 0);
  conf_probe_t p;
  conf_probe_init(&p, sv[0], NULL);
  CU_ASSERT_EQUAL_FATAL(taxi_reactor_register(r, sv[0], &p.h, TAXI_EV_READ), 0);
  conf_settle(r, 10);

  CU_ASSERT_EQUAL(taxi_reactor_suspend(r, &p.h), 0);
  CU_ASSERT_EQUAL(taxi_reactor_suspend(r, &p.h), 0); /* no-op */
  CU_ASSERT_EQUAL(util_write_byte(sv[1]), 1);
  CU_ASSERT_EQUAL(taxi_reactor_handle_events(r, 50), 0);
  CU_ASSERT_EQUAL(atomic_load(&p.inputs), 0);

  CU_ASSERT_EQUAL(taxi_reactor_resume(r, &p.h), 0);
  CU_ASSERT_EQUAL(run_until(r, conf_pred_nonzero, &p.inputs, WAIT_MS), 1);
  CU_ASSERT_EQUAL(atomic_load(&p.bytes), 1);
  CU_ASSERT_EQUAL(taxi_reactor_resume(r, &p.h), 0); /* no-op */

  /* Still live after the no-op resume. */
  CU_ASSERT_EQUAL(util_write_byte(sv[1]), 1);
  CU_ASSERT_EQUAL(run_until(r, conf_pred_nonzero, &p.inputs, WAIT_MS), 1);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  CU_ASSERT_EQUAL(atomic_load(&p.closes), 1);
  close_pair(sv);
}

/* Two handles reported by one wait; the hook of whichever runs first
 * suspends the other: its already-reported event is dropped. */
typedef struct pair_ctx {
  taxi_reactor_t *r;
  conf_probe_t p[2];
  atomic_int first; /* index of the first one dispatched, or -1 */
  atomic_int suspend_rc;
} pair_ctx_t;

static pair_ctx_t *g_pair;

static int pair_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  conf_probe_t *p = TAXI_CONTAINER_OF(h, conf_probe_t, h);
  int self = (p == &g_pair->p[0]) ? 0 : 1;
  int expected = -1;
  if (atomic_compare_exchange_strong(&g_pair->first, &expected, self))
    atomic_store(&g_pair->suspend_rc,
                 taxi_reactor_suspend(g_pair->r, &g_pair->p[1 - self].h));
  return conf_probe_input(h, fd, ev);
}

static const taxi_handler_ops_t pair_ops = {.input = pair_input,
                                            .close = conf_probe_close};

static void test_suspend_drops_reported_events(void) {
  pair_ctx_t ctx;
  memset(&ctx, 0, sizeof ctx);
  g_pair = &ctx;
  atomic_init(&ctx.first, -1);
  atomic_init(&ctx.suspend_rc, 1);
  ctx.r = conf_reactor();
  int sv[2][2];
  for (int i = 0; i < 2; i++) {
    CU_ASSERT_EQUAL_FATAL(util_socketpair(sv[i]), 0);
    conf_probe_init(&ctx.p[i], sv[i][0], &pair_ops);
    CU_ASSERT_EQUAL_FATAL(
        taxi_reactor_register(ctx.r, sv[i][0], &ctx.p[i].h, TAXI_EV_READ), 0);
  }
  conf_settle(ctx.r, 10);
  taxi_reactor_stats_t s0, s1;
  CU_ASSERT_EQUAL(taxi_reactor_stats(ctx.r, &s0), 0);
  for (int i = 0; i < 2; i++) CU_ASSERT_EQUAL(util_write_byte(sv[i][1]), 1);

  CU_ASSERT_EQUAL(taxi_reactor_handle_one(ctx.r, WAIT_MS), 1);
  int first = atomic_load(&ctx.first);
  CU_ASSERT_FATAL(first == 0 || first == 1);
  int other = 1 - first;
  CU_ASSERT_EQUAL(atomic_load(&ctx.suspend_rc), 0);

  CU_ASSERT(taxi_reactor_handle_one(ctx.r, 0) >= 0);
  CU_ASSERT(run_for(ctx.r, 50) >= 0);
  CU_ASSERT_EQUAL(atomic_load(&ctx.p[other].inputs), 0);
  CU_ASSERT_EQUAL(taxi_reactor_stats(ctx.r, &s1), 0);
  CU_ASSERT(s1.stale >= s0.stale + 1);

  CU_ASSERT_EQUAL(taxi_reactor_resume(ctx.r, &ctx.p[other].h), 0);
  CU_ASSERT_EQUAL(
      run_until(ctx.r, conf_pred_nonzero, &ctx.p[other].inputs, WAIT_MS), 1);
  CU_ASSERT_EQUAL(atomic_load(&ctx.p[other].bytes), 1);
  CU_ASSERT_EQUAL(atomic_load(&ctx.p[first].inputs), 1);

  CU_ASSERT_EQUAL(taxi_reactor_destroy(ctx.r), 0);
  for (int i = 0; i < 2; i++) close_pair(sv[i]);
  g_pair = NULL;
}

/* ---- batches ------------------------------------------------------------ */

/* handle_one dispatches one of several ready handles per call; the others
 * come from the same wait, without another system call. */
static void test_handle_one_takes_pending(void) {
  enum { N = 3 };
  taxi_reactor_t *r = conf_reactor();
  int sv[N][2];
  conf_probe_t p[N];
  for (int i = 0; i < N; i++) {
    CU_ASSERT_EQUAL_FATAL(util_socketpair(sv[i]), 0);
    conf_probe_init(&p[i], sv[i][0], NULL);
    CU_ASSERT_EQUAL_FATAL(
        taxi_reactor_register(r, sv[i][0], &p[i].h, TAXI_EV_READ), 0);
  }
  conf_settle(r, 10);
  for (int i = 0; i < N; i++) CU_ASSERT_EQUAL(util_write_byte(sv[i][1]), 1);

  taxi_reactor_stats_t s0, s1, s;
  CU_ASSERT_EQUAL(taxi_reactor_stats(r, &s0), 0);
  CU_ASSERT_EQUAL(taxi_reactor_handle_one(r, WAIT_MS), 1);
  CU_ASSERT_EQUAL(total_inputs(p, N), 1);
  CU_ASSERT_EQUAL(taxi_reactor_stats(r, &s1), 0);
  CU_ASSERT(s1.waits >= s0.waits + 1);

  for (int k = 2; k <= N; k++) {
    CU_ASSERT_EQUAL(taxi_reactor_handle_one(r, 0), 1);
    CU_ASSERT_EQUAL(total_inputs(p, N), k);
    CU_ASSERT_EQUAL(taxi_reactor_stats(r, &s), 0);
    CU_ASSERT_EQUAL(s.waits, s1.waits);
    CU_ASSERT_EQUAL(s.pending_taken, s1.pending_taken + (uint64_t)(k - 1));
  }
  for (int i = 0; i < N; i++) CU_ASSERT_EQUAL(atomic_load(&p[i].inputs), 1);
  /* Everything was drained: nothing more to dispatch. */
  CU_ASSERT_EQUAL(taxi_reactor_handle_one(r, 0), 0);
  CU_ASSERT_EQUAL(total_inputs(p, N), N);

  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  for (int i = 0; i < N; i++) close_pair(sv[i]);
}

/* Several handles ready at once are all dispatched by one handle_events
 * call, which returns how many hooks ran. */
static void test_all_ready_dispatched_in_one_call(void) {
  enum { N = 5 };
  taxi_reactor_t *r = conf_reactor();
  int sv[N][2];
  conf_probe_t p[N];
  for (int i = 0; i < N; i++) {
    CU_ASSERT_EQUAL_FATAL(util_socketpair(sv[i]), 0);
    conf_probe_init(&p[i], sv[i][0], NULL);
    CU_ASSERT_EQUAL_FATAL(
        taxi_reactor_register(r, sv[i][0], &p[i].h, TAXI_EV_READ), 0);
  }
  conf_settle(r, 10);
  for (int i = 0; i < N; i++) CU_ASSERT_EQUAL(util_write_byte(sv[i][1]), 1);
  CU_ASSERT_EQUAL(taxi_reactor_handle_events(r, WAIT_MS), N);
  for (int i = 0; i < N; i++) CU_ASSERT_EQUAL(atomic_load(&p[i].inputs), 1);

  taxi_reactor_stats_t s;
  CU_ASSERT_EQUAL(taxi_reactor_stats(r, &s), 0);
  CU_ASSERT_EQUAL(s.handles, (size_t)N);
  CU_ASSERT(s.events >= (uint64_t)N);

  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  for (int i = 0; i < N; i++) close_pair(sv[i]);
}

/* A handle watched for READ and WRITE gets both hooks. */
static void test_read_and_write_together(void) {
  taxi_reactor_t *r = conf_reactor();
  int sv[2];
  CU_ASSERT_EQUAL_FATAL(util_socketpair(sv), 0);
  conf_probe_t p;
  conf_probe_init(&p, sv[0], NULL);
  CU_ASSERT_EQUAL_FATAL(
      taxi_reactor_register(r, sv[0], &p.h, TAXI_EV_READ | TAXI_EV_WRITE), 0);
  CU_ASSERT_EQUAL(util_write_byte(sv[1]), 1);
  CU_ASSERT_EQUAL(run_until(r, conf_pred_nonzero, &p.inputs, WAIT_MS), 1);
  CU_ASSERT_EQUAL(run_until(r, conf_pred_nonzero, &p.outputs, WAIT_MS), 1);
  CU_ASSERT_EQUAL(atomic_load(&p.bytes), 1);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  close_pair(sv);
}

/* A handle closed by the application while still registered, during a
 * wait in another thread.  Closing a handle right after removing it comes
 * to this for a backend that waits on a copy of its set taken before the
 * removal (poll, select, WSAPoll): the wait in progress, or the next one,
 * still names the closed handle.  The dispatcher must go on: the closed
 * handle is reported (poll's POLLNVAL, a select, WSAPoll or APR poll that
 * failed for it: its handler is then removed, taxi/handler.h) or dropped
 * by the kernel (epoll, kqueue), and the others are still dispatched. */
typedef struct closed_run {
  taxi_reactor_t *r;
  conf_probe_t *watch; /* dispatch until its input hook ran */
  atomic_int rc;
} closed_run_t;

static void closed_dispatcher(void *arg) {
  closed_run_t *run = arg;
  taxi_time_t start = taxi_now();
  while (atomic_load(&run->watch->inputs) == 0 &&
         util_elapsed_ms(start) < WAIT_MS) {
    int rc = taxi_reactor_handle_events(run->r, 100);
    if (rc < 0) {
      atomic_store(&run->rc, rc);
      return;
    }
  }
}

static void test_closed_while_registered(void) {
  taxi_reactor_t *r = conf_reactor();
  int a[2], b[2];
  CU_ASSERT_EQUAL_FATAL(util_socketpair(a), 0);
  CU_ASSERT_EQUAL_FATAL(util_socketpair(b), 0);
  conf_probe_t pa, pb;
  conf_probe_init(&pa, a[0], NULL);
  pa.drain = 0;
  pa.input_ret = -1; /* whatever is reported: remove me */
  conf_probe_init(&pb, b[0], NULL);
  CU_ASSERT_EQUAL_FATAL(taxi_reactor_register(r, a[0], &pa.h, TAXI_EV_READ), 0);
  CU_ASSERT_EQUAL_FATAL(taxi_reactor_register(r, b[0], &pb.h, TAXI_EV_READ), 0);
  conf_settle(r, 10);

  closed_run_t run = {r, &pb, 0};
  util_thread_t t;
  CU_ASSERT_EQUAL_FATAL(util_thread_start(&t, closed_dispatcher, &run), 0);
  util_sleep_ms(50); /* the dispatcher is waiting on both */
  close(a[0]);
  util_sleep_ms(50);
  CU_ASSERT_EQUAL(util_write_byte(b[1]), 1);
  util_thread_join(&t, 2 * WAIT_MS, "the dispatcher");
  int rc = atomic_load(&run.rc);
  if (rc < 0) printf("\n    handle_events = %s\n", taxi_error_name(rc));
  CU_ASSERT_EQUAL(rc, 0);
  CU_ASSERT_EQUAL(atomic_load(&pb.inputs), 1);
  CU_ASSERT_EQUAL(atomic_load(&pb.bytes), 1);
  /* Reported to its hook (readable to a select that was already watching
   * it: a read then fails), which removes it, or removed by the reactor
   * (reported closed), or dropped by the kernel. */
  if (atomic_load(&pa.inputs)) {
    printf("(closed one reported: 0x%x) ", atomic_load(&pa.in_events));
  } else {
    printf("(closed one not dispatched) ");
  }
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  CU_ASSERT_EQUAL(atomic_load(&pa.closes), 1);
  CU_ASSERT_EQUAL(atomic_load(&pb.closes), 1);
  close(a[1]);
  close_pair(b);
}

static CU_TestInfo io_tests[] = {
    {"read readiness on a socketpair", test_read_readiness},
    {"data present before register is reported", test_readable_before_register},
    {"write readiness on a socketpair", test_write_readiness},
    {"READ and WRITE watched together", test_read_and_write_together},
    {"TCP accept in the input hook", test_tcp_accept},
    {"non-blocking TCP connect completes", test_tcp_connect_completes},
    {"peer close: READ and read() == 0", test_peer_close_hangup},
    {"peer reset: input hook, ECONNRESET", test_peer_reset},
    {"peer reset: pending error TAXI_ECONNRESET, not EOF",
     test_peer_reset_pending_error},
    {"connect to a closed port: pending error TAXI_ECONNREFUSED",
     test_connect_refused_pending_error},
    {"re-arm after a read ended in EAGAIN: next event delivered",
     test_rearm_after_eagain},
    {"modify READ -> WRITE -> READ", test_modify_read_to_write},
    {"suspend and resume", test_suspend_resume},
    {"suspend drops reported events", test_suspend_drops_reported_events},
    {"handle_one takes pending events", test_handle_one_takes_pending},
    {"closed while registered: the others go on", test_closed_while_registered},
    {"all ready handles in one handle_events",
     test_all_ready_dispatched_in_one_call},
    CU_TEST_INFO_NULL,
};

const taxi_test_suite_t conf_suite_io = {"io", io_tests, 60, NULL};
