/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/pools/sets_bad_input.c - the handle sets' and moves' bad input:
 * every misuse gets a clear TAXI_E* code (tests of the sets suite, in
 * sets.c).
 */
#define _GNU_SOURCE 1

#include "sets_helpers.h"

/* ---- 7. bad input -------------------------------------------------------- */

void test_move_bad_input(void) {
  taxi_lf_sets_t *s = sets_make(2, 1);
  taxi_reactor_t *r0 = taxi_lf_sets_reactor(s, 0);
  taxi_reactor_t *r1 = taxi_lf_sets_reactor(s, 1);
  sets_mtest_t t;
  mtest_init(&t, s);
  sets_mconn_t *c = calloc(3, sizeof *c);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  mconn_init(&c[0], &t, 0);
  mconn_init(&c[1], &t, 1);
  CU_ASSERT_EQUAL_FATAL(
      taxi_reactor_register(r0, c[0].sv[0], &c[0].h, TAXI_EV_READ), 0);

  CU_ASSERT_EQUAL(taxi_reactor_move(NULL, &c[0].h, r1), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_reactor_move(r0, NULL, r1), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_reactor_move(r0, &c[0].h, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_reactor_move(r0, &c[0].h, r0), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_reactor_move(NULL, NULL, NULL), TAXI_EINVAL);
  /* Not registered with `from`: never registered, or on the other one. */
  CU_ASSERT_EQUAL(taxi_reactor_move(r0, &c[1].h, r1), TAXI_ENOENT);
  CU_ASSERT_EQUAL(taxi_reactor_move(r1, &c[0].h, r0), TAXI_ENOENT);
  /* None of that disturbed it. */
  CU_ASSERT_EQUAL(sets_handles(r0), 1u);
  CU_ASSERT_EQUAL(sets_handles(r1), 0u);
  CU_ASSERT_EQUAL(msg_send(c[0].sv[1], 0, 0), 0);
  CU_ASSERT_EQUAL(msg_expect(c[0].sv[1], 0, 0), 0);
  CU_ASSERT_EQUAL(atomic_load(&c[0].last_set), 0);

  /* A handler with a timer only (no handle) has nothing to move. */
  taxi_timer_t tm1;
  taxi_timer_init(&tm1);
  CU_ASSERT_EQUAL(taxi_reactor_schedule(r1, &tm1, &c[1].h,
                                        3600 * TAXI_NSEC_PER_SEC, 0, NULL),
                  0);
  CU_ASSERT_EQUAL(taxi_reactor_move(r1, &c[1].h, r0), TAXI_ENOENT);
  CU_ASSERT_EQUAL(taxi_reactor_cancel(r1, &tm1), 0);
  CU_ASSERT_EQUAL(taxi_reactor_remove(r1, &c[1].h), 0);
  CU_ASSERT(wait_count(&c[1].closes, 1));

  /* A handler with a scheduled timer: EBUSY; it stays, and so does the
   * timer, which still fires (in set 1's pool). */
  mconn_init(&c[2], &t, 2);
  CU_ASSERT_EQUAL_FATAL(
      taxi_reactor_register(r1, c[2].sv[0], &c[2].h, TAXI_EV_READ), 0);
  taxi_timer_t tm;
  taxi_timer_init(&tm);
  CU_ASSERT_EQUAL(taxi_reactor_schedule(r1, &tm, &c[2].h,
                                        100 * TAXI_NSEC_PER_MSEC, 0, NULL),
                  0);
  CU_ASSERT_EQUAL(taxi_reactor_move(r1, &c[2].h, r0), TAXI_EBUSY);
  CU_ASSERT_EQUAL(sets_handles(r1), 1u);
  CU_ASSERT_EQUAL(sets_handles(r0), 1u);
  CU_ASSERT(wait_count(&c[2].timeouts, 1));
  CU_ASSERT_EQUAL(atomic_load(&c[2].timeout_set), 1);
  CU_ASSERT_EQUAL(msg_send(c[2].sv[1], 2, 0), 0);
  CU_ASSERT_EQUAL(msg_expect(c[2].sv[1], 2, 0), 0);
  CU_ASSERT_EQUAL(atomic_load(&c[2].last_set), 1);
  /* Once the one-shot timer is done the handler may move (the timer's
   * bookkeeping ends just after its hook: retry briefly on EBUSY). */
  int rc;
  taxi_time_t start = taxi_now();
  while ((rc = taxi_reactor_move(r1, &c[2].h, r0)) == TAXI_EBUSY &&
         util_elapsed_ms(start) < SETS_WAIT_MS)
    util_sleep_ms(1);
  CU_ASSERT_EQUAL(rc, 0);
  CU_ASSERT(sets_wait_handles(r0, 2));
  CU_ASSERT_EQUAL(msg_send(c[2].sv[1], 2, 1), 0);
  CU_ASSERT_EQUAL(msg_expect(c[2].sv[1], 2, 1), 0);
  CU_ASSERT_EQUAL(atomic_load(&c[2].last_set), 0);
  CU_ASSERT_EQUAL(atomic_load(&c[2].timeouts), 1);

  sets_destroy(s);
  for (int i = 0; i < 3; i++) {
    CU_ASSERT_EQUAL(atomic_load(&c[i].closes), 1);
    CU_ASSERT_EQUAL(atomic_load(&c[i].errors), 0);
    mconn_close_client(&c[i]);
  }
  free(c);
}

/* A target whose backend cannot watch EXCEPT refuses the move. */
void test_move_except_unsupported(void) {
  const char *lacking = NULL;
  size_t n = taxi_backend_count();
  for (size_t i = 0; i < n && !lacking; i++) {
    taxi_backend_info_t info;
    if (taxi_backend_info(&info, i) == 0 && info.available &&
        !(info.caps & TAXI_CAP_EXCEPT))
      lacking = info.name;
  }
  taxi_lf_sets_t *s = sets_make(1, 1);
  taxi_reactor_t *r0 = taxi_lf_sets_reactor(s, 0);
  unsigned caps0 = 0;
  CU_ASSERT_EQUAL(taxi_reactor_caps(r0, &caps0), 0);
  if (!(caps0 & TAXI_CAP_EXCEPT) || !lacking) {
    printf("\n    note: skipped: %s\n",
           !(caps0 & TAXI_CAP_EXCEPT)
               ? "this backend cannot watch EXCEPT itself"
               : "no backend without TAXI_CAP_EXCEPT is compiled in and "
                 "works here");
    sets_destroy(s);
    return;
  }
  taxi_reactor_t *rx = NULL;
  CU_ASSERT_EQUAL_FATAL(util_reactor_create(&rx, lacking), 0);
  sets_mtest_t t;
  mtest_init(&t, s);
  sets_mconn_t *c = calloc(1, sizeof *c);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  mconn_init(c, &t, 0);
  CU_ASSERT_EQUAL_FATAL(
      taxi_reactor_register(r0, c->sv[0], &c->h, TAXI_EV_READ | TAXI_EV_EXCEPT),
      0);
  CU_ASSERT_EQUAL(taxi_reactor_move(r0, &c->h, rx), TAXI_ENOTSUP);
  CU_ASSERT_EQUAL(sets_handles(r0), 1u);
  CU_ASSERT_EQUAL(sets_handles(rx), 0u);
  /* Watching READ only, it may go. */
  CU_ASSERT_EQUAL(taxi_reactor_modify(r0, &c->h, TAXI_EV_READ), 0);
  CU_ASSERT_EQUAL(taxi_reactor_move(r0, &c->h, rx), 0);
  CU_ASSERT_EQUAL(sets_handles(rx), 1u);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(rx), 0);
  CU_ASSERT_EQUAL(atomic_load(&c->closes), 1);
  sets_destroy(s);
  mconn_close_client(c);
  free(c);
}

