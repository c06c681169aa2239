/* SPDX-License-Identifier: Apache-2.0 */
/*
 * taxi/io.h - the I/O context: one object that owns (or is given) a
 * dispatcher chosen at run time, and runs the stream layer (taxi/stream.h),
 * application timers and signal callbacks on it.
 *
 * The dispatcher is a run-time choice, not a different program:
 *
 *   TAXI_IO_REACTOR   one thread (the caller of taxi_io_run) dispatches a
 *                     Reactor over any readiness backend (epoll, poll, ...);
 *   TAXI_IO_LF        a Leader/Followers pool of `threads` threads (the
 *                     caller of taxi_io_run among them) over a Reactor;
 *   TAXI_IO_HSHA      a half-sync/half-async pool of `threads` workers over
 *                     a Reactor (its own reactor thread besides);
 *   TAXI_IO_PROACTOR  a Proactor over any completion backend (uring, aio,
 *                     iocp, emulated:...), dispatched by the caller of
 *                     taxi_io_run alone (threads 1: a proactor made with
 *                     TAXI_PROACTOR_ONE_THREAD, so destroy the context in
 *                     that thread or after it has exited) or by a
 *                     Leader/Followers pool of `threads` threads over its
 *                     completion queue;
 *   TAXI_IO_PROACTORS  `threads` proactors, one per thread and that thread's
 *                     alone (a group: taxi/proactor_group.h; on io_uring a
 *                     ring per thread, which no other thread locks): each
 *                     stream belongs to one of them, in turn (round robin),
 *                     and its completions run in that proactor's thread.
 *                     The listener accepts in the first proactor's thread
 *                     and hands each connection to the next proactor.
 *
 * Handlers written against taxi/stream.h and this header run unchanged under
 * each: the callbacks of one stream never run in two threads at once, under
 * every dispatcher (see taxi/stream.h, "Threads").
 *
 *     taxi_io_options_t o;
 *     taxi_io_options_init(&o);
 *     taxi_io_dispatcher_parse("lf", &o.dispatcher);
 *     o.threads = 4;
 *     taxi_io_t *io;
 *     taxi_io_create(&io, &o);
 *     ... taxi_listener_create(&l, io, "127.0.0.1:7", NULL, on_accept, NULL);
 *     taxi_io_on_signal(io, SIGTERM, on_term, NULL);  // calls taxi_io_stop
 *     int rc = taxi_io_run(io);                       // until stopped
 *     taxi_io_destroy(io);
 *
 * Ownership.  What the context creates (reactor, proactor, pool) it
 * destroys; what the application supplies in the options it only uses, and
 * the application destroys it after the context.
 *
 * Threads.  Every function may be called from any thread and from inside
 * any callback of the context, unless its comment says otherwise, or the
 * context is TAXI_IO_ONE_THREAD (see taxi_io_options_t.flags).
 *
 * Errors.  0 (or a count) on success, a negative TAXI_E* code on failure.
 */
#ifndef TAXI_IO_H
#define TAXI_IO_H

#include "platform.h"
#include "reactor.h"
#include "lf.h"
#include "hsha.h"
#include "proactor.h"
#include "proactor_group.h"
#include "resolve.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct taxi_io taxi_io_t; /* an I/O context */
/* (taxi/resolve.h declares it too, for its own use.) */
typedef struct taxi_io_timer taxi_io_timer_t; /* a timer of a context */

/* Who dispatches the context's events (see the top of this header). */
typedef enum taxi_io_dispatcher {
  TAXI_IO_REACTOR = 0,
  TAXI_IO_LF = 1,
  TAXI_IO_HSHA = 2,
  TAXI_IO_PROACTOR = 3,
  TAXI_IO_PROACTORS = 4
} taxi_io_dispatcher_t;

/*
 * taxi_io_dispatcher_parse - the dispatcher named "reactor", "lf", "hsha",
 * "proactor" or "proactors".  Returns 0 and sets *out, or TAXI_EINVAL (NULL, or
 * another name: *out is left alone).
 */
TAXI_EXTERN int taxi_io_dispatcher_parse(const char *name,
                                         taxi_io_dispatcher_t *out);

