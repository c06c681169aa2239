/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/proactor/fd_reuse.c - a closed handle's operations never reach the
 * connection that next gets its descriptor number.
 *
 * What must hold: after taxi_proactor_close(), an operation of the closed
 * handle completes (TAXI_ECANCELED, or its own result if it finished
 * first) with bytes of its own connection only; a write of it never reaches
 * the peer of a connection opened afterwards, even one given the same
 * number; and the connection opened afterwards gets all its own bytes.  The
 * exact case: the operation was started and the handle closed before the
 * next wait, with one dispatching thread.  Then the same in a tight loop,
 * with one thread and with a Leader/Followers pool dispatching, over
 * socket pairs the application attaches and over connections the
 * proactor accepted (on io_uring those take slots in its table of
 * registered files, reused as often as the numbers).
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A new socket pair whose end to attach has the number `want` when either
 * end got it (socketpair takes the lowest free numbers). */
static void fr_pair_reusing(taxi_proactor_t *p, int want, int sv[2]) {
  CU_ASSERT_FATAL(util_socketpair(sv) == 0);
  if (sv[1] == want) {
    int t = sv[0];
    sv[0] = sv[1];
    sv[1] = t;
  }
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_attach(p, sv[0]), 0);
}

/* A read started and its handle closed before the next wait; a new
 * connection (perhaps on the same number) has its own read and data. */
static void test_closed_read_not_reused(void) {
  taxi_proactor_t *p = pt_proactor();
  int a[2], b[2];
  pt_pair(p, a);
  char old_buf[16] = {0}, new_buf[16] = {0};
  taxi_op_t old_op, new_op;
  taxi_op_init(&old_op);
  taxi_op_init(&new_op);
  pt_done_t od, nd;
  pt_done_init(&od);
  pt_done_init(&nd);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_read(p, &old_op, a[0], old_buf,
                                           sizeof old_buf, 0, pt_on_done, &od),
                        0);
  int num = a[0];
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_close(p, a[0]), 0);
  fr_pair_reusing(p, num, b);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_read(p, &new_op, b[0], new_buf, 5,
                                           TAXI_READ_EXACT, pt_on_done, &nd),
                        0);
  CU_ASSERT_EQUAL_FATAL(pt_peer_write(b[1], "fresh", 5), 0);
  CU_ASSERT(pt_run_done(p, &od, 1));
  CU_ASSERT(pt_run_done(p, &nd, 1));
  pt_settle(p, 20);
  /* The closed handle's read got nothing of the new connection. */
  CU_ASSERT_EQUAL(atomic_load(&od.calls), 1);
  CU_ASSERT_EQUAL(od.status, TAXI_ECANCELED);
  CU_ASSERT_EQUAL(od.bytes, 0);
  CU_ASSERT_NOT_EQUAL(memcmp(old_buf, "fresh", 5), 0);
  /* The new connection got its own bytes. */
  CU_ASSERT_EQUAL(atomic_load(&nd.calls), 1);
  CU_ASSERT_EQUAL(nd.status, 0);
  CU_ASSERT_EQUAL(nd.bytes, 5);
  CU_ASSERT_EQUAL(memcmp(new_buf, "fresh", 5), 0);
  /* The old one is closed: its peer sees the end. */
  CU_ASSERT_EQUAL(pt_peer_read_to_eof(a[1]), 0);
  CU_ASSERT_EQUAL(taxi_proactor_close(p, b[0]), 0);
  pt_close(&a[1]);
  pt_close(&b[1]);
  pt_destroy(p);
}

/* A write started and its handle closed before the next wait: its bytes
 * never reach the peer of a new connection on the same number. */
