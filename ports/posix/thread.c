/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ports/posix/thread.c - threads, mutexes and condition variables over
 * pthreads, and how many processors there are to run threads on.
 *
 * pthread functions return the error number instead of setting errno; it is
 * mapped with taxi__error_from_os().  Lock, unlock and wait are declared
 * unable to fail: they fail only on an invalid or uninitialised object or a
 * mutex the caller does not hold, i.e. memory corruption or a bug in taxi,
 * and continuing would break mutual exclusion, so those paths abort().
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* pthread_condattr_setclock(), clock_gettime() */
#endif
#include "config.h"

#include "port.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/* ---- threads ----------------------------------------------------------- */

/*
 * What a thread of taxi's starts with blocked: every signal but those the
 * kernel sends to the thread that caused them (a bad access, a trap, a bad
 * system call), which blocked would kill the process at once instead of
 * reaching a handler or a debugger, and SIGPROF, so that a profiler's
 * timer still samples the pool's threads.  The signals the application
 * takes - through a reactor or a handler of its own - then reach one of its
 * own threads or wait, blocked everywhere, for a signalfd, whenever the
 * pool was made: without this a thread made before a signal was added
 * would have it unblocked and take its default action (often termination).
 */
static void creation_mask(sigset_t *set) {
  static const int leave[] = {
      SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGPROF,
#ifdef SIGTRAP
      SIGTRAP,
#endif
#ifdef SIGSYS
      SIGSYS,
#endif
  };
  sigfillset(set);
  for (size_t i = 0; i < sizeof leave / sizeof leave[0]; i++)
    sigdelset(set, leave[i]);
}

int taxi__thread_create(taxi__thread_t *t, void *(*fn)(void *), void *arg) {
  /* A new thread inherits its creator's mask: block around the creation,
   * then give the creator its own mask back. */
  sigset_t block, old;
  creation_mask(&block);
  int rc = pthread_sigmask(SIG_BLOCK, &block, &old);
  if (rc != 0) return taxi__error_from_os(rc);
  rc = pthread_create(t, NULL, fn, arg);
  /* Only an invalid `how` fails; leaving the caller's signals blocked
   * would be a silent change of its behaviour, so as with the locks. */
  if (pthread_sigmask(SIG_SETMASK, &old, NULL) != 0) abort();
  return rc == 0 ? 0 : taxi__error_from_os(rc);
}

int taxi__thread_join(taxi__thread_t t) {
  int rc = pthread_join(t, NULL);
  return rc == 0 ? 0 : taxi__error_from_os(rc);
}

int taxi__thread_detach(taxi__thread_t t) {
  int rc = pthread_detach(t);
  return rc == 0 ? 0 : taxi__error_from_os(rc);
}

taxi__thread_id_t taxi__thread_self(void) { return pthread_self(); }

bool taxi__thread_equal(taxi__thread_id_t a, taxi__thread_id_t b) {
  return pthread_equal(a, b) != 0;
}

/* ---- mutexes ----------------------------------------------------------- */

int taxi__mutex_init(taxi__mutex_t *m) {
  int rc = pthread_mutex_init(m, NULL);
  return rc == 0 ? 0 : taxi__error_from_os(rc);
}

void taxi__mutex_destroy(taxi__mutex_t *m) {
  /* EBUSY (still locked) is a bug in the caller; nothing to undo here. */
  (void)pthread_mutex_destroy(m);
}

/* taxi__mutex_lock and taxi__mutex_unlock are inline (ports/port.h). */

/* ---- condition variables ----------------------------------------------- */

/* A non-negative nanosecond count as a timespec, saturating where time_t
 * is narrower than 64 bits (32-bit time_t then ends in 2038). */
static struct timespec to_timespec(taxi_time_t ns) {
  struct timespec ts;
  taxi_time_t sec;

