/* SPDX-License-Identifier: Apache-2.0 */
/*
 * taxi/reactor.h - the Reactor: a demultiplexing table of handles and their
 * event handlers, timers, cross-thread notification and signals, over one
 * readiness backend (see taxi/backend.h).
 *
 * Threads.  Every function here may be called from any thread and from
 * inside a hook, unless its comment says otherwise.  One thread at a time
 * dispatches a reactor with taxi_reactor_handle_events(), _handle_one() or
 * _run(); to dispatch from a pool of threads, use the Leader/Followers pool,
 * which builds on this reactor.
 *
 * Errors.  0 (or a count) on success, a negative TAXI_E* code on failure.
 */
#ifndef TAXI_REACTOR_H
#define TAXI_REACTOR_H

#include "platform.h"
#include "error.h"
#include "handler.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct taxi_reactor taxi_reactor_t; /* a reactor */

/* Options for taxi_reactor_create(): start from TAXI_REACTOR_OPTIONS_INIT
 * or taxi_reactor_options_init(), then set what differs. */
typedef struct taxi_reactor_options {
  /* sizeof(taxi_reactor_options_t) as the program was compiled: set by the
   * initialisers, so that the structure can grow without breaking
   * programs built against an older one (see taxi_reactor_create()). */
  size_t size;
  /* Backend name ("epoll", "poll", ...), or NULL: TAXI_BACKEND from the
   * environment if set (and the program is not set-user-ID), else the best
   * that works. */
  const char *backend;
  /* How many ready events one wait may return; 0 means 256. */
  unsigned max_events;
  /* Told of every failure the reactor meets while dispatching (see
   * taxi_error_report_t): a wait or a re-arm that failed and is retried,
   * a handler removed because its handle could not be re-armed, a wait
   * that failed for good.  NULL: nobody is told (the counters still
   * count).  Under a thread pool, the pool's own callback is told of the
   * failures of the waits it makes, and this one of the re-arms. */
  taxi_error_fn on_error;
  void *on_error_arg; /* passed to on_error */
  /* The most notifications (taxi_reactor_notify) queued and not yet run;
   * beyond it taxi_reactor_notify() refuses with TAXI_EAGAIN, so a thread
   * that posts faster than the reactor runs cannot exhaust memory.  0
   * means TAXI_NOTIFY_DEFAULT_CAPACITY. */
  unsigned notify_capacity;
} taxi_reactor_options_t;

/* The default bound on queued notifications, and the largest accepted. */
#define TAXI_NOTIFY_DEFAULT_CAPACITY 65536u
#define TAXI_NOTIFY_MAX_CAPACITY (1u << 24) /* see the default above */

/* taxi_reactor_options_init - the defaults (every field 0 or NULL, size
 * set).  Does nothing for NULL.  Any thread. */
TAXI_EXTERN void taxi_reactor_options_init(taxi_reactor_options_t *o);

/* TAXI_REACTOR_OPTIONS_INIT - an initialiser with the defaults, as
 * taxi_reactor_options_init() sets them. */
TAXI__OPTIONS_DEFAULT(taxi_reactor_options_t, taxi_reactor_options_init)
#define TAXI_REACTOR_OPTIONS_INIT \
  TAXI__OPTIONS_INIT(taxi_reactor_options_t, taxi_reactor_options_init)

/*
 * taxi_reactor_create - create a reactor with the options `opts` (NULL:
 * all defaults, the backend chosen as taxi_reactor_options_t.backend says).
 *
 * Returns 0 and sets *out, or TAXI_EINVAL (out NULL; opts->size smaller
 * than the first version of the structure, e.g. a structure not filled by
 * an initialiser, or naming fields this version does not know with
 * non-zero values; max_events above 65536; notify_capacity above
 * TAXI_NOTIFY_MAX_CAPACITY), TAXI_ENOBACKEND (no backend of that name is
 * compiled in, or it does not work here: the automatic choice skips such
 * backends), TAXI_ENOMEM, TAXI_ESYS.
 * Ownership: the caller owns *out and releases it with
 * taxi_reactor_destroy(); of opts only the callback and its argument are
 * kept.  Threads: any.
 */
