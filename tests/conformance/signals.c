/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/conformance/signals.c - POSIX signals dispatched as events (signalfd
 * and the self-pipe variant), ownership across reactors, invalid numbers,
 * restoration of the mask and disposition.
 */
#define _GNU_SOURCE 1

#include "config.h"

#include "suites.h"

#if !defined(_WIN32)

#include <pthread.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WAIT_MS 5000

/* A handler for SIGUSR1/SIGUSR2 installed by the test itself: it runs only
 * when a signal escapes the reactor, and it keeps such a signal from
 * killing the process. */
static volatile sig_atomic_t stray_count;
static void stray_handler(int signo) {
  (void)signo;
  stray_count++;
}

static void install_stray(int signo) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = stray_handler;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(signo, &sa, NULL);
}

static void restore_default(int signo) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = SIG_DFL;
  sigemptyset(&sa.sa_mask);
  sigaction(signo, &sa, NULL);
}

static void test_setup(void) {
  stray_count = 0;
  install_stray(SIGUSR1);
  install_stray(SIGUSR2);
}

static void test_teardown(void) {
  restore_default(SIGUSR1);
  restore_default(SIGUSR2);
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGUSR1);
  sigaddset(&s, SIGUSR2);
  pthread_sigmask(SIG_UNBLOCK, &s, NULL);
}

/* A signal handler object recording what reached it and where. */
typedef struct sig_probe {
  taxi_handler_t h;
  atomic_int count;
  atomic_int last_signo;
  atomic_uint seen_mask; /* bit signo set for each signo seen */
  atomic_int closes;
  int ret;
  pthread_t thread;
} sig_probe_t;

static int sig_probe_signal(taxi_handler_t *h, int signo) {
  sig_probe_t *p = TAXI_CONTAINER_OF(h, sig_probe_t, h);
  p->thread = pthread_self();
  atomic_store(&p->last_signo, signo);
  if (signo > 0 && signo < 32) atomic_fetch_or(&p->seen_mask, 1u << signo);
  atomic_fetch_add(&p->count, 1);
  return p->ret;
}

static void sig_probe_close(taxi_handler_t *h, taxi_handle_t fd) {
  (void)fd;
  atomic_fetch_add(&TAXI_CONTAINER_OF(h, sig_probe_t, h)->closes, 1);
}

static const taxi_handler_ops_t sig_probe_ops = {.signal = sig_probe_signal,
                                                 .close = sig_probe_close};

static void sig_probe_init(sig_probe_t *p) {
  memset(p, 0, sizeof *p);
  atomic_init(&p->count, 0);
  atomic_init(&p->last_signo, 0);
  atomic_init(&p->seen_mask, 0);
  atomic_init(&p->closes, 0);
  CU_ASSERT_EQUAL(taxi_handler_init(&p->h, &sig_probe_ops), 0);
}

static void *send_usr1_later(void *arg) {
  (void)arg;
  util_sleep_ms(20); /* let the main thread block; not needed for correctness */
  kill(getpid(), SIGUSR1);
  return NULL;
}

/* add_signal(SIGUSR1); a thread created afterwards sends it to the process
 * while the main thread waits: the signal hook runs with SIGUSR1, in the
 * dispatching thread. */
static void signal_from_other_thread(int self_pipe) {
  test_setup();
  taxi_reactor_t *r = conf_reactor();
  sig_probe_t p;
  sig_probe_init(&p);
  CU_ASSERT_EQUAL_FATAL(taxi_reactor_add_signal(r, SIGUSR1, &p.h), 0);
  if (self_pipe) {
    /* The self-pipe source is really in use: it installed its handler. */
    struct sigaction sa;
    CU_ASSERT_EQUAL(sigaction(SIGUSR1, NULL, &sa), 0);
    CU_ASSERT(sa.sa_handler != stray_handler);
  }
  pthread_t t;
  CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, send_usr1_later, NULL), 0);
  CU_ASSERT_EQUAL(run_until(r, conf_pred_nonzero, &p.count, WAIT_MS), 1);
  pthread_join(t, NULL);
  CU_ASSERT_EQUAL(atomic_load(&p.last_signo), SIGUSR1);
  if (atomic_load(&p.count)) CU_ASSERT(pthread_equal(p.thread, pthread_self()));
  CU_ASSERT_EQUAL(stray_count, 0);
  taxi_reactor_stats_t s;
  CU_ASSERT_EQUAL(taxi_reactor_stats(r, &s), 0);
  CU_ASSERT(s.signals >= 1);
  CU_ASSERT_EQUAL(taxi_reactor_remove_signal(r, SIGUSR1), 0);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  CU_ASSERT_EQUAL(atomic_load(&p.closes), 1);
  test_teardown();
}

