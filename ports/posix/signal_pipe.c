/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ports/posix/signal_pipe.c - the signal source over a sigaction handler
 * and a self-pipe: the handler writes the signal number, as one byte, to
 * the pipe of the source that owns the signal, and the reactor watches the
 * pipe's read end.  Portable to every POSIX system; on Linux it is used
 * when signalfd is unavailable or TAXI_SIGNAL_PIPE is set, and beside the
 * signalfd for the signals whose default action it replaces there
 * (signal_fd.c).
 *
 * The handler is the only code that runs in signal context.  It touches
 * nothing but lock-free atomics and write(), all async-signal-safe, and it
 * preserves errno for the code it interrupted.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* sigaction(), SA_RESTART under -std=c11 */
#endif
#include "config.h"

#include "port.h"
#include "signal_impl.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

_Static_assert(ATOMIC_INT_LOCK_FREE == 2,
               "the signal handler needs lock-free atomic_int");
_Static_assert(TAXI__NSIG <= 256, "a signal number is sent as one byte");

/*
 * Per signal, process-wide (a handler cannot find a source otherwise; the
 * claim in signal.c makes sure only one source uses an entry at a time):
 *
 * pipe_for_signal  the owning source's write end plus one; 0 means none.
 *                  (Plus one so that the zero-initialised table is empty
 *                  without a run-time initialisation step.)
 * pending          1 from the handler's write until the reader consumed the
 *                  byte, so each signal has at most one byte in flight:
 *                  however fast signals arrive, the pipe never fills up and
 *                  a signal can never be dropped for lack of room.  Further
 *                  instances merge into the one already announced, which is
 *                  what POSIX does with standard signals anyway.
 * saved            the disposition add() replaced, restored by del().
 */
static atomic_int pipe_for_signal[TAXI__NSIG];
static atomic_int pending[TAXI__NSIG];
static struct sigaction saved[TAXI__NSIG];

/* Handlers currently between reading pipe_for_signal and finishing their
 * write; close() waits for zero before closing a pipe, so that a handler
 * in another thread never writes to a descriptor number that has been
 * closed and perhaps reused. */
static atomic_int handlers_running;

static void on_signal(int signo) {
  int saved_errno = errno;

  /* Sequentially consistent, pairing with quiesce(): either this
   * increment is seen there, or the cleared table entry is seen here. */
  atomic_fetch_add(&handlers_running, 1);
  if (signo > 0 && signo < TAXI__NSIG) {
    int fd = atomic_load(&pipe_for_signal[signo]) - 1;
    if (fd >= 0 && atomic_exchange(&pending[signo], 1) == 0) {
      const unsigned char byte = (unsigned char)signo;
      ssize_t n;
      do n = write(fd, &byte, 1);
      while (n == -1 && errno == EINTR);
      /* Nothing written (cannot happen with at most one byte per signal
       * in the pipe, but never leave the flag set without a byte). */
      if (n != 1) atomic_store(&pending[signo], 0);
    }
  }
  atomic_fetch_sub(&handlers_running, 1);
  errno = saved_errno;
}

int taxi__sigsrc_pipe_make(taxi__sigsrc_t *s) {
  int fds[2];
  int rc = taxi__pipe_nonblocking(fds);

  if (rc != 0) return rc;
  s->pipe_fd = fds[0];
  s->write_fd = fds[1];
  return 0;
}

void taxi__sigsrc_pipe_repoint(const taxi__sigsrc_t *s) {
  int signo;

  /* The dispositions inherited from the parent stay installed; only the
   * table the handler writes through changes.  A signal caught meanwhile
   * wrote to the parent's pipe and left pending set: clear it so the next
   * one is written again. */
  for (signo = 1; signo < TAXI__NSIG; signo++) {
    if (!taxi__sigbit_test(s->added, signo)) continue;
    if (s->kind == TAXI__SIGSRC_SIGNALFD &&
        !taxi__sigbit_test(s->forwarded, signo))
      continue;
    atomic_store(&pipe_for_signal[signo], s->write_fd + 1);
    atomic_store(&pending[signo], 0);
  }
}

int taxi__sigsrc_pipe_open(taxi__sigsrc_t *s) {
  int rc;

  s->kind = TAXI__SIGSRC_PIPE;
  rc = taxi__sigsrc_pipe_make(s);
  if (rc != 0) return rc;
  s->fd = s->pipe_fd;
  return 0;
}

int taxi__sigsrc_pipe_add(taxi__sigsrc_t *s, int signo) {
  struct sigaction sa;
  int rc;

  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  /* Nothing extra blocked while the handler runs (it is short and
   * reentrant); SA_RESTART spares the application EINTR from system calls
   * our handler interrupted. */
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;

  /* Table first, handler second: the handler must find the pipe as soon
   * as it can run.  A previous owner may have left pending set with its
   * byte unread in its own pipe; start clean. */
  atomic_store(&pending[signo], 0);
  atomic_store(&pipe_for_signal[signo], s->write_fd + 1);
  if (sigaction(signo, &sa, &saved[signo]) == -1) {
    rc = taxi__last_error();
    atomic_store(&pipe_for_signal[signo], 0);
    return rc;
  }
  return 0;
}

int taxi__sigsrc_pipe_del(taxi__sigsrc_t *s, int signo) {
  int rc = 0;

  (void)s;
  /* Instances already sent are s's: drop them before the old disposition
   * is back (taxi__sig_discard_pending says why). */
  taxi__sig_discard_pending(signo);
  if (sigaction(signo, &saved[signo], NULL) == -1) rc = taxi__last_error();
  /* A byte for signo still in the pipe is dropped by read(), which only
   * reports signals s has. */
  atomic_store(&pipe_for_signal[signo], 0);
  atomic_store(&pending[signo], 0);
  return rc;
}

void taxi__sigsrc_pipe_quiesce(void) {
  /* The table entries are cleared; a handler that loaded one before that
   * is still counted here.  Handlers only make a non-blocking write, so
   * this ends within microseconds. */
  while (atomic_load(&handlers_running) != 0) sched_yield();
}

int taxi__sigsrc_pipe_read(taxi__sigsrc_t *s, int *out, int cap) {
  unsigned char buf[64];
  int count = 0;

  while (count < cap) {
    size_t want =
        (size_t)(cap - count) < sizeof buf ? (size_t)(cap - count) : sizeof buf;
    ssize_t n = read(s->pipe_fd, buf, want);
    ssize_t i;

    if (n == -1) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      if (count == 0) return taxi__last_error();
      break;
    }
    if (n == 0) break; /* EOF: impossible while s holds the write end */
    for (i = 0; i < n; i++) {
      int signo = buf[i];
      if (signo <= 0 || signo >= TAXI__NSIG) continue;
      /* Clear after consuming the byte: an instance arriving before the
       * clear finds pending set and merges into this report, one after
       * it writes a new byte.  Either way it is not lost. */
      atomic_store(&pending[signo], 0);
      if (taxi__sigbit_test(s->added, signo)) out[count++] = signo;
    }
    if ((size_t)n < want) break; /* drained */
  }
  return count;
}
