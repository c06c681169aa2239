/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/pools/closed.c - the safety net for a handle closed while
 * registered (taxi/handler.h, the error hook): a hook that closes its own
 * descriptor by mistake and returns 0 gets its error hook with TAXI_EBADF,
 * then its close hook (given TAXI_INVALID_HANDLE), once; its input hook is
 * not run again, and another connection of the same reactor is served
 * before and after.
 *
 * Each case runs under one dispatcher of a reactor over the backend under
 * test - the reactor's own loop, the Leader/Followers pool, the
 * half-sync/half-async pool, Leader/Followers per handle set - with the
 * closed number:
 *  - not reused;
 *  - reused at once by another descriptor (dup2 over it in the hook),
 *    which nobody registers: nothing of taxi's closes or watches it for
 *    the closed handler;
 *  - reused and registered by another handler from inside the closing
 *    hook, or from another thread once the hook has closed it: that
 *    registration succeeds, and the new handler is served;
 *  - reused by a descriptor that stays readable, which nobody registers:
 *    the closed handler may be given its events until it is found out
 *    (taxi/handler.h), and is found out all the same, though it is being
 *    dispatched most of the time;
 *  - reused at once (not on Windows), the handler's 1 ms periodic timer
 *    firing meanwhile.
 * In every case no hook of the closer runs beside another (the error hook
 * included: it waits for a running timer hook), and no timer hook runs
 * after the close hook.
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

enum { BY_REACTOR, BY_LF, BY_HSHA, BY_SETS };
enum {
  NOT_REUSED,
  REUSED,                  /* dup2 over the number, left unregistered */
  REUSED_REGISTERED_HOOK,  /* ... and registered from the closing hook */
  REUSED_REGISTERED_LATER, /* ... and registered by the test's thread */
  REUSED_BUSY, /* dup2 over the number, kept readable, left unregistered */
  TIMER        /* as REUSED, and a periodic timer of the handler fires */
};

/* Another connection: answers each byte with one. */
typedef struct answerer {
  taxi_handler_t h;
  atomic_int closes;
} answerer_t;

static int answer_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  char buf[64];
  ssize_t n;
  (void)h;
  (void)ev;
  while ((n = read(fd, buf, sizeof buf)) > 0)
    if (write(fd, buf, (size_t)n) != n) return -1;
  return 0;
}

static void answer_close(taxi_handler_t *h, taxi_handle_t fd) {
  (void)fd; /* the test closes its descriptors itself */
  atomic_fetch_add(&TAXI_CONTAINER_OF(h, answerer_t, h)->closes, 1);
}

static const taxi_handler_ops_t answer_ops = {.input = answer_input,
                                              .close = answer_close};

/* The handler that closes its own descriptor. */
typedef struct closer {
  taxi_handler_t h;
  int sv[2];
  int spare;  /* what is dup2'd over the closed number, or -1 */
  int reused; /* the number it took, or -1 */
  /* For registering the newcomer from the hook: known only once x is
   * registered (lf_sets chooses the set), so set while hooks may run. */
  _Atomic(taxi_reactor_t *) r;
  answerer_t *in_hook; /* registered on the reused number by the hook */
  atomic_int in_hook_rc;
  atomic_int closed_it; /* the hook closed (and reused) its descriptor */
  atomic_int inputs, errors, closes, error_code, errors_at_close;
  atomic_int close_no_handle; /* the close hook was given none */
  taxi_timer_t timer;
  atomic_int timeouts, timeouts_after_close;
  atomic_int inside, overlaps; /* a hook of it runs; one began beside one */
} closer_t;

/* Every hook of the closer but its close hook: count one that begins
 * while another runs. */
static void closer_enter(closer_t *c) {
  if (atomic_exchange(&c->inside, 1)) atomic_fetch_add(&c->overlaps, 1);
}

static void closer_leave(closer_t *c) { atomic_store(&c->inside, 0); }

static int closer_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  closer_t *c = TAXI_CONTAINER_OF(h, closer_t, h);
  (void)ev;
  closer_enter(c);
  if (atomic_fetch_add(&c->inputs, 1) > 0) { /* run again: counted */
    closer_leave(c);
    return 0;
  }
  close(fd); /* by mistake: the handler is still registered */
