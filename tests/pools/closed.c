/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/pools/closed.c - the safety net for a handle closed while
 * registered (taxi/handler.h): a hook that closes its own descriptor by
 * mistake and returns 0 gets its error hook with TAXI_EBADF, then its
 * close hook (given TAXI_INVALID_HANDLE), once; it is not run again, and
 * another connection of the same reactor is still served.  The same when
 * the hook opens another descriptor that takes the number before it
 * returns: that descriptor is not the handler's, and nothing of taxi's
 * closes it.  Under each dispatcher of a reactor - its own loop, the
 * Leader/Followers pool, the half-sync/half-async pool - over the backend
 * under test.
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

enum { BY_REACTOR, BY_LF, BY_HSHA };

/* The handler that closes its own descriptor. */
typedef struct closer {
  taxi_handler_t h;
  int sv[2];
  int spare;  /* reuse: what takes the closed number, or -1 */
  int reused; /* the number it took, or -1 */
  atomic_int inputs, errors, closes, error_code, errors_at_close;
  atomic_int close_no_handle; /* the close hook was given none */
} closer_t;

static int closer_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  closer_t *c = TAXI_CONTAINER_OF(h, closer_t, h);
  (void)ev;
  if (atomic_fetch_add(&c->inputs, 1) > 0) return 0; /* run again: counted */
  close(fd); /* by mistake: the handler is still registered */
#if !defined(_WIN32)
  if (c->spare >= 0 && dup2(c->spare, fd) == fd) c->reused = fd;
#endif
  return 0;
}

static void closer_error(taxi_handler_t *h, taxi_handle_t fd, int code) {
  closer_t *c = TAXI_CONTAINER_OF(h, closer_t, h);
  (void)fd;
  atomic_store(&c->error_code, code);
  atomic_fetch_add(&c->errors, 1);
}

/* As an application's close hook is written: close the handle given. */
static void closer_close(taxi_handler_t *h, taxi_handle_t fd) {
  closer_t *c = TAXI_CONTAINER_OF(h, closer_t, h);
  atomic_store(&c->close_no_handle, fd == TAXI_INVALID_HANDLE);
  atomic_store(&c->errors_at_close, atomic_load(&c->errors));
  if (fd != TAXI_INVALID_HANDLE) close(fd);
  atomic_fetch_add(&c->closes, 1);
}

static const taxi_handler_ops_t closer_ops = {
    .input = closer_input, .error = closer_error, .close = closer_close};

/* Another connection: answers each byte with one. */
typedef struct answerer {
  taxi_handler_t h;
  int sv[2];
  atomic_int closes;
} answerer_t;

static int answer_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  char buf[64];
  (void)h;
  (void)ev;
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0)
    if (write(fd, buf, (size_t)n) != n) return -1;
  return 0;
}

static void answer_close(taxi_handler_t *h, taxi_handle_t fd) {
  (void)fd;
  atomic_fetch_add(&TAXI_CONTAINER_OF(h, answerer_t, h)->closes, 1);
}

static const taxi_handler_ops_t answer_ops = {.input = answer_input,
                                              .close = answer_close};

static void run_main(void *arg) { (void)taxi_reactor_run(arg); }

