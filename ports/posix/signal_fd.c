/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ports/posix/signal_fd.c - the signal source over Linux signalfd.
 *
 * A signalfd only receives signals that are blocked: delivery to a handler
 * or a default action happens first otherwise.  So add() blocks the signal
 * in the calling thread with pthread_sigmask() and remembers whether it was
 * blocked already, and del() unblocks it only if add() did the blocking.
 * Signal masks are per thread: del() and close() restore the mask of the
 * thread that calls them, which should be the one that called add().
 * taxi's own threads start with the signals blocked (ports/posix/thread.c).
 *
 * A thread of the application's that has the signal unblocked would still
 * take it - the main thread, say, when a hook running in a pool thread
 * added it - and its default action is often to end the process.  So a
 * signal whose disposition is the default one gets, while it is added, the
 * self-pipe's handler (signal_pipe.c), which passes an instance delivered
 * that way on through the source's self-pipe; the instances that stay
 * blocked everywhere are read from the signalfd as before.  A handler the
 * application installed itself is left alone: the signals it takes are
 * its own.  The handle the reactor watches is an epoll set holding both,
 * readable when either is.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* signalfd, pthread_sigmask() under -std=c11 */
#endif
#include "config.h"

#include "port.h"
#include "signal_impl.h"

#if defined(HAVE_SIGNALFD)

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
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

/* An epoll set watching the signalfd and the self-pipe's read end (level-
 * triggered: it stays readable while either has something to read). */
static int make_set(int signal_fd, int pipe_fd) {
  const int fds[2] = {signal_fd, pipe_fd};
  int set = epoll_create1(EPOLL_CLOEXEC);
  int i;

  if (set == -1) return taxi__last_error();
  for (i = 0; i < 2; i++) {
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = EPOLLIN;
    ev.data.fd = fds[i];
    if (epoll_ctl(set, EPOLL_CTL_ADD, fds[i], &ev) == -1) {
      int rc = taxi__last_error();
      taxi__close(set);
      return rc;
    }
  }
  return set;
}

/* A signalfd for `set`, a self-pipe and the epoll set over both, into s's
 * descriptors; on failure nothing is left open and s is untouched. */
static int open_fds(taxi__sigsrc_t *s, const sigset_t *set) {
  taxi__sigsrc_t made = *s;
  int rc;

  made.signal_fd = signalfd(-1, set, SFD_FLAGS);
  if (made.signal_fd == -1) return taxi__last_error();
  rc = taxi__sigsrc_pipe_make(&made);
  if (rc != 0) {
    taxi__close(made.signal_fd);
    return rc;
  }
  rc = make_set(made.signal_fd, made.pipe_fd);
  if (rc < 0) {
    taxi__close(made.signal_fd);
    taxi__close(made.pipe_fd);
    taxi__close(made.write_fd);
    return rc;
  }
  s->fd = rc;
  s->signal_fd = made.signal_fd;
  s->pipe_fd = made.pipe_fd;
  s->write_fd = made.write_fd;
  return 0;
}

int taxi__sigsrc_fd_open(taxi__sigsrc_t *s) {
  sigset_t empty;
  int rc;

  /* Created with an empty set, so the handle exists (and can be watched)
   * from open on; add() and del() replace the set in place. */
  sigemptyset(&empty);
  rc = open_fds(s, &empty);
  if (rc != 0) return rc;
  s->kind = TAXI__SIGSRC_SIGNALFD;
  return 0;
}

int taxi__sigsrc_fd_reopen(taxi__sigsrc_t *s) {
  sigset_t set;
  int rc;

  /* The child inherited the blocked mask and the dispositions, so only the
   * descriptors are new. */
  build_set(s, 0, &set);
  rc = open_fds(s, &set);
  if (rc == 0) taxi__sigsrc_pipe_repoint(s);
  return rc;
}

/* Whether signo's disposition is the default action, which a handler of
 * the self-pipe's replaces while s has it. */
