/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ports/posix/signal_taken.c - a signal handed to a readiness mechanism
 * that reports signals itself (kqueue's EVFILT_SIGNAL) instead of to a
 * signal source.
 *
 * kqueue(2) says EVFILT_SIGNAL "coexists with the signal() and sigaction()
 * facilities, and has a lower precedence": the event is recorded after
 * normal delivery, so a signal left at its default disposition would
 * still terminate the process.  Ignoring it (SIG_IGN) is what some event
 * libraries do, but that would change SIGCHLD (ignored children are
 * reaped by the kernel) and, on Linux, lets the kernel discard a signal
 * that reaches a thread not blocking it before libkqueue's signalfd sees
 * it.  A handler that does nothing avoids both: every signal is delivered
 * somewhere harmless and recorded by the filter.  SA_RESTART keeps it from
 * turning the system calls it interrupts into EINTR where that can be
 * avoided.
 *
 * libkqueue implements the filter with a signalfd and blocks the signal in
 * the thread that adds the event (as taxi's own signalfd source does);
 * give_back undoes that for a thread that had it unblocked.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* sigaction(), SA_RESTART under -std=c11 */
#endif
#include "config.h"

#include "port.h"
#include "signal_impl.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>

/* Per signal, process-wide; the claim makes one taker its only user. */
static struct sigaction taken_saved[TAXI__NSIG];
static bool taken_was_blocked[TAXI__NSIG];

static void taken_noop(int signo) { (void)signo; }

int taxi__signal_take(int signo) {
  struct sigaction sa;
  sigset_t mask;
  int rc = taxi__sigclaim(signo);

  if (rc != 0) return rc;
  rc = pthread_sigmask(SIG_SETMASK, NULL, &mask);
  if (rc != 0) {
    taxi__sigunclaim(signo);
    return taxi__error_from_os(rc);
  }
  taken_was_blocked[signo] = sigismember(&mask, signo) == 1;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = taken_noop;
  sa.sa_flags = SA_RESTART;
  sigfillset(&sa.sa_mask);
  if (sigaction(signo, &sa, &taken_saved[signo]) != 0) {
    rc = taxi__last_error();
    taxi__sigunclaim(signo);
    return rc;
  }
  return 0;
}

int taxi__signal_give_back(int signo) {
  int rc = 0;

  if (signo <= 0 || signo >= TAXI__NSIG) return TAXI_EINVAL;
  /* Instances already sent were ours: the restored disposition must not
   * get them.  Dropped where the system can take a pending signal
   * without waiting; elsewhere unblocking below hands each one to the
   * do-nothing handler, still installed.  (sigwait() would do it too, but
   * could wait for good if another thread took the instance between the
   * check that it is pending and the wait.) */
  taxi__sig_discard_pending(signo);
  if (!taken_was_blocked[signo]) {
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, signo);
    int err = pthread_sigmask(SIG_UNBLOCK, &one, NULL);
    if (err != 0) rc = taxi__error_from_os(err);
  }
  if (sigaction(signo, &taken_saved[signo], NULL) != 0 && rc == 0)
    rc = taxi__last_error();
  taxi__sigunclaim(signo);
  return rc;
}
