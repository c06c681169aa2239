/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ports/posix/signal.c - the signal source's front: validates signal
 * numbers, lets one source per process own a given signal, and hands the
 * work to the mechanism chosen at open time:
 *
 *   signal_fd.c    Linux signalfd (HAVE_SIGNALFD); the default there.
 *   signal_pipe.c  a sigaction handler writing to a self-pipe; everywhere
 *                  else, and on Linux too when the environment variable
 *                  TAXI_SIGNAL_PIPE is set (so tests can exercise it) or
 *                  when the kernel refuses signalfd (ENOSYS).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* NSIG, sigaddset(), sigtimedwait() under -std=c11 */
#endif
#include "config.h"

#include "port.h"
#include "signal_impl.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <time.h>

/*
 * Which signals some source of this process has added.  Both mechanisms
 * need the exclusivity: a self-pipe handler can only write to one pipe, and
 * two signalfds would steal each other's signals.  The claim is also what
 * hands the per-signal state of signal_pipe.c from one owner to the next.
 */
static atomic_bool owned[TAXI__NSIG];

static bool catchable(int signo) {
  sigset_t set;

  if (signo <= 0 || signo >= TAXI__NSIG || signo == SIGKILL || signo == SIGSTOP)
    return false;
  /* glibc reserves two real-time signals (32 and 33) for its threads
   * implementation; sigaddset() refuses them, as sigaction() would. */
  sigemptyset(&set);
  return sigaddset(&set, signo) == 0;
}

int taxi__sigsrc_open(taxi__sigsrc_t *s) {
  memset(s->added, 0, sizeof s->added);
  memset(s->was_blocked, 0, sizeof s->was_blocked);
  memset(s->forwarded, 0, sizeof s->forwarded);
  s->fd = s->signal_fd = s->pipe_fd = s->write_fd = -1;
#if defined(HAVE_SIGNALFD)
  if (taxi__secure_getenv("TAXI_SIGNAL_PIPE") == NULL) {
    int rc = taxi__sigsrc_fd_open(s);
    /* TAXI_ENOTSUP is ENOSYS: a seccomp filter or a kernel built without
     * signalfd.  The self-pipe needs nothing special, so use it. */
    if (rc != TAXI_ENOTSUP) return rc;
  }
#endif
  return taxi__sigsrc_pipe_open(s);
}

int taxi__sigclaim(int signo) {
  bool unowned = false;

  if (!catchable(signo)) return TAXI_EINVAL;
  if (!atomic_compare_exchange_strong(&owned[signo], &unowned, true))
    return TAXI_EBUSY;
  return 0;
}

void taxi__sigunclaim(int signo) { atomic_store(&owned[signo], false); }

void taxi__sig_discard_pending(int signo) {
#if defined(HAVE_SIGTIMEDWAIT)
  const struct timespec zero = {0, 0};
  sigset_t one;
  int got;

  sigemptyset(&one);
  sigaddset(&one, signo);
  /* A zero timeout never waits; real-time signals may be queued several
   * times, so take until none is left. */
  do got = sigtimedwait(&one, NULL, &zero);
  while (got == signo || (got == -1 && errno == EINTR));
#else
  (void)signo;
#endif
}

int taxi__sigsrc_add(taxi__sigsrc_t *s, int signo) {
  int rc;

  if (!catchable(signo)) return TAXI_EINVAL;
  if (taxi__sigbit_test(s->added, signo)) return TAXI_EEXIST;
  rc = taxi__sigclaim(signo);
  if (rc != 0) return rc;
#if defined(HAVE_SIGNALFD)
  if (s->kind == TAXI__SIGSRC_SIGNALFD)
    rc = taxi__sigsrc_fd_add(s, signo);
  else
#endif
    rc = taxi__sigsrc_pipe_add(s, signo);
  if (rc != 0) {
    taxi__sigunclaim(signo);
    return rc;
  }
  taxi__sigbit_set(s->added, signo);
  return 0;
}

/* Even when it reports an error the signal is no longer s's: the rest of
 * the restoration is still done, and the claim is released. */
int taxi__sigsrc_del(taxi__sigsrc_t *s, int signo) {
  int rc;

  if (signo <= 0 || signo >= TAXI__NSIG) return TAXI_EINVAL;
  if (!taxi__sigbit_test(s->added, signo)) return TAXI_ENOENT;
  taxi__sigbit_clear(s->added, signo);
#if defined(HAVE_SIGNALFD)
  if (s->kind == TAXI__SIGSRC_SIGNALFD)
    rc = taxi__sigsrc_fd_del(s, signo);
  else
#endif
    rc = taxi__sigsrc_pipe_del(s, signo);
  taxi__sigunclaim(signo);
  return rc;
}

/* Close what s has open (the watched handle may be one of the others). */
static void close_fds(const taxi__sigsrc_t *s) {
  if (s->fd != -1 && s->fd != s->pipe_fd) taxi__close(s->fd);
  if (s->signal_fd != -1) taxi__close(s->signal_fd);
  if (s->pipe_fd != -1) taxi__close(s->pipe_fd);
  if (s->write_fd != -1) taxi__close(s->write_fd);
}

void taxi__sigsrc_close(taxi__sigsrc_t *s) {
  int signo;

  for (signo = 1; signo < TAXI__NSIG; signo++)
    if (taxi__sigbit_test(s->added, signo)) (void)taxi__sigsrc_del(s, signo);
  /* Both mechanisms have a self-pipe a handler may still be writing to. */
  taxi__sigsrc_pipe_quiesce();
  close_fds(s);
  s->fd = s->signal_fd = s->pipe_fd = s->write_fd = -1;
}

int taxi__sigsrc_reinit_after_fork(taxi__sigsrc_t *s) {
  taxi__sigsrc_t old = *s;
  int rc;

#if defined(HAVE_SIGNALFD)
  if (s->kind == TAXI__SIGSRC_SIGNALFD)
    rc = taxi__sigsrc_fd_reopen(s);
  else
#endif
  {
    rc = taxi__sigsrc_pipe_make(s);
    if (rc == 0) s->fd = s->pipe_fd;
  }
  if (rc != 0) return rc;
  taxi__sigsrc_pipe_repoint(s);
  close_fds(&old);
  return 0;
}

taxi_handle_t taxi__sigsrc_handle(const taxi__sigsrc_t *s) { return s->fd; }

int taxi__sigsrc_read(taxi__sigsrc_t *s, int *out, int cap) {
  if (cap < 0 || (cap > 0 && out == NULL)) return TAXI_EINVAL;
  if (cap == 0) return 0;
#if defined(HAVE_SIGNALFD)
  if (s->kind == TAXI__SIGSRC_SIGNALFD)
    return taxi__sigsrc_fd_read(s, out, cap);
#endif
  return taxi__sigsrc_pipe_read(s, out, cap);
}

int taxi__signal_limit(void) { return TAXI__NSIG; }