/* taxi_io_dispatcher_name - "reactor", "lf", "hsha", "proactor",
 * "proactors", or NULL for a value that is none of them.  A static string. */
TAXI_EXTERN const char *taxi_io_dispatcher_name(taxi_io_dispatcher_t d);

/*
 * Options for taxi_io_create().  Initialise with taxi_io_options_init() (or
 * TAXI_IO_OPTIONS_INIT), then set what differs: `size` lets the
 * structure grow in later versions without breaking programs built against
 * this one.
 */
typedef struct taxi_io_options {
  size_t size; /* sizeof(taxi_io_options_t), set by the initialisers */
  taxi_io_dispatcher_t dispatcher; /* default TAXI_IO_REACTOR */
  /* The readiness backend ("epoll", "poll", ...) for reactor, lf and hsha,
   * the completion backend ("uring", "aio", "emulated:poll", ...) for
   * proactor and proactors; NULL: TAXI_BACKEND / TAXI_PROACTOR from the
   * environment, else the best that works.  Ignored when a reactor or proactor
   * is supplied. */
  const char *backend;
  /* The number of threads that run the application's callbacks
   * (taxi_io_run's caller counted when it is one of them), under every
   * dispatcher; 0 asks for the dispatcher's default.  Reactor: 1, its
   * only value (the caller; 2 or more is TAXI_EINVAL).  lf: the pool,
   * the caller and threads - 1 spawned (0: 4; at most
   * TAXI_LF_MAX_THREADS).  hsha: the pool's workers, while the caller
   * waits and the pool's reactor thread queues events, running no
   * callback but hsha->busy if set (0: 4; at most TAXI_HSHA_MAX_WORKERS;
   * hsha->workers may only repeat it).  proactor: 1 the caller alone,
   * more a Leader/Followers pool with the caller (0: 1; at most
   * TAXI_LF_MAX_THREADS).  proactors: one thread of the group's per
   * proactor, while the caller waits (0: 2; at most 1024).  With a
   * supplied lf_pool leave it 0: the pool's threads are the
   * application's (taxi_io_threads counts them); with a supplied
   * hsha_pool, 0 or its number of workers.  (The close callbacks left at
   * taxi_io_destroy run in its caller, but under proactors.) */
  unsigned threads;
  /* Options of the Leader/Followers pool (lf, and proactor with more than
   * one thread): promotion order, leaders.  NULL: the defaults.  Read by
   * taxi_io_create(), not kept. */
  const taxi_lf_options_t *lf;
  /* Options of the half-sync/half-async pool (NULL: the defaults); its
   * workers are `threads` (its `workers` 0, or the same number).  Checked
   * by taxi_io_create() (the pool is made by taxi_io_run), not kept. */
  const taxi_hsha_options_t *hsha;
  /* Supplied by the application instead of created (NULL: create).  A
   * reactor serves reactor, lf and hsha; a proactor serves proactor;
   * proactors makes its group and takes none of these.  A
   * pool (lf_pool over the supplied reactor or proactor, hsha_pool over
   * the supplied reactor) is then used instead of one the context would
   * make: taxi_io_run joins it (lf) or waits for it (hsha), taxi_io_stop
   * shuts it down. */
  taxi_reactor_t *reactor;
  taxi_proactor_t *proactor;   /* see reactor */
  taxi_lf_pool_t *lf_pool;     /* see reactor */
  taxi_hsha_pool_t *hsha_pool; /* see reactor */
  /* Told of every failure of the dispatcher the context makes (see
   * taxi_error_report_t in taxi/error.h): waits and re-arms retried after a
   * pause (fatal = 0), and the one that stopped it (fatal = 1, also
   * returned by taxi_io_run).  Passed to the reactor it creates and to the
   * pools it makes, unless the pool options name a callback of their own.
   * Runs in a dispatching thread, with no lock of taxi's held.  NULL: the
   * failures are only counted and returned. */
  taxi_error_fn on_error;
  void *on_error_arg; /* passed to on_error */
  /* proactors: which proactor a new stream goes to (taxi/proactor_group.h:
   * TAXI_SPREAD_ROUND_ROBIN, the default, or TAXI_SPREAD_LEAST_LOADED);
   * another value is TAXI_EINVAL.  Ignored by the other dispatchers. */
  taxi_group_spread_t spread;
  /* Name resolution (taxi/resolve.h, and taxi_stream_connect to
   * "host:port"): the resolver threads the context starts at the first
   * name, at most (0: 2; at most 64), and how many names may wait for one
   * (0: 256; at most 65536: one more is refused with TAXI_ENOBUFS). */
  unsigned resolve_threads;
  unsigned resolve_queue; /* see resolve_threads */
  /* The application's resolver, run in the resolver threads instead of
   * getaddrinfo (see taxi_resolve_hook_fn), with resolve_hook_arg; NULL:
   * the system's. */
  taxi_resolve_hook_fn resolve_hook;
  void *resolve_hook_arg; /* passed to resolve_hook */
  /* TAXI_IO_* flags below (0: none); another bit is TAXI_EINVAL. */
  unsigned flags;
} taxi_io_options_t;