TAXI_EXTERN int taxi_reactor_create(taxi_reactor_t **out,
                                    const taxi_reactor_options_t *opts);

/*
 * taxi_reactor_destroy - remove every handler (their close hooks run now, in
 * this thread; handlers still referenced elsewhere close when released),
 * cancel every timer, drop undelivered notifications, and free the reactor.
 *
 * Returns 0, TAXI_EINVAL for NULL, or TAXI_EBUSY if a thread is dispatching
 * it (stop it and let that thread return first).
 * Threads: any thread but one inside this reactor's hooks.
 */
TAXI_EXTERN int taxi_reactor_destroy(taxi_reactor_t *r);

/*
 * taxi_reactor_backend - the name of the backend this reactor uses, a static
 * string; NULL if r is NULL.
 */
TAXI_EXTERN const char *taxi_reactor_backend(const taxi_reactor_t *r);

/* taxi_reactor_caps - the TAXI_CAP_* flags of its backend, stored in *out;
 * 0, or TAXI_EINVAL (NULL r or out; *out is then untouched).  Any
 * thread. */
TAXI_EXTERN int taxi_reactor_caps(const taxi_reactor_t *r, unsigned *out);

/*
 * taxi_reactor_register - watch `handle` for `events` (TAXI_EV_READ, _WRITE,
 * _EXCEPT; HUP and ERR are always watched) and dispatch them to `h`.  A
 * handler serves one handle at a time; it may also have timers and signals.
 * The handle should be non-blocking.  taxi does not take ownership of it:
 * remove the handler (a hook ends it by returning a negative value), then
 * close the handle, in the close hook.
 *
 * A handle closed while registered - by a hook that closed it and
 * returned 0, or by another thread - is found out, and its handler
 * removed with TAXI_EBADF through its error hook (taxi/handler.h), once:
 * when a wait reports the handle closed (poll, select, WSAPoll, APR's
 * poll and select), when re-arming it fails (the pools over epoll), when
 * another handler registers its number, and otherwise by a check of the
 * handles whose hooks ran, at most once per 100 ms per handle, made by
 * the dispatching thread before it waits.  None of these costs a system
 * call per event; the check costs one per checked handle (an fstat, or on
 * epoll an epoll_ctl that changes nothing).  To tell a handle closed and
 * its number taken by another open from the handle registered, the
 * reactor notes at registration what the handle names, except on epoll:
 * an fstat, made instead of the check for an open handle that poll,
 * select and APR made there anyway (a system call more on kqueue, and on
 * Windows, where a socket closed and its value taken at once by another
 * socket is not told apart).
 *
 * Returns 0, or:
 *   TAXI_EINVAL   r or h NULL, events empty or with unknown bits, or h is
 *                 attached to another reactor, or h->ops is NULL;
 *   TAXI_EBADF    handle is TAXI_INVALID_HANDLE or not an open handle;
 *   TAXI_EEXIST   handle is already registered (to a handler whose handle
 *                 was not closed under the reactor: see above), or h
 *                 already has a handle;
 *   TAXI_EBUSY    h was removed and its close hook has not run yet;
 *   TAXI_ETOOMANY the backend cannot watch this handle (select's FD_SETSIZE);
 *   TAXI_ENOTSUP  the backend cannot watch for these events (EXCEPT) or this
 *                 kind of handle (a regular file on epoll);
 *   TAXI_ENOMEM, TAXI_ESYS.
 */
TAXI_EXTERN int taxi_reactor_register(taxi_reactor_t *r, taxi_handle_t handle,
                                      taxi_handler_t *h, unsigned events);

