/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ports/posix/signal_fd.c - the signal source over Linux signalfd.
 *
 * A signalfd only receives signals that are blocked: delivery to a handler
 * or a default action happens first otherwise.  So add() blocks the signal
 * in the calling thread with pthread_sigmask() and remembers whether it was
 * blocked already, and del() unblocks it only if add() did the blocking.
 * Signal masks are per thread: del() and close() restore the mask of the
 * thread that calls them, which should be the one that called add();
 * other threads must block the signals themselves (taxi/reactor.h says so).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* sigtimedwait(), pthread_sigmask() under -std=c11 */
#endif
#include "config.h"

#include "port.h"
#include "signal_impl.h"

#if defined(HAVE_SIGNALFD)

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#define SFD_FLAGS (SFD_NONBLOCK | SFD_CLOEXEC)

/* s's signals, plus `extra` if it is not 0. */
static void build_set(const taxi__sigsrc_t *s, int extra, sigset_t *set) {
  int signo;

  sigemptyset(set);
  for (signo = 1; signo < TAXI__NSIG; signo++)
    if (signo == extra || taxi__sigbit_test(s->added, signo))
      sigaddset(set, signo);
}

int taxi__sigsrc_fd_open(taxi__sigsrc_t *s) {
  sigset_t empty;
  int fd;

  /* Created with an empty set, so the handle exists (and can be watched)
   * from open on; add() and del() replace the set in place. */
  sigemptyset(&empty);
  fd = signalfd(-1, &empty, SFD_FLAGS);
  if (fd == -1) return taxi__last_error();
  s->kind = TAXI__SIGSRC_SIGNALFD;
  s->fd = fd;
  s->write_fd = -1;
  return 0;
}

int taxi__sigsrc_fd_reopen(taxi__sigsrc_t *s) {
  sigset_t set;
  int fd;

  /* The child inherited the blocked mask, so only the descriptor is new. */
  build_set(s, 0, &set);
  fd = signalfd(-1, &set, SFD_FLAGS);
  if (fd == -1) return taxi__last_error();
  s->fd = fd;
  return 0;
}

int taxi__sigsrc_fd_add(taxi__sigsrc_t *s, int signo) {
  sigset_t one, old, set;
  bool was_blocked;
  int rc;

  /* Block before widening the signalfd: a signal arriving in between then
   * waits pending and is read from the signalfd, instead of getting its
   * default action (often termination) while not yet blocked. */
  sigemptyset(&one);
  sigaddset(&one, signo);
  rc = pthread_sigmask(SIG_BLOCK, &one, &old);
  if (rc != 0) return taxi__error_from_os(rc);
  was_blocked = sigismember(&old, signo) == 1;

  build_set(s, signo, &set);
  if (signalfd(s->fd, &set, SFD_FLAGS) == -1) {
    rc = taxi__last_error();
    if (!was_blocked) (void)pthread_sigmask(SIG_UNBLOCK, &one, NULL);
    return rc;
  }
  if (was_blocked)
    taxi__sigbit_set(s->was_blocked, signo);
  else
    taxi__sigbit_clear(s->was_blocked, signo);
  return 0;
}

int taxi__sigsrc_fd_del(taxi__sigsrc_t *s, int signo) {
  sigset_t set;
  int rc = 0;

  /* signo is already out of s->added. */
  build_set(s, 0, &set);
  if (signalfd(s->fd, &set, SFD_FLAGS) == -1) rc = taxi__last_error();

  if (!taxi__sigbit_test(s->was_blocked, signo)) {
    sigset_t one;
    const struct timespec zero = {0, 0};
    int got;

    sigemptyset(&one);
    sigaddset(&one, signo);
    /* An instance that arrived while s owned the signal but was not read
     * yet would, once unblocked, be delivered to the restored disposition
     * (usually the default action: termination).  It was s's, and s is
     * done with it: discard it, as the self-pipe variant drops its unread
     * bytes for the signal.  Real-time signals may be queued several
     * times. */
    do got = sigtimedwait(&one, NULL, &zero);
    while (got == signo || (got == -1 && errno == EINTR));
    (void)pthread_sigmask(SIG_UNBLOCK, &one, NULL);
  }
  taxi__sigbit_clear(s->was_blocked, signo);
  return rc;
}

int taxi__sigsrc_fd_read(taxi__sigsrc_t *s, int *out, int cap) {
  struct signalfd_siginfo info[16];
  int count = 0;

  while (count < cap) {
    int want = cap - count < 16 ? cap - count : 16;
    ssize_t n = read(s->fd, info, (size_t)want * sizeof info[0]);
    int got, i;

    if (n == -1) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      /* Report the failure unless there is something to return; a
       * persistent error shows up again on the next read. */
      if (count == 0) return taxi__last_error();
      break;
    }
    /* The kernel returns whole records only. */
    got = (int)((size_t)n / sizeof info[0]);
    for (i = 0; i < got; i++) out[count++] = (int)info[i].ssi_signo;
    if (got < want) break; /* drained: save the EAGAIN round trip */
  }
  return count;
}

#else

/* ISO C wants at least one declaration in a translation unit. */
typedef int taxi__signal_fd_unused;

#endif /* HAVE_SIGNALFD */
