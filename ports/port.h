/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ports/port.h - the wrapper facades the core is written against: threads,
 * locks, condition variables, atomics, the clock, socket helpers, the
 * wake-up channel and the signal source.  One implementation per operating
 * system family lives below ports/ (posix/ now); the core never includes an
 * OS header itself.
 *
 * Conventions: functions return 0 or a negative TAXI_E* code; when the OS
 * reported the failure its error number is recorded first with
 * taxi__set_os_error(), so taxi_last_os_error() can tell the application.
 */
#ifndef TAXI_PORTS_PORT_H
#define TAXI_PORTS_PORT_H

#include "taxi/platform.h"
#include "taxi/error.h"

#include <stdbool.h>
#include <stdatomic.h>
#include <stdlib.h>

#if defined(_WIN32)
#include "win32/types.h"
#else
#include "posix/types.h"
#endif

/* ---- errors ------------------------------------------------------------ */

/* Map an OS error number to a TAXI_E* code and record it for
 * taxi_last_os_error() in this thread. */
int taxi__error_from_os(int os_error);
/* The calling thread's last OS error (errno or its Windows equivalent),
 * mapped and recorded as above. */
int taxi__last_error(void);
/* Record os_error for taxi_last_os_error() in this thread.  The record,
 * taxi__error_from_os(), taxi__last_error() and this one are one file for
 * every system (ports/os_error.c); the mapping is each port's
 * (ports/posix/error.c, ports/win32/error.c).  Async-signal-safe on
 * POSIX. */
void taxi__set_os_error(int os_error);
/* The TAXI_E* code of an OS error number (errno, or a Win32 or Winsock
 * code), recording nothing: TAXI_ESYS for one it does not know. */
int taxi__map_os_error(int os_error);

/* ---- threads ----------------------------------------------------------- */

/* Start fn(arg) in a new thread.  On POSIX systems the thread starts with
 * every asynchronous signal blocked (ports/posix/thread.c says which stay
 * open): a signal meant for the application or for a signal source never
 * reaches a thread of taxi's. */
int taxi__thread_create(taxi__thread_t *t, void *(*fn)(void *), void *arg);
int taxi__thread_join(taxi__thread_t t);
/* Let t end on its own, its resources freed when it returns: it is never
 * joined (a thread that may be blocked in a call nothing can interrupt,
 * such as getaddrinfo, when its owner goes). */
int taxi__thread_detach(taxi__thread_t t);
taxi__thread_id_t taxi__thread_self(void);
bool taxi__thread_equal(taxi__thread_id_t a, taxi__thread_id_t b);

/* Mutexes are non-recursive.  Lock and unlock cannot fail on valid input. */
int taxi__mutex_init(taxi__mutex_t *m);
void taxi__mutex_destroy(taxi__mutex_t *m);
#if defined(_WIN32)
void taxi__mutex_lock(taxi__mutex_t *m);
void taxi__mutex_unlock(taxi__mutex_t *m);
#else
/* Inline over pthreads: a stream's echoed message takes and drops several
 * locks, and the call into a wrapper cost as much as the mutex's own fast
 * path.  A failure means a mutex the caller does not hold or never made
 * (memory corruption, a bug in taxi): nothing to recover, so abort. */
static inline void taxi__mutex_lock(taxi__mutex_t *m) {
  if (pthread_mutex_lock(m) != 0) abort();
}
static inline void taxi__mutex_unlock(taxi__mutex_t *m) {
  if (pthread_mutex_unlock(m) != 0) abort();
}
#endif

/* Condition variables measure time on the monotonic clock (taxi_now()). */
int taxi__cond_init(taxi__cond_t *c);
void taxi__cond_destroy(taxi__cond_t *c);
void taxi__cond_wait(taxi__cond_t *c, taxi__mutex_t *m);
/* Wait until the absolute monotonic time `deadline`; returns 0 when woken
 * (possibly spuriously) or TAXI_ETIMEDOUT once the deadline has passed. */
int taxi__cond_timedwait(taxi__cond_t *c, taxi__mutex_t *m,
                         taxi_time_t deadline);
void taxi__cond_signal(taxi__cond_t *c);
void taxi__cond_broadcast(taxi__cond_t *c);

/* Sleep about `ns` nanoseconds (less if a signal arrives; nothing if
 * ns <= 0): the pause between retries of a failed step. */
void taxi__sleep(taxi_time_t ns);

/* ---- atomics ----------------------------------------------------------- */
/* C11 <stdatomic.h> is the interface: atomic_uint, atomic_load_explicit(),
 * ...  A port whose compiler lacks it supplies the same names. */

/* ---- handles and sockets ----------------------------------------------- */

/* 0 if h names an open handle, else TAXI_EBADF. */
int taxi__handle_check(taxi_handle_t h);
/* As taxi__handle_check, and on success *id says which open object h
 * names: a handle closed and its number taken by another open names
 * another object, with another id.  Equal ids tell nothing more: where
 * the system names objects by their handle alone (Windows), the id only
 * tells a socket from a handle of another kind. */