/*
 * taxi_reactor_modify - change the events watched for h's handle.
 *
 * During a dispatch of the handle - one of its hooks runs, in this thread
 * or another, or its event waits in a half-sync/half-async queue or behind
 * another hook of h (taxi/handler.h) - a pool keeps the handle deactivated
 * (see taxi_reactor_suspend()): a modify then, from inside the hook or from
 * any other thread, returns 0 and takes effect when the dispatch ends,
 * where the handle is watched again for the new events.  The dispatch
 * under way is not changed: its hooks run for what was reported (an event
 * still queued, not yet run, loses the events no longer watched, and is
 * dropped when none is left).  Under the reactor's own dispatch the handle
 * is not deactivated, and the change is made at once.
 * Once taxi_reactor_remove() has been called for h (the calls are ordered
 * by the reactor's lock: one made before it returns 0), every later call
 * returns TAXI_ENOENT, whichever thread makes it, a hook of h still running
 * included.
 * Returns 0, TAXI_EINVAL (NULL, empty or unknown events), TAXI_ENOENT (h has
 * no handle registered with r, or was removed), TAXI_ENOTSUP, TAXI_ESYS.
 */
TAXI_EXTERN int taxi_reactor_modify(taxi_reactor_t *r, taxi_handler_t *h,
                                    unsigned events);

/*
 * taxi_reactor_remove - detach h from r: stop watching its handle, cancel its
 * timers and signals.  No hook of h starts after this returns; the close
 * hook runs once the hooks running in other threads (if any) have returned
 * and every taxi_handler_ref() is released: possibly before this returns,
 * in this thread.  The handle is not closed: do it in the close hook.
 *
 * Returns 0, TAXI_EINVAL (NULL), TAXI_ENOENT (h is not attached to r, or was
 * already removed).
 */
TAXI_EXTERN int taxi_reactor_remove(taxi_reactor_t *r, taxi_handler_t *h);

/*
 * taxi_reactor_move - move h, with its handle, watched events and suspended
 * state, from reactor `from` to reactor `to` (for instance to rebalance
 * connections among the handle sets of taxi/lf_sets.h).  If an event of h
 * has been taken for dispatch (a hook of h is running, in any thread, the
 * caller's included, or the event waits in a half-sync/half-async queue),
 * the move takes place when that dispatch is over, unless h is removed
 * meanwhile; otherwise before this returns.  Events reported for h on `from`
 * but not yet dispatched are dropped; `to` reports them again
 * (level-triggered).  If `to` then fails to watch the handle (out of memory,
 * beyond FD_SETSIZE), h is removed and its close hook runs.  References taken
 * with taxi_handler_ref() move with h, and may be taken and dropped from any
 * thread while it moves.
 *
 * Returns 0, or TAXI_EINVAL (NULL, from == to), TAXI_ENOENT (h has no
 * handle registered with `from`), TAXI_EBUSY (h has timers or signals:
 * cancel them first and schedule them on `to` afterwards; or a move of h
 * is pending already), TAXI_ENOTSUP (`to` cannot watch h's events), or an
 * error of `to` registering the handle (then h was removed).
 */
TAXI_EXTERN int taxi_reactor_move(taxi_reactor_t *from, taxi_handler_t *h,
                                  taxi_reactor_t *to);

/*
 * taxi_reactor_suspend - deactivate h's handle: its events are not
 * dispatched, and events already reported but not yet dispatched are
 * dropped, until taxi_reactor_resume().  Timers and signals are unaffected.
 * Suspending a suspended handler does nothing.
 *
 * Under a pool the handle is deactivated anyway while an event of it is
 * dispatched (its hooks run, or its event waits in a queue), and watched
 * again when the dispatch ends, as it is then: a suspend made meanwhile,
 * inside one of its hooks or by another thread, survives that re-arm - the
 * handle stays off until resumed - and a resume made meanwhile is what
 * the re-arm watches (so suspend then resume inside a hook leave it
 * watched).  Under the reactor's own dispatch the change is made at once.
 * After taxi_reactor_remove(), TAXI_ENOENT (see taxi_reactor_modify()).
 * Returns 0, TAXI_EINVAL, TAXI_ENOENT (no handle registered, or removed),
 * TAXI_ESYS.
 */