static void test_signal_from_other_thread(void) {
  unsetenv("TAXI_SIGNAL_PIPE");
  signal_from_other_thread(0);
}

/* The same, with the self-pipe signal source (TAXI_SIGNAL_PIPE=1). */
static void test_signal_from_other_thread_self_pipe(void) {
  setenv("TAXI_SIGNAL_PIPE", "1", 1);
  signal_from_other_thread(1);
  unsetenv("TAXI_SIGNAL_PIPE");
}

/* A signal raised by the dispatching thread itself before it dispatches. */
static void raised_before_dispatch(void) {
  test_setup();
  taxi_reactor_t *r = conf_reactor();
  sig_probe_t p;
  sig_probe_init(&p);
  CU_ASSERT_EQUAL_FATAL(taxi_reactor_add_signal(r, SIGUSR2, &p.h), 0);
  CU_ASSERT_EQUAL(conf_raise(SIGUSR2), 0);
  CU_ASSERT_EQUAL(run_until(r, conf_pred_nonzero, &p.count, WAIT_MS), 1);
  CU_ASSERT_EQUAL(atomic_load(&p.last_signo), SIGUSR2);
  CU_ASSERT_EQUAL(stray_count, 0);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  test_teardown();
}

static void test_signal_raised_before_dispatch(void) {
  unsetenv("TAXI_SIGNAL_PIPE");
  raised_before_dispatch();
}

static void test_signal_raised_before_dispatch_self_pipe(void) {
  setenv("TAXI_SIGNAL_PIPE", "1", 1);
  raised_before_dispatch();
  unsetenv("TAXI_SIGNAL_PIPE");
}

/* Two signals on one handler: each reaches it with its own number. */
static void test_two_signals_one_handler(void) {
  test_setup();
  taxi_reactor_t *r = conf_reactor();
  sig_probe_t p;
  sig_probe_init(&p);
  CU_ASSERT_EQUAL_FATAL(taxi_reactor_add_signal(r, SIGUSR1, &p.h), 0);
  CU_ASSERT_EQUAL_FATAL(taxi_reactor_add_signal(r, SIGUSR2, &p.h), 0);
  CU_ASSERT_EQUAL(conf_raise(SIGUSR1), 0);
  CU_ASSERT_EQUAL(conf_raise(SIGUSR2), 0);
  conf_count_goal_t g = {&p.count, 2};
  CU_ASSERT_EQUAL(run_until(r, conf_pred_reached, &g, WAIT_MS), 1);
  unsigned want = (1u << SIGUSR1) | (1u << SIGUSR2);
  CU_ASSERT_EQUAL(atomic_load(&p.seen_mask), want);
  CU_ASSERT_EQUAL(stray_count, 0);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  CU_ASSERT_EQUAL(atomic_load(&p.closes), 1);
  test_teardown();
}

/* remove_signal, then add again: it works again; a second remove gives
 * TAXI_ENOENT, adding twice TAXI_EEXIST. */
static void test_remove_then_add_again(void) {
  test_setup();
  taxi_reactor_t *r = conf_reactor();
  sig_probe_t p, q;
  sig_probe_init(&p);
  sig_probe_init(&q);
  CU_ASSERT_EQUAL(taxi_reactor_add_signal(r, SIGUSR1, &p.h), 0);
  CU_ASSERT_EQUAL(taxi_reactor_add_signal(r, SIGUSR1, &p.h), TAXI_EEXIST);
  CU_ASSERT_EQUAL(taxi_reactor_add_signal(r, SIGUSR1, &q.h), TAXI_EEXIST);
  CU_ASSERT_EQUAL(taxi_reactor_remove_signal(r, SIGUSR1), 0);
  CU_ASSERT_EQUAL(taxi_reactor_remove_signal(r, SIGUSR1), TAXI_ENOENT);
  CU_ASSERT_EQUAL(taxi_reactor_remove_signal(r, SIGUSR2), TAXI_ENOENT);
  CU_ASSERT_EQUAL(taxi_reactor_add_signal(r, SIGUSR1, &p.h), 0);
  CU_ASSERT_EQUAL(conf_raise(SIGUSR1), 0);
  CU_ASSERT_EQUAL(run_until(r, conf_pred_nonzero, &p.count, WAIT_MS), 1);
  CU_ASSERT_EQUAL(atomic_load(&p.last_signo), SIGUSR1);
  CU_ASSERT_EQUAL(stray_count, 0);
  CU_ASSERT_EQUAL(taxi_reactor_remove_signal(r, SIGUSR1), 0);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  test_teardown();
}

