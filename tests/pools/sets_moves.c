/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/pools/sets_moves.c - moving handlers: from the handler's own
 * hook (deferred), during traffic, of suspended handlers, deferred moves
 * asked from another thread and cancelled by removal; close hooks at
 * destruction (tests of the sets suite, in sets.c).
 */
#define _GNU_SOURCE 1

#include "sets_helpers.h"

/* ---- 5. move from the handler's own hook (deferred) ---------------------- */

#define HOOK_SETS 3
#define HOOK_CONNS 20
#define HOOK_ROUNDS 50 /* 20 x 50 = 1000 messages */

void test_move_from_hook(void) {
  taxi_lf_sets_t *s = sets_make(HOOK_SETS, 2);
  sets_mtest_t t;
  mtest_init(&t, s);
  sets_mconn_t *c = calloc(HOOK_CONNS, sizeof *c);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  size_t start_load[HOOK_SETS] = {0}, end_load[HOOK_SETS] = {0};
  for (uint32_t i = 0; i < HOOK_CONNS; i++) {
    mconn_init(&c[i], &t, i);
    c[i].mode = MOVE_ON_FIRST;
    c[i].target = (int)((i + 1) % HOOK_SETS);
    start_load[i % HOOK_SETS]++;
    end_load[(i + 1) % HOOK_SETS]++;
    CU_ASSERT_EQUAL_FATAL(
        taxi_reactor_register(taxi_lf_sets_reactor(s, i % HOOK_SETS),
                              c[i].sv[0], &c[i].h, TAXI_EV_READ),
        0);
  }
  for (unsigned k = 0; k < HOOK_SETS; k++)
    CU_ASSERT_EQUAL(sets_handles(taxi_lf_sets_reactor(s, k)), start_load[k]);

  /* Round k: message k on every connection, then every echo.  The
   * connections run in parallel; each is in lock-step with its echoes, so
   * message 1 is sent once message 0 was handled (and its move asked). */
  int echoed = 0, failed = 0;
  for (uint32_t k = 0; k < HOOK_ROUNDS && !failed; k++) {
    for (uint32_t i = 0; i < HOOK_CONNS; i++)
      if (msg_send(c[i].sv[1], i, k) != 0) failed++;
    for (uint32_t i = 0; i < HOOK_CONNS; i++) {
      int rc = msg_expect(c[i].sv[1], i, k);
      if (rc == 0) {
        echoed++;
      } else {
        if (!failed)
          printf("\n    connection %u, message %u: %s\n", i, k,
                 rc == -2 ? "wrong echo" : "no echo");
        failed++;
      }
    }
  }
  CU_ASSERT_EQUAL(failed, 0);
  CU_ASSERT_EQUAL(echoed, HOOK_CONNS * HOOK_ROUNDS);
  /* Every move has completed: later messages came from the target. */
  for (unsigned k = 0; k < HOOK_SETS; k++)
    CU_ASSERT_EQUAL(sets_handles(taxi_lf_sets_reactor(s, k)), end_load[k]);

  sets_destroy(s); /* joins the threads: the hook-only state is ours now */
  int wrong = 0, bad_rc = 0, bad_first = 0, errors = 0;
  for (uint32_t i = 0; i < HOOK_CONNS; i++) {
    if (c[i].move_rc != 0) bad_rc++;
    if (c[i].first_set != (int)(i % HOOK_SETS)) bad_first++;
    wrong += atomic_load(&c[i].wrong_set);
    errors += atomic_load(&c[i].errors);
    CU_ASSERT_EQUAL(c[i].next_seq, (uint32_t)HOOK_ROUNDS);
    CU_ASSERT_EQUAL(atomic_load(&c[i].frames), HOOK_ROUNDS);
    CU_ASSERT_EQUAL(atomic_load(&c[i].outside), 0);
    CU_ASSERT_EQUAL(atomic_load(&c[i].closes), 1);
    /* One hook on the first set (message 0), the rest on the target. */
    CU_ASSERT_EQUAL(atomic_load(&c[i].on_set[i % HOOK_SETS]), 1);
    CU_ASSERT(atomic_load(&c[i].on_set[c[i].target]) >= HOOK_ROUNDS - 1);
    if (c[i].move_rc != 0 && bad_rc == 1)
      printf("\n    connection %u: taxi_reactor_move in its hook = %d (%s)\n",
             i, c[i].move_rc, taxi_error_name(c[i].move_rc));
    mconn_close_client(&c[i]);
  }
  CU_ASSERT_EQUAL(bad_rc, 0);
  CU_ASSERT_EQUAL(bad_first, 0);
  CU_ASSERT_EQUAL(wrong, 0);
  CU_ASSERT_EQUAL(errors, 0);
  free(c);
}