#if !defined(_WIN32)
  if (c->spare >= 0 && dup2(c->spare, fd) == fd) c->reused = fd;
  if (c->in_hook && c->reused >= 0)
    atomic_store(&c->in_hook_rc,
                 taxi_reactor_register(atomic_load(&c->r), fd, &c->in_hook->h,
                                       TAXI_EV_READ));
#endif
  atomic_store(&c->closed_it, 1);
  closer_leave(c);
  return 0;
}

static void closer_error(taxi_handler_t *h, taxi_handle_t fd, int code) {
  closer_t *c = TAXI_CONTAINER_OF(h, closer_t, h);
  (void)fd;
  closer_enter(c);
  atomic_store(&c->error_code, code);
  atomic_fetch_add(&c->errors, 1);
  closer_leave(c);
}

/* Long enough for the other threads to find it running. */
static int closer_timeout(taxi_handler_t *h, taxi_timer_t *t, void *act) {
  closer_t *c = TAXI_CONTAINER_OF(h, closer_t, h);
  (void)t;
  (void)act;
  closer_enter(c);
  atomic_fetch_add(&c->timeouts, 1);
  if (atomic_load(&c->closes)) atomic_fetch_add(&c->timeouts_after_close, 1);
  for (int i = 0; i < 100; i++) sched_yield();
  closer_leave(c);
  return 0;
}

/* As an application's close hook is written: close the handle given. */
static void closer_close(taxi_handler_t *h, taxi_handle_t fd) {
  closer_t *c = TAXI_CONTAINER_OF(h, closer_t, h);
  atomic_store(&c->close_no_handle, fd == TAXI_INVALID_HANDLE);
  atomic_store(&c->errors_at_close, atomic_load(&c->errors));
  if (fd != TAXI_INVALID_HANDLE) close(fd);
  atomic_fetch_add(&c->closes, 1);
}

static const taxi_handler_ops_t closer_ops = {.input = closer_input,
                                              .timeout = closer_timeout,
                                              .error = closer_error,
                                              .close = closer_close};

static void run_main(void *arg) { (void)taxi_reactor_run(arg); }

/* The dispatcher under test, started over reactor r (or, for the sets,
 * made with r's backend: r is then set 0's reactor). */
typedef struct dispatcher {
  int by;
  taxi_reactor_t *r;
  util_thread_t th;
  taxi_lf_pool_t *lf;
  taxi_hsha_pool_t *hs;
  taxi_lf_sets_t *sets;
} dispatcher_t;

static void dispatcher_stop(dispatcher_t *d) {
  if (d->by == BY_REACTOR) {
    CU_ASSERT_EQUAL(taxi_reactor_stop(d->r), 0);
    util_thread_join(&d->th, POOLS_WAIT_MS, "taxi_reactor_run");
    CU_ASSERT_EQUAL(taxi_reactor_destroy(d->r), 0);
  } else if (d->by == BY_LF) {
    CU_ASSERT_EQUAL(taxi_lf_stop(d->lf), 0);
    CU_ASSERT_EQUAL(taxi_lf_destroy(d->lf), 0);
    CU_ASSERT_EQUAL(taxi_reactor_destroy(d->r), 0);
  } else if (d->by == BY_HSHA) {
    CU_ASSERT_EQUAL(taxi_hsha_destroy(d->hs), 0);
    CU_ASSERT_EQUAL(taxi_reactor_destroy(d->r), 0);
  } else {
    CU_ASSERT_EQUAL(taxi_lf_sets_destroy(d->sets), 0);
  }
}