static bool default_action(int signo) {
  struct sigaction now;
  if (sigaction(signo, NULL, &now) != 0) return false;
  return !(now.sa_flags & SA_SIGINFO) && now.sa_handler == SIG_DFL;
}

int taxi__sigsrc_fd_add(taxi__sigsrc_t *s, int signo) {
  sigset_t one, old, set;
  bool was_blocked, forward = default_action(signo);
  int rc;

  /* The handler first: from then on an instance delivered to a thread
   * that has it unblocked goes to the pipe rather than to the default
   * action. */
  if (forward) {
    rc = taxi__sigsrc_pipe_add(s, signo);
    if (rc != 0) return rc;
  }
  /* Block before widening the signalfd: a signal arriving in between then
   * waits pending and is read from the signalfd. */
  sigemptyset(&one);
  sigaddset(&one, signo);
  rc = pthread_sigmask(SIG_BLOCK, &one, &old);
  if (rc != 0) {
    rc = taxi__error_from_os(rc);
    if (forward) (void)taxi__sigsrc_pipe_del(s, signo);
    return rc;
  }
  was_blocked = sigismember(&old, signo) == 1;

  build_set(s, signo, &set);
  if (signalfd(s->signal_fd, &set, SFD_FLAGS) == -1) {
    rc = taxi__last_error();
    if (!was_blocked) (void)pthread_sigmask(SIG_UNBLOCK, &one, NULL);
    if (forward) (void)taxi__sigsrc_pipe_del(s, signo);
    return rc;
  }
  if (was_blocked)
    taxi__sigbit_set(s->was_blocked, signo);
  else
    taxi__sigbit_clear(s->was_blocked, signo);
  if (forward)
    taxi__sigbit_set(s->forwarded, signo);
  else
    taxi__sigbit_clear(s->forwarded, signo);
  return 0;
}

int taxi__sigsrc_fd_del(taxi__sigsrc_t *s, int signo) {
  sigset_t set, one;
  int rc = 0;

  /* signo is already out of s->added. */
  build_set(s, 0, &set);
  if (signalfd(s->signal_fd, &set, SFD_FLAGS) == -1) rc = taxi__last_error();

  /* An instance that arrived while s owned the signal but was not read
   * yet would, once unblocked - here, or later by whoever had it blocked
   * before s (another source, the application) - be delivered to the
   * restored disposition (usually the default action: termination).  It
   * was s's, and s is done with it: discard it, as the self-pipe variant
   * drops its unread bytes for the signal - and before the disposition is
   * restored, or a thread of the application's that has it unblocked and
   * was about to take it would meet the default action (see
   * taxi__sig_discard_pending). */
  taxi__sig_discard_pending(signo);
  if (taxi__sigbit_test(s->forwarded, signo)) {
    /* The default action back; a byte for signo left in the pipe is
     * dropped by read(), which only reports signals s has. */
    int err = taxi__sigsrc_pipe_del(s, signo);
    if (rc == 0) rc = err;
  }
  sigemptyset(&one);
  sigaddset(&one, signo);
  if (!taxi__sigbit_test(s->was_blocked, signo))
    (void)pthread_sigmask(SIG_UNBLOCK, &one, NULL);
  taxi__sigbit_clear(s->was_blocked, signo);
  taxi__sigbit_clear(s->forwarded, signo);
  return rc;
}

int taxi__sigsrc_fd_read(taxi__sigsrc_t *s, int *out, int cap) {
  struct signalfd_siginfo info[16];
  int count = 0;

  while (count < cap) {
    int want = cap - count < 16 ? cap - count : 16;
    ssize_t n = read(s->signal_fd, info, (size_t)want * sizeof info[0]);
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
  /* Then those the handler passed on (at most one byte per signal). */
  if (count < cap) {
    int more = taxi__sigsrc_pipe_read(s, out + count, cap - count);
    if (more > 0) count += more;
    if (more < 0 && count == 0) return more;
  }
  return count;
}

#else

/* ISO C wants at least one declaration in a translation unit. */
typedef int taxi__signal_fd_unused;

#endif /* HAVE_SIGNALFD */