static void test_closed_write_not_reused(void) {
  taxi_proactor_t *p = pt_proactor();
  int a[2], b[2];
  pt_pair(p, a);
  taxi_op_t old_op, new_op;
  taxi_op_init(&old_op);
  taxi_op_init(&new_op);
  pt_done_t od, nd;
  pt_done_init(&od);
  pt_done_init(&nd);
  taxi_buf_t ob = {(void *)"stale", 5};
  CU_ASSERT_EQUAL_FATAL(
      taxi_proactor_write(p, &old_op, a[0], &ob, 1, pt_on_done, &od), 0);
  int num = a[0];
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_close(p, a[0]), 0);
  fr_pair_reusing(p, num, b);
  taxi_buf_t nb = {(void *)"fresh", 5};
  CU_ASSERT_EQUAL_FATAL(
      taxi_proactor_write(p, &new_op, b[0], &nb, 1, pt_on_done, &nd), 0);
  CU_ASSERT(pt_run_done(p, &od, 1));
  CU_ASSERT(pt_run_done(p, &nd, 1));
  pt_settle(p, 20);
  CU_ASSERT_EQUAL(atomic_load(&od.calls), 1);
  /* Cancelled, or sent to its own peer before the close took effect. */
  CU_ASSERT(od.status == TAXI_ECANCELED || (od.status == 0 && od.bytes == 5));
  CU_ASSERT_EQUAL(nd.status, 0);
  CU_ASSERT_EQUAL(nd.bytes, 5);
  CU_ASSERT_EQUAL(taxi_proactor_close(p, b[0]), 0);
  /* The new peer reads exactly its own five bytes, then the end. */
  char got[16];
  size_t n = 0;
  CU_ASSERT_EQUAL(pt_peer_read(b[1], got, 5, &n), 0);
  CU_ASSERT_EQUAL(memcmp(got, "fresh", 5), 0);
  CU_ASSERT_EQUAL(pt_peer_read_to_eof(b[1]), 0);
  /* The old peer got the old bytes, or none. */
  long old_n = pt_peer_read_to_eof(a[1]);
  CU_ASSERT(old_n == 0 || (od.status == 0 && old_n == 5));
  pt_close(&a[1]);
  pt_close(&b[1]);
  pt_destroy(p);
}

/* ---- the tight loop --------------------------------------------------- */

#define FR_MSG 24    /* bytes each side writes */
#define FR_WINDOW 6  /* connections open at once */
#define FR_THREADS 3 /* pool threads */

typedef struct fr_conn {
  int sv[2];
  unsigned char tag; /* every byte of this connection */
  bool open;
  taxi_op_t rop, wop;
  unsigned char rbuf[FR_MSG];
  unsigned char wbuf[FR_MSG];
  struct fr_run *run;
} fr_conn_t;

typedef struct fr_run {
  taxi_proactor_t *p;
  bool pool;
  int lfd, port; /* accepted connections: the listener, or -1 */
  taxi_op_t aop; /* the accept (a pool thread may still hold it) */
  pt_done_t ad;
  uint64_t max_registered;
  atomic_int completions;
  atomic_int foreign; /* bytes of another connection seen */
  atomic_int bad_status;
} fr_run_t;

/* What an operation of a connection closed under it, or whose peer has
 * gone, may end with. */
static int fr_status_ok(int status) {
  return status == 0 || status == TAXI_ECANCELED || status == TAXI_EEOF ||
         status == TAXI_ECONNRESET || status == TAXI_EPIPE;
}

static void fr_on_read(taxi_op_t *op, int status, size_t bytes, void *act) {
  fr_conn_t *c = act;
  (void)op;
  for (size_t i = 0; i < bytes; i++)
    if (c->rbuf[i] != c->tag) {
      atomic_fetch_add(&c->run->foreign, 1);
      break;
    }
  if (!fr_status_ok(status)) atomic_fetch_add(&c->run->bad_status, 1);
  atomic_fetch_add(&c->run->completions, 1);
}

static void fr_on_write(taxi_op_t *op, int status, size_t bytes, void *act) {
  fr_conn_t *c = act;
  (void)op;
  (void)bytes;
  if (!fr_status_ok(status)) atomic_fetch_add(&c->run->bad_status, 1);
  atomic_fetch_add(&c->run->completions, 1);
}

/* The peer of c reads what arrived and checks it is c's own. */
static void fr_check_peer(fr_run_t *run, fr_conn_t *c) {
  unsigned char buf[4 * FR_MSG];
  long n;
  /* The peer is non-blocking (util_socketpair). */
  while ((n = (long)read(c->sv[1], buf, sizeof buf)) > 0)
    for (long i = 0; i < n; i++)
      if (buf[i] != c->tag) {
        atomic_fetch_add(&run->foreign, 1);
        break;
      }
}

