/* SPDX-License-Identifier: Apache-2.0 */
/*
 * taxi/hsha.h - the half-sync/half-async thread pool.
 *
 * One thread (the asynchronous half) dispatches the reactor's handle set,
 * but instead of running hooks it puts each ready event in a bounded
 * request queue; N worker threads (the synchronous half) take events from
 * the queue and run the hooks.  A handle stays deactivated from the moment
 * its event is queued until a worker has run its hooks, so no handle is
 * ever processed by two threads at once; nor are a handler's timer and
 * signal hooks run beside its handle's (taxi/handler.h): one that comes
 * due while an event of the handler is queued or running is run by that
 * event's worker, right after it.
 *
 * Flow control: when the queue holds `high_water` events the reactor
 * thread stops taking events until workers bring it below; the kernel then
 * holds further readiness, which back-pressures the peers.
 *
 * Compared with the Leader/Followers pool (taxi/lf.h), every event crosses
 * threads through the queue, which costs a context switch and cache
 * traffic per event; in exchange the queue can be reordered, e.g. by
 * priority.  It exists for applications that need that, and as the
 * baseline the Leader/Followers pool is measured against.
 *
 * Failures.  A wait on the handle set that the OS refuses for want of
 * memory or buffers (TAXI_ENOMEM, TAXI_EAGAIN) is retried by the reactor
 * thread after a pause that grows from 1 ms to 256 ms (the workers go on
 * with what is queued); each such failure is counted and reported to the
 * on_error callback (fatal = 0).  A failure that persists - not transient,
 * or 16 transient ones in a row (about 2 s) - stops the pool as
 * taxi_hsha_stop() would, is reported (fatal = 1), and is returned by
 * taxi_hsha_wait() and taxi_hsha_stop().
 *
 * Threads.  Every function may be called from any thread and from inside a
 * hook run by the pool, unless its comment says otherwise.  The threads
 * the pool starts have the asynchronous signals blocked (see
 * taxi_reactor_add_signal()).
 */
#ifndef TAXI_HSHA_H
#define TAXI_HSHA_H

#include "platform.h"
#include "reactor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct taxi_hsha_pool
    taxi_hsha_pool_t; /* a half-sync/half-async pool */

/* What the reactor thread does with a request (a handle event) that
 * finds the queue at high water. */
typedef enum taxi_hsha_full {
  /* Stop taking events until the workers have made room: readiness stays
   * in the kernel and the peers are held back by their socket buffers
   * (flow control).  The default. */
  TAXI_HSHA_FULL_WAIT = 0,
  /* Hand the event to the `busy` hook instead of queueing it: the
   * application answers "busy" (HTTP 503, say) at once, in the reactor
   * thread, and the connection stays usable - its handle is re-armed
   * after the hook as after any hook.  Timers, signals and notifications
   * are still queued (up to queue_capacity; beyond it the reactor thread
   * waits).  Counted in taxi_hsha_stats_t.rejected. */
  TAXI_HSHA_FULL_REJECT = 1
} taxi_hsha_full_t;

/* The busy path of TAXI_HSHA_FULL_REJECT: called in the reactor thread,
 * without the pool's lock, with the handler, its handle and the reported
 * TAXI_EV_* bits, as an input hook would be.  It must not block (every
 * other connection waits for it): read the request, queue or send a short
 * refusal, return.  A negative return removes the handler, as from a
 * hook. */
typedef int (*taxi_hsha_busy_fn)(taxi_handler_t *h, taxi_handle_t handle,
                                 unsigned events, void *arg);

/* Options for taxi_hsha_create(): start from TAXI_HSHA_OPTIONS_INIT or
 * taxi_hsha_options_init(), then set what differs. */
typedef struct taxi_hsha_options {
  /* sizeof(taxi_hsha_options_t) as the program was compiled, set by the
   * initialisers (see taxi_reactor_options_t.size). */
  size_t size;
  /* Worker threads: the threads that run the hooks (the reactor thread
   * besides them only queues events, and runs `busy` below).  Under the
   * I/O context they are its `threads` (taxi_io_options_t).  0 means 4. */
  unsigned workers;
  /* Room in the request queue; 0 means 1024. */
  unsigned queue_capacity;
  /* Stop taking events (or reject requests) at this many queued; 0 means
   * queue_capacity. */
  unsigned high_water;
  /* What a request that finds the queue at high water gets (see
   * taxi_hsha_full_t); TAXI_HSHA_FULL_REJECT needs `busy`. */
  taxi_hsha_full_t full;
  taxi_hsha_busy_fn busy; /* the busy path of TAXI_HSHA_FULL_REJECT */
  void *busy_arg;         /* passed to busy */
  /* If set, the queue is a priority queue: events with a higher value run
   * first (equal values in arrival order).  Called by the reactor thread
   * with the handler and the reported TAXI_EV_* bits of a handle event;
   * timers, signals and notifications get priority 0. */
  int (*priority)(taxi_handler_t *h, unsigned events, void *arg);
  void *priority_arg; /* passed to priority */
  /* Told of the failures of the reactor thread's waits (see "Failures"),
   * in that thread.  NULL: nobody is told. */
  taxi_error_fn on_error;
  void *on_error_arg; /* passed to on_error */
} taxi_hsha_options_t;