TAXI_EXTERN int taxi_reactor_suspend(taxi_reactor_t *r, taxi_handler_t *h);

/* taxi_reactor_resume - reactivate a suspended handle (level-triggered: a
 * condition that arose while suspended is reported).  Resuming an active
 * handler does nothing.  Errors as taxi_reactor_suspend(). */
TAXI_EXTERN int taxi_reactor_resume(taxi_reactor_t *r, taxi_handler_t *h);

/*
 * taxi_reactor_pending_error - the error pending on h's handle, for a hook
 * that was given TAXI_EV_ERR or TAXI_EV_HUP (or a read that returned 0) and
 * must tell a connection that failed or was reset from one that ended:
 * stores 0 in *error when there is none, else its TAXI_E* code
 * (TAXI_ECONNRESET, TAXI_ECONNREFUSED, TAXI_ETIMEDOUT, ...).  Where the
 * backend reports the error with the event (kqueue: EV_EOF with the error in
 * fflags) it is kept from that event, since reporting it may have cleared it
 * from the socket (libkqueue does); otherwise it is the socket's pending
 * error (SO_ERROR).  Either way asking consumes it: a second call, or a
 * read() afterwards, no longer sees it.  A handle that is not a socket has
 * none.  On Windows a reset may not be pending yet when its event comes
 * (SO_ERROR 0): the receive that follows reports it (TAXI_ECONNRESET).
 * Returns 0, TAXI_EINVAL (NULL), TAXI_ENOENT (h has no handle registered
 * with r), or the error of asking the OS.
 * Threads: any; typically h's own hook.
 */
TAXI_EXTERN int taxi_reactor_pending_error(taxi_reactor_t *r, taxi_handler_t *h,
                                           int *error);

/*
 * taxi_reactor_handle_events - wait at most `timeout_ms` milliseconds (-1:
 * without limit, 0: do not block) for events, expired timers, signals or
 * notifications, and dispatch all that are ready.
 *
 * A wait the OS refuses for want of memory or buffers (TAXI_ENOMEM,
 * TAXI_EAGAIN) is retried after a pause that grows from 1 ms to 256 ms,
 * within the timeout, and reported to the on_error callback (fatal = 0);
 * after 16 such failures in a row (about 2 s) it counts as persistent.
 * A persistent failure is reported (fatal = 1) and returned.
 *
 * Returns how many hooks and notifications ran (0 when the time ran out), or
 * TAXI_ESTOPPED whenever the reactor is stopped when the call ends -
 * stopped before it, or during it by any thread, a hook or a signal handler
 * (what ran before is not counted then) - or TAXI_EBUSY (another thread is
 * dispatching r, or this is a hook of r), TAXI_EINVAL, or the wait's
 * persistent failure (TAXI_ESYS, TAXI_EBADF, TAXI_ENOMEM, ...).
 */
TAXI_EXTERN int taxi_reactor_handle_events(taxi_reactor_t *r, int timeout_ms);

/*
 * taxi_reactor_handle_one - as taxi_reactor_handle_events(), but dispatch
 * exactly one event (one handle's hooks, one timer, one signal or one
 * notification) and return.  Events a wait reported beyond the first are
 * kept and dispatched by the next calls without another system call.
 * Returns 1 when it dispatched, 0 when the time ran out, or the errors above
 * (TAXI_ESTOPPED once stopped, as for taxi_reactor_handle_events()).
 */
TAXI_EXTERN int taxi_reactor_handle_one(taxi_reactor_t *r, int timeout_ms);

/*
 * taxi_reactor_run - dispatch until taxi_reactor_stop().  Transient
 * failures are retried as taxi_reactor_handle_events() says.
 * Returns TAXI_ESTOPPED once stopped (or at once when stopped already), or
 * TAXI_EBUSY, TAXI_EINVAL, or the persistent failure that ended it
 * (reported to on_error first).  It never returns 0.
 */