/* Moves from another thread while traffic flows.  A mover thread moves
 * each handler to another set as soon as one of its hooks has run on the
 * set it was last sent to (so taxi_reactor_move is always given the
 * reactor the handler is on, or is about to leave: it must return 0),
 * often while that hook still runs (deferred), sometimes when idle.
 * Every message must be echoed once, in order. */

#define MOVER_SETS 3
#define MOVER_CONNS 8
#define MOVER_ROUNDS 150

typedef struct sets_mover {
  taxi_lf_sets_t *s;
  sets_mconn_t *c;
  atomic_int stop;
  atomic_int moves, bad_rc, last_bad_rc;
  uint64_t rand;
} sets_mover_t;

static void *mover_main(void *arg) {
  sets_mover_t *m = arg;
  while (!atomic_load(&m->stop)) {
    int idle = 1;
    for (int i = 0; i < MOVER_CONNS; i++) {
      sets_mconn_t *c = &m->c[i];
      int where = atomic_load(&c->where);
      if (where < 0 || !(where & 1)) continue;
      idle = 0;
      int cur = where / 2;
      m->rand = m->rand * 6364136223846793005ull + 1442695040888963407ull;
      int next =
          (cur + 1 + (int)((m->rand >> 33) % (MOVER_SETS - 1))) % MOVER_SETS;
      atomic_store(&c->where, 2 * next);
      int rc =
          taxi_reactor_move(taxi_lf_sets_reactor(m->s, (unsigned)cur), &c->h,
                            taxi_lf_sets_reactor(m->s, (unsigned)next));
      if (rc == 0) {
        atomic_fetch_add(&m->moves, 1);
      } else {
        atomic_fetch_add(&m->bad_rc, 1);
        atomic_store(&m->last_bad_rc, rc);
      }
    }
    if (idle) util_sleep_ms(1);
  }
  return NULL;
}

void test_move_during_traffic(void) {
  taxi_lf_sets_t *s = sets_make(MOVER_SETS, 2);
  sets_mtest_t t;
  mtest_init(&t, s);
  sets_mconn_t *c = calloc(MOVER_CONNS, sizeof *c);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  for (uint32_t i = 0; i < MOVER_CONNS; i++) {
    mconn_init(&c[i], &t, i);
    atomic_store(&c[i].where, (int)(2 * (i % MOVER_SETS)));
    CU_ASSERT_EQUAL_FATAL(
        taxi_reactor_register(taxi_lf_sets_reactor(s, i % MOVER_SETS),
                              c[i].sv[0], &c[i].h, TAXI_EV_READ),
        0);
  }
  sets_mover_t m;
  memset(&m, 0, sizeof m);
  m.s = s;
  m.c = c;
  m.rand = 0x5e75;
  atomic_init(&m.stop, 0);
  atomic_init(&m.moves, 0);
  atomic_init(&m.bad_rc, 0);
  atomic_init(&m.last_bad_rc, 0);
  pthread_t tid;
  CU_ASSERT_EQUAL_FATAL(pthread_create(&tid, NULL, mover_main, &m), 0);

  int echoed = 0, failed = 0;
  for (uint32_t k = 0; k < MOVER_ROUNDS && !failed; k++) {
    for (uint32_t i = 0; i < MOVER_CONNS; i++)
      if (msg_send(c[i].sv[1], i, k) != 0) failed++;
    for (uint32_t i = 0; i < MOVER_CONNS; i++) {
      int rc = msg_expect(c[i].sv[1], i, k);
      if (rc == 0) {
        echoed++;
      } else {
        if (!failed)
          printf("\n    connection %u, message %u: %s\n", i, k,
                 rc == -2 ? "wrong echo" : "no echo");
        failed++;
      }
    }
  }
  CU_ASSERT_EQUAL(failed, 0);
  CU_ASSERT_EQUAL(echoed, MOVER_CONNS * MOVER_ROUNDS);
  /* Each connection's first hook ran on its first set: it is moved at
   * least once whatever the scheduling. */
  CU_ASSERT(wait_count(&m.moves, MOVER_CONNS));
  atomic_store(&m.stop, 1);
  pthread_join(tid, NULL);
  CU_ASSERT_EQUAL(atomic_load(&m.bad_rc), 0);
  if (atomic_load(&m.bad_rc))
    printf("\n    %d moves failed, the last with %d (%s)\n",
           atomic_load(&m.bad_rc), atomic_load(&m.last_bad_rc),
           taxi_error_name(atomic_load(&m.last_bad_rc)));
  /* Once the moves in progress are done every handler is somewhere. */
  taxi_time_t start = taxi_now();
  size_t total;
  do {
    total = 0;
    for (unsigned k = 0; k < MOVER_SETS; k++)
      total += sets_handles(taxi_lf_sets_reactor(s, k));
    if (total == MOVER_CONNS) break;
    util_sleep_ms(1);
  } while (util_elapsed_ms(start) < SETS_WAIT_MS);
  CU_ASSERT_EQUAL(total, (size_t)MOVER_CONNS);
  /* And still works where it is. */
  for (uint32_t i = 0; i < MOVER_CONNS; i++) {
    CU_ASSERT_EQUAL(msg_send(c[i].sv[1], i, MOVER_ROUNDS), 0);
    CU_ASSERT_EQUAL(msg_expect(c[i].sv[1], i, MOVER_ROUNDS), 0);
  }
  sets_destroy(s);
  for (uint32_t i = 0; i < MOVER_CONNS; i++) {
    CU_ASSERT_EQUAL(atomic_load(&c[i].errors), 0);
    CU_ASSERT_EQUAL(atomic_load(&c[i].frames), MOVER_ROUNDS + 1);
    CU_ASSERT_EQUAL(atomic_load(&c[i].outside), 0);
    CU_ASSERT_EQUAL(atomic_load(&c[i].closes), 1);
    mconn_close_client(&c[i]);
  }
  printf("\n    %d moves\n", atomic_load(&m.moves));
  free(c);
}

