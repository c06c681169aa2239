/* SPDX-License-Identifier: Apache-2.0 */
/*
 * taxi/lf.h - the Leader/Followers thread pool.
 *
 * A pool of threads takes turns dispatching one reactor.  One thread, the
 * leader, waits for events on the reactor's handle set; the others are
 * followers, each waiting to be promoted.  When the leader's wait returns
 * it deactivates the handle it will process (one-shot arming where the
 * backend has it, EPOLLONESHOT or EV_DISPATCH, otherwise removal from the
 * set), promotes a follower to lead, and processes the event itself as a
 * processing thread: the thread that detected the event handles it, so
 * there is no hand-off, no queue and no allocation per event.  Afterwards
 * it reactivates the handle and rejoins, as leader at once if there is none.
 *
 * The same handler never runs in two threads at once: a handle stays
 * deactivated from the moment its event is taken until its hooks have
 * returned, and a handler's timer and signal hooks never overlap its
 * handle's hooks either (taxi/handler.h: one that comes due meanwhile is
 * run by the thread running the handler, right after).
 *
 * Events a wait reported beyond the one its leader processes are kept,
 * already deactivated, and the next threads take them without another
 * system call.
 *
 * The handles the library reads itself (the streams, listeners and
 * wake-up channel of a taxi_io_t, taxi/io.h) are not deactivated in the
 * kernel where the backend has edge triggering (epoll, kqueue): they are
 * armed once, edge-triggered, and the thread that takes an event of one
 * owns it until its hooks return, running them again for any report that
 * came meanwhile; their hooks read until the socket is empty.  No system
 * call re-arms them after each event.  A leader promotes a follower only
 * when work remains for one: more events than the few it takes next
 * itself, or a hook that may block (anything but those library hooks, and
 * those too while the pool's events take more than 20 microseconds each
 * on average), during which the handle set must be watched.
 *
 * Threads join the pool either by being spawned by it (taxi_lf_spawn) or by
 * calling taxi_lf_join() themselves; both may be mixed.  Every one of them
 * runs hooks, so the pool has no thread count among its options: it has
 * the threads it was given.  (The I/O context's `threads`,
 * taxi_io_options_t, is all of them: taxi_io_run's caller joins, the rest
 * are spawned; the half-sync/half-async pool's `workers` count the same
 * thing there, taxi/hsha.h.)  A thread that
 * awaits a reply (taxi/lf_bound.h) takes part in the pool for the time of
 * its wait: from a hook, where it is; from outside, as if it had joined.
 *
 * Failures.  A wait on the handle set that the OS refuses for want of
 * memory or buffers (TAXI_ENOMEM, TAXI_EAGAIN) is retried by the same
 * thread after a pause that grows from 1 ms to 256 ms, while it keeps the
 * leader's role (the other threads go on processing and following, rather
 * than all failing in turn); each such failure is counted and reported to
 * the on_error callback (fatal = 0).  A failure that persists - one that
 * is not transient, or 16 transient ones in a row (about 2 s) - stops the
 * whole pool as taxi_lf_stop() would: every thread leaves once its
 * event is processed, the failure is reported (fatal = 1) and kept as the
 * pool's error, which taxi_lf_join(), taxi_lf_wait() and
 * taxi_lf_stop() return.  No thread leaves the pool unaccounted.
 *
 * Threads.  Every function may be called from any thread and from inside a
 * hook run by the pool, unless its comment says otherwise.  The threads
 * the pool starts have the asynchronous signals blocked (see
 * taxi_reactor_add_signal()).
 */
#ifndef TAXI_LF_H
#define TAXI_LF_H

#include "platform.h"
#include "reactor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct taxi_lf_pool taxi_lf_pool_t; /* a Leader/Followers pool */
/* A proactor (taxi/proactor.h), for taxi_lf_create_proactor(). */
typedef struct taxi_proactor taxi_proactor_t;

/* Which follower a leader promotes.  (The paper's fifth order, "specific",
 * hands an event to one designated thread rather than choosing a leader:
 * that is the bound hand-off of taxi/lf_bound.h, which wakes the thread
 * awaiting a reply through its own synchronizer under any of these.) */
typedef enum taxi_promotion {
  /* The follower that waited the shortest time (a stack of per-thread
   * synchronizers): its cache is warmest.  The default. */
  TAXI_PROMOTE_LIFO = 0,
  /* The follower that waited the longest (a queue of synchronizers). */
  TAXI_PROMOTE_FIFO = 1,
  /* The follower with the highest priority (given to taxi_lf_join(); equal
   * priorities in LIFO order).  Spawned threads have priority 0. */
  TAXI_PROMOTE_PRIORITY = 2,
  /* Whichever the OS wakes: every follower waits on one shared condition
   * variable (the paper's implementation-defined order). */
  TAXI_PROMOTE_SHARED = 3
} taxi_promotion_t;