void test_sets_bad_input(void) {
  taxi_lf_sets_options_t o = TAXI_LF_SETS_OPTIONS_INIT;
  o.backend = sets_backend;
  taxi_lf_sets_t *s = (taxi_lf_sets_t *)&o; /* must be reset to NULL */
  o.sets = TAXI_LF_SETS_MAX + 1;
  CU_ASSERT_EQUAL(taxi_lf_sets_create(&s, &o), TAXI_EINVAL);
  CU_ASSERT_PTR_NULL(s);
  o.sets = 1;
  o.threads_per_set = TAXI_LF_MAX_THREADS + 1;
  CU_ASSERT_EQUAL(taxi_lf_sets_create(&s, &o), TAXI_EINVAL);
  CU_ASSERT_PTR_NULL(s);
  o.threads_per_set = 1;
  taxi_lf_options_t po = TAXI_LF_OPTIONS_INIT;
  po.promotion = (taxi_promotion_t)99;
  o.pool = &po;
  CU_ASSERT_EQUAL(taxi_lf_sets_create(&s, &o), TAXI_EINVAL);
  CU_ASSERT_PTR_NULL(s);
  po.promotion = TAXI_PROMOTE_LIFO;
  CU_ASSERT_EQUAL(taxi_lf_sets_create(NULL, &o), TAXI_EINVAL);
  o.backend = "no-such-backend";
  CU_ASSERT_EQUAL(taxi_lf_sets_create(&s, &o), TAXI_ENOBACKEND);
  CU_ASSERT_PTR_NULL(s);

  CU_ASSERT_EQUAL(taxi_lf_sets_destroy(NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_sets_stop(NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_sets_count(NULL), 0u);
  CU_ASSERT_PTR_NULL(taxi_lf_sets_reactor(NULL, 0));
  CU_ASSERT_PTR_NULL(taxi_lf_sets_pool(NULL, 0));
  CU_ASSERT_EQUAL(taxi_lf_sets_index(NULL, NULL), -1);
  taxi_handler_t h;
  taxi_handler_init(&h, &conn_ops);
  CU_ASSERT_EQUAL(taxi_lf_sets_register(NULL, 0, &h, TAXI_EV_READ),
                  TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_sets_listen(NULL, "127.0.0.1", 0, TAXI_BALANCE_AUTO,
                                      make_acceptor, NULL, NULL),
                  TAXI_EINVAL);

  s = sets_make(2, 1);
  sets_server_t *srv = server_new(s);
  unsigned port = 4242;
  CU_ASSERT_EQUAL(taxi_lf_sets_listen(s, "127.0.0.1", 0, TAXI_BALANCE_AUTO,
                                      NULL, srv, &port),
                  TAXI_EINVAL);
  CU_ASSERT_EQUAL(
      taxi_lf_sets_listen(s, "127.0.0.1", 0, 7, make_acceptor, srv, &port),
      TAXI_EINVAL);
  CU_ASSERT_EQUAL(
      taxi_lf_sets_listen(s, "127.0.0.1", 0, -1, make_acceptor, srv, &port),
      TAXI_EINVAL);
  /* The address: numeric only (names are not resolved, as everywhere a
   * listening socket is made), the port 0..65535; the detail says which. */
  CU_ASSERT_EQUAL(taxi_lf_sets_listen(s, "localhost", 0, TAXI_BALANCE_AUTO,
                                      make_acceptor, srv, &port),
                  TAXI_EBADADDR);
  CU_ASSERT_PTR_NOT_NULL(strstr(taxi_error_detail(), "host"));
  CU_ASSERT_EQUAL(taxi_lf_sets_listen(s, "127.0.0.1", 65536, TAXI_BALANCE_AUTO,
                                      make_acceptor, srv, &port),
                  TAXI_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(taxi_error_detail(), "port"));
  CU_ASSERT_EQUAL(port, 4242u); /* not reported on failure */
  CU_ASSERT_EQUAL(atomic_load(&srv->made), 0);
  for (unsigned i = 0; i < 2; i++)
    CU_ASSERT_EQUAL(sets_handles(taxi_lf_sets_reactor(s, i)), 0u);
  sets_destroy(s);
  free(srv);
}

/* An acceptor maker that gives up leaves no listener behind. */
static taxi_handler_t *make_acceptor_second_fails(unsigned set,
                                                  taxi_handle_t listener,
                                                  void *arg) {
  sets_server_t *srv = arg;
  if (atomic_load(&srv->made) >= 1) {
    atomic_fetch_add(&srv->made, 1);
    return NULL;
  }
  return make_acceptor(set, listener, arg);
}

void test_listen_make_fails(void) {
  taxi_lf_sets_t *s = sets_make(2, 1);
  sets_server_t *srv = server_new(s);
  atomic_store(&srv->balance, TAXI_BALANCE_KERNEL);
  int rc = taxi_lf_sets_listen(s, "127.0.0.1", 0, TAXI_BALANCE_AUTO,
                               make_acceptor_second_fails, srv, NULL);
  if (atomic_load(&srv->made) < 2) {
    /* One listener only (acceptor balancing): the maker did not fail. */
    CU_ASSERT_EQUAL(rc, TAXI_BALANCE_ACCEPTOR);
    printf(
        "\n    note: one listener only; maker failure on the second "
        "listener not reachable here\n");
  } else {
    CU_ASSERT_EQUAL(rc, TAXI_EINVAL);
    /* The first acceptor was removed: its close hook closed its listener. */
    CU_ASSERT(wait_count(&srv->listener_closes, 1));
    for (unsigned i = 0; i < 2; i++)
      CU_ASSERT(sets_wait_handles(taxi_lf_sets_reactor(s, i), 0));
  }
  sets_destroy(s);
  if (atomic_load(&srv->made) >= 2)
    CU_ASSERT_EQUAL(atomic_load(&srv->listener_closes), 1);
  free(srv);
}

/* Stop twice: the second says so; wait returns at once after a stop and
 * runs out of time before one; destroy still works. */
void test_sets_shutdown(void) {
  taxi_lf_sets_t *s = sets_make(2, 2);
  CU_ASSERT_EQUAL(taxi_lf_sets_wait(s, 0), TAXI_ETIMEDOUT);
  CU_ASSERT_EQUAL(taxi_lf_sets_wait(s, 20), TAXI_ETIMEDOUT);
  CU_ASSERT_EQUAL(taxi_lf_sets_wait(NULL, 0), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_sets_stop(s), 0);
  CU_ASSERT_EQUAL(taxi_lf_sets_wait(s, -1), TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(taxi_lf_sets_wait(s, 0), TAXI_ESTOPPED);
  for (unsigned i = 0; i < 2; i++) {
    taxi_lf_stats_t st;
    memset(&st, 0, sizeof st);
    CU_ASSERT_EQUAL(taxi_lf_stats(taxi_lf_sets_pool(s, i), &st), 0);
    CU_ASSERT_EQUAL(st.threads, 0u);
  }
  CU_ASSERT_EQUAL(taxi_lf_sets_stop(s), TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(taxi_lf_sets_destroy(s), 0);
}

/* Destroy from a hook of one of the sets: EBUSY. */
typedef struct sets_self {
  taxi_handler_t h;
  int sv[2];
  taxi_lf_sets_t *s;
  atomic_int rc, done;
} sets_self_t;

static int self_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  sets_self_t *x = TAXI_CONTAINER_OF(h, sets_self_t, h);
  (void)ev;
  util_drain(fd);
  atomic_store(&x->rc, taxi_lf_sets_destroy(x->s));
  atomic_store(&x->done, 1);
  return 0;
}

static const taxi_handler_ops_t self_ops = {.input = self_input};

void test_destroy_from_hook(void) {
  taxi_lf_sets_t *s = sets_make(2, 1);
  sets_self_t x;
  memset(&x, 0, sizeof x);
  sets_pair(x.sv);
  x.s = s;
  atomic_init(&x.rc, 12345);
  atomic_init(&x.done, 0);
  taxi_handler_init(&x.h, &self_ops);
  CU_ASSERT_EQUAL_FATAL(taxi_reactor_register(taxi_lf_sets_reactor(s, 1),
                                              x.sv[0], &x.h, TAXI_EV_READ),
                        0);
  CU_ASSERT_EQUAL(util_write_byte(x.sv[1]), 1);
  CU_ASSERT(wait_count(&x.done, 1));
  CU_ASSERT_EQUAL(atomic_load(&x.rc), TAXI_EBUSY);
  sets_destroy(s);
  close(x.sv[0]);
  close(x.sv[1]);
}