/* ---- 6. a suspended handler stays suspended on the target ---------------- */

void test_move_suspended(void) {
  taxi_lf_sets_t *s = sets_make(2, 2);
  taxi_reactor_t *r0 = taxi_lf_sets_reactor(s, 0);
  taxi_reactor_t *r1 = taxi_lf_sets_reactor(s, 1);
  sets_mtest_t t;
  mtest_init(&t, s);
  sets_mconn_t *c = calloc(1, sizeof *c);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  mconn_init(c, &t, 3);
  CU_ASSERT_EQUAL_FATAL(
      taxi_reactor_register(r0, c->sv[0], &c->h, TAXI_EV_READ), 0);
  CU_ASSERT_EQUAL(taxi_reactor_suspend(r0, &c->h), 0);
  /* Data arrives while it is suspended: nothing is dispatched. */
  CU_ASSERT_EQUAL(msg_send(c->sv[1], 3, 0), 0);
  CU_ASSERT_EQUAL(taxi_reactor_move(r0, &c->h, r1), 0);
  CU_ASSERT_EQUAL(sets_handles(r0), 0u);
  CU_ASSERT_EQUAL(sets_handles(r1), 1u);
  util_sleep_ms(SETS_QUIET_MS);
  CU_ASSERT_EQUAL(atomic_load(&c->inputs), 0);
  /* Resuming on the old reactor finds nothing; on the new one it runs,
   * in set 1's pool, and reports the data that came meanwhile. */
  CU_ASSERT_EQUAL(taxi_reactor_resume(r0, &c->h), TAXI_ENOENT);
  util_sleep_ms(SETS_QUIET_MS / 3);
  CU_ASSERT_EQUAL(atomic_load(&c->inputs), 0);
  CU_ASSERT_EQUAL(taxi_reactor_resume(r1, &c->h), 0);
  CU_ASSERT_EQUAL(msg_expect(c->sv[1], 3, 0), 0);
  CU_ASSERT_EQUAL(atomic_load(&c->last_set), 1);
  CU_ASSERT_EQUAL(atomic_load(&c->on_set[0]), 0);

  /* And the other way: suspended on r1 after traffic, moved back to r0,
   * still suspended there until resumed on r0. */
  CU_ASSERT(wait_count(&c->frames, 1));
  CU_ASSERT_EQUAL(taxi_reactor_suspend(r1, &c->h), 0);
  /* Its hook may be on its way out: wait for the move to complete. */
  CU_ASSERT_EQUAL(taxi_reactor_move(r1, &c->h, r0), 0);
  CU_ASSERT(sets_wait_handles(r0, 1));
  CU_ASSERT(sets_wait_handles(r1, 0));
  int inputs = atomic_load(&c->inputs);
  CU_ASSERT_EQUAL(msg_send(c->sv[1], 3, 1), 0);
  util_sleep_ms(SETS_QUIET_MS);
  CU_ASSERT_EQUAL(atomic_load(&c->inputs), inputs);
  CU_ASSERT_EQUAL(taxi_reactor_resume(r0, &c->h), 0);
  CU_ASSERT_EQUAL(msg_expect(c->sv[1], 3, 1), 0);
  CU_ASSERT_EQUAL(atomic_load(&c->last_set), 0);
  sets_destroy(s);
  CU_ASSERT_EQUAL(atomic_load(&c->closes), 1);
  CU_ASSERT_EQUAL(atomic_load(&c->errors), 0);
  mconn_close_client(c);
  free(c);
}