/* taxi_io_options_t.flags */
/* One thread owns the context and its streams: the thread that makes it
 * (taxi_io_create) is the only one that calls taxi_io_run, taxi_io_destroy
 * and the stream functions (taxi/stream.h, taxi_tls_info and
 * taxi_tls_error_text), in the callbacks of the run and before and after
 * it, as with a single-threaded event loop.  The streams then take no lock
 * of their own: a message read and answered costs none (the dispatcher
 * keeps its one lock an event).  For the reactor dispatcher and the
 * proactor one with one thread; another is TAXI_EINVAL.  From another
 * thread those functions do nothing and return TAXI_EPERM (taxi_io_run,
 * taxi_io_destroy and the stream functions that return an int),
 * NULL (taxi_stream_data), "" (taxi_tls_error_text), 0
 * (taxi_stream_write_queued, taxi_stream_write_room) or TAXI_INVALID_HANDLE
 * (taxi_stream_handle); taxi_stream_io, taxi_stream_counters and
 * taxi_stream_watermarks, which read what does not change or counters, stay
 * callable from anywhere.  The other functions of the context keep their locks
 * and may still be called from any thread: taxi_io_post (another thread's way
 * to reach a stream: the posted function runs in the owner), taxi_io_stop,
 * taxi_io_wait, taxi_io_stats, the timers, signals, listeners and datagram
 * endpoints. */
#define TAXI_IO_ONE_THREAD 0x1u

/* taxi_io_options_init - the defaults: reactor dispatcher, automatic
 * backend.  Does nothing for NULL. */
TAXI_EXTERN void taxi_io_options_init(taxi_io_options_t *o);

/* TAXI_IO_OPTIONS_INIT - an initialiser with the defaults, as the *_init
 * function sets them. */
TAXI__OPTIONS_DEFAULT(taxi_io_options_t, taxi_io_options_init)
#define TAXI_IO_OPTIONS_INIT \
  TAXI__OPTIONS_INIT(taxi_io_options_t, taxi_io_options_init)

/*
 * taxi_io_create - make a context with the dispatcher the options ask for
 * (NULL: all defaults).  Creates the reactor or proactor (unless supplied)
 * and the Leader/Followers pool (lf, proactor with several threads), so
 * that a configuration the pool refuses is refused here; the pool gets its
 * threads in taxi_io_run.  The half-sync/half-async pool starts threads as
 * it is made, so it is made when taxi_io_run starts and destroyed when it
 * returns.
 *
 * Returns 0 and sets *out, or TAXI_EINVAL (out NULL, size too small or
 * naming fields this version does not know with non-zero values, unknown
 * dispatcher, threads, resolve_threads or resolve_queue out of range,
 * threads not those of a supplied pool, flags unknown or
 * TAXI_IO_ONE_THREAD with a dispatcher of several threads, a
 * supplied object that does not fit the dispatcher, bad pool options,
 * the half-sync/half-async pool's included), TAXI_ENOBACKEND (no backend
 * of that name works here), TAXI_ENOTSUP (the system refuses the
 * backend, or the backend cannot have several leaders), TAXI_EPERM,
 * TAXI_ENOMEM, TAXI_ESYS.  A refusal's detail (taxi_error_detail) names
 * the field of these options, those of the objects the context makes
 * (the reactor's backend, the pool's leaders) included.
 */
TAXI_EXTERN int taxi_io_create(taxi_io_t **out, const taxi_io_options_t *opts);