/* remove_signal restores the thread's signal mask and the disposition to
 * what they were before add_signal. */
static void test_remove_signal_restores_state(void) {
  test_setup();
  sigset_t before, after;
  CU_ASSERT_EQUAL(pthread_sigmask(SIG_SETMASK, NULL, &before), 0);
  CU_ASSERT_EQUAL(sigismember(&before, SIGUSR1), 0);
  taxi_reactor_t *r = conf_reactor();
  sig_probe_t p;
  sig_probe_init(&p);
  CU_ASSERT_EQUAL(taxi_reactor_add_signal(r, SIGUSR1, &p.h), 0);
  CU_ASSERT_EQUAL(taxi_reactor_remove_signal(r, SIGUSR1), 0);
  CU_ASSERT_EQUAL(pthread_sigmask(SIG_SETMASK, NULL, &after), 0);
  CU_ASSERT_EQUAL(sigismember(&after, SIGUSR1), 0);
  struct sigaction sa;
  CU_ASSERT_EQUAL(sigaction(SIGUSR1, NULL, &sa), 0);
  CU_ASSERT(sa.sa_handler == stray_handler);
  /* And the signal now goes to that handler. */
  CU_ASSERT_EQUAL(conf_raise(SIGUSR1), 0);
  CU_ASSERT_EQUAL(stray_count, 1);
  CU_ASSERT(run_for(r, 20) >= 0);
  CU_ASSERT_EQUAL(atomic_load(&p.count), 0);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  test_teardown();
}

/* Removed while another thread is taking an instance.  SIGUSR2 is left at
 * its default action (ending the process), so the source forwards what a
 * thread with it unblocked takes.  A thread of the test's keeps it
 * unblocked and busy on the other core; the main thread adds the signal
 * (blocking it here), sends it twice and removes it at once, many times.
 * Each instance is pending for the process until the busy thread takes
 * it, which can be after the removal started: if the removal put the
 * default action back before dropping what was pending, that thread would
 * end the process with a signal sent while the source owned it. */
#define RACE_ROUNDS 4000

static void *keep_busy(void *arg) {
  atomic_bool *stop = arg;
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, SIGUSR2);
  pthread_sigmask(SIG_UNBLOCK, &one, NULL);
  while (!atomic_load(stop)) {
  }
  return NULL;
}

static void test_remove_while_taken(void) {
  restore_default(SIGUSR2);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, SIGUSR2);
  CU_ASSERT_EQUAL(pthread_sigmask(SIG_UNBLOCK, &one, NULL), 0);
  atomic_bool stop = false;
  pthread_t t;
  CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, keep_busy, &stop), 0);
  taxi_reactor_t *r = conf_reactor();
  sig_probe_t p;
  sig_probe_init(&p);
  int rounds = 0;
  for (int i = 0; i < RACE_ROUNDS; i++) {
    if (taxi_reactor_add_signal(r, SIGUSR2, &p.h) != 0) break;
    kill(getpid(), SIGUSR2);
    kill(getpid(), SIGUSR2);
    if (taxi_reactor_remove_signal(r, SIGUSR2) != 0) break;
    rounds++;
  }
  atomic_store(&stop, true);
  pthread_join(t, NULL);
  CU_ASSERT_EQUAL(rounds, RACE_ROUNDS);
  /* Given back each time: the main thread's mask and the disposition are
   * as before. */
  sigset_t after;
  CU_ASSERT_EQUAL(pthread_sigmask(SIG_SETMASK, NULL, &after), 0);
  CU_ASSERT_EQUAL(sigismember(&after, SIGUSR2), 0);
  struct sigaction sa;
  CU_ASSERT_EQUAL(sigaction(SIGUSR2, NULL, &sa), 0);
  CU_ASSERT(sa.sa_handler == SIG_DFL);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  test_teardown();
}