/* How many threads may wait on the handle set at once. */
typedef enum taxi_leaders {
  /* One leader at a time: the protocol for iterative handle sets (select,
   * poll), and the default. */
  TAXI_LEADERS_ONE = 0,
  /* Several leaders wait at once on a concurrent handle set.  Needs a
   * backend with TAXI_CAP_MULTI_WAIT and TAXI_CAP_ONESHOT (epoll, kqueue);
   * others refuse with TAXI_ENOTSUP.  Without max_leaders every idle
   * thread leads and each wait takes one event, leaving the kernel to
   * spread events over the waiting threads; with max_leaders the others
   * follow, and a wait's further events go to the followers it promotes. */
  TAXI_LEADERS_MANY = 1
} taxi_leaders_t;

/* Options for taxi_lf_create(): start from TAXI_LF_OPTIONS_INIT or
 * taxi_lf_options_init(), then set what differs. */
typedef struct taxi_lf_options {
  /* sizeof(taxi_lf_options_t) as the program was compiled, set by the
   * initialisers (see taxi_reactor_options_t.size). */
  size_t size;
  taxi_promotion_t promotion; /* which follower leads next */
  taxi_leaders_t leaders;     /* one waiting thread, or several */
  /* With TAXI_LEADERS_MANY, the most threads waiting at once; 0 means no
   * limit (every thread not processing may wait). */
  unsigned max_leaders;
  /* Told of the failures of the pool's waits and of threads that could not
   * be started (see "Failures" above and taxi_error_report_t), in the pool
   * thread that met them.  NULL: nobody is told. */
  taxi_error_fn on_error;
  void *on_error_arg; /* passed to on_error */
  /* How much work a thread may keep for itself before it wakes a follower
   * for the rest, in nanoseconds, when what it runs is the library's own
   * reading and writing of a stream or datagram endpoint (taxi/io.h),
   * which never blocks, on a backend with edge triggering
   * (TAXI_CAP_EDGE: epoll, a BSD's kqueue).  The pool measures the time a
   * message takes; a thread about to run such a handler wakes a follower when
   * the events left from its wait would take it longer than this, or when a
   * message has been taking longer than this on average (a run of events
   * counting for at most twice this a message, so that a thread preempted
   * during a quick one does not pass for a slow callback).  Any other hook (the
   * application's own handlers, timers, signals, notifications) may block,
   * and a follower is always woken first when work remains.
   * 0: TAXI_LF_HANDOFF_DEFAULT_NS (1 ms).  Larger or smaller trades
   * latency for CPU.  A follower woken for part of a batch takes a few
   * events and sleeps again: a context switch each way, and, where no CPU
   * is idle, one taken from another thread (the clients', a second
   * process), so that the next waits find fewer events ready and block
   * more often.  While one thread keeps up, a large handoff lets it serve
   * whole batches alone, at the Reactor's cost per message, the other
   * threads a reserve for slow or blocking callbacks; the messages late in
   * a batch wait for the ones before them, up to about this long.  A
   * small one (20 us, about what a wake-up costs) spreads each batch of
   * more than a few events over the threads, for the lowest latency where
   * CPUs are idle.  At most TAXI_LF_HANDOFF_MAX_NS.  Pools over a proactor run
   * only completion handlers, to which it does not apply. */
  uint64_t handoff_ns;
} taxi_lf_options_t;

/* The default of taxi_lf_options_t.handoff_ns: 1 millisecond. */
#define TAXI_LF_HANDOFF_DEFAULT_NS 1000000u
/* The most taxi_lf_options_t.handoff_ns may be: 10 milliseconds. */
#define TAXI_LF_HANDOFF_MAX_NS 10000000u

/* taxi_lf_options_init - the defaults (every field 0 or NULL, size
 * set).  Does nothing for NULL.  Any thread. */
TAXI_EXTERN void taxi_lf_options_init(taxi_lf_options_t *o);

/* TAXI_LF_OPTIONS_INIT - an initialiser with the defaults. */
TAXI__OPTIONS_DEFAULT(taxi_lf_options_t, taxi_lf_options_init)
#define TAXI_LF_OPTIONS_INIT \
  TAXI__OPTIONS_INIT(taxi_lf_options_t, taxi_lf_options_init)

/* The most threads one pool may have. */
#define TAXI_LF_MAX_THREADS 1024u

