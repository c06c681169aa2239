/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/details_busy.c - `threads` of the I/O context means one thing
 * under every dispatcher (taxi/io.h), and the cases of TAXI_EBUSY are
 * told apart by their details (suites of test_details, see details.h).
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "details.h"
#include "taxi/taxi.h"
#include "util.h"

/* ---- `threads` means one thing (taxi/io.h) ------------------------------- */

/* The threads that run the callbacks: the reactor's one (2 refused, with
 * the reason), the half-sync/half-async pool's workers (its options may
 * not say otherwise, and what the pool would refuse is refused when the
 * context is made, not when it runs), a supplied pool's own threads. */
static void test_threads(void) {
  taxi_io_t *io = NULL;
  taxi_io_options_t o = TAXI_IO_OPTIONS_INIT;
  o.threads = 2;
  REFUSED(taxi_io_create(&io, &o), TAXI_EINVAL, "taxi_io_create",
          "options.threads: the reactor dispatcher runs callbacks in one "
          "thread");
  CU_ASSERT_PTR_NOT_NULL(strstr(taxi_error_detail(), "got 2"));
  o.threads = 0;
  CU_ASSERT_EQUAL_FATAL(taxi_io_create(&io, &o), 0);
  CU_ASSERT_EQUAL(taxi_io_threads(io), 1);
  CU_ASSERT_EQUAL(taxi_io_destroy(io), 0);

  taxi_hsha_options_t ho = TAXI_HSHA_OPTIONS_INIT;
  o.dispatcher = TAXI_IO_HSHA;
  o.threads = 3;
  o.hsha = &ho;
  ho.workers = 5;
  REFUSED(taxi_io_create(&io, &o), TAXI_EINVAL, "taxi_io_create",
          "options.hsha.workers");
  ho.workers = 0;
  ho.queue_capacity = TAXI_HSHA_MAX_QUEUE + 1;
  REFUSED(taxi_io_create(&io, &o), TAXI_EINVAL, "taxi_io_create",
          "options.hsha.queue_capacity");
  ho.queue_capacity = 0;
  ho.workers = 3; /* the same as threads: allowed */
  CU_ASSERT_EQUAL_FATAL(taxi_io_create(&io, &o), 0);
  CU_ASSERT_EQUAL(taxi_io_threads(io), 3);
  CU_ASSERT_EQUAL(taxi_io_destroy(io), 0);
  o.hsha = NULL;

  /* A supplied half-sync/half-async pool: its workers. */
  taxi_reactor_t *r;
  CU_ASSERT_EQUAL_FATAL(util_reactor_create(&r, NULL), 0);
  taxi_hsha_pool_t *hp;
  taxi_hsha_options_t pool_o = TAXI_HSHA_OPTIONS_INIT;
  pool_o.workers = 2;
  CU_ASSERT_EQUAL_FATAL(taxi_hsha_create(&hp, r, &pool_o), 0);
  o.reactor = r;
  o.hsha_pool = hp;
  o.threads = 3;
  REFUSED(taxi_io_create(&io, &o), TAXI_EINVAL, "taxi_io_create",
          "options.threads");
  o.threads = 0;
  CU_ASSERT_EQUAL_FATAL(taxi_io_create(&io, &o), 0);
  CU_ASSERT_EQUAL(taxi_io_threads(io), 2);
  CU_ASSERT_EQUAL(taxi_io_destroy(io), 0);
  CU_ASSERT_EQUAL(taxi_hsha_destroy(hp), 0);
  o.hsha_pool = NULL;

  /* A supplied Leader/Followers pool: the threads the application gave
   * it, counted when asked. */
  taxi_lf_pool_t *lp;
  CU_ASSERT_EQUAL_FATAL(taxi_lf_create(&lp, r, NULL), 0);
  o.dispatcher = TAXI_IO_LF;
  o.lf_pool = lp;
  o.threads = 4;
  REFUSED(taxi_io_create(&io, &o), TAXI_EINVAL, "taxi_io_create",
          "options.threads");
  o.threads = 0;
  CU_ASSERT_EQUAL_FATAL(taxi_io_create(&io, &o), 0);
  CU_ASSERT_EQUAL(taxi_io_threads(io), 0);
  CU_ASSERT_EQUAL_FATAL(taxi_lf_spawn(lp, 2), 0);
  CU_ASSERT_EQUAL(taxi_io_threads(io), 2);
  CU_ASSERT_EQUAL(taxi_io_destroy(io), 0);
  CU_ASSERT_EQUAL(taxi_lf_destroy(lp), 0);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
}