/* ---- deferred moves asked from another thread ---------------------------- */

/* The hook is blocked: the move is deferred (0), a second one is refused
 * (EBUSY), and the first completes when the hook returns. */
void test_move_deferred_pending(void) {
  taxi_lf_sets_t *s = sets_make(3, 2);
  taxi_reactor_t *r0 = taxi_lf_sets_reactor(s, 0);
  taxi_reactor_t *r1 = taxi_lf_sets_reactor(s, 1);
  taxi_reactor_t *r2 = taxi_lf_sets_reactor(s, 2);
  sets_mtest_t t;
  mtest_init(&t, s);
  sets_mconn_t *c = calloc(1, sizeof *c);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  mconn_init(c, &t, 5);
  c->gate = 1;
  CU_ASSERT_EQUAL_FATAL(
      taxi_reactor_register(r0, c->sv[0], &c->h, TAXI_EV_READ), 0);
  CU_ASSERT_EQUAL(msg_send(c->sv[1], 5, 0), 0);
  CU_ASSERT_FATAL(wait_count(&t.gate_entered, 1));
  CU_ASSERT_EQUAL(taxi_reactor_move(r0, &c->h, r1), 0);
  /* Deferred: still on r0 while the hook runs. */
  CU_ASSERT_EQUAL(sets_handles(r0), 1u);
  CU_ASSERT_EQUAL(sets_handles(r1), 0u);
  CU_ASSERT_EQUAL(taxi_reactor_move(r0, &c->h, r1), TAXI_EBUSY);
  CU_ASSERT_EQUAL(taxi_reactor_move(r0, &c->h, r2), TAXI_EBUSY);
  atomic_store(&t.gate_open, 1);
  CU_ASSERT_EQUAL(msg_expect(c->sv[1], 5, 0), 0);
  CU_ASSERT(sets_wait_handles(r1, 1));
  CU_ASSERT(sets_wait_handles(r0, 0));
  CU_ASSERT_EQUAL(sets_handles(r2), 0u);
  CU_ASSERT_EQUAL(atomic_load(&t.gate_timeouts), 0);
  for (uint32_t k = 1; k <= 3; k++) {
    CU_ASSERT_EQUAL(msg_send(c->sv[1], 5, k), 0);
    CU_ASSERT_EQUAL(msg_expect(c->sv[1], 5, k), 0);
    CU_ASSERT_EQUAL(atomic_load(&c->last_set), 1);
  }
  CU_ASSERT_EQUAL(atomic_load(&c->on_set[0]), 1);
  CU_ASSERT_EQUAL(atomic_load(&c->on_set[2]), 0);
  sets_destroy(s);
  CU_ASSERT_EQUAL(atomic_load(&c->closes), 1);
  CU_ASSERT_EQUAL(atomic_load(&c->errors), 0);
  mconn_close_client(c);
  free(c);
}

/* A hook returning -1 removes its handler: the deferred move is cancelled
 * and the close hook runs once; the target never gets it. */
