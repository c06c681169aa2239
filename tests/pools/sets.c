/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/pools/sets.c - Leader/Followers per handle set (taxi/lf_sets.h) and
 * moving handlers between reactors (taxi_reactor_move in taxi/reactor.h):
 * creation and the accessors, kernel balancing (SO_REUSEPORT), the shared
 * acceptor's least-loaded registration, moves of an idle handler from
 * another thread; and the suite, with the tests of sets_moves.c and
 * sets_bad_input.c.
 *
 * Self-contained: it uses tests/runner.h and tests/util.h only, so that it
 * does not depend on the other pool suites' fixtures.  The suite is made
 * by pools_sets_suite(backend); every set and reactor of its tests uses
 * that backend.
 *
 * Clients are plain blocking sockets in the test thread with 5 s send and
 * receive time limits, so a bug fails a test instead of hanging it; every
 * other wait is bounded too (SETS_WAIT_MS).  Data shared between hooks and
 * the test thread is atomic, or read after taxi_lf_sets_destroy() (which
 * joins the pools' threads).
 */
#define _GNU_SOURCE 1

#include "sets_helpers.h"

/* ---- 1. creation and the accessors --------------------------------------- */

static void test_create_accessors(void) {
  taxi_lf_sets_t *s = sets_make(3, 2);
  CU_ASSERT_EQUAL(taxi_lf_sets_count(s), 3u);
  taxi_reactor_t *r[3];
  taxi_lf_pool_t *p[3];
  for (unsigned i = 0; i < 3; i++) {
    r[i] = taxi_lf_sets_reactor(s, i);
    p[i] = taxi_lf_sets_pool(s, i);
    CU_ASSERT_PTR_NOT_NULL(r[i]);
    CU_ASSERT_PTR_NOT_NULL(p[i]);
    if (r[i]) {
      CU_ASSERT_STRING_EQUAL(taxi_reactor_backend(r[i]), sets_backend);
    }
    CU_ASSERT_EQUAL(taxi_lf_sets_index(s, r[i]), (int)i);
    for (unsigned j = 0; j < i; j++) {
      CU_ASSERT_PTR_NOT_EQUAL(r[i], r[j]);
      CU_ASSERT_PTR_NOT_EQUAL(p[i], p[j]);
    }
  }
  /* Out of range, and reactors that are not one of the sets. */
  CU_ASSERT_PTR_NULL(taxi_lf_sets_reactor(s, 3));
  CU_ASSERT_PTR_NULL(taxi_lf_sets_pool(s, 3));
  CU_ASSERT_PTR_NULL(taxi_lf_sets_reactor(s, UINT32_MAX));
  CU_ASSERT_PTR_NULL(taxi_lf_sets_pool(s, UINT32_MAX));
  CU_ASSERT_EQUAL(taxi_lf_sets_index(s, NULL), -1);
  taxi_reactor_t *other = NULL;
  CU_ASSERT_EQUAL_FATAL(util_reactor_create(&other, sets_backend), 0);
  CU_ASSERT_EQUAL(taxi_lf_sets_index(s, other), -1);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(other), 0);
  /* Each pool gets its threads_per_set threads (they start on their own
   * time: wait, bounded). */
  for (unsigned i = 0; i < 3; i++) {
    taxi_lf_stats_t st;
    taxi_time_t start = taxi_now();
    do {
      memset(&st, 0, sizeof st);
      CU_ASSERT_EQUAL(taxi_lf_stats(p[i], &st), 0);
      if (st.threads == 2) break;
      util_sleep_ms(1);
    } while (util_elapsed_ms(start) < SETS_WAIT_MS);
    CU_ASSERT_EQUAL(st.threads, 2u);
  }
  /* The pools own their reactors: direct dispatch is refused. */
  CU_ASSERT_EQUAL(taxi_reactor_handle_events(r[0], 0), TAXI_EBUSY);
  CU_ASSERT_EQUAL(taxi_lf_sets_destroy(s), 0);
}