/*
 * taxi_io_run - dispatch until taxi_io_stop(): the calling thread runs the
 * reactor or proactor (reactor, proactor with one thread), or starts the
 * pool and joins it (lf, proactor with more threads), or starts the
 * half-sync/half-async pool and waits for it (hsha), or runs the group of
 * proactors, each in a thread of its own, and waits (proactors: the group
 * keeps its threads, parked, until the context is destroyed).  When it returns,
 * the pool it started has been shut down and joined.
 *
 * Returns TAXI_ESTOPPED once stopped by taxi_io_stop() (never 0), or the
 * first error that stopped the context (e.g. TAXI_ENOTSUP: the backend
 * cannot have several leaders;
 * TAXI_ESYS from a wait); TAXI_EBUSY if another thread is in taxi_io_run or
 * this is a callback of the context; TAXI_EPERM from a thread that does
 * not own a TAXI_IO_ONE_THREAD context; TAXI_EINVAL for NULL.  A stopped
 * context stays stopped: a later call returns at once with the same result.
 */
TAXI_EXTERN int taxi_io_run(taxi_io_t *io);

/*
 * taxi_io_stop - make taxi_io_run return as soon as the callbacks running
 * now have returned.  May be called before taxi_io_run (which then returns
 * at once), from any thread, from a callback, and from a signal handler:
 * it sets a flag and writes one byte to a socket pair whose other end the
 * dispatcher watches, both async-signal-safe; the dispatcher then stops
 * itself (the reactor's, pools' and proactor's own stop calls take locks,
 * so they are not called here).  Returns 0, TAXI_EINVAL for NULL, or
 * TAXI_ENOMEM / TAXI_ESYS when the byte could not be written (the OS out
 * of buffers): the flag is set, but the dispatcher may not see it before
 * its next event; call again.
 */
TAXI_EXTERN int taxi_io_stop(taxi_io_t *io);

/*
 * taxi_io_wait - wait until the context has been stopped and no thread is
 * left in taxi_io_run, or timeout_ms passed (-1: no limit).  Returns what
 * taxi_io_run returned (TAXI_ESTOPPED after taxi_io_stop, else the first
 * error), TAXI_ETIMEDOUT, or TAXI_EINVAL.  Threads: any thread but those
 * running the context's callbacks.
 */
TAXI_EXTERN int taxi_io_wait(taxi_io_t *io, int timeout_ms);

/*
 * taxi_io_destroy - close every listener, stream and timer still open
 * (their close callbacks run in the calling thread, pending writes and
 * posted functions completing with TAXI_ECANCELED, each exactly once),
 * call the functions posted to the context and not yet run with
 * TAXI_ECANCELED, as the callbacks of the resolutions not yet delivered
 * (taxi/resolve.h: a resolver thread still waiting for an answer drops it
 * when it comes, and leaves), remove the signal callbacks, destroy what the
 * context created, and free it.  Posts are refused (TAXI_ESTOPPED) from its
 * start.
 *
 * Returns 0, TAXI_EINVAL (NULL), TAXI_EBUSY (a thread is in taxi_io_run:
 * stop it and let it return first), TAXI_EPERM (a TAXI_IO_ONE_THREAD
 * context, from another thread than its own).  Threads: not from a
 * callback of io.
 * With proactors the close callbacks run in the group's threads, each in
 * its stream's, while the calling thread waits for them.
 */
TAXI_EXTERN int taxi_io_destroy(taxi_io_t *io);

/* taxi_io_dispatcher - the dispatcher io uses (TAXI_IO_REACTOR for NULL). */
TAXI_EXTERN taxi_io_dispatcher_t taxi_io_dispatcher(const taxi_io_t *io);

/* taxi_io_backend - the name of the backend in use ("epoll", "uring",
 * "emulated:poll", ...), a static string; NULL for NULL. */
TAXI_EXTERN const char *taxi_io_backend(const taxi_io_t *io);

/* taxi_io_threads - how many threads run the application's callbacks
 * (see taxi_io_options_t.threads): with a supplied lf_pool, how many the
 * pool has now; 0 for NULL. */
TAXI_EXTERN unsigned taxi_io_threads(const taxi_io_t *io);

