/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/pools/signal_stop.c - a pool stopped from an OS signal handler:
 * the handler may call only what takes no lock, taxi_reactor_stop(), and
 * the Leader/Followers or half-sync/half-async pool over that reactor stops
 * as its own stop would: every thread leaves, taxi_lf_wait/taxi_hsha_wait
 * return 0, a second stop says TAXI_ESTOPPED, and the reactor, restarted,
 * dispatches again once the pool is gone.
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <signal.h>
#include <string.h>

static taxi_reactor_t *stop_target;

#if !defined(_WIN32)

static void stop_from_handler(int signo) {
  (void)signo;
  taxi_reactor_stop(stop_target);
}

/* SIGUSR1 runs stop_from_handler in the thread that raises it. */
static void install(void) { util_signal_handle(SIGUSR1, stop_from_handler); }
static void uninstall(void) { util_signal_default(SIGUSR1); }

static void stop_now(void) { raise(SIGUSR1); }

#else

/* No POSIX signals on Windows (a console control handler would call
 * taxi_reactor_stop the same way): the stop comes from this thread. */
static void install(void) {}
static void uninstall(void) {}
static void stop_now(void) { taxi_reactor_stop(stop_target); }

#endif

/* The reactor, restarted once its pool is gone, dispatches again. */
static void check_reactor_after(taxi_reactor_t *r) {
  CU_ASSERT_EQUAL(taxi_reactor_stopped(r), 1);
  CU_ASSERT_EQUAL(taxi_reactor_restart(r), 0);
  CU_ASSERT_EQUAL(taxi_reactor_handle_events(r, 0), 0);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
}

static void lf_stop_by_signal(taxi_leaders_t leaders) {
  taxi_reactor_t *r = pools_reactor();
  stop_target = r;
  install();
  taxi_lf_options_t o = TAXI_LF_OPTIONS_INIT;
  o.leaders = leaders;
  taxi_lf_pool_t *p = NULL;
  int rc = taxi_lf_create(&p, r, &o);
  if (rc == TAXI_ENOTSUP) { /* several leaders: not on this backend */
    uninstall();
    CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
    return;
  }
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  CU_ASSERT_EQUAL_FATAL(taxi_lf_spawn(p, 3), 0);
  util_sleep_ms(20); /* not needed; lets a leader be in its wait */
  stop_now();
  CU_ASSERT_EQUAL(taxi_lf_wait(p, POOLS_WAIT_MS), TAXI_ESTOPPED);
  taxi_lf_stats_t s;
  memset(&s, 0, sizeof s);
  CU_ASSERT_EQUAL(taxi_lf_stats(p, &s), 0);
  CU_ASSERT_EQUAL(s.threads, 0u);
  CU_ASSERT_EQUAL(taxi_lf_stop(p), TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(taxi_lf_destroy(p), 0);
  uninstall();
  check_reactor_after(r);
}

static void test_lf_one_leader(void) { lf_stop_by_signal(TAXI_LEADERS_ONE); }
static void test_lf_many_leaders(void) { lf_stop_by_signal(TAXI_LEADERS_MANY); }

static void test_hsha(void) {
  taxi_reactor_t *r = pools_reactor();
  stop_target = r;
  install();
  taxi_hsha_options_t o = TAXI_HSHA_OPTIONS_INIT;
  o.workers = 2;
  taxi_hsha_pool_t *p = NULL;
  CU_ASSERT_EQUAL_FATAL(taxi_hsha_create(&p, r, &o), 0);
  util_sleep_ms(20); /* not needed; lets the reactor thread be waiting */
  stop_now();
  CU_ASSERT_EQUAL(taxi_hsha_wait(p, POOLS_WAIT_MS), TAXI_ESTOPPED);
  taxi_hsha_stats_t s;
  memset(&s, 0, sizeof s);
  CU_ASSERT_EQUAL(taxi_hsha_stats(p, &s), 0);
  CU_ASSERT_EQUAL(s.workers, 0u);
  CU_ASSERT_EQUAL(taxi_hsha_stop(p), TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(taxi_hsha_destroy(p), 0);
  uninstall();
  check_reactor_after(r);
}

static CU_TestInfo signal_stop_tests[] = {
    {"lf, one leader: its reactor stopped by a signal handler",
     test_lf_one_leader},
    {"lf, many leaders: its reactor stopped by a signal handler",
     test_lf_many_leaders},
    {"hsha: its reactor stopped by a signal handler", test_hsha},
    CU_TEST_INFO_NULL,
};

const taxi_test_suite_t pools_suite_signal_stop = {"stop from a signal handler",
                                                   signal_stop_tests, 60, NULL};