/* Zeroed options: one set per processor online, one thread each. */
static void test_create_defaults(void) {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  unsigned want = cpus > 0 ? (unsigned)cpus : 1u;
  if (want > TAXI_LF_SETS_MAX) want = TAXI_LF_SETS_MAX;
  taxi_lf_sets_options_t o = TAXI_LF_SETS_OPTIONS_INIT;
  o.backend = sets_backend;
  taxi_lf_sets_t *s = NULL;
  CU_ASSERT_EQUAL_FATAL(taxi_lf_sets_create(&s, &o), 0);
  CU_ASSERT_EQUAL(taxi_lf_sets_count(s), want);
  taxi_lf_stats_t st;
  taxi_time_t start = taxi_now();
  do {
    memset(&st, 0, sizeof st);
    CU_ASSERT_EQUAL(taxi_lf_stats(taxi_lf_sets_pool(s, 0), &st), 0);
    if (st.threads == 1) break;
    util_sleep_ms(1);
  } while (util_elapsed_ms(start) < SETS_WAIT_MS);
  CU_ASSERT_EQUAL(st.threads, 1u);
  CU_ASSERT_EQUAL(taxi_lf_sets_destroy(s), 0);
}

/* ---- 2. kernel balancing ------------------------------------------------- */

#define KERNEL_CONNS 64

static void test_kernel_balance(void) {
  taxi_lf_sets_t *s = sets_make(2, 2);
  sets_server_t *srv = server_new(s);
  atomic_store(&srv->balance, -1);
  unsigned port = 0;
  int rc = taxi_lf_sets_listen(s, "127.0.0.1", 0, TAXI_BALANCE_AUTO,
                               make_acceptor, srv, &port);
  CU_ASSERT(rc == TAXI_BALANCE_KERNEL || rc == TAXI_BALANCE_ACCEPTOR);
  if (rc != TAXI_BALANCE_KERNEL) {
    /* AUTO chose the acceptor: the kernel does not balance here, so asking
     * for it must be refused, without making a listener. */
    printf("\n    note: AUTO chose %d: the kernel does not balance here\n", rc);
    taxi_lf_sets_t *s2 = sets_make(2, 1);
    sets_server_t *srv2 = server_new(s2);
    CU_ASSERT_EQUAL(taxi_lf_sets_listen(s2, "127.0.0.1", 0, TAXI_BALANCE_KERNEL,
                                        make_acceptor, srv2, NULL),
                    TAXI_ENOTSUP);
    CU_ASSERT_EQUAL(atomic_load(&srv2->made), 0);
    sets_destroy(s2);
    free(srv2);
    sets_destroy(s);
    free(srv);
    return;
  }
  atomic_store(&srv->balance, TAXI_BALANCE_KERNEL);
  CU_ASSERT_NOT_EQUAL(port, 0u);
  /* A listener (and acceptor) per set, one for each. */
  CU_ASSERT_EQUAL(atomic_load(&srv->made), 2);
  CU_ASSERT_EQUAL(atomic_load(&srv->listener_bad_set), 0);
  if (atomic_load(&srv->made) == 2)
    CU_ASSERT_NOT_EQUAL(srv->acc[0].set, srv->acc[1].set);
  CU_ASSERT_EQUAL(sets_handles(taxi_lf_sets_reactor(s, 0)), 1u);
  CU_ASSERT_EQUAL(sets_handles(taxi_lf_sets_reactor(s, 1)), 1u);

  int fds[KERNEL_CONNS];
  int ok = clients_echo(port, fds, KERNEL_CONNS);
  CU_ASSERT_EQUAL(ok, KERNEL_CONNS);
  CU_ASSERT(wait_count(&srv->registered, KERNEL_CONNS));
  int a0 = atomic_load(&srv->accepted[0]);
  int a1 = atomic_load(&srv->accepted[1]);
  if (a0 == 0 || a1 == 0) printf("\n    accepted per set: %d, %d\n", a0, a1);
  CU_ASSERT(a0 > 0);
  CU_ASSERT(a1 > 0);
  CU_ASSERT_EQUAL(a0 + a1, KERNEL_CONNS);
  CU_ASSERT_EQUAL(atomic_load(&srv->wrong_set), 0);
  CU_ASSERT_EQUAL(atomic_load(&srv->register_errors), 0);
  CU_ASSERT_EQUAL(atomic_load(&srv->accept_errors), 0);
  CU_ASSERT_EQUAL(atomic_load(&srv->echo_errors), 0);
  CU_ASSERT_EQUAL(atomic_load(&srv->bad_index), 0);

  /* The clients hang up: every connection closes, once. */
  clients_close(fds, KERNEL_CONNS);
  CU_ASSERT(wait_count(&srv->closes, KERNEL_CONNS));
  sets_destroy(s);
  CU_ASSERT_EQUAL(atomic_load(&srv->closes), KERNEL_CONNS);
  int n = atomic_load(&srv->nconns);
  CU_ASSERT_EQUAL(n, KERNEL_CONNS);
  for (int i = 0; i < n && i < SETS_MAX_CONNS; i++)
    CU_ASSERT_EQUAL(atomic_load(&srv->conns[i].closes), 1);
  CU_ASSERT_EQUAL(atomic_load(&srv->listener_closes), 2);
  free(srv);
}