/* One reactor per process owns a signal: a second reactor gets TAXI_EBUSY
 * until the owner removes it (or is destroyed). */
static void test_second_reactor_same_signal_ebusy(void) {
  test_setup();
  taxi_reactor_t *a = conf_reactor();
  taxi_reactor_t *b = conf_reactor();
  sig_probe_t pa, pb;
  sig_probe_init(&pa);
  sig_probe_init(&pb);
  CU_ASSERT_EQUAL(taxi_reactor_add_signal(a, SIGUSR2, &pa.h), 0);
  CU_ASSERT_EQUAL(taxi_reactor_add_signal(b, SIGUSR2, &pb.h), TAXI_EBUSY);
  CU_ASSERT_EQUAL(taxi_reactor_remove_signal(a, SIGUSR2), 0);
  CU_ASSERT_EQUAL(taxi_reactor_add_signal(b, SIGUSR2, &pb.h), 0);
  CU_ASSERT_EQUAL(taxi_reactor_add_signal(a, SIGUSR2, &pa.h), TAXI_EBUSY);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(b), 0);
  CU_ASSERT_EQUAL(atomic_load(&pb.closes), 1);
  CU_ASSERT_EQUAL(taxi_reactor_add_signal(a, SIGUSR2, &pa.h), 0);
  CU_ASSERT_EQUAL(conf_raise(SIGUSR2), 0);
  CU_ASSERT_EQUAL(run_until(a, conf_pred_nonzero, &pa.count, WAIT_MS), 1);
  CU_ASSERT_EQUAL(stray_count, 0);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(a), 0);
  test_teardown();
}

/* Removing a handler releases its signals. */
static void test_remove_handler_releases_signals(void) {
  test_setup();
  taxi_reactor_t *r = conf_reactor();
  sig_probe_t p, q;
  sig_probe_init(&p);
  sig_probe_init(&q);
  CU_ASSERT_EQUAL(taxi_reactor_add_signal(r, SIGUSR1, &p.h), 0);
  CU_ASSERT_EQUAL(taxi_reactor_remove(r, &p.h), 0);
  CU_ASSERT_EQUAL(atomic_load(&p.closes), 1);
  CU_ASSERT_EQUAL(taxi_reactor_remove_signal(r, SIGUSR1), TAXI_ENOENT);
  CU_ASSERT_EQUAL(taxi_reactor_add_signal(r, SIGUSR1, &q.h), 0);
  CU_ASSERT_EQUAL(conf_raise(SIGUSR1), 0);
  CU_ASSERT_EQUAL(run_until(r, conf_pred_nonzero, &q.count, WAIT_MS), 1);
  CU_ASSERT_EQUAL(atomic_load(&p.count), 0);
  CU_ASSERT_EQUAL(stray_count, 0);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  test_teardown();
}

/* A signal hook returning a negative value removes its handler (and so
 * releases the signal). */
static void test_negative_signal_return_removes(void) {
  test_setup();
  taxi_reactor_t *r = conf_reactor();
  sig_probe_t p;
  sig_probe_init(&p);
  p.ret = -1;
  CU_ASSERT_EQUAL(taxi_reactor_add_signal(r, SIGUSR1, &p.h), 0);
  CU_ASSERT_EQUAL(conf_raise(SIGUSR1), 0);
  CU_ASSERT_EQUAL(run_until(r, conf_pred_nonzero, &p.closes, WAIT_MS), 1);
  CU_ASSERT_EQUAL(atomic_load(&p.count), 1);
  CU_ASSERT_EQUAL(atomic_load(&p.closes), 1);
  CU_ASSERT_EQUAL(taxi_reactor_remove(r, &p.h), TAXI_ENOENT);
  CU_ASSERT_EQUAL(taxi_reactor_remove_signal(r, SIGUSR1), TAXI_ENOENT);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  test_teardown();
}

/* A handler attached through a signal stays attached after remove_signal:
 * remove returns 0 and closes it; destroy closes one left like that. */