static void fr_close(fr_run_t *run, fr_conn_t *c) {
  CU_ASSERT_EQUAL(taxi_proactor_close(run->p, c->sv[0]), 0);
  c->open = false;
}

/* A connection the proactor accepts: sv[0] its (attached), sv[1] the
 * peer's.  The accept's completion is dispatched here, or by the pool. */
static void fr_accepted(fr_run_t *run, int sv[2]) {
  pt_done_t *d = &run->ad;
  taxi_time_t start = taxi_now();
  while (taxi_op_in_flight(&run->aop) && util_elapsed_ms(start) < pt_wait_ms())
    pt_sleep_ms(1);
  pt_done_init(d);
  sv[1] = util_tcp_connect_nb(run->port);
  CU_ASSERT_FATAL(sv[1] >= 0);
  CU_ASSERT_EQUAL_FATAL(
      taxi_proactor_accept(run->p, &run->aop, run->lfd, 0, pt_on_done, d), 0);
  if (run->pool) {
    start = taxi_now();
    while (atomic_load(&d->calls) < 1 && util_elapsed_ms(start) < pt_wait_ms())
      pt_sleep_ms(1);
  } else {
    pt_run_done(run->p, d, 1);
  }
  CU_ASSERT_EQUAL_FATAL(atomic_load(&d->calls), 1);
  CU_ASSERT_EQUAL_FATAL(d->status, 0);
  sv[0] = d->accepted;
  taxi_proactor_stats_t st;
  if (taxi_proactor_stats(run->p, &st) == 0 &&
      st.registered_handles > run->max_registered)
    run->max_registered = st.registered_handles;
}

/* Open, start a read and a write on, and close connections in a loop;
 * with `pool`, an L/F pool dispatches meanwhile, else this thread does,
 * now and then, so that most closes come before the next wait. */
