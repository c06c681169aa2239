/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backends/readiness.h - the table a readiness backend fills in.
 *
 * A readiness backend wraps one OS handle-set mechanism (select, poll,
 * epoll, kqueue, ...).  It only translates: its wait fills an array of
 * {token, events} and never calls user code; the core decides what to
 * dispatch, to whom, and in which thread.  Each backend lives in its own
 * file in backends/, guards itself with its TAXI_HAVE_* macro, and exports
 * one `const taxi__readiness_ops_t taxi__backend_NAME`;
 * core/reactor/reactor_backends.c lists them in order of preference.
 *
 * Thread contract (what the core guarantees and what it expects):
 *  - open/close/add/modify/del are serialised by the caller (the reactor's
 *    lock is held) and never run concurrently with each other.
 *  - wait runs WITHOUT that lock, so it may run concurrently with add,
 *    modify and del from other threads.  A backend without
 *    TAXI_CAP_LIVE_UPDATE must keep that safe itself (e.g. by waiting on a
 *    snapshot of its set taken under its own lock) and may apply changes at
 *    its next wait: the core wakes the waiter through the wake-up channel
 *    after each change.
 *  - Only backends with TAXI_CAP_MULTI_WAIT are ever waited on by several
 *    threads at once.
 *  - A token is an opaque 64-bit value the backend returns unchanged.
 *    Stale tokens (for handles deleted since) are the core's problem.
 */
#ifndef TAXI_BACKENDS_READINESS_H
#define TAXI_BACKENDS_READINESS_H

#include "taxi/backend.h"
#include "taxi/error.h"
#include "taxi/handler.h"

#include <stddef.h>
#include <stdint.h>

/* One ready handle, as a wait reports it: TAXI_EV_* bits. */
typedef struct taxi__ready {
  uint64_t token;
  uint32_t events;
  /* With TAXI__EXT_EVENT_ERROR only (unread otherwise): 0, or the TAXI_E*
   * code of the error the mechanism reported pending on the handle with
   * this event. */
  int32_t error;
} taxi__ready_t;

/* An event bit only a backend reports, beside the TAXI_EV_* ones (and
 * with TAXI_EV_ERR): the mechanism says the handle is not open - poll's
 * POLLNVAL, a select that failed for it.  The report may be about a
 * number closed and opened again since the set the wait watched was
 * taken, so the core believes it only after checking the handle as it is
 * now (core/reactor/reactor_closed.c); no system call is needed here to set it.
 */
#define TAXI__EV_CLOSED 0x100u

/* Optional parts of a backend, in its `ext` bits.  The core uses a part
 * only where its bit is set, and otherwise does what it does for every
 * backend, so a backend without them needs no change. */
/* wait fills taxi__ready_t.error.  For a mechanism that reports a socket's
 * pending error with the event (kqueue's EV_EOF with the errno in fflags):
 * where reporting it clears it from the socket, as libkqueue does, it is
 * otherwise lost to the application. */
#define TAXI__EXT_EVENT_ERROR 0x1u
/* wakeup_open and wakeup_signal: the mechanism's own cross-thread wake-up
 * (kqueue's EVFILT_USER), used instead of the port's channel (an eventfd
 * or a pipe, registered like any handle), so a wake-up costs one system
 * call and no descriptor. */
#define TAXI__EXT_WAKEUP 0x2u
/* signal_add and signal_del: the mechanism reports signals itself
 * (kqueue's EVFILT_SIGNAL), used instead of the port's signal source (a
 * signalfd or a self-pipe, registered like any handle). */
#define TAXI__EXT_SIGNAL 0x4u

/* Closing the last descriptor of a socket removes its registration, as
 * epoll's belong to the open file description (epoll(7)): the core may
 * skip del for a handle it is about to close that shares its socket with
 * no other descriptor (see close_ends_registration in
 * core/reactor/reactor_table.c). */
#define TAXI__EXT_CLOSE_DEREGISTERS 0x8u

/* modify fails for a handle closed since it was added: TAXI_EBADF when
 * the number is not open, TAXI_ENOENT when it names another file now
 * (epoll: a registration is the file's and the number's together, and
 * dies with the file).  The core then learns of such a handle from its
 * re-arm, and checks it with a modify that changes nothing; without this
 * bit it compares what the handle names with what it named at
 * registration (core/reactor/reactor_closed.c). */