/* taxi_io_reactor / taxi_io_proactor - the dispatcher underneath (NULL
 * when the context has the other kind), for what this layer does not do.
 * Owned by the context unless it was supplied. */
TAXI_EXTERN taxi_reactor_t *taxi_io_reactor(const taxi_io_t *io);
/* taxi_io_proactor - see taxi_io_reactor.  With TAXI_IO_PROACTORS, the
 * group's first proactor (the one that accepts, runs the application's
 * timers and catches signals). */
TAXI_EXTERN taxi_proactor_t *taxi_io_proactor(const taxi_io_t *io);
/* taxi_io_proactor_group - the group of a TAXI_IO_PROACTORS context (its
 * proactors' counters: taxi_proactor_group_at, taxi_proactor_stats), else
 * NULL.  The context's: never run, stop or destroy it yourself. */
TAXI_EXTERN taxi_proactor_group_t *taxi_io_proactor_group(const taxi_io_t *io);

/* ---- posting ------------------------------------------------------------ */

/* A function posted to the context (taxi_io_post): status 0, or
 * TAXI_ECANCELED when taxi_io_destroy found it not yet run. */
typedef void (*taxi_io_post_fn)(taxi_io_t *io, int status, void *arg);

/*
 * taxi_io_post - run fn(io, 0, arg) in the context's own serialised
 * context: in a thread that dispatches io, never inside this call, never
 * at the same time as another function posted to io or a signal callback
 * of io (taxi_io_on_signal), in the order posted.  (A stream's or a
 * listener's callbacks may run meanwhile in other threads: to be
 * serialised with those, post to the stream or listener, taxi/stream.h.)
 * fn runs exactly once: with status 0, or with TAXI_ECANCELED in the
 * thread of taxi_io_destroy when the context stopped before its turn.
 * Records as taxi_stream_post: nothing allocated in steady state.
 *
 * Returns 0, or TAXI_EINVAL (NULL io or fn), TAXI_ESTOPPED (taxi_io_stop
 * was called, or taxi_io_destroy began), TAXI_ENOMEM, or the error of
 * waking the dispatcher up (TAXI_ENOMEM, TAXI_ESYS); on an error fn does
 * not run and arg stays the caller's.  Threads: any, callbacks included.
 */
TAXI_EXTERN int taxi_io_post(taxi_io_t *io, taxi_io_post_fn fn, void *arg);

/* ---- signals ------------------------------------------------------------ */

/* A signal callback: runs in a thread that dispatches io, like any other
 * callback, never inside the OS signal handler, and never at the same
 * time as a function posted to io (taxi_io_post). */
typedef void (*taxi_io_signal_fn)(taxi_io_t *io, int signo, void *arg);

/*
 * taxi_io_on_signal - call fn(io, signo, arg) when POSIX signal signo
 * arrives (fn NULL: stop doing so), under every dispatcher.  Reactor, lf
 * and hsha use the reactor's signal source (taxi_reactor_add_signal); the
 * proactor has none yet, so the context runs one in a thread of its own,
 * which hands each signal to the proactor's threads.  Either way the rules
 * of taxi_reactor_add_signal() apply: on Linux the signal is blocked in the
 * calling thread and read from a signalfd; the context's own threads have
 * it blocked whenever they were started, so this may be called before or
 * during taxi_io_run, from a callback too; one owner per signal per
 * process.  Signals close together may be merged.
 *
 * Returns 0, or TAXI_EINVAL (NULL io, signo not a catchable signal below
 * 128), TAXI_EBUSY (another reactor of the process owns signo),
 * TAXI_ENOENT (fn NULL for a signal without a callback), TAXI_ENOTSUP (no
 * signals on this platform: Windows), TAXI_ENOMEM, TAXI_ESYS.
 */
TAXI_EXTERN int taxi_io_on_signal(taxi_io_t *io, int signo,
                                  taxi_io_signal_fn fn, void *arg);

/* ---- timers ------------------------------------------------------------- */

/* A timer callback: runs in a thread that dispatches io.  One timer's
 * callback never runs twice at once (a periodic timer is rescheduled after
 * its callback returns). */
typedef void (*taxi_io_timer_fn)(taxi_io_timer_t *t, void *arg);

