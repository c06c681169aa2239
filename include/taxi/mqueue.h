/* SPDX-License-Identifier: Apache-2.0 */
/*
 * taxi/mqueue.h - message queues as event sources of a reactor.
 *
 * A message queue is a bounded, thread-safe queue of the application's own
 * items that a reactor waits on together with its handles: pushing an item
 * makes the queue's wake-up channel readable (an eventfd on Linux, a pipe
 * elsewhere on POSIX, a loopback socket pair on Windows), and the thread
 * that dispatches the reactor - the reactor's own, a Leader/Followers
 * leader, a half-sync/half-async worker - runs the queue's `run` hook for
 * the items, as it runs a socket's input hook.  So one pool dispatches
 * socket events and queued work alike, and one thread waits on both (the
 * "alternative event sources" of the Leader/Followers pattern).
 *
 * Items are the application's structures with a taxi_mq_item_t embedded
 * (recover the structure with TAXI_CONTAINER_OF): queueing allocates
 * nothing, ever.  A queue behaves like one connection: its items run in the
 * order pushed, one at a time (a dispatch of the queue runs up to `batch`
 * of them, then the queue waits its turn again beside the handles).  Work
 * that should run in parallel goes to several queues, or to
 * taxi_reactor_notify(), whose notifications may overlap under a pool.
 *
 *     struct job { taxi_mq_item_t item; int n; };
 *     static void run(taxi_mq_t *q, taxi_mq_item_t *it, void *arg) {
 *       struct job *j = TAXI_CONTAINER_OF(it, struct job, item);
 *       ...
 *     }
 *     taxi_mq_options_t o = TAXI_MQ_OPTIONS_INIT;
 *     o.run = run;
 *     taxi_mq_create(&q, reactor, &o);
 *     taxi_mq_push(q, &job->item);    // any thread
 */
#ifndef TAXI_MQUEUE_H
#define TAXI_MQUEUE_H

#include "platform.h"
#include "reactor.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct taxi_mq taxi_mq_t; /* a message queue */

/* The part of an item that is taxi's while the item is queued.  Zero it
 * (TAXI_MQ_ITEM_INIT or memset) before its first push; taxi leaves it so
 * again when the item is handed back to run or drop. */
typedef struct taxi_mq_item {
  /* Private to taxi. */
  struct {
    struct taxi_mq_item *next;
    taxi_mq_t *queue; /* the queue holding it, or NULL */
  } internal_;
} taxi_mq_item_t;

/* An initialiser for a taxi_mq_item_t (or zero the memory). */
#define TAXI_MQ_ITEM_INIT \
  {                       \
    { NULL, NULL }        \
  }

/* What the queue calls with an item it hands back: `run` for an item's
 * turn, `drop` for an item the queue ends with (see taxi_mq_destroy).
 * The item is the application's again when called. */
typedef void (*taxi_mq_fn)(taxi_mq_t *q, taxi_mq_item_t *item, void *arg);

/* Options for taxi_mq_create(): start from TAXI_MQ_OPTIONS_INIT or
 * taxi_mq_options_init(), then set what differs. */
typedef struct taxi_mq_options {
  /* sizeof(taxi_mq_options_t) as the program was compiled, set by the
   * initialisers (see taxi_reactor_options_t.size). */
  size_t size;
  /* The most items queued at once; beyond it taxi_mq_push() refuses with
   * TAXI_EAGAIN, so a producer faster than the dispatcher is held back
   * instead of exhausting memory.  0 means TAXI_MQ_DEFAULT_CAPACITY. */
  unsigned capacity;
  /* The most items one dispatch of the queue runs before the queue waits
   * its turn beside the handles again; 0 means 1 (the fairest), at most
   * TAXI_MQ_MAX_BATCH. */
  unsigned batch;
  /* Runs each item, in the dispatching thread, without any taxi lock held:
   * it may push (to this queue too), call any taxi function, and destroy
   * the queue.  Required. */
  taxi_mq_fn run;
  /* Given each item the queue still holds when it ends, so the
   * application can free it.  NULL: those items are simply forgotten. */
  taxi_mq_fn drop;
  void *arg; /* passed to run and drop */
} taxi_mq_options_t;