void test_move_deferred_removed(void) {
  taxi_lf_sets_t *s = sets_make(2, 2);
  taxi_reactor_t *r0 = taxi_lf_sets_reactor(s, 0);
  taxi_reactor_t *r1 = taxi_lf_sets_reactor(s, 1);
  sets_mtest_t t;
  mtest_init(&t, s);
  sets_mconn_t *c = calloc(1, sizeof *c);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  mconn_init(c, &t, 6);
  c->gate = 1;
  c->hook_ret = -1;
  CU_ASSERT_EQUAL_FATAL(
      taxi_reactor_register(r0, c->sv[0], &c->h, TAXI_EV_READ), 0);
  CU_ASSERT_EQUAL(msg_send(c->sv[1], 6, 0), 0);
  CU_ASSERT_FATAL(wait_count(&t.gate_entered, 1));
  CU_ASSERT_EQUAL(taxi_reactor_move(r0, &c->h, r1), 0);
  atomic_store(&t.gate_open, 1);
  CU_ASSERT(wait_count(&c->closes, 1));
  CU_ASSERT(sets_wait_handles(r0, 0));
  util_sleep_ms(SETS_QUIET_MS / 3);
  CU_ASSERT_EQUAL(sets_handles(r1), 0u);
  CU_ASSERT_EQUAL(taxi_reactor_remove(r1, &c->h), TAXI_ENOENT);
  CU_ASSERT_EQUAL(taxi_reactor_remove(r0, &c->h), TAXI_ENOENT);
  /* The echo went out before the hook returned; then the close hook
   * closed the handler's end. */
  CU_ASSERT_EQUAL(msg_expect(c->sv[1], 6, 0), 0);
  char byte;
  CU_ASSERT_EQUAL(recv(c->sv[1], &byte, 1, 0), 0);
  sets_destroy(s);
  CU_ASSERT_EQUAL(atomic_load(&c->closes), 1);
  mconn_close_client(c);
  free(c);
}

/* ---- 8. close hooks at destruction --------------------------------------- */

#define DESTROY_CONNS 24

void test_destroy_closes(void) {
  taxi_lf_sets_t *s = sets_make(3, 2);
  sets_server_t *srv = server_new(s);
  atomic_store(&srv->balance, -1);
  unsigned port = 0;
  int rc = taxi_lf_sets_listen(s, "127.0.0.1", 0, TAXI_BALANCE_AUTO,
                               make_acceptor, srv, &port);
  CU_ASSERT_FATAL(rc == TAXI_BALANCE_KERNEL || rc == TAXI_BALANCE_ACCEPTOR);
  atomic_store(&srv->balance, rc);
  int listeners = rc == TAXI_BALANCE_KERNEL ? 3 : 1;
  CU_ASSERT_EQUAL(atomic_load(&srv->made), listeners);

  int fds[DESTROY_CONNS];
  CU_ASSERT_EQUAL(clients_echo(port, fds, DESTROY_CONNS), DESTROY_CONNS);
  CU_ASSERT(wait_count(&srv->registered, DESTROY_CONNS));
  CU_ASSERT_EQUAL(atomic_load(&srv->closes), 0);
  CU_ASSERT_EQUAL(atomic_load(&srv->listener_closes), 0);

  sets_destroy(s); /* the connections are open */
  CU_ASSERT_EQUAL(atomic_load(&srv->closes), DESTROY_CONNS);
  CU_ASSERT_EQUAL(atomic_load(&srv->listener_closes), listeners);
  int n = atomic_load(&srv->nconns);
  CU_ASSERT_EQUAL(n, DESTROY_CONNS);
  for (int i = 0; i < n && i < SETS_MAX_CONNS; i++)
    CU_ASSERT_EQUAL(atomic_load(&srv->conns[i].closes), 1);
  for (int i = 0; i < listeners; i++)
    CU_ASSERT_EQUAL(atomic_load(&srv->acc[i].closes), 1);
  /* The close hooks closed the server's ends: the clients see the end. */
  int eofs = 0;
  for (int i = 0; i < DESTROY_CONNS; i++) {
    char b;
    if (fds[i] >= 0 && recv(fds[i], &b, 1, 0) == 0) eofs++;
  }
  CU_ASSERT_EQUAL(eofs, DESTROY_CONNS);
  /* And the listeners are gone: nobody accepts on the port any more. */
  int late = client_connect(port);
  if (late >= 0) {
    /* A free port in the ephemeral range can connect to itself (TCP
     * simultaneous open): that is not a listener. */
    struct sockaddr_in self;
    socklen_t len = sizeof self;
    if (getsockname(late, (struct sockaddr *)&self, &len) == 0 &&
        ntohs(self.sin_port) == port) {
      close(late);
      late = -1;
    }
  }
  CU_ASSERT(late < 0);
  if (late >= 0) close(late);
  clients_close(fds, DESTROY_CONNS);
  free(srv);
}