/*
 * taxi_io_timer_create - make *out a timer of io that calls fn(t, arg)
 * when it expires; it starts disarmed.  Allocated here, once: starting and
 * stopping it allocates nothing.
 * Returns 0 and sets *out, or TAXI_EINVAL (NULL), TAXI_ESTOPPED (io is
 * being destroyed), TAXI_ENOMEM.
 * Ownership: the application's, until taxi_io_timer_destroy (or
 * taxi_io_destroy) releases it.
 */
TAXI_EXTERN int taxi_io_timer_create(taxi_io_timer_t **out, taxi_io_t *io,
                                     taxi_io_timer_fn fn, void *arg);

/*
 * taxi_io_timer_start - arm t to expire after `delay` nanoseconds, then
 * every `period` nanoseconds if period > 0.  Starting an armed timer moves
 * it.  Returns 0, or TAXI_EINVAL (NULL, delay or period negative or beyond
 * TAXI_TIME_SPAN_MAX), TAXI_ESTOPPED (t is being destroyed), TAXI_ENOMEM.
 */
TAXI_EXTERN int taxi_io_timer_start(taxi_io_timer_t *t, taxi_time_t delay,
                                    taxi_time_t period);

/*
 * taxi_io_timer_stop - disarm t: its callback does not start again (one
 * already running in another thread finishes).  Returns 0, TAXI_EINVAL
 * (NULL), TAXI_ENOENT (not armed).
 */
TAXI_EXTERN int taxi_io_timer_stop(taxi_io_timer_t *t);

/*
 * taxi_io_timer_destroy - stop t and release it once no callback of it runs
 * any more (possibly after this returns).  t must not be used afterwards.
 * Returns 0 or TAXI_EINVAL.
 */
TAXI_EXTERN int taxi_io_timer_destroy(taxi_io_timer_t *t);

/* ---- counters ----------------------------------------------------------- */

/* What the context's streams and listeners did, for tests and monitoring. */
typedef struct taxi_io_stats {
  uint64_t streams_opened;    /* accepted, connected or opened */
  uint64_t streams_closed;    /* closed: counted just before the close
                                 callback, which may still be running;
                                 the stream's memory is reused only
                                 after it returns */
  uint64_t accepts;           /* connections accepted */
  uint64_t accept_errors;     /* accepts that failed (then retried) */
  uint64_t accept_pauses;     /* pauses for lack of descriptors */
  uint64_t connects;          /* connections made by taxi_stream_connect */
  uint64_t connect_errors;    /* connects that failed or timed out */
  uint64_t bytes_in;          /* bytes read by streams */
  uint64_t bytes_out;         /* bytes written by streams */
  uint64_t reads;             /* read callbacks with data */
  uint64_t writes;            /* writes queued */
  uint64_t writes_refused;    /* writes refused for lack of room (TAXI_EAGAIN,
                                 TAXI_ENOBUFS) */
  uint64_t read_pauses;       /* times reading paused for backpressure */
  uint64_t timeouts;          /* streams closed by a timeout */
  uint64_t timers;            /* application timer callbacks run */
  uint64_t streams_reused;    /* streams made in a block a released stream
                                 left (kept for reuse: Memory in
                                 taxi/stream.h) */
  uint64_t streams_allocated; /* streams made in a newly allocated block */
} taxi_io_stats_t;

/*
 * taxi_io_stats - copy the counters (streams open = opened - closed).
 * The per-message ones (bytes_in, bytes_out, reads, writes,
 * writes_refused, read_pauses) are the sums of the streams'
 * (taxi_stream_counters in taxi/stream.h), those closed included: no
 * thread adds to a counter of the context per message, and this call sums
 * them, under the lock of the context's list of streams, so that it costs
 * time in proportion to the streams open and counts each stream once,
 * one closing meanwhile too.  As with a stream's counters, a copy made
 * while streams run is not one instant's: each sum is exact for what it
 * includes, two may be a moment apart.
 * Returns 0 or TAXI_EINVAL.  Threads: any, callbacks included.
 */
TAXI_EXTERN int taxi_io_stats(const taxi_io_t *io, taxi_io_stats_t *out);

#ifdef __cplusplus
}
#endif

#endif /* TAXI_IO_H */