#define TAXI__EXT_MODIFY_TELLS_CLOSED 0x10u

/* Flags for add and modify. */
/* Report the handle once, then keep it registered but inactive until the
 * next modify (only asked of backends with TAXI_CAP_ONESHOT). */
#define TAXI__ARM_ONESHOT 0x1u
/* add only: the library has just accepted or made the handle, so it is
 * open; a backend's own check for a closed one may be skipped. */
#define TAXI__ARM_OPEN 0x2u
/* Report the handle when it becomes ready, and again only when it becomes
 * ready anew (more data arrives, room frees up), not while it stays so:
 * epoll's EPOLLET, kqueue's EV_CLEAR (only asked of backends with
 * TAXI_CAP_EDGE, never with TAXI__ARM_ONESHOT).  The handle stays armed
 * after a report: the core asks it only for handles whose hooks read or
 * accept until the OS says EAGAIN.  A modify that asks for events the
 * handle has now reports it again, as a fresh edge. */
#define TAXI__ARM_EDGE 0x4u

typedef struct taxi__readiness_ops {
  const char *name;
  unsigned caps;      /* TAXI_CAP_* */
  size_t max_handles; /* 0: only the OS limits how many */
  unsigned ext;       /* TAXI__EXT_*: which optional parts it has */

  /* Create an instance in *state.  TAXI_ENOTSUP (or the mapped OS error)
   * when the mechanism does not work here: the core then tries the next. */
  int (*open)(void **state);
  /* Release the instance.  Must not deregister handles from a kernel object
   * it shares with another process (after fork an epoll set is shared with
   * the parent): closing the backend's own descriptors is all it may do. */
  void (*close)(void *state);

  /* Watch `h` for `events` (a non-empty subset of TAXI_EV_INTEREST);
   * HUP and ERR are always reported.  Errors: TAXI_EBADF, TAXI_ETOOMANY
   * (handle beyond max_handles or FD_SETSIZE), TAXI_ENOTSUP (a kind of
   * handle or event the mechanism cannot watch), TAXI_EEXIST, TAXI_ENOMEM.
   * A closed handle must fail (TAXI_EBADF): the core does not check it
   * first, and a backend whose mechanism would notice only later (select,
   * poll) checks it here. */
  int (*add)(void *state, taxi_handle_t h, uint64_t token, unsigned events,
             unsigned flags);
  /* Change what is watched.  `events` may be 0: the handle stays known to
   * the backend but reports nothing (this is how the core deactivates a
   * handle on backends without one-shot arming).  Errors as add, plus
   * TAXI_ENOENT. */
  int (*modify)(void *state, taxi_handle_t h, uint64_t token, unsigned events,
                unsigned flags);
  /* Stop watching `h`.  A handle the application already closed is not an
   * error worth reporting: return 0. */
  int (*del)(void *state, taxi_handle_t h);

  /* Wait up to timeout_ms (-1: no limit, 0: poll) and store at most `max`
   * ready handles in out.  Returns how many (0 on timeout or when
   * interrupted by a signal), or a negative TAXI_E* code. */
  int (*wait)(void *state, taxi__ready_t *out, size_t max, int timeout_ms);

  /* TAXI__EXT_WAKEUP.  wakeup_open: from now on each wakeup_signal makes a
   * wait (one in progress, or the next) report `token` with TAXI_EV_READ,
   * once; signals not yet reported coalesce into one report.  Called like
   * add, once per instance; an error leaves the core on the port's
   * channel.  wakeup_signal: any thread, under the caller's lock or not
   * (never in a signal handler).  Returns 0 or a TAXI_E* code. */
  int (*wakeup_open)(void *state, uint64_t token);
  int (*wakeup_signal)(void *state);

  /* TAXI__EXT_SIGNAL.  signal_add: from now on each arrival of signo
   * makes a wait report `token` with TAXI_EV_READ; arrivals not yet
   * reported coalesce into one report.  The caller has taken the signal
   * (taxi__signal_take) first.  signal_del: no more reports for signo (one
   * already collected by a wait may still be returned); a signal never
   * added is not an error.  Called like add and del.  Return 0 or a
   * TAXI_E* code. */
  int (*signal_add)(void *state, int signo, uint64_t token);
  int (*signal_del)(void *state, int signo);
} taxi__readiness_ops_t;

#endif /* TAXI_BACKENDS_READINESS_H */