TAXI_EXTERN int taxi_reactor_run(taxi_reactor_t *r);

/*
 * taxi_reactor_stop - make the dispatching thread return TAXI_ESTOPPED (from
 * run, handle_events and handle_one alike) as soon as the hook it runs, if
 * any, has returned.  The reactor stays stopped until taxi_reactor_restart().
 * Returns 0, TAXI_EINVAL for NULL, or the error of the wake-up write (the
 * stop is recorded all the same; a thread not waiting sees it when it next
 * dispatches).
 * Threads: any, and from a signal handler (it takes no lock: an atomic
 * store and at most one write to the wake-up channel).
 */
TAXI_EXTERN int taxi_reactor_stop(taxi_reactor_t *r);

/* taxi_reactor_restart - clear the stopped state.  Returns 0, TAXI_EINVAL. */
TAXI_EXTERN int taxi_reactor_restart(taxi_reactor_t *r);

/* taxi_reactor_stopped - 1 when stopped, 0 when not (or r is NULL). */
TAXI_EXTERN int taxi_reactor_stopped(const taxi_reactor_t *r);

/*
 * taxi_reactor_notify - run fn(arg) in the thread that dispatches r, soon.
 * Notifications run in the order they were posted, each exactly once (under
 * a thread pool they start in that order but may overlap, each in its own
 * pool thread); those not yet run when the reactor is destroyed are
 * dropped (fn is not called).
 * The queue grows as needed up to the reactor's notify_capacity; once
 * grown it is reused, so steady posting allocates nothing.  A full queue
 * refuses (TAXI_EAGAIN): the poster decides whether to wait, drop or
 * retry, rather than the reactor running out of memory.
 * Returns 0, TAXI_EINVAL (r or fn NULL), TAXI_EAGAIN (notify_capacity
 * notifications queued already), TAXI_ENOMEM.
 */
TAXI_EXTERN int taxi_reactor_notify(taxi_reactor_t *r, void (*fn)(void *arg),
                                    void *arg);

/*
 * taxi_reactor_schedule - arm timer t to call h's timeout hook with `act`
 * after `delay` nanoseconds, then every `period` nanoseconds if period > 0.
 * Timers fire in deadline order (equal deadlines in the order scheduled).
 * A periodic timer is rescheduled after its hook returns, so one timer never
 * runs twice at once; periods missed while the hook ran late are skipped,
 * not fired in a burst.  Scheduling a scheduled timer moves it.
 *
 * Returns 0, or TAXI_EINVAL (NULL, delay or period negative or above
 * TAXI_TIME_SPAN_MAX, h has no timeout hook, or h or t belong to another
 * reactor), TAXI_EBUSY (h was removed and has not closed yet), TAXI_ENOMEM
 * (growing the heap).
 */
TAXI_EXTERN int taxi_reactor_schedule(taxi_reactor_t *r, taxi_timer_t *t,
                                      taxi_handler_t *h, taxi_time_t delay,
                                      taxi_time_t period, void *act);

/*
 * taxi_reactor_cancel - disarm timer t.  It will not fire again; a firing
 * another thread has already taken for dispatch (its hook running, or
 * about to be entered) still runs to completion.  To know that no hook
 * runs any more, remove the handler: its close hook runs after every
 * dispatch in flight.
 * Returns 0, TAXI_EINVAL (NULL), TAXI_ENOENT (not scheduled: already fired
 * once-only, or cancelled).
 */
TAXI_EXTERN int taxi_reactor_cancel(taxi_reactor_t *r, taxi_timer_t *t);