static void test_handler_attached_after_remove_signal(void) {
  test_setup();
  taxi_reactor_t *r = conf_reactor();
  sig_probe_t p, q;
  sig_probe_init(&p);
  sig_probe_init(&q);
  CU_ASSERT_EQUAL(taxi_reactor_add_signal(r, SIGUSR1, &p.h), 0);
  CU_ASSERT_EQUAL(taxi_reactor_add_signal(r, SIGUSR2, &q.h), 0);
  CU_ASSERT_EQUAL(taxi_reactor_remove_signal(r, SIGUSR1), 0);
  CU_ASSERT_EQUAL(taxi_reactor_remove_signal(r, SIGUSR2), 0);
  CU_ASSERT_EQUAL(taxi_reactor_remove(r, &p.h), 0);
  CU_ASSERT_EQUAL(atomic_load(&p.closes), 1);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  CU_ASSERT_EQUAL(atomic_load(&q.closes), 1);
  test_teardown();
}

/* Not catchable or not a signal: TAXI_EINVAL. */
static void test_invalid_signal_numbers(void) {
  taxi_reactor_t *r = conf_reactor();
  sig_probe_t p;
  sig_probe_init(&p);
  const int bad[] = {0, -1, 9999, SIGKILL, SIGSTOP, NSIG, 1 << 30};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int rc = taxi_reactor_add_signal(r, bad[i], &p.h);
    if (rc != TAXI_EINVAL)
      printf("\n    add_signal(%d) = %s\n", bad[i], taxi_error_name(rc));
    CU_ASSERT_EQUAL(rc, TAXI_EINVAL);
    /* Never added: "not dispatched" or "not a signal", but no crash. */
    rc = taxi_reactor_remove_signal(r, bad[i]);
    CU_ASSERT(rc == TAXI_EINVAL || rc == TAXI_ENOENT);
  }
  /* A handler without a signal hook. */
  conf_probe_t np;
  static const taxi_handler_ops_t no_signal_ops = {.close = conf_probe_close};
  conf_probe_init(&np, -1, &no_signal_ops);
  CU_ASSERT_EQUAL(taxi_reactor_add_signal(r, SIGUSR1, &np.h), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  CU_ASSERT_EQUAL(atomic_load(&p.closes), 0); /* never attached */
}

/* Which mechanism delivers the signal.  Where the backend reports signals
 * itself (kqueue's EVFILT_SIGNAL, unless TAXI_SIGNAL_SOURCE=port) taxi
 * gives the signal a handler that does nothing while it is added, so the
 * default action cannot end the process before the filter records it;
 * with a signalfd the application's own handler stays (one left at the
 * default action would get a handler passing it on to the reactor); the
 * self-pipe has its handler.  Either way the signal is dispatched, and
 * after remove_signal the application's handler is back. */
static void test_signal_mechanism(void) {
  test_setup();
  unsetenv("TAXI_SIGNAL_PIPE");
  const char *source = getenv("TAXI_SIGNAL_SOURCE");
  bool port = source && strcmp(source, "port") == 0;
  const char *mechanism = "self-pipe";
  bool replaced = true;
#if defined(TAXI_HAVE_KQUEUE_SIGNAL)
  if (strcmp(taxi_test_backend, "kqueue") == 0 && !port)
    mechanism = "EVFILT_SIGNAL";
#endif
#if defined(HAVE_SIGNALFD)
  if (strcmp(mechanism, "self-pipe") == 0) {
    mechanism = "signalfd";
    replaced = false;
  }
#endif
  printf("\n    %s: expecting %s\n", taxi_test_backend, mechanism);
  taxi_reactor_t *r = conf_reactor();
  sig_probe_t p;
  sig_probe_init(&p);
  CU_ASSERT_EQUAL_FATAL(taxi_reactor_add_signal(r, SIGUSR1, &p.h), 0);
  struct sigaction sa;
  CU_ASSERT_EQUAL(sigaction(SIGUSR1, NULL, &sa), 0);
  CU_ASSERT_EQUAL(sa.sa_handler != stray_handler, replaced);
  CU_ASSERT_EQUAL(conf_raise(SIGUSR1), 0);
  CU_ASSERT_EQUAL(run_until(r, conf_pred_nonzero, &p.count, WAIT_MS), 1);
  CU_ASSERT_EQUAL(atomic_load(&p.last_signo), SIGUSR1);
  CU_ASSERT_EQUAL(stray_count, 0);
  CU_ASSERT_EQUAL(taxi_reactor_remove_signal(r, SIGUSR1), 0);
  CU_ASSERT_EQUAL(sigaction(SIGUSR1, NULL, &sa), 0);
  CU_ASSERT(sa.sa_handler == stray_handler);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  test_teardown();
  (void)port;
}