/*
 * taxi_lf_create - create a pool that dispatches reactor r.  While the
 * pool exists, r's own dispatch calls (handle_events, handle_one, run)
 * return TAXI_EBUSY; everything else about r works as before, from any
 * thread.  The pool starts with no threads.
 *
 * `opts`: NULL for the defaults; a structure not set by an initialiser
 * (size too small), or naming fields this version does not know with
 * non-zero values, is TAXI_EINVAL.
 * Returns 0 and sets *out, or TAXI_EINVAL (NULL, unknown option value),
 * TAXI_ENOTSUP (TAXI_LEADERS_MANY on a backend that cannot),
 * TAXI_EBUSY (r already has a pool, or a thread is dispatching it),
 * TAXI_ENOMEM.
 * Ownership: the caller owns the pool; the reactor stays the caller's and
 * must outlive the pool.
 */
TAXI_EXTERN int taxi_lf_create(taxi_lf_pool_t **out, taxi_reactor_t *r,
                               const taxi_lf_options_t *opts);

/*
 * taxi_lf_create_proactor - a Leader/Followers pool over the proactor's
 * completion queue: one leader reaps completions, promotes a follower, then
 * runs the completion handler itself.  The pool is an ordinary
 * taxi_lf_pool_t: spawn, join, shrink, stop, wait, stats and destroy work
 * as for any pool.  Several leaders (TAXI_LEADERS_MANY) need a backend whose
 * completion queue several threads may wait on at once (IOCP); others
 * refuse with TAXI_ENOTSUP.  While the pool exists, handle_events and run
 * return TAXI_EBUSY.  Errors as taxi_lf_create().
 * Ownership: the caller owns the pool; the proactor (taxi/proactor.h)
 * stays the caller's and must outlive the pool.  Threads: any.
 */
TAXI_EXTERN int taxi_lf_create_proactor(taxi_lf_pool_t **out,
                                        taxi_proactor_t *p,
                                        const taxi_lf_options_t *opts);

/*
 * taxi_lf_spawn - start n more threads in the pool.
 * Returns 0, TAXI_EINVAL (pool unknown or destroyed, n == 0, or the pool
 * would exceed TAXI_LF_MAX_THREADS), TAXI_ESTOPPED (shut down), TAXI_ENOMEM,
 * TAXI_ESYS (the OS refused a thread; the threads started before it stay).
 */
TAXI_EXTERN int taxi_lf_spawn(taxi_lf_pool_t *p, unsigned n);

/*
 * taxi_lf_join - lend the calling thread to the pool: it leads, processes
 * and follows until the pool shuts down (returns 0) or timeout_ms passes
 * (-1: no limit; returns TAXI_ETIMEDOUT).  A leader whose time is up
 * promotes a follower before leaving.  `priority` orders promotion under
 * TAXI_PROMOTE_PRIORITY (higher first) and is ignored otherwise.
 *
 * Returns TAXI_ESTOPPED (the pool was shut down: while the thread was in
 * it, or before the call), TAXI_ETIMEDOUT, TAXI_EINVAL (pool unknown or
 * destroyed), TAXI_EBUSY (the calling thread is already in this pool: a
 * hook may not join its own pool), or the persistent failure that stopped
 * the pool (see "Failures"; the thread has left the pool).  It never
 * returns 0.
 * Threads: any thread that is not already in the pool.
 */
TAXI_EXTERN int taxi_lf_join(taxi_lf_pool_t *p, int timeout_ms, int priority);

/*
 * taxi_lf_shrink - ask n of the pool's spawned threads to leave (they
 * finish the event they process first) and wait until they have.
 * Returns 0, TAXI_EINVAL (pool unknown, or n exceeds the spawned threads
 * still running), TAXI_ESTOPPED (shut down, or stopped by a failure).
 * Threads: not from a hook run by this pool (it would wait for itself);
 * that returns TAXI_EBUSY.
 */
TAXI_EXTERN int taxi_lf_shrink(taxi_lf_pool_t *p, unsigned n);

/*
 * taxi_lf_stop - wake every thread of the pool and make it leave once
 * the event it processes (if any) is done; return when all have left.
 * Called from a hook run by the pool, it returns when every other thread
 * has left; the calling thread leaves when its hook returns.  Events not
 * yet dispatched stay with the reactor.
 * Returns 0, TAXI_EINVAL (pool unknown or destroyed), TAXI_ESTOPPED (shut
 * down already), or the persistent failure that stopped the pool by itself
 * (see "Failures"; every thread has left when it returns).
 * Threads: any, including a hook run by the pool; not a signal handler
 * (it locks and waits).  From a signal handler stop the pool's reactor or
 * proactor instead (taxi_reactor_stop, taxi_proactor_stop: lock-free): a
 * pool whose source is stopped stops as this call would, without
 * waiting, and taxi_lf_wait() tells when every thread has left.  (So a
 * pool made over a stopped reactor stops at once: restart it first.)
 */
