/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/reactor/mqueue.c - message queues as event sources of a reactor (see
 * taxi/mqueue.h).
 *
 * A queue is an intrusive list under its own lock plus a wake-up channel of
 * the port registered with the reactor like any socket.  Pushing signals
 * the channel (it coalesces, so a burst writes once); the channel's input
 * hook drains it, runs up to `batch` items without the lock, and signals
 * the channel again if items remain, so the next turn comes through the
 * reactor - beside the handles, by whichever pool thread takes it - rather
 * than by looping here and starving them.
 *
 * The memory goes when both ends are done with it: the application's
 * taxi_mq_destroy() and the handler's close hook (the reactor is done with
 * the handler; it may run first when the reactor is destroyed first).
 */
#include "config.h"

#include "taxi/mqueue.h"
#include "core/common/alloc.h"
#include "core/common/detail.h"
#include "core/common/options.h"
#include "core/reactor/reactor_closing.h"
#include "ports/port.h"
#include "taxi/error.h"

#include <stdbool.h>
#include <string.h>

struct taxi_mq {
  taxi_handler_t h; /* the wake-up channel's handler */
  taxi_reactor_t *r;
  taxi_mq_options_t opts;
  taxi__wakeup_t wake;
  taxi__mutex_t lock; /* guards everything below */
  taxi_mq_item_t *head, *tail;
  bool destroyed; /* taxi_mq_destroy() was called */
  bool detached;  /* the close hook ran: the reactor is done with it */
  taxi_mq_stats_t stats;
};

void taxi_mq_options_init(taxi_mq_options_t *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->size = sizeof *o;
}

static void free_queue(taxi_mq_t *q) {
  taxi__wakeup_close(&q->wake);
  taxi__mutex_destroy(&q->lock);
  taxi__free(q);
}

static taxi_mq_item_t *pop_locked(taxi_mq_t *q) {
  taxi_mq_item_t *it = q->head;
  if (!it) return NULL;
  q->head = it->internal_.next;
  if (!q->head) q->tail = NULL;
  it->internal_.next = NULL;
  it->internal_.queue = NULL;
  q->stats.queued--;
  return it;
}

/* Take every queued item off the queue; the caller hands them to drop
 * without the lock. */
static taxi_mq_item_t *take_all_locked(taxi_mq_t *q, uint64_t *n) {
  taxi_mq_item_t *first = q->head;
  *n = q->stats.queued;
  for (taxi_mq_item_t *it = first; it; it = it->internal_.next)
    it->internal_.queue = NULL;
  q->head = q->tail = NULL;
  q->stats.queued = 0;
  q->stats.dropped += *n;
  return first;
}

static void drop_all(taxi_mq_t *q, taxi_mq_item_t *it) {
  while (it) {
    taxi_mq_item_t *next = it->internal_.next;
    it->internal_.next = NULL;
    if (q->opts.drop) q->opts.drop(q, it, q->opts.arg);
    it = next;
  }
}

/* The channel is readable: run this turn's items. */
static int mq_input(taxi_handler_t *h, taxi_handle_t handle, unsigned events) {
  (void)handle;
  (void)events;
  taxi_mq_t *q = TAXI_CONTAINER_OF(h, taxi_mq_t, h);
  unsigned batch = q->opts.batch ? q->opts.batch : 1;
  /* Drained before the items are taken: a push from now on signals
   * again, so no item can be left without a turn to come. */
  taxi__wakeup_drain(&q->wake);
  taxi__mutex_lock(&q->lock);
  q->stats.dispatches++;
  for (unsigned i = 0; !q->destroyed; i++) {
    /* Items left after this turn's share: make the channel readable
     * again, so the next turn comes through the reactor.  Should the
     * channel fail, they run now instead: late beats stranded. */
    if (i >= batch && (!q->head || taxi__wakeup_signal(&q->wake) >= 0)) break;
    taxi_mq_item_t *it = pop_locked(q);
    if (!it) break;
    q->stats.run++;
    /* The hook runs unlocked; the queue stays valid meanwhile, since its
     * memory waits for this hook's return (the close hook). */
    taxi__mutex_unlock(&q->lock);
    q->opts.run(q, it, q->opts.arg);
    taxi__mutex_lock(&q->lock);
  }
  taxi__mutex_unlock(&q->lock);
  return 0;
}

static void mq_close(taxi_handler_t *h, taxi_handle_t handle) {
  (void)handle;
  taxi_mq_t *q = TAXI_CONTAINER_OF(h, taxi_mq_t, h);
  uint64_t n;
  taxi__mutex_lock(&q->lock);
  q->detached = true;
  taxi_mq_item_t *left = take_all_locked(q, &n);
  bool free_now = q->destroyed;
  taxi__mutex_unlock(&q->lock);
  drop_all(q, left);
  if (free_now) free_queue(q);
}

