/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/conformance/fork.c - taxi_reactor_reinit_after_fork(): the child
 * gets a working reactor of its own (handles, timers, notifications,
 * signals kept) and the parent's is not disturbed.
 *
 * A child cannot report CUnit assertions; it exits with 0 on success or
 * with the number of the step that failed.
 */
#define _GNU_SOURCE 1

#include "suites.h"

#if !defined(_WIN32)

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define WAIT_MS 5000
#define CHILD_WAIT_MS 20000

/* Assert that the child exited with 0, saying which step failed if not. */
static void check_child(pid_t pid) {
  int status = util_wait_child((int)pid, CHILD_WAIT_MS);
  if (status == -1) {
    printf("\n    child did not finish within %d ms: killed\n", CHILD_WAIT_MS);
    CU_FAIL("child timed out");
    return;
  }
  if (WIFSIGNALED(status)) {
    printf("\n    child killed by signal %d\n", WTERMSIG(status));
    CU_FAIL("child killed by a signal");
    return;
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
    printf("\n    child failed at step %d\n", WEXITSTATUS(status));
  CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static pid_t fork_flushed(void) {
  fflush(stdout);
  fflush(stderr);
  return fork();
}

/* A socketpair handler registered before fork: after reinit the child
 * dispatches data it writes itself, and destroys its reactor; then the
 * parent's reactor still dispatches (the child did not touch the parent's
 * kernel objects). */
static void test_child_dispatches_parent_unaffected(void) {
  taxi_reactor_t *r = conf_reactor();
  int sv[2];
  CU_ASSERT_EQUAL_FATAL(util_socketpair(sv), 0);
  conf_probe_t p;
  conf_probe_init(&p, sv[0], NULL);
  CU_ASSERT_EQUAL_FATAL(taxi_reactor_register(r, sv[0], &p.h, TAXI_EV_READ), 0);
  conf_settle(r, 10);

  pid_t pid = fork_flushed();
  CU_ASSERT_FATAL(pid >= 0);
  if (pid == 0) {
    if (taxi_reactor_reinit_after_fork(r) != 0) _exit(1);
    if (util_write_byte(sv[1]) != 1) _exit(2);
    if (run_until(r, conf_pred_nonzero, &p.inputs, WAIT_MS) != 1) _exit(3);
    if (atomic_load(&p.bytes) != 1) _exit(4);
    if (taxi_reactor_destroy(r) != 0) _exit(5);
    if (atomic_load(&p.closes) != 1) _exit(6);
    _exit(0);
  }
  check_child(pid);

  CU_ASSERT_EQUAL(atomic_load(&p.inputs), 0);
  CU_ASSERT_EQUAL(util_write_byte(sv[1]), 1);
  CU_ASSERT_EQUAL(run_until(r, conf_pred_nonzero, &p.inputs, WAIT_MS), 1);
  CU_ASSERT_EQUAL(atomic_load(&p.bytes), 1);
  /* And again, after the hook re-armed the handle. */
  CU_ASSERT_EQUAL(util_write_byte(sv[1]), 1);
  conf_count_goal_t g = {&p.inputs, 2};
  CU_ASSERT_EQUAL(run_until(r, conf_pred_reached, &g, WAIT_MS), 1);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  CU_ASSERT_EQUAL(atomic_load(&p.closes), 1);
  close(sv[0]);
  close(sv[1]);
}

/* A handle registered in the child after reinit works there too. */
static void test_child_registers_new_handle(void) {
  taxi_reactor_t *r = conf_reactor();
  pid_t pid = fork_flushed();
  CU_ASSERT_FATAL(pid >= 0);
  if (pid == 0) {
    int sv[2];
    conf_probe_t p;
    if (taxi_reactor_reinit_after_fork(r) != 0) _exit(1);
    if (util_socketpair(sv) != 0) _exit(2);
    memset(&p, 0, sizeof p);
    p.fd = sv[0];
    p.drain = 1;
    if (taxi_handler_init(&p.h, &conf_probe_ops) != 0) _exit(3);
    if (taxi_reactor_register(r, sv[0], &p.h, TAXI_EV_READ) != 0) _exit(4);
    if (util_write_byte(sv[1]) != 1) _exit(5);
    if (run_until(r, conf_pred_nonzero, &p.inputs, WAIT_MS) != 1) _exit(6);
    if (taxi_reactor_destroy(r) != 0) _exit(7);
    _exit(0);
  }
  check_child(pid);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
}

/* A timer scheduled before fork fires in the child after reinit (and in
 * the parent). */
static void test_timer_survives_fork(void) {
  taxi_reactor_t *r = conf_reactor();
  conf_probe_t p;
  conf_probe_init(&p, -1, NULL);
  taxi_timer_t t;
  CU_ASSERT_EQUAL(taxi_timer_init(&t), 0);
  CU_ASSERT_EQUAL_FATAL(
      taxi_reactor_schedule(r, &t, &p.h, 30 * TAXI_NSEC_PER_MSEC, 0, &t), 0);
  pid_t pid = fork_flushed();
  CU_ASSERT_FATAL(pid >= 0);
  if (pid == 0) {
    if (taxi_reactor_reinit_after_fork(r) != 0) _exit(1);
    if (run_until(r, conf_pred_nonzero, &p.timeouts, WAIT_MS) != 1) _exit(2);
    if (p.last_act != &t) _exit(3);
    if (taxi_reactor_destroy(r) != 0) _exit(4);
    _exit(0);
  }
  check_child(pid);
  CU_ASSERT_EQUAL(run_until(r, conf_pred_nonzero, &p.timeouts, WAIT_MS), 1);
  CU_ASSERT_EQUAL(atomic_load(&p.timeouts), 1);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
}

static atomic_int notified;
static void count_notified(void *arg) {
  (void)arg;
  atomic_fetch_add(&notified, 1);
}

/* A notification queued before fork runs in the child after reinit (and,
 * separately, in the parent). */
static void test_notification_survives_fork(void) {
  atomic_store(&notified, 0);
  taxi_reactor_t *r = conf_reactor();
  CU_ASSERT_EQUAL_FATAL(taxi_reactor_notify(r, count_notified, NULL), 0);
  pid_t pid = fork_flushed();
  CU_ASSERT_FATAL(pid >= 0);
  if (pid == 0) {
    if (taxi_reactor_reinit_after_fork(r) != 0) _exit(1);
    if (run_until(r, conf_pred_nonzero, &notified, WAIT_MS) != 1) _exit(2);
    if (run_for(r, 10) < 0) _exit(3);
    if (atomic_load(&notified) != 1) _exit(4);
    /* The child's own wake-up channel works. */
    if (taxi_reactor_notify(r, count_notified, NULL) != 0) _exit(5);
    if (taxi_reactor_handle_events(r, WAIT_MS) != 1) _exit(6);
    if (atomic_load(&notified) != 2) _exit(7);
    if (taxi_reactor_destroy(r) != 0) _exit(8);
    _exit(0);
  }
  check_child(pid);
  CU_ASSERT_EQUAL(run_until(r, conf_pred_nonzero, &notified, WAIT_MS), 1);
  CU_ASSERT(run_for(r, 10) >= 0);
  CU_ASSERT_EQUAL(atomic_load(&notified), 1);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
}

static void ignore_signal(int signo) { (void)signo; }

/* A signal added before fork is dispatched in the child after reinit. */
static void test_signal_survives_fork(void) {
  struct sigaction sa, old;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = ignore_signal; /* a stray signal must not kill anyone */
  sigemptyset(&sa.sa_mask);
  sigaction(SIGUSR1, &sa, &old);
  taxi_reactor_t *r = conf_reactor();
  conf_probe_t p;
  conf_probe_init(&p, -1, NULL);
  CU_ASSERT_EQUAL_FATAL(taxi_reactor_add_signal(r, SIGUSR1, &p.h), 0);
  pid_t pid = fork_flushed();
  CU_ASSERT_FATAL(pid >= 0);
  if (pid == 0) {
    if (taxi_reactor_reinit_after_fork(r) != 0) _exit(1);
    if (conf_raise(SIGUSR1) != 0) _exit(2);
    if (run_until(r, conf_pred_nonzero, &p.signals, WAIT_MS) != 1) _exit(3);
    if (atomic_load(&p.last_signo) != SIGUSR1) _exit(4);
    if (taxi_reactor_destroy(r) != 0) _exit(5);
    _exit(0);
  }
  check_child(pid);
  /* The parent still owns its signal. */
  CU_ASSERT_EQUAL(conf_raise(SIGUSR1), 0);
  CU_ASSERT_EQUAL(run_until(r, conf_pred_nonzero, &p.signals, WAIT_MS), 1);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  sigaction(SIGUSR1, &old, NULL);
}

#endif /* !_WIN32 */

static CU_TestInfo fork_tests[] = {
    {"child dispatches; parent unaffected",
     TAXI_TEST_POSIX_ONLY(test_child_dispatches_parent_unaffected)},
    {"child registers a new handle",
     TAXI_TEST_POSIX_ONLY(test_child_registers_new_handle)},
    {"timer survives fork", TAXI_TEST_POSIX_ONLY(test_timer_survives_fork)},
    {"notification survives fork",
     TAXI_TEST_POSIX_ONLY(test_notification_survives_fork)},
    {"signal survives fork", TAXI_TEST_POSIX_ONLY(test_signal_survives_fork)},
    CU_TEST_INFO_NULL,
};

const taxi_test_suite_t conf_suite_fork = {"fork", fork_tests, 60,
#if defined(_WIN32)
                                           "fork(): Windows has none"
#else
                                           NULL
#endif
};
