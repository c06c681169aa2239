/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/pools/signal_late.c - signals added after a pool's threads exist.
 *
 * The pool is made first (Leader/Followers with 4 threads, or
 * half-sync/half-async with 4 workers), then SIGTERM and SIGUSR1 are
 * added to its reactor - from the test's own thread, or from a hook the
 * pool runs - and sent to the process many times.  Both are left at their
 * default action, which ends the process: a signal reaching a thread that
 * does not block it, with nothing of taxi's to catch it there, would kill
 * the suite.  The process must live, and every burst must reach the hooks
 * (several instances may make one dispatch).  Each signal mechanism the
 * suite can choose is tried: the default one (signalfd on Linux,
 * EVFILT_SIGNAL on kqueue), the port's source on kqueue
 * (TAXI_SIGNAL_SOURCE=port), and the self-pipe (TAXI_SIGNAL_PIPE).
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <stdbool.h>
#include <string.h>

#if !defined(_WIN32)

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define BURSTS 20
#define PER_BURST 25

typedef struct late {
  taxi_handler_t h;
  taxi_reactor_t *r;
  atomic_int term, usr1;
  atomic_int main_thread; /* hooks that ran in the test's own thread */
  atomic_int unmasked;    /* hooks whose thread had SIGTERM unblocked */
  atomic_int sync_masked; /* hooks whose thread had SIGSEGV blocked */
  atomic_int added;       /* from a hook: 1 + the number of failed adds */
  atomic_int add_error;
  pthread_t main;
} late_t;

static int late_signal(taxi_handler_t *h, int signo) {
  late_t *l = TAXI_CONTAINER_OF(h, late_t, h);
  sigset_t now;
  if (pthread_equal(pthread_self(), l->main))
    atomic_fetch_add(&l->main_thread, 1);
  if (pthread_sigmask(SIG_SETMASK, NULL, &now) == 0) {
    if (sigismember(&now, SIGTERM) != 1) atomic_fetch_add(&l->unmasked, 1);
    if (sigismember(&now, SIGSEGV) == 1) atomic_fetch_add(&l->sync_masked, 1);
  }
  atomic_fetch_add(signo == SIGTERM ? &l->term : &l->usr1, 1);
  return 0;
}

static const taxi_handler_ops_t late_ops = {.signal = late_signal};

static void late_init(late_t *l, taxi_reactor_t *r) {
  memset(l, 0, sizeof *l);
  l->r = r;
  l->main = pthread_self();
  CU_ASSERT_EQUAL(taxi_handler_init(&l->h, &late_ops), 0);
}

static int add_both(late_t *l) {
  int rc = taxi_reactor_add_signal(l->r, SIGTERM, &l->h);
  if (rc == 0) rc = taxi_reactor_add_signal(l->r, SIGUSR1, &l->h);
  return rc;
}

/* Run by a pool thread: the signals are added from a thread of taxi's. */
static void add_from_hook(void *arg) {
  late_t *l = arg;
  atomic_store(&l->add_error, add_both(l));
  atomic_store(&l->added, 1);
}

/* Which mechanism: the environment the reactor reads when its first
 * signal is added. */
enum { MECH_DEFAULT, MECH_PORT, MECH_PIPE, MECH_COUNT };
static const char *const mech_names[] = {"default", "port source", "self-pipe"};

static void choose(int mech) {
  unsetenv("TAXI_SIGNAL_PIPE");
  unsetenv("TAXI_SIGNAL_SOURCE");
  if (mech != MECH_DEFAULT) setenv("TAXI_SIGNAL_SOURCE", "port", 1);
  if (mech == MECH_PIPE) setenv("TAXI_SIGNAL_PIPE", "1", 1);
}

/* libkqueue (kqueue on Linux) reads its EVFILT_SIGNAL from a signalfd of
 * its own, which sees only what the registering thread blocked; added
 * from a pool thread, an instance delivered to the test's thread runs
 * taxi's do-nothing handler and never reaches the filter.  Real kqueue
 * records the signal whichever thread takes it. */
static bool filter_misses_hook_adds(int mech) {
#if defined(__linux__)
  return mech == MECH_DEFAULT && strcmp(pools_backend, "kqueue") == 0;
#else
  (void)mech;
  return false;
#endif
}

/* Send PER_BURST of each signal, BURSTS times, each burst waited for. */
static void send_bursts(late_t *l, int mech) {
  for (int b = 0; b < BURSTS; b++) {
    int term = atomic_load(&l->term), usr1 = atomic_load(&l->usr1);
    for (int i = 0; i < PER_BURST; i++) {
      CU_ASSERT_EQUAL(kill(getpid(), SIGTERM), 0);
      CU_ASSERT_EQUAL(kill(getpid(), SIGUSR1), 0);
    }
    if (!pools_wait_count(&l->term, term + 1, POOLS_WAIT_MS) ||
        !pools_wait_count(&l->usr1, usr1 + 1, POOLS_WAIT_MS)) {
      printf("\n    %s: burst %d not dispatched (SIGTERM %d, SIGUSR1 %d)\n",
             mech_names[mech], b, atomic_load(&l->term), atomic_load(&l->usr1));
      CU_FAIL("a burst of signals was not dispatched");
      return;
    }
  }
}