/* ---- TAXI_EBUSY, told apart ---------------------------------------------- */

static int on_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  (void)h, (void)fd, (void)ev;
  return 0;
}

/* A reactor under a pool refuses other pools, its own dispatch and its
 * destroy, each saying so; a registered handler refuses to be
 * re-initialised. */
static void test_busy_reactor(void) {
  taxi_reactor_t *r;
  CU_ASSERT_EQUAL_FATAL(util_reactor_create(&r, NULL), 0);
  static const taxi_handler_ops_t ops = {.input = on_input,
                                         .timeout = details_on_timeout};
  taxi_handler_t h;
  CU_ASSERT_EQUAL(taxi_handler_init(&h, &ops), 0);
  int sv[2];
  CU_ASSERT_EQUAL_FATAL(util_socketpair(sv), 0);
  CU_ASSERT_EQUAL_FATAL(taxi_reactor_register(r, sv[0], &h, TAXI_EV_READ), 0);
  REFUSED(taxi_handler_init(&h, &ops), TAXI_EBUSY, "taxi_handler_init",
          "attached to a reactor");

  taxi_reactor_t *r2;
  CU_ASSERT_EQUAL_FATAL(util_reactor_create(&r2, NULL), 0);
  taxi_timer_t t;
  taxi_timer_init(&t);
  CU_ASSERT_EQUAL(
      taxi_reactor_schedule(r, &t, &h, TAXI_NSEC_PER_SEC * 60, 0, NULL), 0);
  REFUSED(taxi_reactor_move(r, &h, r2), TAXI_EBUSY, "taxi_reactor_move",
          "has timers or signals");
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r2), 0);

  taxi_lf_pool_t *pool;
  CU_ASSERT_EQUAL_FATAL(taxi_lf_create(&pool, r, NULL), 0);
  taxi_lf_pool_t *second = NULL;
  REFUSED(taxi_lf_create(&second, r, NULL), TAXI_EBUSY, "taxi_lf_create",
          "r: another thread pool");
  taxi_hsha_pool_t *hp = NULL;
  REFUSED(taxi_hsha_create(&hp, r, NULL), TAXI_EBUSY, "taxi_hsha_create",
          "r: another thread pool");
  REFUSED(taxi_reactor_handle_events(r, 0), TAXI_EBUSY,
          "taxi_reactor_handle_events", "a thread pool dispatches it");
  REFUSED(taxi_reactor_run(r), TAXI_EBUSY, "taxi_reactor_run",
          "a thread pool dispatches it");
  REFUSED(taxi_reactor_destroy(r), TAXI_EBUSY, "taxi_reactor_destroy",
          "destroy the pool first");
  CU_ASSERT_PTR_NULL(second);
  CU_ASSERT_PTR_NULL(hp);
  CU_ASSERT_EQUAL(taxi_lf_destroy(pool), 0);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  close(sv[0]);
  close(sv[1]);
}

static void test_busy_mqueue(void) {
  taxi_reactor_t *r;
  CU_ASSERT_EQUAL_FATAL(util_reactor_create(&r, NULL), 0);
  taxi_mq_options_t o = TAXI_MQ_OPTIONS_INIT;
  o.run = details_mq_run;
  taxi_mq_t *q;
  CU_ASSERT_EQUAL_FATAL(taxi_mq_create(&q, r, &o), 0);
  taxi_mq_item_t item = TAXI_MQ_ITEM_INIT;
  CU_ASSERT_EQUAL(taxi_mq_push(q, &item), 0);
  REFUSED(taxi_mq_push(q, &item), TAXI_EBUSY, "taxi_mq_push",
          "item: queued already");
  CU_ASSERT_EQUAL(taxi_mq_destroy(q), 0);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
}

typedef struct {
  taxi_io_t *io;
  int run_rc, destroy_rc;
  char run_detail[256], destroy_detail[256];
} from_callback_t;

static void call_back_in(taxi_io_timer_t *t, void *arg) {
  from_callback_t *c = arg;
  (void)t;
  c->run_rc = taxi_io_run(c->io);
  snprintf(c->run_detail, sizeof c->run_detail, "%s", taxi_error_detail());
  c->destroy_rc = taxi_io_destroy(c->io);
  snprintf(c->destroy_detail, sizeof c->destroy_detail, "%s",
           taxi_error_detail());
  taxi_io_stop(c->io);
}