static void run_case(int by, int reuse) {
#if defined(_WIN32)
  int taken = 0; /* the cases that need it are not run here: see below */
#else
  /* Another descriptor takes the closed number. */
  int taken = reuse != NOT_REUSED;
#endif
#if defined(_WIN32)
  /* A socket's number cannot be given to another descriptor here (no
   * dup2), and Windows tells an open socket from another only by its
   * handle's value. */
  if (reuse != NOT_REUSED && reuse != TIMER) {
    printf("(not applicable on Windows) ");
    return;
  }
#endif
  static closer_t x;
  static answerer_t y, z;
  memset(&x, 0, sizeof x);
  memset(&y, 0, sizeof y);
  memset(&z, 0, sizeof z);
  x.spare = x.reused = -1;
  int ysv[2], spare[2] = {-1, -1};
  pools_pair(x.sv);
  pools_pair(ysv);
  if (taken) {
    pools_pair(spare);
    x.spare = spare[0];
  }
  if (reuse == REUSED_REGISTERED_HOOK) x.in_hook = &z;
  CU_ASSERT_EQUAL_FATAL(taxi_handler_init(&x.h, &closer_ops), 0);
  CU_ASSERT_EQUAL_FATAL(taxi_handler_init(&y.h, &answer_ops), 0);
  CU_ASSERT_EQUAL_FATAL(taxi_handler_init(&z.h, &answer_ops), 0);

  dispatcher_t d;
  memset(&d, 0, sizeof d);
  d.by = by;
  if (by == BY_SETS) {
    taxi_lf_sets_options_t o = TAXI_LF_SETS_OPTIONS_INIT;
    o.sets = 2;
    o.threads_per_set = 2;
    o.backend = pools_backend;
    CU_ASSERT_EQUAL_FATAL(taxi_lf_sets_create(&d.sets, &o), 0);
    int set = taxi_lf_sets_register(d.sets, x.sv[0], &x.h, TAXI_EV_READ);
    CU_ASSERT_FATAL(set >= 0);
    d.r = taxi_lf_sets_reactor(d.sets, (unsigned)set);
    CU_ASSERT_EQUAL_FATAL(
        taxi_reactor_register(d.r, ysv[0], &y.h, TAXI_EV_READ), 0);
  } else {
    d.r = pools_reactor();
    CU_ASSERT_EQUAL_FATAL(
        taxi_reactor_register(d.r, x.sv[0], &x.h, TAXI_EV_READ), 0);
    CU_ASSERT_EQUAL_FATAL(
        taxi_reactor_register(d.r, ysv[0], &y.h, TAXI_EV_READ), 0);
    if (by == BY_REACTOR) {
      CU_ASSERT_EQUAL_FATAL(util_thread_start(&d.th, run_main, d.r), 0);
    } else if (by == BY_LF) {
      CU_ASSERT_EQUAL_FATAL(taxi_lf_create(&d.lf, d.r, NULL), 0);
      CU_ASSERT_EQUAL_FATAL(taxi_lf_spawn(d.lf, 3), 0);
    } else {
      taxi_hsha_options_t o = TAXI_HSHA_OPTIONS_INIT;
      o.workers = 2;
      CU_ASSERT_EQUAL_FATAL(taxi_hsha_create(&d.hs, d.r, &o), 0);
    }
  }
  atomic_store(&x.r, d.r);
  if (reuse == TIMER) {
    taxi_timer_init(&x.timer);
    CU_ASSERT_EQUAL_FATAL(
        taxi_reactor_schedule(d.r, &x.timer, &x.h, TAXI_NSEC_PER_MSEC,
                              TAXI_NSEC_PER_MSEC, NULL),
        0);
  }

  /* Served before. */
  CU_ASSERT_EQUAL(pools_ping_all(&ysv[1], 1), 0);
  /* The closer's hook runs once, closes its descriptor and keeps quiet. */
  CU_ASSERT_EQUAL(util_write_byte(x.sv[1]), 1);
  CU_ASSERT(pools_wait_count(&x.closed_it, 1, POOLS_WAIT_MS));
  int newcomer =
      reuse == REUSED_REGISTERED_HOOK || reuse == REUSED_REGISTERED_LATER;
  if (taken) CU_ASSERT_EQUAL(x.reused, x.sv[0]);
  if (reuse == REUSED_REGISTERED_HOOK) {
    if (atomic_load(&x.in_hook_rc) != 0)
      printf("(register from the hook: %s) ",
             taxi_error_name(atomic_load(&x.in_hook_rc)));
    CU_ASSERT_EQUAL(atomic_load(&x.in_hook_rc), 0);
  } else if (reuse == REUSED_REGISTERED_LATER && x.reused >= 0) {
    /* Whether the closer's hook has returned yet or not. */
    int rc = taxi_reactor_register(d.r, x.reused, &z.h, TAXI_EV_READ);
    if (rc != 0) printf("(register: %s) ", taxi_error_name(rc));
    CU_ASSERT_EQUAL(rc, 0);
  }
  /* Readable from now on: the closer reads nothing more. */
  if (reuse == REUSED_BUSY) CU_ASSERT_EQUAL(util_write_byte(spare[1]), 1);
  int told = pools_wait_count(&x.closes, 1, POOLS_WAIT_MS);
  int inputs_at_close = atomic_load(&x.inputs);
  /* The other connection is served meanwhile, and afterwards; so is the
   * newcomer on the closed number. */
  int served = 1;
  for (int i = 0; i < 3 && served; i++)
    served = pools_ping_all(&ysv[1], 1) == 0;
  CU_ASSERT(served);
  if (newcomer) CU_ASSERT_EQUAL(pools_ping_all(&spare[1], 1), 0);
  if (!told || reuse == REUSED_BUSY || atomic_load(&x.inputs) != 1)
    printf("(input hook ran %d times, error hook %d, close hook %d) ",
           atomic_load(&x.inputs), atomic_load(&x.errors),
           atomic_load(&x.closes));
  CU_ASSERT(told);
  if (reuse == REUSED_BUSY) {
    /* Given the busy descriptor's events until found out; never after. */
    CU_ASSERT_EQUAL(atomic_load(&x.inputs), inputs_at_close);
  } else {
    CU_ASSERT_EQUAL(atomic_load(&x.inputs), 1);
  }
  CU_ASSERT_EQUAL(atomic_load(&x.errors), 1);
  CU_ASSERT_EQUAL(atomic_load(&x.error_code), TAXI_EBADF);
  /* The error hook first, then the close hook, with no handle to close:
   * the number is not the handler's any more. */
  CU_ASSERT_EQUAL(atomic_load(&x.errors_at_close), 1);
  CU_ASSERT_EQUAL(atomic_load(&x.close_no_handle), 1);
  /* One hook at a time, none after the close hook. */
  CU_ASSERT_EQUAL(atomic_load(&x.overlaps), 0);
  CU_ASSERT_EQUAL(atomic_load(&x.timeouts_after_close), 0);
  if (reuse == TIMER) printf("(%d timeouts) ", atomic_load(&x.timeouts));
  /* No longer registered: the reactor knows nothing of it. */
  CU_ASSERT_EQUAL(taxi_reactor_remove(d.r, &x.h), TAXI_ENOENT);
  taxi_reactor_stats_t rs;
  CU_ASSERT_EQUAL(taxi_reactor_stats(d.r, &rs), 0);
  CU_ASSERT_EQUAL(rs.rearm_removed, 1);
  CU_ASSERT_EQUAL(rs.handles, newcomer ? 2u : 1u);

  dispatcher_stop(&d);
  CU_ASSERT_EQUAL(atomic_load(&x.closes), 1);
  CU_ASSERT_EQUAL(atomic_load(&x.errors), 1);
  CU_ASSERT_EQUAL(atomic_load(&y.closes), 1);
  CU_ASSERT_EQUAL(atomic_load(&z.closes), newcomer ? 1 : 0);
  if (taken) {
    /* The descriptor that took the number is the application's still. */
    CU_ASSERT(x.reused >= 0 && fcntl(x.reused, F_GETFD) != -1);
    if (x.reused >= 0) close(x.reused);
    pools_close_pair(spare);
  }
  close(x.sv[1]);
  pools_close_pair(ysv);
}