static const taxi_handler_ops_t mq_ops = {.input = mq_input, .close = mq_close};

int taxi_mq_create(taxi_mq_t **out, taxi_reactor_t *r,
                   const taxi_mq_options_t *opts) {
  taxi_mq_options_t o;
  taxi_mq_options_init(&o);
  if (!out || !r)
    return taxi__refuse(TAXI_EINVAL, "taxi_mq_create: %s: NULL",
                        !out ? "out" : "r");
  if (!opts)
    return taxi__refuse(TAXI_EINVAL,
                        "taxi_mq_create: options: NULL, and required (their "
                        "run hook)");
  if (taxi__options_copy(&o, sizeof o, opts, sizeof o,
                         "taxi_mq_create: options", "taxi_mq_options_init") < 0)
    return TAXI_EINVAL;
  if (!o.run)
    return taxi__refuse(TAXI_EINVAL,
                        "taxi_mq_create: options.run: NULL, and required");
  if (o.capacity > TAXI_MQ_MAX_CAPACITY)
    return taxi__refuse(TAXI_EINVAL,
                        "taxi_mq_create: options.capacity: at most "
                        "TAXI_MQ_MAX_CAPACITY (%u); got %u",
                        TAXI_MQ_MAX_CAPACITY, o.capacity);
  if (o.batch > TAXI_MQ_MAX_BATCH)
    return taxi__refuse(TAXI_EINVAL,
                        "taxi_mq_create: options.batch: at most "
                        "TAXI_MQ_MAX_BATCH (%u); got %u",
                        TAXI_MQ_MAX_BATCH, o.batch);
  if (o.capacity == 0) o.capacity = TAXI_MQ_DEFAULT_CAPACITY;

  taxi_mq_t *q = taxi__calloc(1, sizeof *q);
  if (!q) return TAXI_ENOMEM;
  q->r = r;
  q->opts = o;
  int rc = taxi__mutex_init(&q->lock);
  if (rc < 0) {
    taxi__free(q);
    return rc;
  }
  rc = taxi__wakeup_open(&q->wake);
  if (rc < 0) {
    taxi__mutex_destroy(&q->lock);
    taxi__free(q);
    return rc;
  }
  taxi_handler_init(&q->h, &mq_ops);
  rc = taxi__reactor_register_own(r, taxi__wakeup_handle(&q->wake), &q->h,
                                  TAXI_EV_READ);
  if (rc < 0) {
    free_queue(q);
    return rc;
  }
  *out = q;
  return 0;
}

int taxi_mq_push(taxi_mq_t *q, taxi_mq_item_t *item) {
  if (!q || !item) return TAXI_EINVAL;
  taxi__mutex_lock(&q->lock);
  int rc = 0;
  if (item->internal_.queue)
    rc = taxi__refuse(TAXI_EBUSY,
                      "taxi_mq_push: item: queued already (pushed, and not "
                      "yet run or dropped)");
  else if (q->destroyed || q->detached)
    rc = TAXI_ESTOPPED;
  else if (q->stats.queued >= q->opts.capacity) {
    q->stats.refused++;
    rc = TAXI_EAGAIN;
  } else {
    /* Signalled first: if the channel fails, nothing was queued. */
    rc = taxi__wakeup_signal(&q->wake);
    if (rc >= 0) {
      rc = 0;
      item->internal_.next = NULL;
      item->internal_.queue = q;
      if (q->tail)
        q->tail->internal_.next = item;
      else
        q->head = item;
      q->tail = item;
      q->stats.pushed++;
      if (++q->stats.queued > q->stats.high_water)
        q->stats.high_water = q->stats.queued;
    }
  }
  taxi__mutex_unlock(&q->lock);
  return rc;
}

int taxi_mq_destroy(taxi_mq_t *q) {
  if (!q) return TAXI_EINVAL;
  uint64_t n;
  taxi__mutex_lock(&q->lock);
  q->destroyed = true;
  taxi_mq_item_t *left = take_all_locked(q, &n);
  bool detached = q->detached;
  taxi__mutex_unlock(&q->lock);
  drop_all(q, left);
  if (detached)
    free_queue(q);
  else
    /* The close hook frees it: now, or once a running hook returns. */
    (void)taxi_reactor_remove(q->r, &q->h);
  return 0;
}

int taxi_mq_stats(const taxi_mq_t *cq, taxi_mq_stats_t *out) {
  /* Reading takes the lock, which does not change what the queue is:
   * const is cast away for it alone. */
  taxi_mq_t *q = (taxi_mq_t *)(uintptr_t)cq;
  if (!q || !out) return TAXI_EINVAL;
  taxi__mutex_lock(&q->lock);
  *out = q->stats;
  taxi__mutex_unlock(&q->lock);
  return 0;
}