/* From a callback, the context's run and destroy each say that a thread
 * (this one) is in taxi_io_run. */
static void test_busy_io(void) {
  from_callback_t c = {NULL, 0, 0, "", ""};
  CU_ASSERT_EQUAL_FATAL(taxi_io_create(&c.io, NULL), 0);
  taxi_io_timer_t *t;
  CU_ASSERT_EQUAL_FATAL(taxi_io_timer_create(&t, c.io, call_back_in, &c), 0);
  CU_ASSERT_EQUAL_FATAL(taxi_io_timer_start(t, 0, 0), 0);
  CU_ASSERT_EQUAL(taxi_io_run(c.io), TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(c.run_rc, TAXI_EBUSY);
  CU_ASSERT_EQUAL(strncmp(c.run_detail, "taxi_io_run: io: a thread is in", 31),
                  0);
  CU_ASSERT_EQUAL(c.destroy_rc, TAXI_EBUSY);
  CU_ASSERT_EQUAL(
      strncmp(c.destroy_detail, "taxi_io_destroy: io: a thread is in", 35), 0);
  CU_ASSERT_EQUAL(taxi_io_destroy(c.io), 0);
}

/* A proactor for one thread refuses a pool; an operation record in flight
 * refuses a second start; a proactor under a pool refuses its destroy. */
static void test_busy_proactor(void) {
  taxi_proactor_t *p;
  taxi_proactor_options_t o = TAXI_PROACTOR_OPTIONS_INIT;
  o.flags = TAXI_PROACTOR_ONE_THREAD;
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_create(&p, &o), 0);
  taxi_lf_pool_t *pool = NULL;
  REFUSED(taxi_lf_create_proactor(&pool, p, NULL), TAXI_EBUSY,
          "taxi_lf_create_proactor", "TAXI_PROACTOR_ONE_THREAD");
  CU_ASSERT_PTR_NULL(pool);
  CU_ASSERT_EQUAL(taxi_proactor_destroy(p), 0);

  CU_ASSERT_EQUAL_FATAL(util_proactor_create(&p, NULL), 0);
  int sv[2];
  CU_ASSERT_EQUAL_FATAL(util_socketpair(sv), 0);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_attach(p, sv[0]), 0);
  char buf[16];
  taxi_op_t op = TAXI_OP_INIT;
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_read(p, &op, sv[0], buf, sizeof buf, 0,
                                           details_completion_none, NULL),
                        0);
  REFUSED(taxi_proactor_read(p, &op, sv[0], buf, sizeof buf, 0,
                             details_completion_none, NULL),
          TAXI_EBUSY, "taxi_proactor_read", "op: in flight");
  CU_ASSERT_EQUAL_FATAL(taxi_lf_create_proactor(&pool, p, NULL), 0);
  REFUSED(taxi_proactor_destroy(p), TAXI_EBUSY, "taxi_proactor_destroy",
          "a Leader/Followers pool dispatches it");
  REFUSED(taxi_proactor_handle_events(p, 0), TAXI_EBUSY,
          "taxi_proactor_handle_events", "a Leader/Followers pool");
  CU_ASSERT_EQUAL(taxi_lf_destroy(pool), 0);
  /* The read completes with TAXI_ECANCELED in the destroy. */
  CU_ASSERT_EQUAL(taxi_proactor_destroy(p), 0);
  close(sv[0]);
  close(sv[1]);
}

/* ---- the suites ---------------------------------------------------------- */

static CU_TestInfo threads_tests[] = {
    {"threads: the threads that run callbacks", test_threads},
    CU_TEST_INFO_NULL,
};

static CU_TestInfo busy_tests[] = {
    {"reactor: pools, dispatch, destroy, handler, move", test_busy_reactor},
    {"message queue: an item queued twice", test_busy_mqueue},
    {"io: run and destroy from a callback", test_busy_io},
    {"proactor: one thread, a record in flight, a pool", test_busy_proactor},
    CU_TEST_INFO_NULL,
};

const taxi_test_suite_t details_threads_suite = {"details: threads",
                                                 threads_tests, 60, NULL};
const taxi_test_suite_t details_busy_suite = {"details: TAXI_EBUSY", busy_tests,
                                              60, NULL};
