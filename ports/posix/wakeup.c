/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ports/posix/wakeup.c - the coalescing wake-up channel: an eventfd where
 * there is one (read_fd == write_fd), else a non-blocking self-pipe.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* eventfd flags, pipe2() */
#endif
#include "config.h"

#include "port.h"
#include "signal_impl.h"

#include <errno.h>
#include <stdint.h>
#include <unistd.h>

#if defined(HAVE_EVENTFD)
#include <sys/eventfd.h>
#endif

/* taxi__wakeup_signal() runs in signal handlers: its atomics must not be
 * emulated with a lock. */
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "atomic_int must be lock-free");

static bool is_eventfd(const taxi__wakeup_t *w) {
  return w->read_fd == w->write_fd;
}

int taxi__wakeup_open(taxi__wakeup_t *w) {
  int fds[2];
  int rc;

  w->read_fd = w->write_fd = -1;
  atomic_init(&w->pending, 0);
#if defined(HAVE_EVENTFD)
  w->read_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (w->read_fd != -1) {
    w->write_fd = w->read_fd;
    return 0;
  }
  /* ENOSYS: no eventfd in this kernel or a seccomp filter forbids it;
   * EINVAL: a kernel older than the flags (< 2.6.27).  The pipe works
   * everywhere, so use it; anything else is a real failure. */
  if (errno != ENOSYS && errno != EINVAL) return taxi__last_error();
#endif
  rc = taxi__pipe_nonblocking(fds);
  if (rc != 0) return rc;
  w->read_fd = fds[0];
  w->write_fd = fds[1];
  return 0;
}

void taxi__wakeup_close(taxi__wakeup_t *w) {
  if (w->write_fd != w->read_fd) taxi__close(w->write_fd);
  taxi__close(w->read_fd);
  w->read_fd = w->write_fd = -1;
  atomic_store(&w->pending, 0);
}

taxi_handle_t taxi__wakeup_handle(const taxi__wakeup_t *w) {
  return w->read_fd;
}

/*
 * Async-signal-safe: only atomics on a lock-free atomic_int and write(),
 * and errno is restored, since the caller may be a signal handler that
 * interrupted code about to look at errno.  (The error path records the OS
 * error in a thread-local; see error.c for why that is safe too.)
 */
/* One write to the channel; errno is preserved.  Returns 0 or the OS
 * error number. */
static int channel_write(taxi__wakeup_t *w) {
  int saved_errno = errno;
  int os_error = 0;
  ssize_t n;

  if (is_eventfd(w)) {
    const uint64_t one = 1;
    do n = write(w->write_fd, &one, sizeof one);
    while (n == -1 && errno == EINTR);
  } else {
    const unsigned char byte = 0;
    do n = write(w->write_fd, &byte, sizeof byte);
    while (n == -1 && errno == EINTR);
  }
  /* EAGAIN: a full pipe (or an eventfd counter at its maximum) is readable
   * already, which is all a wake-up has to achieve. */
  if (n == -1 && errno != EAGAIN && errno != EWOULDBLOCK) os_error = errno;
  errno = saved_errno;
  return os_error;
}

int taxi__wakeup_signal(taxi__wakeup_t *w) {
  /* Coalescing: only the call that turns pending from 0 to 1 writes; the
   * others find a write already made (or about to be made) that the waiter
   * has not drained yet, and the waiter will see their state changes too
   * (see taxi__wakeup_drain). */
  if (atomic_exchange(&w->pending, 1) != 0) return 0;
  int os_error = channel_write(w);
  if (os_error != 0) {
    /* Nothing was written: let the next signal try again rather than
     * leave pending set with an empty channel. */
    atomic_store(&w->pending, 0);
    return taxi__error_from_os(os_error);
  }
  return 1;
}

int taxi__wakeup_force(taxi__wakeup_t *w) {
  atomic_store(&w->pending, 1);
  int os_error = channel_write(w);
  return os_error ? taxi__error_from_os(os_error) : 1;
}

/*
 * The order below is the whole point.  Read the channel empty FIRST, and
 * only then clear pending.
 *
 * Clearing first would lose wake-ups: a signaller running between the clear
 * and the read sees pending == 0 and writes; the read then swallows that
 * write while pending stays 1, so every later signal coalesces into a
 * wake-up that is no longer in the channel, and the waiter sleeps forever.
 *
 * Draining first keeps the invariant "pending == 1 means the channel is
 * readable, or its waiter is between drain and clear".  A signaller that
 * finds pending == 1 in that window does not write, and need not: it made
 * its state change (enqueued a message, set a flag) before its exchange,
 * the exchange comes before our clear in pending's modification order, and
 * both are sequentially consistent, so the state the waiter examines after
 * returning from here (under a mutex, or with sequentially consistent
 * loads) includes that change.  A signaller whose exchange comes after the
 * clear sees 0 and writes, making the handle readable for the next wait.
 * A write made late (its signaller swapped pending to 1 before our clear
 * but wrote only afterwards) just causes one spurious wake-up.
 */
void taxi__wakeup_drain(taxi__wakeup_t *w) {
  ssize_t n;

  if (is_eventfd(w)) {
    /* One read returns and resets the counter; the next fails EAGAIN. */
    uint64_t count;
    do n = read(w->read_fd, &count, sizeof count);
    while (n > 0 || (n == -1 && errno == EINTR));
  } else {
    /* Usually a single byte; more only when writes were made late, as
     * described above.  Stop at EAGAIN, at EOF (cannot happen while the
     * write end is open) and at any error: nothing better to do. */
    unsigned char buf[64];
    do n = read(w->read_fd, buf, sizeof buf);
    while (n > 0 || (n == -1 && errno == EINTR));
  }
  atomic_store(&w->pending, 0);
}
