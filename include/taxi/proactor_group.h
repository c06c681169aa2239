/* SPDX-License-Identifier: Apache-2.0 */
/*
 * taxi/proactor_group.h - one proactor per dispatching thread: the
 * Leader/Followers paper's bound handle/thread association applied to
 * completions.
 *
 * A group is `count` proactors made with TAXI_PROACTOR_ONE_THREAD, each
 * dispatched by one thread of its own (on io_uring: one ring per thread,
 * owned by that thread).  Every handle belongs to one proactor of the
 * group, so its completions run in one thread, and the threads share no
 * lock while each dispatches its own handles.  A thread may still start
 * an operation on another thread's handle: it calls the taxi_proactor_*
 * function with that handle's proactor, which wakes the owning thread when
 * the request must go through it.
 *
 *     taxi_proactor_group_t *g;
 *     taxi_proactor_group_options_t o = TAXI_PROACTOR_GROUP_OPTIONS_INIT;
 *     o.count = 4;
 *     taxi_proactor_group_create(&g, &o);
 *     taxi_proactor_t *p0 = taxi_proactor_group_at(g, 0);
 *     ... attach the listener to p0, accept on it; in the accept handler
 *     (the connection comes attached to p0):
 *         taxi_proactor_t *q = taxi_proactor_group_next(g);
 *         if (q != p0) taxi_proactor_move(p0, op->accepted, q);
 *         taxi_proactor_read(q, &c->rop, op->accepted, ...);
 *     taxi_proactor_group_run(g);    // until taxi_proactor_group_stop
 *     taxi_proactor_group_destroy(g);
 *
 * A handle moves between the group's proactors with taxi_proactor_move()
 * (taxi/proactor.h) while no operation on it is in flight.  IOCP cannot
 * move one (a handle stays on its completion port until it is closed):
 * there a connection stays with the proactor that accepted it.
 *
 * Errors: 0 (or a count) on success, a negative TAXI_E* code on failure.
 */
#ifndef TAXI_PROACTOR_GROUP_H
#define TAXI_PROACTOR_GROUP_H

#include "platform.h"
#include "proactor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A group of proactors (opaque). */
typedef struct taxi_proactor_group taxi_proactor_group_t;

/* How taxi_proactor_group_next() picks a proactor for a new handle. */
typedef enum taxi_group_spread {
  TAXI_SPREAD_ROUND_ROBIN = 0, /* each in turn (the default) */
  TAXI_SPREAD_LEAST_LOADED = 1 /* the one with the fewest handles attached
                                  (taxi_proactor_stats().handles); ties go
                                  round robin */
} taxi_group_spread_t;

/* Options for taxi_proactor_group_create(): start from
 * TAXI_PROACTOR_GROUP_OPTIONS_INIT or taxi_proactor_group_options_init(),
 * then set what differs. */
typedef struct taxi_proactor_group_options {
  /* sizeof(taxi_proactor_group_options_t) as the program was compiled, set
   * by the initialisers (see taxi_reactor_options_t.size). */
  size_t size;
  /* Proactors, each dispatched by a thread of the group's own while the
   * caller of taxi_proactor_group_run() waits: the threads that run the
   * completion handlers (the I/O context's `threads` under
   * TAXI_IO_PROACTORS, taxi_io_options_t).  0: 2.  At most 1024. */
  unsigned count;
  /* Options of every proactor (backend, queue depth, error callback...);
   * TAXI_PROACTOR_ONE_THREAD is added to their flags.  NULL: the defaults.
   * Read by taxi_proactor_group_create(), not kept (the callback and its
   * argument are). */
  const taxi_proactor_options_t *proactor;
  taxi_group_spread_t spread; /* default TAXI_SPREAD_ROUND_ROBIN */
} taxi_proactor_group_options_t;

/* taxi_proactor_group_options_init - the defaults (every field 0 or NULL,
 * size set).  Does nothing for NULL.  Any thread. */
TAXI_EXTERN void taxi_proactor_group_options_init(
    taxi_proactor_group_options_t *o);

/* TAXI_PROACTOR_GROUP_OPTIONS_INIT - an initialiser with the defaults. */
TAXI__OPTIONS_DEFAULT(taxi_proactor_group_options_t,
                      taxi_proactor_group_options_init)
#define TAXI_PROACTOR_GROUP_OPTIONS_INIT            \
  TAXI__OPTIONS_INIT(taxi_proactor_group_options_t, \
                     taxi_proactor_group_options_init)