/* host NULL: every address, so 127.0.0.1 reaches it; port 0 reported. */
static void test_listen_any_host(void) {
  taxi_lf_sets_t *s = sets_make(2, 1);
  sets_server_t *srv = server_new(s);
  atomic_store(&srv->balance, -1);
  unsigned port = 0;
  int rc = taxi_lf_sets_listen(s, NULL, 0, TAXI_BALANCE_AUTO, make_acceptor,
                               srv, &port);
  CU_ASSERT_FATAL(rc == TAXI_BALANCE_KERNEL || rc == TAXI_BALANCE_ACCEPTOR);
  atomic_store(&srv->balance, rc);
  CU_ASSERT(port > 0 && port <= 65535);
  int fds[4];
  CU_ASSERT_EQUAL(clients_echo(port, fds, 4), 4);
  clients_close(fds, 4);
  CU_ASSERT(wait_count(&srv->closes, 4));
  sets_destroy(s);
  CU_ASSERT_EQUAL(atomic_load(&srv->listener_closes),
                  rc == TAXI_BALANCE_KERNEL ? 2 : 1);
  free(srv);
}

/* ---- 3. acceptor balancing ----------------------------------------------- */

#define ACCEPTOR_SETS 3
#define ACCEPTOR_CONNS 60

static void test_acceptor_balance(void) {
  taxi_lf_sets_t *s = sets_make(ACCEPTOR_SETS, 2);
  sets_server_t *srv = server_new(s);
  atomic_store(&srv->balance, TAXI_BALANCE_ACCEPTOR);
  unsigned port = 0;
  int rc = taxi_lf_sets_listen(s, "127.0.0.1", 0, TAXI_BALANCE_ACCEPTOR,
                               make_acceptor, srv, &port);
  CU_ASSERT_EQUAL_FATAL(rc, TAXI_BALANCE_ACCEPTOR);
  CU_ASSERT_NOT_EQUAL(port, 0u);
  /* One listener, on set 0. */
  CU_ASSERT_EQUAL(atomic_load(&srv->made), 1);
  CU_ASSERT_EQUAL(srv->acc[0].set, 0u);
  CU_ASSERT_EQUAL(sets_handles(taxi_lf_sets_reactor(s, 0)), 1u);

  /* Every client stays connected until all are counted, so no set's load
   * drops while the acceptor spreads them. */
  int fds[ACCEPTOR_CONNS];
  int ok = clients_echo(port, fds, ACCEPTOR_CONNS);
  CU_ASSERT_EQUAL(ok, ACCEPTOR_CONNS);
  CU_ASSERT(wait_count(&srv->registered, ACCEPTOR_CONNS));
  CU_ASSERT_EQUAL(atomic_load(&srv->register_errors), 0);
  CU_ASSERT_EQUAL(atomic_load(&srv->bad_index), 0);
  CU_ASSERT_EQUAL(atomic_load(&srv->echo_errors), 0);
  int sum = 0;
  size_t load[ACCEPTOR_SETS], lo = SIZE_MAX, hi = 0;
  for (unsigned i = 0; i < ACCEPTOR_SETS; i++) {
    int a = atomic_load(&srv->accepted[i]);
    load[i] = sets_handles(taxi_lf_sets_reactor(s, i));
    printf("%s set %u: %d connections, %zu handles", i ? ";" : "\n    ", i, a,
           load[i]);
    sum += a;
    CU_ASSERT(a >= 15 && a <= 25);
    /* The set's handles are its connections, plus the listener on 0. */
    CU_ASSERT_EQUAL(load[i], (size_t)a + (i == 0));
    if (load[i] < lo) lo = load[i];
    if (load[i] > hi) hi = load[i];
  }
  printf("\n");
  CU_ASSERT_EQUAL(sum, ACCEPTOR_CONNS);
  /* "The set that has the fewest handles": registered one by one with no
   * handle leaving, the handle counts never differ by more than one.  (The
   * listener is a handle of set 0 too, so the connections come out 19, 20,
   * 21 or 20, 20, 20 depending on the ties, not always 20 each.) */
  CU_ASSERT(hi - lo <= 1);

  clients_close(fds, ACCEPTOR_CONNS);
  CU_ASSERT(wait_count(&srv->closes, ACCEPTOR_CONNS));
  sets_destroy(s);
  CU_ASSERT_EQUAL(atomic_load(&srv->closes), ACCEPTOR_CONNS);
  CU_ASSERT_EQUAL(atomic_load(&srv->listener_closes), 1);
  free(srv);
}