static void fr_loop(bool pool, bool accepted) {
  int rounds = pt_small() ? 300 : 2000;
  if (accepted) rounds /= 2;
  fr_run_t run;
  memset(&run, 0, sizeof run);
  run.p = pt_proactor();
  run.pool = pool;
  run.lfd = -1;
  taxi_op_init(&run.aop);
  if (accepted) {
    run.lfd = util_tcp_listener(&run.port);
    CU_ASSERT_FATAL(run.lfd >= 0);
    CU_ASSERT_EQUAL_FATAL(taxi_proactor_attach(run.p, run.lfd), 0);
  }
  fr_conn_t *conns = calloc((size_t)rounds, sizeof *conns);
  CU_ASSERT_FATAL(conns != NULL);
  taxi_lf_pool_t *lf = NULL;
  if (pool) {
    taxi_lf_options_t o = TAXI_LF_OPTIONS_INIT;
    if (pt_backend_is("iocp")) o.leaders = TAXI_LEADERS_MANY;
    CU_ASSERT_EQUAL_FATAL(taxi_lf_create_proactor(&lf, run.p, &o), 0);
    CU_ASSERT_EQUAL_FATAL(taxi_lf_spawn(lf, FR_THREADS), 0);
  }
  uint64_t rnd = 0x5eed;
  int started = 0, live[FR_WINDOW], nlive = 0;
  for (int i = 0; i < rounds; i++) {
    fr_conn_t *c = &conns[i];
    c->run = &run;
    c->tag = (unsigned char)(1 + i % 251);
    if (accepted) {
      fr_accepted(&run, c->sv);
    } else {
      if (util_socketpair(c->sv) != 0) {
        CU_FAIL_FATAL("socketpair failed");
      }
      CU_ASSERT_EQUAL_FATAL(taxi_proactor_attach(run.p, c->sv[0]), 0);
    }
    c->open = true;
    memset(c->wbuf, c->tag, sizeof c->wbuf);
    taxi_op_init(&c->rop);
    taxi_op_init(&c->wop);
    CU_ASSERT_EQUAL_FATAL(taxi_proactor_read(run.p, &c->rop, c->sv[0], c->rbuf,
                                             sizeof c->rbuf, 0, fr_on_read, c),
                          0);
    taxi_buf_t b = {c->wbuf, sizeof c->wbuf};
    CU_ASSERT_EQUAL_FATAL(
        taxi_proactor_write(run.p, &c->wop, c->sv[0], &b, 1, fr_on_write, c),
        0);
    started += 2;
    /* The peer writes its own bytes at once: a stale read on this number
     * would take them. */
    CU_ASSERT_EQUAL_FATAL(pt_peer_write(c->sv[1], c->wbuf, sizeof c->wbuf), 0);
    live[nlive++] = i;
    uint64_t r = pt_rand(&rnd);
    if (!pool && r % 4 == 0) taxi_proactor_handle_events(run.p, 0);
    /* Close one at random (the one just opened, sometimes) before the
     * next wait, so that the next pair takes its number. */
    if (nlive == FR_WINDOW || r % 3 == 0) {
      int k = (int)((r >> 8) % (uint64_t)nlive);
      fr_conn_t *v = &conns[live[k]];
      fr_close(&run, v);
      live[k] = live[--nlive];
      fr_check_peer(&run, v);
      /* Its number goes back to the pool too. */
      pt_close(&v->sv[1]);
    }
  }
  for (int k = 0; k < nlive; k++) fr_close(&run, &conns[live[k]]);
  if (pool) {
    taxi_time_t start = taxi_now();
    while (atomic_load(&run.completions) < started &&
           util_elapsed_ms(start) < pt_wait_ms())
      pt_sleep_ms(5);
    CU_ASSERT_EQUAL(taxi_lf_destroy(lf), 0);
  } else {
    CU_ASSERT(pt_run_count(run.p, &run.completions, started));
  }
  for (int i = 0; i < rounds; i++) {
    fr_check_peer(&run, &conns[i]);
    pt_close(&conns[i].sv[1]);
  }
  CU_ASSERT_EQUAL(atomic_load(&run.completions), started);
  CU_ASSERT_EQUAL(atomic_load(&run.foreign), 0);
  CU_ASSERT_EQUAL(atomic_load(&run.bad_status), 0);
  if (atomic_load(&run.foreign))
    printf("\n    %d completions or peers saw another connection's bytes\n",
           atomic_load(&run.foreign));
  unsigned f = 0;
  taxi_proactor_stats_t st;
  if (accepted && taxi_proactor_features(run.p, &f) == 0 &&
      (f & TAXI_PFEAT_REGISTERED_FILES) &&
      taxi_proactor_stats(run.p, &st) == 0) {
    /* The connections had slots; none is left with one. */
    CU_ASSERT(run.max_registered >= 1);
    CU_ASSERT_EQUAL(st.registered_handles, 0);
  }
  if (run.lfd >= 0) CU_ASSERT_EQUAL(taxi_proactor_close(run.p, run.lfd), 0);
  pt_destroy(run.p);
  free(conns);
}

static void test_loop_one_thread(void) { fr_loop(false, false); }
static void test_loop_pool(void) {
  if (pt_skip_one_thread()) return;
  fr_loop(true, false);
}
static void test_loop_accepted(void) { fr_loop(false, true); }
static void test_loop_accepted_pool(void) {
  if (pt_skip_one_thread()) return;
  fr_loop(true, true);
}

static CU_TestInfo fd_reuse_tests[] = {
    {"a read of a closed handle never takes a new connection's bytes",
     test_closed_read_not_reused},
    {"a write of a closed handle never reaches a new connection's peer",
     test_closed_write_not_reused},
    {"open, start and close in a loop, one thread: no byte crosses",
     test_loop_one_thread},
    {"open, start and close in a loop, L/F pool: no byte crosses",
     test_loop_pool},
    {"the loop over accepted connections, one thread", test_loop_accepted},
    {"the loop over accepted connections, L/F pool", test_loop_accepted_pool},
    CU_TEST_INFO_NULL,
};

const taxi_test_suite_t pt_suite_fd_reuse = {"fd reuse", fd_reuse_tests, 120,
                                             NULL};