static void run_case(int by, int reuse) {
#if defined(_WIN32)
  /* A socket's number cannot be given to another here (no dup2), and
   * Windows gives a socket no identity to tell a reused number by. */
  if (reuse) {
    printf("(not applicable on Windows) ");
    return;
  }
#endif
  static closer_t x;
  static answerer_t y;
  memset(&x, 0, sizeof x);
  memset(&y, 0, sizeof y);
  x.spare = x.reused = -1;
  taxi_reactor_t *r = pools_reactor();
  pools_pair(x.sv);
  pools_pair(y.sv);
  int spare[2] = {-1, -1};
  if (reuse) {
    pools_pair(spare);
    x.spare = spare[0];
  }
  CU_ASSERT_EQUAL_FATAL(taxi_handler_init(&x.h, &closer_ops), 0);
  CU_ASSERT_EQUAL_FATAL(taxi_handler_init(&y.h, &answer_ops), 0);
  CU_ASSERT_EQUAL_FATAL(taxi_reactor_register(r, x.sv[0], &x.h, TAXI_EV_READ),
                        0);
  CU_ASSERT_EQUAL_FATAL(taxi_reactor_register(r, y.sv[0], &y.h, TAXI_EV_READ),
                        0);

  util_thread_t th;
  taxi_lf_pool_t *lf = NULL;
  taxi_hsha_pool_t *hs = NULL;
  if (by == BY_REACTOR) {
    CU_ASSERT_EQUAL_FATAL(util_thread_start(&th, run_main, r), 0);
  } else if (by == BY_LF) {
    CU_ASSERT_EQUAL_FATAL(taxi_lf_create(&lf, r, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(taxi_lf_spawn(lf, 3), 0);
  } else {
    taxi_hsha_options_t o = TAXI_HSHA_OPTIONS_INIT;
    o.workers = 2;
    CU_ASSERT_EQUAL_FATAL(taxi_hsha_create(&hs, r, &o), 0);
  }

  /* The closer's hook runs once, closes its descriptor and keeps quiet. */
  CU_ASSERT_EQUAL(util_write_byte(x.sv[1]), 1);
  int told = pools_wait_count(&x.closes, 1, POOLS_WAIT_MS);
  /* The other connection is served meanwhile, and afterwards. */
  int served = 1;
  for (int i = 0; i < 3 && served; i++)
    served = pools_ping_all(&y.sv[1], 1) == 0;
  CU_ASSERT(served);
  if (!told || atomic_load(&x.inputs) != 1)
    printf("(input hook ran %d times, error hook %d, close hook %d) ",
           atomic_load(&x.inputs), atomic_load(&x.errors),
           atomic_load(&x.closes));
  CU_ASSERT(told);
  CU_ASSERT_EQUAL(atomic_load(&x.inputs), 1);
  CU_ASSERT_EQUAL(atomic_load(&x.errors), 1);
  CU_ASSERT_EQUAL(atomic_load(&x.error_code), TAXI_EBADF);
  /* The error hook first, then the close hook, with no handle to close:
   * the number is not the handler's any more. */
  CU_ASSERT_EQUAL(atomic_load(&x.errors_at_close), 1);
  CU_ASSERT_EQUAL(atomic_load(&x.close_no_handle), 1);
  /* No longer registered: the reactor knows nothing of it. */
  CU_ASSERT_EQUAL(taxi_reactor_remove(r, &x.h), TAXI_ENOENT);

  if (by == BY_REACTOR) {
    CU_ASSERT_EQUAL(taxi_reactor_stop(r), 0);
    util_thread_join(&th, POOLS_WAIT_MS, "taxi_reactor_run");
  } else if (by == BY_LF) {
    CU_ASSERT_EQUAL(taxi_lf_stop(lf), 0);
    CU_ASSERT_EQUAL(taxi_lf_destroy(lf), 0);
  } else {
    CU_ASSERT_EQUAL(taxi_hsha_destroy(hs), 0);
  }
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  CU_ASSERT_EQUAL(atomic_load(&x.closes), 1);
  CU_ASSERT_EQUAL(atomic_load(&y.closes), 1);
#if !defined(_WIN32)
  if (reuse) {
    /* The descriptor that took the number is the application's still. */
    CU_ASSERT_EQUAL(x.reused, x.sv[0]);
    CU_ASSERT(x.reused >= 0 && fcntl(x.reused, F_GETFD) != -1);
    if (x.reused >= 0) close(x.reused);
    pools_close_pair(spare);
  }
#endif
  close(x.sv[1]);
  pools_close_pair(y.sv);
}

static void test_reactor_closed(void) { run_case(BY_REACTOR, 0); }
static void test_lf_closed(void) { run_case(BY_LF, 0); }
static void test_hsha_closed(void) { run_case(BY_HSHA, 0); }
static void test_reactor_reused(void) { run_case(BY_REACTOR, 1); }
static void test_lf_reused(void) { run_case(BY_LF, 1); }
static void test_hsha_reused(void) { run_case(BY_HSHA, 1); }

static CU_TestInfo closed_tests[] = {
    {"reactor: a hook closes its handle: EBADF, then close, once",
     test_reactor_closed},
    {"lf: a hook closes its handle: EBADF, then close, once", test_lf_closed},
    {"hsha: a hook closes its handle: EBADF, then close, once",
     test_hsha_closed},
    {"reactor: a hook closes its handle and the number is reused",
     test_reactor_reused},
    {"lf: a hook closes its handle and the number is reused", test_lf_reused},
    {"hsha: a hook closes its handle and the number is reused",
     test_hsha_reused},
    CU_TEST_INFO_NULL,
};

const taxi_test_suite_t pools_suite_closed = {"closed handle", closed_tests,
                                              120, NULL};