  if (ns < 0) ns = 0;
  sec = ns / TAXI_NSEC_PER_SEC;
  if (sizeof(time_t) < sizeof(taxi_time_t) && sec > (taxi_time_t)INT32_MAX) {
    ts.tv_sec = (time_t)INT32_MAX;
    ts.tv_nsec = 0;
    return ts;
  }
  ts.tv_sec = (time_t)sec;
  ts.tv_nsec = (long)(ns % TAXI_NSEC_PER_SEC);
  return ts;
}

int taxi__cond_init(taxi__cond_t *c) {
#if defined(HAVE_PTHREAD_CONDATTR_SETCLOCK)
  /* Bind the condition variable to CLOCK_MONOTONIC, the clock of
   * taxi_now(), so that an absolute deadline is unaffected by changes to
   * the wall clock. */
  pthread_condattr_t attr;
  int rc = pthread_condattr_init(&attr);
  if (rc != 0) return taxi__error_from_os(rc);
  rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  if (rc == 0) rc = pthread_cond_init(c, &attr);
  (void)pthread_condattr_destroy(&attr);
  return rc == 0 ? 0 : taxi__error_from_os(rc);
#else
  /* No way to choose the clock (macOS, some older BSDs): the default
   * CLOCK_REALTIME condition variable; taxi__cond_timedwait() turns the
   * monotonic deadline into a relative wait. */
  int rc = pthread_cond_init(c, NULL);
  return rc == 0 ? 0 : taxi__error_from_os(rc);
#endif
}

void taxi__cond_destroy(taxi__cond_t *c) { (void)pthread_cond_destroy(c); }

void taxi__cond_wait(taxi__cond_t *c, taxi__mutex_t *m) {
  if (pthread_cond_wait(c, m) != 0) abort();
}

int taxi__cond_timedwait(taxi__cond_t *c, taxi__mutex_t *m,
                         taxi_time_t deadline) {
  struct timespec ts;
  int rc;

#if defined(HAVE_PTHREAD_CONDATTR_SETCLOCK)
  /* The condition variable runs on CLOCK_MONOTONIC: the deadline is its
   * absolute time as is.  A deadline in the past times out at once. */
  ts = to_timespec(deadline);
  rc = pthread_cond_timedwait(c, m, &ts);
  if (rc == 0) return 0;
  if (rc == ETIMEDOUT) return TAXI_ETIMEDOUT;
  abort();
#else
  taxi_time_t now = taxi_now();
  taxi_time_t rel;

  if (deadline <= now) return TAXI_ETIMEDOUT;
  rel = deadline - now;
#if defined(__APPLE__)
  /* Darwin can wait for a relative time, measured on its own clock
   * independently of the wall clock. */
  ts = to_timespec(rel);
  rc = pthread_cond_timedwait_relative_np(c, m, &ts);
#else
  /* Only CLOCK_REALTIME absolute waits are possible: convert the remaining
   * time to a wall-clock deadline.  If the wall clock is set forward during
   * the wait we wake early (caught below and reported as a spurious
   * wake-up, so the caller waits again); if it is set back we wake late by
   * that amount, which cannot be helped without a monotonic wait. */
  {
    struct timespec rt;
    taxi_time_t rt_ns;
    if (clock_gettime(CLOCK_REALTIME, &rt) != 0) abort();
    rt_ns = (taxi_time_t)rt.tv_sec * TAXI_NSEC_PER_SEC + rt.tv_nsec;
    ts = to_timespec(rel > INT64_MAX - rt_ns ? INT64_MAX : rt_ns + rel);
  }
  rc = pthread_cond_timedwait(c, m, &ts);
#endif
  if (rc == 0) return 0;
  if (rc == ETIMEDOUT)
    /* The wait ran on another clock: only our clock decides whether the
     * deadline really passed. */
    return taxi_now() >= deadline ? TAXI_ETIMEDOUT : 0;
  abort();
#endif
}

void taxi__cond_signal(taxi__cond_t *c) { (void)pthread_cond_signal(c); }

void taxi__cond_broadcast(taxi__cond_t *c) { (void)pthread_cond_broadcast(c); }

/* ---- processors -------------------------------------------------------- */

unsigned taxi__cpu_count(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (unsigned)n : 1u;
}