int taxi__handle_identity(taxi_handle_t h, uint64_t *id);
int taxi__set_nonblocking(taxi_handle_t h);
int taxi__set_cloexec(taxi_handle_t h);
/* A connected pair of stream sockets, both non-blocking and close-on-exec. */
int taxi__socketpair(taxi_handle_t pair[2]);
void taxi__close(taxi_handle_t h);

/* The size in bytes of the regular file h.  0, TAXI_EBADF (not open),
 * TAXI_EINVAL (not a regular file). */
int taxi__file_size(taxi_handle_t h, int64_t *size);
/* Read up to len bytes of file h at offset off, not moving its position:
 * the bytes read (0 at the end of the file), or an error. */
int64_t taxi__file_read_at(taxi_handle_t h, void *buf, size_t len, int64_t off);

/* Processors online (at least 1). */
unsigned taxi__cpu_count(void);

/* ---- the wake-up channel ----------------------------------------------- */
/*
 * A handle that becomes readable when taxi__wakeup_signal() is called, so a
 * thread blocked in a backend's wait returns.  Wake-ups coalesce: while one
 * is pending (signalled, not yet drained) further signals write nothing.
 * eventfd on Linux, a non-blocking pipe elsewhere on POSIX.
 */
int taxi__wakeup_open(taxi__wakeup_t *w);
void taxi__wakeup_close(taxi__wakeup_t *w);
taxi_handle_t taxi__wakeup_handle(const taxi__wakeup_t *w);
/* Returns 1 if this call wrote to the channel, 0 if a wake-up was already
 * pending, or a negative TAXI_E* code.  Any thread; async-signal-safe. */
int taxi__wakeup_signal(taxi__wakeup_t *w);
/* Write to the channel even if a wake-up is pending, so that a further
 * waiter on a set shared by several threads is woken too.  Returns 1 or a
 * negative TAXI_E* code.  Any thread; async-signal-safe. */
int taxi__wakeup_force(taxi__wakeup_t *w);
/* Consume pending wake-ups; afterwards the next signal writes again.  Call
 * from the thread that saw the handle readable, before acting on the state
 * the wake-up announced. */
void taxi__wakeup_drain(taxi__wakeup_t *w);

/* ---- signals ----------------------------------------------------------- */
/*
 * A signal source is a handle that becomes readable when one of the signals
 * added to it arrives; reading it returns their numbers.  No user code runs
 * in signal context.  signalfd on Linux (the signals are blocked in the
 * calling thread), a sigaction handler writing to a pipe elsewhere.
 */
int taxi__sigsrc_open(taxi__sigsrc_t *s);
void taxi__sigsrc_close(taxi__sigsrc_t *s);
taxi_handle_t taxi__sigsrc_handle(const taxi__sigsrc_t *s);
/* TAXI_EINVAL for a number that is not a catchable signal. */
int taxi__sigsrc_add(taxi__sigsrc_t *s, int signo);
int taxi__sigsrc_del(taxi__sigsrc_t *s, int signo);
/* In a child after fork(): give s descriptors of its own, keeping its
 * signals, masks and dispositions.  The old descriptors are only closed:
 * a signalfd's mask and a pipe are shared with the parent, so changing
 * them here would change the parent's source too. */
int taxi__sigsrc_reinit_after_fork(taxi__sigsrc_t *s);
/* Store up to `cap` received signal numbers in out; returns how many (0 when
 * none is pending) or a negative TAXI_E* code. */
int taxi__sigsrc_read(taxi__sigsrc_t *s, int *out, int cap);
/* Largest signal number + 1 (NSIG); 0 where there are no signals. */
int taxi__signal_limit(void);
/*
 * For a readiness mechanism that reports signals itself (kqueue's
 * EVFILT_SIGNAL), which only records a signal after its normal delivery:
 * taxi__signal_take claims signo for this process (as a source's add does:
 * TAXI_EBUSY while a source or another taker has it, TAXI_EINVAL for a
 * signal that cannot be caught) and replaces its disposition with a
 * handler that does nothing, so the default action (often termination)
 * no longer applies.  It remembers the disposition and whether the calling
 * thread had the signal blocked.  taxi__signal_give_back restores both in
 * the calling thread - an instance still pending there that the mechanism
 * blocked is discarded, as a source's del does - and releases the claim;
 * even when it reports an error the signal is released.  Both: under the
 * caller's serialisation, never in a signal handler.
 */
int taxi__signal_take(int signo);
int taxi__signal_give_back(int signo);

/* ---- environment ------------------------------------------------------- */

/* getenv(), but NULL in set-user-ID / set-group-ID programs. */
const char *taxi__secure_getenv(const char *name);

#endif /* TAXI_PORTS_PORT_H */