static void check_hooks(late_t *l) {
  CU_ASSERT(atomic_load(&l->term) >= BURSTS);
  CU_ASSERT(atomic_load(&l->usr1) >= BURSTS);
  /* Several instances may make one dispatch, never one instance several. */
  CU_ASSERT(atomic_load(&l->term) <= BURSTS * PER_BURST);
  CU_ASSERT(atomic_load(&l->usr1) <= BURSTS * PER_BURST);
  CU_ASSERT_EQUAL(atomic_load(&l->main_thread), 0);
  /* The pool's threads keep SIGTERM blocked and the faults open. */
  CU_ASSERT_EQUAL(atomic_load(&l->unmasked), 0);
  CU_ASSERT_EQUAL(atomic_load(&l->sync_masked), 0);
}

static void add_signals(late_t *l, bool from_hook) {
  if (!from_hook) {
    CU_ASSERT_EQUAL_FATAL(add_both(l), 0);
    return;
  }
  CU_ASSERT_EQUAL_FATAL(taxi_reactor_notify(l->r, add_from_hook, l), 0);
  CU_ASSERT_FATAL(pools_wait_count(&l->added, 1, POOLS_WAIT_MS));
  CU_ASSERT_EQUAL_FATAL(atomic_load(&l->add_error), 0);
}

static void remove_signals(late_t *l) {
  CU_ASSERT_EQUAL(taxi_reactor_remove_signal(l->r, SIGTERM), 0);
  CU_ASSERT_EQUAL(taxi_reactor_remove_signal(l->r, SIGUSR1), 0);
}

static void late_lf(int mech, bool from_hook) {
  if (from_hook && filter_misses_hook_adds(mech)) {
    printf("\n    %s: skipped (libkqueue's filter)", mech_names[mech]);
    return;
  }
  choose(mech);
  taxi_reactor_t *r = pools_reactor();
  taxi_lf_pool_t *p = NULL;
  CU_ASSERT_EQUAL_FATAL(taxi_lf_create(&p, r, NULL), 0);
  CU_ASSERT_EQUAL_FATAL(taxi_lf_spawn(p, 4), 0);
  late_t l;
  late_init(&l, r);
  add_signals(&l, from_hook);
  send_bursts(&l, mech);
  check_hooks(&l);
  remove_signals(&l);
  CU_ASSERT_EQUAL(taxi_lf_destroy(p), 0);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  choose(MECH_DEFAULT);
}

static void late_hsha(int mech, bool from_hook) {
  if (from_hook && filter_misses_hook_adds(mech)) {
    printf("\n    %s: skipped (libkqueue's filter)", mech_names[mech]);
    return;
  }
  choose(mech);
  taxi_reactor_t *r = pools_reactor();
  taxi_hsha_options_t o = TAXI_HSHA_OPTIONS_INIT;
  o.workers = 4;
  taxi_hsha_pool_t *p = NULL;
  CU_ASSERT_EQUAL_FATAL(taxi_hsha_create(&p, r, &o), 0);
  late_t l;
  late_init(&l, r);
  add_signals(&l, from_hook);
  send_bursts(&l, mech);
  check_hooks(&l);
  remove_signals(&l);
  CU_ASSERT_EQUAL(taxi_hsha_destroy(p), 0);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  choose(MECH_DEFAULT);
}

static void test_lf_main(void) {
  for (int m = 0; m < MECH_COUNT; m++) late_lf(m, false);
}
static void test_lf_hook(void) {
  for (int m = 0; m < MECH_COUNT; m++) late_lf(m, true);
}
static void test_hsha_main(void) {
  for (int m = 0; m < MECH_COUNT; m++) late_hsha(m, false);
}
static void test_hsha_hook(void) {
  for (int m = 0; m < MECH_COUNT; m++) late_hsha(m, true);
}

#endif /* !_WIN32 */

static CU_TestInfo signal_late_tests[] = {
    {"lf, 4 threads, then SIGTERM and SIGUSR1 added by the test's thread",
     TAXI_TEST_POSIX_ONLY(test_lf_main)},
    {"lf, 4 threads, then SIGTERM and SIGUSR1 added by a hook",
     TAXI_TEST_POSIX_ONLY(test_lf_hook)},
    {"hsha, 4 workers, then SIGTERM and SIGUSR1 added by the test's thread",
     TAXI_TEST_POSIX_ONLY(test_hsha_main)},
    {"hsha, 4 workers, then SIGTERM and SIGUSR1 added by a hook",
     TAXI_TEST_POSIX_ONLY(test_hsha_hook)},
    CU_TEST_INFO_NULL,
};

#if defined(_WIN32)
#define LATE_SKIP "no POSIX signals on Windows"
#else
#define LATE_SKIP NULL
#endif

const taxi_test_suite_t pools_suite_signal_late = {
    "signals added after the pool's threads", signal_late_tests, 120,
    LATE_SKIP};