TAXI_EXTERN int taxi_lf_stop(taxi_lf_pool_t *p);

/*
 * taxi_lf_wait - wait until the pool has stopped, by taxi_lf_stop() or
 * by a persistent failure, and every thread but the caller has left; at
 * most timeout_ms (-1: no limit).  What a main thread calls after spawning
 * the pool's threads, to learn when and why it ends.
 * Returns TAXI_ESTOPPED (shut down), the failure that stopped it,
 * TAXI_ETIMEDOUT, TAXI_EINVAL (pool unknown or destroyed), TAXI_EBUSY
 * (from a thread of the pool: it would wait for itself).
 */
TAXI_EXTERN int taxi_lf_wait(taxi_lf_pool_t *p, int timeout_ms);

/*
 * taxi_lf_destroy - shut the pool down if it is not already, join its
 * spawned threads, give the reactor back to single-threaded dispatch, and
 * free the pool.  Afterwards every call given p returns TAXI_EINVAL.
 * Returns 0, TAXI_EINVAL (unknown or destroyed already), TAXI_EBUSY (from a
 * hook run by this pool).
 * Threads: any thread that is not in the pool.
 */
TAXI_EXTERN int taxi_lf_destroy(taxi_lf_pool_t *p);

/* Counters of a pool, for tests and the benchmark. */
typedef struct taxi_lf_stats {
  uint64_t events;     /* handle events, timers, signals, notifications run */
  uint64_t promotions; /* followers promoted */
  uint64_t waits;      /* waits on the handle set (system calls) */
  uint64_t pending_taken;    /* events taken from an earlier wait, no syscall */
  uint64_t leader_ns;        /* time threads spent leading (waiting) */
  uint64_t processing_ns;    /* time threads spent processing events */
  uint64_t follower_ns;      /* time threads spent following */
  uint64_t transient_errors; /* failed waits retried after a pause */
  int error;                 /* the failure that stopped the pool, or 0 */
  unsigned threads;          /* threads in the pool now */
  unsigned leaders;          /* of which waiting on the handle set now */
  unsigned followers;        /* of which waiting to be promoted now */
  /* promoted followers that woke for nothing: no event left to take and
   * another thread leading, so they followed again (a wake-up and a
   * context switch wasted; a leader promotes only when work remains) */
  uint64_t idle_wakeups;
  /* the pool's running average of the time a message takes to process,
   * in nanoseconds: at or above taxi_lf_options_t.handoff_ns, a thread
   * promotes a follower before it runs the library's own stream and
   * datagram hooks, as for any hook that may block */
  uint64_t message_ns;
} taxi_lf_stats_t;

/* taxi_lf_stats - copy the counters.  0, or TAXI_EINVAL. */
TAXI_EXTERN int taxi_lf_stats(const taxi_lf_pool_t *p, taxi_lf_stats_t *out);

/* The counters of one thread of the pool. */
typedef struct taxi_lf_thread_stats {
  unsigned id;            /* 0.. in the order threads first joined */
  int spawned;            /* 1 if the pool spawned it, 0 if it joined */
  int active;             /* 1 while it is in the pool */
  uint64_t events;        /* events it processed */
  uint64_t leader_ns;     /* time spent leading (waiting for events) */
  uint64_t processing_ns; /* time spent running handlers */
  uint64_t follower_ns;   /* time spent following (waiting to lead) */
} taxi_lf_thread_stats_t;

/*
 * taxi_lf_thread_stats - copy the counters of up to `cap` threads that
 * have been in the pool, in order of id.  Returns how many there are
 * (which may exceed cap), or TAXI_EINVAL.
 */
TAXI_EXTERN int taxi_lf_thread_stats(const taxi_lf_pool_t *p,
                                     taxi_lf_thread_stats_t *out, size_t cap);

/*
 * taxi_lf_current_thread - the id (as in taxi_lf_thread_stats) of the
 * calling thread in pool p, or -1 if it is not in p.  For hooks that want
 * to know which pool thread runs them.
 */
TAXI_EXTERN int taxi_lf_current_thread(taxi_lf_pool_t *p);

#ifdef __cplusplus
}
#endif

#endif /* TAXI_LF_H */