/* taxi_lf_sets_register directly: fewest handles first, and its return
 * value is the set registered with. */
static void test_register_least_loaded(void) {
  taxi_lf_sets_t *s = sets_make(3, 1);
  sets_mtest_t t;
  mtest_init(&t, s);
  sets_mconn_t c[7];
  /* Load sets 0 and 2 with two handles each by hand. */
  mconn_init(&c[0], &t, 0);
  mconn_init(&c[1], &t, 1);
  mconn_init(&c[2], &t, 2);
  mconn_init(&c[3], &t, 3);
  CU_ASSERT_EQUAL(taxi_reactor_register(taxi_lf_sets_reactor(s, 0), c[0].sv[0],
                                        &c[0].h, TAXI_EV_READ),
                  0);
  CU_ASSERT_EQUAL(taxi_reactor_register(taxi_lf_sets_reactor(s, 0), c[1].sv[0],
                                        &c[1].h, TAXI_EV_READ),
                  0);
  CU_ASSERT_EQUAL(taxi_reactor_register(taxi_lf_sets_reactor(s, 2), c[2].sv[0],
                                        &c[2].h, TAXI_EV_READ),
                  0);
  CU_ASSERT_EQUAL(taxi_reactor_register(taxi_lf_sets_reactor(s, 2), c[3].sv[0],
                                        &c[3].h, TAXI_EV_READ),
                  0);
  /* Loads 2, 0, 2: the next two go to set 1 whatever the turn. */
  mconn_init(&c[4], &t, 4);
  mconn_init(&c[5], &t, 5);
  CU_ASSERT_EQUAL(taxi_lf_sets_register(s, c[4].sv[0], &c[4].h, TAXI_EV_READ),
                  1);
  CU_ASSERT_EQUAL(taxi_lf_sets_register(s, c[5].sv[0], &c[5].h, TAXI_EV_READ),
                  1);
  for (unsigned i = 0; i < 3; i++)
    CU_ASSERT_EQUAL(sets_handles(taxi_lf_sets_reactor(s, i)), 2u);
  mconn_init(&c[6], &t, 6);
  /* A handle that is not open, and bad events, are refused. */
  CU_ASSERT_EQUAL(taxi_lf_sets_register(s, -1, &c[6].h, TAXI_EV_READ),
                  TAXI_EBADF);
  CU_ASSERT_EQUAL(taxi_lf_sets_register(s, c[6].sv[0], &c[6].h, 0),
                  TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_sets_register(s, c[6].sv[0], NULL, TAXI_EV_READ),
                  TAXI_EINVAL);
  sets_destroy(s);
  for (int i = 0; i < 6; i++) {
    CU_ASSERT_EQUAL(atomic_load(&c[i].closes), 1);
    mconn_close_client(&c[i]);
  }
  if (c[6].sv[0] >= 0) close(c[6].sv[0]);
  mconn_close_client(&c[6]);
}