/*
 * taxi_reactor_add_signal - dispatch POSIX signal `signo` to h's signal hook,
 * in the dispatching thread like any other event; no user code runs inside
 * the OS signal handler.  One reactor per process may own a given signal.
 * Every thread taxi makes (the pools', the proactors', the catcher of a
 * proactor's signals) starts with the asynchronous signals blocked - all
 * but SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS and SIGPROF - so a
 * signal may be added before or after they exist, and by any thread, a
 * hook run by a pool included.  (A hook therefore never runs one of the
 * application's signal handlers, and its writes to a broken pipe fail
 * with EPIPE rather than raising SIGPIPE.)
 * On Linux the signal is read from a signalfd and is blocked in the
 * calling thread.  A thread of the application's own that has it
 * unblocked takes it instead: if its disposition is the default action,
 * taxi replaces that, while the signal is added, with a handler that
 * passes the signal on to the reactor (through a pipe), so it is
 * dispatched all the same and never ends the process; a handler the
 * application installed itself takes the signals that reach its threads
 * (block the signal in them, or let them have it).  On a kqueue reactor
 * (the BSDs, macOS) kqueue
 * reports the signal itself (EVFILT_SIGNAL, no descriptor): while added, the
 * signal's disposition is a handler that does nothing, so its default action
 * no longer applies (and system calls it interrupts are restarted where
 * possible); the environment variable TAXI_SIGNAL_SOURCE=port makes such a
 * reactor use the mechanism below instead.  Elsewhere a handler installed
 * with sigaction writes to a pipe the reactor watches.  Signals arriving
 * close together may be merged into one dispatch.
 *
 * Returns 0, or TAXI_EINVAL (NULL, signo not a catchable signal, h has no
 * signal hook or belongs to another reactor), TAXI_EEXIST (r already
 * dispatches signo), TAXI_EBUSY (another reactor owns signo), TAXI_ENOTSUP
 * (no signals on this platform), TAXI_ENOMEM, TAXI_ESYS.
 */
TAXI_EXTERN int taxi_reactor_add_signal(taxi_reactor_t *r, int signo,
                                        taxi_handler_t *h);

/*
 * taxi_reactor_remove_signal - stop dispatching signo; its disposition and
 * the thread's mask are restored to what they were before add_signal.
 * Returns 0, TAXI_EINVAL, TAXI_ENOENT (r does not dispatch signo).
 */
TAXI_EXTERN int taxi_reactor_remove_signal(taxi_reactor_t *r, int signo);

/*
 * taxi_reactor_reinit_after_fork - call in the child after fork() to give
 * the reactor its own kernel objects: epoll and kqueue sets, the wake-up
 * channel and the signal source are shared with (or lost from) the parent
 * across fork.  Every registered handle is watched again with the same
 * handler; timers, signals and queued notifications are kept.  The parent's
 * reactor is not disturbed.
 *
 * Call it from the child's only thread, before any other use of r, and only
 * if no other thread of the parent was inside r at the moment of fork().
 * Returns 0, TAXI_EINVAL, TAXI_ENOMEM, TAXI_ESYS.
 */
TAXI_EXTERN int taxi_reactor_reinit_after_fork(taxi_reactor_t *r);

/* Counters, for tests and the benchmark; read with taxi_reactor_stats(). */
typedef struct taxi_reactor_stats {
  uint64_t waits;            /* system calls made to wait for events */
  uint64_t events;           /* handle events dispatched */
  uint64_t stale;            /* events dropped: handle removed or suspended */
  uint64_t pending_taken;    /* events dispatched from an earlier wait */
  uint64_t timers;           /* timer hooks run */
  uint64_t notifications;    /* notifications run */
  uint64_t signals;          /* signal hooks run */
  uint64_t wakeups;          /* times the wake-up channel was written */
  uint64_t transient_errors; /* failed waits and re-arms, retried */
  uint64_t rearm_removed;    /* handlers removed: handle not re-armable,
                                or closed under the reactor */
  size_t handles;            /* handles registered now */
} taxi_reactor_stats_t;

/* taxi_reactor_stats - copy the counters.  Returns 0 or TAXI_EINVAL. */
TAXI_EXTERN int taxi_reactor_stats(const taxi_reactor_t *r,
                                   taxi_reactor_stats_t *out);

#ifdef __cplusplus
}
#endif

#endif /* TAXI_REACTOR_H */