#define CLOSED_CASE(name, by, reuse) \
  static void name(void) { run_case(by, reuse); }

CLOSED_CASE(test_reactor_closed, BY_REACTOR, NOT_REUSED)
CLOSED_CASE(test_reactor_reused, BY_REACTOR, REUSED)
CLOSED_CASE(test_reactor_hook, BY_REACTOR, REUSED_REGISTERED_HOOK)
CLOSED_CASE(test_reactor_later, BY_REACTOR, REUSED_REGISTERED_LATER)
CLOSED_CASE(test_reactor_busy, BY_REACTOR, REUSED_BUSY)
CLOSED_CASE(test_reactor_timer, BY_REACTOR, TIMER)
CLOSED_CASE(test_lf_closed, BY_LF, NOT_REUSED)
CLOSED_CASE(test_lf_reused, BY_LF, REUSED)
CLOSED_CASE(test_lf_hook, BY_LF, REUSED_REGISTERED_HOOK)
CLOSED_CASE(test_lf_later, BY_LF, REUSED_REGISTERED_LATER)
CLOSED_CASE(test_lf_busy, BY_LF, REUSED_BUSY)
CLOSED_CASE(test_lf_timer, BY_LF, TIMER)
CLOSED_CASE(test_hsha_closed, BY_HSHA, NOT_REUSED)
CLOSED_CASE(test_hsha_reused, BY_HSHA, REUSED)
CLOSED_CASE(test_hsha_hook, BY_HSHA, REUSED_REGISTERED_HOOK)
CLOSED_CASE(test_hsha_later, BY_HSHA, REUSED_REGISTERED_LATER)
CLOSED_CASE(test_hsha_busy, BY_HSHA, REUSED_BUSY)
CLOSED_CASE(test_hsha_timer, BY_HSHA, TIMER)
CLOSED_CASE(test_sets_closed, BY_SETS, NOT_REUSED)
CLOSED_CASE(test_sets_reused, BY_SETS, REUSED)
CLOSED_CASE(test_sets_hook, BY_SETS, REUSED_REGISTERED_HOOK)
CLOSED_CASE(test_sets_later, BY_SETS, REUSED_REGISTERED_LATER)
CLOSED_CASE(test_sets_busy, BY_SETS, REUSED_BUSY)
CLOSED_CASE(test_sets_timer, BY_SETS, TIMER)