/* The default bound on queued items, and the largest accepted. */
#define TAXI_MQ_DEFAULT_CAPACITY 1024u
#define TAXI_MQ_MAX_CAPACITY (1u << 24) /* see the default above */
/* The most items one turn may run (taxi_mq_options_t.batch). */
#define TAXI_MQ_MAX_BATCH 1024u

/* taxi_mq_options_init - the defaults (every field 0 or NULL, size set).
 * Does nothing for NULL.  Any thread. */
TAXI_EXTERN void taxi_mq_options_init(taxi_mq_options_t *o);

/* TAXI_MQ_OPTIONS_INIT - an initialiser with the defaults, as
 * taxi_mq_options_init() sets them. */
TAXI__OPTIONS_DEFAULT(taxi_mq_options_t, taxi_mq_options_init)
#define TAXI_MQ_OPTIONS_INIT \
  TAXI__OPTIONS_INIT(taxi_mq_options_t, taxi_mq_options_init)

/*
 * taxi_mq_create - create a queue whose items reactor r dispatches (alone,
 * or under the Leader/Followers or half-sync/half-async pool that runs it).
 * The queue takes a wake-up channel and registers it with r.
 *
 * Returns 0 and sets *out, or TAXI_EINVAL (out, r or opts NULL, no run
 * hook, capacity above TAXI_MQ_MAX_CAPACITY, batch above
 * TAXI_MQ_MAX_BATCH, a bad options size), TAXI_ENOMEM, TAXI_ESYS (no
 * wake-up channel), or what taxi_reactor_register() returns for it
 * (TAXI_ETOOMANY on a full select set, say).  *out is unchanged on error.
 * Threads: any.
 */
TAXI_EXTERN int taxi_mq_create(taxi_mq_t **out, taxi_reactor_t *r,
                               const taxi_mq_options_t *opts);

/*
 * taxi_mq_push - queue `item` behind the others; the reactor runs it soon.
 * The queue holds the item (the caller keeps its memory valid) until it is
 * given to run or drop.
 *
 * Returns 0, or TAXI_EINVAL (NULL), TAXI_EBUSY (the item is queued
 * already, here or on another queue), TAXI_EAGAIN (the queue holds
 * `capacity` items: nothing was queued), TAXI_ESTOPPED (the queue is being
 * destroyed, or its reactor was), or the wake-up channel's failure
 * (TAXI_ESYS: nothing was queued).
 * Threads: any, including the queue's own run hook; not a signal handler.
 */
TAXI_EXTERN int taxi_mq_push(taxi_mq_t *q, taxi_mq_item_t *item);

/*
 * taxi_mq_destroy - end the queue: pushes are refused from now on, each
 * item still queued goes to the drop hook in this thread, and the queue
 * leaves its reactor.  An item whose run hook is running in another thread
 * finishes; the queue's memory is freed once nothing of it runs any more
 * (possibly after this returns, in the thread whose hook returns last).
 * A queue whose reactor was destroyed first (its items went to drop then)
 * must still be destroyed, to free it.  Do not call it while the reactor
 * is being destroyed in another thread, nor twice.
 *
 * Returns 0, or TAXI_EINVAL (NULL).
 * Threads: any, including the queue's own run hook.
 */
TAXI_EXTERN int taxi_mq_destroy(taxi_mq_t *q);

/* What a queue has done since it was created. */
typedef struct taxi_mq_stats {
  uint64_t pushed;     /* items accepted by taxi_mq_push() */
  uint64_t refused;    /* pushes refused because the queue was full */
  uint64_t run;        /* items given to the run hook */
  uint64_t dropped;    /* items given to the drop hook */
  uint64_t dispatches; /* turns of the queue in the reactor */
  unsigned queued;     /* items queued now */
  unsigned high_water; /* the most queued at once */
} taxi_mq_stats_t;

/*
 * taxi_mq_stats - copy the queue's counters into *out.
 * Returns 0, or TAXI_EINVAL (NULL).  Threads: any.
 */
TAXI_EXTERN int taxi_mq_stats(const taxi_mq_t *q, taxi_mq_stats_t *out);

#ifdef __cplusplus
}
#endif

#endif /* TAXI_MQUEUE_H */