/* ---- 4. move while idle, from another thread ----------------------------- */

static void test_move_idle(void) {
  taxi_lf_sets_t *s = sets_make(2, 2);
  taxi_reactor_t *r0 = taxi_lf_sets_reactor(s, 0);
  taxi_reactor_t *r1 = taxi_lf_sets_reactor(s, 1);
  sets_mtest_t t;
  mtest_init(&t, s);
  sets_mconn_t *c = calloc(1, sizeof *c);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  mconn_init(c, &t, 7);

  CU_ASSERT_EQUAL_FATAL(
      taxi_reactor_register(r0, c->sv[0], &c->h, TAXI_EV_READ), 0);
  /* First it works on set 0. */
  CU_ASSERT_EQUAL(msg_send(c->sv[1], 7, 0), 0);
  CU_ASSERT_EQUAL(msg_expect(c->sv[1], 7, 0), 0);
  CU_ASSERT_EQUAL(atomic_load(&c->last_set), 0);
  /* The hook may still be on its way out: the move is immediate or
   * deferred, it returns 0 either way and completes soon. */
  size_t h0 = sets_handles(r0), h1 = sets_handles(r1);
  CU_ASSERT_EQUAL(h0, 1u);
  CU_ASSERT_EQUAL(h1, 0u);
  CU_ASSERT_EQUAL(taxi_reactor_move(r0, &c->h, r1), 0);
  CU_ASSERT(sets_wait_handles(r0, h0 - 1));
  CU_ASSERT(sets_wait_handles(r1, h1 + 1));

  /* Now set 1's pool serves it, and set 0 knows it no more. */
  int before0 = atomic_load(&c->on_set[0]);
  for (uint32_t k = 1; k <= 5; k++) {
    CU_ASSERT_EQUAL(msg_send(c->sv[1], 7, k), 0);
    CU_ASSERT_EQUAL(msg_expect(c->sv[1], 7, k), 0);
    CU_ASSERT_EQUAL(atomic_load(&c->last_set), 1);
  }
  CU_ASSERT_EQUAL(atomic_load(&c->on_set[0]), before0);
  CU_ASSERT(atomic_load(&c->on_set[1]) >= 1);
  CU_ASSERT_EQUAL(atomic_load(&c->outside), 0);
  CU_ASSERT_EQUAL(atomic_load(&c->errors), 0);
  CU_ASSERT_EQUAL(taxi_reactor_suspend(r0, &c->h), TAXI_ENOENT);
  CU_ASSERT_EQUAL(taxi_reactor_remove(r0, &c->h), TAXI_ENOENT);
  CU_ASSERT_EQUAL(taxi_reactor_move(r0, &c->h, r1), TAXI_ENOENT);

  /* A second handler that never had an event: the move is done before
   * taxi_reactor_move returns. */
  sets_mconn_t *d = calloc(1, sizeof *d);
  CU_ASSERT_PTR_NOT_NULL_FATAL(d);
  mconn_init(d, &t, 8);
  CU_ASSERT_EQUAL_FATAL(
      taxi_reactor_register(r0, d->sv[0], &d->h, TAXI_EV_READ), 0);
  h0 = sets_handles(r0);
  h1 = sets_handles(r1);
  CU_ASSERT_EQUAL(taxi_reactor_move(r0, &d->h, r1), 0);
  CU_ASSERT_EQUAL(sets_handles(r0), h0 - 1);
  CU_ASSERT_EQUAL(sets_handles(r1), h1 + 1);
  CU_ASSERT_EQUAL(msg_send(d->sv[1], 8, 0), 0);
  CU_ASSERT_EQUAL(msg_expect(d->sv[1], 8, 0), 0);
  CU_ASSERT_EQUAL(atomic_load(&d->last_set), 1);
  CU_ASSERT_EQUAL(atomic_load(&d->on_set[0]), 0);

  /* And back again, to set 0. */
  CU_ASSERT(wait_count(&d->frames, 1));
  CU_ASSERT_EQUAL(taxi_reactor_move(r1, &d->h, r0), 0);
  CU_ASSERT(sets_wait_handles(r0, h0));
  CU_ASSERT_EQUAL(msg_send(d->sv[1], 8, 1), 0);
  CU_ASSERT_EQUAL(msg_expect(d->sv[1], 8, 1), 0);
  CU_ASSERT_EQUAL(atomic_load(&d->last_set), 0);

  /* Removal from the reactor it is on now closes it, once. */
  CU_ASSERT_EQUAL(taxi_reactor_remove(r1, &c->h), 0);
  CU_ASSERT(wait_count(&c->closes, 1));
  sets_destroy(s);
  CU_ASSERT_EQUAL(atomic_load(&c->closes), 1);
  CU_ASSERT_EQUAL(atomic_load(&d->closes), 1);
  CU_ASSERT_EQUAL(atomic_load(&d->errors), 0);
  mconn_close_client(c);
  mconn_close_client(d);
  free(c);
  free(d);
}