static CU_TestInfo closed_tests[] = {
    {"reactor: closed by its hook: EBADF, then close, once",
     test_reactor_closed},
    {"reactor: closed, number reused", test_reactor_reused},
    {"reactor: closed, reused, registered by its hook", test_reactor_hook},
    {"reactor: closed, reused, registered by another thread",
     test_reactor_later},
    {"reactor: closed, reused by a busy descriptor", test_reactor_busy},
    {"reactor: closed, its timer firing: one hook at a time",
     test_reactor_timer},
    {"lf: closed by its hook: EBADF, then close, once", test_lf_closed},
    {"lf: closed, number reused", test_lf_reused},
    {"lf: closed, reused, registered by its hook", test_lf_hook},
    {"lf: closed, reused, registered by another thread", test_lf_later},
    {"lf: closed, reused by a busy descriptor", test_lf_busy},
    {"lf: closed, its timer firing: one hook at a time", test_lf_timer},
    {"hsha: closed by its hook: EBADF, then close, once", test_hsha_closed},
    {"hsha: closed, number reused", test_hsha_reused},
    {"hsha: closed, reused, registered by its hook", test_hsha_hook},
    {"hsha: closed, reused, registered by another thread", test_hsha_later},
    {"hsha: closed, reused by a busy descriptor", test_hsha_busy},
    {"hsha: closed, its timer firing: one hook at a time", test_hsha_timer},
    {"lf_sets: closed by its hook: EBADF, then close, once", test_sets_closed},
    {"lf_sets: closed, number reused", test_sets_reused},
    {"lf_sets: closed, reused, registered by its hook", test_sets_hook},
    {"lf_sets: closed, reused, registered by another thread", test_sets_later},
    {"lf_sets: closed, reused by a busy descriptor", test_sets_busy},
    {"lf_sets: closed, its timer firing: one hook at a time", test_sets_timer},
    CU_TEST_INFO_NULL,
};

const taxi_test_suite_t pools_suite_closed = {"closed handle", closed_tests,
                                              240, NULL};