/*
 * taxi_proactor_group_create - make `count` proactors with the options
 * given.  Returns 0 and sets *out, or TAXI_EINVAL (NULL out, size not set
 * by an initialiser, count above 1024, an unknown spread), or what
 * taxi_proactor_create() returned for one of them (nothing is left
 * behind then).  No thread is started before taxi_proactor_group_run().
 * Ownership: the caller's until taxi_proactor_group_destroy().  Any thread.
 */
TAXI_EXTERN int taxi_proactor_group_create(
    taxi_proactor_group_t **out, const taxi_proactor_group_options_t *opts);

/* taxi_proactor_group_count - how many proactors (0 for NULL). */
TAXI_EXTERN unsigned taxi_proactor_group_count(const taxi_proactor_group_t *g);

/* taxi_proactor_group_at - the i-th proactor (0 <= i < count), or NULL.
 * The group's: never destroy it yourself.  Any thread. */
TAXI_EXTERN taxi_proactor_t *taxi_proactor_group_at(
    const taxi_proactor_group_t *g, unsigned i);

/* taxi_proactor_group_next - the proactor a new handle should be attached
 * to, by the group's spread; NULL for NULL.  Any thread; allocates
 * nothing. */
TAXI_EXTERN taxi_proactor_t *taxi_proactor_group_next(taxi_proactor_group_t *g);

/*
 * taxi_proactor_group_run - dispatch every proactor of the group, each in
 * a thread of the group's own, until taxi_proactor_group_stop() (or until
 * each proactor's taxi_proactor_stop()); the caller waits.  The threads
 * are made by the first run (with the asynchronous signals blocked, see
 * taxi_reactor_add_signal()) and kept, parked, between runs: a proactor
 * made with TAXI_PROACTOR_ONE_THREAD stays with the thread that first
 * dispatched it, which also destroys it (taxi_proactor_group_destroy).
 * Returns TAXI_ESTOPPED when stopped (never 0), or the first error a
 * proactor's run ended with (the others are stopped then, and have
 * returned), TAXI_EBUSY (running
 * already), TAXI_EINVAL (NULL), or the error making a thread (nothing runs
 * then; the next run makes the missing threads).  May be called again
 * after it returned (each proactor is restarted).  Not from a completion
 * handler.
 */
TAXI_EXTERN int taxi_proactor_group_run(taxi_proactor_group_t *g);

/* taxi_proactor_group_stop - make taxi_proactor_group_run() return: stops
 * every proactor.  0, or TAXI_EINVAL.  Any thread, a completion handler or
 * a signal handler too (it takes no lock). */
TAXI_EXTERN int taxi_proactor_group_stop(taxi_proactor_group_t *g);

/*
 * taxi_proactor_group_wait - wait until the group has been stopped and no
 * thread is left in taxi_proactor_group_run(), or timeout_ms passed (-1: no
 * limit), as taxi_lf_wait() and taxi_io_wait() do for theirs: what a thread
 * calls to learn when and why the group ends while another thread runs it.
 * Returns at once when a run has ended since the last one began (with what
 * that run returned), or when taxi_proactor_group_stop() was called and no
 * run is in progress; before any run and any stop it waits for one.
 * Returns what taxi_proactor_group_run() returned (TAXI_ESTOPPED after
 * taxi_proactor_group_stop(), else the first error a proactor's run ended
 * with), TAXI_ESTOPPED when stopped before any run, TAXI_ETIMEDOUT,
 * TAXI_EINVAL (NULL),
 * TAXI_EBUSY (from a completion handler of the group: its thread would
 * wait for itself).  Threads: any thread but the group's own (those
 * running its completion handlers); not once taxi_proactor_group_destroy()
 * may have begun.
 */
TAXI_EXTERN int taxi_proactor_group_wait(taxi_proactor_group_t *g,
                                         int timeout_ms);

/* taxi_proactor_group_destroy - destroy every proactor (completing what is
 * still in flight with TAXI_ECANCELED, as taxi_proactor_destroy does, in
 * the proactor's own thread), end the group's threads and free the
 * group.  0, TAXI_EINVAL (NULL), TAXI_EBUSY (running: stop it and let
 * taxi_proactor_group_run return first).  Not from a completion handler. */
TAXI_EXTERN int taxi_proactor_group_destroy(taxi_proactor_group_t *g);

#ifdef __cplusplus
}
#endif

#endif /* TAXI_PROACTOR_GROUP_H */