/* ---- the suite ----------------------------------------------------------- */

static CU_TestInfo sets_tests[] = {
    {"create: count, reactors, pools, index", test_create_accessors},
    {"create: zeroed options give a set per processor", test_create_defaults},
    {"listen: kernel balancing spreads 64 connections", test_kernel_balance},
    {"listen: host NULL listens on every address", test_listen_any_host},
    {"listen: the acceptor spreads 60 connections evenly",
     test_acceptor_balance},
    {"register: the least loaded set first", test_register_least_loaded},
    {"move: an idle handler, from another thread", test_move_idle},
    {"move: from the handler's own hook, 1000 messages", test_move_from_hook},
    {"move: from another thread during traffic", test_move_during_traffic},
    {"move: a suspended handler stays suspended", test_move_suspended},
    {"move: deferred while the hook runs; a second is EBUSY",
     test_move_deferred_pending},
    {"move: removal cancels a deferred move", test_move_deferred_removed},
    {"move: bad input, timers", test_move_bad_input},
    {"move: EXCEPT to a backend without it", test_move_except_unsupported},
    {"sets: bad input", test_sets_bad_input},
    {"listen: an acceptor maker that gives up", test_listen_make_fails},
    {"sets: stop twice, wait", test_sets_shutdown},
    {"sets: destroy from a hook is EBUSY", test_destroy_from_hook},
    {"destroy: close hooks run once, listeners closed", test_destroy_closes},
    CU_TEST_INFO_NULL,
};

const taxi_test_suite_t *pools_sets_suite(const char *backend) {
  static taxi_test_suite_t suite;
  static char name[96];
  sets_backend = backend;
  snprintf(name, sizeof name, "pools[%s]: sets", backend);
  suite.name = name;
  suite.tests = sets_tests;
  suite.timeout_s = 120;
  return &suite;
}