/* taxi_hsha_options_init - the defaults (every field 0 or NULL, size
 * set).  Does nothing for NULL.  Any thread. */
TAXI_EXTERN void taxi_hsha_options_init(taxi_hsha_options_t *o);

/* TAXI_HSHA_OPTIONS_INIT - an initialiser with the defaults. */
TAXI__OPTIONS_DEFAULT(taxi_hsha_options_t, taxi_hsha_options_init)
#define TAXI_HSHA_OPTIONS_INIT \
  TAXI__OPTIONS_INIT(taxi_hsha_options_t, taxi_hsha_options_init)

/* The most worker threads, and the largest queue. */
#define TAXI_HSHA_MAX_WORKERS 1024u
#define TAXI_HSHA_MAX_QUEUE 1048576u /* see TAXI_HSHA_MAX_WORKERS */

/*
 * taxi_hsha_create - create a pool over reactor r and start its reactor
 * thread and workers.  While it exists r's own dispatch calls return
 * TAXI_EBUSY.
 * Returns 0 and sets *out, or TAXI_EINVAL (NULL; opts not set by an
 * initialiser, or naming unknown fields with non-zero values; workers or
 * queue beyond the limits, high_water > queue_capacity, an unknown
 * `full`, TAXI_HSHA_FULL_REJECT without `busy`), TAXI_EBUSY (r
 * already has a pool or is being dispatched), TAXI_ENOMEM, TAXI_EAGAIN (the OS
 * could not start a thread now: none is left running), TAXI_ESYS.
 */
TAXI_EXTERN int taxi_hsha_create(taxi_hsha_pool_t **out, taxi_reactor_t *r,
                                 const taxi_hsha_options_t *opts);

/*
 * taxi_hsha_stop - stop the reactor thread, let workers finish the
 * event each is running, and return when all threads have left.  Events
 * still queued are not run: their handles are reactivated, so they are
 * reported again if the reactor is dispatched later.  From a hook run by
 * the pool it returns once every other thread has left.
 * Returns 0, TAXI_EINVAL (unknown or destroyed), TAXI_ESTOPPED (already),
 * or the persistent failure that stopped the pool by itself (see
 * "Failures"; every thread has left when it returns).
 * Threads: any, including a hook run by the pool; not a signal handler
 * (it locks and waits).  From a signal handler stop the pool's reactor
 * instead (taxi_reactor_stop: lock-free): a pool whose reactor is stopped
 * stops as this call would, without waiting, and taxi_hsha_wait() tells
 * when every thread has left.  (So a pool made over a stopped reactor
 * stops at once: restart it first.)
 */
TAXI_EXTERN int taxi_hsha_stop(taxi_hsha_pool_t *p);

/*
 * taxi_hsha_wait - wait until the pool has stopped, by taxi_hsha_stop()
 * or by a persistent failure, and every thread but the caller has left; at
 * most timeout_ms (-1: no limit).
 * Returns TAXI_ESTOPPED (shut down), the failure that stopped it,
 * TAXI_ETIMEDOUT, TAXI_EINVAL (unknown or destroyed), TAXI_EBUSY (from a
 * thread of the pool).
 */
TAXI_EXTERN int taxi_hsha_wait(taxi_hsha_pool_t *p, int timeout_ms);

/*
 * taxi_hsha_destroy - shut down if needed, join the threads, give the
 * reactor back, free the pool.  Afterwards calls given p return
 * TAXI_EINVAL.  Returns 0, TAXI_EINVAL, TAXI_EBUSY (from a hook of p).
 */
TAXI_EXTERN int taxi_hsha_destroy(taxi_hsha_pool_t *p);

/* Counters of a pool. */
typedef struct taxi_hsha_stats {
  uint64_t events;      /* events run by workers */
  uint64_t enqueued;    /* events put in the queue */
  uint64_t waits;       /* waits on the handle set (system calls) */
  uint64_t full_stalls; /* times the reactor thread stopped at high water */
  uint64_t rejected;    /* requests given to the busy hook (REJECT) */
  uint64_t transient_errors; /* failed waits retried after a pause */
  int error;                 /* the failure that stopped the pool, or 0 */
  unsigned queued;           /* in the queue now */
  unsigned max_queued;       /* most ever in the queue */
  unsigned workers;          /* worker threads running */
} taxi_hsha_stats_t;

/* taxi_hsha_stats - copy the counters.  0, or TAXI_EINVAL. */
TAXI_EXTERN int taxi_hsha_stats(const taxi_hsha_pool_t *p,
                                taxi_hsha_stats_t *out);

#ifdef __cplusplus
}
#endif

#endif /* TAXI_HSHA_H */