/* taxi_reactor_stop from an OS signal handler (it takes no lock): run
 * returns TAXI_ESTOPPED.  Another thread sends the signal to the dispatching
 * thread until run has returned (the first may come before the wait); past the
 * bound it stops the reactor itself and the test fails. */
static taxi_reactor_t *stop_target;
static void stop_from_handler(int signo) {
  (void)signo;
  taxi_reactor_stop(stop_target);
}

static void stop_anyway(void *arg) { taxi_reactor_stop(arg); }

static void test_stop_from_signal_handler(void) {
  taxi_reactor_t *r = NULL;
  CU_ASSERT_EQUAL_FATAL(util_reactor_create(&r, taxi_test_backend), 0);
  stop_target = r;
  util_signal_handle(SIGUSR1, stop_from_handler);
  util_signaller_t x;
  CU_ASSERT_EQUAL_FATAL(
      util_signaller_start(&x, SIGUSR1, WAIT_MS, stop_anyway, r), 0);
  int rc = taxi_reactor_run(r);
  util_signaller_finish(&x);
  CU_ASSERT_EQUAL(rc, TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(atomic_load(&x.gave_up), 0);
  CU_ASSERT(atomic_load(&x.sent) >= 1);
  CU_ASSERT_EQUAL(taxi_reactor_handle_events(r, 0), TAXI_ESTOPPED);
  util_signal_default(SIGUSR1);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
}

#endif /* !_WIN32 */

static CU_TestInfo signal_tests[] = {
    {"stop from a signal handler",
     TAXI_TEST_POSIX_ONLY(test_stop_from_signal_handler)},
    {"signal from another thread",
     TAXI_TEST_POSIX_ONLY(test_signal_from_other_thread)},
    {"signal from another thread (self-pipe)",
     TAXI_TEST_POSIX_ONLY(test_signal_from_other_thread_self_pipe)},
    {"signal raised before dispatch",
     TAXI_TEST_POSIX_ONLY(test_signal_raised_before_dispatch)},
    {"signal raised before dispatch (self-pipe)",
     TAXI_TEST_POSIX_ONLY(test_signal_raised_before_dispatch_self_pipe)},
    {"two signals on one handler",
     TAXI_TEST_POSIX_ONLY(test_two_signals_one_handler)},
    {"remove_signal then add again",
     TAXI_TEST_POSIX_ONLY(test_remove_then_add_again)},
    {"remove_signal restores mask and disposition",
     TAXI_TEST_POSIX_ONLY(test_remove_signal_restores_state)},
    {"removed while another thread takes an instance: the process lives",
     TAXI_TEST_POSIX_ONLY(test_remove_while_taken)},
    {"second reactor, same signal: EBUSY",
     TAXI_TEST_POSIX_ONLY(test_second_reactor_same_signal_ebusy)},
    {"removing a handler releases its signals",
     TAXI_TEST_POSIX_ONLY(test_remove_handler_releases_signals)},
    {"negative signal return removes handler",
     TAXI_TEST_POSIX_ONLY(test_negative_signal_return_removes)},
    {"handler attached after remove_signal",
     TAXI_TEST_POSIX_ONLY(test_handler_attached_after_remove_signal)},
    {"invalid signal numbers: EINVAL",
     TAXI_TEST_POSIX_ONLY(test_invalid_signal_numbers)},
    {"the mechanism that delivers: EVFILT_SIGNAL, signalfd or self-pipe",
     TAXI_TEST_POSIX_ONLY(test_signal_mechanism)},
    CU_TEST_INFO_NULL,
};

const taxi_test_suite_t conf_suite_signals = {
    "signals", signal_tests, 60,
#if defined(_WIN32)
    "POSIX signals: Windows delivers none (taxi_reactor_add_signal is "
    "TAXI_ENOTSUP there)"
#else
    NULL
#endif
};
